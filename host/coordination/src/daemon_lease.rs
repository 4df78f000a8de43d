//! This daemon's lease in etcd: granted at the first round (and this VM's member key written
//! under it), renewed once a third of `coordination.lease-ttl` has passed, granted again
//! when it expired (etcd was out of reach for longer than the TTL).

use std::time::Instant;

use forewarn_etcd::EtcdError;

use crate::etcd_access::EtcdAccess;

/// This daemon's lease, once granted.
#[derive(Default)]
pub(super) struct DaemonLease {
    granted: Option<Lease>,
}

/// This daemon's lease and when it was last renewed.
struct Lease {
    id: i64,
    renewed_at: Instant,
}

impl DaemonLease {
    /// The lease's id, once granted.
    pub(super) fn id(&self) -> Option<i64> {
        self.granted.as_ref().map(|lease| lease.id)
    }

    /// Grants the lease (and registers this VM as a member) or renews it when due.
    pub(super) async fn ensure(&mut self, access: &EtcdAccess) -> Result<i64, EtcdError> {
        if let Some(held) = self.granted.as_mut() {
            if held.renewed_at.elapsed() < access.config.lease_ttl / 3 {
                return Ok(held.id);
            }
            if access.client.keep_alive(held.id).await?.is_some() {
                held.renewed_at = Instant::now();
                return Ok(held.id);
            }
            tracing::warn!(
                lease = held.id,
                "this VM's etcd lease expired (etcd was out of reach for longer than \
                 `coordination.lease-ttl`); recording ready again under a new lease"
            );
            self.granted = None;
        }
        let id = access.client.grant_lease(access.config.lease_ttl).await?;
        access
            .client
            .put(&access.member_key(&access.vm), &access.vm, id)
            .await?;
        self.granted = Some(Lease {
            id,
            renewed_at: Instant::now(),
        });
        Ok(id)
    }
}
