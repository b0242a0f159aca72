//! Node health as upstream's node lifecycle controller judges it: when the
//! kubelet last proved it was alive (its Ready condition's heartbeat or its
//! Lease's renewTime, as observed on OUR clock), the conditions it gets when
//! it stays silent past the grace period, and the taints its state implies.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
pub const TAINT_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
pub const TAINT_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
pub const TAINT_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

/// The conditions the controller takes over when the kubelet goes silent.
pub const MONITORED_CONDITIONS: [&str; 4] =
    ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// Every taint key this controller owns: it adds and removes only these.
const MANAGED: [&str; 7] = [
    TAINT_NOT_READY,
    TAINT_UNREACHABLE,
    TAINT_UNSCHEDULABLE,
    TAINT_MEMORY_PRESSURE,
    TAINT_DISK_PRESSURE,
    TAINT_PID_PRESSURE,
    TAINT_NETWORK_UNAVAILABLE,
];

/// What the controller remembers of a node (upstream's nodeHealthData).
#[derive(Debug, Clone)]
pub struct Observed {
    /// When we last saw proof of life.
    pub probe: Instant,
    /// The Ready condition's lastHeartbeatTime as last seen.
    pub heartbeat: Option<Timestamp>,
    /// The Lease's renewTime as last seen.
    pub lease_renew: Option<Timestamp>,
}

impl Observed {
    /// First sight of a node: it gets a full grace period from now.
    pub fn new(now: Instant, heartbeat: Option<Timestamp>, lease_renew: Option<Timestamp>) -> Self {
        Observed {
            probe: now,
            heartbeat,
            lease_renew,
        }
    }

    /// Records what the node and its Lease show now; a new heartbeat or a newer
    /// renewTime is proof of life.
    pub fn observe(
        &mut self,
        now: Instant,
        heartbeat: Option<Timestamp>,
        lease_renew: Option<Timestamp>,
    ) {
        if heartbeat != self.heartbeat {
            self.heartbeat = heartbeat;
            self.probe = now;
        }
        if lease_renew.is_some_and(|r| self.lease_renew.is_none_or(|seen| r > seen)) {
            self.lease_renew = lease_renew;
            self.probe = now;
        }
    }

    pub fn silent_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.probe)
    }
}

pub fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The Ready condition's status ("True", "False", "Unknown"); a node that never
/// posted one counts as "Unknown".
pub fn ready_status(node: &Node) -> &str {
    condition(node, "Ready").map_or("Unknown", |c| c.status.as_str())
}

pub fn heartbeat(node: &Node) -> Option<Timestamp> {
    condition(node, "Ready").and_then(|c| c.last_heartbeat_time.as_ref().map(|t| t.0))
}

/// The grace period a node gets: the startup grace until it has ever posted
/// a Ready condition, then the monitor grace.
pub fn grace_period(node: &Node, startup: Duration, monitor: Duration) -> Duration {
    if condition(node, "Ready").is_none() {
        startup
    } else {
        monitor
    }
}

/// The conditions to post for a node silent past its grace period (upstream's
/// tryUpdateNodeHealth): every monitored condition not already Unknown becomes
/// Unknown, keeping its heartbeat. Empty when nothing changes.
pub fn unknown_conditions(node: &Node, now: Timestamp) -> Vec<NodeCondition> {
    let created = node.metadata.creation_timestamp.clone();
    MONITORED_CONDITIONS
        .iter()
        .filter_map(|&type_| match condition(node, type_) {
            None => Some(NodeCondition {
                type_: type_.into(),
                status: "Unknown".into(),
                reason: Some("NodeStatusNeverUpdated".into()),
                message: Some("Kubelet never posted node status.".into()),
                last_heartbeat_time: created.clone(),
                last_transition_time: Some(Time(now)),
            }),
            Some(c) if c.status != "Unknown" => Some(NodeCondition {
                status: "Unknown".into(),
                reason: Some("NodeStatusUnknown".into()),
                message: Some("Kubelet stopped posting node status.".into()),
                last_transition_time: Some(Time(now)),
                ..c.clone()
            }),
            Some(_) => None,
        })
        .collect()
}

fn no_schedule(key: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: "NoSchedule".into(),
        value: None,
        time_added: None,
    }
}

/// The NoSchedule taints the node's state implies (upstream's
/// doNoScheduleTaintingPass): Ready False/Unknown, pressure conditions,
/// NetworkUnavailable, spec.unschedulable.
pub fn no_schedule_taints(node: &Node) -> Vec<Taint> {
    let mut out = Vec::new();
    match ready_status(node) {
        "False" => out.push(no_schedule(TAINT_NOT_READY)),
        "Unknown" => out.push(no_schedule(TAINT_UNREACHABLE)),
        _ => {}
    }
    for (type_, key) in [
        ("MemoryPressure", TAINT_MEMORY_PRESSURE),
        ("DiskPressure", TAINT_DISK_PRESSURE),
        ("PIDPressure", TAINT_PID_PRESSURE),
        ("NetworkUnavailable", TAINT_NETWORK_UNAVAILABLE),
    ] {
        if condition(node, type_).is_some_and(|c| c.status == "True") {
            out.push(no_schedule(key));
        }
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        out.push(no_schedule(TAINT_UNSCHEDULABLE));
    }
    out
}

/// The NoExecute taint key the node's Ready status implies, if any.
pub fn no_execute_key(node: &Node) -> Option<&'static str> {
    match ready_status(node) {
        "False" => Some(TAINT_NOT_READY),
        "Unknown" => Some(TAINT_UNREACHABLE),
        _ => None,
    }
}

/// The node's taints with the managed ones replaced by `no_schedule` plus
/// `no_execute` (a taint already present keeps its timeAdded); others are kept
/// as they are. `None` when nothing changes.
pub fn reconcile_taints(
    node: &Node,
    no_schedule: Vec<Taint>,
    no_execute: Option<&str>,
    now: Timestamp,
) -> Option<Vec<Taint>> {
    let current: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let mut desired: Vec<Taint> = current
        .iter()
        .filter(|t| !MANAGED.contains(&t.key.as_str()))
        .cloned()
        .collect();
    let existing = |key: &str, effect: &str| {
        current
            .iter()
            .find(|t| t.key == key && t.effect == effect)
            .cloned()
    };
    for t in no_schedule {
        desired.push(existing(&t.key, &t.effect).unwrap_or(t));
    }
    if let Some(key) = no_execute {
        desired.push(existing(key, "NoExecute").unwrap_or_else(|| Taint {
            key: key.into(),
            effect: "NoExecute".into(),
            value: None,
            time_added: Some(Time(now)),
        }));
    }
    let same = desired.len() == current.len() && desired.iter().all(|d| current.contains(d));
    (!same).then_some(desired)
}

/// Whether the node carries a NoExecute taint with this key.
pub fn has_no_execute(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key && t.effect == "NoExecute"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cond(type_: &str, status: &str) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some("KubeletReady".into()),
            message: Some("kubelet is posting ready status".into()),
            last_heartbeat_time: Some(Time(ts("2026-01-01T00:00:00Z"))),
            last_transition_time: Some(Time(ts("2026-01-01T00:00:00Z"))),
        }
    }

    fn node(conds: &[(&str, &str)], taints: Vec<Taint>, unschedulable: bool) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n".into()),
                creation_timestamp: Some(Time(ts("2025-12-31T00:00:00Z"))),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(taints),
                unschedulable: unschedulable.then_some(true),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(conds.iter().map(|(t, s)| cond(t, s)).collect()),
                ..Default::default()
            }),
        }
    }

    fn keys(ts: &[Taint]) -> Vec<String> {
        ts.iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    }

    #[test]
    fn proof_of_life_is_a_new_heartbeat_or_a_newer_lease() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(30);
        let hb = Some(ts("2026-01-01T00:00:00Z"));
        let renew = Some(ts("2026-01-01T00:00:10Z"));
        // (case, heartbeat seen now, renewTime seen now, probe moves)
        let cases = [
            ("nothing new", hb, renew, false),
            ("lease renewed", hb, Some(ts("2026-01-01T00:00:20Z")), true),
            (
                "older lease (clock went back) is no proof",
                hb,
                Some(ts("2026-01-01T00:00:05Z")),
                false,
            ),
            ("lease gone", hb, None, false),
            (
                "status heartbeat",
                Some(ts("2026-01-01T00:00:30Z")),
                renew,
                true,
            ),
        ];
        for (case, h, r, moves) in cases {
            let mut o = Observed::new(t0, hb, renew);
            o.observe(later, h, r);
            assert_eq!(o.probe == later, moves, "{case}");
            assert_eq!(
                o.silent_for(later + Duration::from_secs(5)) == Duration::from_secs(5),
                moves,
                "{case}"
            );
        }
    }

    #[test]
    fn silent_nodes_get_unknown_conditions() {
        let now = ts("2026-01-01T00:05:00Z");
        let n = node(
            &[
                ("Ready", "True"),
                ("MemoryPressure", "False"),
                ("DiskPressure", "Unknown"),
            ],
            vec![],
            false,
        );
        let got = unknown_conditions(&n, now);
        let summary: Vec<(&str, &str, &str)> = got
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_deref().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("Ready", "Unknown", "NodeStatusUnknown"),
                ("MemoryPressure", "Unknown", "NodeStatusUnknown"),
                ("PIDPressure", "Unknown", "NodeStatusNeverUpdated"),
            ]
        );
        assert_eq!(
            got[0].message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert_eq!(
            got[2].message.as_deref(),
            Some("Kubelet never posted node status.")
        );
        // The heartbeat is kept (it is when the kubelet last spoke); the transition is now.
        assert_eq!(
            got[0].last_heartbeat_time,
            Some(Time(ts("2026-01-01T00:00:00Z")))
        );
        assert_eq!(got[0].last_transition_time, Some(Time(now)));
        assert_eq!(got[2].last_heartbeat_time, n.metadata.creation_timestamp);
        // Already all Unknown: nothing to post.
        let all = node(
            &[
                ("Ready", "Unknown"),
                ("MemoryPressure", "Unknown"),
                ("DiskPressure", "Unknown"),
                ("PIDPressure", "Unknown"),
            ],
            vec![],
            false,
        );
        assert!(unknown_conditions(&all, now).is_empty());
    }

    /// (case, conditions, existing taints, unschedulable, want taints or None = unchanged)
    type TaintCase = (
        &'static str,
        Vec<(&'static str, &'static str)>,
        Vec<Taint>,
        bool,
        Option<Vec<&'static str>>,
    );

    #[test]
    fn taints_follow_the_node_state() {
        let now = ts("2026-01-01T00:05:00Z");
        let foreign = Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        };
        let old_unreachable = Taint {
            key: TAINT_UNREACHABLE.into(),
            effect: "NoExecute".into(),
            value: None,
            time_added: Some(Time(ts("2026-01-01T00:01:00Z"))),
        };
        // (case, conditions, existing taints, unschedulable, want taints or None = unchanged)
        let cases: Vec<TaintCase> = vec![
            (
                "healthy",
                vec![("Ready", "True")],
                vec![foreign.clone()],
                false,
                None,
            ),
            (
                "unreachable",
                vec![("Ready", "Unknown")],
                vec![foreign.clone()],
                false,
                Some(vec![
                    "dedicated:NoSchedule",
                    "node.kubernetes.io/unreachable:NoSchedule",
                    "node.kubernetes.io/unreachable:NoExecute",
                ]),
            ),
            (
                "not ready swaps unreachable for not-ready",
                vec![("Ready", "False")],
                vec![old_unreachable.clone()],
                false,
                Some(vec![
                    "node.kubernetes.io/not-ready:NoSchedule",
                    "node.kubernetes.io/not-ready:NoExecute",
                ]),
            ),
            (
                "recovered: managed taints removed, others kept",
                vec![("Ready", "True")],
                vec![
                    foreign.clone(),
                    old_unreachable.clone(),
                    no_schedule(TAINT_UNREACHABLE),
                ],
                false,
                Some(vec!["dedicated:NoSchedule"]),
            ),
            (
                "pressure and cordon",
                vec![
                    ("Ready", "True"),
                    ("MemoryPressure", "True"),
                    ("DiskPressure", "False"),
                ],
                vec![],
                true,
                Some(vec![
                    "node.kubernetes.io/memory-pressure:NoSchedule",
                    "node.kubernetes.io/unschedulable:NoSchedule",
                ]),
            ),
        ];
        for (case, conds, taints, unsched, want) in cases {
            let n = node(&conds, taints, unsched);
            let got = reconcile_taints(&n, no_schedule_taints(&n), no_execute_key(&n), now);
            assert_eq!(
                got.as_deref().map(keys),
                want.map(|w| w.iter().map(|s| s.to_string()).collect()),
                "{case}"
            );
        }
        // A NoExecute taint already there keeps its timeAdded.
        let n = node(
            &[("Ready", "Unknown")],
            vec![old_unreachable.clone()],
            false,
        );
        let got = reconcile_taints(&n, no_schedule_taints(&n), no_execute_key(&n), now).unwrap();
        assert!(got.contains(&old_unreachable));
    }
}
