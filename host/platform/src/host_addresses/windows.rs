//! `GetAdaptersAddresses`: every adapter's unicast addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use windows_sys::Win32::NetworkManagement::IpHelper::{
    GAA_FLAG_SKIP_ANYCAST, GAA_FLAG_SKIP_DNS_SERVER, GAA_FLAG_SKIP_MULTICAST, GetAdaptersAddresses,
    IP_ADAPTER_ADDRESSES_LH,
};
use windows_sys::Win32::Networking::WinSock::{
    AF_INET, AF_INET6, AF_UNSPEC, SOCKADDR, SOCKADDR_IN, SOCKADDR_IN6,
};

/// `ERROR_BUFFER_OVERFLOW`: the buffer was too small; the size needed was written.
const BUFFER_OVERFLOW: u32 = 111;

pub(super) fn own_addresses() -> Vec<IpAddr> {
    let flags = GAA_FLAG_SKIP_ANYCAST | GAA_FLAG_SKIP_MULTICAST | GAA_FLAG_SKIP_DNS_SERVER;
    // u64 words: the list's structures need 8-byte alignment.
    let mut buffer: Vec<u64> = vec![0; 2048];
    for _attempt in 0..3 {
        let mut size = u32::try_from(buffer.len() * 8).unwrap_or(u32::MAX);
        let first = buffer.as_mut_ptr().cast::<IP_ADAPTER_ADDRESSES_LH>();
        // SAFETY: `first` points to `size` writable bytes, aligned for the structure.
        let result = unsafe {
            GetAdaptersAddresses(
                u32::from(AF_UNSPEC),
                flags,
                std::ptr::null(),
                first,
                &mut size,
            )
        };
        match result {
            0 => return collect(first),
            BUFFER_OVERFLOW => buffer = vec![0; (size as usize).div_ceil(8)],
            _ => return Vec::new(),
        }
    }
    Vec::new()
}

/// The unicast addresses of the adapter list starting at `adapter`.
fn collect(mut adapter: *const IP_ADAPTER_ADDRESSES_LH) -> Vec<IpAddr> {
    let mut addresses = Vec::new();
    while !adapter.is_null() {
        // SAFETY: a node of the list GetAdaptersAddresses wrote into the live buffer.
        let node = unsafe { &*adapter };
        let mut unicast = node.FirstUnicastAddress;
        while !unicast.is_null() {
            // SAFETY: as above, a node of the adapter's unicast list.
            let entry = unsafe { &*unicast };
            if let Some(ip) = socket_ip(entry.Address.lpSockaddr) {
                addresses.push(ip);
            }
            unicast = entry.Next;
        }
        adapter = node.Next;
    }
    addresses
}

fn socket_ip(address: *const SOCKADDR) -> Option<IpAddr> {
    if address.is_null() {
        return None;
    }
    // SAFETY: non-null; the family is read before the cast to that family's structure,
    // which the list holds in full.
    unsafe {
        match (*address).sa_family {
            AF_INET => {
                let v4 = &*address.cast::<SOCKADDR_IN>();
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                    v4.sin_addr.S_un.S_addr,
                ))))
            }
            AF_INET6 => {
                let v6 = &*address.cast::<SOCKADDR_IN6>();
                Some(IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.u.Byte)))
            }
            _ => None,
        }
    }
}
