//! The in-process simulator and daemon loop the latency benches drive: documents fed by hand
//! (or by forewarn's poller), and the instant of every first call, approval and POST noted.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use forewarn_daemon::daemon::timeline_broadcast::new_timeline;
use forewarn_daemon::daemon::{Daemon, DaemonSettings};
use forewarn_daemon::pipeline::policy::PolicyConfig;
use forewarn_daemon::pipeline::state::{AnswerOutcome, CallPhase};
use forewarn_daemon::pipeline::timeline::TimelineEntry;
use forewarn_daemon::plugins::set::PluginSet;
use forewarn_imds::{ClientConfig, Document, ImdsClient, Poller};
use forewarn_simulator::{Scenario, SimulatorConfig, SimulatorHandle};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::{EventTimes, PATIENCE};

/// Where the daemon loop's documents come from.
pub(crate) enum Feed {
    /// The bench GETs and hands them over itself (`Bench::feed`): no poll interval.
    ByHand,
    /// forewarn's poller, at this interval.
    Poller(Duration),
}

/// A simulator and a daemon loop in this process, documents fed by hand.
pub(crate) struct Bench {
    pub(crate) simulator: SimulatorHandle,
    pub(crate) client: ImdsClient,
    /// None when the poller feeds the loop.
    pub(crate) documents: Option<watch::Sender<Option<Arc<Document>>>>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) daemon: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub(crate) recorder: tokio::task::JoinHandle<()>,
    pub(crate) times: Arc<std::sync::Mutex<HashMap<String, EventTimes>>>,
    pub(crate) approved: watch::Receiver<HashSet<String>>,
    pub(crate) started: Instant,
}

impl Bench {
    pub(crate) async fn start(
        scenario: Scenario,
        plugins: Vec<forewarn_daemon::plugins::set::LoadedPlugin>,
        state_dir: &Path,
        feed: Feed,
    ) -> anyhow::Result<Bench> {
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("could not create {}", state_dir.display()))?;
        let simulator = forewarn_simulator::spawn(SimulatorConfig {
            listen: "127.0.0.1:0".parse()?,
            scenario,
            speed: 1.0,
        })
        .await?;
        let started = Instant::now();
        let client = ImdsClient::new(ClientConfig {
            base_url: simulator.base_url(),
            // The bench feeds documents itself; the 5 per second cap is shown elsewhere.
            max_requests_per_second: 10_000,
            ..ClientConfig::default()
        })
        .map_err(|error| anyhow::anyhow!("cannot build the IMDS client: {}", error.0))?;
        let (_plugins_tx, plugins_rx) = watch::channel(Arc::new(PluginSet::new(plugins)));
        let timeline = new_timeline();
        let times = Arc::new(std::sync::Mutex::new(HashMap::new()));
        let (approved_tx, approved) = watch::channel(HashSet::new());
        let recorder = tokio::spawn(record_timeline(
            timeline.subscribe(),
            times.clone(),
            approved_tx,
        ));
        let settings = DaemonSettings {
            vm_name: "vm-a".into(),
            vm: Default::default(),
            policy: PolicyConfig::default(),
            state_dir: state_dir.to_path_buf(),
        };
        let daemon = Daemon::open(
            settings,
            client.clone(),
            plugins_rx,
            timeline,
            Arc::default(),
        )?;
        let shutdown = CancellationToken::new();
        let (documents, documents_rx) = match feed {
            Feed::ByHand => {
                let (sender, receiver) = watch::channel(None);
                (Some(sender), receiver)
            }
            Feed::Poller(interval) => {
                let (_poller, receiver, _status) =
                    Poller::spawn(client.clone(), interval, shutdown.child_token());
                (None, receiver)
            }
        };
        let stop = shutdown.clone();
        let daemon = tokio::spawn(async move {
            // Keeps the plugin set's sender alive as long as the loop runs.
            let _plugins_tx = _plugins_tx;
            daemon.run(documents_rx, stop).await?;
            Ok(())
        });
        Ok(Bench {
            simulator,
            client,
            documents,
            shutdown,
            daemon,
            recorder,
            times,
            approved,
            started,
        })
    }

    pub(crate) fn event_ids(&self) -> Vec<String> {
        self.simulator
            .scenario()
            .events
            .iter()
            .map(|event| event.id().to_owned())
            .collect()
    }

    pub(crate) async fn sleep_until(&self, scenario_time: Duration) {
        tokio::time::sleep_until((self.started + scenario_time).into()).await;
    }

    /// GETs the document and hands it to the loop; `new_ids` are the events it introduces.
    pub(crate) async fn feed(&self, new_ids: &[String]) -> anyhow::Result<()> {
        let fetch_started = Instant::now();
        let fetched = self.client.fetch_events().await?;
        for id in new_ids {
            if !fetched.document.events.iter().any(|event| &event.id == id) {
                bail!(
                    "event {id} is not in the fetched document yet: {}",
                    fetched.raw
                );
            }
        }
        let handed_over = Instant::now();
        {
            let mut times = self.times.lock().expect("times lock");
            for id in new_ids {
                let entry = times.entry(id.clone()).or_default();
                entry.fetch_started = Some(fetch_started);
                entry.handed_over = Some(handed_over);
            }
        }
        self.documents
            .as_ref()
            .context("the poller feeds this bench")?
            .send(Some(Arc::new(fetched.document)))
            .context("the daemon loop stopped")?;
        Ok(())
    }

    pub(crate) fn handed_over(&self, id: &str) -> anyhow::Result<Instant> {
        let times = self.times.lock().expect("times lock");
        times
            .get(id)
            .and_then(|times| times.handed_over)
            .with_context(|| format!("{id} was never handed over"))
    }

    /// Waits until every id was approved at IMDS; returns when the last was seen.
    pub(crate) async fn wait_until_approved(&mut self, ids: &[String]) -> anyhow::Result<Instant> {
        let wanted: HashSet<String> = ids.iter().cloned().collect();
        let waited = tokio::time::timeout(
            PATIENCE,
            self.approved
                .wait_for(|approved| wanted.is_subset(approved)),
        )
        .await;
        match waited {
            Ok(Ok(_)) => Ok(Instant::now()),
            Ok(Err(_)) => bail!("the timeline recorder stopped"),
            Err(_) => bail!(
                "not every event was approved within {PATIENCE:?}: {:?}",
                self.simulator.snapshot().approvals
            ),
        }
    }

    /// Stops the loop and the simulator; returns the recorded times.
    pub(crate) async fn stop(self) -> HashMap<String, EventTimes> {
        self.shutdown.cancel();
        if let Ok(Err(error)) = self.daemon.await {
            eprintln!("the daemon loop failed: {error:#}");
        }
        self.recorder.abort();
        self.simulator.shutdown().await;
        let times = self.times.lock().expect("times lock");
        times.clone()
    }
}

/// Notes the instant of every first prepare call, plugin approval and approval at IMDS.
pub(crate) async fn record_timeline(
    mut timeline: broadcast::Receiver<TimelineEntry>,
    times: Arc<std::sync::Mutex<HashMap<String, EventTimes>>>,
    approved: watch::Sender<HashSet<String>>,
) {
    loop {
        let entry = match timeline.recv().await {
            Ok(entry) => entry,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                eprintln!("the recorder missed {missed} timeline entries");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let now = Instant::now();
        let wall = SystemTime::now();
        match entry {
            TimelineEntry::PluginCalled {
                event_id,
                phase: CallPhase::Prepare,
                ..
            } => {
                let mut times = times.lock().expect("times lock");
                let event = times.entry(event_id.into()).or_default();
                event.first_call.get_or_insert(now);
            }
            TimelineEntry::PluginAnswered {
                event_id,
                phase: CallPhase::Prepare,
                outcome: AnswerOutcome::Approve,
                ..
            } => {
                let mut times = times.lock().expect("times lock");
                let event = times.entry(event_id.into()).or_default();
                event.last_approval = Some(now);
                event.last_approval_wall = Some(wall);
            }
            TimelineEntry::Approved { event_ids } => {
                {
                    let mut times = times.lock().expect("times lock");
                    for id in &event_ids {
                        times
                            .entry(id.to_string())
                            .or_default()
                            .approved
                            .get_or_insert(now);
                    }
                }
                approved.send_modify(|approved| {
                    approved.extend(event_ids.into_iter().map(String::from))
                });
            }
            _ => {}
        }
    }
}
