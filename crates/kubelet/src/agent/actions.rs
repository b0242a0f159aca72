//! What one pod sync does to its containers, decided from the pod's spec and
//! the runtime's view alone (upstream's computePodActions): init containers
//! one at a time in order (sidecars stay running and gate the next on their
//! startup probe), regular containers once every init container has done its
//! part, restarts by the restart policy, ephemeral containers started once.
//! The worker carries the actions out; tests drive this table by table.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Container;

use super::status::{self, ContainerView};
use crate::runtime::ContainerState;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create and start the first instance.
    Start { name: String, init: bool },
    /// The latest instance exited and the policy restarts it (subject to the
    /// crash-loop back-off, which the worker applies).
    Restart { name: String, init: bool },
    /// An ephemeral container, in its target's PID namespace when the target
    /// has an instance (`target_id`).
    StartEphemeral {
        name: String,
        target_id: Option<String>,
    },
    /// The container runs: any waiting reason the worker kept is stale.
    ClearWaiting { name: String },
}

/// Whether a regular container that exited with `exit_code` is restarted.
pub fn should_restart(policy: &str, exit_code: i32) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => exit_code != 0,
        _ => true,
    }
}

pub fn compute_pod_actions(
    init: &[Container],
    containers: &[Container],
    ephemeral: &[(Container, Option<String>)],
    policy: &str,
    views: &HashMap<String, ContainerView>,
) -> Vec<Action> {
    let none = ContainerView::default();
    let view = |name: &str| views.get(name).unwrap_or(&none);
    let mut out = Vec::new();
    for c in init {
        let v = view(&c.name);
        if status::init_done(c, v) {
            continue;
        }
        let sidecar = status::is_sidecar(c);
        match &v.latest {
            // A sidecar that exited is restarted whatever the pod's policy.
            Some(l) if l.state == ContainerState::Exited => {
                if sidecar || policy != "Never" {
                    out.push(Action::Restart {
                        name: c.name.clone(),
                        init: true,
                    });
                }
            }
            // Running (a sidecar not started yet): the next one waits.
            Some(_) => {}
            None => out.push(Action::Start {
                name: c.name.clone(),
                init: true,
            }),
        }
        return out;
    }
    for c in containers {
        let name = c.name.clone();
        match &view(&c.name).latest {
            None => out.push(Action::Start { name, init: false }),
            Some(l) if l.state == ContainerState::Exited => {
                if should_restart(policy, l.exit_code) {
                    out.push(Action::Restart { name, init: false });
                }
            }
            Some(l) if l.state == ContainerState::Running => {
                out.push(Action::ClearWaiting { name });
            }
            Some(_) => {}
        }
    }
    for (c, target) in ephemeral {
        if view(&c.name).latest.is_none() {
            let target_id = target
                .as_deref()
                .and_then(|t| views.get(t))
                .and_then(|t| t.latest.as_ref())
                .map(|t| t.id.clone());
            out.push(Action::StartEphemeral {
                name: c.name.clone(),
                target_id,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ContainerStatus;
    use serde_json::json;

    fn container(name: &str, sidecar: bool) -> Container {
        let mut v = json!({"name": name, "image": "busybox"});
        if sidecar {
            v["restartPolicy"] = json!("Always");
        }
        serde_json::from_value(v).unwrap()
    }

    fn running(id: &str) -> ContainerView {
        instance(id, ContainerState::Running, 0)
    }

    fn exited(id: &str, code: i32) -> ContainerView {
        instance(id, ContainerState::Exited, code)
    }

    fn instance(id: &str, state: ContainerState, exit_code: i32) -> ContainerView {
        ContainerView {
            latest: Some(ContainerStatus {
                id: id.into(),
                state,
                exit_code,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn start(name: &str, init: bool) -> Action {
        Action::Start {
            name: name.into(),
            init,
        }
    }

    fn restart(name: &str, init: bool) -> Action {
        Action::Restart {
            name: name.into(),
            init,
        }
    }

    fn clear(name: &str) -> Action {
        Action::ClearWaiting { name: name.into() }
    }

    #[test]
    fn restart_policies() {
        for (policy, code, want) in [
            ("Always", 0, true),
            ("Always", 1, true),
            ("OnFailure", 0, false),
            ("OnFailure", 137, true),
            ("Never", 1, false),
        ] {
            assert_eq!(should_restart(policy, code), want, "{policy} {code}");
        }
    }

    #[test]
    fn actions_follow_init_order_sidecars_and_policies() {
        let init = [
            container("i1", false),
            container("side", true),
            container("i2", false),
        ];
        let main = [container("app", false), container("log", false)];
        let mut startup_pending = running("side");
        startup_pending.started = Some(false);
        type Case = (
            &'static str,
            &'static str,
            Vec<(&'static str, ContainerView)>,
            Vec<Action>,
        );
        let cases: Vec<Case> = vec![
            (
                "fresh pod: the first init container only",
                "Always",
                vec![],
                vec![start("i1", true)],
            ),
            (
                "init running: nothing else",
                "Always",
                vec![("i1", running("x"))],
                vec![],
            ),
            (
                "init done: the sidecar next",
                "Always",
                vec![("i1", exited("x", 0))],
                vec![start("side", true)],
            ),
            (
                "a sidecar before its startup probe passes gates the next",
                "Always",
                vec![("i1", exited("x", 0)), ("side", startup_pending)],
                vec![],
            ),
            (
                "init failed, Never: nothing more",
                "Never",
                vec![("i1", exited("x", 1))],
                vec![],
            ),
            (
                "init failed, OnFailure: restarted",
                "OnFailure",
                vec![("i1", exited("x", 1))],
                vec![restart("i1", true)],
            ),
            (
                "an exited sidecar restarts even under Never",
                "Never",
                vec![("i1", exited("x", 0)), ("side", exited("s", 0))],
                vec![restart("side", true)],
            ),
            (
                "all init done: every regular container at once",
                "Always",
                vec![
                    ("i1", exited("x", 0)),
                    ("side", running("s")),
                    ("i2", exited("y", 0)),
                ],
                vec![start("app", false), start("log", false)],
            ),
            (
                "regular containers by policy",
                "OnFailure",
                vec![
                    ("i1", exited("x", 0)),
                    ("side", running("s")),
                    ("i2", exited("y", 0)),
                    ("app", exited("a", 0)),
                    ("log", exited("l", 2)),
                ],
                vec![restart("log", false)],
            ),
            (
                "running containers clear their waiting reasons",
                "Always",
                vec![
                    ("i1", exited("x", 0)),
                    ("side", running("s")),
                    ("i2", exited("y", 0)),
                    ("app", running("a")),
                    ("log", exited("l", 0)),
                ],
                vec![clear("app"), restart("log", false)],
            ),
        ];
        for (what, policy, views, want) in cases {
            let views: HashMap<String, ContainerView> =
                views.into_iter().map(|(n, v)| (n.to_string(), v)).collect();
            assert_eq!(
                compute_pod_actions(&init, &main, &[], policy, &views),
                want,
                "{what}"
            );
        }
    }

    #[test]
    fn ephemeral_containers_start_once_in_their_targets_namespace() {
        let main = [container("app", false)];
        let debug = [(container("debugger", false), Some("app".to_string()))];
        let views: HashMap<String, ContainerView> = [("app".to_string(), running("a1"))].into();
        assert_eq!(
            compute_pod_actions(&[], &main, &debug, "Always", &views),
            [
                clear("app"),
                Action::StartEphemeral {
                    name: "debugger".into(),
                    target_id: Some("a1".into())
                }
            ]
        );
        let mut done = views.clone();
        done.insert("debugger".into(), exited("d", 0));
        assert_eq!(
            compute_pod_actions(&[], &main, &debug, "Always", &done),
            [clear("app")],
            "never restarted"
        );
    }
}
