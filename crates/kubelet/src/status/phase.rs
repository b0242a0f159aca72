//! The pod phase from its container statuses (upstream's `getPhase`).

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec};

fn find<'a>(statuses: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Whether a regular container ever ran (the pod was initialized before).
pub fn has_any_regular_container_started(spec: &PodSpec, statuses: &[ContainerStatus]) -> bool {
    statuses.iter().any(|s| {
        spec.containers.iter().any(|c| c.name == s.name)
            && s.state
                .as_ref()
                .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
    })
}

/// `Pending`, `Running`, `Succeeded` or `Failed`. `statuses` holds both
/// regular and init container statuses; `terminal` says no container will
/// run again (restart policy no longer applies).
pub fn get_phase(
    pod: &Pod,
    statuses: &[ContainerStatus],
    terminal: bool,
    initialized: bool,
) -> &'static str {
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let inits = spec.init_containers.clone().unwrap_or_default();
    let mut pending_init = 0;
    let mut pending_sidecars = 0;
    let mut failed_init = 0;
    for c in inits.iter().filter(|c| !is_sidecar(c)) {
        let Some(s) = find(statuses, &c.name) else {
            pending_init += 1;
            continue;
        };
        let st = s.state.clone().unwrap_or_default();
        let last_exit = s
            .last_state
            .as_ref()
            .and_then(|l| l.terminated.as_ref())
            .map(|t| t.exit_code);
        if st.running.is_some() {
            pending_init += 1;
        } else if let Some(t) = &st.terminated {
            if t.exit_code != 0 {
                failed_init += 1;
            }
        } else if st.waiting.is_some() {
            match last_exit {
                Some(code) if code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }

    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in inits.iter().filter(|c| is_sidecar(c)) {
        let Some(s) = find(statuses, &c.name) else {
            unknown += 1;
            continue;
        };
        let st = s.state.clone().unwrap_or_default();
        let had_exit = s
            .last_state
            .as_ref()
            .is_some_and(|l| l.terminated.is_some());
        if st.running.is_some() {
            if s.started != Some(true) {
                pending_sidecars += 1;
            }
            running += 1;
        } else if st.terminated.is_some() {
            // Stopped sidecars do not count toward the phase.
        } else if st.waiting.is_some() {
            if !had_exit {
                pending_sidecars += 1;
                waiting += 1;
            }
        } else {
            pending_sidecars += 1;
            unknown += 1;
        }
    }

    for c in &spec.containers {
        let Some(s) = find(statuses, &c.name) else {
            unknown += 1;
            continue;
        };
        let st = s.state.clone().unwrap_or_default();
        if st.running.is_some() {
            running += 1;
        } else if let Some(t) = &st.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if st.waiting.is_some() {
            if s.last_state
                .as_ref()
                .is_some_and(|l| l.terminated.is_some())
            {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }

    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    if pending_init > 0 || (pending_sidecars > 0 && !initialized) || waiting > 0 {
        return "Pending";
    }
    if running > 0 && unknown == 0 {
        return "Running";
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if terminal {
            return if stopped == succeeded {
                "Succeeded"
            } else {
                "Failed"
            };
        }
        if policy == "Always" {
            return "Running";
        }
        if stopped == succeeded {
            return "Succeeded";
        }
        if policy == "Never" {
            return "Failed";
        }
        return "Running";
    }
    "Pending"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(policy: &str, inits: Value, containers: &[&str]) -> Pod {
        let cs: Vec<Value> = containers.iter().map(|n| json!({"name": n})).collect();
        serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"restartPolicy": policy, "initContainers": inits, "containers": cs}}))
        .unwrap()
    }

    fn st(name: &str, state: &str) -> ContainerStatus {
        let (state, last) = match state {
            "running" => (json!({"running": {}}), json!({})),
            "unstarted" => (json!({"running": {}}), json!({})),
            "ok" => (json!({"terminated": {"exitCode": 0}}), json!({})),
            "fail" => (json!({"terminated": {"exitCode": 1}}), json!({})),
            "waiting" => (
                json!({"waiting": {"reason": "ContainerCreating"}}),
                json!({}),
            ),
            "crashloop" => (
                json!({"waiting": {"reason": "CrashLoopBackOff"}}),
                json!({"terminated": {"exitCode": 1}}),
            ),
            "restarting-ok" => (
                json!({"waiting": {}}),
                json!({"terminated": {"exitCode": 0}}),
            ),
            _ => (json!({}), json!({})),
        };
        let started = state.get("running").is_some() && !matches!(name, "unstarted-side");
        serde_json::from_value(
            json!({"name": name, "image": "", "imageID": "", "ready": false,
            "restartCount": 0, "state": state, "lastState": last, "started": started}),
        )
        .unwrap()
    }

    #[test]
    fn phases_as_upstream() {
        let no_init = json!([]);
        let one_init = json!([{"name": "init"}]);
        let sidecar = json!([{"name": "side", "restartPolicy": "Always"}]);
        // (policy, inits, statuses, terminal, want)
        let cases: Vec<(&str, Value, Vec<ContainerStatus>, bool, &str)> = vec![
            ("Always", no_init.clone(), vec![], false, "Pending"),
            (
                "Always",
                no_init.clone(),
                vec![st("app", "waiting")],
                false,
                "Pending",
            ),
            (
                "Always",
                no_init.clone(),
                vec![st("app", "running")],
                false,
                "Running",
            ),
            (
                "Always",
                no_init.clone(),
                vec![st("app", "crashloop")],
                false,
                "Running",
            ),
            (
                "Always",
                no_init.clone(),
                vec![st("app", "fail")],
                false,
                "Running",
            ),
            (
                "Always",
                no_init.clone(),
                vec![st("app", "ok")],
                false,
                "Running",
            ),
            (
                "Always",
                no_init.clone(),
                vec![st("app", "ok")],
                true,
                "Succeeded",
            ),
            (
                "Always",
                no_init.clone(),
                vec![st("app", "fail")],
                true,
                "Failed",
            ),
            (
                "OnFailure",
                no_init.clone(),
                vec![st("app", "ok")],
                false,
                "Succeeded",
            ),
            (
                "OnFailure",
                no_init.clone(),
                vec![st("app", "fail")],
                false,
                "Running",
            ),
            (
                "Never",
                no_init.clone(),
                vec![st("app", "fail")],
                false,
                "Failed",
            ),
            (
                "Never",
                no_init.clone(),
                vec![st("app", "ok")],
                false,
                "Succeeded",
            ),
            // Waiting after an exit 0 counts as stopped but not as succeeded.
            (
                "Never",
                no_init.clone(),
                vec![st("app", "restarting-ok")],
                false,
                "Failed",
            ),
            (
                "Always",
                one_init.clone(),
                vec![st("init", "running")],
                false,
                "Pending",
            ),
            (
                "Always",
                one_init.clone(),
                vec![st("init", "crashloop")],
                false,
                "Pending",
            ),
            (
                "Never",
                one_init.clone(),
                vec![st("init", "fail")],
                false,
                "Failed",
            ),
            (
                "Always",
                one_init.clone(),
                vec![st("init", "ok"), st("app", "running")],
                false,
                "Running",
            ),
            (
                "Always",
                one_init.clone(),
                vec![st("init", "ok"), st("app", "waiting")],
                false,
                "Pending",
            ),
            (
                "Always",
                sidecar.clone(),
                vec![st("side", "running"), st("app", "running")],
                false,
                "Running",
            ),
            (
                "Always",
                sidecar.clone(),
                vec![st("side", "waiting")],
                false,
                "Pending",
            ),
            (
                "Never",
                sidecar.clone(),
                vec![st("side", "running"), st("app", "ok")],
                false,
                "Running",
            ),
            (
                "Never",
                sidecar.clone(),
                vec![st("side", "ok"), st("app", "ok")],
                true,
                "Succeeded",
            ),
        ];
        for (i, (policy, inits, statuses, terminal, want)) in cases.into_iter().enumerate() {
            let p = pod(policy, inits, &["app"]);
            let initialized =
                has_any_regular_container_started(p.spec.as_ref().unwrap(), &statuses);
            assert_eq!(
                get_phase(&p, &statuses, terminal, initialized),
                want,
                "case {i}"
            );
        }
    }

    #[test]
    fn two_containers_need_both() {
        let p = pod("Always", json!([]), &["a", "b"]);
        assert_eq!(get_phase(&p, &[st("a", "running")], false, true), "Pending");
        assert_eq!(
            get_phase(&p, &[st("a", "running"), st("b", "ok")], false, true),
            "Running"
        );
        let p = pod("OnFailure", json!([]), &["a", "b"]);
        assert_eq!(
            get_phase(&p, &[st("a", "ok"), st("b", "fail")], false, true),
            "Running"
        );
        let p = pod("Never", json!([]), &["a", "b"]);
        assert_eq!(
            get_phase(&p, &[st("a", "ok"), st("b", "fail")], false, true),
            "Failed"
        );
    }
}
