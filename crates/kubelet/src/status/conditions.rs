//! The kubelet-owned pod conditions (upstream's `pkg/kubelet/status/generate.go`)
//! and their lastTransitionTime bookkeeping (the status manager's).

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};

use super::{api_time, condition};

pub const POD_READY_TO_START_CONTAINERS: &str = "PodReadyToStartContainers";
pub const INITIALIZED: &str = "Initialized";
pub const READY: &str = "Ready";
pub const CONTAINERS_READY: &str = "ContainersReady";
pub const POD_SCHEDULED: &str = "PodScheduled";

/// The conditions the kubelet sets; others on the pod are left alone.
pub const KUBELET_OWNED: [&str; 5] = [
    POD_READY_TO_START_CONTAINERS,
    INITIALIZED,
    READY,
    CONTAINERS_READY,
    POD_SCHEDULED,
];

pub const UNKNOWN_CONTAINER_STATUSES: &str = "UnknownContainerStatuses";
pub const POD_COMPLETED: &str = "PodCompleted";
pub const POD_FAILED: &str = "PodFailed";
pub const CONTAINERS_NOT_READY: &str = "ContainersNotReady";
pub const CONTAINERS_NOT_INITIALIZED: &str = "ContainersNotInitialized";
pub const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// Go's `%s` of a string slice: `[a b]`.
fn go_list(names: &[String]) -> String {
    format!("[{}]", names.join(" "))
}

fn find<'a>(statuses: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

/// `ContainersReady`.
pub fn containers_ready(pod: &Pod, statuses: &[ContainerStatus], phase: &str) -> PodCondition {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    for c in sidecars.chain(spec.containers.iter()) {
        match find(statuses, &c.name) {
            Some(s) if !s.ready => unready.push(c.name.clone()),
            Some(_) => {}
            None => unknown.push(c.name.clone()),
        }
    }
    if (phase == "Succeeded" && unknown.is_empty()) || phase == "Failed" {
        let reason = if phase == "Failed" {
            POD_FAILED
        } else {
            POD_COMPLETED
        };
        return condition(CONTAINERS_READY, "False", Some(reason), None);
    }
    let mut msgs = Vec::new();
    if !unknown.is_empty() {
        msgs.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        msgs.push(format!(
            "containers with unready status: {}",
            go_list(&unready)
        ));
    }
    if !msgs.is_empty() {
        return condition(
            CONTAINERS_READY,
            "False",
            Some(CONTAINERS_NOT_READY),
            Some(msgs.join(", ")),
        );
    }
    condition(CONTAINERS_READY, "True", None, None)
}

/// `Ready`: ContainersReady, then the readiness gates (conditions others set).
pub fn pod_ready(
    pod: &Pod,
    existing: &[PodCondition],
    statuses: &[ContainerStatus],
    phase: &str,
) -> PodCondition {
    let cr = containers_ready(pod, statuses, phase);
    if cr.status != "True" {
        return PodCondition {
            type_: READY.into(),
            ..cr
        };
    }
    let mut msgs = Vec::new();
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.clone())
        .unwrap_or_default();
    for g in gates {
        match existing.iter().find(|c| c.type_ == g.condition_type) {
            None => msgs.push(format!(
                "corresponding condition of pod readiness gate {:?} does not exist.",
                g.condition_type
            )),
            Some(c) if c.status != "True" => msgs.push(format!(
                "the status of pod readiness gate {:?} is not \"True\", but {}",
                g.condition_type, c.status
            )),
            Some(_) => {}
        }
    }
    if !msgs.is_empty() {
        return condition(
            READY,
            "False",
            Some(READINESS_GATES_NOT_READY),
            Some(msgs.join(", ")),
        );
    }
    condition(READY, "True", None, None)
}

/// `Initialized`.
pub fn initialized(pod: &Pod, statuses: &[ContainerStatus], phase: &str) -> PodCondition {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut unknown = Vec::new();
    let mut incomplete = Vec::new();
    for c in spec.init_containers.iter().flatten() {
        let Some(s) = find(statuses, &c.name) else {
            unknown.push(c.name.clone());
            continue;
        };
        let done = if c.restart_policy.as_deref() == Some("Always") {
            s.started == Some(true)
        } else {
            s.ready
        };
        if !done {
            incomplete.push(c.name.clone());
        }
    }
    if phase == "Succeeded" && unknown.is_empty() {
        return condition(INITIALIZED, "True", Some(POD_COMPLETED), None);
    }
    if super::phase::has_any_regular_container_started(&spec, statuses) {
        return condition(INITIALIZED, "True", None, None);
    }
    let mut msgs = Vec::new();
    if !unknown.is_empty() {
        msgs.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !incomplete.is_empty() {
        msgs.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    if !msgs.is_empty() {
        return condition(
            INITIALIZED,
            "False",
            Some(CONTAINERS_NOT_INITIALIZED),
            Some(msgs.join(", ")),
        );
    }
    condition(INITIALIZED, "True", None, None)
}

/// The pod's conditions the kubelet does not own (readiness gates'
/// conditions, DisruptionTarget), as the API has them.
pub fn preserved(pod: &Pod) -> Vec<PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| !KUBELET_OWNED.contains(&c.type_.as_str()))
        .collect()
}

/// All kubelet-owned conditions in upstream's order. `statuses` holds init
/// and regular container statuses.
pub fn generate(
    pod: &Pod,
    statuses: &[ContainerStatus],
    phase: &str,
    sandbox_ready: bool,
) -> Vec<PodCondition> {
    let ready_to_start = condition(
        POD_READY_TO_START_CONTAINERS,
        if sandbox_ready { "True" } else { "False" },
        None,
        None,
    );
    let existing = preserved(pod);
    vec![
        ready_to_start,
        initialized(pod, statuses, phase),
        pod_ready(pod, &existing, statuses, phase),
        containers_ready(pod, statuses, phase),
        condition(POD_SCHEDULED, "True", None, None),
    ]
}

/// Gives each condition its lastTransitionTime: kept from the old condition
/// of the same type while the status is unchanged, `now` otherwise.
pub fn with_transition_times(
    conditions: Vec<PodCondition>,
    old: &[PodCondition],
    now: DateTime<Utc>,
) -> Vec<PodCondition> {
    conditions
        .into_iter()
        .map(|mut c| {
            let kept = old
                .iter()
                .find(|o| o.type_ == c.type_ && o.status == c.status)
                .and_then(|o| o.last_transition_time.clone());
            c.last_transition_time = Some(kept.unwrap_or_else(|| api_time(now)));
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn cs(name: &str, ready: bool, state: Value, started: bool) -> ContainerStatus {
        serde_json::from_value(
            json!({"name": name, "image": "", "imageID": "", "ready": ready,
            "restartCount": 0, "state": state, "started": started}),
        )
        .unwrap()
    }

    /// (statuses, phase, (status, reason, message) wanted).
    type Case = (
        Vec<ContainerStatus>,
        &'static str,
        (&'static str, &'static str, &'static str),
    );

    fn short(c: &PodCondition) -> (String, String, String, String) {
        (
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        )
    }

    #[test]
    fn ready_and_containers_ready() {
        let two = pod(json!({"containers": [{"name": "app"}, {"name": "side"}]}));
        let run = json!({"running": {}});
        let cases: Vec<Case> = vec![
            (
                vec![
                    cs("app", true, run.clone(), true),
                    cs("side", true, run.clone(), true),
                ],
                "Running",
                ("True", "", ""),
            ),
            (
                vec![
                    cs("app", false, run.clone(), true),
                    cs("side", true, run.clone(), true),
                ],
                "Running",
                (
                    "False",
                    "ContainersNotReady",
                    "containers with unready status: [app]",
                ),
            ),
            (
                vec![cs("app", false, run.clone(), true)],
                "Pending",
                (
                    "False",
                    "ContainersNotReady",
                    "containers with unknown status: [side], containers with unready status: [app]",
                ),
            ),
            (
                vec![
                    cs("app", false, run.clone(), true),
                    cs("side", false, run.clone(), true),
                ],
                "Running",
                (
                    "False",
                    "ContainersNotReady",
                    "containers with unready status: [app side]",
                ),
            ),
            (
                vec![
                    cs("app", false, json!({}), false),
                    cs("side", false, json!({}), false),
                ],
                "Succeeded",
                ("False", "PodCompleted", ""),
            ),
            (
                vec![cs("app", false, json!({}), false)],
                "Failed",
                ("False", "PodFailed", ""),
            ),
        ];
        for (statuses, phase, (status, reason, msg)) in cases {
            for (got, ty) in [
                (containers_ready(&two, &statuses, phase), "ContainersReady"),
                (pod_ready(&two, &[], &statuses, phase), "Ready"),
            ] {
                assert_eq!(
                    short(&got),
                    (ty.into(), status.into(), reason.into(), msg.into()),
                    "{phase} {statuses:?}"
                );
            }
        }
    }

    #[test]
    fn readiness_gates() {
        let p = pod(
            json!({"containers": [{"name": "app"}], "readinessGates": [{"conditionType": "example.com/lb"}]}),
        );
        let statuses = vec![cs("app", true, json!({"running": {}}), true)];
        let got = pod_ready(&p, &[], &statuses, "Running");
        assert_eq!(
            short(&got),
            (
                "Ready".into(),
                "False".into(),
                "ReadinessGatesNotReady".into(),
                "corresponding condition of pod readiness gate \"example.com/lb\" does not exist."
                    .into()
            )
        );
        let gate = condition("example.com/lb", "False", None, None);
        let got = pod_ready(&p, &[gate], &statuses, "Running");
        assert_eq!(
            got.message.as_deref(),
            Some("the status of pod readiness gate \"example.com/lb\" is not \"True\", but False")
        );
        let gate = condition("example.com/lb", "True", None, None);
        assert_eq!(pod_ready(&p, &[gate], &statuses, "Running").status, "True");
    }

    #[test]
    fn initialized_condition() {
        let p = pod(
            json!({"initContainers": [{"name": "i1"}, {"name": "i2"}, {"name": "side", "restartPolicy": "Always"}], "containers": [{"name": "app"}]}),
        );
        let ok = json!({"terminated": {"exitCode": 0}});
        let run = json!({"running": {}});
        let cases: Vec<Case> = vec![
            (
                vec![],
                "Pending",
                (
                    "False",
                    "ContainersNotInitialized",
                    "containers with unknown status: [i1 i2 side]",
                ),
            ),
            (
                vec![
                    cs("i1", true, ok.clone(), false),
                    cs("i2", false, run.clone(), true),
                ],
                "Pending",
                (
                    "False",
                    "ContainersNotInitialized",
                    "containers with unknown status: [side], containers with incomplete status: [i2]",
                ),
            ),
            (
                vec![
                    cs("i1", true, ok.clone(), false),
                    cs("i2", true, ok.clone(), false),
                    cs("side", false, run.clone(), false),
                ],
                "Pending",
                (
                    "False",
                    "ContainersNotInitialized",
                    "containers with incomplete status: [side]",
                ),
            ),
            (
                vec![
                    cs("i1", true, ok.clone(), false),
                    cs("i2", true, ok.clone(), false),
                    cs("side", false, run.clone(), true),
                ],
                "Pending",
                ("True", "", ""),
            ),
            // A regular container ran: initialized even while a sidecar restarts.
            (
                vec![
                    cs("side", false, json!({"waiting": {}}), false),
                    cs("app", true, run.clone(), true),
                ],
                "Running",
                ("True", "", ""),
            ),
            (
                vec![
                    cs("i1", true, ok.clone(), false),
                    cs("i2", true, ok.clone(), false),
                    cs("side", false, ok.clone(), false),
                ],
                "Succeeded",
                ("True", "PodCompleted", ""),
            ),
        ];
        for (statuses, phase, (status, reason, msg)) in cases {
            let got = initialized(&p, &statuses, phase);
            assert_eq!(
                short(&got),
                (
                    "Initialized".into(),
                    status.into(),
                    reason.into(),
                    msg.into()
                ),
                "{statuses:?}"
            );
        }
        // No init containers: initialized.
        let p = pod(json!({"containers": [{"name": "app"}]}));
        assert_eq!(initialized(&p, &[], "Pending").status, "True");
    }

    #[test]
    fn transition_times_kept_while_unchanged() {
        let t0 = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let t1 = DateTime::from_timestamp(1_700_000_100, 0).unwrap();
        let first = with_transition_times(
            vec![
                condition(READY, "False", None, None),
                condition(POD_SCHEDULED, "True", None, None),
            ],
            &[],
            t0,
        );
        let second = with_transition_times(
            vec![
                condition(READY, "True", None, None),
                condition(POD_SCHEDULED, "True", None, None),
            ],
            &first,
            t1,
        );
        assert_eq!(second[0].last_transition_time, Some(api_time(t1)));
        assert_eq!(second[1].last_transition_time, Some(api_time(t0)));
    }
}
