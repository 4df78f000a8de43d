//! Scenario files the end-to-end tests write beside a plugin (`plugin test --scenario FILE`).

/// A Reboot announced 40 s ahead that starts at NotBefore (approved or not) and is gone 5 s
/// later; at --speed 10 the run takes about five seconds.
pub const SHORT_REBOOT: &str = r#"
name = "short-reboot"
description = "One Reboot, 40 s notice, starts at NotBefore."
end_after = "2s"

[[events]]
type = "Reboot"
source = "Platform"
appear_at = "1s"
notice = "40s"
duration_seconds = -1
description = "test reboot"
runs_for = "5s"
"#;
