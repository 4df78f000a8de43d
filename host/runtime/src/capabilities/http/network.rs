//! The network rules for plugins' `http-send`: addresses no plugin may ever reach (IMDS,
//! link-local, the Azure wireserver, the daemon's own IMDS endpoint) and the DNS resolver hook.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;

/// The Azure wireserver (host agent, VM extensions, instance health).
const AZURE_WIRESERVER: Ipv4Addr = Ipv4Addr::new(168, 63, 129, 16);

/// Why `ip` is never reachable from a plugin, or None if it may be allow-listed.
/// IPv4-mapped, IPv4-compatible and NAT64 (64:ff9b::/96) IPv6 forms count as the IPv4 address.
pub(crate) fn forbidden_ip(ip: IpAddr) -> Option<&'static str> {
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

/// `address` with an IPv4-mapped IPv6 address turned into the IPv4 one, for comparisons.
pub(crate) fn canonical(address: SocketAddr) -> SocketAddr {
    SocketAddr::new(address.ip().to_canonical(), address.port())
}

/// Whether a connection to `target` may reach the listener serving `endpoint` (the daemon's
/// `imds.url`): the same port, and the same address in any spelling — or, for an endpoint
/// on this host (loopback or one of its own addresses), any address of this host: a
/// listener bound to 0.0.0.0 or `::` answers on 127.0.0.2, `[::1]`, `[::ffff:127.0.0.1]`
/// and the VM's own address alike. `own` lists this host's addresses.
pub(crate) fn reaches_same_listener(
    endpoint: SocketAddr,
    target: SocketAddr,
    own: &[IpAddr],
) -> bool {
    if endpoint.port() != target.port() {
        return false;
    }
    let (endpoint, target) = (endpoint.ip().to_canonical(), target.ip().to_canonical());
    let on_this_host = |ip: IpAddr| ip.is_loopback() || own.contains(&ip);
    endpoint == target || on_this_host(endpoint) && on_this_host(target)
}

/// This host's own addresses (every interface's, IPv4-mapped forms as IPv4); empty where
/// they cannot be listed.
pub(crate) fn own_addresses() -> Vec<IpAddr> {
    forewarn_platform::host_addresses::own_addresses()
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

/// What a DNS lookup returns to `http-send`.
pub type ResolveFuture = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>;

/// Turns a host name into addresses. The daemon uses the system resolver; tests inject
/// their own so a name can point anywhere without touching /etc/hosts.
pub trait Resolver: Send + Sync {
    /// The addresses of `host`, each with `port`.
    fn lookup(&self, host: &str, port: u16) -> ResolveFuture;
}

/// The system resolver (getaddrinfo, through tokio).
pub(crate) struct SystemResolver;

impl Resolver for SystemResolver {
    fn lookup(&self, host: &str, port: u16) -> ResolveFuture {
        let host = host.to_owned();
        Box::pin(async move {
            let addresses = tokio::net::lookup_host((host.as_str(), port)).await?;
            Ok(addresses.collect())
        })
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
    fn a_loopback_endpoint_is_reached_by_every_address_of_this_host() {
        let endpoint: SocketAddr = "127.0.0.1:8181".parse().unwrap();
        let own: Vec<IpAddr> = vec!["10.0.0.4".parse().unwrap()];
        for target in [
            "127.0.0.1:8181",
            "127.0.0.2:8181",
            "127.255.255.254:8181",
            "[::1]:8181",
            "[::ffff:127.0.0.1]:8181",
            "[::ffff:127.0.0.9]:8181",
            "10.0.0.4:8181",
        ] {
            let target: SocketAddr = target.parse().unwrap();
            assert!(reaches_same_listener(endpoint, target, &own), "{target}");
        }
        for target in ["127.0.0.1:8182", "10.0.0.5:8181", "[2001:db8::1]:8181"] {
            let target: SocketAddr = target.parse().unwrap();
            assert!(!reaches_same_listener(endpoint, target, &own), "{target}");
        }
        // An endpoint elsewhere is only itself.
        let remote: SocketAddr = "10.1.2.3:80".parse().unwrap();
        assert!(reaches_same_listener(
            remote,
            "[::ffff:10.1.2.3]:80".parse().unwrap(),
            &own
        ));
        assert!(!reaches_same_listener(
            remote,
            "127.0.0.1:80".parse().unwrap(),
            &own
        ));
    }

    #[test]
    fn this_hosts_addresses_include_loopback() {
        let own = own_addresses();
        assert!(own.iter().any(IpAddr::is_loopback), "{own:?}");
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
