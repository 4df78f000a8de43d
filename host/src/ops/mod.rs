//! Operations: the admin endpoint (health, readiness, metrics, status), Prometheus
//! metrics, the status snapshot, systemd notification, and log field formatting.

pub mod admin;
pub mod log_fields;
pub mod metrics;
pub mod status;
pub mod systemd;
