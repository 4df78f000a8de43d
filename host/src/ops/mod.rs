//! Operations: the admin endpoint (health, readiness, metrics, status, the status page),
//! Prometheus metrics, the status snapshot, each event's history and the process's malloc
//! arenas. (systemd notification is in [`crate::service_manager`].)

pub(crate) mod admin;
pub(crate) mod admin_connections;
pub(crate) mod coordination_metrics;
pub mod event_history;
pub mod malloc_arenas;
pub(crate) mod metrics;
pub mod status;
pub(crate) mod status_page;
pub mod storage_health;
