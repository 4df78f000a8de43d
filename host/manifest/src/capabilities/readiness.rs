//! `readiness = true`: the plugin may mark the VM ready or not ready on `/readyz`
//! (`set-ready`), which takes it out of the load balancer.

/// The consent's line.
pub(crate) fn consent(readiness: bool) -> String {
    format!(
        "  readiness (take the VM out of the load balancer): {}",
        if readiness { "yes" } else { "no" }
    )
}

/// How `new` grants more than `old`, if it does.
pub(crate) fn wider(new: bool, old: bool) -> Option<String> {
    (new && !old).then(|| "readiness: false -> true".to_owned())
}

/// The upgrade's line, if it changed.
pub(crate) fn changes(new: bool, old: bool) -> Option<String> {
    (new != old).then(|| format!("{} readiness", if new { "+" } else { "-" }))
}

/// Its part of `plugin list`'s line.
pub(crate) fn one_line(readiness: bool) -> Option<String> {
    readiness.then(|| "readiness".to_owned())
}
