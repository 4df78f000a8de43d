//! Operations: the admin endpoint (health, readiness, metrics, status), Prometheus
//! metrics, the status snapshot and systemd notification.

pub(crate) mod admin;
pub(crate) mod metrics;
pub mod status;
pub(crate) mod systemd;
