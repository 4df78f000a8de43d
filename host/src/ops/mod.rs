//! Operations: the admin endpoint (health, readiness, metrics, status, the status page),
//! Prometheus metrics, the status snapshot, each event's history and systemd notification.

pub(crate) mod admin;
pub mod event_history;
pub(crate) mod metrics;
pub mod status;
pub(crate) mod status_page;
pub(crate) mod systemd;
