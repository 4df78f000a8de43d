//! The network rules for plugins' `http-send`: addresses no plugin may ever reach (IMDS,
//! link-local, the Azure wireserver: the manifest's
//! [`forbidden_addresses`](forewarn_manifest::capabilities::forbidden_addresses); and the
//! daemon's own IMDS endpoint) and the DNS resolver hook.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;

pub(crate) use forewarn_manifest::capabilities::forbidden_addresses::forbidden_ip;

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
}
