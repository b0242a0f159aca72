//! Which pod goes first (the ranking half of upstream's `helpers.go`): for memory,
//! pods whose usage exceeds their requests, then lower Priority, then the larger
//! usage above requests; for disk the same on ephemeral storage or inodes; for
//! pids Priority then process count. A pod without stats goes first.

use std::cmp::Ordering;
use std::collections::HashMap;

use berth_api::quantity::{Format, Quantity};
use k8s_openapi::api::core::v1::{Container, Pod};

use super::signals::{Resource, Signal};
use crate::stats::summary::PodStats;

/// `scheduling.k8s.io` SystemCriticalPriority: pods at or above it are never evicted.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// The stats of the pods, by uid.
pub type PodStatsByUid<'a> = HashMap<&'a str, &'a PodStats>;

pub fn stats_by_uid(pods: &[PodStats]) -> PodStatsByUid<'_> {
    pods.iter().map(|p| (p.pod_ref.uid.as_str(), p)).collect()
}

pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// Upstream's `IsCriticalPod`: static and mirror pods, and system-critical priority.
pub fn is_critical(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let static_or_mirror = annotations.is_some_and(|a| {
        a.contains_key("kubernetes.io/config.mirror")
            || a.get("kubernetes.io/config.source")
                .is_some_and(|s| s != "api")
    });
    static_or_mirror || priority(pod) >= SYSTEM_CRITICAL_PRIORITY
}

fn request_of(c: &Container, resource: &str) -> Option<Quantity> {
    let r = c.resources.as_ref()?.requests.as_ref()?.get(resource)?;
    Quantity::parse(&r.0).ok()
}

/// A container's request for `resource` (zero when unset).
pub fn container_request(c: &Container, resource: &str) -> Quantity {
    request_of(c, resource).unwrap_or_else(Quantity::zero)
}

/// The pod's effective request (upstream's `GetResourceRequestQuantity`): the sum
/// of its containers and sidecars, or the largest init container with the
/// sidecars started before it if larger, plus overhead; pod-level resources win.
pub fn pod_request(pod: &Pod, resource: &str) -> Quantity {
    let Some(spec) = pod.spec.as_ref() else {
        return Quantity::zero();
    };
    if let Some(q) = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource))
        .and_then(|q| Quantity::parse(&q.0).ok())
    {
        return q;
    }
    let mut sum = Quantity::zero();
    for c in &spec.containers {
        sum.add(&container_request(c, resource));
    }
    let mut sidecars = Quantity::zero();
    let mut init_max = Quantity::zero();
    for c in spec.init_containers.iter().flatten() {
        let r = container_request(c, resource);
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&r);
            sum.add(&r);
        } else {
            let mut with = sidecars.clone();
            with.add(&r);
            if with > init_max {
                init_max = with;
            }
        }
    }
    let mut out = if init_max > sum { init_max } else { sum };
    if let Some(o) = spec
        .overhead
        .as_ref()
        .and_then(|o| o.get(resource))
        .and_then(|q| Quantity::parse(&q.0).ok())
    {
        out.add(&o);
    }
    out
}

fn bytes(v: u64) -> Quantity {
    Quantity::from_value(i64::try_from(v).unwrap_or(i64::MAX), Format::BinarySI)
}

/// A pod's usage of what a signal reclaims.
pub fn usage(stats: &PodStats, resource: Resource) -> Quantity {
    match resource {
        Resource::Memory => bytes(
            stats
                .memory
                .as_ref()
                .and_then(|m| m.working_set_bytes)
                .unwrap_or(0),
        ),
        Resource::EphemeralStorage => bytes(
            stats
                .ephemeral_storage
                .as_ref()
                .and_then(|f| f.used_bytes)
                .unwrap_or(0),
        ),
        Resource::Inodes => Quantity::from_value(
            stats
                .ephemeral_storage
                .as_ref()
                .and_then(|f| f.inodes_used)
                .map(|v| i64::try_from(v).unwrap_or(i64::MAX))
                .unwrap_or(0),
            Format::DecimalSI,
        ),
        Resource::Pids => Quantity::from_value(
            stats
                .process_stats
                .as_ref()
                .and_then(|p| p.process_count)
                .map(|v| i64::try_from(v).unwrap_or(i64::MAX))
                .unwrap_or(0),
            Format::DecimalSI,
        ),
    }
}

/// The request a resource's usage is weighed against (inodes and pids have none;
/// upstream's disk ranking subtracts the ephemeral-storage request from both).
fn request_for(pod: &Pod, resource: Resource) -> Quantity {
    match resource {
        Resource::Memory => pod_request(pod, "memory"),
        Resource::EphemeralStorage | Resource::Inodes => pod_request(pod, "ephemeral-storage"),
        Resource::Pids => Quantity::zero(),
    }
}

/// `true` before `false` (upstream's `cmpBool`).
fn first_if(a: bool, b: bool) -> Ordering {
    b.cmp(&a)
}

/// Orders `pods` for eviction in response to `signal`, first to go first.
pub fn rank(pods: &mut [&Pod], signal: Signal, stats: &PodStatsByUid<'_>) {
    let resource = signal.resource();
    // Each pod's keys once: (stats missing, exceeds its request, priority, usage
    // above its request), compared in upstream's order.
    struct Key {
        no_stats: bool,
        exceeds: bool,
        priority: i32,
        above: Quantity,
    }
    let key = |p: &Pod| {
        let Some(s) = stats.get(uid(p)).copied() else {
            return Key {
                no_stats: true,
                exceeds: false,
                priority: priority(p),
                above: Quantity::zero(),
            };
        };
        let used = usage(s, resource);
        let request = request_for(p, resource);
        // Inodes are weighed against an inodes request (none), like upstream.
        let exceeds = if resource == Resource::Inodes {
            used > pod_request(p, "inodes")
        } else {
            used > request
        };
        let mut above = used;
        if resource != Resource::Pids {
            above.sub(&request);
        }
        Key {
            no_stats: false,
            exceeds,
            priority: priority(p),
            above,
        }
    };
    let mut keyed: Vec<(Key, &Pod)> = pods.iter().map(|p| (key(p), *p)).collect();
    keyed.sort_by(|(a, _), (b, _)| {
        let ns = first_if(a.no_stats, b.no_stats);
        if ns != Ordering::Equal || a.no_stats {
            return ns;
        }
        match resource {
            // The larger process count first.
            Resource::Pids => a
                .priority
                .cmp(&b.priority)
                .then_with(|| b.above.cmp(&a.above)),
            _ => first_if(a.exceeds, b.exceeds)
                .then_with(|| a.priority.cmp(&b.priority))
                .then_with(|| b.above.cmp(&a.above)),
        }
    });
    for (slot, (_, p)) in pods.iter_mut().zip(keyed) {
        *slot = p;
    }
}
