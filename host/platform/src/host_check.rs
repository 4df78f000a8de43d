//! Which `Host` a local HTTP server answers, against DNS rebinding: a web page whose name
//! is made to resolve to 127.0.0.1 reaches a loopback server from the browser of whoever
//! runs it, as the page's own origin, so same-origin rules do not stop it — but its
//! requests carry the page's name in `Host`. Such a server answers only requests naming
//! it by an IP address (no page can rebind an address), as `localhost`, or by a name its
//! operator configured. Used by the simulator and by the daemon's admin endpoint.

/// The host of a `Host` header or of an origin's authority, without the port:
/// `127.0.0.1`, `localhost`, `::1` (from `[::1]:9555`).
pub fn host_part(authority: &str) -> &str {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match authority.rsplit_once(':') {
        // One colon: `name:port`. More would be a bare IPv6 address.
        Some((host, _port)) if !host.contains(':') => host,
        _ => authority,
    }
}

/// Whether a request naming `host` (a `Host` header, port included or not) is for this
/// server: an IP address, `localhost` or a name under `.localhost`, or one of `names`
/// (compared without case or a final dot). A request without `Host` is served: browsers
/// always send one.
pub fn is_served_host(host: Option<&str>, names: &[String]) -> bool {
    let Some(host) = host else {
        return true;
    };
    let host = host_part(host).trim_end_matches('.');
    if host.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let host = host.to_ascii_lowercase();
    host == "localhost"
        || host.ends_with(".localhost")
        || names
            .iter()
            .any(|name| name.trim_end_matches('.').eq_ignore_ascii_case(&host))
}

/// The sentence a refused request gets: what was refused and how to allow it.
pub fn refusal(host: &str, how_to_allow: &str) -> String {
    format!(
        "this server answers requests for its IP addresses and localhost only, not for \
         `{host}` (a web page whose name resolves here must not reach it); {how_to_allow}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_localhost_are_served_other_names_only_when_configured() {
        let names = vec!["vm-a.internal".to_owned()];
        for served in [
            "127.0.0.1:9555",
            "127.0.0.2",
            "[::1]:9555",
            "::1",
            "10.0.0.4:9555",
            "localhost:9555",
            "LOCALHOST",
            "app.localhost",
            "vm-a.internal:9555",
            "VM-A.internal.",
        ] {
            assert!(is_served_host(Some(served), &names), "{served}");
        }
        for refused in [
            "evil.example",
            "evil.example:9555",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "vm-a.internal.evil.example",
            "",
        ] {
            assert!(!is_served_host(Some(refused), &names), "{refused}");
        }
        assert!(is_served_host(None, &[]));
    }

    #[test]
    fn the_host_part_drops_the_port_and_brackets() {
        assert_eq!(host_part("[::1]:9555"), "::1");
        assert_eq!(host_part("127.0.0.1:80"), "127.0.0.1");
        assert_eq!(host_part("example"), "example");
        assert_eq!(host_part("fe80::1"), "fe80::1");
    }
}
