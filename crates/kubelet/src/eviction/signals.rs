//! Eviction signals and thresholds (upstream's `pkg/kubelet/eviction/api` and the
//! threshold half of `helpers.go`): parsing the flags, observing each signal in a
//! stats Summary, deciding which thresholds are met, their grace periods and the
//! node conditions they raise. Pure functions over plain data.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use berth_api::quantity::{Format, Quantity};
use chrono::{DateTime, Utc};

use crate::node::{EvictionThreshold, ThresholdValue};
use crate::stats::summary::Summary;
use crate::{Error, Result};

pub use berth_api::duration::parse_go_duration;

/// The signals Berth observes (upstream's `evictionapi.Signal` on Linux, without
/// `allocatableMemory.available` and the split container filesystem).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    MemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    PidAvailable,
}

/// The node conditions the signals raise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Condition {
    MemoryPressure,
    DiskPressure,
    PidPressure,
}

impl Condition {
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::MemoryPressure => "MemoryPressure",
            Condition::DiskPressure => "DiskPressure",
            Condition::PidPressure => "PIDPressure",
        }
    }
}

/// What evicting a pod reclaims for a signal (upstream's `signalToResource`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    Memory,
    EphemeralStorage,
    Inodes,
    Pids,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::EphemeralStorage => "ephemeral-storage",
            Resource::Inodes => "inodes",
            Resource::Pids => "pids",
        }
    }
}

impl Signal {
    pub const ALL: [Signal; 6] = [
        Signal::MemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    pub fn parse(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|x| x.as_str() == s)
    }

    pub fn condition(self) -> Condition {
        match self {
            Signal::MemoryAvailable => Condition::MemoryPressure,
            Signal::PidAvailable => Condition::PidPressure,
            _ => Condition::DiskPressure,
        }
    }

    pub fn resource(self) -> Resource {
        match self {
            Signal::MemoryAvailable => Resource::Memory,
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => Resource::EphemeralStorage,
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => Resource::Inodes,
            Signal::PidAvailable => Resource::Pids,
        }
    }

    /// Quantities of bytes print in binary units, counts in decimal ones.
    fn format(self) -> Format {
        match self.resource() {
            Resource::Memory | Resource::EphemeralStorage => Format::BinarySI,
            _ => Format::DecimalSI,
        }
    }
}

/// One eviction threshold: hard when `grace_period` is zero.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
    pub grace_period: Duration,
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    pub fn is_hard(&self) -> bool {
        self.grace_period.is_zero()
    }
}

/// The `--eviction-*` flags, as given.
#[derive(Clone, Debug, Default)]
pub struct EvictionFlags {
    pub hard: Vec<EvictionThreshold>,
    pub soft: Vec<EvictionThreshold>,
    /// `--eviction-soft-grace-period memory.available=1m30s`.
    pub soft_grace_period: BTreeMap<String, String>,
    /// `--eviction-minimum-reclaim memory.available=0Mi,nodefs.available=500Mi`.
    pub minimum_reclaim: BTreeMap<String, String>,
}

/// Parses `k=v,k2=v2` (the map flags).
pub fn parse_map(s: &str) -> Result<BTreeMap<String, String>> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| Error::Eviction(p.to_string()))
        })
        .collect()
}

fn threshold_value(signal: &str, v: &str) -> Result<ThresholdValue> {
    let t = EvictionThreshold::parse_list(&format!("{signal}<{v}"))?;
    Ok(t.into_iter()
        .next()
        .ok_or_else(|| Error::Eviction(v.to_string()))?
        .value)
}

fn checked(t: &EvictionThreshold) -> Result<Signal> {
    let signal = Signal::parse(&t.signal)
        .ok_or_else(|| Error::Eviction(format!("unsupported eviction signal {}", t.signal)))?;
    match &t.value {
        ThresholdValue::Quantity(q) if q.sign() < 0 => Err(Error::Eviction(format!(
            "eviction threshold {} must be positive: {}",
            t.signal,
            q.canonical()
        ))),
        ThresholdValue::Percentage(p) if *p <= 0.0 => Err(Error::Eviction(format!(
            "eviction percentage threshold {} must be > 0%",
            t.signal
        ))),
        _ => Ok(signal),
    }
}

/// Upstream's `ParseThresholdConfig`: hard thresholds, soft ones each with its
/// grace period, minimum reclaims on both.
pub fn thresholds(flags: &EvictionFlags) -> Result<Vec<Threshold>> {
    let mut out: Vec<Threshold> = Vec::new();
    for (list, soft) in [(&flags.hard, false), (&flags.soft, true)] {
        let mut seen = Vec::new();
        for t in list {
            let signal = checked(t)?;
            if seen.contains(&signal) {
                return Err(Error::Eviction(format!(
                    "found duplicate eviction threshold for signal {}",
                    t.signal
                )));
            }
            seen.push(signal);
            let grace_period = if soft {
                let g = flags.soft_grace_period.get(&t.signal).ok_or_else(|| {
                    Error::Eviction(format!(
                        "grace period must be specified for the soft eviction threshold {}",
                        t.signal
                    ))
                })?;
                let d = parse_go_duration(g)
                    .ok_or_else(|| Error::Eviction(format!("{}={g}", t.signal)))?;
                if d.is_zero() {
                    return Err(Error::Eviction(format!(
                        "grace period must be positive for the soft eviction threshold {}",
                        t.signal
                    )));
                }
                d
            } else {
                Duration::ZERO
            };
            out.push(Threshold {
                signal,
                value: t.value.clone(),
                grace_period,
                min_reclaim: None,
            });
        }
    }
    for (k, v) in &flags.minimum_reclaim {
        let signal = Signal::parse(k)
            .ok_or_else(|| Error::Eviction(format!("unsupported eviction signal {k}")))?;
        let value = threshold_value(k, v)?;
        for t in out.iter_mut().filter(|t| t.signal == signal) {
            t.min_reclaim = Some(value.clone());
        }
    }
    Ok(out)
}

/// One signal's reading: what is available of what capacity, and when.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub available: i64,
    pub capacity: i64,
    pub time: Option<DateTime<Utc>>,
}

pub type Observations = HashMap<Signal, Observation>;

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Upstream's `makeSignalObservations`: memory.available is the node's
/// availableBytes (capacity − the root cgroup's working set) of capacity =
/// available + working set; filesystems from the node and image fs stats;
/// pid.available = max pid − running processes.
pub fn observations(summary: &Summary) -> Observations {
    let mut out = Observations::new();
    let node = &summary.node;
    if let Some(m) = &node.memory
        && let (Some(a), Some(ws)) = (m.available_bytes, m.working_set_bytes)
    {
        out.insert(
            Signal::MemoryAvailable,
            Observation {
                available: i(a),
                capacity: i(a.saturating_add(ws)),
                time: m.time,
            },
        );
    }
    let fs = |out: &mut Observations,
              f: &crate::stats::summary::FsStats,
              bytes: Signal,
              inodes: Signal| {
        if let (Some(a), Some(c)) = (f.available_bytes, f.capacity_bytes) {
            out.insert(
                bytes,
                Observation {
                    available: i(a),
                    capacity: i(c),
                    time: f.time,
                },
            );
        }
        if let (Some(a), Some(c)) = (f.inodes_free, f.inodes) {
            out.insert(
                inodes,
                Observation {
                    available: i(a),
                    capacity: i(c),
                    time: f.time,
                },
            );
        }
    };
    if let Some(f) = &node.fs {
        fs(
            &mut out,
            f,
            Signal::NodeFsAvailable,
            Signal::NodeFsInodesFree,
        );
    }
    if let Some(f) = node.runtime.as_ref().and_then(|r| r.image_fs.as_ref()) {
        fs(
            &mut out,
            f,
            Signal::ImageFsAvailable,
            Signal::ImageFsInodesFree,
        );
    }
    if let Some(r) = &node.rlimit
        && let (Some(max), Some(running)) = (r.max_pid, r.num_of_running_processes)
    {
        out.insert(
            Signal::PidAvailable,
            Observation {
                available: max - running,
                capacity: max,
                time: r.time,
            },
        );
    }
    out
}

/// The amount a threshold names against `capacity` (upstream's
/// `GetThresholdQuantity`; percentages are float32 there).
pub fn threshold_quantity(value: &ThresholdValue, capacity: i64, signal: Signal) -> Quantity {
    match value {
        ThresholdValue::Quantity(q) => q.clone(),
        ThresholdValue::Percentage(p) => Quantity::from_value(
            (capacity as f64 * f64::from(*p as f32)) as i64,
            signal.format(),
        ),
    }
}

/// Indices of the thresholds met by `obs` (upstream's `thresholdsMet`); with
/// `enforce_min_reclaim` a threshold stays met until its minimum reclaim is back.
pub fn thresholds_met(
    all: &[Threshold],
    which: &[usize],
    obs: &Observations,
    enforce_min_reclaim: bool,
) -> Vec<usize> {
    which
        .iter()
        .copied()
        .filter(|&i| {
            let t = &all[i];
            let Some(o) = obs.get(&t.signal) else {
                return false;
            };
            let mut q = threshold_quantity(&t.value, o.capacity, t.signal);
            if enforce_min_reclaim && let Some(m) = &t.min_reclaim {
                q.add(&threshold_quantity(m, o.capacity, t.signal));
            }
            q > Quantity::from_value(o.available, Format::DecimalSI)
        })
        .collect()
}

/// When each met threshold was first met (upstream's `thresholdsFirstObservedAt`).
pub fn first_observed(
    met: &[usize],
    last: &HashMap<usize, Instant>,
    now: Instant,
) -> HashMap<usize, Instant> {
    met.iter()
        .map(|&i| (i, last.get(&i).copied().unwrap_or(now)))
        .collect()
}

/// The thresholds met for at least their grace period.
pub fn met_grace_period(
    all: &[Threshold],
    observed_at: &HashMap<usize, Instant>,
    now: Instant,
) -> Vec<usize> {
    let mut v: Vec<usize> = observed_at
        .iter()
        .filter(|(i, at)| now.saturating_duration_since(**at) >= all[**i].grace_period)
        .map(|(i, _)| *i)
        .collect();
    v.sort_unstable();
    v
}

/// The thresholds whose signal has a newer reading than last time (upstream's
/// `thresholdsUpdatedStats`: the same stale sample never evicts twice).
pub fn updated_stats(
    all: &[Threshold],
    met: &[usize],
    obs: &Observations,
    last: &Observations,
) -> Vec<usize> {
    met.iter()
        .copied()
        .filter(|&i| {
            let s = all[i].signal;
            let Some(o) = obs.get(&s) else { return false };
            match (last.get(&s), o.time) {
                (None, _) | (_, None) => true,
                (Some(l), Some(t)) => l.time.is_none_or(|lt| t > lt),
            }
        })
        .collect()
}

/// The conditions of the met thresholds, each once, in threshold order.
pub fn node_conditions(all: &[Threshold], met: &[usize]) -> Vec<Condition> {
    let mut out = Vec::new();
    for &i in met {
        let c = all[i].signal.condition();
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Conditions seen now, merged with when the others were last seen.
pub fn conditions_last_observed(
    now_seen: &[Condition],
    last: &HashMap<Condition, Instant>,
    now: Instant,
) -> HashMap<Condition, Instant> {
    let mut out: HashMap<Condition, Instant> = now_seen.iter().map(|c| (*c, now)).collect();
    for (c, at) in last {
        out.entry(*c).or_insert(*at);
    }
    out
}

/// The conditions seen within the pressure transition period, sorted.
pub fn conditions_observed_since(
    observed_at: &HashMap<Condition, Instant>,
    period: Duration,
    now: Instant,
) -> Vec<Condition> {
    let mut v: Vec<Condition> = observed_at
        .iter()
        .filter(|(_, at)| now.saturating_duration_since(**at) < period)
        .map(|(c, _)| *c)
        .collect();
    v.sort();
    v
}

/// Memory first, then the rest in their order (upstream's `byEvictionPriority`).
pub fn by_eviction_priority(all: &[Threshold], met: &mut [usize]) {
    met.sort_by_key(|&i| all[i].signal != Signal::MemoryAvailable);
}
