use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};

use super::*;
use crate::framework::{
    Code, CycleState, Filter, NodeScore, PreFilter, PreScore, Score, Snapshot, Status,
};
use crate::plugins::testing::*;

fn with_labels(mut p: Pod, labels: &[(&str, &str)]) -> Pod {
    p.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    p
}

fn constraint(key: &str, skew: i32, when: &str, app: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: when.into(),
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), app.to_string())].into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn spreading(p: Pod, cs: Vec<TopologySpreadConstraint>) -> Pod {
    let mut p = p;
    p.spec.get_or_insert_default().topology_spread_constraints = Some(cs);
    p
}

fn web(name: &str) -> Pod {
    with_labels(pod(name, &[&[]]), &[("app", "web")])
}

fn zoned(name: &str, zone: &str) -> k8s_openapi::api::core::v1::Node {
    labeled(
        node(name, &[("cpu", "4"), ("pods", "110")]),
        &[(LABEL_ZONE, zone), (LABEL_HOSTNAME, name)],
    )
}

fn run_filter(pl: &PodTopologySpread, p: &Pod, snap: &Snapshot) -> Vec<Status> {
    let pi = PodInfo::new(p.clone());
    let mut state = CycleState::default();
    let pre = pl.pre_filter(&mut state, &pi, snap);
    if pre.code() == Code::Skip {
        return snap.nodes.iter().map(|_| Status::success()).collect();
    }
    snap.nodes
        .iter()
        .map(|n| pl.filter(&state, &pi, n))
        .collect()
}

#[test]
fn filter_table() {
    // Zones a, b, c with 2, 1 and 0 web pods.
    let snap = || {
        Snapshot::new(vec![
            node_info(zoned("n1", "a"), vec![web("w1"), web("w2")]),
            node_info(zoned("n2", "b"), vec![web("w3")]),
            node_info(zoned("n3", "c"), vec![]),
            node_info(node("unlabelled", &[("cpu", "4")]), vec![]),
        ])
    };
    let pl = PodTopologySpread::default();
    let ok = String::new();
    let skew = ERR_REASON_CONSTRAINTS_NOT_MATCH.to_string();
    let label = ERR_REASON_NODE_LABEL_NOT_MATCH.to_string();
    let mut min3 = constraint(LABEL_ZONE, 2, "DoNotSchedule", "web");
    min3.min_domains = Some(5);
    let mut selected = spreading(
        web("in"),
        vec![constraint(LABEL_ZONE, 1, "DoNotSchedule", "web")],
    );
    selected.spec.as_mut().unwrap().node_selector =
        Some([(LABEL_ZONE.to_string(), "a".to_string())].into());
    let mut ignoring = selected.clone();
    ignoring
        .spec
        .as_mut()
        .unwrap()
        .topology_spread_constraints
        .as_mut()
        .unwrap()[0]
        .node_affinity_policy = Some("Ignore".into());
    let cases: Vec<(&str, Pod, Vec<String>)> = vec![
        (
            "nodeAffinityPolicy Ignore: every zone counts, zone c's 0 is the minimum",
            ignoring,
            vec![skew.clone(), skew.clone(), ok.clone(), label.clone()],
        ),
        (
            "maxSkew 1 over zones: only the empty zone",
            spreading(
                web("in"),
                vec![constraint(LABEL_ZONE, 1, "DoNotSchedule", "web")],
            ),
            vec![skew.clone(), skew.clone(), ok.clone(), label.clone()],
        ),
        (
            "maxSkew 2 allows zone b too",
            spreading(
                web("in"),
                vec![constraint(LABEL_ZONE, 2, "DoNotSchedule", "web")],
            ),
            vec![skew.clone(), ok.clone(), ok.clone(), label.clone()],
        ),
        (
            "a pod not matching its own selector does not count itself",
            spreading(
                pod("in", &[&[]]),
                vec![constraint(LABEL_ZONE, 2, "DoNotSchedule", "web")],
            ),
            vec![ok.clone(), ok.clone(), ok.clone(), label.clone()],
        ),
        (
            "minDomains above the domain count makes the minimum 0",
            spreading(web("in"), vec![min3]),
            vec![skew.clone(), ok.clone(), ok.clone(), label.clone()],
        ),
        (
            // Zone a alone is a domain, so its 2 pods are the minimum; other
            // zones are left to NodeAffinity's own filter.
            "nodeAffinityPolicy Honor: only zone a is a domain",
            selected,
            vec![ok.clone(), ok.clone(), ok.clone(), label.clone()],
        ),
        (
            "ScheduleAnyway does not filter",
            spreading(
                web("in"),
                vec![constraint(LABEL_ZONE, 1, "ScheduleAnyway", "web")],
            ),
            vec![ok.clone(), ok.clone(), ok.clone(), ok.clone()],
        ),
    ];
    for (name, p, want) in cases {
        let got: Vec<String> = run_filter(&pl, &p, &snap())
            .iter()
            .map(|s| s.message())
            .collect();
        assert_eq!(got, want, "{name}");
    }
    let s = run_filter(
        &pl,
        &spreading(
            web("in"),
            vec![constraint(LABEL_ZONE, 1, "DoNotSchedule", "web")],
        ),
        &snap(),
    );
    assert_eq!(s[3].code(), Code::UnschedulableAndUnresolvable);
    assert_eq!(s[0].code(), Code::Unschedulable);
}

#[test]
fn six_replicas_over_three_zones_land_two_per_zone() {
    // Placing one at a time always on the first feasible node still ends 2/2/2.
    let pl = PodTopologySpread::default();
    let mut infos = vec![
        node_info(zoned("n1", "a"), vec![]),
        node_info(zoned("n2", "b"), vec![]),
        node_info(zoned("n3", "c"), vec![]),
    ];
    for i in 0..6 {
        let p = spreading(
            web(&format!("w{i}")),
            vec![constraint(LABEL_ZONE, 1, "DoNotSchedule", "web")],
        );
        let snap = Snapshot::new(infos.clone());
        let statuses = run_filter(&pl, &p, &snap);
        let first = statuses.iter().position(|s| s.is_success()).unwrap();
        infos[first].add_pod(PodInfo::new(p));
    }
    let counts: Vec<usize> = infos.iter().map(|n| n.pods.len()).collect();
    assert_eq!(counts, vec![2, 2, 2]);
}

#[test]
fn score_prefers_emptier_domains() {
    let pl = PodTopologySpread::default();
    let snap = Snapshot::new(vec![
        node_info(zoned("n1", "a"), vec![]),
        node_info(zoned("n2", "b"), vec![web("w1")]),
        node_info(zoned("n3", "c"), vec![web("w2"), web("w3")]),
    ]);
    let p = spreading(
        web("in"),
        vec![constraint(LABEL_HOSTNAME, 1, "ScheduleAnyway", "web")],
    );
    let pi = PodInfo::new(p);
    let mut state = CycleState::default();
    let feasible: Vec<&NodeInfo> = snap.nodes.iter().map(|n| &**n).collect();
    assert!(pl.pre_score(&mut state, &pi, &feasible, &snap).is_success());
    let mut scores: Vec<NodeScore> = feasible
        .iter()
        .map(|n| NodeScore {
            name: n.name_arc(),
            score: pl.score(&state, &pi, n).unwrap(),
        })
        .collect();
    // Raw: count × ln(3 + 2) rounded: 0, 2, 3.
    assert_eq!(
        scores.iter().map(|s| s.score).collect::<Vec<_>>(),
        vec![0, 2, 3]
    );
    assert!(pl.normalize_score(&state, &pi, &mut scores).is_success());
    assert_eq!(
        scores.iter().map(|s| s.score).collect::<Vec<_>>(),
        vec![100, 33, 0]
    );
}

#[test]
fn system_defaults_apply_only_to_controlled_pods() {
    let pl = PodTopologySpread::default();
    let none = Snapshot::default();
    let plain = PodInfo::new(web("plain"));
    assert!(pl.constraints(&plain, "ScheduleAnyway", &none).is_empty());
    // A Service selecting the pod gives it the defaults too.
    let served = Snapshot::default().with_service_selectors(vec![(
        "default".to_string(),
        BTreeMap::from([("app".to_string(), "web".to_string())]),
    )]);
    let cs = pl.constraints(&plain, "ScheduleAnyway", &served);
    assert_eq!(cs.len(), 2);
    assert!(cs[0].selector.matches(plain.labels()));
    // A Service in another namespace does not.
    let elsewhere = Snapshot::default().with_service_selectors(vec![(
        "other".to_string(),
        BTreeMap::from([("app".to_string(), "web".to_string())]),
    )]);
    assert!(
        pl.constraints(&plain, "ScheduleAnyway", &elsewhere)
            .is_empty()
    );
    let mut owned = web("owned");
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web-1".into(),
        uid: "u".into(),
        controller: Some(true),
        ..Default::default()
    }]);
    let cs = pl.constraints(&PodInfo::new(owned), "ScheduleAnyway", &none);
    let got: Vec<(String, i64)> = cs
        .iter()
        .map(|c| (c.topology_key.clone(), c.max_skew))
        .collect();
    assert_eq!(
        got,
        vec![(LABEL_HOSTNAME.to_string(), 3), (LABEL_ZONE.to_string(), 5)]
    );
    // List defaulting with no constraints disables defaults.
    let listed = PodTopologySpread::new(PodTopologySpreadArgs {
        default_constraints: vec![],
        defaulting_type: Some("List".into()),
    });
    assert!(
        listed
            .constraints(&PodInfo::new(web("x")), "ScheduleAnyway", &none)
            .is_empty()
    );
}

#[test]
fn node_taints_policy_honor_drops_tainted_domains() {
    let snap = Snapshot::new(vec![
        node_info(zoned("n1", "a"), vec![web("w1"), web("w2")]),
        node_info(zoned("n2", "b"), vec![web("w3")]),
        node_info(
            tainted(zoned("n3", "c"), &[("dedicated", "x", "NoSchedule")]),
            vec![],
        ),
    ]);
    let pl = PodTopologySpread::default();
    let ok = String::new();
    let skew = ERR_REASON_CONSTRAINTS_NOT_MATCH.to_string();
    // (policy, expected per node): ignoring taints, zone c's 0 is the minimum;
    // honouring them, zone b's 1 is.
    for (policy, want) in [
        (None, vec![skew.clone(), skew.clone(), ok.clone()]),
        (Some("Honor"), vec![skew.clone(), ok.clone(), ok.clone()]),
    ] {
        let mut c = constraint(LABEL_ZONE, 1, "DoNotSchedule", "web");
        c.node_taints_policy = policy.map(String::from);
        let got: Vec<String> = run_filter(&pl, &spreading(web("in"), vec![c]), &snap)
            .iter()
            .map(|s| s.message())
            .collect();
        assert_eq!(got, want, "{policy:?}");
    }
}
