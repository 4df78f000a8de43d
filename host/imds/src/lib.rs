//! Azure IMDS Scheduled Events: the typed document, the lenient parser and strict renderer
//! of its JSON, and the HTTP client and polling loop the daemon watches and approves with.
//!
//! ```no_run
//! use std::time::Duration;
//! use forewarn_imds::{ClientConfig, EventId, ImdsClient, Poller};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = ImdsClient::new(ClientConfig::default())?;
//! let vm_name = client.fetch_vm_name().await?;
//! let shutdown = CancellationToken::new();
//! let (task, mut documents, status) =
//!     Poller::spawn(client.clone(), Duration::from_secs(1), shutdown.clone());
//! while documents.changed().await.is_ok() {
//!     // Only the newest document matters: each is a whole snapshot.
//!     let Some(document) = documents.borrow_and_update().clone() else {
//!         continue;
//!     };
//!     let ours: Vec<EventId> = document
//!         .events
//!         .iter()
//!         .filter(|event| event.names_vm(&vm_name))
//!         .map(|event| event.id.clone())
//!         .collect();
//!     client.approve(&ours).await?;
//!     println!("{:?}", status.borrow().last_success);
//! }
//! shutdown.cancel();
//! task.await?;
//! # Ok(())
//! # }
//! ```

mod client;
mod compute;
mod identity_token;
mod imds_clock;
mod poller;
mod rate_limit;
mod wire;

pub use client::{
    ApproveError, BuildError, ClientConfig, FetchError, Fetched, IMDS_BODY_MAX_BYTES,
    IdentityError, ImdsClient,
};
pub use compute::{ComputeInfo, EvictionPolicy, VmPriority, parse_compute};
pub use forewarn_events::{
    Document, EventField, EventId, EventSource, EventStatus, EventType, ImdsTime, ParseError,
    PluginName, ScheduledEvent, UnreadableField, is_vm_name, millis, system_time_form, unix_ms,
};
pub use identity_token::{IdentityToken, MalformedToken, TokenRefusal, parse_identity_token};
pub use imds_clock::{CLOCK_OFFSET_LOGGED, ClockSkew, ImdsClock, MAX_CLOCK_OFFSET, shift};
pub use poller::{Documents, PollStatus, Poller, PollerConfig, PollerParts};
pub use wire::{format_rfc1123, parse_document, parse_start_requests, render_document};
