//! The addresses no plugin may ever reach, whatever its `http` grant says: IMDS and the rest
//! of link-local, the Azure wireserver, "this host" (0.0.0.0/8, `::`), in every spelling.
//! The `http` key refuses a literal one at load; the runtime refuses one a name resolves to,
//! per request.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The Azure wireserver (host agent, VM extensions, instance health).
const AZURE_WIRESERVER: Ipv4Addr = Ipv4Addr::new(168, 63, 129, 16);

/// Why `ip` is never reachable from a plugin, or None if it may be allow-listed.
/// IPv4-mapped, IPv4-compatible and NAT64 (64:ff9b::/96) IPv6 forms count as the IPv4 address.
pub fn forbidden_ip(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        // `::1` would read as the IPv4-compatible 0.0.0.1: it is loopback, as 127.0.0.1 is.
        IpAddr::V6(v6) if v6.is_loopback() => None,
        IpAddr::V6(v6) => embedded_v4(v6)
            .and_then(forbidden_v4)
            .or_else(|| forbidden_v6(v6)),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    if ip.octets()[0] == 0 {
        return Some(
            "0.0.0.0/8 (\"this host\": on Linux it reaches local services, IMDS proxies included)",
        );
    }
    if ip.is_link_local() {
        return Some("link-local 169.254.0.0/16 (IMDS, managed-identity tokens)");
    }
    if ip == AZURE_WIRESERVER {
        return Some("the Azure wireserver 168.63.129.16");
    }
    None
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("the unspecified address :: (on Linux it reaches local services)");
    }
    if (ip.segments()[0] & 0xffc0) == 0xfe80 {
        return Some("IPv6 link-local fe80::/10");
    }
    None
}

/// The IPv4 address an IPv6 address stands for: `::ffff:a.b.c.d`, `::a.b.c.d`, or the
/// NAT64 prefix `64:ff9b::a.b.c.d`.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4() {
        return Some(v4);
    }
    let segments = ip.segments();
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., a, b, c, d] = ip.octets();
        return Some(Ipv4Addr::new(a, b, c, d));
    }
    None
}

/// Why a manifest's `[capabilities] http` entry `host:port` may never be granted, or None.
/// Only literal IP addresses can be judged here; names are checked after DNS, per request.
pub fn forbidden_entry(entry: &str) -> Option<&'static str> {
    let entry = entry.trim();
    let host = match entry.rsplit_once(':') {
        Some((host, _port)) => host,
        None => entry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let parsed: IpAddr = match host.parse() {
        Ok(ip) => ip,
        Err(_) => parse_with_url(entry)?,
    };
    forbidden_ip(parsed)
}

/// The IP address the URL parser makes of `host:port` (decimal `2852039166`, octal, hex
/// forms), if it is one.
fn parse_with_url(entry: &str) -> Option<IpAddr> {
    let url = url::Url::parse(&format!("http://{entry}/")).ok()?;
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_addresses_are_forbidden_in_every_form() {
        for text in [
            "169.254.169.254",
            "169.254.0.1",
            "168.63.129.16",
            "fe80::1",
            "febf::1",
            "::ffff:169.254.169.254",
            "::ffff:168.63.129.16",
            "::169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "0.0.0.0",
            "0.1.2.3",
            "::",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert!(forbidden_ip(ip).is_some(), "{text} must be forbidden");
        }
    }

    #[test]
    fn ordinary_addresses_are_not_forbidden() {
        for text in ["127.0.0.1", "10.0.0.4", "::1", "fec0::1", "168.63.129.17"] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(forbidden_ip(ip), None, "{text}");
        }
    }

    #[test]
    fn manifest_entries_are_judged_after_url_normalisation() {
        for entry in [
            "169.254.169.254:80",
            "[fe80::1]:80",
            "[::ffff:169.254.169.254]:80",
            "2852039166:80",
            "0251.0376.0251.0376:80",
            "0xa9fea9fe:80",
            "168.63.129.16:32526",
        ] {
            assert!(
                forbidden_entry(entry).is_some(),
                "{entry} must be forbidden"
            );
        }
        for entry in ["127.0.0.1:8080", "backend.local:80", "[::1]:9000"] {
            assert_eq!(forbidden_entry(entry), None, "{entry}");
        }
    }
}
