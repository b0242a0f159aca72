use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;

use super::*;
use crate::framework::{Framework, Snapshot};
use crate::plugins::new_framework;
use crate::plugins::testing::*;

fn prio(mut p: Pod, priority: i32) -> Pod {
    p.spec.get_or_insert_default().priority = Some(priority);
    p
}

fn cpu_pod(name: &str, cpu: &str, priority: i32) -> Pod {
    prio(pod(name, &[&[("cpu", cpu)]]), priority)
}

fn default_fw() -> Framework {
    new_framework(&crate::config::Profile::default()).unwrap()
}

/// Runs the default profile's filters, then preemption, as the framework does.
fn preempt(p: Pod, snap: &Snapshot) -> PostFilterResult {
    let fw = default_fw();
    let pi = PodInfo::new(p);
    let filtered = fw.filter_all(&pi, snap);
    let mut state = CycleState::default();
    for pl in &fw.pre_filter {
        if pl.pre_filter(&mut state, &pi, snap).code() == crate::framework::Code::Skip {
            state.skip_filter.insert(pl.name());
        }
    }
    DefaultPreemption.post_filter(&state, &pi, snap, &filtered, &fw)
}

fn victims(r: &PostFilterResult) -> Vec<String> {
    r.victims
        .iter()
        .map(|v| v.pod.metadata.name.clone().unwrap())
        .collect()
}

#[test]
fn evicts_the_minimal_set_of_lower_priority_pods() {
    // One CPU, two 400m pods of priority 0 and 5: 500m needs only one gone,
    // and the lower priority goes.
    let snap = Snapshot::new(vec![node_info(
        node("n1", &[("cpu", "1"), ("pods", "10")]),
        vec![cpu_pod("low", "400m", 0), cpu_pod("mid", "400m", 5)],
    )]);
    let r = preempt(cpu_pod("high", "500m", 10), &snap);
    assert!(r.status.is_success(), "{}", r.status);
    assert_eq!(r.nominated_node.as_deref(), Some("n1"));
    assert_eq!(victims(&r), vec!["low"]);
    // 900m needs both gone.
    let r = preempt(cpu_pod("high", "900m", 10), &snap);
    assert_eq!(victims(&r), vec!["mid", "low"]);
}

#[test]
fn picks_the_node_with_the_cheapest_victims() {
    let snap = Snapshot::new(vec![
        node_info(
            node("a", &[("cpu", "1"), ("pods", "10")]),
            vec![cpu_pod("a1", "1", 5)],
        ),
        node_info(
            node("b", &[("cpu", "1"), ("pods", "10")]),
            vec![cpu_pod("b1", "500m", 1), cpu_pod("b2", "500m", 1)],
        ),
        node_info(
            node("c", &[("cpu", "1"), ("pods", "10")]),
            vec![cpu_pod("c1", "1", 3)],
        ),
    ]);
    // Lowest highest-priority victim wins over fewer victims.
    let r = preempt(cpu_pod("high", "1", 10), &snap);
    assert_eq!(r.nominated_node.as_deref(), Some("b"));
    assert_eq!(victims(&r), vec!["b1", "b2"]);
}

#[test]
fn avoids_pdb_violations() {
    let mut guarded = cpu_pod("guarded", "1", 0);
    guarded.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
    let snap = Snapshot::new(vec![
        node_info(node("a", &[("cpu", "1"), ("pods", "10")]), vec![guarded]),
        node_info(
            node("b", &[("cpu", "1"), ("pods", "10")]),
            vec![cpu_pod("b1", "500m", 0), cpu_pod("b2", "500m", 0)],
        ),
    ])
    .with_pdbs(vec![PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("db".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "db".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: 0,
            ..Default::default()
        }),
    }]);
    let r = preempt(cpu_pod("high", "1", 10), &snap);
    assert_eq!(r.nominated_node.as_deref(), Some("b"));
    assert_eq!(victims(&r).len(), 2);
}

#[test]
fn messages_when_preemption_cannot_help() {
    let full = || {
        Snapshot::new(vec![
            node_info(
                tainted(
                    node("t", &[("cpu", "1"), ("pods", "10")]),
                    &[("x", "", "NoSchedule")],
                ),
                vec![],
            ),
            node_info(
                node("b", &[("cpu", "1"), ("pods", "10")]),
                vec![cpu_pod("same", "1", 0)],
            ),
            node_info(
                node("c", &[("cpu", "1"), ("pods", "10")]),
                vec![cpu_pod("small", "100m", 0)],
            ),
        ])
    };
    let cases: Vec<(&str, Pod, &str)> = vec![
        (
            "equal priority: no victims; tainted node: not helpful",
            cpu_pod("p", "1", 0),
            "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
        ),
        (
            "even an empty node is too small",
            cpu_pod("p", "2", 10),
            "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 Insufficient cpu.",
        ),
        (
            "preemptionPolicy Never",
            {
                let mut p = cpu_pod("p", "1", 10);
                p.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
                p
            },
            "preemption: not eligible due to preemptionPolicy=Never.",
        ),
    ];
    for (name, p, want) in cases {
        let r = preempt(p, &full());
        assert!(!r.status.is_success(), "{name}");
        assert_eq!(r.status.message(), want, "{name}");
        assert!(r.victims.is_empty(), "{name}");
    }
}

#[test]
fn waits_for_victims_already_terminating_on_the_nominated_node() {
    let mut victim = cpu_pod("going", "1", 0);
    victim.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
    );
    victim.status = Some(k8s_openapi::api::core::v1::PodStatus {
        conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some(REASON_PREEMPTION_BY_SCHEDULER.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let snap = Snapshot::new(vec![node_info(
        node("n1", &[("cpu", "1"), ("pods", "10")]),
        vec![victim],
    )]);
    let mut p = cpu_pod("high", "1", 10);
    p.status.get_or_insert_default().nominated_node_name = Some("n1".into());
    let r = preempt(p, &snap);
    assert_eq!(
        r.status.message(),
        format!("preemption: {NOT_ELIGIBLE_TERMINATING}")
    );
}

#[test]
fn upstream_texts() {
    assert_eq!(
        preempted_message("1234", "node-a"),
        "Preempted by pod 1234 on node node-a"
    );
    assert_eq!(
        disruption_message("default-scheduler"),
        "default-scheduler: preempting to accommodate a higher priority pod"
    );
}

#[test]
fn evicting_a_pod_lifts_its_anti_affinity() {
    use k8s_openapi::api::core::v1::{Affinity, PodAffinityTerm, PodAntiAffinity};
    // The low-priority guard refuses web pods on its host; only evicting it helps.
    let mut guard = cpu_pod("guard", "100m", 0);
    guard.spec.as_mut().unwrap().affinity = Some(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                label_selector: Some(LabelSelector {
                    match_labels: Some([("app".to_string(), "web".to_string())].into()),
                    ..Default::default()
                }),
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    });
    let snap = Snapshot::new(vec![node_info(
        labeled(
            node("n1", &[("cpu", "4"), ("pods", "10")]),
            &[("kubernetes.io/hostname", "n1")],
        ),
        vec![guard, cpu_pod("bystander", "100m", 0)],
    )]);
    let mut web = cpu_pod("web", "100m", 10);
    web.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    let r = preempt(web, &snap);
    assert!(r.status.is_success(), "{}", r.status);
    assert_eq!(victims(&r), vec!["guard"], "the bystander is reprieved");
}
