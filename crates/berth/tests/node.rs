//! The node agent on real containerd: `berth server` with its agent (containerd
//! started by Berth under the data dir, local busybox/pause images, CNI bridge).
//! Needs root and `scripts/install-deps` (containerd, runc, CNI plugins,
//! busybox-static). One agent at a time: agents on one machine share the pod
//! bridge and the first podCIDR.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{Server, wait_until};

static ONE_AGENT: Mutex<()> = Mutex::new(());

fn agent_server(tag: &str) -> (Server, std::sync::MutexGuard<'static, ()>) {
    let guard = ONE_AGENT.lock().unwrap_or_else(|e| e.into_inner());
    let s = Server::start_with_agent(tag);
    // The Node registers once containerd and the local images are ready.
    s.wait_node_ready(Duration::from_secs(60));
    (s, guard)
}

fn jsonpath(s: &Server, pod: &str, path: &str) -> String {
    let out = s.kubectl(&["get", "pod", pod, "-o", &format!("jsonpath={path}")]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(
    s: &Server,
    pod: &str,
    path: &str,
    limit: Duration,
    f: impl Fn(&str) -> bool,
) -> String {
    let mut last = String::new();
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        last = jsonpath(s, pod, path);
        if f(&last) {
            return last;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "pod {pod}: {path} never matched; last {last:?}\n{}",
        s.k(&["get", "pod", pod, "-o", "yaml"])
    );
}

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pod(name: &str, policy: &str, image: &str, command: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: {image}
    command: [\"sh\", \"-c\", {command:?}]
{extra}"
    )
}

/// Deletes every pod and waits for the agent to confirm (it removes sandboxes).
fn delete_all(s: &Server) {
    s.k(&["delete", "pods", "--all", "--wait=true", "--timeout=60s"]);
}

fn runtime_containers(s: &Server) -> Vec<String> {
    s.ctr(&["containers", "ls", "-q"])
        .lines()
        .map(String::from)
        .collect()
}

fn allocated_ips(s: &Server) -> Vec<String> {
    berth_kubelet_ips(&s.data_dir.join("agent/cni/ipam"))
}

fn berth_kubelet_ips(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir.join("berth"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.parse::<std::net::Ipv4Addr>().is_ok())
        .collect()
}

#[test]
fn busybox_pod_runs_then_completes() {
    let (s, _g) = agent_server("node-complete");
    apply(
        &s,
        &pod("hello", "Never", "busybox", "echo hello; sleep 2", ""),
    );
    wait_for(
        &s,
        "hello",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );
    assert_eq!(
        jsonpath(
            &s,
            "hello",
            "{.status.conditions[?(@.type==\"Ready\")].status}"
        ),
        "True"
    );
    wait_for(
        &s,
        "hello",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Succeeded",
    );
    let state = jsonpath(
        &s,
        "hello",
        "{.status.containerStatuses[0].state.terminated.reason}",
    );
    assert_eq!(state, "Completed");
    assert_eq!(
        jsonpath(
            &s,
            "hello",
            "{.status.containerStatuses[0].state.terminated.exitCode}"
        ),
        "0"
    );
    let row = s.k(&["get", "pod", "hello", "--no-headers"]);
    assert!(row.contains("Completed"), "{row}");
    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=hello",
    ]);
    for reason in ["Created", "Started"] {
        assert!(events.contains(reason), "{events}");
    }
    delete_all(&s);
}

#[test]
fn crashing_container_restarts_into_crash_loop_back_off() {
    let (s, _g) = agent_server("node-crash");
    apply(&s, &pod("crash", "Always", "busybox", "exit 1", ""));
    wait_for(
        &s,
        "crash",
        "{.status.containerStatuses[0].restartCount}",
        Duration::from_secs(40),
        |n| n.parse::<u32>().is_ok_and(|n| n >= 2),
    );
    wait_for(
        &s,
        "crash",
        "{.status.containerStatuses[0].state.waiting.reason}",
        Duration::from_secs(30),
        |r| r == "CrashLoopBackOff",
    );
    assert_eq!(
        jsonpath(
            &s,
            "crash",
            "{.status.containerStatuses[0].lastState.terminated.exitCode}"
        ),
        "1"
    );
    assert_eq!(
        jsonpath(
            &s,
            "crash",
            "{.status.containerStatuses[0].lastState.terminated.reason}"
        ),
        "Error"
    );
    let row = s.k(&["get", "pod", "crash", "--no-headers"]);
    assert!(row.contains("CrashLoopBackOff"), "{row}");
    // A missing command: RunContainerError, then the same back-off.
    apply(
        &s,
        &pod("nocmd", "Always", "busybox", "", "").replace("[\"sh\", \"-c\", \"\"]", "[\"/nope\"]"),
    );
    wait_for(
        &s,
        "nocmd",
        "{.status.containerStatuses[0].lastState.terminated.reason}",
        Duration::from_secs(30),
        |r| r == "StartError",
    );
    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=crash",
    ]);
    assert!(
        events.contains("Back-off restarting failed container c in pod crash"),
        "{events}"
    );
    delete_all(&s);
}

#[test]
fn missing_image_gives_err_image_pull_then_image_pull_back_off() {
    let (s, _g) = agent_server("node-noimage");
    apply(
        &s,
        &pod("noimg", "Always", "nope.invalid/none:1", "true", ""),
    );
    let mut seen = std::collections::BTreeSet::new();
    wait_until(Duration::from_secs(40), "ImagePullBackOff", || {
        let r = jsonpath(
            &s,
            "noimg",
            "{.status.containerStatuses[0].state.waiting.reason}",
        );
        seen.insert(r.clone());
        r == "ImagePullBackOff"
    });
    let msg = jsonpath(
        &s,
        "noimg",
        "{.status.containerStatuses[0].state.waiting.message}",
    );
    assert!(
        msg.starts_with("Back-off pulling image \"nope.invalid/none:1\""),
        "{msg}"
    );
    assert_eq!(jsonpath(&s, "noimg", "{.status.phase}"), "Pending");
    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=noimg",
    ]);
    assert!(
        events.contains("Failed to pull image \"nope.invalid/none:1\""),
        "{events}"
    );
    assert!(events.contains("Error: ErrImagePull"), "{events}");
    // imagePullPolicy Never with an absent image never pulls.
    apply(
        &s,
        &pod("never", "Always", "absent:1", "true", "")
            .replace("    command:", "    imagePullPolicy: Never\n    command:"),
    );
    wait_for(
        &s,
        "never",
        "{.status.containerStatuses[0].state.waiting.reason}",
        Duration::from_secs(30),
        |r| r == "ErrImageNeverPull",
    );
    delete_all(&s);
}

#[test]
fn pods_get_ips_and_reach_each_other() {
    let (s, _g) = agent_server("node-net");
    apply(
        &s,
        &pod(
            "web",
            "Always",
            "busybox",
            "echo ok > /tmp/index.html; exec httpd -f -p 8080 -h /tmp",
            "",
        ),
    );
    let ip = wait_for(
        &s,
        "web",
        "{.status.podIP}",
        Duration::from_secs(30),
        |ip| !ip.is_empty(),
    );
    let cidr = s.k(&["get", "nodes", "-o", "jsonpath={.items[0].spec.podCIDR}"]);
    let prefix = cidr.trim_end_matches("0/24");
    assert!(
        ip.starts_with(prefix),
        "pod IP {ip} outside node podCIDR {cidr}"
    );
    assert_eq!(jsonpath(&s, "web", "{.status.podIPs[0].ip}"), ip);
    wait_for(&s, "web", "{.status.phase}", Duration::from_secs(30), |p| {
        p == "Running"
    });
    let script =
        format!("wget -qO- http://{ip}:8080/index.html | grep -q ok && ping -c 1 -W 2 {ip}");
    apply(&s, &pod("client", "Never", "busybox", &script, ""));
    let phase = wait_for(
        &s,
        "client",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Succeeded" || p == "Failed",
    );
    assert_eq!(phase, "Succeeded", "client could not reach {ip}");
    // ClusterFirst pods resolve through the cluster DNS address; host-network
    // pods share the node's network and report its IP.
    apply(
        &s,
        &pod(
            "dns",
            "Never",
            "busybox",
            "grep -q 'nameserver 10.43.0.10' /etc/resolv.conf && grep -q 'search default.svc.cluster.local svc.cluster.local cluster.local' /etc/resolv.conf",
            "",
        ),
    );
    let hostnet = pod("hostnet", "Never", "busybox", "true", "").replace(
        "  restartPolicy: Never\n",
        "  restartPolicy: Never\n  hostNetwork: true\n",
    );
    apply(&s, &hostnet);
    for p in ["dns", "hostnet"] {
        let phase = wait_for(&s, p, "{.status.phase}", Duration::from_secs(30), |ph| {
            ph == "Succeeded" || ph == "Failed"
        });
        assert_eq!(phase, "Succeeded", "{p}");
    }
    let node_ip = s.k(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={.items[0].status.addresses[?(@.type==\"InternalIP\")].address}",
    ]);
    assert_eq!(jsonpath(&s, "hostnet", "{.status.podIP}"), node_ip);
    // The node lists its images (kubectl describe node, ImageLocality).
    let images = s.k(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={.items[0].status.images[*].names}",
    ]);
    assert!(
        images.contains("docker.io/library/busybox:latest"),
        "{images}"
    );
    delete_all(&s);
}

#[test]
fn deleting_a_pod_removes_its_sandbox_ip_and_cgroup() {
    let (s, _g) = agent_server("node-delete");
    apply(&s, &pod("sleeper", "Always", "busybox", "sleep 3600", ""));
    wait_for(
        &s,
        "sleeper",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );
    let uid = jsonpath(&s, "sleeper", "{.metadata.uid}");
    assert!(!runtime_containers(&s).is_empty());
    assert_eq!(allocated_ips(&s).len(), 1);
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let memory = own
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
        .unwrap_or_default();
    let pod_cg = std::path::PathBuf::from(format!(
        "/sys/fs/cgroup/memory{}/berth/besteffort/pod{uid}",
        memory.trim_end_matches('/')
    ));
    let v1 = std::path::Path::new("/sys/fs/cgroup/memory").is_dir();
    if v1 {
        assert!(pod_cg.is_dir(), "{} missing", pod_cg.display());
    }
    // sh ignores SIGTERM as PID 1: the grace period (2 s) ends in SIGKILL.
    let started = Instant::now();
    s.k(&["delete", "pod", "sleeper", "--wait=true", "--timeout=60s"]);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        runtime_containers(&s).is_empty(),
        "{:?}",
        runtime_containers(&s)
    );
    assert!(allocated_ips(&s).is_empty(), "{:?}", allocated_ips(&s));
    if v1 {
        assert!(!pod_cg.exists(), "{} left behind", pod_cg.display());
    }
}

#[test]
fn limits_reach_the_cgroup_and_memory_over_limit_is_oom_killed() {
    let (s, _g) = agent_server("node-resources");
    // Guaranteed: cpu 500m → CFS quota 50000/100000; memory 64Mi.
    let check = "test \"$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)\" = 67108864 \
                 && test \"$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)\" = 50000 \
                 && test \"$(cat /sys/fs/cgroup/cpu/cpu.shares)\" = 512";
    let limits = "    resources:\n      limits: {cpu: 500m, memory: 64Mi}\n";
    apply(&s, &pod("limits", "Never", "busybox", check, limits));
    let phase = wait_for(
        &s,
        "limits",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Succeeded" || p == "Failed",
    );
    assert_eq!(phase, "Succeeded", "cgroup limits differ from the pod's");
    assert_eq!(jsonpath(&s, "limits", "{.status.qosClass}"), "Guaranteed");
    // dd's 64 MiB buffer cannot fit in 16 MiB.
    let oom = "    resources:\n      limits: {memory: 16Mi}\n";
    apply(
        &s,
        &pod(
            "oom",
            "Never",
            "busybox",
            "dd if=/dev/zero of=/dev/null bs=64M count=1",
            oom,
        ),
    );
    let reason = wait_for(
        &s,
        "oom",
        "{.status.containerStatuses[0].state.terminated.reason}",
        Duration::from_secs(30),
        |r| !r.is_empty(),
    );
    assert_eq!(reason, "OOMKilled");
    assert_eq!(
        jsonpath(
            &s,
            "oom",
            "{.status.containerStatuses[0].state.terminated.exitCode}"
        ),
        "137"
    );
    assert_eq!(jsonpath(&s, "oom", "{.status.phase}"), "Failed");
    delete_all(&s);
}

/// Pod startup latency (create → Running seen by a watch):
/// `cargo test -p berth --test node -- --ignored --nocapture startup_latency`.
#[test]
#[ignore = "benchmark"]
fn startup_latency() {
    let (s, _g) = agent_server("node-latency");
    let n: usize = std::env::var("BERTH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let mut child = std::process::Command::new(common::kubectl_path())
        .args(["--kubeconfig"])
        .arg(&s.kubeconfig)
        .args([
            "get",
            "pods",
            "--watch",
            "--output-watch-events",
            "-o",
            "jsonpath={.object.metadata.name} {.object.status.phase}{\"\\n\"}",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<(String, Instant)>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Some((name, phase)) = line.split_once(' ')
                && phase == "Running"
            {
                let _ = tx.send((name.to_string(), Instant::now()));
            }
        }
    });
    std::thread::sleep(Duration::from_secs(1));
    let mut created = std::collections::HashMap::new();
    for i in 0..n {
        let name = format!("lat-{i}");
        created.insert(name.clone(), Instant::now());
        // curl, not kubectl: the figure is the cluster's, not kubectl's start-up.
        let json = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},"spec":{{"terminationGracePeriodSeconds":2,"containers":[{{"name":"c","image":"busybox","command":["sleep","3600"]}}]}}}}"#
        );
        let code = common::post_code(&s.http, "/api/v1/namespaces/default/pods", &json);
        assert_eq!(code, "201");
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut lat = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while lat.len() < n && Instant::now() < deadline {
        if let Ok((name, at)) = rx.recv_timeout(Duration::from_secs(1))
            && let Some(c) = created.remove(&name)
        {
            lat.push(at.duration_since(c));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(lat.len(), n, "not every pod reached Running");
    lat.sort();
    let p = |q: f64| lat[((lat.len() as f64 * q).ceil() as usize).clamp(1, lat.len()) - 1];
    println!(
        "pod startup latency over {n} pods (create → Running in a watch): p50 {:?} p99 {:?} max {:?}",
        p(0.5),
        p(0.99),
        lat[lat.len() - 1]
    );
    delete_all(&s);
}

fn ready_condition(s: &Server, pod: &str) -> String {
    jsonpath(s, pod, "{.status.conditions[?(@.type==\"Ready\")].status}")
}

#[test]
fn probes_gate_readiness_without_restarts() {
    let (s, _g) = agent_server("node-probes");
    let httpd = "echo ok > /tmp/index.html; exec httpd -f -p 8080 -h /tmp";
    let manifests = [
        pod(
            "notready",
            "Always",
            "busybox",
            "sleep 3600",
            "    readinessProbe:\n      exec: {command: [\"false\"]}\n      periodSeconds: 1\n",
        ),
        pod(
            "http",
            "Always",
            "busybox",
            httpd,
            "    readinessProbe:\n      httpGet: {path: /index.html, port: 8080}\n      periodSeconds: 1\n",
        ),
        pod(
            "tcp",
            "Always",
            "busybox",
            httpd,
            "    readinessProbe:\n      tcpSocket: {port: 8080}\n      periodSeconds: 1\n",
        ),
        pod(
            "closed",
            "Always",
            "busybox",
            "sleep 3600",
            "    readinessProbe:\n      tcpSocket: {port: 9999}\n      periodSeconds: 1\n",
        ),
        pod(
            "slow",
            "Always",
            "busybox",
            "sleep 3600",
            "    readinessProbe:\n      exec: {command: [\"sleep\", \"5\"]}\n      timeoutSeconds: 1\n      periodSeconds: 2\n",
        ),
    ];
    for m in &manifests {
        apply(&s, m);
    }
    for p in ["http", "tcp"] {
        wait_for(
            &s,
            p,
            "{.status.conditions[?(@.type==\"Ready\")].status}",
            Duration::from_secs(30),
            |r| r == "True",
        );
    }
    // Let the failing probes run several periods.
    std::thread::sleep(Duration::from_secs(6));
    for p in ["notready", "closed", "slow"] {
        assert_eq!(jsonpath(&s, p, "{.status.phase}"), "Running", "{p}");
        assert_eq!(ready_condition(&s, p), "False", "{p}");
        assert_eq!(
            jsonpath(&s, p, "{.status.containerStatuses[0].restartCount}"),
            "0",
            "{p}"
        );
    }
    let row = s.k(&["get", "pod", "notready", "--no-headers"]);
    assert!(row.contains("0/1"), "{row}");
    let events = s.k(&["get", "events", "--field-selector", "reason=Unhealthy"]);
    assert!(events.contains("Readiness probe failed"), "{events}");
    assert!(events.contains("connection refused"), "{events}");
    assert!(events.contains("timed out"), "{events}");
    delete_all(&s);
}

/// The seed's demo (`shared/seeds/000_a6e54bb534a44b3e.txt`): a strict liveness
/// probe kills a slow starter into CrashLoopBackOff; a startupProbe fixes it.
const SEED_MYAPP: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: myapp
spec:
  selector:
    matchLabels:
      app: myapp
  template:
    metadata:
      labels:
        app: myapp
    spec:
      containers:
      - name: busybox
        image: busybox
        command:
        - /bin/sh
        args:
        - -c
        - sleep 15 && touch /tmp/healthy && tail -f /dev/null
        livenessProbe:
          exec:
            command:
            - test
            - -f
            - /tmp/healthy
          failureThreshold: 1
          periodSeconds: 5
";

const SEED_STARTUP_PROBE: &str = "        startupProbe:
          exec:
            command:
            - test
            - -f
            - /tmp/healthy
          failureThreshold: 30
          periodSeconds: 3
        livenessProbe:
";

#[test]
fn seed_startup_probe_demo() {
    let (s, _g) = agent_server("node-seed");
    apply(&s, SEED_MYAPP);
    wait_until(
        Duration::from_secs(240),
        "myapp in CrashLoopBackOff",
        || {
            let out = s.kubectl(&["get", "po", "-l", "app=myapp", "--no-headers"]);
            String::from_utf8_lossy(&out.stdout).contains("CrashLoopBackOff")
        },
    );
    let events = s.k(&["get", "events", "--field-selector", "reason=Killing"]);
    assert!(
        events.contains("Container busybox failed liveness probe, will be restarted"),
        "{events}"
    );
    // The seed's change: sleep 15; … and a startupProbe before the livenessProbe.
    let fixed = SEED_MYAPP
        .replace(
            "sleep 15 && touch /tmp/healthy && tail -f /dev/null",
            "sleep 15; touch /tmp/healthy; tail -f /dev/null",
        )
        .replace("        livenessProbe:\n", SEED_STARTUP_PROBE);
    apply(&s, &fixed);
    let new_hash = || {
        s.k(&[
            "get",
            "rs",
            "-l",
            "app=myapp",
            "--sort-by=.metadata.creationTimestamp",
            "-o",
            "jsonpath={.items[-1:].metadata.labels.pod-template-hash}",
        ])
    };
    wait_until(Duration::from_secs(30), "a second ReplicaSet", || {
        s.k(&["get", "rs", "-l", "app=myapp", "--no-headers"])
            .lines()
            .count()
            == 2
    });
    let hash = new_hash();
    let selector = format!("app=myapp,pod-template-hash={hash}");
    wait_until(Duration::from_secs(60), "the new pod 1/1 Running", || {
        let out = s.kubectl(&["get", "po", "-l", &selector, "--no-headers"]);
        let out = String::from_utf8_lossy(&out.stdout).into_owned();
        out.contains("1/1") && out.contains("Running")
    });
    std::thread::sleep(Duration::from_secs(60));
    let rows = s.k(&["get", "po", "-l", &selector, "--no-headers"]);
    let row = rows.lines().next().unwrap_or_default();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[1..4], &["1/1", "Running", "0"], "{row}");
    s.k(&["delete", "deployment", "myapp"]);
    delete_all(&s);
}

/// The PID of a pod's container, from containerd.
fn container_pid(s: &Server, pod: &str) -> String {
    let id = jsonpath(s, pod, "{.status.containerStatuses[0].containerID}");
    let id = id.trim_start_matches("containerd://").to_string();
    s.ctr(&["tasks", "ls"])
        .lines()
        .find(|l| l.starts_with(&id))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn pods_are_grouped_by_qos_class_under_berths_cgroup() {
    let (s, _g) = agent_server("node-qos");
    let cases = [
        (
            "guaranteed",
            "    resources:\n      limits: {cpu: 200m, memory: 64Mi}\n",
            "/berth/pod",
            "Guaranteed",
        ),
        (
            "burstable",
            "    resources:\n      requests: {cpu: 250m}\n      limits: {memory: 128Mi}\n",
            "/berth/burstable/pod",
            "Burstable",
        ),
        ("besteffort", "", "/berth/besteffort/pod", "BestEffort"),
    ];
    for (name, res, _, _) in &cases {
        apply(&s, &pod(name, "Always", "busybox", "sleep 3600", res));
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let own_memory = own.lines().find_map(|l| {
        l.split_once(":memory:")
            .map(|(_, p)| p.trim_end_matches('/').to_string())
    });
    for (name, _, dir, class) in &cases {
        wait_for(&s, name, "{.status.phase}", Duration::from_secs(30), |p| {
            p == "Running"
        });
        assert_eq!(jsonpath(&s, name, "{.status.qosClass}"), *class);
        let uid = jsonpath(&s, name, "{.metadata.uid}");
        let pid = container_pid(&s, name);
        let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let memory = cg
            .lines()
            .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
            .unwrap_or_else(|| {
                cg.lines()
                    .find_map(|l| l.strip_prefix("0::"))
                    .unwrap_or_default()
                    .to_string()
            });
        let want = format!("{}{dir}{uid}/", own_memory.clone().unwrap_or_default());
        assert!(
            memory.starts_with(&want),
            "{name}: {memory} not under {want}"
        );
    }
    // cgroup values as the pods' limits say, read inside each container.
    let checks = [
        ("guaranteed", "67108864", "20000", "204"),
        ("burstable", "134217728", "-1", "256"),
        ("besteffort", "", "-1", "2"),
    ];
    for (name, mem, quota, shares) in checks {
        let pid = container_pid(&s, name);
        let read = |f: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/root/sys/fs/cgroup/{f}"))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        if !mem.is_empty() {
            assert_eq!(read("memory/memory.limit_in_bytes"), mem, "{name}");
        }
        assert_eq!(read("cpu/cpu.cfs_quota_us"), quota, "{name}");
        assert_eq!(read("cpu/cpu.shares"), shares, "{name}");
    }
    // The pod-level cgroups carry the pods' summed limits.
    let own_cpu = own
        .lines()
        .find_map(|l| {
            l.split_once(":cpu,cpuacct:")
                .or_else(|| l.split_once(":cpu:"))
        })
        .map(|(_, p)| p.trim_end_matches('/').to_string());
    if let (Some(mem_root), Some(cpu_root)) = (own_memory.clone(), own_cpu) {
        for (name, dir, mem, quota, shares) in [
            ("guaranteed", "berth", Some("67108864"), "20000", "204"),
            ("burstable", "berth/burstable", None, "-1", "256"),
            ("besteffort", "berth/besteffort", None, "-1", "2"),
        ] {
            let uid = jsonpath(&s, name, "{.metadata.uid}");
            let read = |p: String| {
                std::fs::read_to_string(&p)
                    .unwrap_or_default()
                    .trim()
                    .to_string()
            };
            let cpu = format!("/sys/fs/cgroup/cpu{cpu_root}/{dir}/pod{uid}");
            assert_eq!(read(format!("{cpu}/cpu.shares")), shares, "{name}");
            assert_eq!(read(format!("{cpu}/cpu.cfs_quota_us")), quota, "{name}");
            if let Some(m) = mem {
                let memory = format!("/sys/fs/cgroup/memory{mem_root}/{dir}/pod{uid}");
                assert_eq!(read(format!("{memory}/memory.limit_in_bytes")), m, "{name}");
            }
        }
    }
    delete_all(&s);
}

#[test]
fn config_map_secret_and_downward_api_reach_the_container() {
    let (s, _g) = agent_server("node-volumes");
    s.k(&[
        "create",
        "configmap",
        "app-config",
        "--from-literal=greeting=hello",
    ]);
    s.k(&[
        "create",
        "secret",
        "generic",
        "app-secret",
        "--from-literal=password=s3cret",
    ]);
    let check = "test \"$GREETING\" = hello && test \"$PASSWORD\" = s3cret && test \"$MY_POD\" = vols \
                 && test \"$(cat /cfg/greeting)\" = hello && test \"$(cat /sec/password)\" = s3cret \
                 && grep -q vols /info/name && test -d /scratch";
    let extra = "    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: app-config, key: greeting}}
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: app-secret, key: password}}
    - name: MY_POD
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    volumeMounts:
    - {name: cfg, mountPath: /cfg}
    - {name: sec, mountPath: /sec}
    - {name: info, mountPath: /info}
    - {name: scratch, mountPath: /scratch}
  volumes:
  - name: cfg
    configMap: {name: app-config}
  - name: sec
    secret: {secretName: app-secret}
  - name: info
    downwardAPI:
      items:
      - {path: name, fieldRef: {fieldPath: metadata.name}}
  - name: scratch
    emptyDir: {}
";
    apply(&s, &pod("vols", "Never", "busybox", check, extra));
    let phase = wait_for(
        &s,
        "vols",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Succeeded" || p == "Failed",
    );
    assert_eq!(phase, "Succeeded");
    // A missing ConfigMap: the pod waits in ContainerCreating with FailedMount.
    let missing = "  volumes:\n  - name: cfg\n    configMap: {name: nope}\n";
    apply(&s, &pod("nomount", "Always", "busybox", "true", missing));
    wait_until(Duration::from_secs(30), "FailedMount", || {
        let out = s.kubectl(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=nomount",
        ]);
        String::from_utf8_lossy(&out.stdout)
            .contains("MountVolume.SetUp failed for volume \"cfg\" : configmap \"nope\" not found")
    });
    let row = s.k(&["get", "pod", "nomount", "--no-headers"]);
    assert!(row.contains("ContainerCreating"), "{row}");
    delete_all(&s);
}

#[test]
fn create_delete_cycles_leak_nothing() {
    let (s, _g) = agent_server("node-leak");
    // Taken with the agent lock held: earlier servers are gone by now.
    let cgroups_before = besteffort_pod_cgroups();
    let cycles: usize = std::env::var("BERTH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let batch = 10;
    for round in 0..cycles.div_ceil(batch) {
        for i in 0..batch {
            apply(
                &s,
                &pod(
                    &format!("cyc-{round}-{i}"),
                    "Always",
                    "busybox",
                    "sleep 3600",
                    "",
                ),
            );
        }
        for i in 0..batch {
            wait_for(
                &s,
                &format!("cyc-{round}-{i}"),
                "{.status.phase}",
                Duration::from_secs(60),
                |p| p == "Running",
            );
        }
        delete_all(&s);
    }
    assert!(
        runtime_containers(&s).is_empty(),
        "{:?}",
        runtime_containers(&s)
    );
    assert!(allocated_ips(&s).is_empty(), "{:?}", allocated_ips(&s));
    assert!(s.ctr(&["tasks", "ls", "-q"]).trim().is_empty());
    // The agent removes a pod's cgroup just after its sandbox: allow it a moment.
    // Cgroups of earlier servers' pods (this machine's cgroup is shared by all
    // of them) are not this test's business.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let left: Vec<String> = besteffort_pod_cgroups()
            .difference(&cgroups_before)
            .cloned()
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "pod cgroups left: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The pod cgroups under Berth's besteffort QoS cgroup (cgroup v1 memory
/// hierarchy, where this machine keeps them).
fn besteffort_pod_cgroups() -> std::collections::BTreeSet<String> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(mem) = own
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
    else {
        return Default::default();
    };
    let besteffort = format!(
        "/sys/fs/cgroup/memory{}/berth/besteffort",
        mem.trim_end_matches('/')
    );
    std::fs::read_dir(&besteffort)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pod"))
        .collect()
}

#[test]
fn init_containers_run_in_order_and_sigterm_ends_a_container_early() {
    let (s, _g) = agent_server("node-init");
    let yaml = "apiVersion: v1
kind: Pod
metadata:
  name: init
spec:
  restartPolicy: Never
  volumes:
  - {name: work, emptyDir: {}}
  initContainers:
  - name: first
    image: busybox
    command: [sh, -c, 'echo first >> /work/order']
    volumeMounts: [{name: work, mountPath: /work}]
  - name: second
    image: busybox
    command: [sh, -c, 'echo second >> /work/order']
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'test \"$(cat /work/order | tr \"\\n\" \" \")\" = \"first second \"']
    volumeMounts: [{name: work, mountPath: /work}]
";
    apply(&s, yaml);
    let phase = wait_for(
        &s,
        "init",
        "{.status.phase}",
        Duration::from_secs(40),
        |p| p == "Succeeded" || p == "Failed",
    );
    assert_eq!(phase, "Succeeded", "init containers ran out of order");
    assert_eq!(
        jsonpath(
            &s,
            "init",
            "{.status.initContainerStatuses[*].state.terminated.reason}"
        ),
        "Completed Completed"
    );
    // A failing init container with restartPolicy Never fails the pod.
    let bad = yaml
        .replace("name: init\n", "name: badinit\n")
        .replace("echo first >> /work/order", "exit 3");
    apply(&s, &bad);
    wait_for(
        &s,
        "badinit",
        "{.status.phase}",
        Duration::from_secs(40),
        |p| p == "Failed",
    );
    let row = s.k(&["get", "pod", "badinit", "--no-headers"]);
    assert!(row.contains("Init:Error"), "{row}");
    // A container that handles SIGTERM is stopped at once, well within its grace period.
    apply(
        &s,
        &pod(
            "trap",
            "Always",
            "busybox",
            "trap 'exit 0' TERM; while true; do sleep 0.2; done",
            "",
        )
        .replace(
            "terminationGracePeriodSeconds: 2",
            "terminationGracePeriodSeconds: 60",
        ),
    );
    wait_for(
        &s,
        "trap",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );
    let started = Instant::now();
    s.k(&["delete", "pod", "trap", "--wait=true", "--timeout=60s"]);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    delete_all(&s);
}

#[test]
fn berth_agent_joins_a_server_and_images_import() {
    // A server without its own agent, and `berth agent` as a separate process.
    let _g = ONE_AGENT.lock().unwrap_or_else(|e| e.into_inner());
    let s = Server::start_with(common::temp_dir("node-join"), &[]);
    // The harness's agent (its lock, test thresholds, cleanup even on panic).
    let agent = common::AgentProcess::start(&s, "node-join-agent", &["--node-name", "joined-node"]);
    let agent_dir = agent.data_dir.clone();
    wait_until(Duration::from_secs(60), "joined-node Ready", || {
        let out = s.kubectl(&[
            "get",
            "node",
            "joined-node",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        String::from_utf8_lossy(&out.stdout) == "True"
    });
    let cidr = s.k(&[
        "get",
        "node",
        "joined-node",
        "-o",
        "jsonpath={.spec.podCIDR}",
    ]);
    assert!(
        cidr.starts_with("10.42.") && cidr.ends_with(".0/24"),
        "{cidr}"
    );
    apply(&s, &pod("joined", "Never", "busybox", "true", ""));
    let phase = wait_for(
        &s,
        "joined",
        "{.status.phase}",
        Duration::from_secs(40),
        |p| p == "Succeeded" || p == "Failed",
    );
    assert_eq!(phase, "Succeeded");
    assert_eq!(jsonpath(&s, "joined", "{.spec.nodeName}"), "joined-node");
    // `berth images build-local --output` writes archives; `import` loads one.
    let out_dir = s.data_dir.join("archives");
    let sock = agent_dir.join("agent/containerd/containerd.sock");
    let built = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(["images", "build-local", "--output"])
        .arg(&out_dir)
        .output()
        .expect("berth images");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let imported = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(["images", "import", "--address"])
        .arg(&sock)
        .arg(out_dir.join("busybox.tar"))
        .output()
        .expect("berth images import");
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    assert!(
        String::from_utf8_lossy(&imported.stdout).contains("docker.io/library/busybox:latest"),
        "{}",
        String::from_utf8_lossy(&imported.stdout)
    );
    // No containerd behind the socket: a message saying what to start, at once.
    let started = Instant::now();
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(["images", "import", "--address"])
        .arg(s.data_dir.join("no-such/containerd.sock"))
        .arg(out_dir.join("busybox.tar"))
        .output()
        .expect("berth images import");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(
        stderr.contains("no containerd listening on") && stderr.contains("start `berth server`"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    s.k(&["delete", "pods", "--all", "--wait=true", "--timeout=60s"]);
    drop(agent);
}

#[test]
fn containerd_is_restarted_and_pods_survive() {
    let (s, _g) = agent_server("node-containerd");
    apply(&s, &pod("before", "Always", "busybox", "sleep 3600", ""));
    wait_for(
        &s,
        "before",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );
    let config = s.data_dir.join("agent/containerd/config.toml");
    let pgrep = |pattern: &str| {
        let out = std::process::Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .expect("pgrep");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let pattern = format!("containerd --config {}", config.display());
    let old = pgrep(&pattern);
    assert!(!old.is_empty(), "no containerd for {}", config.display());
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &old])
        .status();
    wait_until(Duration::from_secs(30), "a new containerd", || {
        let now = pgrep(&pattern);
        !now.is_empty() && now != old
    });
    apply(&s, &pod("after", "Always", "busybox", "sleep 3600", ""));
    wait_for(
        &s,
        "after",
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Running",
    );
    assert_eq!(jsonpath(&s, "before", "{.status.phase}"), "Running");
    assert_eq!(
        jsonpath(&s, "before", "{.status.containerStatuses[0].restartCount}"),
        "0"
    );
    delete_all(&s);
}

#[test]
fn sidecars_run_beside_containers_and_on_failure_restarts_only_failures() {
    let (s, _g) = agent_server("node-sidecar");
    let yaml = "apiVersion: v1
kind: Pod
metadata:
  name: sidecar
spec:
  terminationGracePeriodSeconds: 2
  volumes:
  - {name: work, emptyDir: {}}
  initContainers:
  - name: helper
    image: busybox
    restartPolicy: Always
    command: [sh, -c, 'echo up > /work/helper; exec sleep 3600']
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'test -f /work/helper && exec sleep 3600']
    volumeMounts: [{name: work, mountPath: /work}]
";
    apply(&s, yaml);
    wait_for(
        &s,
        "sidecar",
        "{.status.phase}",
        Duration::from_secs(40),
        |p| p == "Running",
    );
    wait_for(
        &s,
        "sidecar",
        "{.status.conditions[?(@.type==\"Ready\")].status}",
        Duration::from_secs(30),
        |r| r == "True",
    );
    let sidecar_started = jsonpath(
        &s,
        "sidecar",
        "{.status.initContainerStatuses[0].state.running.startedAt}",
    );
    assert!(!sidecar_started.is_empty());
    assert_eq!(
        jsonpath(&s, "sidecar", "{.status.containerStatuses[0].restartCount}"),
        "0"
    );
    let row = s.k(&["get", "pod", "sidecar", "--no-headers"]);
    assert!(row.contains("2/2") && row.contains("Running"), "{row}");
    // OnFailure: a failing container is restarted, then succeeds and the pod completes.
    let on_failure = pod(
        "onfailure",
        "OnFailure",
        "busybox",
        "test -f /work/ran && exit 0; touch /work/ran; exit 1",
        "    volumeMounts: [{name: work, mountPath: /work}]\n  volumes:\n  - {name: work, emptyDir: {}}\n",
    );
    apply(&s, &on_failure);
    wait_for(
        &s,
        "onfailure",
        "{.status.phase}",
        Duration::from_secs(40),
        |p| p == "Succeeded",
    );
    assert_eq!(
        jsonpath(
            &s,
            "onfailure",
            "{.status.containerStatuses[0].restartCount}"
        ),
        "1"
    );
    delete_all(&s);
}

#[test]
fn kubectl_debug_adds_an_ephemeral_container_sharing_the_target_pid_namespace() {
    let (s, _g) = agent_server("node-debug");
    apply(
        &s,
        &pod("target", "Always", "busybox", "exec sleep 3600", ""),
    );
    wait_for(
        &s,
        "target",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Running",
    );
    // The debug container sees the target's `sleep 3600` in its process list.
    s.k(&[
        "debug",
        "target",
        "--image=busybox",
        "--target=c",
        "--container=debugger",
        "--",
        "sh",
        "-c",
        "ps | grep -v grep | grep -q 'sleep 3600'",
    ]);
    let code = wait_for(
        &s,
        "target",
        "{.status.ephemeralContainerStatuses[0].state.terminated.exitCode}",
        Duration::from_secs(30),
        |c| !c.is_empty(),
    );
    assert_eq!(
        code, "0",
        "the debug container did not see the target's processes"
    );
    assert_eq!(
        jsonpath(&s, "target", "{.status.ephemeralContainerStatuses[0].name}"),
        "debugger"
    );
    // It is never restarted, and the pod keeps running.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        jsonpath(
            &s,
            "target",
            "{.status.ephemeralContainerStatuses[0].restartCount}"
        ),
        "0"
    );
    assert_eq!(jsonpath(&s, "target", "{.status.phase}"), "Running");
    delete_all(&s);
}

/// The pod fields the agent used to drop: hostAliases (the managed
/// /etc/hosts), terminationMessagePath / FallbackToLogsOnError,
/// shareProcessNamespace, hostPID and activeDeadlineSeconds.
#[test]
fn hosts_file_termination_messages_pid_namespaces_and_active_deadline() {
    let (s, _g) = agent_server("node-fields");
    apply(
        &s,
        &pod(
            "hosts",
            "Never",
            "busybox",
            "cat /etc/hosts",
            "  hostAliases:
  - ip: 10.1.2.3
    hostnames: [foo.local, bar.local]
  hostname: db
  subdomain: nodes",
        ),
    );
    apply(
        &s,
        &pod(
            "message",
            "Never",
            "busybox",
            "echo -n bye > /dev/termination-log",
            "",
        ),
    );
    apply(
        &s,
        &pod(
            "fallback",
            "Never",
            "busybox",
            "echo from-the-log; exit 3",
            "    terminationMessagePolicy: FallbackToLogsOnError",
        ),
    );
    apply(
        &s,
        "apiVersion: v1
kind: Pod
metadata:
  name: shared
spec:
  shareProcessNamespace: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: a
    image: busybox
    command: [sleep, '4242']
  - name: b
    image: busybox
    command: [sleep, '3600']
",
    );
    apply(
        &s,
        &pod(
            "hostpid",
            "Always",
            "busybox",
            "exec sleep 3600",
            "  hostPID: true",
        ),
    );
    apply(
        &s,
        &pod(
            "deadline",
            "Always",
            "busybox",
            "exec sleep 3600",
            "  activeDeadlineSeconds: 5",
        ),
    );
    // The managed hosts file names the pod by its FQDN and ends with the aliases.
    wait_for(
        &s,
        "hosts",
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Succeeded",
    );
    let ip = jsonpath(&s, "hosts", "{.status.podIP}");
    let hosts = s.k(&["logs", "hosts"]);
    assert!(
        hosts.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"),
        "{hosts}"
    );
    assert!(
        hosts.contains(&format!("{ip}\tdb.nodes.default.svc.cluster.local\tdb\n")),
        "{hosts}"
    );
    assert!(
        hosts.ends_with("\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"),
        "{hosts}"
    );
    // What the container wrote to /dev/termination-log, or its log tail.
    let msg = "{.status.containerStatuses[0].state.terminated.message}";
    wait_for(&s, "message", msg, Duration::from_secs(60), |m| m == "bye");
    let fallback = wait_for(&s, "fallback", msg, Duration::from_secs(60), |m| {
        !m.is_empty()
    });
    assert_eq!(fallback, "from-the-log\n");
    // A shared PID namespace: b sees a's sleep; pid 1 is the sandbox's pause.
    wait_for(
        &s,
        "shared",
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Running",
    );
    let ps = s.k(&["exec", "shared", "-c", "b", "--", "ps", "-o", "pid,args"]);
    assert!(ps.contains("sleep 4242"), "{ps}");
    assert!(
        ps.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["1", "/pause"]),
        "{ps}"
    );
    // hostPID: the node's processes, this test's own among them.
    wait_for(
        &s,
        "hostpid",
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Running",
    );
    let me = std::process::id().to_string();
    let out = s.k(&[
        "exec",
        "hostpid",
        "--",
        "sh",
        "-c",
        &format!("test -d /proc/{me} && echo seen"),
    ]);
    assert_eq!(out.trim(), "seen");
    // activeDeadlineSeconds: killed and Failed with upstream's reason.
    wait_for(
        &s,
        "deadline",
        "{.status.phase}",
        Duration::from_secs(60),
        |p| p == "Running",
    );
    wait_for(
        &s,
        "deadline",
        "{.status.phase}",
        Duration::from_secs(30),
        |p| p == "Failed",
    );
    assert_eq!(
        jsonpath(&s, "deadline", "{.status.reason}"),
        "DeadlineExceeded"
    );
    assert_eq!(
        jsonpath(&s, "deadline", "{.status.message}"),
        "Pod was active on the node longer than the specified deadline"
    );
    let state = jsonpath(
        &s,
        "deadline",
        "{.status.containerStatuses[0].state.terminated.reason}",
    );
    assert!(!state.is_empty(), "the container is terminated");
    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=deadline,reason=DeadlineExceeded",
        "-o",
        "name",
    ]);
    assert!(!events.trim().is_empty(), "a DeadlineExceeded event");
    delete_all(&s);
}
