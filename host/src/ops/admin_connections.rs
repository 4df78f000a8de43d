//! Who holds the admin endpoint's connections. One peer (an IPv4 address, or an IPv6 /64)
//! holds at most [`ADMIN_MAX_CONNECTIONS_PER_PEER`] of the [`ADMIN_MAX_CONNECTIONS`]; when
//! every slot is taken, a connection from a peer holding fewer than the busiest one takes
//! the slot of that peer's oldest connection. So no peer, nor any group of peers, can keep
//! another peer — the load balancer's `/readyz` probe — from being served.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;

/// Connections served at once; one more is accepted and closed at once (or takes the slot
/// of the busiest peer's oldest connection), so idle clients cannot use up the daemon's
/// file descriptors (IMDS and etcd need them).
pub(crate) const ADMIN_MAX_CONNECTIONS: usize = 64;
/// Connections one peer may hold at once: a browser on the status page opens up to six.
pub(crate) const ADMIN_MAX_CONNECTIONS_PER_PEER: usize = 8;

/// A peer: an IPv4 address (IPv4-mapped IPv6 included), or the /64 of an IPv6 address
/// (one host is given a whole /64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Peer(IpAddr);

impl Peer {
    pub(crate) fn of(address: IpAddr) -> Peer {
        match address {
            IpAddr::V4(v4) => Peer(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Peer(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    Peer(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Its peer holds [`ADMIN_MAX_CONNECTIONS_PER_PEER`] already.
    PeerFull,
    /// Every slot is taken by peers holding no more than its own.
    EndpointFull,
}

/// The connections being served, by peer, oldest first.
#[derive(Default)]
pub(crate) struct ConnectionTable {
    inner: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    total: usize,
    by_peer: HashMap<Peer, VecDeque<Held>>,
}

struct Held {
    id: u64,
    /// Cancelled when another peer takes this connection's slot.
    evicted: CancellationToken,
}

/// A connection's slot, given back when dropped. `evicted` is cancelled when a peer with
/// fewer connections takes the slot: the connection is then closed.
pub(crate) struct Slot {
    table: Arc<ConnectionTable>,
    peer: Peer,
    id: u64,
    pub(crate) evicted: CancellationToken,
}

impl ConnectionTable {
    /// Admits a connection from `address`, taking the slot of the busiest peer's oldest
    /// connection when every slot is taken and that peer holds at least two more.
    pub(crate) fn admit(self: &Arc<Self>, address: IpAddr) -> Result<Slot, Refused> {
        let peer = Peer::of(address);
        let mut table = self.lock();
        let held = table.by_peer.get(&peer).map_or(0, VecDeque::len);
        if held >= ADMIN_MAX_CONNECTIONS_PER_PEER {
            return Err(Refused::PeerFull);
        }
        if table.total >= ADMIN_MAX_CONNECTIONS && !table.evict_from_busiest(held) {
            return Err(Refused::EndpointFull);
        }
        table.next_id += 1;
        let id = table.next_id;
        let evicted = CancellationToken::new();
        table.by_peer.entry(peer).or_default().push_back(Held {
            id,
            evicted: evicted.clone(),
        });
        table.total += 1;
        Ok(Slot {
            table: self.clone(),
            peer,
            id,
            evicted,
        })
    }

    /// The table. A panic while it is locked leaves counts that are at worst one off, so a
    /// poisoned lock is used as is.
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many connections are held, in all and by `address`'s peer (for tests).
    #[cfg(test)]
    fn held(&self, address: IpAddr) -> (usize, usize) {
        let table = self.lock();
        let by_peer = table
            .by_peer
            .get(&Peer::of(address))
            .map_or(0, VecDeque::len);
        (table.total, by_peer)
    }
}

impl Table {
    /// Closes the oldest connection of the peer holding the most, if it holds at least two
    /// more than `held` (the newcomer's peer); says whether a slot was freed.
    fn evict_from_busiest(&mut self, held: usize) -> bool {
        let Some((&busiest, connections)) = self
            .by_peer
            .iter()
            .max_by_key(|(_, connections)| connections.len())
        else {
            return false;
        };
        if connections.len() < held + 2 {
            return false;
        }
        let Some(oldest) = self.by_peer.get_mut(&busiest).and_then(VecDeque::pop_front) else {
            return false;
        };
        oldest.evicted.cancel();
        self.total -= 1;
        tracing::debug!(peer = %busiest, "admin connection closed: its slot went to a peer holding fewer");
        self.forget_if_empty(busiest);
        true
    }

    fn forget_if_empty(&mut self, peer: Peer) {
        if self.by_peer.get(&peer).is_some_and(VecDeque::is_empty) {
            self.by_peer.remove(&peer);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut table = self.table.lock();
        let Some(connections) = table.by_peer.get_mut(&self.peer) else {
            return;
        };
        let before = connections.len();
        connections.retain(|held| held.id != self.id);
        if connections.len() < before {
            table.total -= 1;
        }
        table.forget_if_empty(self.peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn one_peer_holds_at_most_its_share() {
        let table = Arc::new(ConnectionTable::default());
        let hog = address("127.0.0.1");
        let held: Vec<Slot> = (0..ADMIN_MAX_CONNECTIONS_PER_PEER)
            .map(|_| table.admit(hog).expect("within the peer's share"))
            .collect();
        assert_eq!(table.admit(hog).err(), Some(Refused::PeerFull));
        assert!(table.admit(address("127.0.0.2")).is_ok());
        drop(held);
        assert_eq!(table.held(hog), (0, 0));
    }

    #[test]
    fn a_full_endpoint_gives_a_new_peer_the_slot_of_the_busiest_peers_oldest_connection() {
        let table = Arc::new(ConnectionTable::default());
        // Eight peers fill the endpoint, eight connections each.
        let mut held = Vec::new();
        for peer in 1..=ADMIN_MAX_CONNECTIONS / ADMIN_MAX_CONNECTIONS_PER_PEER {
            for _ in 0..ADMIN_MAX_CONNECTIONS_PER_PEER {
                held.push(table.admit(address(&format!("10.0.0.{peer}"))).unwrap());
            }
        }
        assert_eq!(table.held(address("10.0.0.1")).0, ADMIN_MAX_CONNECTIONS);
        let probe = table
            .admit(address("168.63.129.16"))
            .expect("the probe is served");
        let evicted: Vec<usize> = (0..held.len())
            .filter(|index| held[*index].evicted.is_cancelled())
            .collect();
        assert_eq!(evicted.len(), 1, "{evicted:?}");
        let victim = evicted[0];
        assert_eq!(
            victim % ADMIN_MAX_CONNECTIONS_PER_PEER,
            0,
            "a peer's oldest"
        );
        assert_eq!(
            table.held(address("168.63.129.16")),
            (ADMIN_MAX_CONNECTIONS, 1)
        );
        drop(probe);
        // The evicted slot's owner gives nothing back twice.
        let victim_peer = held.remove(victim).peer;
        let peer_held = table.held(victim_peer.0);
        assert_eq!(
            peer_held,
            (
                ADMIN_MAX_CONNECTIONS - 1,
                ADMIN_MAX_CONNECTIONS_PER_PEER - 1
            )
        );
    }

    #[test]
    fn peers_holding_as_many_do_not_take_each_others_slots() {
        let table = Arc::new(ConnectionTable::default());
        let mut held = Vec::new();
        for peer in 0..ADMIN_MAX_CONNECTIONS {
            held.push(table.admit(address(&format!("10.0.1.{peer}"))).unwrap());
        }
        assert_eq!(
            table.admit(address("10.0.2.1")).err(),
            Some(Refused::EndpointFull)
        );
        assert!(held.iter().all(|slot| !slot.evicted.is_cancelled()));
    }

    #[test]
    fn ipv6_peers_are_their_64_and_mapped_ipv4_is_ipv4() {
        assert_eq!(
            Peer::of(address("2001:db8::1")),
            Peer::of(address("2001:db8::ffff:1"))
        );
        assert_ne!(
            Peer::of(address("2001:db8:0:1::1")),
            Peer::of(address("2001:db8::1"))
        );
        assert_eq!(
            Peer::of(address("::ffff:127.0.0.1")),
            Peer::of(address("127.0.0.1"))
        );
    }
}
