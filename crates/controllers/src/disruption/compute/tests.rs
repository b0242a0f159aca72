//! Tables for the disruption controller's decisions (upstream's
//! disruption_test.go cases, in plain data).

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

fn now() -> Timestamp {
    "2026-12-01T10:00:00Z".parse().unwrap()
}

fn pod(name: &str, ready: bool, owner: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: format!("rs-{uid}"),
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("b".into()),
            namespace: Some("default".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: min,
            max_unavailable: max,
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

fn int(i: i32) -> Option<IntOrString> {
    Some(IntOrString::Int(i))
}

fn pct(s: &str) -> Option<IntOrString> {
    Some(IntOrString::String(s.into()))
}

#[test]
fn scaled_values_round_up() {
    let cases = [
        (IntOrString::Int(3), 10, Ok(3)),
        (IntOrString::String("50%".into()), 3, Ok(2)),
        (IntOrString::String("34%".into()), 3, Ok(2)),
        (IntOrString::String("0%".into()), 5, Ok(0)),
        (IntOrString::String("100%".into()), 5, Ok(5)),
        (IntOrString::String("10%".into()), 1, Ok(1)),
    ];
    for (v, total, want) in cases {
        assert_eq!(scaled_value(&v, total, true), want, "{v:?} of {total}");
    }
    assert_eq!(
        scaled_value(&IntOrString::String("50%".into()), 3, false),
        Ok(1)
    );
    assert!(
        scaled_value(&IntOrString::String("five".into()), 3, true)
            .unwrap_err()
            .contains("string is not a percentage")
    );
}

/// Every controller is a ReplicaSet of scale 3 (uid "a") or 2 (uid "b").
fn finder(r: &OwnerReference, _ns: &str) -> Result<Option<ControllerScale>, String> {
    Ok(match r.uid.as_str() {
        "a" => Some(ControllerScale {
            uid: "a".into(),
            scale: 3,
        }),
        "b" => Some(ControllerScale {
            uid: "b".into(),
            scale: 2,
        }),
        _ => None,
    })
}

#[test]
fn expected_counts_and_desired_healthy() {
    let p1 = pod("p1", true, Some("a"));
    let p2 = pod("p2", true, Some("a"));
    let p3 = pod("p3", true, Some("b"));
    let bare = pod("bare", true, None);
    let orphan = pod("orphan", true, Some("unknown"));
    struct Case<'a> {
        min: Option<IntOrString>,
        max: Option<IntOrString>,
        pods: Vec<&'a Pod>,
        want: Result<(i32, i32, usize), &'a str>,
    }
    let cases = [
        // An integer minAvailable counts the pods, controllers or not.
        Case {
            min: int(2),
            max: None,
            pods: vec![&p1, &bare],
            want: Ok((2, 2, 0)),
        },
        // A percentage counts the controllers' scale (3 + 2), rounded up.
        Case {
            min: pct("50%"),
            max: None,
            pods: vec![&p1, &p2, &p3],
            want: Ok((5, 3, 0)),
        },
        Case {
            min: None,
            max: int(1),
            pods: vec![&p1, &p2],
            want: Ok((3, 2, 0)),
        },
        Case {
            min: None,
            max: pct("30%"),
            pods: vec![&p1, &p3],
            want: Ok((5, 3, 0)),
        },
        // More unavailable than there are pods: nothing is required.
        Case {
            min: None,
            max: int(9),
            pods: vec![&p1],
            want: Ok((3, 0, 0)),
        },
        // Pods without a controller are reported, not counted.
        Case {
            min: None,
            max: int(1),
            pods: vec![&p1, &bare],
            want: Ok((3, 2, 1)),
        },
        Case {
            min: pct("50%"),
            max: None,
            pods: vec![&orphan],
            want: Err("found no controllers for pod \"orphan\""),
        },
        Case {
            min: None,
            max: None,
            pods: vec![&p1],
            want: Ok((0, 0, 0)),
        },
    ];
    for c in cases {
        let b = pdb(c.min.clone(), c.max.clone());
        let got = expected_pod_count(&b, &c.pods, finder)
            .map(|e| (e.expected_count, e.desired_healthy, e.unmanaged.len()));
        assert_eq!(
            got,
            c.want.map_err(String::from),
            "min={:?} max={:?}",
            c.min,
            c.max
        );
    }
}

#[test]
fn healthy_pods_and_disrupted_entries() {
    let ready = pod("ready", true, None);
    let unready = pod("unready", false, None);
    let mut deleting = pod("deleting", true, None);
    deleting.metadata.deletion_timestamp = Some(Time(now()));
    let evicted = pod("evicted", true, None);
    let stale = pod("stale", true, None);
    let pods = vec![&ready, &unready, &deleting, &evicted, &stale];
    let mut b = pdb(int(1), None);
    let recent = now() - SignedDuration::from_secs(30);
    let old = now() - SignedDuration::from_secs(121);
    b.status = Some(PodDisruptionBudgetStatus {
        disrupted_pods: Some(BTreeMap::from([
            ("evicted".to_string(), Time(recent)),
            ("stale".to_string(), Time(old)),
            ("deleting".to_string(), Time(recent)),
            ("gone".to_string(), Time(recent)),
        ])),
        ..Default::default()
    });
    let (map, recheck, not_deleted) = build_disrupted_pod_map(&pods, &b, now());
    // Only the pending eviction stays: the deleting pod, the gone pod and the
    // expired entry are dropped.
    assert_eq!(map.keys().collect::<Vec<_>>(), vec!["evicted"]);
    assert_eq!(recheck, Some(recent + DELETION_TIMEOUT));
    assert_eq!(not_deleted, vec!["stale".to_string()]);
    // Ready, not deleting, not just evicted: "ready" and "stale".
    assert_eq!(count_healthy(&pods, &map, now()), 2);
}

#[test]
fn status_allows_what_is_above_the_budget() {
    let cases = [
        // (current healthy, desired, expected, allowed, condition status, reason)
        (3, 2, 3, 1, "True", SUFFICIENT_PODS),
        (2, 2, 3, 0, "False", INSUFFICIENT_PODS),
        (1, 2, 3, 0, "False", INSUFFICIENT_PODS),
        // No pods expected yet: nothing may go.
        (3, 0, 0, 0, "False", INSUFFICIENT_PODS),
    ];
    for (current, desired, expected, allowed, status, reason) in cases {
        let b = pdb(int(desired), None);
        let e = Expected {
            expected_count: expected,
            desired_healthy: desired,
            unmanaged: Vec::new(),
        };
        let s = desired_status(&b, current, &e, BTreeMap::new(), now()).unwrap();
        assert_eq!(
            s.disruptions_allowed, allowed,
            "{current}/{desired}/{expected}"
        );
        assert_eq!(
            (s.current_healthy, s.desired_healthy, s.expected_pods),
            (current, desired, expected)
        );
        assert_eq!(s.observed_generation, Some(1));
        let c = &s.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            (DISRUPTION_ALLOWED, status, reason)
        );
        assert_eq!(c.observed_generation, Some(1));
        // Written once: the same computation again is a no-op.
        let mut written = b.clone();
        written.status = Some(s);
        assert!(desired_status(&written, current, &e, BTreeMap::new(), now()).is_none());
    }
}

#[test]
fn a_new_generation_is_written_again() {
    let mut b = pdb(int(1), None);
    let e = Expected {
        expected_count: 2,
        desired_healthy: 1,
        unmanaged: Vec::new(),
    };
    b.status = desired_status(&b, 2, &e, BTreeMap::new(), now());
    b.metadata.generation = Some(2);
    let s = desired_status(&b, 2, &e, BTreeMap::new(), now()).unwrap();
    assert_eq!(s.observed_generation, Some(2));
}

#[test]
fn fail_safe_allows_nothing_and_says_why() {
    let mut b = pdb(pct("50%"), None);
    b.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: 2,
        current_healthy: 3,
        observed_generation: Some(1),
        ..Default::default()
    });
    let s = fail_safe(&b, "found no controllers for pod \"x\"", now());
    assert_eq!(s.disruptions_allowed, 0);
    assert_eq!(s.current_healthy, 3);
    let c = &s.conditions.unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        ("False", SYNC_FAILED, "found no controllers for pod \"x\"")
    );
}

#[test]
fn conditions_keep_their_transition_time() {
    let mut conds = Vec::new();
    let t1 = now();
    let t2 = now() + SignedDuration::from_secs(5);
    let cond = |status: &str, at| Condition {
        type_: DISRUPTION_ALLOWED.into(),
        status: status.into(),
        reason: SUFFICIENT_PODS.into(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: Time(at),
    };
    set_status_condition(&mut conds, cond("True", t1));
    set_status_condition(&mut conds, cond("True", t2));
    assert_eq!(conds.len(), 1);
    assert_eq!(conds[0].last_transition_time, Time(t1));
    set_status_condition(&mut conds, cond("False", t2));
    assert_eq!(conds[0].last_transition_time, Time(t2));
}

#[test]
fn selectors_print_as_go_does() {
    let sel = LabelSelector {
        match_labels: Some([("app".to_string(), "web".to_string())].into()),
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "tier".into(),
            operator: "In".into(),
            values: Some(vec!["a".into(), "b".into()]),
        }]),
    };
    assert_eq!(
        go_selector(Some(&sel)),
        "&LabelSelector{MatchLabels:map[string]string{app: web,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[a b],},},}"
    );
    assert_eq!(go_selector(None), "nil");
}

#[test]
fn stale_disruption_targets() {
    let with = |status: &str, reason: &str, age: i64| {
        let mut p = pod("p", true, None);
        if let Some(st) = p.status.as_mut() {
            st.conditions
                .get_or_insert_with(Vec::new)
                .push(PodCondition {
                    type_: "DisruptionTarget".into(),
                    status: status.into(),
                    reason: Some(reason.into()),
                    last_transition_time: Some(Time(now() - SignedDuration::from_secs(age))),
                    ..Default::default()
                });
        }
        p
    };
    let secs = |s| Some(std::time::Duration::from_secs(s));
    assert_eq!(stale_disruption_wait(&pod("p", true, None), now()), None);
    assert_eq!(
        stale_disruption_wait(&with("True", "EvictionByEvictionAPI", 30), now()),
        secs(90)
    );
    assert_eq!(
        stale_disruption_wait(&with("True", "EvictionByEvictionAPI", 300), now()),
        secs(0)
    );
    assert_eq!(
        stale_disruption_wait(&with("False", "EvictionByEvictionAPI", 300), now()),
        None
    );
    assert_eq!(
        stale_disruption_wait(&with("True", "TerminationByKubelet", 300), now()),
        None
    );
    let mut deleting = with("True", "PreemptionByScheduler", 300);
    deleting.metadata.deletion_timestamp = Some(Time(now()));
    assert_eq!(stale_disruption_wait(&deleting, now()), None);
    let mut failed = with("True", "DeletionByTaintManager", 300);
    if let Some(st) = failed.status.as_mut() {
        st.phase = Some("Failed".into());
    }
    assert_eq!(stale_disruption_wait(&failed, now()), None);
}

#[test]
fn the_reset_patch_keeps_the_other_conditions() {
    let mut doc = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "status": {"conditions": [
        {"type": "Ready", "status": "True"},
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting", "lastTransitionTime": "2026-12-01T09:00:00Z"}]}});
    berth_api::strategic::apply(
        &mut doc,
        &reset_disruption_target_patch(now()),
        "",
        "v1",
        "Pod",
    )
    .unwrap();
    let conds = doc["status"]["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), 2, "{doc}");
    let c = conds
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .unwrap();
    assert_eq!(c["status"], "False");
    assert!(
        c.get("reason").is_none() && c.get("message").is_none(),
        "{c}"
    );
    assert_eq!(c["lastTransitionTime"], now().to_string());
    assert!(
        conds
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    );
}
