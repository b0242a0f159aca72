//! usageNanoCores from two cumulative CPU samples, as upstream's CRI stats
//! provider computes it (`getAndUpdateContainerUsageNanoCores`): the previous
//! sample is kept per container, pod and node; the first sample has no rate, nor
//! has one whose counter went backwards (a restarted container under the same
//! key); entries unseen for 10 minutes are dropped.
//!
//! One difference, because Berth has no eviction manager sampling every 10 s
//! and every summary request updates: a sample less than [`MIN_WINDOW`] after
//! the kept one does not replace it and gets the kept rate, so two scrapers a
//! moment apart do not measure over a sliver.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::runtime::CpuUsage;

/// The shortest window a rate is computed over.
pub const MIN_WINDOW: Duration = Duration::from_secs(1);
/// How long an entry is kept without a new sample (upstream's defaultCachePeriod).
pub const CACHE_PERIOD: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy)]
struct Record {
    sample: CpuUsage,
    nano_cores: Option<u64>,
}

/// The kept samples, by key (`container/<id>`, `pod/<uid>`, `node`).
#[derive(Debug, Default)]
pub struct NanoCoresCache {
    records: HashMap<String, Record>,
}

/// Average cores in use between two samples, in nano-cores; None when the
/// window is empty or the counter went backwards.
pub fn nano_cores(old: &CpuUsage, new: &CpuUsage) -> Option<u64> {
    let window = (new.timestamp - old.timestamp).num_nanoseconds()?;
    if window <= 0 || new.usage_core_nano_seconds < old.usage_core_nano_seconds {
        return None;
    }
    let used = (new.usage_core_nano_seconds - old.usage_core_nano_seconds) as f64;
    Some((used / window as f64 * 1e9) as u64)
}

impl NanoCoresCache {
    /// The rate ending at `sample`, keeping `sample` for the next call.
    pub fn update(&mut self, key: &str, sample: CpuUsage) -> Option<u64> {
        let fresh = Record {
            sample,
            nano_cores: None,
        };
        let Some(kept) = self.records.get(key).copied() else {
            self.records.insert(key.to_string(), fresh);
            return None;
        };
        if sample.usage_core_nano_seconds < kept.sample.usage_core_nano_seconds {
            self.records.insert(key.to_string(), fresh);
            return None;
        }
        let window = (sample.timestamp - kept.sample.timestamp)
            .to_std()
            .unwrap_or_default();
        if window < MIN_WINDOW {
            return kept.nano_cores;
        }
        let rate = nano_cores(&kept.sample, &sample);
        self.records.insert(
            key.to_string(),
            Record {
                sample,
                nano_cores: rate,
            },
        );
        rate
    }

    /// The last rate computed for `key`, without a new sample.
    pub fn get(&self, key: &str) -> Option<u64> {
        self.records.get(key).and_then(|r| r.nano_cores)
    }

    /// Drops entries whose sample is older than [`CACHE_PERIOD`].
    pub fn expire(&mut self, now: DateTime<Utc>) {
        self.records.retain(|_, r| {
            (now - r.sample.timestamp)
                .to_std()
                .is_ok_and(|age| age <= CACHE_PERIOD)
                || r.sample.timestamp > now
        });
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs_milli: i64, usage: u64) -> CpuUsage {
        CpuUsage {
            timestamp: DateTime::from_timestamp_millis(1_796_000_000_000 + secs_milli)
                .unwrap_or_default(),
            usage_core_nano_seconds: usage,
        }
    }

    #[test]
    fn rates_from_successive_samples() {
        // (key, sample) → rate, in order against one cache.
        let steps: Vec<(&str, CpuUsage, Option<u64>)> = vec![
            ("a", s(0, 1_000_000_000), None),
            // Half a core over 10 s.
            ("a", s(10_000, 6_000_000_000), Some(500_000_000)),
            // Another key is independent.
            ("b", s(10_000, 5), None),
            // Too soon: the kept rate, the kept sample.
            ("a", s(10_500, 6_400_000_000), Some(500_000_000)),
            // Measured from the sample at 10 s: 2 cores over 2 s.
            ("a", s(12_000, 10_000_000_000), Some(2_000_000_000)),
            // An idle second.
            ("a", s(13_000, 10_000_000_000), Some(0)),
            // The counter went back (a new container under the key): start over.
            ("a", s(14_000, 100), None),
            ("a", s(15_000, 250_000_100), Some(250_000_000)),
        ];
        let mut c = NanoCoresCache::default();
        for (i, (key, sample, want)) in steps.into_iter().enumerate() {
            assert_eq!(c.update(key, sample), want, "step {i}");
            assert_eq!(c.get(key), want, "step {i} get");
        }
    }

    #[test]
    fn nano_cores_of_a_window() {
        let cases = [
            (s(0, 0), s(1000, 1_000_000_000), Some(1_000_000_000)),
            (s(0, 0), s(4000, 1_000_000_000), Some(250_000_000)),
            (s(0, 5), s(0, 10), None),
            (s(1000, 5), s(0, 10), None),
            (s(0, 10), s(1000, 5), None),
        ];
        for (old, new, want) in cases {
            assert_eq!(nano_cores(&old, &new), want, "{old:?} → {new:?}");
        }
    }

    #[test]
    fn old_entries_expire() {
        let mut c = NanoCoresCache::default();
        c.update("old", s(0, 1));
        c.update("new", s(590_000, 1));
        c.expire(s(601_000, 0).timestamp);
        assert_eq!(c.len(), 1);
        assert_eq!(c.update("old", s(602_000, 2)), None, "starts over");
    }
}
