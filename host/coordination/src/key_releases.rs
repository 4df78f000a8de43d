//! The keys this VM still has to release in etcd for events it no longer coordinates: those
//! it withdrew (rescheduled: released at the next round, an unsent claim with them) and those
//! it left (started, ended or handled to the end: released [`RELEASED_AFTER_LEAVING`] later,
//! a claim staying). Each keeps what this VM wrote of the event's shared keys ([`Held`]), so
//! that only its own writes are deleted.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use forewarn_etcd::{Compare, EtcdError, Write};
use forewarn_imds::EventId;

use crate::etcd_access::EtcdAccess;
use crate::tracked_event::Held;
use forewarn_pipeline::barrier::{Revision, SharedKey};

/// How long after the pipeline left an event (it started, ended or was forgotten) its ready
/// key and leadership are released. Nothing waits on them any more (the event is no longer
/// read each round); they stay a while so that the other VMs' last reads, and `/status`,
/// still show every VM ready around the start. A Withdraw releases at once.
const RELEASED_AFTER_LEAVING: Duration = Duration::from_secs(15);

/// The keys of events withdrawn or left, waiting to be released.
#[derive(Default)]
pub(super) struct KeyReleases {
    /// Events this VM is no longer ready for (rescheduled): keys to release, with what this
    /// VM wrote of the shared ones.
    withdrawn: Vec<(EventId, Held)>,
    /// Events this VM left (no longer Scheduled, or handled to the end): keys to release,
    /// each at its instant ([`RELEASED_AFTER_LEAVING`]), with what this VM wrote of the
    /// shared ones (a claim stays: its approval may be on its way).
    leaving: BTreeMap<EventId, (Instant, Held)>,
}

impl KeyReleases {
    /// `id` was withdrawn: its keys are released at the next round.
    pub(super) fn withdraw(&mut self, id: EventId, held: Held) {
        self.withdrawn.push((id, held));
    }

    /// `id` was left: its keys are released [`RELEASED_AFTER_LEAVING`] from now.
    pub(super) fn leave(&mut self, id: EventId, held: Held) {
        let release_at = Instant::now() + RELEASED_AFTER_LEAVING;
        self.leaving.insert(id, (release_at, held));
    }

    /// `id` was joined again before its keys were released: they are this VM's again.
    pub(super) fn rejoin(&mut self, id: &EventId) -> Option<Held> {
        self.leaving.remove(id).map(|(_, held)| held)
    }

    /// Whether no event left waits for its keys to be released.
    pub(super) fn nothing_leaving(&self) -> bool {
        self.leaving.is_empty()
    }

    /// Whether `id`'s keys wait to be released after this VM left it.
    #[cfg(test)]
    pub(super) fn is_leaving(&self, id: &str) -> bool {
        self.leaving.contains_key(id)
    }

    /// The events withdrawn whose keys are not released yet.
    #[cfg(test)]
    pub(super) fn withdrawn(&self) -> &[(EventId, Held)] {
        &self.withdrawn
    }

    /// Releases what this VM withdrew, then what it left whose time came.
    pub(super) async fn release_due(&mut self, access: &EtcdAccess) -> Result<(), EtcdError> {
        self.release_withdrawn(access).await?;
        self.release_left(access).await
    }

    /// Releases the ready key and leadership of events this VM left, once their time came
    /// (a claim stays: its approval may be on its way; it ends with the daemon's lease).
    async fn release_left(&mut self, access: &EtcdAccess) -> Result<(), EtcdError> {
        let now = Instant::now();
        let due: Vec<(EventId, Held)> = self
            .leaving
            .iter()
            .filter(|(_, (at, _))| *at <= now)
            .map(|(id, (_, held))| (id.clone(), *held))
            .collect();
        for (id, held) in &due {
            // Not released: tried again next round.
            release(access, id, held, false).await?;
            self.leaving.remove(id);
            tracing::debug!(event_id = %id, "no longer coordinating the event");
        }
        Ok(())
    }

    /// Releases what this VM held for events it is no longer ready for.
    async fn release_withdrawn(&mut self, access: &EtcdAccess) -> Result<(), EtcdError> {
        let withdrawn = std::mem::take(&mut self.withdrawn);
        for (index, (id, held)) in withdrawn.iter().enumerate() {
            if let Err(error) = release(access, id, held, !held.sent).await {
                // Try again next round, with whatever was not released yet.
                self.withdrawn.extend(withdrawn[index..].iter().cloned());
                return Err(error);
            }
            tracing::info!(event_id = %id, "withdrew this VM's ready record: the event was rescheduled");
        }
        Ok(())
    }
}

/// Deletes this VM's ready key and its leadership (the leader key only while it is still
/// this VM's own write), and, with `claim_too`, its unsent claim likewise.
async fn release(
    access: &EtcdAccess,
    id: &EventId,
    held: &Held,
    claim_too: bool,
) -> Result<(), EtcdError> {
    let keys = access.keys(id);
    let client = &access.client;
    client.delete(&keys.ready).await?;
    let mut owned = vec![(SharedKey::Leader, held.campaign, &keys.leads)];
    if claim_too {
        owned.push((SharedKey::Approval, held.claim, &keys.claim));
    }
    for (key, revision, marker) in owned {
        if let Some(Revision(revision)) = revision {
            let mine = [Compare::ModRevisionIs(
                keys.shared(key).to_owned(),
                revision,
            )];
            let delete = [Write::Delete(keys.shared(key).to_owned())];
            client.transaction(&mine, &delete).await?;
        }
        client.delete(marker).await?;
    }
    Ok(())
}
