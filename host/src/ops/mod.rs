//! Operations: the admin endpoint (health, readiness, metrics, status), Prometheus
//! metrics, the status snapshot and systemd notification.

pub mod admin;
pub mod metrics;
pub mod status;
pub mod systemd;
