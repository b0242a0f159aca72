//! The scheduling queue (upstream `internal/queue`): active pods by priority,
//! backoff (1 s doubling to 10 s), and unschedulable pods parked until a
//! cluster change may help them.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Unschedulable pods are retried at least this often (upstream's podMaxInUnschedulablePodsDuration).
pub const MAX_IN_UNSCHEDULABLE: Duration = Duration::from_secs(5 * 60);

#[derive(Clone, Debug)]
struct Entry {
    priority: i32,
    seq: u64,
    attempts: u32,
    last_attempt: Option<Instant>,
}

/// Pure queue state; the loop wraps it in a mutex and a notifier.
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    entries: HashMap<String, Entry>,
    /// Ordered by priority (highest first), then arrival.
    active: BTreeSet<(Reverse<i32>, u64, String)>,
    backoff: HashSet<String>,
    unschedulable: HashSet<String>,
    in_flight: HashSet<String>,
    seq: u64,
    last_stale_check: Option<Instant>,
}

/// Backoff after `attempts` failed attempts: 1 s, 2 s, 4 s, 8 s, 10 s, …
pub fn backoff_duration(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(16);
    INITIAL_BACKOFF.saturating_mul(1 << exp).min(MAX_BACKOFF)
}

impl SchedulingQueue {
    fn activate(&mut self, key: &str) {
        if let Some(e) = self.entries.get(key) {
            self.active
                .insert((Reverse(e.priority), e.seq, key.to_string()));
        }
    }

    fn deactivate(&mut self, key: &str) -> bool {
        match self.entries.get(key) {
            Some(e) => self
                .active
                .remove(&(Reverse(e.priority), e.seq, key.to_string())),
            None => false,
        }
    }

    /// Adds or refreshes a pending pod; a new pod goes straight to active,
    /// an updated parked one gets another try after its backoff.
    pub fn add(&mut self, key: &str, priority: i32) {
        if self.unschedulable.remove(key) {
            self.backoff.insert(key.to_string());
        }
        if let Some(e) = self.entries.get(key) {
            if e.priority != priority {
                let was_active = self.deactivate(key);
                if let Some(e) = self.entries.get_mut(key) {
                    e.priority = priority;
                }
                if was_active {
                    self.activate(key);
                }
            }
            return;
        }
        self.seq += 1;
        self.entries.insert(
            key.to_string(),
            Entry {
                priority,
                seq: self.seq,
                attempts: 0,
                last_attempt: None,
            },
        );
        if !self.in_flight.contains(key) {
            self.activate(key);
        }
    }

    /// Forgets a pod (bound or deleted).
    pub fn delete(&mut self, key: &str) {
        self.deactivate(key);
        self.entries.remove(key);
        self.backoff.remove(key);
        self.unschedulable.remove(key);
    }

    /// Moves backoff pods whose time has come into active, then pops the best.
    pub fn pop(&mut self, now: Instant) -> Option<String> {
        self.flush(now);
        let (_, _, key) = self.active.pop_first()?;
        self.in_flight.insert(key.clone());
        if let Some(e) = self.entries.get_mut(&key) {
            e.attempts += 1;
            e.last_attempt = Some(now);
        }
        Some(key)
    }

    /// The attempt finished: success forgets the pod; otherwise it waits.
    pub fn done(&mut self, key: &str, outcome: Outcome) {
        self.in_flight.remove(key);
        if !self.entries.contains_key(key) {
            return;
        }
        match outcome {
            Outcome::Scheduled => self.delete(key),
            Outcome::Unschedulable => {
                self.unschedulable.insert(key.to_string());
            }
            Outcome::Error => {
                self.backoff.insert(key.to_string());
            }
        }
    }

    /// A binding failed after the pod left the queue: retry it after its backoff.
    pub fn requeue_after_error(&mut self, key: &str, priority: i32) {
        self.in_flight.remove(key);
        if !self.entries.contains_key(key) {
            self.seq += 1;
            self.entries.insert(
                key.to_string(),
                Entry {
                    priority,
                    seq: self.seq,
                    attempts: 1,
                    last_attempt: Some(Instant::now()),
                },
            );
        }
        self.deactivate(key);
        self.unschedulable.remove(key);
        self.backoff.insert(key.to_string());
    }

    /// A node or pod changed: unschedulable pods get another try, after their backoff.
    pub fn move_all_to_active_or_backoff(&mut self) {
        for k in std::mem::take(&mut self.unschedulable) {
            self.backoff.insert(k);
        }
    }

    fn ready_at(&self, key: &str) -> Option<Instant> {
        let e = self.entries.get(key)?;
        Some(e.last_attempt? + backoff_duration(e.attempts))
    }

    fn flush(&mut self, now: Instant) {
        if !self.backoff.is_empty() {
            let ready: Vec<String> = self
                .backoff
                .iter()
                .filter(|k| self.ready_at(k).is_none_or(|t| t <= now))
                .cloned()
                .collect();
            for k in ready {
                self.backoff.remove(&k);
                self.activate(&k);
            }
        }
        // Parked pods are checked for staleness once a second, not per pop.
        if self.unschedulable.is_empty()
            || self
                .last_stale_check
                .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        self.last_stale_check = Some(now);
        let stale: Vec<String> = self
            .unschedulable
            .iter()
            .filter(|k| {
                self.entries
                    .get(*k)
                    .and_then(|e| e.last_attempt)
                    .is_none_or(|t| now.saturating_duration_since(t) >= MAX_IN_UNSCHEDULABLE)
            })
            .cloned()
            .collect();
        for k in stale {
            self.unschedulable.remove(&k);
            self.activate(&k);
        }
    }

    /// When the next backoff pod becomes ready, if any.
    pub fn next_ready(&self) -> Option<Instant> {
        self.backoff.iter().filter_map(|k| self.ready_at(k)).min()
    }

    pub fn len_active(&self) -> usize {
        self.active.len()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Scheduled,
    Unschedulable,
    Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_table() {
        let want = [1, 1, 2, 4, 8, 10, 10];
        for (attempts, secs) in want.iter().enumerate() {
            assert_eq!(
                backoff_duration(attempts as u32),
                Duration::from_secs(*secs),
                "{attempts}"
            );
        }
    }

    #[test]
    fn priority_then_fifo_and_backoff() {
        let mut q = SchedulingQueue::default();
        let t0 = Instant::now();
        q.add("a", 0);
        q.add("b", 10);
        q.add("c", 0);
        assert_eq!(q.pop(t0).as_deref(), Some("b"));
        assert_eq!(q.pop(t0).as_deref(), Some("a"));
        q.done("a", Outcome::Unschedulable);
        assert_eq!(q.pop(t0).as_deref(), Some("c"));
        assert_eq!(q.pop(t0), None);
        // Parked until something changes, then it waits out its 1 s backoff.
        q.move_all_to_active_or_backoff();
        assert_eq!(q.pop(t0), None);
        assert_eq!(q.next_ready(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(q.pop(t0 + Duration::from_secs(1)).as_deref(), Some("a"));
        q.done("a", Outcome::Scheduled);
        q.move_all_to_active_or_backoff();
        assert_eq!(q.pop(t0 + Duration::from_secs(60)), None);
    }

    #[test]
    fn updating_a_parked_pod_retries_it_and_priority_reorders() {
        let mut q = SchedulingQueue::default();
        let t0 = Instant::now();
        q.add("a", 0);
        assert_eq!(q.pop(t0).as_deref(), Some("a"));
        q.done("a", Outcome::Unschedulable);
        q.add("a", 0);
        assert_eq!(q.pop(t0 + Duration::from_secs(1)).as_deref(), Some("a"));
        q.add("x", 0);
        q.add("y", 0);
        q.add("y", 5);
        assert_eq!(q.pop(t0).as_deref(), Some("y"));
        // A failed binding sends the pod back through backoff.
        q.requeue_after_error("y", 5);
        assert_eq!(q.pop(t0).as_deref(), Some("x"));
        assert!(q.next_ready().is_some());
    }
}
