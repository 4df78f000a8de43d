//! Starting a simulator on a socket and controlling it: the config, the handle tests and
//! the CLI hold (address, snapshot, wait for the end, shut down), and the timer task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::engine::Engine;
use crate::scenario::Scenario;
use crate::scenario_clock::ScenarioClock;
use crate::server::router;
use crate::snapshot::StateSnapshot;

/// How often the timer catches the state up when nobody asks (wall time).
const TICK: Duration = Duration::from_millis(50);

/// What to simulate, where, and how fast.
#[derive(Debug, Clone)]
pub struct SimulatorConfig {
    /// Where to listen; port 0 picks a free port (see [`SimulatorHandle::local_addr`]).
    pub listen: SocketAddr,
    /// The scenario to play.
    pub scenario: Scenario,
    /// Scenario time runs this many times faster than wall time (finite, > 0).
    pub speed: f64,
}

/// Why a simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// `--speed` was not a finite number greater than 0.
    #[error(
        "--speed must be a number greater than 0 (e.g. 1 for real time, 30 for a demo), not {0}"
    )]
    InvalidSpeed(f64),
    /// The listening socket could not be bound.
    #[error("the simulator could not listen on {addr}: {source}; pick another address or port 0")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
}

/// A running simulator. Dropping it stops the server too; [`SimulatorHandle::shutdown`]
/// also waits until it has stopped.
pub struct SimulatorHandle {
    local_addr: SocketAddr,
    engine: Arc<Engine>,
    tasks: Vec<JoinHandle<()>>,
}

/// Binds the socket and starts serving the scenario; scenario time 0 is now.
pub async fn spawn(config: SimulatorConfig) -> Result<SimulatorHandle, SimError> {
    if !(config.speed.is_finite() && config.speed > 0.0) {
        return Err(SimError::InvalidSpeed(config.speed));
    }
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| SimError::Bind {
            addr: config.listen,
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| SimError::Bind {
        addr: config.listen,
        source,
    })?;
    let engine = Arc::new(Engine::new(
        config.scenario,
        ScenarioClock::start_now(config.speed),
    ));
    let tasks = vec![
        tokio::spawn(serve(listener, Arc::clone(&engine))),
        tokio::spawn(run_timer(Arc::clone(&engine))),
        tokio::spawn(crate::scale_set_prober::run_prober(Arc::clone(&engine))),
    ];
    tracing::info!(
        scenario = %engine.scenario().name,
        speed = config.speed,
        url = %format!("http://{local_addr}"),
        "IMDS simulator listening"
    );
    Ok(SimulatorHandle {
        local_addr,
        engine,
        tasks,
    })
}

async fn serve(listener: TcpListener, engine: Arc<Engine>) {
    let mut stop = engine.subscribe_shutdown();
    let app = router(Arc::clone(&engine));
    let stopped = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    if let Err(problem) = axum::serve(listener, app)
        .with_graceful_shutdown(stopped)
        .await
    {
        tracing::error!(error = %problem, "IMDS simulator stopped serving");
    }
}

async fn run_timer(engine: Arc<Engine>) {
    let mut stop = engine.subscribe_shutdown();
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => engine.tick(),
            _ = stop.wait_for(|stop| *stop) => return,
        }
    }
}

impl SimulatorHandle {
    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://ADDR`: the IMDS base URL of the default (first) VM.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.local_addr)
    }

    /// `http://ADDR/vm/NAME`: the IMDS base URL of one VM.
    pub fn vm_base_url(&self, vm: &str) -> String {
        format!("http://{}/vm/{vm}", self.local_addr)
    }

    /// The scenario being played (the console may start another).
    pub fn scenario(&self) -> Arc<Scenario> {
        self.engine.scenario()
    }

    /// Plays the current scenario again from its start: scenario time 0 is now. For a caller
    /// that took a while between starting the simulator and starting its client (compiling
    /// plugins), so that no event is over before the client looks.
    pub fn restart_scenario(&self) {
        let scenario = Scenario::clone(&self.engine.scenario());
        self.engine.restart_with(scenario);
    }

    /// Plays the current scenario from its start with scenario time held at 0 until the
    /// first GET of scheduledevents (`forewarn simulate --start-on-first-poll`): every
    /// window of the scenario counts from the client's first poll, however long the client
    /// took to start.
    pub fn hold_until_first_poll(&self) {
        self.engine.hold_until_first_poll();
    }

    /// While `allowed`, a stretch of the scenario where nothing but time passes (no event
    /// is Scheduled: every listed one is running, or none is listed) is skipped at the
    /// client's next fetch of the document, once it has fetched the current one twice: that
    /// fetch gets the change ending the stretch the instant it happens. A NotBefore still to
    /// come stays as far from the wall clock as it was; the scenario ends sooner. Never for
    /// a scenario with faults or a scale set. `forewarn plugin test` allows it whenever the
    /// daemon has no plugin call in flight and no event being prepared or recovered.
    pub fn allow_skipping(&self, allowed: bool) {
        self.engine.allow_skipping(allowed);
    }

    /// The same data as `GET /simulator/state`, caught up to now.
    pub fn snapshot(&self) -> StateSnapshot {
        self.engine.snapshot()
    }

    /// Resolves once every event has appeared and disappeared (plus `end_after`).
    pub async fn finished(&self) {
        let mut finished = self.engine.subscribe_finished();
        // The sender lives in the engine, which this handle keeps alive: no error.
        let _ = finished.wait_for(|done| *done).await;
    }

    /// Stops serving and waits until the server and the timer have stopped.
    pub async fn shutdown(mut self) {
        self.engine.begin_shutdown();
        for task in std::mem::take(&mut self.tasks) {
            if let Err(problem) = task.await {
                tracing::warn!(error = %problem, "an IMDS simulator task ended abnormally");
            }
        }
    }
}

impl Drop for SimulatorHandle {
    fn drop(&mut self) {
        self.engine.begin_shutdown();
    }
}
