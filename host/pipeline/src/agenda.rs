//! The agenda: which events a round visits. A round moves the events an input touched since
//! the last one, those whose next instant came (a retry, a plugin's turn, the lead time,
//! the deadline), and those waiting only for a plugin that is free again (a verdict of the
//! etcd barrier arrives as an input, which touches its event) — never every event, so with thousands listed an answer or a document
//! costs what it changes. Pure bookkeeping: the pipeline says what each visit found.

use forewarn_events::ImdsTime;
use std::collections::{BTreeSet, HashMap};

use forewarn_events::{EventId, PluginName};

use crate::state::EventProgress;

/// The order events are visited in: live before ended (a plugin hears of a new event
/// before an old one ends), then the sooner NotBefore first (a Preempt listed beside
/// thousands of Reboots gets a plugin they all wait for), then by id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Urgency {
    /// The event is over and recovering.
    pub ended: bool,
    /// Its NotBefore; the epoch without one (started: telling plugins is due now).
    pub not_before: ImdsTime,
    /// Its EventId.
    pub id: EventId,
}

impl Urgency {
    /// Where `progress` goes in a round.
    pub fn of(progress: &EventProgress) -> Urgency {
        Urgency {
            ended: progress.is_ended(),
            not_before: progress
                .event
                .not_before_time()
                .unwrap_or(ImdsTime::UNIX_EPOCH),
            id: progress.event.id.clone(),
        }
    }
}

/// What a visit found about one event, for the next rounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// Its place in a round.
    pub urgency: Urgency,
    /// The next instant something is due for it without an input.
    pub next_due: Option<ImdsTime>,
    /// Plugins a call of it waits for only because they are busy with another call.
    pub blocked_on: Vec<PluginName>,
}

/// The events the next rounds visit.
#[derive(Debug)]
pub struct Agenda {
    /// Visit every event (at the start, and after the plugins changed or coordination began).
    everything: bool,
    /// Events an input changed since the last round.
    touched: BTreeSet<EventId>,
    /// Each event's next instant, and the events by it.
    timers: BTreeSet<(ImdsTime, EventId)>,
    timer_of: HashMap<EventId, ImdsTime>,
    /// By plugin: the events waiting for it, most urgent first.
    waiting: HashMap<PluginName, BTreeSet<Urgency>>,
    /// By event: where it waits (its urgency and the plugins).
    waits: HashMap<EventId, (Urgency, Vec<PluginName>)>,
    /// Plugins whose call ended since their waiters were last offered them.
    freed: BTreeSet<PluginName>,
}

impl Default for Agenda {
    fn default() -> Agenda {
        Agenda {
            everything: true,
            touched: BTreeSet::new(),
            timers: BTreeSet::new(),
            timer_of: HashMap::new(),
            waiting: HashMap::new(),
            waits: HashMap::new(),
            freed: BTreeSet::new(),
        }
    }
}

impl Agenda {
    /// An input changed `id`: the next round visits it.
    pub fn touch(&mut self, id: &EventId) {
        if !self.touched.contains(id) {
            self.touched.insert(id.clone());
        }
    }

    /// Something every event depends on changed (the plugins, coordination, the journal's durability).
    pub fn touch_everything(&mut self) {
        self.everything = true;
    }

    /// `plugin`'s call ended: the next round offers it to the events waiting for it.
    pub fn plugin_freed(&mut self, plugin: &PluginName) {
        if self.waiting.contains_key(plugin) {
            self.freed.insert(plugin.clone());
        }
    }

    /// The events due in a round at `now`, in no order: touched, and timed at or before
    /// `now`; None: every event (the caller lists them).
    pub fn take_due(&mut self, now: ImdsTime) -> Option<BTreeSet<EventId>> {
        if std::mem::take(&mut self.everything) {
            self.touched.clear();
            return None;
        }
        let mut due = std::mem::take(&mut self.touched);
        while let Some((at, _)) = self.timers.first()
            && *at <= now
        {
            if let Some((_, id)) = self.timers.pop_first() {
                self.timer_of.remove(&id);
                due.insert(id);
            }
        }
        Some(due)
    }

    /// The most urgent event waiting for a freed plugin that `busy` says is free. It waits
    /// until its visit is settled (which says where it waits next: never for a free
    /// plugin). Plugins busy again, or with nobody waiting, are no longer offered.
    pub fn next_waiter(&mut self, busy: impl Fn(&PluginName) -> bool) -> Option<Urgency> {
        self.freed.retain(|plugin| {
            !busy(plugin) && self.waiting.get(plugin).is_some_and(|set| !set.is_empty())
        });
        self.freed
            .iter()
            .filter_map(|plugin| self.waiting.get(plugin)?.first())
            .min()
            .cloned()
    }

    /// Records what a visit found about `id` (None: the event is forgotten).
    pub fn settle(&mut self, id: &EventId, standing: Option<Standing>) {
        self.stop_waiting(id);
        if let Some(at) = self.timer_of.remove(id) {
            self.timers.remove(&(at, id.clone()));
        }
        let Some(standing) = standing else {
            return;
        };
        if let Some(at) = standing.next_due {
            self.timers.insert((at, id.clone()));
            self.timer_of.insert(id.clone(), at);
        }
        if standing.blocked_on.is_empty() {
            return;
        }
        for plugin in &standing.blocked_on {
            self.waiting
                .entry(plugin.clone())
                .or_default()
                .insert(standing.urgency.clone());
        }
        self.waits
            .insert(id.clone(), (standing.urgency, standing.blocked_on));
    }

    /// The first instant after `after` a round is due without an input, for any event
    /// (instants already due are the next round's, once it runs).
    pub fn next_timer_after(&self, after: ImdsTime) -> Option<ImdsTime> {
        self.timers.iter().map(|(at, _)| *at).find(|at| *at > after)
    }

    fn stop_waiting(&mut self, id: &EventId) {
        let Some((urgency, plugins)) = self.waits.remove(id) else {
            return;
        };
        for plugin in plugins {
            if let Some(set) = self.waiting.get_mut(&plugin) {
                set.remove(&urgency);
                if set.is_empty() {
                    self.waiting.remove(&plugin);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(secs: u64) -> ImdsTime {
        ImdsTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn urgency(id: &str, not_before: u64) -> Urgency {
        Urgency {
            ended: false,
            not_before: at(not_before),
            id: id.into(),
        }
    }

    fn standing(id: &str, not_before: u64) -> Standing {
        Standing {
            urgency: urgency(id, not_before),
            next_due: None,
            blocked_on: Vec::new(),
        }
    }

    #[test]
    fn the_first_round_visits_everything_then_only_what_is_due() {
        let mut agenda = Agenda::default();
        assert_eq!(agenda.take_due(at(0)), None);
        agenda.settle(
            &EventId::from("timed"),
            Some(Standing {
                next_due: Some(at(5)),
                ..standing("timed", 100)
            }),
        );
        agenda.settle(&EventId::from("quiet"), Some(standing("quiet", 100)));
        agenda.touch(&EventId::from("touched"));
        let due = agenda.take_due(at(4)).unwrap();
        assert_eq!(due, BTreeSet::from(["touched".into()]));
        assert_eq!(agenda.next_timer_after(at(4)), Some(at(5)));
        let due = agenda.take_due(at(5)).unwrap();
        assert_eq!(due, BTreeSet::from(["timed".into()]));
        assert_eq!(agenda.next_timer_after(at(5)), None);
        agenda.touch_everything();
        assert_eq!(agenda.take_due(at(6)), None);
    }

    #[test]
    fn a_freed_plugin_is_offered_to_its_most_urgent_waiter_first() {
        let mut agenda = Agenda::default();
        for (id, not_before) in [("reboot-1", 900), ("preempt", 30), ("reboot-2", 900)] {
            agenda.settle(
                &EventId::from(id),
                Some(Standing {
                    blocked_on: vec!["stop".into()],
                    ..standing(id, not_before)
                }),
            );
        }
        assert_eq!(agenda.next_waiter(|_| false), None, "nothing freed yet");
        agenda.plugin_freed(&PluginName::from("stop"));
        assert_eq!(agenda.next_waiter(|_| true), None, "busy again");
        agenda.plugin_freed(&PluginName::from("stop"));
        let first = agenda.next_waiter(|_| false).unwrap();
        assert_eq!(first.id, "preempt");
        assert_eq!(
            agenda.next_waiter(|_| false),
            Some(first),
            "until it is visited"
        );
        // Its visit did not take the plugin (say, a retry was pending): the next is offered.
        agenda.settle(&EventId::from("preempt"), Some(standing("preempt", 30)));
        let second = agenda.next_waiter(|_| false).unwrap();
        assert_eq!(second.id, "reboot-1");
        // This visit took the plugin: the rest keep waiting.
        agenda.settle(&EventId::from("reboot-1"), Some(standing("reboot-1", 900)));
        assert_eq!(agenda.next_waiter(|_| true), None);
        agenda.plugin_freed(&PluginName::from("stop"));
        assert_eq!(agenda.next_waiter(|_| false).unwrap().id, "reboot-2");
    }

    #[test]
    fn a_forgotten_event_leaves_no_trace() {
        let mut agenda = Agenda::default();
        agenda.settle(
            &EventId::from("gone"),
            Some(Standing {
                next_due: Some(at(3)),
                blocked_on: vec!["p".into()],
                ..standing("gone", 10)
            }),
        );
        agenda.settle(&EventId::from("gone"), None);
        assert_eq!(agenda.next_timer_after(at(0)), None);
        agenda.plugin_freed(&PluginName::from("p"));
        assert_eq!(agenda.next_waiter(|_| false), None);
        agenda.take_due(at(0));
        assert!(agenda.take_due(at(10)).unwrap().is_empty());
    }
}
