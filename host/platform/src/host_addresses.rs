//! This host's own IP addresses, every interface's: `getifaddrs` on Unix,
//! `GetAdaptersAddresses` on Windows.

use std::net::IpAddr;

#[cfg(unix)]
#[path = "host_addresses/unix.rs"]
mod imp;
#[cfg(windows)]
#[path = "host_addresses/windows.rs"]
mod imp;

/// This host's addresses (IPv4-mapped IPv6 forms as IPv4); empty where they cannot be
/// listed.
pub fn own_addresses() -> Vec<IpAddr> {
    imp::own_addresses()
        .into_iter()
        .map(|ip| ip.to_canonical())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_among_this_hosts_addresses() {
        let own = own_addresses();
        assert!(own.iter().any(IpAddr::is_loopback), "{own:?}");
    }
}
