//! Whole statuses, checked field by field and through the `kubectl get pods`
//! printer (what users see).

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use serde_json::{Value, json};

use super::*;

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000, 0).unwrap()
}

fn ago(s: i64) -> DateTime<Utc> {
    now() - Duration::seconds(s)
}

fn pod(spec: Value) -> Pod {
    let mut spec = spec;
    spec["nodeName"] = json!("node-1");
    serde_json::from_value(json!({
        "metadata": {"name": "myapp-1", "namespace": "default", "uid": "u1",
            "creationTimestamp": ago(600).to_rfc3339()},
        "spec": spec}))
    .unwrap()
}

fn app() -> Value {
    json!({"containers": [{"name": "app", "image": "busybox"}]})
}

/// An instance: (name, n, state, exit code, reason, created/started/finished seconds ago).
fn inst(
    name: &str,
    n: i32,
    state: State,
    exit: i32,
    reason: &str,
    started: i64,
    finished: Option<i64>,
) -> ObservedContainer {
    ObservedContainer {
        id: format!("containerd://{name}{n}"),
        name: name.into(),
        state,
        created_at: Some(ago(started + 1)),
        started_at: Some(ago(started)),
        finished_at: finished.map(ago),
        exit_code: exit,
        reason: reason.into(),
        message: String::new(),
        image: "docker.io/library/busybox:latest".into(),
        image_ref: "docker.io/library/busybox@sha256:abc".into(),
        restart_count: n,
    }
}

struct Case<'a> {
    pod: Pod,
    old: PodStatus,
    containers: Vec<ObservedContainer>,
    sandbox_ready: bool,
    failures: HashMap<String, StartFailure>,
    terminal: bool,
    probes: &'a dyn ProbeView,
}

impl Case<'_> {
    fn new(pod: Pod) -> Self {
        Case {
            pod,
            old: PodStatus::default(),
            containers: vec![],
            sandbox_ready: true,
            failures: HashMap::new(),
            terminal: false,
            probes: &NoProbes,
        }
    }

    fn fail(mut self, name: &str, reason: &str, message: &str) -> Self {
        self.failures.insert(
            name.into(),
            StartFailure {
                reason: reason.into(),
                message: message.into(),
            },
        );
        self
    }

    fn run(&self) -> PodStatus {
        let input = StatusInput {
            pod: &self.pod,
            old: &self.old,
            containers: &self.containers,
            sandbox_ready: self.sandbox_ready,
            pod_ips: &["10.1.0.5".to_string()],
            host_ips: &["192.168.1.10".to_string()],
            start_failures: &self.failures,
            terminal: self.terminal,
            now: now(),
        };
        generate(&input, self.probes)
    }
}

/// (READY, STATUS, RESTARTS) as `kubectl get pods` prints them.
fn printed(p: &Pod, status: &PodStatus) -> (String, String, String) {
    let mut v = serde_json::to_value(p).unwrap();
    v["status"] = serde_json::to_value(status).unwrap();
    let cells = berth_api::printers::cells("", "Pod", &v, now());
    let s = |i: usize| cells[i].as_str().unwrap().to_string();
    (s(1), s(2), s(3))
}

fn conds(s: &PodStatus) -> Vec<(String, String, String, String)> {
    s.conditions
        .iter()
        .flatten()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn c4(t: &str, s: &str, r: &str, m: &str) -> (String, String, String, String) {
    (t.into(), s.into(), r.into(), m.into())
}

#[test]
fn creating_pod() {
    let mut case = Case::new(pod(app()));
    case.sandbox_ready = false;
    let s = case.run();
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let cs = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        cs.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("ContainerCreating")
    );
    assert_eq!(
        (cs.image.as_str(), cs.ready, cs.restart_count, cs.started),
        ("busybox", false, 0, Some(false))
    );
    assert_eq!(
        conds(&s),
        vec![
            c4("PodReadyToStartContainers", "False", "", ""),
            c4("Initialized", "True", "", ""),
            c4(
                "Ready",
                "False",
                "ContainersNotReady",
                "containers with unready status: [app]"
            ),
            c4(
                "ContainersReady",
                "False",
                "ContainersNotReady",
                "containers with unready status: [app]"
            ),
            c4("PodScheduled", "True", "", ""),
        ]
    );
    assert!(
        s.conditions
            .iter()
            .flatten()
            .all(|c| c.last_transition_time == Some(api_time(now())))
    );
    assert_eq!(s.start_time, Some(api_time(now())));
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
    assert_eq!(s.host_ip.as_deref(), Some("192.168.1.10"));
    assert_eq!(
        printed(&case.pod, &s),
        ("0/1".into(), "ContainerCreating".into(), "0".into())
    );
}

#[test]
fn running_pod() {
    let mut case = Case::new(pod(app()));
    case.containers = vec![inst("app", 0, State::Running, 0, "", 30, None)];
    let s = case.run();
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let cs = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(cs.container_id.as_deref(), Some("containerd://app0"));
    assert_eq!(cs.image, "docker.io/library/busybox:latest");
    assert_eq!(cs.image_id, "docker.io/library/busybox@sha256:abc");
    assert_eq!(
        cs.state
            .as_ref()
            .unwrap()
            .running
            .as_ref()
            .unwrap()
            .started_at,
        Some(api_time(ago(30)))
    );
    assert_eq!((cs.ready, cs.started), (true, Some(true)));
    assert_eq!(s.pod_ip.as_deref(), Some("10.1.0.5"));
    assert!(conds(&s).iter().all(|c| c.1 == "True"));
    assert_eq!(
        printed(&case.pod, &s),
        ("1/1".into(), "Running".into(), "0".into())
    );
    // The next status keeps the start time and unchanged transition times.
    let mut next = Case::new(case.pod.clone());
    next.containers = case.containers.clone();
    next.old = s.clone();
    let input_now_later = next.run();
    assert_eq!(input_now_later.start_time, s.start_time);
}

#[test]
fn seed_crash_loop_back_off() {
    // The seed: the container was killed 5 times; the 5th exit was 30 s ago
    // and the agent is backing off (its 4th restart).
    let mut case = Case::new(pod(app())).fail(
        "app",
        "CrashLoopBackOff",
        "back-off 40s restarting failed container=app pod=myapp-1_default(u1)",
    );
    case.containers = (0..5)
        .map(|n| {
            let finished = 30 + (4 - n) * 70;
            inst(
                "app",
                n as i32,
                State::Exited,
                137,
                "Error",
                finished + 35,
                Some(finished),
            )
        })
        .collect();
    let s = case.run();
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let cs = &s.container_statuses.as_ref().unwrap()[0];
    let w = cs.state.as_ref().unwrap().waiting.as_ref().unwrap();
    assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(
        w.message.as_deref(),
        Some("back-off 40s restarting failed container=app pod=myapp-1_default(u1)")
    );
    let last = cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (137, Some("Error"))
    );
    assert_eq!(last.finished_at, Some(api_time(ago(30))));
    assert_eq!(last.container_id.as_deref(), Some("containerd://app4"));
    assert_eq!(cs.restart_count, 4);
    assert_eq!(cs.container_id.as_deref(), Some("containerd://app4"));
    assert_eq!(
        printed(&case.pod, &s),
        (
            "0/1".into(),
            "CrashLoopBackOff".into(),
            "4 (30s ago)".into()
        )
    );
    assert_eq!(
        conds(&s)[2],
        c4(
            "Ready",
            "False",
            "ContainersNotReady",
            "containers with unready status: [app]"
        )
    );
}

#[test]
fn exited_container_before_back_off_decision() {
    // Exited, no start failure recorded yet: the terminated state shows.
    let mut case = Case::new(pod(app()));
    case.containers = vec![
        inst("app", 0, State::Exited, 1, "Error", 100, Some(80)),
        inst("app", 1, State::Exited, 2, "Error", 20, Some(10)),
    ];
    let s = case.run();
    let cs = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        cs.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        2
    );
    assert_eq!(
        cs.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        1
    );
    // RESTARTS counts from the previous instance's end (lastState).
    assert_eq!(
        printed(&case.pod, &s),
        ("0/1".into(), "Error".into(), "1 (80s ago)".into())
    );
}

#[test]
fn completed_and_failed_pods() {
    let spec = |policy: &str| {
        let mut v = app();
        v["restartPolicy"] = json!(policy);
        v
    };
    let cases = [
        ("Never", 0, "Completed", "Succeeded", "PodCompleted"),
        ("OnFailure", 0, "Completed", "Succeeded", "PodCompleted"),
        ("Never", 1, "Error", "Failed", "PodFailed"),
        ("Never", 137, "OOMKilled", "Failed", "PodFailed"),
    ];
    for (policy, code, reason, phase, cond_reason) in cases {
        let mut case = Case::new(pod(spec(policy)));
        case.containers = vec![inst("app", 0, State::Exited, code, reason, 20, Some(5))];
        // A start failure recorded earlier does not matter: it won't restart.
        case = case.fail("app", "CrashLoopBackOff", "ignored");
        let s = case.run();
        assert_eq!(s.phase.as_deref(), Some(phase), "{policy} {code}");
        assert_eq!(
            conds(&s)[2],
            c4("Ready", "False", cond_reason, ""),
            "{policy} {code}"
        );
        assert_eq!(
            printed(&case.pod, &s),
            ("0/1".into(), reason.into(), "0".into()),
            "{policy} {code}"
        );
    }
}

#[test]
fn start_failures_show_as_waiting() {
    let cases = [
        (
            "ErrImagePull",
            "failed to pull image \"nosuch:latest\": not found",
        ),
        (
            "ImagePullBackOff",
            "Back-off pulling image \"nosuch:latest\": not found",
        ),
        ("CreateContainerConfigError", "configmap \"x\" not found"),
        (
            "RunContainerError",
            "exec: \"nosuch\": executable file not found in $PATH",
        ),
    ];
    for (reason, msg) in cases {
        let case = Case::new(pod(app())).fail("app", reason, msg);
        let s = case.run();
        let w = s.container_statuses.as_ref().unwrap()[0]
            .state
            .clone()
            .unwrap()
            .waiting
            .unwrap();
        assert_eq!(
            (w.reason.as_deref(), w.message.as_deref()),
            (Some(reason), Some(msg))
        );
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        assert_eq!(printed(&case.pod, &s).1, reason);
    }
}

#[test]
fn init_containers() {
    let spec = json!({"initContainers": [{"name": "setup", "image": "busybox"}],
        "containers": [{"name": "app", "image": "busybox"}]});
    let mut case = Case::new(pod(spec.clone()));
    case.containers = vec![inst("setup", 0, State::Running, 0, "", 5, None)];
    let s = case.run();
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    let app_state = s.container_statuses.as_ref().unwrap()[0]
        .state
        .clone()
        .unwrap();
    assert_eq!(
        app_state.waiting.unwrap().reason.as_deref(),
        Some("PodInitializing")
    );
    assert_eq!(
        conds(&s)[1],
        c4(
            "Initialized",
            "False",
            "ContainersNotInitialized",
            "containers with incomplete status: [setup]"
        )
    );
    assert_eq!(printed(&case.pod, &s).1, "Init:0/1");

    // The init container finished; the app runs.
    let mut case = Case::new(pod(spec.clone()));
    case.containers = vec![
        inst("setup", 0, State::Exited, 0, "Completed", 20, Some(15)),
        inst("app", 0, State::Running, 0, "", 10, None),
    ];
    let s = case.run();
    assert_eq!(s.phase.as_deref(), Some("Running"));
    let init = &s.init_container_statuses.as_ref().unwrap()[0];
    assert!(init.ready);
    assert_eq!(conds(&s)[1], c4("Initialized", "True", "", ""));
    assert_eq!(
        printed(&case.pod, &s),
        ("1/1".into(), "Running".into(), "0".into())
    );

    // A failing init container in back-off.
    let mut case = Case::new(pod(spec)).fail(
        "setup",
        "CrashLoopBackOff",
        "back-off 10s restarting failed container=setup pod=myapp-1_default(u1)",
    );
    case.containers = vec![inst("setup", 1, State::Exited, 1, "Error", 20, Some(15))];
    let s = case.run();
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(printed(&case.pod, &s).1, "Init:CrashLoopBackOff");
}

/// A probe view where readiness never passed.
struct NotReady;

impl ProbeView for NotReady {
    fn update_pod_status(&self, pod: &Pod, status: &mut PodStatus) {
        NoProbes.update_pod_status(pod, status);
        for cs in status.container_statuses.iter_mut().flatten() {
            cs.ready = false;
        }
    }
}

#[test]
fn failing_readiness_probe() {
    let mut case = Case::new(pod(app()));
    case.containers = vec![inst("app", 0, State::Running, 0, "", 30, None)];
    case.probes = &NotReady;
    let s = case.run();
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(
        conds(&s)[2],
        c4(
            "Ready",
            "False",
            "ContainersNotReady",
            "containers with unready status: [app]"
        )
    );
    assert_eq!(
        printed(&case.pod, &s),
        ("0/1".into(), "Running".into(), "0".into())
    );
}

#[test]
fn statuses_sorted_and_vanished_containers() {
    let spec = json!({"containers": [{"name": "web", "image": "nginx"}, {"name": "api", "image": "busybox",
        "volumeMounts": [{"name": "token", "mountPath": "/var/run/secrets", "readOnly": true}, {"name": "data", "mountPath": "/data"}]}]});
    let mut case = Case::new(pod(spec));
    case.containers = vec![inst("web", 0, State::Running, 0, "", 30, None)];
    // "api" was running, and the runtime lost it.
    case.old = serde_json::from_value(json!({"containerStatuses": [{"name": "api", "image": "busybox", "imageID": "",
        "ready": true, "restartCount": 2, "state": {"running": {"startedAt": ago(100).to_rfc3339()}}}]}))
    .unwrap();
    let s = case.run();
    let names: Vec<&str> = s
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["api", "web"]);
    let api = &s.container_statuses.as_ref().unwrap()[0];
    assert_eq!(api.restart_count, 3);
    let last = api
        .last_state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap();
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (137, Some("ContainerStatusUnknown"))
    );
    let mounts = serde_json::to_value(&api.volume_mounts).unwrap();
    assert_eq!(
        mounts,
        json!([{"name": "token", "mountPath": "/var/run/secrets", "readOnly": true, "recursiveReadOnly": "Disabled"},
               {"name": "data", "mountPath": "/data"}])
    );
    // Still one container waiting with a last termination: Running, not Pending.
    assert_eq!(s.phase.as_deref(), Some("Running"));
}

#[test]
fn terminal_phase_is_sticky_and_gates_preserved() {
    let mut p = pod(
        json!({"containers": [{"name": "app", "image": "busybox"}], "readinessGates": [{"conditionType": "example.com/lb"}]}),
    );
    p.status = Some(
        serde_json::from_value(json!({"conditions": [
        {"type": "example.com/lb", "status": "True"}, {"type": "Ready", "status": "False"}]}))
        .unwrap(),
    );
    let mut case = Case::new(p);
    case.containers = vec![inst("app", 0, State::Running, 0, "", 30, None)];
    let s = case.run();
    let types: Vec<String> = conds(&s)
        .into_iter()
        .map(|c| format!("{}={}", c.0, c.1))
        .collect();
    assert_eq!(
        types,
        [
            "example.com/lb=True",
            "PodReadyToStartContainers=True",
            "Initialized=True",
            "Ready=True",
            "ContainersReady=True",
            "PodScheduled=True"
        ]
    );
    case.old = PodStatus {
        phase: Some("Failed".into()),
        reason: Some("Evicted".into()),
        ..Default::default()
    };
    let s = case.run();
    assert_eq!(
        (s.phase.as_deref(), s.reason.as_deref()),
        (Some("Failed"), Some("Evicted"))
    );
}

#[test]
fn ephemeral_containers() {
    let spec = json!({"containers": [{"name": "app", "image": "nginx"}],
        "ephemeralContainers": [{"name": "debugger", "image": "busybox", "targetContainerName": "app"}]});
    let mut case = Case::new(pod(spec));
    case.containers = vec![
        inst("app", 0, State::Running, 0, "", 60, None),
        inst("debugger", 0, State::Exited, 0, "Completed", 20, Some(2)),
    ];
    // Ephemeral containers never restart: a recorded failure does not apply.
    case = case.fail("debugger", "CrashLoopBackOff", "ignored");
    let s = case.run();
    let e = &s.ephemeral_container_statuses.as_ref().unwrap()[0];
    assert_eq!(e.name, "debugger");
    assert_eq!(
        e.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("Completed")
    );
    assert_eq!(s.phase.as_deref(), Some("Running"));
}

#[test]
fn running_containers_report_resources() {
    let spec = json!({"containers": [
        {"name": "a", "image": "busybox", "resources": {"limits": {"cpu": "0.5", "memory": "64Mi", "nvidia.com/gpu": "1"},
            "requests": {"cpu": "250m", "memory": "100M"}}},
        {"name": "b", "image": "busybox"},
        {"name": "c", "image": "busybox", "resources": {"limits": {"memory": "100M"}, "requests": {"memory": "100M"}}}]});
    let mut case = Case::new(pod(spec));
    case.containers = vec![
        inst("a", 0, State::Running, 0, "", 30, None),
        inst("b", 0, State::Running, 0, "", 30, None),
        inst("c", 0, State::Exited, 0, "Completed", 30, Some(1)),
    ];
    let s = case.run();
    let res: Vec<Value> = s
        .container_statuses
        .iter()
        .flatten()
        .map(|c| serde_json::to_value(&c.resources).unwrap())
        .collect();
    assert_eq!(
        res,
        [
            json!({"limits": {"cpu": "500m", "memory": "64Mi"}, "requests": {"cpu": "250m", "memory": "100M"}}),
            json!({}),
            Value::Null, // not running
        ]
    );
    // The memory limit is the runtime's byte count in canonical form (Go
    // prints 100M of bytes as 100000000: not a whole number of KiB).
    let c: k8s_openapi::api::core::v1::Container = serde_json::from_value(
        json!({"name": "x", "resources": {"limits": {"memory": "100M", "cpu": "2"}}}),
    )
    .unwrap();
    let r = containers::status_resources(&c);
    assert_eq!(
        serde_json::to_value(r).unwrap(),
        json!({"limits": {"cpu": "2", "memory": "100000000"}})
    );
}

#[test]
fn from_runtime_status() {
    let rs = crate::runtime::ContainerStatus {
        id: "abc".into(),
        sandbox_id: "sb".into(),
        name: "app".into(),
        attempt: 3,
        state: crate::runtime::ContainerState::Exited,
        created_at: Some(ago(10)),
        started_at: Some(ago(9)),
        finished_at: Some(ago(1)),
        exit_code: 137,
        reason: "OOMKilled".into(),
        message: String::new(),
        image: "busybox:latest".into(),
        image_ref: "sha256:1".into(),
        labels: Default::default(),
        annotations: Default::default(),
        log_path: String::new(),
    };
    let o = ObservedContainer::from_runtime(&rs, "containerd");
    assert_eq!(
        (o.id.as_str(), o.restart_count, o.state),
        ("containerd://abc", 3, State::Exited)
    );
}
