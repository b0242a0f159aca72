//! Which nodes run a daemon pod (upstream's `NodeShouldRunDaemonPod`), and
//! the node-pinning and tolerations a daemon pod gets
//! (`ReplaceDaemonSetPodNodeNameNodeAffinity`, `AddOrUpdateDaemonPodTolerations`).

use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
    Toleration,
};

/// (key, effect) of the tolerations every daemon pod gets; the
/// network-unavailable one only with hostNetwork.
const DAEMON_TOLERATIONS: &[(&str, &str)] = &[
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];
const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

fn exists(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    }
}

/// Adds upstream's daemon tolerations, replacing equal ones already present.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut want: Vec<Toleration> = DAEMON_TOLERATIONS
        .iter()
        .map(|(k, e)| exists(k, e))
        .collect();
    if spec.host_network == Some(true) {
        want.push(exists(NETWORK_UNAVAILABLE, "NoSchedule"));
    }
    let tols = spec.tolerations.get_or_insert_with(Vec::new);
    for t in want {
        let same = |x: &Toleration| {
            x.key == t.key
                && x.operator.as_deref().unwrap_or("Equal") == "Exists"
                && x.value.as_deref().unwrap_or_default().is_empty()
                && x.effect == t.effect
        };
        match tols.iter_mut().find(|x| same(x)) {
            Some(x) => *x = t,
            None => tols.push(t),
        }
    }
}

/// Pins the pod to `node` with a required `matchFields metadata.name In [node]`
/// term, keeping each term's label expressions.
pub fn pin_to_node(spec: &mut PodSpec, node: &str) {
    let field = NodeSelectorRequirement {
        key: "metadata.name".into(),
        operator: "In".into(),
        values: Some(vec![node.into()]),
    };
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let na = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let req = na
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(NodeSelector::default);
    if req.node_selector_terms.is_empty() {
        req.node_selector_terms.push(NodeSelectorTerm::default());
    }
    for term in &mut req.node_selector_terms {
        term.match_fields = Some(vec![field.clone()]);
    }
}

/// The node an unscheduled daemon pod is pinned to (upstream's GetTargetNodeName).
pub fn target_node(spec: &PodSpec) -> Option<String> {
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name" && f.operator == "In")
        .and_then(|f| f.values.as_ref()?.first().cloned())
}

pub use berth_api::taints::tolerates;

use berth_api::nodeselector::term_matches;

/// nodeSelector and required node affinity against the node.
pub fn fits_affinity(spec: &PodSpec, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if let Some(sel) = &spec.node_selector
        && sel.iter().any(|(k, v)| labels.get(k) != Some(v))
    {
        return false;
    }
    let Some(req) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return true;
    };
    req.node_selector_terms
        .iter()
        .any(|t| term_matches(t, &labels, name))
}

/// (should run: a new daemon pod belongs here; should continue running: an
/// existing one may stay). A NoSchedule taint keeps new pods off but lets
/// running ones stay; an untolerated NoExecute taint evicts them.
pub fn should_run(template: &PodSpec, node: &Node) -> (bool, bool) {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if let Some(n) = template.node_name.as_deref().filter(|n| !n.is_empty())
        && n != name
    {
        return (false, false);
    }
    let mut spec = template.clone();
    add_daemon_tolerations(&mut spec);
    pin_to_node(&mut spec, name);
    if !fits_affinity(&spec, node) {
        return (false, false);
    }
    let tols = spec.tolerations.as_deref().unwrap_or_default();
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let untolerated = |effects: &[&str]| {
        taints
            .iter()
            .filter(|t| effects.contains(&t.effect.as_str()))
            .any(|t| !tols.iter().any(|x| tolerates(x, t)))
    };
    if untolerated(&["NoSchedule", "NoExecute"]) {
        return (false, !untolerated(&["NoExecute"]));
    }
    (true, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::nodeselector::requirement_matches;
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(k, v, e)| Taint {
                            key: k.to_string(),
                            value: Some(v.to_string()),
                            effect: e.to_string(),
                            time_added: None,
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn expr(key: &str, op: &str, vals: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(vals.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn with_affinity(terms: Vec<NodeSelectorTerm>) -> PodSpec {
        PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: terms,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn eligibility_table() {
        let plain = PodSpec::default();
        let tolerant = PodSpec {
            tolerations: Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Equal".into()),
                value: Some("infra".into()),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let selected = PodSpec {
            node_selector: Some([("disk".to_string(), "ssd".to_string())].into()),
            ..Default::default()
        };
        let zone_affinity = with_affinity(vec![NodeSelectorTerm {
            match_expressions: Some(vec![expr("zone", "In", &["a", "b"])]),
            ..Default::default()
        }]);
        let pinned = PodSpec {
            node_name: Some("n2".into()),
            ..Default::default()
        };
        let cases: Vec<(&str, &PodSpec, Node, (bool, bool))> = vec![
            ("untainted node", &plain, node("n1", &[], &[]), (true, true)),
            (
                "NoSchedule taint: no new pod, existing stays",
                &plain,
                node("n1", &[], &[("dedicated", "infra", "NoSchedule")]),
                (false, true),
            ),
            (
                "NoExecute taint: evicted",
                &plain,
                node("n1", &[], &[("dedicated", "infra", "NoExecute")]),
                (false, false),
            ),
            (
                "PreferNoSchedule is ignored",
                &plain,
                node("n1", &[], &[("dedicated", "infra", "PreferNoSchedule")]),
                (true, true),
            ),
            (
                "tolerated taint",
                &tolerant,
                node("n1", &[], &[("dedicated", "infra", "NoSchedule")]),
                (true, true),
            ),
            (
                "toleration with another value does not match",
                &tolerant,
                node("n1", &[], &[("dedicated", "gpu", "NoSchedule")]),
                (false, true),
            ),
            (
                "unschedulable taint tolerated by default",
                &plain,
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/unschedulable", "", "NoSchedule")],
                ),
                (true, true),
            ),
            (
                "not-ready NoExecute tolerated by default",
                &plain,
                node(
                    "n1",
                    &[],
                    &[("node.kubernetes.io/not-ready", "", "NoExecute")],
                ),
                (true, true),
            ),
            (
                "network-unavailable needs hostNetwork",
                &plain,
                node("n1", &[], &[(NETWORK_UNAVAILABLE, "", "NoSchedule")]),
                (false, true),
            ),
            (
                "nodeSelector matches",
                &selected,
                node("n1", &[("disk", "ssd")], &[]),
                (true, true),
            ),
            (
                "nodeSelector misses",
                &selected,
                node("n1", &[("disk", "hdd")], &[]),
                (false, false),
            ),
            (
                "affinity matches",
                &zone_affinity,
                node("n1", &[("zone", "b")], &[]),
                (true, true),
            ),
            (
                "affinity misses",
                &zone_affinity,
                node("n1", &[("zone", "c")], &[]),
                (false, false),
            ),
            (
                "nodeName elsewhere",
                &pinned,
                node("n1", &[], &[]),
                (false, false),
            ),
            ("nodeName here", &pinned, node("n2", &[], &[]), (true, true)),
        ];
        for (what, spec, n, want) in cases {
            assert_eq!(should_run(spec, &n), want, "{what}");
        }
        let host_net = PodSpec {
            host_network: Some(true),
            ..Default::default()
        };
        assert_eq!(
            should_run(
                &host_net,
                &node("n1", &[], &[(NETWORK_UNAVAILABLE, "", "NoSchedule")])
            ),
            (true, true)
        );
    }

    #[test]
    fn pinning_keeps_label_terms_and_is_found_again() {
        let mut spec = with_affinity(vec![NodeSelectorTerm {
            match_expressions: Some(vec![expr("zone", "In", &["a"])]),
            ..Default::default()
        }]);
        pin_to_node(&mut spec, "n3");
        assert_eq!(target_node(&spec).as_deref(), Some("n3"));
        assert!(fits_affinity(&spec, &node("n3", &[("zone", "a")], &[])));
        assert!(!fits_affinity(&spec, &node("n2", &[("zone", "a")], &[])));
        assert!(!fits_affinity(&spec, &node("n3", &[("zone", "b")], &[])));
        let mut empty = PodSpec::default();
        pin_to_node(&mut empty, "n1");
        assert!(fits_affinity(&empty, &node("n1", &[], &[])));
    }

    #[test]
    fn daemon_tolerations_are_added_once() {
        let mut spec = PodSpec::default();
        add_daemon_tolerations(&mut spec);
        add_daemon_tolerations(&mut spec);
        let tols = spec.tolerations.unwrap_or_default();
        assert_eq!(tols.len(), DAEMON_TOLERATIONS.len());
        assert!(tols.iter().all(|t| t.operator.as_deref() == Some("Exists")));
    }

    #[test]
    fn gt_lt_operators() {
        let r = expr("cores", "Gt", &["4"]);
        assert!(requirement_matches(&r, Some("8")));
        assert!(!requirement_matches(&r, Some("4")));
        assert!(!requirement_matches(&r, Some("x")));
        assert!(requirement_matches(&expr("cores", "Lt", &["4"]), Some("2")));
    }
}
