use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::*;
use crate::framework::{
    Code, CycleState, Filter, NodeInfo, NodeScore, PodInfo, PreFilter, PreScore, Score, Snapshot,
    Status,
};
use crate::plugins::testing::*;

const HOST: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

fn app(name: &str, app: &str) -> Pod {
    let mut p = pod(name, &[&[]]);
    p.metadata.labels = Some(BTreeMap::from([("app".to_string(), app.to_string())]));
    p
}

fn term(app: &str, key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), app.to_string())])),
            ..Default::default()
        }),
        topology_key: key.into(),
        ..Default::default()
    }
}

fn with_affinity(mut p: Pod, a: Affinity) -> Pod {
    p.spec.get_or_insert_default().affinity = Some(a);
    p
}

fn required_anti(p: Pod, t: PodAffinityTerm) -> Pod {
    with_affinity(
        p,
        Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![t]),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
}

fn required(p: Pod, t: PodAffinityTerm) -> Pod {
    with_affinity(
        p,
        Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![t]),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
}

fn host(name: &str, zone: &str) -> k8s_openapi::api::core::v1::Node {
    labeled(node(name, &[("cpu", "4")]), &[(HOST, name), (ZONE, zone)])
}

fn filter_all(p: &Pod, snap: &Snapshot) -> Vec<Status> {
    let pl = InterPodAffinity::default();
    let pi = PodInfo::new(p.clone());
    let mut state = CycleState::default();
    if pl.pre_filter(&mut state, &pi, snap).code() == Code::Skip {
        return snap.nodes.iter().map(|_| Status::success()).collect();
    }
    snap.nodes
        .iter()
        .map(|n| pl.filter(&state, &pi, n))
        .collect()
}

#[test]
fn filter_table() {
    let ok = String::new();
    let anti = ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH.to_string();
    let aff = ERR_REASON_AFFINITY_RULES_NOT_MATCH.to_string();
    let existing = ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH.to_string();
    let mut other_ns = term("web", HOST);
    other_ns.namespaces = Some(vec!["other".into()]);
    let mut all_ns = term("web", HOST);
    all_ns.namespace_selector = Some(LabelSelector::default());
    let mut web_elsewhere = app("w-other", "web");
    web_elsewhere.metadata.namespace = Some("other".into());
    // n1 (zone a) runs web and db, n2 (zone a) a guard, n3 (zone b) nothing.
    let snap = || {
        Snapshot::new(vec![
            node_info(host("n1", "a"), vec![app("w1", "web"), app("d1", "db")]),
            node_info(
                host("n2", "a"),
                vec![required_anti(app("guard", "guard"), term("web", HOST))],
            ),
            node_info(host("n3", "b"), vec![web_elsewhere.clone()]),
        ])
    };
    let cases: Vec<(&str, Pod, Vec<String>)> = vec![
        (
            "required anti-affinity on hostname",
            required_anti(app("in", "web"), term("web", HOST)),
            vec![anti.clone(), existing.clone(), ok.clone()],
        ),
        (
            "required anti-affinity on zone",
            required_anti(app("in", "x"), term("web", ZONE)),
            vec![anti.clone(), anti.clone(), ok.clone()],
        ),
        (
            "required affinity to db's zone",
            required(app("in", "x"), term("db", ZONE)),
            vec![ok.clone(), ok.clone(), aff.clone()],
        ),
        (
            "affinity to nothing existing, not matching itself",
            required(app("in", "x"), term("cache", HOST)),
            vec![aff.clone(), aff.clone(), aff.clone()],
        ),
        (
            "the first pod of a self-affine group goes anywhere",
            required(app("in", "cache"), term("cache", HOST)),
            vec![ok.clone(), ok.clone(), ok.clone()],
        ),
        (
            "existing pod's anti-affinity rejects a matching newcomer",
            app("in", "web"),
            vec![ok.clone(), existing.clone(), ok.clone()],
        ),
        (
            "namespaces: a term for another namespace ignores default's pods",
            required_anti(app("in", "x"), other_ns),
            vec![ok.clone(), ok.clone(), anti.clone()],
        ),
        (
            "empty namespaceSelector matches every namespace",
            required_anti(app("in", "x"), all_ns),
            vec![anti.clone(), ok.clone(), anti.clone()],
        ),
    ];
    for (name, p, want) in cases {
        let got: Vec<String> = filter_all(&p, &snap())
            .iter()
            .map(|s| s.message())
            .collect();
        assert_eq!(got, want, "{name}");
    }
    let s = filter_all(&required(app("in", "x"), term("db", ZONE)), &snap());
    assert_eq!(s[2].code(), Code::UnschedulableAndUnresolvable);
    let s = filter_all(&required_anti(app("in", "web"), term("web", HOST)), &snap());
    assert_eq!(s[0].code(), Code::Unschedulable);
}

fn scores(pl: &InterPodAffinity, p: &Pod, snap: &Snapshot) -> Option<Vec<i64>> {
    let pi = PodInfo::new(p.clone());
    let mut state = CycleState::default();
    let feasible: Vec<&NodeInfo> = snap.nodes.iter().map(|n| &**n).collect();
    if pl.pre_score(&mut state, &pi, &feasible, snap).code() == Code::Skip {
        return None;
    }
    let mut list: Vec<NodeScore> = feasible
        .iter()
        .map(|n| NodeScore {
            name: n.name_arc(),
            score: pl.score(&state, &pi, n).unwrap(),
        })
        .collect();
    assert!(pl.normalize_score(&state, &pi, &mut list).is_success());
    Some(list.into_iter().map(|s| s.score).collect())
}

fn preferred(p: Pod, t: PodAffinityTerm, weight: i32, anti: bool) -> Pod {
    let w = Some(vec![WeightedPodAffinityTerm {
        weight,
        pod_affinity_term: t,
    }]);
    with_affinity(
        p,
        if anti {
            Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    preferred_during_scheduling_ignored_during_execution: w,
                    ..Default::default()
                }),
                ..Default::default()
            }
        } else {
            Affinity {
                pod_affinity: Some(PodAffinity {
                    preferred_during_scheduling_ignored_during_execution: w,
                    ..Default::default()
                }),
                ..Default::default()
            }
        },
    )
}

#[test]
fn score_table() {
    let snap = Snapshot::new(vec![
        node_info(host("n1", "a"), vec![app("d1", "db")]),
        node_info(host("n2", "a"), vec![]),
        node_info(
            host("n3", "b"),
            vec![required(app("needs-web", "x"), term("web", HOST))],
        ),
    ]);
    let pl = InterPodAffinity::default();
    let cases: Vec<(&str, Pod, Option<Vec<i64>>)> = vec![
        (
            "preferred affinity to db on hostname",
            preferred(app("in", "y"), term("db", HOST), 10, false),
            Some(vec![100, 0, 0]),
        ),
        (
            "preferred affinity to db's zone",
            preferred(app("in", "y"), term("db", ZONE), 10, false),
            Some(vec![100, 100, 0]),
        ),
        (
            "preferred anti-affinity away from db",
            preferred(app("in", "y"), term("db", HOST), 10, true),
            Some(vec![0, 100, 100]),
        ),
        (
            "existing pod's required affinity attracts (hardPodAffinityWeight)",
            app("in", "web"),
            Some(vec![0, 0, 100]),
        ),
        ("nothing relates the pods", app("in", "z"), None),
    ];
    for (name, p, want) in cases {
        assert_eq!(scores(&pl, &p, &snap), want, "{name}");
    }
    let off = InterPodAffinity {
        args: InterPodAffinityArgs {
            hard_pod_affinity_weight: 0,
            ignore_preferred_terms_of_existing_pods: false,
        },
    };
    assert_eq!(scores(&off, &app("in", "web"), &snap), None);
}
