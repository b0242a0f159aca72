//! A pod's status from what the runtime reports (upstream's
//! `convertToAPIContainerStatuses`, `getPhase` and the condition generators).

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

use crate::runtime::{ContainerState, ContainerStatus};

/// What the worker knows about one container of the pod.
#[derive(Debug, Clone, Default)]
pub struct ContainerView {
    /// The newest instance, if one was ever created.
    pub latest: Option<ContainerStatus>,
    /// The instance before it (its termination is `lastState`).
    pub previous: Option<ContainerStatus>,
    /// A waiting reason and message the runtime does not know (ErrImagePull,
    /// CrashLoopBackOff, CreateContainerConfigError, RunContainerError, …).
    pub waiting: Option<(String, String)>,
    /// Readiness from probes (None: no readiness probe → ready when running).
    pub ready: Option<bool>,
    /// Startup probe passed (None: no startup probe).
    pub started: Option<bool>,
}

fn ts(t: Option<DateTime<Utc>>) -> Value {
    t.map(|t| json!(t.to_rfc3339_opts(SecondsFormat::Secs, true)))
        .unwrap_or(Value::Null)
}

fn terminated(c: &ContainerStatus) -> Value {
    let mut t = json!({
        "exitCode": c.exit_code,
        "reason": c.reason,
        "startedAt": ts(c.started_at),
        "finishedAt": ts(c.finished_at),
        "containerID": format!("containerd://{}", c.id),
    });
    if !c.message.is_empty() {
        t["message"] = json!(c.message);
    }
    if c.reason.is_empty() {
        t.as_object_mut().map(|o| o.remove("reason"));
    }
    if c.started_at.is_none() {
        t.as_object_mut().map(|o| o.remove("startedAt"));
    }
    json!({ "terminated": t })
}

fn is_running(v: &ContainerView) -> bool {
    v.waiting.is_none()
        && v.latest
            .as_ref()
            .is_some_and(|c| c.state == ContainerState::Running)
}

/// Is the container ready (running, readiness passed)?
pub fn container_ready(v: &ContainerView) -> bool {
    is_running(v) && v.ready.unwrap_or(true) && v.started.unwrap_or(true)
}

/// One `containerStatuses[]` entry.
pub fn container_status(c: &Container, v: &ContainerView) -> Value {
    let (state, last) = match (&v.waiting, &v.latest) {
        (Some((reason, message)), latest) => {
            let mut w = json!({ "reason": reason });
            if !message.is_empty() {
                w["message"] = json!(message);
            }
            let last = latest
                .as_ref()
                .filter(|l| l.state == ContainerState::Exited)
                .map(terminated)
                .or_else(|| v.previous.as_ref().map(terminated));
            (json!({ "waiting": w }), last)
        }
        (None, None) => (json!({"waiting": {"reason": "ContainerCreating"}}), None),
        (None, Some(l)) => {
            let state = match l.state {
                ContainerState::Running => json!({"running": {"startedAt": ts(l.started_at)}}),
                ContainerState::Exited => terminated(l),
                ContainerState::Created | ContainerState::Unknown => {
                    json!({"waiting": {"reason": "ContainerCreating"}})
                }
            };
            (state, v.previous.as_ref().map(terminated))
        }
    };
    let restart_count = v.latest.as_ref().map_or(0, |l| l.attempt);
    let mut s = json!({
        "name": c.name,
        "state": state,
        "lastState": last.unwrap_or_else(|| json!({})),
        "ready": container_ready(v),
        "restartCount": restart_count,
        "image": c.image.clone().unwrap_or_default(),
        "imageID": v.latest.as_ref().map(|l| l.image_ref.clone()).unwrap_or_default(),
        "started": is_running(v) && v.started.unwrap_or(true),
    });
    if let Some(l) = &v.latest {
        s["containerID"] = json!(format!("containerd://{}", l.id));
        if !l.image.is_empty() {
            s["image"] = json!(l.image);
        }
    }
    s
}

/// A sidecar: an init container with `restartPolicy: Always`, which keeps
/// running beside the regular containers.
pub fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Has this init container done its part: exited 0, or (a sidecar) running
/// with its startup probe passed?
pub fn init_done(c: &Container, v: &ContainerView) -> bool {
    if is_sidecar(c) {
        return is_running(v) && v.started.unwrap_or(true);
    }
    v.latest
        .as_ref()
        .is_some_and(|l| l.state == ContainerState::Exited && l.exit_code == 0)
}

/// Pod phase (upstream's `getPhase` for a pod that is not being deleted).
pub fn phase(
    init: &[(&Container, &ContainerView)],
    containers: &[(&Container, &ContainerView)],
    restart_policy: &str,
) -> &'static str {
    // Init containers: pending until all succeeded; a failed one with Never fails the pod.
    for (c, v) in init {
        // A sidecar that ran once no longer holds the pod in Pending.
        if init_done(c, v) || (is_sidecar(c) && v.latest.is_some()) {
            continue;
        }
        match &v.latest {
            Some(l)
                if l.state == ContainerState::Exited
                    && restart_policy == "Never"
                    && v.waiting.is_none() =>
            {
                return "Failed";
            }
            _ => return "Pending",
        }
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for (_, v) in containers {
        match (&v.waiting, &v.latest) {
            (Some(_), Some(l)) if l.state == ContainerState::Exited => stopped += 1,
            (Some(_), _) | (None, None) => waiting += 1,
            (None, Some(l)) => match l.state {
                ContainerState::Running => running += 1,
                ContainerState::Exited => {
                    stopped += 1;
                    if l.exit_code == 0 {
                        succeeded += 1;
                    }
                }
                _ => waiting += 1,
            },
        }
    }
    if waiting > 0 {
        return "Pending";
    }
    if running > 0 {
        return "Running";
    }
    if stopped > 0 {
        return match restart_policy {
            "Always" => "Running",
            "OnFailure" if stopped == succeeded => "Succeeded",
            "OnFailure" => "Running",
            _ if stopped == succeeded => "Succeeded",
            _ => "Failed",
        };
    }
    "Pending"
}

fn condition(
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    at: &str,
) -> Value {
    let mut c = json!({
        "type": type_,
        "status": if ok { "True" } else { "False" },
        "lastProbeTime": null,
        "lastTransitionTime": at,
    });
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

fn names(list: &[&str]) -> String {
    format!("[{}]", list.join(" "))
}

/// The conditions the node agent owns; `previous` keeps lastTransitionTime
/// stable while a condition's status does not change.
pub fn conditions(
    sandbox_ready: bool,
    init: &[(&Container, &ContainerView)],
    containers: &[(&Container, &ContainerView)],
    phase: &str,
    previous: &BTreeMap<String, (String, String)>,
    now: DateTime<Utc>,
) -> Vec<Value> {
    let now_s = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    let at = |type_: &str, ok: bool| -> String {
        let status = if ok { "True" } else { "False" };
        match previous.get(type_) {
            Some((s, t)) if s == status => t.clone(),
            _ => now_s.clone(),
        }
    };
    let completed = phase == "Succeeded" || phase == "Failed";
    let pending_init: Vec<&str> = init
        .iter()
        .filter(|(c, v)| !init_done(c, v))
        .map(|(c, _)| c.name.as_str())
        .collect();
    // Sidecars count towards readiness like regular containers.
    let unready: Vec<&str> = init
        .iter()
        .filter(|(c, _)| is_sidecar(c))
        .chain(containers.iter())
        .filter(|(_, v)| !container_ready(v))
        .map(|(c, _)| c.name.as_str())
        .collect();
    let initialized = pending_init.is_empty();
    let ready = unready.is_empty() && initialized && !completed;
    let (init_reason, init_msg) = if initialized {
        (completed.then_some("PodCompleted"), None)
    } else {
        (
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: {}",
                names(&pending_init)
            )),
        )
    };
    let (ready_reason, ready_msg) = if ready {
        (None, None)
    } else if completed {
        (Some("PodCompleted"), None)
    } else if !initialized {
        (
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: {}",
                names(&pending_init)
            )),
        )
    } else {
        (
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: {}",
                names(&unready)
            )),
        )
    };
    vec![
        condition(
            "PodReadyToStartContainers",
            sandbox_ready,
            None,
            None,
            &at("PodReadyToStartContainers", sandbox_ready),
        ),
        condition(
            "Initialized",
            initialized,
            init_reason,
            init_msg,
            &at("Initialized", initialized),
        ),
        condition(
            "Ready",
            ready,
            ready_reason,
            ready_msg.clone(),
            &at("Ready", ready),
        ),
        condition(
            "ContainersReady",
            ready,
            ready_reason,
            ready_msg,
            &at("ContainersReady", ready),
        ),
    ]
}

/// The previous conditions of `pod` by type: (status, lastTransitionTime).
pub fn previous_conditions(pod: &Pod) -> BTreeMap<String, (String, String)> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c.type_.clone(),
                (
                    c.status.clone(),
                    c.last_transition_time
                        .as_ref()
                        .map(|t| t.0.to_string())
                        .unwrap_or_default(),
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(state: ContainerState, attempt: u32, exit: i32, reason: &str) -> ContainerStatus {
        ContainerStatus {
            id: format!("id{attempt}"),
            sandbox_id: "sb".into(),
            name: "c".into(),
            attempt,
            state,
            created_at: None,
            started_at: Some(DateTime::from_timestamp(1_700_000_000, 0).unwrap()),
            finished_at: (state == ContainerState::Exited)
                .then(|| DateTime::from_timestamp(1_700_000_005, 0).unwrap()),
            exit_code: exit,
            reason: reason.into(),
            message: String::new(),
            image: "docker.io/library/busybox:latest".into(),
            image_ref: "sha256:abc".into(),
            labels: Default::default(),
            annotations: Default::default(),
            log_path: String::new(),
        }
    }

    fn view(latest: Option<ContainerStatus>, waiting: Option<(&str, &str)>) -> ContainerView {
        ContainerView {
            latest,
            waiting: waiting.map(|(r, m)| (r.to_string(), m.to_string())),
            ..Default::default()
        }
    }

    fn c(name: &str) -> Container {
        Container {
            name: name.into(),
            image: Some("busybox".into()),
            ..Default::default()
        }
    }

    #[test]
    fn phase_follows_upstream_get_phase() {
        let running = view(Some(rt(ContainerState::Running, 0, 0, "")), None);
        let ok = view(Some(rt(ContainerState::Exited, 0, 0, "Completed")), None);
        let bad = view(Some(rt(ContainerState::Exited, 0, 1, "Error")), None);
        let crashloop = view(
            Some(rt(ContainerState::Exited, 2, 1, "Error")),
            Some(("CrashLoopBackOff", "back-off")),
        );
        let pulling = view(None, Some(("ErrImagePull", "x")));
        let creating = view(None, None);
        let a = c("a");
        let b = c("b");
        let cases: Vec<(Vec<&ContainerView>, &str, &str)> = vec![
            (vec![&running], "Always", "Running"),
            (vec![&creating], "Always", "Pending"),
            (vec![&pulling], "Always", "Pending"),
            (vec![&ok], "Never", "Succeeded"),
            (vec![&bad], "Never", "Failed"),
            (vec![&ok, &bad], "Never", "Failed"),
            (vec![&bad], "OnFailure", "Running"),
            (vec![&ok], "OnFailure", "Succeeded"),
            (vec![&ok], "Always", "Running"),
            (vec![&crashloop], "Always", "Running"),
            (vec![&running, &creating], "Always", "Pending"),
            (vec![&running, &ok], "Never", "Running"),
        ];
        for (views, policy, want) in cases {
            let pairs: Vec<(&Container, &ContainerView)> = views
                .iter()
                .enumerate()
                .map(|(i, v)| (if i == 0 { &a } else { &b }, *v))
                .collect();
            assert_eq!(phase(&[], &pairs, policy), want, "{policy} {views:?}");
        }
        // Init containers gate the pod.
        let init = c("init");
        assert_eq!(
            phase(&[(&init, &running)], &[(&a, &creating)], "Always"),
            "Pending"
        );
        assert_eq!(
            phase(&[(&init, &bad)], &[(&a, &creating)], "Never"),
            "Failed"
        );
        assert_eq!(
            phase(&[(&init, &ok)], &[(&a, &running)], "Never"),
            "Running"
        );
        // A running sidecar does not hold the pod in Pending.
        let mut sidecar = c("proxy");
        sidecar.restart_policy = Some("Always".into());
        assert_eq!(
            phase(&[(&sidecar, &running)], &[(&a, &running)], "Always"),
            "Running"
        );
        assert!(init_done(&sidecar, &running));
        assert!(!init_done(&sidecar, &ok));
        assert!(!init_done(&init, &running));
    }

    #[test]
    fn crashloop_status_shows_waiting_with_last_termination() {
        let v = view(
            Some(rt(ContainerState::Exited, 3, 1, "Error")),
            Some((
                "CrashLoopBackOff",
                "back-off 40s restarting failed container=c pod=p_ns(u)",
            )),
        );
        let s = container_status(&c("c"), &v);
        assert_eq!(s["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(s["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(s["lastState"]["terminated"]["reason"], "Error");
        assert_eq!(s["restartCount"], 3);
        assert_eq!(s["ready"], false);
        assert_eq!(s["containerID"], "containerd://id3");
    }

    #[test]
    fn running_status_is_ready_with_previous_as_last_state() {
        let mut v = view(Some(rt(ContainerState::Running, 1, 0, "")), None);
        v.previous = Some(rt(ContainerState::Exited, 0, 137, "OOMKilled"));
        let s = container_status(&c("c"), &v);
        assert_eq!(s["state"]["running"]["startedAt"], "2023-11-14T22:13:20Z");
        assert_eq!(s["lastState"]["terminated"]["reason"], "OOMKilled");
        assert_eq!(s["ready"], true);
        assert_eq!(s["started"], true);
        assert_eq!(s["image"], "docker.io/library/busybox:latest");
        v.ready = Some(false);
        assert_eq!(container_status(&c("c"), &v)["ready"], false);
        let fresh = container_status(&c("c"), &view(None, None));
        assert_eq!(fresh["state"]["waiting"]["reason"], "ContainerCreating");
        assert_eq!(fresh["image"], "busybox");
    }

    #[test]
    fn conditions_name_unready_containers_and_keep_transition_times() {
        let now = DateTime::from_timestamp(1_700_000_100, 0).unwrap();
        let a = c("a");
        let b = c("b");
        let running = view(Some(rt(ContainerState::Running, 0, 0, "")), None);
        let creating = view(None, None);
        let mut prev = BTreeMap::new();
        prev.insert(
            "PodReadyToStartContainers".to_string(),
            ("True".to_string(), "2023-11-14T22:00:00Z".to_string()),
        );
        let conds = conditions(
            true,
            &[],
            &[(&a, &running), (&b, &creating)],
            "Pending",
            &prev,
            now,
        );
        let get = |t: &str| conds.iter().find(|c| c["type"] == t).unwrap().clone();
        assert_eq!(
            get("PodReadyToStartContainers")["lastTransitionTime"],
            "2023-11-14T22:00:00Z"
        );
        assert_eq!(get("Initialized")["status"], "True");
        assert_eq!(get("Ready")["status"], "False");
        assert_eq!(get("Ready")["reason"], "ContainersNotReady");
        assert_eq!(
            get("Ready")["message"],
            "containers with unready status: [b]"
        );
        assert_eq!(
            get("ContainersReady")["lastTransitionTime"],
            "2023-11-14T22:15:00Z"
        );
        let done = view(Some(rt(ContainerState::Exited, 0, 0, "Completed")), None);
        let conds = conditions(false, &[], &[(&a, &done)], "Succeeded", &prev, now);
        let get = |t: &str| conds.iter().find(|c| c["type"] == t).unwrap().clone();
        assert_eq!(get("Ready")["reason"], "PodCompleted");
        assert_eq!(get("Initialized")["reason"], "PodCompleted");
        assert_eq!(get("PodReadyToStartContainers")["status"], "False");
        let init = c("init");
        let conds = conditions(
            true,
            &[(&init, &running)],
            &[(&a, &creating)],
            "Pending",
            &prev,
            now,
        );
        let get = |t: &str| conds.iter().find(|c| c["type"] == t).unwrap().clone();
        assert_eq!(
            get("Initialized")["message"],
            "containers with incomplete status: [init]"
        );
    }
}
