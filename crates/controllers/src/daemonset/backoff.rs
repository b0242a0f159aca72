//! Back-off for replacing failed daemon pods, per DaemonSet and node
//! (upstream's `failedPodsBackoff`, client-go `flowcontrol.Backoff` with 1 s
//! initial and 15 min maximum): a node whose daemon pod keeps failing (a
//! kubelet rejecting it) is retried ever more slowly instead of hot-looping.

use std::collections::HashMap;
use std::time::{Duration, Instant};

pub const INITIAL: Duration = Duration::from_secs(1);
pub const MAX: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Default)]
pub struct Backoff {
    /// key → (current delay, when it was last bumped).
    entries: HashMap<String, (Duration, Instant)>,
}

impl Backoff {
    /// Time left before the key may act again, if it is backing off.
    pub fn remaining(&self, key: &str, now: Instant) -> Option<Duration> {
        let (delay, at) = self.entries.get(key)?;
        let since = now.saturating_duration_since(*at);
        (since < *delay).then(|| *delay - since)
    }

    /// Records an action: the next one waits twice as long (from 1 s up to
    /// 15 min); an entry idle for twice the maximum starts over.
    pub fn next(&mut self, key: &str, now: Instant) {
        let delay = match self.entries.get(key) {
            Some((d, at)) if now.saturating_duration_since(*at) < 2 * MAX => (*d * 2).min(MAX),
            _ => INITIAL,
        };
        self.entries.insert(key.to_string(), (delay, now));
    }

    /// Drops entries idle for longer than twice the maximum.
    pub fn gc(&mut self, now: Instant) {
        self.entries
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < 2 * MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_failure_and_caps() {
        let mut b = Backoff::default();
        let t0 = Instant::now();
        assert_eq!(b.remaining("ds/n1", t0), None);
        b.next("ds/n1", t0);
        assert_eq!(b.remaining("ds/n1", t0), Some(Duration::from_secs(1)));
        assert_eq!(b.remaining("ds/n1", t0 + Duration::from_secs(1)), None);
        let t1 = t0 + Duration::from_secs(2);
        b.next("ds/n1", t1);
        assert_eq!(b.remaining("ds/n1", t1), Some(Duration::from_secs(2)));
        assert_eq!(b.remaining("ds/n2", t1), None, "keys are independent");
        let mut t = t1;
        for _ in 0..20 {
            t += Duration::from_secs(1);
            b.next("ds/n1", t);
        }
        assert_eq!(b.remaining("ds/n1", t), Some(MAX));
        // Long idle: starts over.
        let later = t + 3 * MAX;
        b.next("ds/n1", later);
        assert_eq!(b.remaining("ds/n1", later), Some(INITIAL));
        b.gc(later + 3 * MAX);
        assert_eq!(b.remaining("ds/n1", later), None);
    }
}
