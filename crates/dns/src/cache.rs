//! NodeLocal DNSCache's cache: whole responses keyed by question, positive
//! answers kept for their smallest TTL capped at `max_ttl` (30 s by default),
//! negative ones (NXDOMAIN, NODATA) for the SOA's minimum capped at
//! `negative_ttl` (5 s), as the CoreDNS cache plugin node-local-dns runs.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{DNSClass, RData, RecordType};

pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(30);
pub const DEFAULT_NEGATIVE_TTL: Duration = Duration::from_secs(5);
/// Entries kept at most (CoreDNS's default capacity is 9984 per kind).
pub const DEFAULT_CAPACITY: usize = 10_000;

/// Time, so tests can move it.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub name: String,
    pub qtype: RecordType,
    pub class: DNSClass,
    /// DNSSEC OK changes the answer upstream gives: cached separately.
    pub dnssec_ok: bool,
}

impl Key {
    /// The key of a request's single question.
    pub fn of(req: &Message) -> Option<Key> {
        let q = req.queries.first()?;
        Some(Key {
            name: q.name().to_ascii().to_ascii_lowercase(),
            qtype: q.query_type(),
            class: q.query_class(),
            dnssec_ok: req.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Records for the question ("success" in CoreDNS's metrics).
    Positive,
    /// NXDOMAIN or NODATA ("denial").
    Negative,
}

struct Entry {
    response: Message,
    stored: Instant,
    ttl: Duration,
    kind: Kind,
}

/// How often a full cache sweeps out expired entries (sweeping is O(entries)).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

struct State {
    entries: HashMap<Key, Entry>,
    last_sweep: Instant,
}

pub struct Cache<C: Clock = SystemClock> {
    state: Mutex<State>,
    max_ttl: Duration,
    negative_ttl: Duration,
    capacity: usize,
    clock: C,
}

impl<C: Clock> Cache<C> {
    pub fn new(max_ttl: Duration, negative_ttl: Duration, capacity: usize, clock: C) -> Self {
        Cache {
            state: Mutex::new(State {
                entries: HashMap::new(),
                last_sweep: clock.now(),
            }),
            max_ttl,
            negative_ttl,
            capacity: capacity.max(1),
            clock,
        }
    }

    /// A fresh response for `key`, its TTLs lowered by the time it has been kept.
    pub fn get(&self, key: &Key) -> Option<(Message, Kind)> {
        let now = self.clock.now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let entry = state.entries.get(key)?;
        let age = now.saturating_duration_since(entry.stored);
        if age >= entry.ttl {
            state.entries.remove(key);
            return None;
        }
        let left = u32::try_from((entry.ttl - age).as_secs()).unwrap_or(u32::MAX);
        let mut msg = entry.response.clone();
        let kind = entry.kind;
        drop(state);
        for r in msg
            .answers
            .iter_mut()
            .chain(msg.authorities.iter_mut())
            .chain(msg.additionals.iter_mut())
        {
            // Never above what upstream said, never above what is left here.
            r.ttl = r.ttl.min(left.max(1));
        }
        Some((msg, kind))
    }

    /// Keeps `response` for `key` when it can be cached; says how.
    pub fn insert(&self, key: Key, response: &Message) -> Option<Kind> {
        let (kind, ttl) = self.lifetime(response)?;
        if ttl.is_zero() {
            return None;
        }
        let now = self.clock.now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.entries.len() >= self.capacity && !state.entries.contains_key(&key) {
            if now.saturating_duration_since(state.last_sweep) >= SWEEP_EVERY {
                state.last_sweep = now;
                state
                    .entries
                    .retain(|_, e| now.saturating_duration_since(e.stored) < e.ttl);
            }
            if state.entries.len() >= self.capacity {
                // Still full: drop an arbitrary entry (CoreDNS evicts at random).
                if let Some(victim) = state.entries.keys().next().cloned() {
                    state.entries.remove(&victim);
                }
            }
        }
        state.entries.insert(
            key,
            Entry {
                response: response.clone(),
                stored: now,
                ttl,
                kind,
            },
        );
        Some(kind)
    }

    pub fn len(&self) -> usize {
        self.state.lock().map(|s| s.entries.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How long `response` may be kept, and as what; None: not cacheable.
    fn lifetime(&self, response: &Message) -> Option<(Kind, Duration)> {
        if response.metadata.truncation {
            return None;
        }
        let rcode = response.metadata.response_code;
        let soa_min = || {
            response
                .authorities
                .iter()
                .find_map(|r| match &r.data {
                    RData::SOA(soa) => Some(r.ttl.min(soa.minimum)),
                    _ => None,
                })
                .map(|s| Duration::from_secs(u64::from(s)))
        };
        match rcode {
            ResponseCode::NoError if !response.answers.is_empty() => {
                let min = response
                    .answers
                    .iter()
                    .chain(response.authorities.iter())
                    .map(|r| r.ttl)
                    .min()
                    .unwrap_or(0);
                Some((
                    Kind::Positive,
                    Duration::from_secs(u64::from(min)).min(self.max_ttl),
                ))
            }
            ResponseCode::NoError | ResponseCode::NXDomain => {
                // Without an SOA, keep it for the negative cap (CoreDNS does the same).
                let ttl = soa_min().unwrap_or(self.negative_ttl);
                Some((Kind::Negative, ttl.min(self.negative_ttl)))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::rdata::{A, SOA};
    use hickory_proto::rr::{Name, Record};
    use std::sync::Arc;

    #[derive(Clone)]
    struct FakeClock(Arc<Mutex<Instant>>);

    impl FakeClock {
        fn advance(&self, d: Duration) {
            *self.0.lock().unwrap() += d;
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            *self.0.lock().unwrap()
        }
    }

    fn key(name: &str) -> Key {
        Key {
            name: name.into(),
            qtype: RecordType::A,
            class: DNSClass::IN,
            dnssec_ok: false,
        }
    }

    fn response(rcode: ResponseCode, answer_ttl: Option<u32>, soa: Option<(u32, u32)>) -> Message {
        let name = Name::from_ascii("web.default.svc.cluster.local.").unwrap();
        let mut m = Message::response(1, hickory_proto::op::OpCode::Query);
        m.metadata.response_code = rcode;
        m.add_query(Query::query(name.clone(), RecordType::A));
        if let Some(ttl) = answer_ttl {
            m.add_answer(Record::from_rdata(
                name.clone(),
                ttl,
                RData::A(A::new(10, 43, 0, 20)),
            ));
        }
        if let Some((ttl, minimum)) = soa {
            let zone = Name::from_ascii("cluster.local.").unwrap();
            let soa = SOA::new(zone.clone(), zone.clone(), 1, 7200, 1800, 86400, minimum);
            m.add_authority(Record::from_rdata(zone, ttl, RData::SOA(soa)));
        }
        m
    }

    fn cache() -> (Cache<FakeClock>, FakeClock) {
        let clock = FakeClock(Arc::new(Mutex::new(Instant::now())));
        let c = Cache::new(DEFAULT_MAX_TTL, DEFAULT_NEGATIVE_TTL, 3, clock.clone());
        (c, clock)
    }

    #[test]
    fn lifetimes() {
        let (c, _) = cache();
        let s = Duration::from_secs;
        let cases = [
            // Positive: the smallest TTL, capped at 30 s.
            (
                response(ResponseCode::NoError, Some(5), None),
                Some((Kind::Positive, s(5))),
            ),
            (
                response(ResponseCode::NoError, Some(300), None),
                Some((Kind::Positive, s(30))),
            ),
            // Negative: the SOA's TTL/minimum, capped at 5 s.
            (
                response(ResponseCode::NXDomain, None, Some((5, 5))),
                Some((Kind::Negative, s(5))),
            ),
            (
                response(ResponseCode::NXDomain, None, Some((3600, 900))),
                Some((Kind::Negative, s(5))),
            ),
            (
                response(ResponseCode::NXDomain, None, Some((60, 2))),
                Some((Kind::Negative, s(2))),
            ),
            (
                response(ResponseCode::NoError, None, Some((30, 30))),
                Some((Kind::Negative, s(5))),
            ),
            (
                response(ResponseCode::NXDomain, None, None),
                Some((Kind::Negative, s(5))),
            ),
            // Errors are not kept.
            (response(ResponseCode::ServFail, None, None), None),
            (response(ResponseCode::Refused, None, None), None),
        ];
        for (i, (msg, want)) in cases.into_iter().enumerate() {
            assert_eq!(c.lifetime(&msg), want, "case {i}");
        }
    }

    #[test]
    fn positive_entries_expire_at_the_cap_and_count_down() {
        let (c, clock) = cache();
        let k = key("web");
        assert_eq!(
            c.insert(k.clone(), &response(ResponseCode::NoError, Some(300), None)),
            Some(Kind::Positive)
        );
        clock.advance(Duration::from_secs(10));
        let (msg, kind) = c.get(&k).expect("hit after 10 s");
        assert_eq!(kind, Kind::Positive);
        assert_eq!(msg.answers[0].ttl, 20);
        clock.advance(Duration::from_secs(19));
        assert_eq!(c.get(&k).expect("hit after 29 s").0.answers[0].ttl, 1);
        clock.advance(Duration::from_secs(1));
        assert!(c.get(&k).is_none(), "expired after 30 s");
        assert!(c.is_empty());
    }

    #[test]
    fn negative_entries_expire_after_five_seconds() {
        let (c, clock) = cache();
        let k = key("nothere");
        c.insert(
            k.clone(),
            &response(ResponseCode::NXDomain, None, Some((3600, 3600))),
        );
        clock.advance(Duration::from_millis(4900));
        let (msg, kind) = c.get(&k).expect("hit before 5 s");
        assert_eq!(kind, Kind::Negative);
        assert_eq!(msg.metadata.response_code, ResponseCode::NXDomain);
        assert!(msg.authorities[0].ttl <= 5);
        clock.advance(Duration::from_millis(100));
        assert!(c.get(&k).is_none(), "expired at 5 s");
    }

    #[test]
    fn full_cache_drops_expired_then_any() {
        let (c, clock) = cache();
        let ok = response(ResponseCode::NoError, Some(30), None);
        let short = response(ResponseCode::NoError, Some(1), None);
        c.insert(key("a"), &ok);
        c.insert(key("b"), &short);
        c.insert(key("c"), &ok);
        clock.advance(Duration::from_secs(2));
        // b has expired: it goes, the live ones stay.
        c.insert(key("d"), &ok);
        assert_eq!(c.len(), 3);
        for k in ["a", "c", "d"] {
            assert!(c.get(&key(k)).is_some(), "{k}");
        }
        // Full of live entries: one of them makes room; the new one is in.
        c.insert(key("e"), &ok);
        assert_eq!(c.len(), 3);
        assert!(c.get(&key("e")).is_some());
        // Replacing a present key never evicts.
        c.insert(key("e"), &ok);
        assert_eq!(c.len(), 3);
    }
}
