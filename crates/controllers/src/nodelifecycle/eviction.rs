//! Taint-based eviction decisions (upstream's taint eviction controller) and
//! the per-zone rate at which nodes get NoExecute taints (upstream's
//! zoneNoExecuteTainter with --node-eviction-rate).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};

pub use berth_api::taints::tolerates;

/// When a pod on a node with these NoExecute taints must go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// No NoExecute taint, or every one tolerated forever.
    Never,
    Now,
    /// After this long (the smallest tolerationSeconds among the tolerations used).
    After(Duration),
}

/// Upstream's processPodOnNode: each taint must be tolerated (by the first
/// toleration that matches it, as getMatchingTolerations); the pod then stays
/// for the smallest tolerationSeconds of those tolerations (none = forever,
/// ≤ 0 = now).
pub fn eviction(taints: &[Taint], tolerations: &[Toleration]) -> Eviction {
    let no_execute: Vec<&Taint> = taints.iter().filter(|t| t.effect == "NoExecute").collect();
    if no_execute.is_empty() {
        return Eviction::Never;
    }
    let mut min: Option<i64> = None;
    for taint in no_execute {
        let Some(t) = tolerations.iter().find(|t| tolerates(t, taint)) else {
            return Eviction::Now;
        };
        if let Some(secs) = t.toleration_seconds {
            if secs <= 0 {
                return Eviction::Now;
            }
            min = Some(min.map_or(secs, |m| m.min(secs)));
        }
    }
    match min {
        None => Eviction::Never,
        Some(secs) => Eviction::After(Duration::from_secs(secs as u64)),
    }
}

/// A zone's health (upstream's ComputeZoneState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneState {
    Normal,
    /// More than 2 nodes and at least the unhealthy threshold of them not ready.
    PartialDisruption,
    /// Every node not ready.
    FullDisruption,
}

/// Upstream's unhealthyZoneThreshold default.
pub const UNHEALTHY_ZONE_THRESHOLD: f64 = 0.55;
/// Upstream's largeClusterSizeThreshold default.
pub const LARGE_CLUSTER_SIZE: usize = 50;

pub fn zone_state(ready: usize, not_ready: usize) -> ZoneState {
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2
        && not_ready as f64 / (ready + not_ready) as f64 >= UNHEALTHY_ZONE_THRESHOLD
    {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

/// The zone a node is in: region and zone labels, as upstream's GetZoneKey.
pub fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get = |k: &str| labels.and_then(|l| l.get(k)).cloned().unwrap_or_default();
    let region = get("topology.kubernetes.io/region");
    let zone = get("topology.kubernetes.io/zone");
    if region.is_empty() && zone.is_empty() {
        String::new()
    } else {
        format!("{region}:\x00:{zone}")
    }
}

/// How fast NoExecute taints may be added in a zone (nodes per second):
/// `--node-eviction-rate` when the zone is healthy; in a partial disruption
/// `--secondary-node-eviction-rate` for large zones and 0 for small ones;
/// nothing while every zone is fully disrupted (the cause is more likely the
/// control plane's network than all the nodes).
pub fn zone_rate(
    state: ZoneState,
    all_zones_down: bool,
    zone_size: usize,
    rate: f64,
    secondary_rate: f64,
) -> f64 {
    if all_zones_down {
        return 0.0;
    }
    match state {
        ZoneState::Normal => rate,
        ZoneState::PartialDisruption if zone_size > LARGE_CLUSTER_SIZE => secondary_rate,
        ZoneState::PartialDisruption => 0.0,
        // A fully disrupted zone among healthy ones: upstream taints at the normal rate.
        ZoneState::FullDisruption => rate,
    }
}

/// One token bucket per zone (upstream's RateLimitedTimedQueue uses
/// flowcontrol's token bucket with burst 1).
#[derive(Debug, Default)]
pub struct ZoneLimiter {
    buckets: BTreeMap<String, (f64, Instant)>,
}

impl ZoneLimiter {
    /// Takes a token for `zone` at `qps`; false when none is available.
    pub fn try_take(&mut self, zone: &str, qps: f64, now: Instant) -> bool {
        if qps <= 0.0 {
            return false;
        }
        let (tokens, last) = self.buckets.entry(zone.to_string()).or_insert((1.0, now));
        *tokens = (*tokens + now.saturating_duration_since(*last).as_secs_f64() * qps).min(1.0);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: (!key.is_empty()).then(|| key.into()),
            operator: (!op.is_empty()).then(|| op.into()),
            value: (!value.is_empty()).then(|| value.into()),
            effect: (!effect.is_empty()).then(|| effect.into()),
            toleration_seconds: secs,
        }
    }

    #[test]
    fn toleration_matching() {
        let t = taint("k", "v", "NoExecute");
        let cases = [
            (
                "exact Equal",
                tol("k", "Equal", "v", "NoExecute", None),
                true,
            ),
            (
                "no operator means Equal",
                tol("k", "", "v", "NoExecute", None),
                true,
            ),
            (
                "wrong value",
                tol("k", "Equal", "w", "NoExecute", None),
                false,
            ),
            (
                "Exists ignores value",
                tol("k", "Exists", "", "NoExecute", None),
                true,
            ),
            (
                "empty effect matches all",
                tol("k", "Exists", "", "", None),
                true,
            ),
            (
                "other effect",
                tol("k", "Exists", "", "NoSchedule", None),
                false,
            ),
            (
                "empty key Exists matches all",
                tol("", "Exists", "", "", None),
                true,
            ),
            (
                "empty key Equal matches nothing",
                tol("", "Equal", "", "", None),
                false,
            ),
            ("other key", tol("j", "Exists", "", "", None), false),
        ];
        for (case, toleration, want) in cases {
            assert_eq!(tolerates(&toleration, &t), want, "{case}");
        }
    }

    #[test]
    fn eviction_times() {
        let unreachable = taint("node.kubernetes.io/unreachable", "", "NoExecute");
        let noschedule = taint("node.kubernetes.io/unreachable", "", "NoSchedule");
        let custom = taint("maintenance", "", "NoExecute");
        let t_unreach = |s| {
            tol(
                "node.kubernetes.io/unreachable",
                "Exists",
                "",
                "NoExecute",
                s,
            )
        };
        let secs = |s| Eviction::After(Duration::from_secs(s));
        let cases: Vec<(&str, Vec<Taint>, Vec<Toleration>, Eviction)> = vec![
            ("no taints", vec![], vec![], Eviction::Never),
            (
                "only NoSchedule",
                vec![noschedule.clone()],
                vec![],
                Eviction::Never,
            ),
            (
                "not tolerated",
                vec![unreachable.clone()],
                vec![],
                Eviction::Now,
            ),
            (
                "admission default 300 s",
                vec![unreachable.clone()],
                vec![t_unreach(Some(300))],
                secs(300),
            ),
            (
                "tolerated forever",
                vec![unreachable.clone()],
                vec![t_unreach(None)],
                Eviction::Never,
            ),
            (
                "zero seconds",
                vec![unreachable.clone()],
                vec![t_unreach(Some(0))],
                Eviction::Now,
            ),
            (
                "one of two taints untolerated",
                vec![unreachable.clone(), custom.clone()],
                vec![t_unreach(Some(5))],
                Eviction::Now,
            ),
            (
                "smallest of the used tolerations",
                vec![unreachable.clone(), custom.clone()],
                vec![
                    t_unreach(Some(30)),
                    tol("maintenance", "Exists", "", "", Some(10)),
                ],
                secs(10),
            ),
            (
                "first matching toleration wins",
                vec![unreachable.clone()],
                vec![t_unreach(Some(3)), t_unreach(Some(300))],
                secs(3),
            ),
        ];
        for (case, taints, tols, want) in cases {
            assert_eq!(eviction(&taints, &tols), want, "{case}");
        }
    }

    #[test]
    fn zone_states_and_rates() {
        // (ready, not ready, state)
        for (ready, not_ready, want) in [
            (3, 0, ZoneState::Normal),
            (1, 2, ZoneState::Normal),
            (2, 3, ZoneState::PartialDisruption),
            (5, 3, ZoneState::Normal),
            (0, 1, ZoneState::FullDisruption),
            (0, 0, ZoneState::Normal),
        ] {
            assert_eq!(zone_state(ready, not_ready), want, "{ready}/{not_ready}");
        }
        assert_eq!(zone_rate(ZoneState::Normal, false, 3, 0.1, 0.01), 0.1);
        assert_eq!(
            zone_rate(ZoneState::PartialDisruption, false, 100, 0.1, 0.01),
            0.01
        );
        assert_eq!(
            zone_rate(ZoneState::PartialDisruption, false, 10, 0.1, 0.01),
            0.0
        );
        assert_eq!(zone_rate(ZoneState::Normal, true, 3, 0.1, 0.01), 0.0);
    }

    #[test]
    fn limiter_allows_a_burst_of_one_then_the_rate() {
        let t0 = Instant::now();
        let mut l = ZoneLimiter::default();
        assert!(l.try_take("z", 0.1, t0));
        assert!(!l.try_take("z", 0.1, t0 + Duration::from_secs(5)));
        assert!(l.try_take("other", 0.1, t0 + Duration::from_secs(5)));
        assert!(l.try_take("z", 0.1, t0 + Duration::from_secs(10)));
        assert!(!l.try_take("z", 0.0, t0 + Duration::from_secs(100)));
    }
}
