//! The scale set around the simulated VMs, from Azure's documented rules, as a pure model in
//! scenario time (`now` passed in, no I/O): each instance's Application Health extension
//! (Rich Health States: a probe every `interval`, the state changed after `number_of_probes`
//! agreeing probes, *Unknown* for a non-2xx answer, a timeout or a body it cannot read,
//! *Initializing* until the first answer or the `grace_period`), automatic instance repairs
//! (an instance Unhealthy or Unknown for the repairs' `grace_period` after its last state
//! change is repaired with `repair_action`, at most a batch of them at once) and a rolling
//! upgrade (batches; paused while an instance is Unhealthy or Unknown; an instance whose
//! `customMetrics` say `SkipUpgrade` is skipped, and tried again after the others).
//!
//! The probing itself (an HTTP GET of each instance's endpoint) is `scale_set_prober.rs`'s;
//! what the model did is in `/simulator/state` (`ScaleSetSnapshot`).

use forewarn_imds::millis;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[scale_set]` of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleSetSpec {
    /// Where each instance's extension probes, by VM name: `"127.0.0.1:9555"` (the
    /// extension's `port` on the instance itself). A VM of the scenario not listed is not
    /// probed.
    pub instances: BTreeMap<String, String>,
    /// The Application Health extension's settings.
    #[serde(default)]
    pub health_extension: HealthExtensionSpec,
    /// `automaticRepairsPolicy`; none when absent.
    #[serde(default)]
    pub automatic_repairs: Option<RepairsSpec>,
    /// A rolling upgrade started during the run; none when absent.
    #[serde(default)]
    pub rolling_upgrade: Option<RollingUpgradeSpec>,
}

/// The extension's settings (`ApplicationHealthLinux`'s `requestPath`, `intervalInSeconds`,
/// `numberOfProbes`, `gracePeriod`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthExtensionSpec {
    /// `requestPath`.
    pub request_path: String,
    /// `intervalInSeconds`, in scenario time (Azure's default 5 s).
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// `numberOfProbes`: agreeing probes needed to change the state (Azure's default 1).
    pub number_of_probes: u32,
    /// `gracePeriod`: how long an instance may stay Initializing (scenario time; Azure's
    /// default is interval × numberOfProbes, up to 2 h).
    #[serde(with = "humantime_serde")]
    pub grace_period: Duration,
    /// How long one probe may take, wall time, before it counts as a timeout.
    #[serde(with = "humantime_serde")]
    pub probe_timeout: Duration,
    /// How an answer is read: Rich Health States (the body says the state), or Binary
    /// (2xx Healthy, anything else Unhealthy), as the extension's binary mode or a load
    /// balancer's probe given as the scale set's health (`--health-probe`) reads it.
    pub health_states: HealthStates,
}

/// How the scale set reads a probe's answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HealthStates {
    /// The body's `ApplicationHealthState`; a non-2xx answer or a bad body is Unknown.
    #[default]
    Rich,
    /// 2xx is Healthy; any other answer, a timeout or no answer is Unhealthy.
    Binary,
}

impl Default for HealthExtensionSpec {
    fn default() -> Self {
        HealthExtensionSpec {
            request_path: "/health/scale-set".into(),
            interval: Duration::from_secs(5),
            number_of_probes: 1,
            grace_period: Duration::from_secs(10 * 60),
            probe_timeout: Duration::from_secs(2),
            health_states: HealthStates::Rich,
        }
    }
}

/// What an automatic repair does (`repairAction`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RepairAction {
    /// Delete the instance and create a new one (Azure's default).
    #[default]
    Replace,
    /// Restart the instance.
    Restart,
    /// Reimage the instance.
    Reimage,
}

/// `automaticRepairsPolicy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairsSpec {
    /// `gracePeriod`: how long after a state change an Unhealthy or Unknown instance waits
    /// before it is repaired (Azure: 10 to 90 minutes), scenario time.
    #[serde(with = "humantime_serde")]
    pub grace_period: Duration,
    /// `repairAction`.
    #[serde(default)]
    pub repair_action: RepairAction,
    /// The largest share of the instances repaired at once, in percent (Azure: 5 %; at
    /// least one instance).
    #[serde(default = "default_repair_batch_percent")]
    pub max_batch_percent: u32,
}

fn default_repair_batch_percent() -> u32 {
    5
}

/// A rolling upgrade (`upgradePolicy.rollingUpgradePolicy`), started at `start_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollingUpgradeSpec {
    /// When the upgrade starts (scenario time).
    #[serde(with = "humantime_serde")]
    pub start_at: Duration,
    /// `maxBatchInstancePercent` (Azure's default 20; at least one instance a batch).
    #[serde(default = "default_upgrade_batch_percent")]
    pub max_batch_instance_percent: u32,
    /// How long one instance's upgrade takes, scenario time.
    #[serde(with = "humantime_serde", default = "default_upgrade_takes")]
    pub upgrade_takes: Duration,
}

fn default_upgrade_batch_percent() -> u32 {
    20
}

fn default_upgrade_takes() -> Duration {
    Duration::from_secs(60)
}

impl ScaleSetSpec {
    /// What is wrong with the spec for a scenario of `vms`, as `(key, problem)`.
    pub(crate) fn problem(&self, vms: &[String]) -> Option<(String, String)> {
        if self.instances.is_empty() {
            return Some((
                "scale_set.instances".into(),
                "name at least one VM and the address its extension probes, e.g. vm-a = \"127.0.0.1:9555\"".into(),
            ));
        }
        if let Some(vm) = self.instances.keys().find(|vm| !vms.contains(vm)) {
            return Some((
                "scale_set.instances".into(),
                format!("\"{vm}\" is not one of the scenario's vms; add it to `vms`"),
            ));
        }
        let extension = &self.health_extension;
        if !extension.request_path.starts_with('/') {
            return Some((
                "scale_set.health_extension.request_path".into(),
                "must start with /, e.g. \"/health/scale-set\"".into(),
            ));
        }
        if extension.interval.is_zero() || extension.number_of_probes == 0 {
            return Some((
                "scale_set.health_extension".into(),
                "interval and number_of_probes must be more than zero (Azure's defaults: 5s, 1)"
                    .into(),
            ));
        }
        if let Some(repairs) = &self.automatic_repairs
            && !(1..=100).contains(&repairs.max_batch_percent)
        {
            return Some((
                "scale_set.automatic_repairs.max_batch_percent".into(),
                "must be 1 to 100 (Azure repairs up to 5 % at once)".into(),
            ));
        }
        if let Some(upgrade) = &self.rolling_upgrade
            && !(1..=100).contains(&upgrade.max_batch_instance_percent)
        {
            return Some((
                "scale_set.rolling_upgrade.max_batch_instance_percent".into(),
                "must be 1 to 100 (Azure's default is 20)".into(),
            ));
        }
        None
    }
}

/// The extension's state of an instance (Rich Health States, as the scale set sees it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExtensionState {
    /// The instance's extension started and has not heard Healthy yet.
    Initializing,
    /// The application says Healthy.
    Healthy,
    /// The application says Unhealthy: repaired, and a rolling upgrade pauses on it.
    Unhealthy,
    /// A non-2xx answer, a timeout, no answer or a body it cannot read: repaired like
    /// Unhealthy, and a rolling upgrade pauses on it.
    Unknown,
}

impl ExtensionState {
    fn is_broken(self) -> bool {
        matches!(self, ExtensionState::Unhealthy | ExtensionState::Unknown)
    }
}

/// What one probe got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// An HTTP answer with this status and body.
    Answered {
        /// The HTTP status.
        status: u16,
        /// The body, as text.
        body: String,
    },
    /// No answer within the probe timeout.
    TimedOut,
    /// The connection was refused or broke (nothing listens: a daemon killed).
    Failed(String),
}

/// What the extension reads of one probe: the state it says, and `SkipUpgrade`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReading {
    /// The state the probe says.
    pub state: ExtensionState,
    /// Whether its `customMetrics` said `SkipUpgrade`.
    pub skip_upgrade: bool,
    /// Why it read Unknown, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_because: Option<String>,
}

/// Reads a probe's outcome as the scale set does in `states`.
pub fn read_probe_as(states: HealthStates, outcome: &ProbeOutcome) -> ProbeReading {
    match (states, outcome) {
        (HealthStates::Rich, _) => read_probe(outcome),
        (HealthStates::Binary, ProbeOutcome::Answered { status, .. })
            if (200..300).contains(status) =>
        {
            ProbeReading {
                state: ExtensionState::Healthy,
                skip_upgrade: false,
                unknown_because: None,
            }
        }
        (HealthStates::Binary, _) => ProbeReading {
            state: ExtensionState::Unhealthy,
            skip_upgrade: false,
            unknown_because: None,
        },
    }
}

/// Reads a probe's outcome as the Rich Health States extension does.
pub fn read_probe(outcome: &ProbeOutcome) -> ProbeReading {
    let unknown = |because: String| ProbeReading {
        state: ExtensionState::Unknown,
        skip_upgrade: false,
        unknown_because: Some(because),
    };
    let (status, body) = match outcome {
        ProbeOutcome::Answered { status, body } => (*status, body),
        ProbeOutcome::TimedOut => return unknown("no answer within the probe timeout".into()),
        ProbeOutcome::Failed(error) => return unknown(format!("no answer: {error}")),
    };
    if !(200..300).contains(&status) {
        return unknown(format!("HTTP {status}"));
    }
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
        return unknown("the body is not JSON".into());
    };
    let state = value
        .get("ApplicationHealthState")
        .or_else(|| value.get("applicationHealthState"))
        .and_then(|state| state.as_str());
    let state = match state.map(str::to_ascii_lowercase).as_deref() {
        Some("healthy") => ExtensionState::Healthy,
        Some("unhealthy") => ExtensionState::Unhealthy,
        Some("initializing") => ExtensionState::Initializing,
        _ => {
            return unknown(
                "no ApplicationHealthState of Healthy, Unhealthy or Initializing".into(),
            );
        }
    };
    // customMetrics is a JSON string holding {"rollingUpgrade": {"SkipUpgrade": …}}.
    let skip_upgrade = value
        .get("customMetrics")
        .and_then(|metrics| metrics.as_str())
        .and_then(|metrics| serde_json::from_str::<serde_json::Value>(metrics).ok())
        .and_then(|metrics| metrics.get("rollingUpgrade")?.get("SkipUpgrade")?.as_bool())
        .unwrap_or(false);
    ProbeReading {
        state,
        skip_upgrade,
        unknown_because: None,
    }
}

/// One instance as the scale set sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceView {
    /// The VM's name.
    pub vm: String,
    /// Its extension's state.
    pub state: ExtensionState,
    /// When the state last changed (scenario ms): the repairs' grace counts from it.
    pub state_since_ms: u64,
    /// The last probe's reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reading: Option<ProbeReading>,
    /// Probes answered (or failed) so far.
    pub probes: u64,
    /// How often this instance's extension started over (a new instance after a Replace).
    pub replaced: u32,
    /// Scenario ms the instance's upgrade finished, once it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgraded_at_ms: Option<u64>,
}

/// One repair the scale set made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairRecord {
    /// The VM repaired.
    pub vm: String,
    /// What was done to it.
    pub action: RepairAction,
    /// When (scenario ms).
    pub at_scenario_ms: u64,
    /// The state it was repaired for.
    pub state: ExtensionState,
    /// Since when it was in that state (scenario ms).
    pub state_since_ms: u64,
}

/// What the rolling upgrade did, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum UpgradeStep {
    /// A batch began upgrading these instances.
    BatchStarted {
        /// When (scenario ms).
        at_scenario_ms: u64,
        /// The batch.
        vms: Vec<String>,
    },
    /// An instance was skipped: its customMetrics said SkipUpgrade.
    Skipped {
        /// When (scenario ms).
        at_scenario_ms: u64,
        /// The instance skipped.
        vm: String,
    },
    /// The upgrade paused: these instances are Unhealthy or Unknown.
    Paused {
        /// When (scenario ms).
        at_scenario_ms: u64,
        /// The instances it paused on.
        vms: Vec<String>,
    },
    /// The upgrade went on after a pause.
    Resumed {
        /// When (scenario ms).
        at_scenario_ms: u64,
    },
    /// An instance's upgrade finished.
    Upgraded {
        /// When (scenario ms).
        at_scenario_ms: u64,
        /// The instance upgraded.
        vm: String,
    },
    /// Every instance is upgraded.
    Completed {
        /// When (scenario ms).
        at_scenario_ms: u64,
    },
}

/// Where the rolling upgrade is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum UpgradeProgress {
    NotStarted,
    /// Instances still to upgrade, in order; the batch under way with when it ends.
    Running {
        queue: Vec<String>,
        batch: Option<(Vec<String>, Duration)>,
        paused: bool,
    },
    Completed,
}

#[derive(Debug, Clone)]
struct Instance {
    state: ExtensionState,
    since: Duration,
    /// When this instance's extension started (Initializing counts from it).
    extension_started: Duration,
    /// A differing reading and how many probes in a row gave it.
    pending: Option<(ExtensionState, u32)>,
    last_reading: Option<ProbeReading>,
    last_probe: Option<Duration>,
    probes: u64,
    replaced: u32,
    /// Repaired and not yet Healthy again: counts against the repair batch.
    in_repair: bool,
    upgraded_at: Option<Duration>,
}

/// The scale set: its instances' extension states, the repairs and the rolling upgrade.
#[derive(Debug, Clone)]
pub(crate) struct ScaleSetModel {
    spec: ScaleSetSpec,
    instances: BTreeMap<String, Instance>,
    repairs: Vec<RepairRecord>,
    upgrade: UpgradeProgress,
    upgrade_steps: Vec<UpgradeStep>,
}

/// `percent` of `count`, rounded up, at least one.
fn batch_of(count: usize, percent: u32) -> usize {
    (count * percent as usize).div_ceil(100).max(1)
}

impl ScaleSetModel {
    pub(crate) fn new(spec: ScaleSetSpec) -> ScaleSetModel {
        let instances = spec
            .instances
            .keys()
            .map(|vm| {
                let instance = Instance {
                    state: ExtensionState::Initializing,
                    since: Duration::ZERO,
                    extension_started: Duration::ZERO,
                    pending: None,
                    last_reading: None,
                    last_probe: None,
                    probes: 0,
                    replaced: 0,
                    in_repair: false,
                    upgraded_at: None,
                };
                (vm.clone(), instance)
            })
            .collect();
        ScaleSetModel {
            spec,
            instances,
            repairs: Vec::new(),
            upgrade: UpgradeProgress::NotStarted,
            upgrade_steps: Vec::new(),
        }
    }

    pub(crate) fn spec(&self) -> &ScaleSetSpec {
        &self.spec
    }

    /// The instances whose next probe is due at `now`, with the address and path to GET.
    pub(crate) fn probes_due(&self, now: Duration) -> Vec<(String, String)> {
        let interval = self.spec.health_extension.interval;
        self.instances
            .iter()
            .filter(|(_, instance)| {
                instance
                    .last_probe
                    .is_none_or(|last| now.saturating_sub(last) >= interval)
            })
            .filter_map(|(vm, _)| Some((vm.clone(), self.spec.instances.get(vm)?.clone())))
            .collect()
    }

    /// A probe of `vm` was sent at `now` (so it is not sent again before the interval).
    pub(crate) fn probe_sent(&mut self, vm: &str, now: Duration) {
        if let Some(instance) = self.instances.get_mut(vm) {
            instance.last_probe = Some(now);
        }
    }

    /// Takes in what a probe of `vm` got, at `now`.
    pub(crate) fn record_probe(&mut self, vm: &str, now: Duration, outcome: &ProbeOutcome) {
        let number_of_probes = self.spec.health_extension.number_of_probes;
        let states = self.spec.health_extension.health_states;
        let Some(instance) = self.instances.get_mut(vm) else {
            return;
        };
        let mut reading = read_probe_as(states, outcome);
        // Initializing is a state of the start only: said later, it is not an answer.
        if reading.state == ExtensionState::Initializing
            && instance.state != ExtensionState::Initializing
        {
            reading.state = ExtensionState::Unknown;
            reading.unknown_because = Some("Initializing after the start".into());
        }
        instance.probes += 1;
        let observed = reading.state;
        instance.last_reading = Some(reading);
        if observed == instance.state {
            instance.pending = None;
            return;
        }
        let count = match instance.pending {
            Some((pending, count)) if pending == observed => count + 1,
            _ => 1,
        };
        if count >= number_of_probes {
            instance.state = observed;
            instance.since = now;
            instance.pending = None;
            if observed == ExtensionState::Healthy {
                instance.in_repair = false;
            }
        } else {
            instance.pending = Some((observed, count));
        }
    }

    /// Moves the scale set to `now`: the grace of Initializing instances, the repairs due,
    /// the rolling upgrade's next step.
    pub(crate) fn advance(&mut self, now: Duration) {
        self.end_initializing_past_grace(now);
        self.repair_due(now);
        self.advance_upgrade(now);
    }

    fn end_initializing_past_grace(&mut self, now: Duration) {
        let grace = self.spec.health_extension.grace_period;
        for instance in self.instances.values_mut() {
            if instance.state == ExtensionState::Initializing
                && now.saturating_sub(instance.extension_started) >= grace
            {
                instance.state = ExtensionState::Unknown;
                instance.since = now;
            }
        }
    }

    fn repair_due(&mut self, now: Duration) {
        let Some(repairs) = &self.spec.automatic_repairs else {
            return;
        };
        let batch = batch_of(self.instances.len(), repairs.max_batch_percent);
        let action = repairs.repair_action;
        let grace = repairs.grace_period;
        let mut in_repair = self.instances.values().filter(|i| i.in_repair).count();
        for (vm, instance) in &mut self.instances {
            if in_repair >= batch {
                break;
            }
            if instance.in_repair
                || !instance.state.is_broken()
                || now.saturating_sub(instance.since) < grace
            {
                continue;
            }
            self.repairs.push(RepairRecord {
                vm: vm.clone(),
                action,
                at_scenario_ms: millis(now),
                state: instance.state,
                state_since_ms: millis(instance.since),
            });
            // A new (or restarted) instance: its extension starts over.
            instance.replaced += 1;
            instance.in_repair = true;
            instance.state = ExtensionState::Initializing;
            instance.since = now;
            instance.extension_started = now;
            instance.pending = None;
            in_repair += 1;
        }
    }

    fn advance_upgrade(&mut self, now: Duration) {
        let Some(spec) = self.spec.rolling_upgrade.clone() else {
            return;
        };
        if self.upgrade == UpgradeProgress::NotStarted {
            if now < spec.start_at {
                return;
            }
            self.upgrade = UpgradeProgress::Running {
                queue: self.instances.keys().cloned().collect(),
                batch: None,
                paused: false,
            };
        }
        let broken: Vec<String> = self
            .instances
            .iter()
            .filter(|(_, instance)| instance.state.is_broken())
            .map(|(vm, _)| vm.clone())
            .collect();
        let batch_size = batch_of(self.instances.len(), spec.max_batch_instance_percent);
        let at_scenario_ms = millis(now);
        let UpgradeProgress::Running {
            queue,
            batch,
            paused,
        } = &mut self.upgrade
        else {
            return;
        };
        if let Some((vms, ends)) = batch.take() {
            if now < ends {
                *batch = Some((vms, ends));
                return;
            }
            for vm in vms {
                if let Some(instance) = self.instances.get_mut(&vm) {
                    instance.upgraded_at = Some(now);
                }
                self.upgrade_steps
                    .push(UpgradeStep::Upgraded { at_scenario_ms, vm });
            }
        }
        if !broken.is_empty() {
            if !*paused {
                *paused = true;
                self.upgrade_steps.push(UpgradeStep::Paused {
                    at_scenario_ms,
                    vms: broken,
                });
            }
            return;
        }
        if *paused {
            *paused = false;
            self.upgrade_steps
                .push(UpgradeStep::Resumed { at_scenario_ms });
        }
        if queue.is_empty() {
            self.upgrade = UpgradeProgress::Completed;
            self.upgrade_steps
                .push(UpgradeStep::Completed { at_scenario_ms });
            return;
        }
        // The next batch: instances that skip go to the back of the queue (tried again
        // after the others, as the next upgrade would); when only skipping ones are left,
        // the upgrade waits for them.
        let mut chosen = Vec::new();
        let mut skipped = Vec::new();
        for vm in std::mem::take(queue) {
            let skips = self
                .instances
                .get(&vm)
                .and_then(|instance| instance.last_reading.as_ref())
                .is_some_and(|reading| reading.skip_upgrade);
            if skips {
                skipped.push(vm);
            } else if chosen.len() < batch_size {
                chosen.push(vm);
            } else {
                queue.push(vm);
            }
        }
        for vm in &skipped {
            let already = self.upgrade_steps.iter().rev().any(
                |step| matches!(step, UpgradeStep::Skipped { vm: skipped, .. } if skipped == vm),
            );
            if !already {
                self.upgrade_steps.push(UpgradeStep::Skipped {
                    at_scenario_ms,
                    vm: vm.clone(),
                });
            }
        }
        queue.extend(skipped);
        if !chosen.is_empty() {
            self.upgrade_steps.push(UpgradeStep::BatchStarted {
                at_scenario_ms,
                vms: chosen.clone(),
            });
            *batch = Some((chosen, now + spec.upgrade_takes));
        }
    }

    /// What `/simulator/state` shows.
    pub(crate) fn snapshot(&self) -> ScaleSetSnapshot {
        ScaleSetSnapshot {
            request_path: self.spec.health_extension.request_path.clone(),
            instances: self
                .instances
                .iter()
                .map(|(vm, instance)| InstanceView {
                    vm: vm.clone(),
                    state: instance.state,
                    state_since_ms: millis(instance.since),
                    last_reading: instance.last_reading.clone(),
                    probes: instance.probes,
                    replaced: instance.replaced,
                    upgraded_at_ms: instance.upgraded_at.map(millis),
                })
                .collect(),
            repairs: self.repairs.clone(),
            upgrade: self.upgrade_steps.clone(),
        }
    }
}

/// The scale set in `/simulator/state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleSetSnapshot {
    /// The path the extension probes.
    pub request_path: String,
    /// Each instance, by name.
    pub instances: Vec<InstanceView>,
    /// Every repair made, oldest first.
    pub repairs: Vec<RepairRecord>,
    /// The rolling upgrade's steps, oldest first.
    pub upgrade: Vec<UpgradeStep>,
}

impl ScaleSetSnapshot {
    /// The repairs of `vm`.
    pub fn repairs_of(&self, vm: &str) -> Vec<&RepairRecord> {
        self.repairs
            .iter()
            .filter(|repair| repair.vm == vm)
            .collect()
    }

    /// The upgrade's pauses.
    pub fn pauses(&self) -> Vec<&UpgradeStep> {
        self.upgrade
            .iter()
            .filter(|step| matches!(step, UpgradeStep::Paused { .. }))
            .collect()
    }

    /// `vm`'s instance.
    pub fn instance(&self, vm: &str) -> Option<&InstanceView> {
        self.instances.iter().find(|instance| instance.vm == vm)
    }
}

#[cfg(test)]
mod tests;
