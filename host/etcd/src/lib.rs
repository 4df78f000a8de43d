//! forewarn-etcd: the etcd v3 client of forewarn's coordinated approval, over etcd's JSON
//! gateway, with rustls for `https://` endpoints.
//!
//! This crate is a small client for [etcd] v3 that speaks the [JSON gateway] etcd serves
//! beside gRPC (`/v3/…`, etcd 3.4 or later): leases and their renewal, puts, prefix reads,
//! deletes, transactions, and authentication by user name and password or by client
//! certificate. It is what [forewarn]'s approval barrier across VMs runs on
//! (`docs/coordination.md`), and it has no dependency on the daemon: everything it needs is
//! in an [`EtcdSettings`].
//!
//! ## Example
//!
//! A program fills in an [`EtcdSettings`] — its `endpoints` (`http://host:port` or
//! `https://host:port`, tried in turn, starting with the last one that answered), optional
//! [`Credentials`], and the [`TlsFiles`] (`ca_file` to trust a private CA instead of the
//! system's, `cert_file` and `key_file` for a client certificate). [`EtcdSettings::check`]
//! says without reading any file whether the settings can work, and
//! [`EtcdSettings::check_files`] also reads the PEM files; a config loader calls them to
//! refuse a bad file early. [`EtcdClient::connect`] runs the same checks, builds the rustls
//! configuration and returns a client; nothing is sent until the first call, so etcd need not
//! be up yet. The program then grants a lease with [`EtcdClient::grant_lease`], renews it
//! with [`EtcdClient::keep_alive`], writes keys attached to it with [`EtcdClient::put`],
//! reads every key under a prefix with [`EtcdClient::list`], and makes conditional writes
//! (an election, a claim) with [`EtcdClient::transaction`], [`Compare`] and [`Write`].
//!
//! ## Errors
//!
//! A [`SettingsError`] names the [`Setting`] at fault and the fix; [`SettingsError::render`]
//! names it as a key of the caller's config section (``key `coordination.ca-file`: …``).
//! An [`EtcdError`] says which endpoint failed and how; [`EtcdError::describe`] names
//! settings the same way. An answer larger than [`ETCD_BODY_MAX_BYTES`] is refused.
//!
//! ## Clusters
//!
//! A request goes to the endpoint that answered last ([`EtcdClient::preferred_endpoint`]);
//! when it cannot be reached, gives no answer within [`REQUEST_TIMEOUT`] or answers HTTP 5xx
//! (a member without a leader, or in the middle of an election), the same request goes to
//! the next endpoint. When every endpoint failed, the client asks each member for its
//! status: members that answer but know no leader make the error
//! [`EtcdError::NoQuorum`] (the cluster lost its quorum), not a plain
//! [`EtcdError::Unreachable`].
//!
//! [etcd]: https://etcd.io/
//! [JSON gateway]: https://etcd.io/docs/v3.5/dev-guide/api_grpc_gateway/
//! [forewarn]: https://example.invalid/forewarn

mod client;
mod settings;
mod tls;

pub use client::{
    AUTH_PATH, Compare, ETCD_BODY_MAX_BYTES, EtcdClient, EtcdError, KeyValue, REQUEST_TIMEOUT,
    Write,
};
pub use settings::{Credentials, EtcdSettings, Setting, SettingsError, TlsFiles};
