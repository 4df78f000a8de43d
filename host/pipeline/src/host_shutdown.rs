//! The operating system's own shutdown, when no Scheduled Event announced it (`sudo reboot`,
//! a stop from the portal whose event never came, the guest's update reboot): where the
//! last, bounded preparation stands. The service manager (systemd-logind's delay inhibitor,
//! the Windows service's pre-shutdown notification) holds the shutdown back until forewarn
//! says [`ShutdownRelease`]; nothing is approved at IMDS.
//!
//! ```text
//! Running ──begin──► Preparing (its own Shutdown event) ──prepared / budget spent──► Released
//!    │                                                                                   ▲
//!    └────begin──► RidingOn (an IMDS event already preparing this VM) ──prepared/spent───┘
//! (begin while an IMDS event already prepared this VM: Released at once)
//! cancelled (the shutdown was called off) ──► Running
//! ```

use std::fmt;
use std::time::Duration;

use forewarn_events::{EventId, ImdsTime, PluginName};

/// Where the operating system's shutdown stands. Not journaled: a restart is a new boot (or
/// a daemon restarted by hand), and the Shutdown event itself is in the journal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HostShutdown {
    /// No shutdown under way.
    #[default]
    Running,
    /// The plugins prepare for forewarn's own Shutdown event `event_id`, until `deadline`.
    Preparing {
        /// The Shutdown event forewarn made.
        event_id: EventId,
        /// When the operating system said it was shutting down.
        since: ImdsTime,
        /// The end of the shutdown budget: released then, prepared or not.
        deadline: ImdsTime,
    },
    /// A Scheduled Event that takes this VM down was already being prepared: the shutdown
    /// waits for that preparation instead of running a second one.
    RidingOn {
        /// The Scheduled Event being prepared.
        event_id: EventId,
        /// When the operating system said it was shutting down.
        since: ImdsTime,
        /// The end of the shutdown budget.
        deadline: ImdsTime,
    },
    /// The service manager was told to let the shutdown go on.
    Released {
        /// When the operating system said it was shutting down.
        since: ImdsTime,
        /// When it was released.
        at: ImdsTime,
        /// Why.
        release: ShutdownRelease,
    },
}

/// Why the shutdown was let go on: what the service manager is told, and what the log,
/// metrics and the timeline say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShutdownRelease {
    /// Every subscribed plugin prepared for the Shutdown event.
    Prepared {
        /// The Shutdown event.
        event_id: EventId,
    },
    /// A Scheduled Event had prepared this VM already (or its preparation finished while the
    /// shutdown waited): nothing ran twice.
    AlreadyPrepared {
        /// The Scheduled Event whose preparation stands.
        event_id: EventId,
    },
    /// The budget ran out before every plugin prepared.
    BudgetSpent {
        /// The event that was being prepared (the Shutdown event, or the Scheduled Event
        /// ridden on).
        event_id: EventId,
        /// The plugins that had not prepared.
        unprepared: Vec<PluginName>,
    },
}

impl ShutdownRelease {
    /// A short stable name: the `outcome` label of the metric.
    pub fn as_str(&self) -> &'static str {
        match self {
            ShutdownRelease::Prepared { .. } => "prepared",
            ShutdownRelease::AlreadyPrepared { .. } => "already-prepared",
            ShutdownRelease::BudgetSpent { .. } => "budget-spent",
        }
    }

    /// The event the release is about.
    pub fn event_id(&self) -> &EventId {
        match self {
            ShutdownRelease::Prepared { event_id }
            | ShutdownRelease::AlreadyPrepared { event_id }
            | ShutdownRelease::BudgetSpent { event_id, .. } => event_id,
        }
    }
}

impl fmt::Display for ShutdownRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShutdownRelease::Prepared { event_id } => {
                write!(f, "every plugin prepared for {event_id}")
            }
            ShutdownRelease::AlreadyPrepared { event_id } => write!(
                f,
                "the Scheduled Event {event_id} had prepared this VM: nothing ran twice"
            ),
            ShutdownRelease::BudgetSpent {
                event_id,
                unprepared,
            } => {
                let names: Vec<&str> = unprepared.iter().map(PluginName::as_str).collect();
                write!(
                    f,
                    "the shutdown budget ran out before {} prepared for {event_id}",
                    names.join(", ")
                )
            }
        }
    }
}

/// What [`HostShutdown::begin`] found among the events being handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlreadyUnderWay {
    /// No Scheduled Event takes this VM down: forewarn prepares its own Shutdown event.
    Nothing,
    /// This Scheduled Event is being prepared.
    Preparing(EventId),
    /// This Scheduled Event was prepared (approved, or started).
    Prepared(EventId),
}

impl HostShutdown {
    /// The operating system said it is shutting down at `now`, with `budget` to prepare.
    /// Returns the new state and whether forewarn must make its own Shutdown event (named
    /// `own_event`). A second notice while one is under way changes nothing.
    pub fn begin(
        &self,
        now: ImdsTime,
        budget: Duration,
        under_way: AlreadyUnderWay,
        own_event: EventId,
    ) -> Option<HostShutdown> {
        if *self != HostShutdown::Running {
            return None;
        }
        let deadline = now + budget;
        Some(match under_way {
            AlreadyUnderWay::Nothing => HostShutdown::Preparing {
                event_id: own_event,
                since: now,
                deadline,
            },
            AlreadyUnderWay::Preparing(event_id) => HostShutdown::RidingOn {
                event_id,
                since: now,
                deadline,
            },
            AlreadyUnderWay::Prepared(event_id) => HostShutdown::Released {
                since: now,
                at: now,
                release: ShutdownRelease::AlreadyPrepared { event_id },
            },
        })
    }

    /// The preparation it waits for is done (`prepared`) or not, at `now`: released when it
    /// is, or when the budget ran out (`unprepared`: who had not prepared).
    pub fn settle(
        &self,
        now: ImdsTime,
        prepared: bool,
        unprepared: impl FnOnce() -> Vec<PluginName>,
    ) -> Option<HostShutdown> {
        let (event_id, since, deadline, own) = match self {
            HostShutdown::Preparing {
                event_id,
                since,
                deadline,
            } => (event_id, *since, *deadline, true),
            HostShutdown::RidingOn {
                event_id,
                since,
                deadline,
            } => (event_id, *since, *deadline, false),
            HostShutdown::Running | HostShutdown::Released { .. } => return None,
        };
        let event_id = event_id.clone();
        let release = match (prepared, own) {
            (true, true) => ShutdownRelease::Prepared { event_id },
            (true, false) => ShutdownRelease::AlreadyPrepared { event_id },
            (false, _) if now >= deadline => ShutdownRelease::BudgetSpent {
                event_id,
                unprepared: unprepared(),
            },
            (false, _) => return None,
        };
        Some(HostShutdown::Released {
            since,
            at: now,
            release,
        })
    }

    /// The Scheduled Event ridden on went away unprepared (cancelled): forewarn prepares its
    /// own Shutdown event `own_event` for what is left of the budget.
    pub fn ridden_event_gone(&self, own_event: EventId) -> Option<HostShutdown> {
        let HostShutdown::RidingOn {
            since, deadline, ..
        } = self
        else {
            return None;
        };
        Some(HostShutdown::Preparing {
            event_id: own_event,
            since: *since,
            deadline: *deadline,
        })
    }

    /// The shutdown was called off: back to running. Returns forewarn's own Shutdown event,
    /// if it made one (its plugins undo their preparation).
    pub fn cancel(&self) -> (HostShutdown, Option<EventId>) {
        let own = match self {
            HostShutdown::Preparing { event_id, .. }
            | HostShutdown::Released {
                release:
                    ShutdownRelease::Prepared { event_id }
                    | ShutdownRelease::BudgetSpent { event_id, .. },
                ..
            } => Some(event_id.clone()),
            _ => None,
        };
        (HostShutdown::Running, own)
    }

    /// When a round is due for the budget's end; None once released or when running.
    pub fn deadline(&self) -> Option<ImdsTime> {
        match self {
            HostShutdown::Preparing { deadline, .. } | HostShutdown::RidingOn { deadline, .. } => {
                Some(*deadline)
            }
            HostShutdown::Running | HostShutdown::Released { .. } => None,
        }
    }

    /// The event whose preparation the shutdown waits for, while it waits.
    pub fn awaited_event(&self) -> Option<&EventId> {
        match self {
            HostShutdown::Preparing { event_id, .. } | HostShutdown::RidingOn { event_id, .. } => {
                Some(event_id)
            }
            HostShutdown::Running | HostShutdown::Released { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> ImdsTime {
        ImdsTime::from_unix_ms(ms)
    }

    const BUDGET: Duration = Duration::from_secs(10);

    #[test]
    fn a_shutdown_with_nothing_under_way_prepares_its_own_event_until_the_budget_ends() {
        let own = EventId::from("shutdown-1000");
        let preparing = HostShutdown::Running
            .begin(at(1_000), BUDGET, AlreadyUnderWay::Nothing, own.clone())
            .unwrap();
        assert_eq!(preparing.awaited_event(), Some(&own));
        assert_eq!(preparing.deadline(), Some(at(11_000)));
        assert_eq!(
            preparing.begin(at(2_000), BUDGET, AlreadyUnderWay::Nothing, own.clone()),
            None,
            "a second notice changes nothing"
        );
        assert_eq!(preparing.settle(at(10_999), false, Vec::new), None);
        let spent = preparing
            .settle(at(11_000), false, || vec![PluginName::from("hangs")])
            .unwrap();
        assert_eq!(
            spent,
            HostShutdown::Released {
                since: at(1_000),
                at: at(11_000),
                release: ShutdownRelease::BudgetSpent {
                    event_id: own.clone(),
                    unprepared: vec![PluginName::from("hangs")],
                },
            }
        );
        assert_eq!(spent.deadline(), None);
        let prepared = preparing.settle(at(4_000), true, Vec::new).unwrap();
        assert!(matches!(
            prepared,
            HostShutdown::Released {
                release: ShutdownRelease::Prepared { .. },
                ..
            }
        ));
    }

    #[test]
    fn a_scheduled_event_already_prepared_releases_at_once_and_one_preparing_is_waited_for() {
        let own = EventId::from("shutdown-1000");
        let imds = EventId::from("E1");
        let released = HostShutdown::Running
            .begin(
                at(1_000),
                BUDGET,
                AlreadyUnderWay::Prepared(imds.clone()),
                own.clone(),
            )
            .unwrap();
        assert!(matches!(
            released,
            HostShutdown::Released {
                release: ShutdownRelease::AlreadyPrepared { .. },
                ..
            }
        ));
        let riding = HostShutdown::Running
            .begin(
                at(1_000),
                BUDGET,
                AlreadyUnderWay::Preparing(imds.clone()),
                own.clone(),
            )
            .unwrap();
        assert_eq!(riding.awaited_event(), Some(&imds));
        let done = riding.settle(at(3_000), true, Vec::new).unwrap();
        assert!(matches!(
            done,
            HostShutdown::Released {
                release: ShutdownRelease::AlreadyPrepared { .. },
                ..
            }
        ));
        let own_now = riding.ridden_event_gone(own.clone()).unwrap();
        assert_eq!(own_now.awaited_event(), Some(&own));
        assert_eq!(own_now.deadline(), Some(at(11_000)), "the same budget");
    }

    #[test]
    fn a_cancelled_shutdown_undoes_only_forewarn_s_own_event() {
        let own = EventId::from("shutdown-1000");
        let preparing = HostShutdown::Running
            .begin(at(1_000), BUDGET, AlreadyUnderWay::Nothing, own.clone())
            .unwrap();
        assert_eq!(
            preparing.cancel(),
            (HostShutdown::Running, Some(own.clone()))
        );
        let riding = HostShutdown::Running
            .begin(
                at(1_000),
                BUDGET,
                AlreadyUnderWay::Preparing(EventId::from("E1")),
                own,
            )
            .unwrap();
        assert_eq!(riding.cancel(), (HostShutdown::Running, None));
    }
}
