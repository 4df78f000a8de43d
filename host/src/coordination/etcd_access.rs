//! What every etcd task of the coordinator shares, read-only: the client, this VM's name
//! (lower case), the `[coordination]` settings and the keys they make. The barrier's actor,
//! the fleet record's writer and the fleet reader each hold one `Arc` of it; nothing in it
//! changes, so nothing locks it.

use forewarn_etcd::EtcdClient;

use crate::config::CoordinationConfig;
use crate::coordination::records::EventKeys;

/// The etcd client and the names it writes under.
pub(crate) struct EtcdAccess {
    /// The `[coordination]` section.
    pub(crate) config: CoordinationConfig,
    /// This VM's name as the barrier records it (lower case).
    pub(crate) vm: String,
    /// The client, shared by every task (it is cheap to use concurrently).
    pub(crate) client: EtcdClient,
}

impl EtcdAccess {
    /// `PREFIX/members/VM`: the VM is alive (under its daemon's lease).
    pub(crate) fn member_key(&self, vm: &str) -> String {
        format!("{}/members/{vm}", self.config.prefix)
    }

    /// `PREFIX/fleet/VM`: the VM's fleet record.
    pub(crate) fn fleet_key(&self, vm: &str) -> String {
        format!("{}{vm}", self.fleet_prefix())
    }

    /// `PREFIX/fleet/`: every VM's fleet record.
    pub(crate) fn fleet_prefix(&self) -> String {
        format!("{}/fleet/", self.config.prefix)
    }

    /// The keys of one event, this VM's among them.
    pub(crate) fn keys(&self, event_id: &str) -> EventKeys {
        let event_prefix = format!("{}/events/{event_id}/", self.config.prefix);
        EventKeys {
            ready: format!("{event_prefix}ready/{}", self.vm),
            was_ready: format!("{event_prefix}was-ready/{}", self.vm),
            leader: format!("{event_prefix}leader"),
            approval: format!("{event_prefix}approval"),
            event_prefix,
        }
    }
}
