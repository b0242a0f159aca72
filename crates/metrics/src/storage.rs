//! The last two points of every node and container, and the usage between
//! them, as metrics-server's storage keeps them: CPU is a rate over the window
//! between two scrapes (the counters are cumulative), memory the last working
//! set. A node or pod missing from a scrape has no metrics until it is seen
//! twice again; a restarted container (a later start time) starts over.

use std::collections::{BTreeMap, HashMap};

use crate::decode::{Batch, PodKey, Point};

/// A container younger than this has no usable start-time point (upstream's
/// `freshContainerMinMetricsResolution`: the rate would be too noisy).
const FRESH_CONTAINER_MIN_NS: i64 = 10_000_000_000;

/// Usage over a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Nanocores.
    pub cpu: u64,
    /// Bytes.
    pub memory: u64,
    /// The end of the window (nanoseconds since the epoch).
    pub timestamp_ns: i64,
    pub window_ns: i64,
}

/// `resourceUsage`: the rate between two points of the same node or container.
fn usage(last: &Point, prev: &Point) -> Option<Usage> {
    if last.start_ns < prev.start_ns || last.cpu_ns < prev.cpu_ns {
        return None;
    }
    let window_ns = last.timestamp_ns - prev.timestamp_ns;
    if window_ns <= 0 {
        return None;
    }
    let cpu = (last.cpu_ns - prev.cpu_ns) as f64 / (window_ns as f64 / 1e9);
    Some(Usage {
        cpu: cpu as u64,
        memory: last.memory,
        timestamp_ns: last.timestamp_ns,
        window_ns,
    })
}

/// A pod's usage: the earliest container window, and each container's usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUsage {
    pub timestamp_ns: i64,
    pub window_ns: i64,
    pub containers: Vec<(String, Usage)>,
}

#[derive(Debug, Default)]
pub struct Storage {
    resolution_ns: i64,
    nodes_last: HashMap<String, Point>,
    nodes_prev: HashMap<String, Point>,
    pods_last: HashMap<PodKey, BTreeMap<String, Point>>,
    pods_prev: HashMap<PodKey, BTreeMap<String, Point>>,
}

impl Storage {
    /// `resolution` is the scrape interval (`--metric-resolution`).
    pub fn new(resolution: std::time::Duration) -> Self {
        Storage {
            resolution_ns: i64::try_from(resolution.as_nanos()).unwrap_or(i64::MAX),
            ..Default::default()
        }
    }

    /// Whether any node has been stored (metrics-server's readiness).
    pub fn ready(&self) -> bool {
        !self.nodes_last.is_empty()
    }

    /// Stores one scrape of every node (node name → its batch).
    pub fn store(&mut self, batches: Vec<(String, Batch)>) {
        let mut nodes_last = HashMap::new();
        let mut nodes_prev = HashMap::new();
        let mut pods_last = HashMap::new();
        let mut pods_prev = HashMap::new();
        for (node, batch) in batches {
            if let Some(new) = batch.node {
                if let Some(prev) =
                    self.prev_point(self.nodes_last.get(&node), self.nodes_prev.get(&node), &new)
                {
                    nodes_prev.insert(node.clone(), prev);
                }
                nodes_last.insert(node.clone(), new);
            }
            for (key, containers) in batch.pods {
                if pods_last.contains_key(&key) {
                    continue; // duplicate pod point: the first scrape wins
                }
                let mut prev = BTreeMap::new();
                for (name, new) in &containers {
                    let age = new.timestamp_ns - new.start_ns;
                    let fresh = new.start_ns != 0
                        && age > 0
                        && age < self.resolution_ns
                        && age >= FRESH_CONTAINER_MIN_NS;
                    let found = if fresh {
                        // A container that started within the last scrape
                        // interval: its start is a point with no CPU used.
                        Some(Point {
                            timestamp_ns: new.start_ns,
                            cpu_ns: 0,
                            ..*new
                        })
                    } else {
                        let last = self.pods_last.get(&key).and_then(|c| c.get(name));
                        // Restarted since: the stored points are another container's.
                        match last {
                            Some(l) if new.start_ns < l.timestamp_ns => self.prev_point(
                                Some(l),
                                self.pods_prev.get(&key).and_then(|c| c.get(name)),
                                new,
                            ),
                            _ => None,
                        }
                    };
                    if let Some(p) = found {
                        prev.insert(name.clone(), p);
                    }
                }
                if !prev.is_empty() {
                    pods_prev.insert(key.clone(), prev);
                }
                pods_last.insert(key, containers);
            }
        }
        self.nodes_last = nodes_last;
        self.nodes_prev = nodes_prev;
        self.pods_last = pods_last;
        self.pods_prev = pods_prev;
    }

    /// The point to keep as previous for `new`: the stored last point when
    /// `new` is newer, else the stored previous one if still older than `new`.
    fn prev_point(&self, last: Option<&Point>, prev: Option<&Point>, new: &Point) -> Option<Point> {
        let last = last?;
        if new.timestamp_ns > last.timestamp_ns {
            Some(*last)
        } else {
            prev.filter(|p| p.timestamp_ns < new.timestamp_ns).copied()
        }
    }

    pub fn node(&self, name: &str) -> Option<Usage> {
        usage(self.nodes_last.get(name)?, self.nodes_prev.get(name)?)
    }

    /// A pod's usage, once every container of its last scrape has two points.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<PodUsage> {
        let key = (namespace.to_string(), name.to_string());
        let last = self.pods_last.get(&key)?;
        let prev = self.pods_prev.get(&key)?;
        let mut containers = Vec::with_capacity(last.len());
        let mut earliest: Option<(i64, i64)> = None;
        for (c, l) in last {
            let p = prev.get(c)?;
            let Some(u) = usage(l, p) else {
                continue; // skipped, as upstream logs and skips it
            };
            if earliest.is_none_or(|(t, _)| u.timestamp_ns < t) {
                earliest = Some((u.timestamp_ns, u.window_ns));
            }
            containers.push((c.clone(), u));
        }
        let (timestamp_ns, window_ns) = earliest?;
        Some(PodUsage {
            timestamp_ns,
            window_ns,
            containers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const S: i64 = 1_000_000_000;

    fn point(start_s: i64, at_s: i64, cpu_s: f64, memory: u64) -> Point {
        Point {
            start_ns: start_s * S,
            timestamp_ns: at_s * S,
            cpu_ns: (cpu_s * 1e9) as u64,
            memory,
        }
    }

    fn batch(node: Option<Point>, pods: &[(&str, &str, Point)]) -> Batch {
        let mut b = Batch {
            node,
            ..Default::default()
        };
        for (pod, container, p) in pods {
            b.pods
                .entry(("default".to_string(), pod.to_string()))
                .or_default()
                .insert(container.to_string(), *p);
        }
        b
    }

    #[test]
    fn rates_need_two_scrapes() {
        let mut s = Storage::new(Duration::from_secs(15));
        s.store(vec![(
            "n".into(),
            batch(
                Some(point(0, 100, 10.0, 5)),
                &[("web", "c", point(1, 100, 2.0, 7))],
            ),
        )]);
        assert_eq!(s.node("n"), None);
        assert_eq!(s.pod("default", "web"), None);
        assert!(s.ready());
        s.store(vec![(
            "n".into(),
            batch(
                Some(point(0, 115, 25.0, 6)),
                &[("web", "c", point(1, 115, 9.5, 8))],
            ),
        )]);
        let n = s.node("n").unwrap();
        assert_eq!((n.cpu, n.memory, n.window_ns), (1_000_000_000, 6, 15 * S));
        let p = s.pod("default", "web").unwrap();
        assert_eq!(p.window_ns, 15 * S);
        assert_eq!(
            p.containers,
            vec![(
                "c".to_string(),
                Usage {
                    cpu: 500_000_000,
                    memory: 8,
                    timestamp_ns: 115 * S,
                    window_ns: 15 * S
                }
            )]
        );
    }

    #[test]
    fn a_repeated_scrape_keeps_the_previous_point() {
        let mut s = Storage::new(Duration::from_secs(15));
        for (at, cpu) in [(100, 10.0), (115, 25.0), (115, 25.0)] {
            s.store(vec![("n".into(), batch(Some(point(0, at, cpu, 1)), &[]))]);
        }
        assert_eq!(s.node("n").unwrap().cpu, 1_000_000_000);
    }

    #[test]
    fn restarts_and_fresh_containers() {
        let mut s = Storage::new(Duration::from_secs(15));
        s.store(vec![(
            "n".into(),
            batch(None, &[("web", "c", point(1, 100, 50.0, 1))]),
        )]);
        // Restarted at 110: the old point is not a previous one.
        s.store(vec![(
            "n".into(),
            batch(None, &[("web", "c", point(110, 130, 1.0, 1))]),
        )]);
        assert_eq!(s.pod("default", "web"), None);
        // Started 12 s ago (within the resolution, over 10 s): its start counts.
        s.store(vec![(
            "n".into(),
            batch(None, &[("new", "c", point(200, 212, 6.0, 1))]),
        )]);
        let p = s.pod("default", "new").unwrap();
        assert_eq!((p.window_ns, p.containers[0].1.cpu), (12 * S, 500_000_000));
        // Started 5 s ago: too fresh to measure.
        s.store(vec![(
            "n".into(),
            batch(None, &[("newer", "c", point(300, 305, 1.0, 1))]),
        )]);
        assert_eq!(s.pod("default", "newer"), None);
    }

    #[test]
    fn a_pod_waits_for_all_its_containers_and_nodes_drop_out() {
        let mut s = Storage::new(Duration::from_secs(15));
        s.store(vec![(
            "n".into(),
            batch(
                Some(point(0, 100, 1.0, 1)),
                &[("web", "a", point(1, 100, 1.0, 1))],
            ),
        )]);
        s.store(vec![(
            "n".into(),
            batch(
                Some(point(0, 115, 2.0, 1)),
                &[
                    ("web", "a", point(1, 115, 2.0, 1)),
                    ("web", "b", point(1, 115, 2.0, 1)),
                ],
            ),
        )]);
        assert_eq!(s.pod("default", "web"), None, "container b has one point");
        s.store(vec![]);
        assert_eq!(s.node("n"), None);
        assert!(!s.ready());
    }
}
