//! The fleet disruption budget's rule, as pure functions (docs/coordination.md, "A
//! disruption budget"): how many VMs of a group may be down at once through early
//! approvals, which VMs hold a slot, and whose turn it is to take the next one.
//!
//! A VM takes a slot before it approves an event early and gives it back once the event has
//! ended and its plugins have recovered. The coordinator reads every VM's slot and queue
//! keys from etcd ([`BudgetView`]) and asks [`turn`] whether this VM may take one; only a
//! transaction that finds the group's turn key unchanged since that read takes it, so two
//! VMs reading the same free slot cannot both take it.

use std::collections::BTreeSet;
use std::fmt;

use forewarn_events::{EventId, EventType, ImdsTime, ScheduledEvent};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::barrier::DeadVm;

/// How much of a group may be down at once: a number of VMs, or a percentage of the VMs
/// known in the group (at least one VM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisruptionBudget {
    /// At most this many VMs (at least 1).
    Count(u32),
    /// At most this percentage (1–100) of the VMs known in the group, rounded down, and at
    /// least one.
    Percent(u8),
}

/// Why a `disruption-budget` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// Not a whole number or a percentage.
    #[error("\"{0}\" is neither a number of VMs (2) nor a percentage (\"10%\")")]
    Unreadable(String),
    /// Zero VMs: nothing would ever be approved early.
    #[error("0 lets no VM approve early; remove `disruption-budget` to approve without one")]
    Zero,
    /// A percentage above 100.
    #[error("{0}% is more than the whole group; use at most \"100%\"")]
    OverHundred(u32),
}

impl DisruptionBudget {
    /// Reads "10%", "3" or 3.
    pub fn parse(text: &str) -> Result<DisruptionBudget, BudgetError> {
        let text = text.trim();
        let unreadable = || BudgetError::Unreadable(text.to_owned());
        match text.strip_suffix('%') {
            Some(number) => {
                let percent: u32 = number.trim().parse().map_err(|_| unreadable())?;
                match percent {
                    0 => Err(BudgetError::Zero),
                    1..=100 => Ok(DisruptionBudget::Percent(percent as u8)),
                    _ => Err(BudgetError::OverHundred(percent)),
                }
            }
            None => match text.parse::<u32>().map_err(|_| unreadable())? {
                0 => Err(BudgetError::Zero),
                count => Ok(DisruptionBudget::Count(count)),
            },
        }
    }

    /// The number of slots for a group of `known_vms` VMs.
    pub fn slots(self, known_vms: usize) -> usize {
        match self {
            DisruptionBudget::Count(count) => count as usize,
            DisruptionBudget::Percent(percent) => (known_vms * usize::from(percent) / 100).max(1),
        }
    }
}

impl fmt::Display for DisruptionBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DisruptionBudget::Count(count) => write!(f, "{count}"),
            DisruptionBudget::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

impl Serialize for DisruptionBudget {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for DisruptionBudget {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Count(u64),
            Text(String),
        }
        let text = match Written::deserialize(deserializer)? {
            Written::Count(count) => count.to_string(),
            Written::Text(text) => text,
        };
        DisruptionBudget::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What forewarn does with an event that waits for a slot while etcd cannot be reached.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetUnreachable {
    /// Keep waiting (default): the event starts at NotBefore, as it would without forewarn.
    #[default]
    Wait,
    /// Approve as if there were no budget (the operator's choice; `/status` says so).
    ApproveAlone,
}

/// Whether an event is never held for a slot: a Spot eviction, or one whose notice is too
/// short to wait (NotBefore within `short_notice` of `now`, or none given). It still takes
/// a slot while it runs, so that the budget counts it.
pub fn never_held(
    event: &ScheduledEvent,
    now: ImdsTime,
    short_notice: std::time::Duration,
) -> bool {
    if event.event_type == EventType::Preempt {
        return true;
    }
    match event.not_before_time() {
        Some(not_before) => not_before.duration_since(now) <= short_notice,
        None => true,
    }
}

/// One slot as read from etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldSlot {
    /// The VM holding it (lower case).
    pub vm: String,
    /// The event it was taken for.
    pub event_id: String,
    /// Whether the VM's daemon is alive (its member key is under the lease the slot names).
    pub holder_alive: bool,
    /// Taken without waiting (a Spot eviction or a notice too short).
    pub forced: bool,
}

/// One VM's event waiting for a slot, as read from etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedClaim {
    /// The VM waiting (lower case).
    pub vm: String,
    /// The event it waits for.
    pub event_id: String,
    /// The event's NotBefore (None: none given, last in the queue).
    pub not_before: Option<ImdsTime>,
    /// When its plugins were all ready.
    pub ready_at: ImdsTime,
}

impl QueuedClaim {
    /// The queue's order: earliest NotBefore first, then first ready, then by name.
    fn order(&self) -> (ImdsTime, ImdsTime, &str, &str) {
        (
            self.not_before.unwrap_or(ImdsTime::MAX),
            self.ready_at,
            &self.vm,
            &self.event_id,
        )
    }
}

/// One group's slots and queue, as one read of etcd found them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetView {
    /// The VMs known in the group: those alive, and those holding a slot.
    pub known_vms: BTreeSet<String>,
    /// The slots held.
    pub slots: Vec<HeldSlot>,
    /// The events waiting for one.
    pub queue: Vec<QueuedClaim>,
}

impl BudgetView {
    /// The slots that count as in use under `dead_vm`: all of them when a dead VM holds its
    /// slot (it is most likely down for the very event), only the living holders' otherwise.
    pub fn in_use(&self, dead_vm: DeadVm) -> usize {
        self.slots
            .iter()
            .filter(|slot| slot.holder_alive || dead_vm == DeadVm::Hold)
            .count()
    }

    /// The queue in its order.
    pub fn ordered_queue(&self) -> Vec<&QueuedClaim> {
        let mut queue: Vec<&QueuedClaim> = self.queue.iter().collect();
        queue.sort_by(|a, b| a.order().cmp(&b.order()));
        queue
    }
}

/// What [`turn`] says about one waiting event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// A slot is free and this event is among the first in the queue: take it.
    Take,
    /// Wait: `ahead` events come first, `in_use` of `slots` are held.
    Wait {
        /// Events ahead of this one in the queue.
        ahead: usize,
        /// Slots in use.
        in_use: usize,
        /// The budget's slots for the group as known now.
        slots: usize,
    },
}

/// Whether `vm`'s event `event_id` may take a slot now, under `budget` and `dead_vm`. An
/// event not in the view's queue (its queue key not written yet) counts as last.
pub fn turn(
    view: &BudgetView,
    budget: DisruptionBudget,
    dead_vm: DeadVm,
    vm: &str,
    event_id: &EventId,
) -> Turn {
    let slots = budget.slots(view.known_vms.len().max(1));
    let in_use = view.in_use(dead_vm);
    let queue = view.ordered_queue();
    let ahead = queue
        .iter()
        .position(|claim| claim.vm == vm && claim.event_id == *event_id)
        .unwrap_or(queue.len());
    match in_use + ahead < slots {
        true => Turn::Take,
        false => Turn::Wait {
            ahead,
            in_use,
            slots,
        },
    }
}

#[cfg(test)]
mod tests;
