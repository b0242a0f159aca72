//! Node pressure and health on real containerd: the seed's eviction order under a
//! tight `--eviction-hard memory.available<…` (BestEffort, then Burstable over its
//! request; Guaranteed survives; MemoryPressure comes and goes), and a container
//! runtime that stops answering makes the Node NotReady with upstream's reason.
//! Needs root and `scripts/install-deps`; takes the machine-wide agent lock.

mod common;

use std::time::{Duration, Instant};

use common::{Server, wait_until};

const MI: i64 = 1 << 20;

/// A condition's field of the node; empty while the node is not registered.
fn node_condition(s: &Server, type_: &str, field: &str) -> String {
    let out = s.kubectl(&[
        "get",
        "nodes",
        "-o",
        &format!("jsonpath={{.items[0].status.conditions[?(@.type==\"{type_}\")].{field}}}"),
    ]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn jsonpath(s: &Server, pod: &str, path: &str) -> String {
    let out = s.kubectl(&["get", "pod", pod, "-o", &format!("jsonpath={path}")]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The node's memory.available as the eviction manager computes it, from the
/// agent's own stats summary (availableBytes of the node).
fn memory_available(s: &Server) -> i64 {
    let node = s.k(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let raw = s.k(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{node}/proxy/stats/summary?only_cpu_and_memory=true"),
    ]);
    let v: serde_json::Value = serde_json::from_str(&raw).expect("summary JSON");
    v["node"]["memory"]["availableBytes"]
        .as_i64()
        .expect("availableBytes")
}

/// A pod whose container holds `mib` MiB of anonymous memory (dd's buffer,
/// blocked writing into a pipe nobody reads) after `delay` seconds.
fn memory_pod(name: &str, mib: i64, delay: u32, resources: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    imagePullPolicy: Never
    command: [\"sh\", \"-c\", \"sleep {delay}; dd if=/dev/zero bs={mib}M count=1 | sleep 3600\"]
{resources}"
    )
}

/// The seed's eviction order, for real.
#[test]
fn memory_pressure_evicts_besteffort_then_burstable_and_guaranteed_survives() {
    // The node's own footprint (server, agent, containerd) is measured on a
    // first server, then the threshold set on a second one `budget` below it.
    let baseline = {
        let s = Server::start_with_agent("evict-probe");
        s.wait_node_ready(Duration::from_secs(90));
        std::thread::sleep(Duration::from_secs(3));
        memory_available(&s)
    };
    let budget = 2500 * MI;
    let threshold_mi = (baseline - budget) / MI;
    assert!(
        threshold_mi > 500,
        "too little memory for the test: {baseline}"
    );
    let hard = format!("memory.available<{threshold_mi}Mi");
    let s = Server::start_with_agent_args(
        "evict",
        &[
            "--eviction-hard",
            &hard,
            "--eviction-pressure-transition-period",
            "20s",
        ],
    );
    s.wait_node_ready(Duration::from_secs(90));
    // How far the node is from the threshold now: the pods are sized from it,
    // so what other processes on this machine use moves both alike.
    let d = memory_available(&s) - threshold_mi * MI;
    assert!(d > 800 * MI, "node already close to its threshold: {d}");
    let mib = |f: f64| ((d as f64 * f) / MI as f64) as i64;
    // BestEffort alone crosses it; Burstable and Guaranteed together still do;
    // Guaranteed alone does not.
    let (be, bu, gu) = (mib(1.3), mib(0.9), mib(0.4));
    apply(&s, &memory_pod("besteffort", be, 0, ""));
    apply(
        &s,
        &memory_pod(
            "burstable",
            bu,
            3,
            &format!(
                "    resources:\n      requests: {{memory: 64Mi}}\n      limits: {{memory: {}Mi}}",
                bu + 200
            ),
        ),
    );
    let g_limit = gu + 200;
    apply(
        &s,
        &memory_pod(
            "guaranteed",
            gu,
            3,
            &format!(
                "    resources:\n      requests: {{memory: {g_limit}Mi, cpu: 100m}}\n      limits: {{memory: {g_limit}Mi, cpu: 100m}}"
            ),
        ),
    );
    assert_eq!(
        jsonpath(&s, "guaranteed", "{.status.qosClass}"),
        "Guaranteed"
    );
    assert_eq!(jsonpath(&s, "burstable", "{.status.qosClass}"), "Burstable");

    let evicted =
        |pod: &str| jsonpath(&s, pod, "{.status.phase}/{.status.reason}") == "Failed/Evicted";
    let start = Instant::now();
    let mut first = Vec::new();
    wait_until(Duration::from_secs(90), "a pod evicted", || {
        first = ["besteffort", "burstable", "guaranteed"]
            .into_iter()
            .filter(|p| evicted(p))
            .collect();
        !first.is_empty()
    });
    let be_at = start.elapsed();
    // The next cycle follows the first eviction's cleanup at once: both may be
    // seen together, then the DisruptionTarget times order them.
    let since = |p: &str| {
        jsonpath(
            &s,
            p,
            "{.status.conditions[?(@.type==\"DisruptionTarget\")].lastTransitionTime}",
        )
    };
    match first.as_slice() {
        ["besteffort"] => {}
        ["besteffort", "burstable"] => assert!(since("besteffort") <= since("burstable")),
        other => panic!("evicted first: {other:?}"),
    }
    // MemoryPressure is on the node while it is short (posted with the next status update).
    wait_until(Duration::from_secs(15), "MemoryPressure", || {
        node_condition(&s, "MemoryPressure", "status") == "True"
    });
    let msg = jsonpath(&s, "besteffort", "{.status.message}");
    let head = format!(
        "The node was low on resource: memory. Threshold quantity: {threshold_mi}Mi, available: "
    );
    assert!(msg.starts_with(&head), "{msg}");
    assert!(
        msg.contains("Container c was using ")
            && msg.ends_with(", request is 0, has larger consumption of memory. "),
        "{msg}"
    );
    assert_eq!(
        jsonpath(
            &s,
            "besteffort",
            "{.status.conditions[?(@.type==\"DisruptionTarget\")].reason}"
        ),
        "TerminationByKubelet"
    );
    assert!(!evicted("guaranteed"));

    wait_until(Duration::from_secs(90), "Burstable evicted", || {
        evicted("burstable")
    });
    let msg = jsonpath(&s, "burstable", "{.status.message}");
    assert!(
        msg.ends_with(", request is 64Mi, has larger consumption of memory. "),
        "{msg}"
    );
    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "reason=Evicted",
        "-o",
        "jsonpath={.items[*].involvedObject.name}",
    ]);
    assert!(
        events.contains("besteffort") && events.contains("burstable"),
        "{events}"
    );

    // The Guaranteed pod survives, and the pressure clears after the transition period.
    wait_until(Duration::from_secs(90), "MemoryPressure cleared", || {
        node_condition(&s, "MemoryPressure", "status") == "False"
    });
    assert_eq!(jsonpath(&s, "guaranteed", "{.status.phase}"), "Running");
    assert!(!evicted("guaranteed"));
    eprintln!(
        "eviction: threshold {threshold_mi}Mi, distance {}Mi, pods {be}/{bu}/{gu}Mi, BestEffort evicted after {be_at:?}",
        d / MI
    );
    s.k(&["delete", "pods", "--all", "--wait=true", "--timeout=60s"]);
}

/// The pid of the containerd Berth started for the server in `data_dir`.
fn containerd_pid(data_dir: &std::path::Path) -> i32 {
    let config = data_dir.join("agent/containerd");
    let config = config.to_string_lossy();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_containerd = args
            .first()
            .is_some_and(|a| a.rsplit('/').next() == Some("containerd"));
        if is_containerd && args.iter().any(|a| a.contains(config.as_ref())) {
            return pid;
        }
    }
    panic!("no containerd for {config}");
}

/// Resumes a stopped process when dropped, even if the test fails.
struct Stopped(i32);

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a pid this test found; SIGCONT is harmless.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

/// A containerd that stops answering makes the Node NotReady with upstream's
/// reason, and Ready again once it answers.
#[test]
fn container_runtime_down_makes_the_node_not_ready() {
    let s = Server::start_with_agent("runtime-down");
    s.wait_node_ready(Duration::from_secs(90));
    let pid = containerd_pid(&s.data_dir);
    // Killing it is not enough: the agent restarts it within a second or two.
    // Stopped, it keeps its socket but answers nothing: CRI calls time out.
    // SAFETY: kill(2) on the containerd this server started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let stopped = Stopped(pid);
    let since = Instant::now();
    // 30 s without a good answer (upstream's threshold), then the next status update.
    wait_until(Duration::from_secs(75), "node NotReady", || {
        node_condition(&s, "Ready", "status") == "False"
    });
    let took = since.elapsed();
    assert_eq!(node_condition(&s, "Ready", "reason"), "KubeletNotReady");
    assert_eq!(
        node_condition(&s, "Ready", "message"),
        "container runtime is down"
    );
    drop(stopped);
    let since = Instant::now();
    wait_until(Duration::from_secs(40), "node Ready again", || {
        node_condition(&s, "Ready", "status") == "True"
    });
    eprintln!(
        "runtime down: NotReady after {took:?}, Ready again {:?} after SIGCONT",
        since.elapsed()
    );
    assert_eq!(
        node_condition(&s, "Ready", "message"),
        "kubelet is posting ready status"
    );
}
