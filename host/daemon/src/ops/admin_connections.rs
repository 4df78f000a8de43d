//! Who holds the admin endpoint's connections. One peer (an IPv4 address, or an IPv6 /64)
//! holds at most [`ADMIN_MAX_CONNECTIONS_PER_PEER`] of the [`ADMIN_MAX_CONNECTIONS`]. When
//! every slot is taken, a newcomer takes the slot of the busiest peer's oldest connection
//! (the oldest of all among peers holding as many):
//!
//! - a peer holding **no** connection always does, whoever holds the slots — so neither one
//!   peer nor a group of peers holding one connection each keeps another peer (the load
//!   balancer's `/readyz` probe) out;
//! - a peer holding some does when the busiest peer holds at least two more, so two peers
//!   holding about as many do not take each other's slots back and forth;
//! - except a peer that lost a connection that way a moment ago (0.5 to 1.5 s,
//!   [`ADMIN_LOST_SLOT_WAIT`], spread so that many do not come back at once): it waits for a
//!   free slot. A group reopening each connection it loses can then take at most one slot a
//!   member in a second, its takes spread out, and the newest connection (the probe's,
//!   answered within milliseconds) is the last to go.
//!
//! The table is a pure unit: the caller gives it the time ([`ConnectionTable::admit`]).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// Connections served at once; one more is accepted and closed at once (or takes the slot
/// of the busiest peer's oldest connection), so idle clients cannot use up the daemon's
/// file descriptors (IMDS and etcd need them).
pub(crate) const ADMIN_MAX_CONNECTIONS: usize = 64;
/// Connections one peer may hold at once: a browser on the status page opens up to six.
pub(crate) const ADMIN_MAX_CONNECTIONS_PER_PEER: usize = 8;
/// How long a peer that lost a connection to a newcomer waits, at least, before it may take
/// a slot from another peer in turn (a free slot it gets at once).
pub(crate) const ADMIN_LOST_SLOT_WAIT: Duration = Duration::from_millis(500);
/// The waits are spread over this much beyond [`ADMIN_LOST_SLOT_WAIT`], one loss after the
/// other, so that a group losing many connections at once does not come back at once: a
/// burst of takes would close even the newest connection (a probe's) within milliseconds.
pub(crate) const ADMIN_LOST_SLOT_WAIT_SPREAD: Duration = Duration::from_millis(1000);
/// How far apart, in thousandths of the spread, two losses one after the other are put (a
/// step prime to 1000: a thousand losses in a row get a thousand different waits).
const SPREAD_STEP_PER_MILLE: u64 = 619;
/// Peers remembered as having lost a slot: past this many, the longest-ago is forgotten
/// (the memory stays bounded whatever the number of addresses a group uses).
const LOST_SLOTS_REMEMBERED: usize = 4096;

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
    /// Every slot is taken by peers holding less than two more than its own peer.
    EndpointFull,
    /// Every slot is taken, and its peer lost a connection to another peer a moment ago
    /// (it waits [`ADMIN_LOST_SLOT_WAIT`] and part of [`ADMIN_LOST_SLOT_WAIT_SPREAD`]).
    LostOneRecently,
}

/// How a connection is let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// A slot is free.
    FreeSlot,
    /// In the slot of `0`'s oldest connection, which is closed.
    TakenFrom(Peer),
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
    lost: LostSlots,
}

struct Held {
    /// Admission order: a smaller id is an older connection.
    id: u64,
    /// Cancelled when another peer takes this connection's slot.
    evicted: CancellationToken,
}

/// The peers that lost a connection to a newcomer, and until when each waits.
#[derive(Default)]
struct LostSlots {
    /// Until when each peer waits, from its newest loss (and that loss's number).
    until: HashMap<Peer, (Instant, u64)>,
    /// The losses in the order they happened: peer, when, number.
    order: VecDeque<(Peer, Instant, u64)>,
    /// Losses so far: numbers them, and spreads the waits.
    losses: u64,
}

impl LostSlots {
    /// `peer` lost a connection at `now`: it waits [`ADMIN_LOST_SLOT_WAIT`] and a part of
    /// [`ADMIN_LOST_SLOT_WAIT_SPREAD`] that differs from one loss to the next.
    fn record(&mut self, peer: Peer, now: Instant) {
        let number = self.losses;
        self.losses = self.losses.wrapping_add(1);
        let per_mille = number.wrapping_mul(SPREAD_STEP_PER_MILLE) % 1000;
        let spread = ADMIN_LOST_SLOT_WAIT_SPREAD * u32::try_from(per_mille).unwrap_or(0) / 1000;
        self.until
            .insert(peer, (now + ADMIN_LOST_SLOT_WAIT + spread, number));
        self.order.push_back((peer, now, number));
        while self.order.len() > LOST_SLOTS_REMEMBERED {
            self.forget_oldest();
        }
    }

    /// Whether `peer` still waits at `now`.
    fn waits(&mut self, peer: Peer, now: Instant) -> bool {
        let longest = ADMIN_LOST_SLOT_WAIT + ADMIN_LOST_SLOT_WAIT_SPREAD;
        while self
            .order
            .front()
            .is_some_and(|(_, at, _)| now.saturating_duration_since(*at) >= longest)
        {
            self.forget_oldest();
        }
        self.until.get(&peer).is_some_and(|(until, _)| now < *until)
    }

    /// Forgets the longest-ago loss (and its peer, unless the peer lost one since).
    fn forget_oldest(&mut self) {
        let Some((peer, _, number)) = self.order.pop_front() else {
            return;
        };
        if self
            .until
            .get(&peer)
            .is_some_and(|(_, newest)| *newest == number)
        {
            self.until.remove(&peer);
        }
    }
}

/// A connection's slot, given back when dropped. `evicted` is cancelled when a newcomer
/// takes the slot: the connection is then closed.
pub(crate) struct Slot {
    table: Arc<ConnectionTable>,
    peer: Peer,
    id: u64,
    pub(crate) evicted: CancellationToken,
}

impl ConnectionTable {
    /// Admits a connection from `address` at `now`, taking the slot of the busiest peer's
    /// oldest connection when every slot is taken (module docs: who may).
    pub(crate) fn admit(self: &Arc<Self>, address: IpAddr, now: Instant) -> Result<Slot, Refused> {
        let peer = Peer::of(address);
        let mut table = self.lock();
        match table.admission(peer, now)? {
            Admission::FreeSlot => {}
            Admission::TakenFrom(busiest) => table.evict_oldest(busiest, now),
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
    /// Whether a connection from `peer` is let in at `now`, and how.
    fn admission(&mut self, peer: Peer, now: Instant) -> Result<Admission, Refused> {
        let held = self.by_peer.get(&peer).map_or(0, VecDeque::len);
        if held >= ADMIN_MAX_CONNECTIONS_PER_PEER {
            return Err(Refused::PeerFull);
        }
        if self.total < ADMIN_MAX_CONNECTIONS {
            return Ok(Admission::FreeSlot);
        }
        // A peer holding none takes from any peer holding one; one holding some only from a
        // peer holding two more (else the two would take the slot back and forth).
        let needed = match held {
            0 => 1,
            some => some + 2,
        };
        let Some(busiest) = self.busiest().filter(|(_, count)| *count >= needed) else {
            return Err(Refused::EndpointFull);
        };
        if self.lost.waits(peer, now) {
            return Err(Refused::LostOneRecently);
        }
        Ok(Admission::TakenFrom(busiest.0))
    }

    /// The peer holding the most connections (of those holding as many, the one holding the
    /// oldest connection), and how many it holds.
    fn busiest(&self) -> Option<(Peer, usize)> {
        self.by_peer
            .iter()
            .filter_map(|(peer, held)| Some((*peer, held.len(), held.front()?.id)))
            .max_by(|(_, a_count, a_oldest), (_, b_count, b_oldest)| {
                a_count.cmp(b_count).then(b_oldest.cmp(a_oldest))
            })
            .map(|(peer, count, _)| (peer, count))
    }

    /// Closes `peer`'s oldest connection, remembering that `peer` lost one at `now`.
    fn evict_oldest(&mut self, peer: Peer, now: Instant) {
        let Some(oldest) = self.by_peer.get_mut(&peer).and_then(VecDeque::pop_front) else {
            return;
        };
        oldest.evicted.cancel();
        self.total -= 1;
        self.lost.record(peer, now);
        tracing::debug!(%peer, "admin connection closed: its slot went to a peer holding fewer");
        self.forget_if_empty(peer);
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

    /// `count` peers 10.0.N.M, each holding `each` connections admitted at `now`, in order.
    fn fill(table: &Arc<ConnectionTable>, count: usize, each: usize, now: Instant) -> Vec<Slot> {
        let mut held = Vec::new();
        for peer in 0..count {
            let peer = address(&format!("10.0.{}.{}", peer / 250, peer % 250 + 1));
            for _ in 0..each {
                held.push(table.admit(peer, now).expect("a free slot"));
            }
        }
        held
    }

    fn evicted(held: &[Slot]) -> Vec<usize> {
        (0..held.len())
            .filter(|index| held[*index].evicted.is_cancelled())
            .collect()
    }

    #[test]
    fn one_peer_holds_at_most_its_share() {
        let table = Arc::new(ConnectionTable::default());
        let now = Instant::now();
        let hog = address("127.0.0.1");
        let held: Vec<Slot> = (0..ADMIN_MAX_CONNECTIONS_PER_PEER)
            .map(|_| table.admit(hog, now).expect("within the peer's share"))
            .collect();
        assert_eq!(table.admit(hog, now).err(), Some(Refused::PeerFull));
        assert!(table.admit(address("127.0.0.2"), now).is_ok());
        drop(held);
        assert_eq!(table.held(hog), (0, 0));
    }

    #[test]
    fn a_full_endpoint_gives_a_new_peer_the_slot_of_the_busiest_peers_oldest_connection() {
        let table = Arc::new(ConnectionTable::default());
        let now = Instant::now();
        // Eight peers fill the endpoint, eight connections each.
        let mut held = fill(
            &table,
            ADMIN_MAX_CONNECTIONS / ADMIN_MAX_CONNECTIONS_PER_PEER,
            ADMIN_MAX_CONNECTIONS_PER_PEER,
            now,
        );
        assert_eq!(table.held(address("10.0.0.1")).0, ADMIN_MAX_CONNECTIONS);
        let probe = table
            .admit(address("168.63.129.16"), now)
            .expect("the probe is served");
        // The oldest connection of all: the first peer's first.
        assert_eq!(evicted(&held), [0]);
        assert_eq!(
            table.held(address("168.63.129.16")),
            (ADMIN_MAX_CONNECTIONS, 1)
        );
        drop(probe);
        // The evicted slot's owner gives nothing back twice.
        let victim_peer = held.remove(0).peer;
        let peer_held = table.held(victim_peer.0);
        assert_eq!(
            peer_held,
            (
                ADMIN_MAX_CONNECTIONS - 1,
                ADMIN_MAX_CONNECTIONS_PER_PEER - 1
            )
        );
    }

    /// Issue 45 part 5: 64 peers holding one connection each kept a 65th out.
    #[test]
    fn a_peer_holding_none_is_served_when_a_group_holds_one_connection_each() {
        let table = Arc::new(ConnectionTable::default());
        let start = Instant::now();
        let held = fill(&table, ADMIN_MAX_CONNECTIONS, 1, start);
        let probe = table
            .admit(address("168.63.129.16"), start)
            .expect("a peer holding none is served");
        assert_eq!(evicted(&held), [0], "the oldest connection goes");
        assert_eq!(
            table.held(address("168.63.129.16")),
            (ADMIN_MAX_CONNECTIONS, 1)
        );
        drop(probe);

        // Every time, however many newcomers: 200 more peers, one after the other.
        let mut newcomers = Vec::new();
        for peer in 0..200 {
            let newcomer = address(&format!("10.1.{}.{}", peer / 250, peer % 250 + 1));
            newcomers.push(table.admit(newcomer, start).expect("a peer holding none"));
        }
        assert_eq!(table.held(address("10.1.0.1")).0, ADMIN_MAX_CONNECTIONS);
        // The slots went oldest first: the 64 newest newcomers hold them.
        assert!(
            newcomers[..200 - ADMIN_MAX_CONNECTIONS]
                .iter()
                .all(|slot| slot.evicted.is_cancelled())
        );
        assert!(
            newcomers[200 - ADMIN_MAX_CONNECTIONS..]
                .iter()
                .all(|slot| !slot.evicted.is_cancelled())
        );
    }

    #[test]
    fn a_peer_that_lost_a_slot_waits_before_taking_one_from_another_peer() {
        let table = Arc::new(ConnectionTable::default());
        let start = Instant::now();
        let held = fill(&table, ADMIN_MAX_CONNECTIONS, 1, start);
        let victim = held[0].peer.0;
        let newcomer = table
            .admit(address("10.9.0.1"), start)
            .expect("holding none");
        assert_eq!(evicted(&held), [0]);
        // The victim, reconnecting at once, waits: the newest connection (the newcomer's,
        // a probe being answered) is not taken back, nor any other.
        let soon = start + ADMIN_LOST_SLOT_WAIT - Duration::from_millis(1);
        assert_eq!(
            table.admit(victim, soon).err(),
            Some(Refused::LostOneRecently)
        );
        assert!(!newcomer.evicted.is_cancelled());
        assert_eq!(evicted(&held), [0]);
        // A free slot it gets at once.
        drop(newcomer);
        let back = table.admit(victim, soon).expect("a free slot");
        drop(back);
        let newcomer = table.admit(address("10.9.0.1"), soon).expect("a free slot");
        // After the wait it is a peer holding none like any other.
        let later = start + ADMIN_LOST_SLOT_WAIT;
        let back = table
            .admit(victim, later)
            .expect("holding none, after the wait");
        assert_eq!(evicted(&held), [0, 1]);
        assert!(!newcomer.evicted.is_cancelled() && !back.evicted.is_cancelled());
    }

    #[test]
    fn peers_holding_some_do_not_take_slots_from_peers_holding_one_more() {
        let table = Arc::new(ConnectionTable::default());
        let now = Instant::now();
        // 10.0.0.1 holds two, 62 peers hold one each: full.
        let mut held = fill(&table, ADMIN_MAX_CONNECTIONS - 1, 1, now);
        held.push(table.admit(address("10.0.0.1"), now).expect("a free slot"));
        assert_eq!(table.held(address("10.0.0.1")), (ADMIN_MAX_CONNECTIONS, 2));
        // A peer holding one would take from the peer holding two, and that one back.
        assert_eq!(
            table.admit(address("10.0.0.2"), now).err(),
            Some(Refused::EndpointFull)
        );
        assert!(evicted(&held).is_empty());
        // A peer holding none is served, from the busiest peer.
        let probe = table.admit(address("10.5.0.1"), now).expect("holding none");
        assert_eq!(evicted(&held), [0]);
        assert_eq!(table.held(address("10.0.0.1")).1, 1);
        drop(probe);
    }

    fn peer_number(number: usize) -> Peer {
        Peer::of(IpAddr::V4(std::net::Ipv4Addr::from(
            u32::try_from(number).expect("a small number"),
        )))
    }

    #[test]
    fn peers_losing_slots_at_once_come_back_spread_over_the_spread() {
        let mut lost = LostSlots::default();
        let start = Instant::now();
        for peer in 0..100 {
            lost.record(peer_number(peer), start);
        }
        let waiting = |lost: &mut LostSlots, at: Instant| {
            (0..100)
                .filter(|peer| lost.waits(peer_number(*peer), at))
                .count()
        };
        assert_eq!(
            waiting(
                &mut lost,
                start + ADMIN_LOST_SLOT_WAIT - Duration::from_millis(1)
            ),
            100
        );
        // A tenth of them at a time, not all at once.
        for tenth in 0..10u32 {
            let at = start + ADMIN_LOST_SLOT_WAIT + ADMIN_LOST_SLOT_WAIT_SPREAD * tenth / 10;
            let expected = 100 - 10 * tenth as usize;
            let seen = waiting(&mut lost, at);
            assert!(
                seen.abs_diff(expected) <= 3,
                "{seen} waiting at {tenth}/10, not about {expected}"
            );
        }
        assert_eq!(
            waiting(
                &mut lost,
                start + ADMIN_LOST_SLOT_WAIT + ADMIN_LOST_SLOT_WAIT_SPREAD
            ),
            0
        );
    }

    #[test]
    fn the_memory_of_lost_slots_stays_bounded_and_forgets_after_the_wait() {
        let mut lost = LostSlots::default();
        let start = Instant::now();
        for peer in 0..LOST_SLOTS_REMEMBERED + 100 {
            lost.record(peer_number(peer), start);
        }
        assert_eq!(lost.until.len(), LOST_SLOTS_REMEMBERED);
        assert_eq!(lost.order.len(), LOST_SLOTS_REMEMBERED);
        let last = peer_number(LOST_SLOTS_REMEMBERED + 99);
        assert!(lost.waits(last, start));
        assert!(!lost.waits(peer_number(0), start), "forgotten first");
        let over = start + ADMIN_LOST_SLOT_WAIT + ADMIN_LOST_SLOT_WAIT_SPREAD;
        assert!(!lost.waits(last, over));
        assert!(lost.until.is_empty() && lost.order.is_empty());
        // A peer losing twice is remembered from its newest loss.
        lost.record(last, start);
        lost.record(last, over);
        assert!(lost.waits(last, over + ADMIN_LOST_SLOT_WAIT - Duration::from_millis(1)));
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
