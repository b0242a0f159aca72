//! The worker's view of a pod's containers (latest and previous runtime
//! instance, remembered waiting reasons, probe results) and the helpers it
//! decides with. The pod status itself comes from `crate::status`.

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Container;
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
    fn sidecars_are_done_once_running_and_started() {
        let running = view(Some(rt(ContainerState::Running, 0, 0, "")), None);
        let ok = view(Some(rt(ContainerState::Exited, 0, 0, "Completed")), None);
        let mut sidecar = c("proxy");
        sidecar.restart_policy = Some("Always".into());
        let init = c("init");
        assert!(init_done(&sidecar, &running));
        assert!(!init_done(&sidecar, &ok));
        assert!(init_done(&init, &ok));
        assert!(!init_done(&init, &running));
        let mut unstarted = running.clone();
        unstarted.started = Some(false);
        assert!(!init_done(&sidecar, &unstarted));
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
}
