//! The fleet view's summary of what maintenance cost, by event type: from the last events
//! each VM's record lists ([`FleetRecord::last_outcomes`]), one line per type with how many
//! VM-events there were, the median and the largest measured impact, and how preparation went.
//! Pure: the reader hands in the VMs it read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fleet_reader::FleetVm;
use super::fleet_record::{FleetOutcome, FleetRecord};
use forewarn_pipeline::outcome::verdict::PreparationOutcome;

/// One event type's line of the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImpactByType {
    /// IMDS's EventType as sent.
    pub event_type: String,
    /// VM-events of the type in the records (an event naming three VMs counts three times:
    /// each VM bore it).
    pub vm_events: usize,
    /// Of them, with a figure (a pause, a downtime, or no pause seen).
    pub measured: usize,
    /// The median figure, in milliseconds (the lower of the two middle ones).
    pub median_ms: Option<u64>,
    /// The largest figure, in milliseconds.
    pub max_ms: Option<u64>,
    /// Of them, prepared before NotBefore.
    pub prepared_in_time: usize,
    /// Of them, prepared after NotBefore.
    pub prepared_late: usize,
    /// Of them, started before every plugin had approved.
    pub not_prepared: usize,
}

impl ImpactByType {
    /// The summary of every record in `vms` (gone VMs' last records too), by event type in
    /// name order.
    pub fn of_fleet(vms: &[FleetVm]) -> Vec<ImpactByType> {
        let outcomes = vms
            .iter()
            .filter_map(|vm| vm.record.as_ref())
            .flat_map(|record: &FleetRecord| record.last_outcomes.iter());
        let mut by_type: BTreeMap<&str, Vec<&FleetOutcome>> = BTreeMap::new();
        for outcome in outcomes {
            by_type
                .entry(&outcome.event_type)
                .or_default()
                .push(outcome);
        }
        by_type
            .into_iter()
            .map(|(event_type, outcomes)| ImpactByType::of_type(event_type, &outcomes))
            .collect()
    }

    fn of_type(event_type: &str, outcomes: &[&FleetOutcome]) -> ImpactByType {
        let mut figures: Vec<u64> = outcomes
            .iter()
            .filter_map(|outcome| outcome.impact.milliseconds())
            .collect();
        figures.sort_unstable();
        let count = |wanted: fn(&PreparationOutcome) -> bool| {
            outcomes
                .iter()
                .filter(|outcome| wanted(&outcome.preparation))
                .count()
        };
        ImpactByType {
            event_type: event_type.to_owned(),
            vm_events: outcomes.len(),
            measured: figures.len(),
            median_ms: figures.get(figures.len().saturating_sub(1) / 2).copied(),
            max_ms: figures.last().copied(),
            prepared_in_time: count(|p| matches!(p, PreparationOutcome::InTime { .. })),
            prepared_late: count(|p| matches!(p, PreparationOutcome::Late { .. })),
            not_prepared: count(|p| matches!(p, PreparationOutcome::NotPrepared)),
        }
    }

    /// The line for people: "Freeze: 3 VM-events, impact median 3.5 s, max 5.0 s (3
    /// measured); prepared in time 3, late 0, not prepared 0".
    pub fn describe(&self) -> String {
        let seconds = |milliseconds: Option<u64>| match milliseconds {
            Some(milliseconds) => format!("{:.1} s", milliseconds as f64 / 1000.0),
            None => "-".into(),
        };
        format!(
            "{}: {} VM-event(s), impact median {}, max {} ({} measured); prepared in time {}, \
             late {}, not prepared {}",
            self.event_type,
            self.vm_events,
            seconds(self.median_ms),
            seconds(self.max_ms),
            self.measured,
            self.prepared_in_time,
            self.prepared_late,
            self.not_prepared
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet_reader::FleetVmState;
    use crate::fleet_record::{FLEET_RECORD_SCHEMA, FleetImds, FleetImpact};

    fn outcome(
        event_type: &str,
        impact: FleetImpact,
        preparation: PreparationOutcome,
    ) -> FleetOutcome {
        FleetOutcome {
            id: format!("{event_type}-id"),
            event_type: event_type.into(),
            ended_unix_ms: None,
            preparation,
            impact,
            verdict: String::new(),
        }
    }

    fn vm(name: &str, state: FleetVmState, last_outcomes: Vec<FleetOutcome>) -> FleetVm {
        FleetVm {
            vm: name.into(),
            state,
            gone_since_unix_ms: None,
            record: Some(FleetRecord {
                schema: FLEET_RECORD_SCHEMA,
                vm: name.into(),
                version: "0".into(),
                imds: FleetImds::default(),
                ready: true,
                readiness_holds: Vec::new(),
                readiness_holds_truncated: 0,
                events: Vec::new(),
                events_truncated: 0,
                scale_set_health: None,
                last_outcomes,
                published_at_unix_ms: 0,
            }),
            problem: None,
        }
    }

    const IN_TIME: PreparationOutcome = PreparationOutcome::InTime { before_ms: Some(1) };

    #[test]
    fn each_type_has_its_median_largest_and_preparations_over_every_vm_gone_ones_too() {
        let pause = |milliseconds| FleetImpact::Pause { milliseconds };
        let vms = [
            vm(
                "vm-a",
                FleetVmState::Publishing,
                vec![
                    outcome("Freeze", pause(3_500), IN_TIME),
                    outcome(
                        "Reboot",
                        FleetImpact::Downtime {
                            milliseconds: 61_000,
                        },
                        IN_TIME,
                    ),
                ],
            ),
            vm(
                "vm-b",
                FleetVmState::Gone,
                vec![
                    outcome(
                        "Freeze",
                        pause(5_000),
                        PreparationOutcome::Late { after_ms: 2 },
                    ),
                    outcome("Freeze", FleetImpact::NoPauseSeen, IN_TIME),
                ],
            ),
            vm(
                "vm-c",
                FleetVmState::Publishing,
                vec![outcome(
                    "Freeze",
                    FleetImpact::NotMeasured,
                    PreparationOutcome::NotPrepared,
                )],
            ),
        ];
        let summary = ImpactByType::of_fleet(&vms);
        assert_eq!(
            summary,
            [
                ImpactByType {
                    event_type: "Freeze".into(),
                    vm_events: 4,
                    measured: 3,
                    median_ms: Some(3_500),
                    max_ms: Some(5_000),
                    prepared_in_time: 2,
                    prepared_late: 1,
                    not_prepared: 1,
                },
                ImpactByType {
                    event_type: "Reboot".into(),
                    vm_events: 1,
                    measured: 1,
                    median_ms: Some(61_000),
                    max_ms: Some(61_000),
                    prepared_in_time: 1,
                    prepared_late: 0,
                    not_prepared: 0,
                },
            ]
        );
        assert_eq!(
            summary[0].describe(),
            "Freeze: 4 VM-event(s), impact median 3.5 s, max 5.0 s (3 measured); prepared in \
             time 2, late 1, not prepared 1"
        );
    }

    #[test]
    fn a_fleet_without_finished_events_has_no_lines_and_an_unmeasured_type_says_so() {
        assert_eq!(ImpactByType::of_fleet(&[]), []);
        let vms = [vm(
            "vm-a",
            FleetVmState::Publishing,
            vec![outcome("Preempt", FleetImpact::NotMeasured, IN_TIME)],
        )];
        let summary = ImpactByType::of_fleet(&vms);
        assert_eq!(summary[0].median_ms, None);
        assert!(
            summary[0]
                .describe()
                .contains("impact median -, max - (0 measured)"),
            "{}",
            summary[0].describe()
        );
    }
}
