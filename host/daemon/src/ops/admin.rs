//! The daemon's admin HTTP endpoint (`[admin] listen`, loopback by default): `/healthz`,
//! `/readyz` for load balancers, `/health/scale-set` for the scale set's Application Health
//! extension (`ops/scale_set_health.rs`), `/metrics` for Prometheus, `/status` for
//! `forewarn status` and `/status/fleet` for `forewarn fleet status`.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use forewarn_imds::PollStatus;
use forewarn_runtime::{Prober, Readiness};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::coordination::fleet_reader::FleetReader;
use crate::log_format::escaped_json;
use crate::ops::admin_connections::{
    ADMIN_LOST_SLOT_WAIT, ADMIN_MAX_CONNECTIONS, ADMIN_MAX_CONNECTIONS_PER_PEER, ConnectionTable,
    Refused, Slot,
};
use crate::ops::event_history::EventHistory;
use crate::ops::metrics::Metrics;
use crate::ops::outcome_status::OutcomeShelf;
use crate::ops::scale_set_health::{self, HealthInputs, SCALE_SET_HEALTH_PATH, ScaleSetHealth};
use crate::ops::status::{StatusInputs, StatusSnapshot, build_snapshot};
use crate::ops::status_page;
use crate::pipeline::quarantine::QuarantinedPlugin;
use crate::pipeline::state::DaemonState;
use crate::plugins::set::PluginSet;
use crate::storage_health::StorageHealth;

/// The content type of the Prometheus text exposition `prometheus-client` writes.
const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a client may take to send a request's headers, and how long a kept-alive
/// connection may wait for its next request: a probe sends its request at once.
pub(crate) const ADMIN_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one connection may stay open, keep-alive included.
pub(crate) const ADMIN_CONNECTION_MAX_DURATION: Duration = Duration::from_secs(30);
/// The pause after a failed accept (e.g. EMFILE) before accepting again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// The running daemon's live views, published once the event loop is about to run.
#[derive(Clone)]
pub(crate) struct DaemonViews {
    pub vm_name: String,
    /// The dedicated host IMDS named at start (the outcome records' host after a reboot).
    pub host: crate::pipeline::outcome::host_move::HostReading,
    pub state: watch::Receiver<Arc<DaemonState>>,
    pub poll: watch::Receiver<PollStatus>,
    /// When the poller was started (how long the daemon has waited for IMDS).
    pub polling_since: SystemTime,
    /// The etcd barrier's view, when `[coordination]` is configured.
    pub coordination: Option<watch::Receiver<crate::coordination::CoordinationStatus>>,
    /// The plugins in crash-loop quarantine.
    pub quarantined: watch::Receiver<Vec<QuarantinedPlugin>>,
    /// Every VM's fleet record, when `[coordination]` is configured (`/status/fleet`).
    pub fleet: Option<FleetReader>,
}

/// What the endpoint reads from.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub metrics: Arc<Metrics>,
    pub readiness: Arc<Readiness>,
    pub plugins: watch::Receiver<Arc<PluginSet>>,
    /// `None` while the daemon starts (resolving the VM name, opening the journal).
    pub daemon: watch::Receiver<Option<DaemonViews>>,
    /// While starting: what the daemon waits for and what the operator should do about it.
    pub startup: watch::Receiver<Option<String>>,
    /// Each event's recent timeline, for the status page.
    pub history: Arc<EventHistory>,
    /// How writes to the state directory fare (journal, plugin state).
    pub storage: Arc<StorageHealth>,
    /// The outcome records (`/status/events`).
    pub outcomes: Arc<OutcomeShelf>,
    /// Names besides IP addresses and `localhost` that requests may call the endpoint by
    /// (`[admin] host-names`).
    pub host_names: Arc<[String]>,
    /// `[scale-set]`: what `/health/scale-set` answers and when.
    pub scale_set: Arc<crate::config::ScaleSetConfig>,
    /// The scale-set health as last assessed by the 1 s reporter, for this VM's fleet
    /// record (`ops/fleet_feed.rs`).
    pub scale_set_health: Arc<watch::Sender<Option<ScaleSetHealth>>>,
}

/// The admin address could not be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot listen on the admin address {address}: {source} (another forewarn running? set `[admin] listen` in the config to a free address)"
)]
pub struct AdminBindError {
    /// The address `[admin] listen` (or `--admin`) named.
    pub address: SocketAddr,
    /// Why it could not be bound (in use, not this machine's, not allowed).
    pub source: std::io::Error,
}

/// Binds the admin address (port 0 picks a free port; the log says which).
pub async fn bind(address: SocketAddr) -> Result<TcpListener, AdminBindError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| AdminBindError { address, source })
}

/// The routes, for serving or for tests. What tells anything about the daemon (`/`,
/// `/status`, `/status/history`, `/metrics`) answers only requests naming the endpoint by an
/// IP address, `localhost` or a name in `[admin] host-names` (a web page rebound to it by
/// DNS gets 421); `/healthz`, `/readyz` and `/health/scale-set` answer whatever the Host, so
/// that a load balancer or the Application Health extension probing by a name the daemon was
/// not told of never takes the VM out of rotation or has it repaired.
pub(crate) fn router(state: AdminState) -> Router {
    let informative = Router::new()
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/status/history", get(history))
        .route("/status/events", get(events))
        .route("/status/fleet", get(fleet))
        .route("/", get(status_page::page))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            refuse_other_hosts,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route(SCALE_SET_HEALTH_PATH, get(scale_set_health_answer))
        .merge(informative)
        .with_state(state)
}

/// 421 for a request naming the endpoint by a name it was not given (DNS rebinding).
async fn refuse_other_hosts(
    State(state): State<AdminState>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|value| value.to_str().unwrap_or("(not text)").to_owned());
    if forewarn_platform::host_check::is_served_host(host.as_deref(), &state.host_names) {
        return next.run(request).await;
    }
    let message = forewarn_platform::host_check::refusal(
        &crate::log_format::field_text(host.as_deref().unwrap_or_default()),
        "if that name is yours, add it to `[admin] host-names` in the config",
    );
    (StatusCode::MISDIRECTED_REQUEST, format!("{message}\n")).into_response()
}

/// Serves the endpoint on `listener` until `shutdown`: at most `ADMIN_MAX_CONNECTIONS` at
/// once and `ADMIN_MAX_CONNECTIONS_PER_PEER` from one peer (admin_connections.rs: more are
/// closed on accept, or take the slot of the busiest peer's oldest connection; a peer
/// holding none always does, unless it lost one that way just before), headers
/// within `ADMIN_HEADER_READ_TIMEOUT`, each connection closed after
/// `ADMIN_CONNECTION_MAX_DURATION`.
pub(crate) async fn serve(listener: TcpListener, state: AdminState, shutdown: CancellationToken) {
    let address = listener
        .local_addr()
        .map(|address| address.to_string())
        .unwrap_or_default();
    tracing::info!(
        address = %address,
        paths = "/ (status page) /healthz /readyz /health/scale-set /metrics /status /status/history /status/events /status/fleet",
        max_connections = ADMIN_MAX_CONNECTIONS,
        max_connections_per_peer = ADMIN_MAX_CONNECTIONS_PER_PEER,
        "{}",
        crate::log_messages::ADMIN_LISTENING
    );
    tokio::spawn(report_scale_set_health(state.clone(), shutdown.clone()));
    let router = router(state);
    let connections = Arc::new(ConnectionTable::default());
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "the admin endpoint cannot accept a connection; retrying");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let slot = match connections.admit(peer.ip(), Instant::now()) {
            Ok(slot) => slot,
            Err(Refused::PeerFull) => {
                tracing::debug!(
                    peer = %peer.ip(),
                    max_connections_per_peer = ADMIN_MAX_CONNECTIONS_PER_PEER,
                    "admin connection closed: its peer holds as many as one peer may"
                );
                continue;
            }
            Err(Refused::EndpointFull) => {
                tracing::debug!(
                    max_connections = ADMIN_MAX_CONNECTIONS,
                    "admin connection closed: the endpoint serves this many at once"
                );
                continue;
            }
            Err(Refused::LostOneRecently) => {
                tracing::debug!(
                    peer = %peer.ip(),
                    wait_ms = ADMIN_LOST_SLOT_WAIT.as_millis(),
                    "admin connection closed: every slot is taken, and its peer lost one to another peer just now"
                );
                continue;
            }
        };
        tokio::spawn(serve_connection(stream, peer.ip(), router.clone(), slot));
    }
}

/// The address a request came from, for `/readyz` to know its probers.
#[derive(Debug, Clone, Copy)]
struct RequestPeer(IpAddr);

/// Serves one connection from `peer` under the header-read timeout and the overall time
/// limit, until its slot goes to a peer holding fewer connections.
async fn serve_connection(stream: TcpStream, peer: IpAddr, router: Router, slot: Slot) {
    let service = TowerToHyperService::new(router.layer(Extension(RequestPeer(peer))));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(ADMIN_HEADER_READ_TIMEOUT);
    let evicted = slot.evicted.clone();
    let stream = SlotHeldStream {
        stream,
        slot: Some(slot),
    };
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    let served = tokio::select! {
        () = evicted.cancelled() => return,
        served = tokio::time::timeout(ADMIN_CONNECTION_MAX_DURATION, connection) => served,
    };
    match served {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(%error, "admin connection ended with an error"),
        Err(_elapsed) => tracing::debug!(
            limit_seconds = ADMIN_CONNECTION_MAX_DURATION.as_secs(),
            "admin connection closed: open longer than the limit"
        ),
    }
}

/// A connection's socket holding its slot, which it gives back as soon as the server shuts
/// the socket's write side (the answer is whole), before the peer can read the end: a peer
/// that connects again once it read the end of its last answer — a load balancer's probe —
/// finds its last slot given back, and holds none.
struct SlotHeldStream {
    stream: TcpStream,
    slot: Option<Slot>,
}

impl AsyncRead for SlotHeldStream {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(context, buffer)
    }
}

impl AsyncWrite for SlotHeldStream {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(context, bytes)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(context, buffers)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(context)
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        this.slot = None;
        Pin::new(&mut this.stream).poll_shutdown(context)
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: 200 while the VM is ready, else 503 naming the plugins holding it; each
/// answer recorded per prober, so that lb-drain knows when the load balancers have noticed.
async fn readyz(State(state): State<AdminState>, peer: Option<Extension<RequestPeer>>) -> Response {
    let ready = match peer {
        Some(Extension(RequestPeer(address))) => state
            .readiness
            .answer_probe(Prober::at(address), Instant::now()),
        None => state.readiness.is_ready(),
    };
    if ready {
        return (StatusCode::OK, "ready\n").into_response();
    }
    let holders = state.readiness.holders().join(", ");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("not ready: held by {holders}\n"),
    )
        .into_response()
}

/// `GET /health/scale-set`: the Application Health extension's Rich Health States, always
/// 200 (a non-2xx answer is *Unknown* to the extension, which Azure repairs).
async fn scale_set_health_answer(State(state): State<AdminState>) -> Response {
    let health = scale_set_health_of(&state, SystemTime::now());
    json_answer(serde_json::to_string(&health.probe_body()))
}

/// How often the scale-set health is assessed for the log and the metric.
const SCALE_SET_HEALTH_REPORT_EVERY: Duration = Duration::from_secs(1);

/// Logs each change of the scale-set health (state, reasons, SkipUpgrade) and keeps the
/// metric up to date, every second until `shutdown`.
async fn report_scale_set_health(state: AdminState, shutdown: CancellationToken) {
    let mut reported: Option<ScaleSetHealth> = None;
    loop {
        let health = scale_set_health_of(&state, SystemTime::now());
        state.metrics.set_scale_set_health(&health);
        let changed = reported
            .as_ref()
            .is_none_or(|before| !scale_set_health::same_for_the_log(before, &health));
        if changed {
            let reasons: Vec<String> = health
                .state
                .reasons()
                .iter()
                .map(|reason| format!("{}: {}", reason.code(), reason.describe()))
                .collect();
            let skip_upgrade = health
                .skip_upgrade
                .as_ref()
                .map(|cause| cause.describe())
                .unwrap_or_default();
            if health.state.reasons().is_empty() {
                tracing::info!(
                    state = health.state.rich_state(),
                    skip_upgrade = %skip_upgrade,
                    "{}",
                    crate::log_messages::SCALE_SET_HEALTH_CHANGED
                );
            } else {
                tracing::warn!(
                    state = health.state.rich_state(),
                    reasons = %reasons.join("; "),
                    skip_upgrade = %skip_upgrade,
                    "{}",
                    crate::log_messages::SCALE_SET_HEALTH_CHANGED
                );
            }
            reported = Some(health.clone());
        }
        state.scale_set_health.send_replace(Some(health));
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(SCALE_SET_HEALTH_REPORT_EVERY) => {}
        }
    }
}

/// What the scale-set health rests on, read from the live daemon.
fn health_inputs(state: &AdminState) -> HealthInputs {
    let plugins = state.plugins.borrow().clone();
    let views = current_views(state);
    let (poll, daemon_state, quarantined) = match &views {
        Some(views) => (
            views.poll.borrow().clone(),
            views.state.borrow().clone(),
            views.quarantined.borrow().clone(),
        ),
        None => Default::default(),
    };
    HealthInputs {
        running: views.is_some(),
        // The daemon is handed the plugin set once the directory's first load is done.
        plugin_directory_loaded: true,
        polling_since: views.as_ref().map(|views| views.polling_since),
        last_imds_answer: poll.last_success,
        plugins_loaded: plugins.all().len(),
        plugin_load_errors: plugins.load_errors().len(),
        journal_not_durable_since: state.storage.journal().not_durable_since,
        quarantined: quarantined
            .into_iter()
            .map(|quarantined| quarantined.plugin)
            .collect(),
        preparing: HealthInputs::preparing_events(&daemon_state),
        readiness_held_by: state.readiness.holders(),
    }
}

/// The scale-set health as of `now`.
pub(crate) fn scale_set_health_of(state: &AdminState, now: SystemTime) -> ScaleSetHealth {
    scale_set_health::assess(&health_inputs(state), &state.scale_set, now)
}

async fn metrics(State(state): State<AdminState>) -> Response {
    let events = current_views(&state)
        .map(|views| views.state.borrow().events.len())
        .unwrap_or(0);
    state
        .metrics
        .set_current(events, state.readiness.is_ready());
    state
        .metrics
        .set_readiness_probes(&state.readiness, Instant::now());
    state.metrics.set_storage(&state.storage);
    state
        .metrics
        .set_scale_set_health(&scale_set_health_of(&state, SystemTime::now()));
    (
        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        state.metrics.encode(),
    )
        .into_response()
}

async fn status(State(state): State<AdminState>) -> Response {
    json_answer(escaped_json(&snapshot_of(&state), true))
}

/// Encoded JSON as the answer, or a 500 saying why it could not be encoded.
fn json_answer(encoded: serde_json::Result<String>) -> Response {
    match encoded {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the answer: {error}\n"),
        )
            .into_response(),
    }
}

async fn history(State(state): State<AdminState>) -> Response {
    // Compact: the status page asks for it every second.
    json_answer(escaped_json(&state.history.view(), false))
}

/// `GET /status/events`: the outcome records, one per event (`ops/outcome_status.rs`).
async fn events(State(state): State<AdminState>) -> Response {
    json_answer(escaped_json(&state.outcomes.view(), false))
}

/// Says why `/status/fleet` has nothing to show.
pub(crate) const FLEET_NOT_CONFIGURED: &str = "this daemon has no [coordination] section, so it \
     neither publishes nor reads fleet records: add `[coordination]` with the etcd endpoints \
     (docs/coordination.md) to the config of every VM of the fleet";

/// `GET /status/fleet`: every VM's record (see `coordination::fleet_reader`); 404 with a
/// JSON error without `[coordination]`, 503 while the daemon starts.
async fn fleet(State(state): State<AdminState>) -> Response {
    let Some(views) = current_views(&state) else {
        let error = "the daemon is starting: the fleet is shown once it runs";
        return json_error(StatusCode::SERVICE_UNAVAILABLE, error);
    };
    let Some(reader) = views.fleet else {
        return json_error(StatusCode::NOT_FOUND, FLEET_NOT_CONFIGURED);
    };
    let mut view = reader.view().await;
    view.budget = views
        .coordination
        .as_ref()
        .and_then(|status| status.borrow().budget.clone());
    // Compact: the status page asks for it every second.
    json_answer(escaped_json(&view, false))
}

/// `{"error": MESSAGE}` with `status`.
fn json_error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn current_views(state: &AdminState) -> Option<DaemonViews> {
    state.daemon.borrow().clone()
}

/// The status as of now.
pub(crate) fn snapshot_of(state: &AdminState) -> StatusSnapshot {
    let plugins = state.plugins.borrow().clone();
    let views = current_views(state);
    let (vm_name, daemon_state, poll) = match &views {
        Some(views) => (
            views.vm_name.as_str(),
            views.state.borrow().clone(),
            views.poll.borrow().clone(),
        ),
        None => ("", Arc::new(DaemonState::default()), PollStatus::default()),
    };
    build_snapshot(
        StatusInputs {
            running: views.is_some(),
            polling_since: views.as_ref().map(|views| views.polling_since),
            vm_name,
            state: &daemon_state,
            poll: &poll,
            plugins: &plugins,
            ready: state.readiness.is_ready(),
            held_by: state.readiness.holders(),
            readyz_probers: state.readiness.recent_probers(Instant::now()),
            coordination: coordination_view(views.as_ref()),
            waiting_for: state.startup.borrow().clone(),
            quarantined: views
                .as_ref()
                .map(|views| views.quarantined.borrow().clone())
                .unwrap_or_default(),
            storage: state.storage.view(),
            scale_set_health: scale_set_health_of(state, SystemTime::now()).view(),
        },
        SystemTime::now(),
    )
}

/// The coordination status, for the status snapshot.
fn coordination_view(
    views: Option<&DaemonViews>,
) -> Option<crate::coordination::CoordinationStatus> {
    let receiver = views?.coordination.as_ref()?;
    Some(receiver.borrow().clone())
}
