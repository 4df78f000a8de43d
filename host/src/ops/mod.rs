//! Operations: the admin endpoint (health, readiness, metrics, status, the status page),
//! Prometheus metrics, the status snapshot, each event's history, systemd notification and
//! the process's malloc arenas.

pub(crate) mod admin;
pub(crate) mod admin_connections;
pub mod event_history;
pub mod malloc_arenas;
pub(crate) mod metrics;
pub mod status;
pub(crate) mod status_page;
pub(crate) mod systemd;
