//! Operations: the admin endpoint (health, readiness, metrics, status, the status page),
//! Prometheus metrics (the etcd barrier's and the outcome records' in their own modules),
//! the status snapshot, each event's history, the outcome records (`/status/events`), the
//! process's malloc arenas, and this VM's fleet record as fed to the coordinator. (systemd
//! notification is in [`crate::service_manager`].)

pub mod admin;
pub(crate) mod admin_connections;
pub(crate) mod coordination_metrics;
pub mod event_history;
pub(crate) mod fleet_feed;
pub mod malloc_arenas;
pub(crate) mod metrics;
pub(crate) mod outcome_metrics;
pub mod outcome_status;
pub mod scale_set_health;
pub mod status;
pub(crate) mod status_page;
