use serde_json::json;

use super::*;

#[test]
fn active_deadlines_count_from_the_start_time() {
    let now: chrono::DateTime<Utc> = "2026-12-02T10:00:00Z".parse().unwrap();
    let pod = |deadline: Option<i64>, start: Option<&str>| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}], "activeDeadlineSeconds": deadline},
            "status": {"startTime": start},
        }))
        .unwrap()
    };
    let secs = |s: u64| Some(Duration::from_secs(s));
    for (deadline, start, want) in [
        (None, Some("2026-12-02T09:00:00Z"), None),
        (Some(30), None, None),
        (Some(30), Some("2026-12-02T09:59:50Z"), secs(20)),
        (Some(30), Some("2026-12-02T09:59:30Z"), secs(0)),
        (Some(30), Some("2026-12-02T09:00:00Z"), secs(0)),
        (
            Some(i64::MAX),
            Some("2026-12-02T09:00:00Z"),
            Some(Duration::from_millis(u64::MAX - 3_600_000)),
        ),
    ] {
        assert_eq!(
            active_deadline_left(&pod(deadline, start), None, now),
            want,
            "{deadline:?} {start:?}"
        );
    }
    // The worker's own status wins over the API's copy.
    let own: k8s_openapi::api::core::v1::PodStatus =
        serde_json::from_value(json!({"startTime": "2026-12-02T09:59:55Z"})).unwrap();
    assert_eq!(
        active_deadline_left(
            &pod(Some(10), Some("2026-12-02T09:00:00Z")),
            Some(&own),
            now
        ),
        secs(5)
    );
}

#[test]
fn a_fresh_sigkill_exit_is_read_again_for_its_oom_reason() {
    let now = Utc::now();
    let exited = |code: i32, reason: &str, ago_ms: i64| ContainerStatus {
        state: ContainerState::Exited,
        exit_code: code,
        reason: reason.into(),
        finished_at: Some(now - chrono::Duration::milliseconds(ago_ms)),
        ..Default::default()
    };
    let cases = [
        ("137 Error just now", exited(137, "Error", 100), true),
        ("already OOMKilled", exited(137, "OOMKilled", 100), false),
        ("137 long ago", exited(137, "Error", 5_000), false),
        ("exit 1", exited(1, "Error", 100), false),
        ("completed", exited(0, "Completed", 100), false),
        (
            "running",
            ContainerStatus {
                state: ContainerState::Running,
                ..Default::default()
            },
            false,
        ),
    ];
    for (case, st, want) in cases {
        assert_eq!(oom_reason_may_be_late(&st, now), want, "{case}");
    }
}

// The whole worker driven on the fake runtime, a fake cgroup v2 tree, objects
// served from memory and a status writer that records: restart policies,
// init and sidecar ordering, the volume manager, the image puller and teardown.

use crate::cgroups::manager::CgroupName;
use crate::cgroups::node::{CgroupsConfig, NodeCgroups};
use crate::cgroups::v2::V2Manager;
use crate::runtime::fake::FakeRuntime;
use crate::testutil::{FakeObjects, RecordedEvents, RecordingWriter, TempDir};

struct NoTokens;

#[async_trait::async_trait]
impl crate::token::TokenRequester for NoTokens {
    async fn create_token(
        &self,
        _: &str,
        _: &str,
        _: &k8s_openapi::api::authentication::v1::TokenRequest,
    ) -> Result<k8s_openapi::api::authentication::v1::TokenRequest, String> {
        Err("no tokens in this test".into())
    }
}

struct Node {
    shared: Arc<Shared>,
    rt: Arc<FakeRuntime>,
    writer: Arc<RecordingWriter>,
    events: RecordedEvents,
    objects: Arc<FakeObjects>,
    dir: TempDir,
}

async fn node() -> Node {
    node_with(CgroupsConfig::default()).await
}

async fn node_with(cgroups_config: CgroupsConfig) -> Node {
    let dir = TempDir::new("worker");
    dir.write(&[("cgroup/cgroup.controllers", "cpu memory pids")]);
    let capacity = crate::node::parse_resources("cpu=4,memory=8Gi,pid=4194304").unwrap();
    let cgroups = NodeCgroups::start(
        Box::new(V2Manager::new(dir.path().join("cgroup"), "/")),
        CgroupName::parse("berth"),
        cgroups_config,
        &capacity,
    )
    .unwrap();
    let rt = Arc::new(FakeRuntime::new());
    rt.add_image("busybox");
    let writer = Arc::new(RecordingWriter::default());
    let statuses = Arc::new(crate::status::manager::StatusManager::new(writer.clone()));
    let clock = Arc::new(berth_runtime::clock::RealClock);
    let prober = crate::prober::Prober::new(Arc::new(crate::prober::exec::RuntimeExec(rt.clone())));
    let (probes, _updates) = ProbeManager::new(prober, statuses.clone(), clock.clone());
    let (recorder, events) = crate::testutil::recorder();
    let objects = Arc::new(FakeObjects::default());
    let devices =
        crate::cm::devicemanager::DeviceManager::start(dir.path().join("plugins"), vec![0])
            .await
            .unwrap();
    let cpus = Arc::new(
        crate::cm::cpumanager::CpuManager::new(
            Default::default(),
            berth_topology::machine::Machine::discover(
                &berth_topology::machine::FakeSysfs::machine(1, 1, 2, 1, 0),
            )
            .unwrap(),
            dir.path(),
        )
        .unwrap(),
    );
    let shared = Arc::new(Shared {
        objects: objects.clone(),
        runtime: rt.clone(),
        ctx: NodeContext {
            pods_dir: dir.path().join("pods"),
            logs_dir: dir.path().join("logs"),
            cluster_dns: vec!["10.43.0.10".into()],
            cluster_domain: "cluster.local".into(),
            memory_capacity: 8 << 30,
            host_dns: Default::default(),
            seccomp_root: dir.path().join("seccomp"),
        },
        node_name: "node-1".into(),
        host_ip: "192.0.2.1".into(),
        recorder,
        backoff: Mutex::new(Backoff::new(Default::default())),
        resync: Duration::from_secs(1),
        max_grace: Duration::from_secs(30),
        probes,
        statuses,
        pokes: Mutex::new(HashMap::new()),
        services: kube::runtime::reflector::store().0,
        allocatable: capacity,
        tokens: Arc::new(crate::token::TokenManager::new(Arc::new(NoTokens), clock)),
        cgroups: Arc::new(cgroups),
        evictions: Arc::new(crate::eviction::Evictions::default()),
        admission: super::super::security::Admission {
            sysctls: Default::default(),
            apparmor_host_error: None,
            runtime: Default::default(),
        },
        devices: devices.clone(),
        cpus: cpus.clone(),
        topology: Arc::new(
            crate::cm::topologymanager::Manager::new(
                Default::default(),
                cpus.machine().numa.clone(),
                cpus,
                Some(devices.clone()),
            )
            .unwrap(),
        ),
    });
    Node {
        shared,
        rt,
        writer,
        events,
        objects,
        dir,
    }
}

impl Node {
    fn worker(&self) -> Worker {
        Worker::new(self.shared.clone(), "u1".into())
    }

    /// The phase of the last status sent.
    fn phase(&self) -> String {
        let st = self.writer.last_status().unwrap_or_default();
        st["phase"].as_str().unwrap_or_default().to_string()
    }

    /// The last status sent for container `name` (init or regular).
    fn container_status(&self, name: &str) -> Value {
        let st = self.writer.last_status().unwrap_or_default();
        ["containerStatuses", "initContainerStatuses"]
            .iter()
            .flat_map(|k| st[k].as_array().cloned().unwrap_or_default())
            .find(|c| c["name"] == name)
            .unwrap_or_default()
    }

    /// Ends the newest instance of container `name`.
    fn exit(&self, name: &str, code: i32) {
        let last = self.rt.containers_named(name).pop().expect(name);
        let reason = if code == 0 { "Completed" } else { "Error" };
        self.rt.exit_container(&last.id, code, reason);
    }

    /// Container names in the order they were created.
    fn created(&self) -> Vec<String> {
        self.rt
            .calls()
            .iter()
            .filter_map(|c| c.strip_prefix("create_container "))
            .map(String::from)
            .collect()
    }

    async fn event_reasons(&self) -> Vec<String> {
        self.shared.recorder.flush().await;
        self.events.reasons().into_iter().map(|r| r.0).collect()
    }
}

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": spec,
    }))
    .unwrap()
}

fn busybox(name: &str) -> Value {
    json!({"name": name, "image": "busybox", "imagePullPolicy": "IfNotPresent"})
}

use serde_json::Value;

#[tokio::test]
async fn restart_policies_decide_restarts_and_the_phase() {
    // (restartPolicy, exit code, restarted, phase after the exit)
    let cases = [
        ("Always", 0, true, "Running"),
        ("Always", 1, true, "Running"),
        ("OnFailure", 0, false, "Succeeded"),
        ("OnFailure", 1, true, "Running"),
        ("Never", 0, false, "Succeeded"),
        ("Never", 1, false, "Failed"),
    ];
    for (policy, code, restarted, phase) in cases {
        let n = node().await;
        let p = pod(json!({"restartPolicy": policy, "containers": [busybox("app")]}));
        let mut w = n.worker();
        w.sync(&p).await;
        let case = format!("{policy} exit {code}");
        assert_eq!(n.phase(), "Running", "{case}");
        n.exit("app", code);
        w.sync(&p).await;
        let instances = n.rt.containers_named("app").len();
        assert_eq!(instances, if restarted { 2 } else { 1 }, "{case}");
        assert_eq!(n.phase(), phase, "{case}");
        let restarts = n.container_status("app")["restartCount"].as_i64();
        assert_eq!(restarts, Some(i64::from(restarted)), "{case}");
        // A finished pod keeps its container (for logs) but not its sandbox.
        let sandbox_ready =
            n.rt.list_sandboxes(&w.uid_filter()).await.unwrap()[0].state == SandboxState::Ready;
        assert_eq!(sandbox_ready, phase == "Running", "{case}");
    }
}

#[tokio::test]
async fn a_second_crash_backs_off_with_upstreams_reason_and_event() {
    let n = node().await;
    let p = pod(json!({"containers": [busybox("app")]}));
    let mut w = n.worker();
    w.sync(&p).await;
    n.exit("app", 1);
    w.sync(&p).await; // restarted at once
    n.exit("app", 1);
    w.sync(&p).await; // now within the 10 s back-off
    assert_eq!(n.rt.containers_named("app").len(), 2);
    let cs = n.container_status("app");
    assert_eq!(cs["state"]["waiting"]["reason"], "CrashLoopBackOff", "{cs}");
    let msg = cs["state"]["waiting"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        msg.starts_with("back-off 10s restarting failed container=app pod=p_ns(u1)"),
        "{msg}"
    );
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], 1, "{cs}");
    assert!(n.event_reasons().await.contains(&"BackOff".to_string()));
}

#[tokio::test]
async fn init_containers_run_in_order_and_a_sidecar_runs_beside_the_app() {
    let n = node().await;
    let mut sidecar = busybox("proxy");
    sidecar["restartPolicy"] = json!("Always");
    let p = pod(json!({
        "initContainers": [busybox("first"), sidecar, busybox("second")],
        "containers": [busybox("app")],
    }));
    let mut w = n.worker();
    w.sync(&p).await;
    assert_eq!(n.created(), ["first"]);
    assert_eq!(n.phase(), "Pending");
    w.sync(&p).await;
    assert_eq!(n.created(), ["first"], "nothing starts while first runs");
    n.exit("first", 0);
    for _ in 0..3 {
        w.sync(&p).await;
    }
    assert_eq!(n.created(), ["first", "proxy", "second"]);
    assert_eq!(n.phase(), "Pending");
    n.exit("second", 0);
    w.sync(&p).await;
    assert_eq!(n.created(), ["first", "proxy", "second", "app"]);
    w.sync(&p).await;
    assert_eq!(n.phase(), "Running");
    // The sidecar keeps running beside the app and is restarted if it exits.
    n.exit("proxy", 0);
    w.sync(&p).await;
    assert_eq!(n.rt.containers_named("proxy").len(), 2);
    assert_eq!(n.phase(), "Running");
}

#[tokio::test]
async fn a_failed_init_container_under_restart_never_fails_the_pod() {
    let n = node().await;
    let p = pod(json!({
        "restartPolicy": "Never",
        "initContainers": [busybox("setup")],
        "containers": [busybox("app")],
    }));
    let mut w = n.worker();
    w.sync(&p).await;
    n.exit("setup", 3);
    w.sync(&p).await;
    w.sync(&p).await;
    assert_eq!(n.created(), ["setup"]);
    assert_eq!(n.phase(), "Failed");
    let cs = n.container_status("setup");
    assert_eq!(cs["state"]["terminated"]["exitCode"], 3, "{cs}");
}

#[tokio::test]
async fn env_comes_from_served_config_maps_and_pull_failures_wait() {
    let n = node().await;
    n.objects.config_maps.lock().unwrap().insert(
        ("ns".into(), "settings".into()),
        serde_json::from_value(json!({"metadata": {"name": "settings"}, "data": {"mode": "fast"}}))
            .unwrap(),
    );
    let mut app = busybox("app");
    app["env"] = json!([{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}]);
    let never = json!({"name": "never", "image": "absent:1", "imagePullPolicy": "Never"});
    let p = pod(json!({"containers": [app, never]}));
    let mut w = n.worker();
    w.sync(&p).await;
    let id = n.rt.containers_named("app")[0].id.clone();
    let env = n.rt.container_config(&id).unwrap().envs;
    assert!(
        env.contains(&("MODE".to_string(), "fast".to_string())),
        "{env:?}"
    );
    let cs = n.container_status("never");
    assert_eq!(
        cs["state"]["waiting"]["reason"], "ErrImageNeverPull",
        "{cs}"
    );
    assert_eq!(
        cs["state"]["waiting"]["message"],
        "Container image \"absent:1\" is not present with pull policy of Never"
    );
    assert_eq!(n.phase(), "Pending");
    // The unchanged status is not sent again.
    let sent = n.writer.patches().len();
    w.sync(&p).await;
    assert_eq!(n.writer.patches().len(), sent);
}

#[tokio::test]
async fn volumes_are_written_before_the_sandbox_and_a_missing_claim_holds_it_back() {
    let n = node().await;
    n.objects.config_maps.lock().unwrap().insert(
        ("ns".into(), "web".into()),
        serde_json::from_value(json!({"metadata": {"name": "web"}, "data": {"index.html": "hi"}}))
            .unwrap(),
    );
    let p = pod(json!({
        "volumes": [{"name": "site", "configMap": {"name": "web"}}],
        "containers": [busybox("app")],
    }));
    let mut w = n.worker();
    w.sync(&p).await;
    let volume = p.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0].clone();
    let dir = crate::volumes::volume_dir(&podspec::pod_dir(&n.shared.ctx, &p), &volume).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("index.html")).unwrap(),
        "hi"
    );
    assert_eq!(n.phase(), "Running");

    let n = node().await;
    let p = pod(json!({
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}],
        "containers": [busybox("app")],
    }));
    let mut w = n.worker();
    w.sync(&p).await;
    w.sync(&p).await;
    assert_eq!(n.rt.sandbox_count(), 0);
    assert_eq!(n.phase(), "Pending");
    let mounts: Vec<(String, String)> = {
        n.shared.recorder.flush().await;
        n.events
            .reasons()
            .into_iter()
            .filter(|(r, _)| r == "FailedMount")
            .collect()
    };
    assert_eq!(
        mounts.len(),
        1,
        "one event per distinct message: {mounts:?}"
    );
    assert!(
        mounts[0]
            .1
            .starts_with("MountVolume.SetUp failed for volume \"data\" : "),
        "{mounts:?}"
    );
}

#[tokio::test]
async fn deletion_stops_and_removes_everything_then_confirms_with_the_uid() {
    let n = node().await;
    let p = pod(json!({"containers": [busybox("app"), busybox("side")]}));
    let mut w = n.worker();
    w.sync(&p).await;
    let cgroup = n.dir.path().join("cgroup/berth/besteffort/podu1");
    assert!(cgroup.is_dir(), "the pod's cgroup in the fake tree");
    let mut deleted = p.clone();
    deleted.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
    );
    deleted.metadata.deletion_grace_period_seconds = Some(5);
    w.terminate(&deleted).await;
    let calls = n.rt.calls();
    let stops: Vec<&String> = calls
        .iter()
        .filter(|c| c.starts_with("stop_container"))
        .collect();
    assert_eq!(stops.len(), 2, "{calls:?}");
    // What is left of the deletion's 5 s (not the pod's default 30 s), whole seconds.
    assert!(
        stops
            .iter()
            .all(|c| c.ends_with(" 5s") || c.ends_with(" 4s")),
        "the deletion's grace: {stops:?}"
    );
    assert_eq!(n.rt.sandbox_count(), 0);
    assert!(n.rt.containers_named("app").is_empty() && n.rt.containers_named("side").is_empty());
    assert!(!cgroup.exists(), "the pod's cgroup is removed");
    assert!(
        !podspec::pod_dir(&n.shared.ctx, &p).exists(),
        "the pod's directory is removed"
    );
    // The final status says the containers ended, then the deletion is confirmed.
    let cs = n.container_status("app");
    assert_eq!(cs["state"]["terminated"]["exitCode"], 137, "{cs}");
    assert_eq!(
        n.writer.deletes(),
        [("ns".to_string(), "p".to_string(), "u1".to_string())]
    );
}

#[tokio::test]
async fn without_the_qos_hierarchy_the_runtime_places_the_pod() {
    // (--cgroups-per-qos, the sandbox's cgroup parent)
    for (per_qos, parent) in [(true, "berth/besteffort/podu1"), (false, "")] {
        let n = node_with(CgroupsConfig {
            cgroups_per_qos: per_qos,
            allocatable: crate::cgroups::allocatable::NodeAllocatableConfig {
                enforce: if per_qos { vec!["pods".into()] } else { vec![] },
                ..Default::default()
            },
            ..Default::default()
        })
        .await;
        let p = pod(json!({"containers": [busybox("app")]}));
        n.worker().sync(&p).await;
        let sandbox = n.rt.list_sandboxes(&Filter::default()).await.unwrap()[0]
            .id
            .clone();
        let cfg = n.rt.sandbox_config(&sandbox).unwrap();
        assert_eq!(cfg.cgroup_parent, parent, "--cgroups-per-qos={per_qos}");
        let pod_cgroup = n.dir.path().join("cgroup/berth/besteffort/podu1");
        assert_eq!(pod_cgroup.is_dir(), per_qos, "--cgroups-per-qos={per_qos}");
        assert_eq!(n.phase(), "Running");
    }
}
