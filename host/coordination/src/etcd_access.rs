//! What every etcd task of the coordinator shares, read-only: the client, this VM's name
//! (lower case), the `[coordination]` settings and the keys they make. The barrier's actor,
//! the fleet record's writer and the fleet reader each hold one `Arc` of it; nothing in it
//! changes, so nothing locks it.
//!
//! Every key a VM's standing is read from is in the VM's own subtree, `PREFIX/vms/VM/`, so
//! that an etcd role per VM can let it write there and nowhere else of another VM's; the
//! keys of an event every VM may write are under `PREFIX/events/ID/` (docs/coordination.md).

use forewarn_etcd::EtcdClient;
use forewarn_imds::EventId;

use crate::coordination_config::CoordinationConfig;
use crate::records::EventKeys;

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
    /// `PREFIX/vms/`: every VM's subtree.
    pub(crate) fn vms_prefix(&self) -> String {
        format!("{}/vms/", self.config.prefix)
    }

    /// `PREFIX/vms/VM/member`: the VM is alive (under its daemon's lease).
    pub(crate) fn member_key(&self, vm: &str) -> String {
        format!("{}{vm}/member", self.vms_prefix())
    }

    /// `PREFIX/vms/VM/events/ID/NAME`: one of `vm`'s own keys about an event.
    pub(crate) fn subtree_key(&self, vm: &str, event_id: &EventId, name: &str) -> String {
        format!("{}{vm}/events/{event_id}/{name}", self.vms_prefix())
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
    pub(crate) fn keys(&self, event_id: &EventId) -> EventKeys {
        let shared_prefix = format!("{}/events/{event_id}/", self.config.prefix);
        let mine = |name| self.subtree_key(&self.vm, event_id, name);
        EventKeys {
            leader: format!("{shared_prefix}leader"),
            approval: format!("{shared_prefix}approval"),
            ready: mine("ready"),
            was_ready: mine("was-ready"),
            leads: mine("leads"),
            claim: mine("claim"),
            shared_prefix,
        }
    }
}
