//! Device plugins on a real node: `berth server` with its node agent and
//! `berth device-plugin sample` started by the test. The extended resource
//! reaches the Node, a pod gets its device's env and mounted file, a request
//! beyond the devices stays Pending (the scheduler's Insufficient), a plugin
//! restart keeps the running pod's allocation, and a bad resource name is
//! refused with upstream's error. Needs root and `scripts/install-deps`, as
//! the node suite.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Server, stdout, wait_until};
use serde_json::json;

const RESOURCE: &str = "example.com/sample";

struct Plugin(Child);

impl Plugin {
    fn start(s: &Server, args: &[&str]) -> Plugin {
        Plugin::start_in(s, args, "plugin.log")
    }

    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        self.stop();
    }
}

fn pod(name: &str, devices: u32) -> String {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "c", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", "echo devices=$SAMPLE_DEVICES; cat /sample/*; sleep 3600"],
                "resources": {"limits": {RESOURCE: devices.to_string()}}
            }]
        }
    })
    .to_string()
}

fn node_resource(s: &Server, field: &str) -> String {
    stdout(&s.kubectl(&[
        "get",
        "nodes",
        "-o",
        &format!("jsonpath={{.items[0].status.{field}.example\\.com/sample}}"),
    ]))
}

fn phase(s: &Server, pod: &str) -> String {
    stdout(&s.kubectl(&["get", "pod", pod, "-o", "jsonpath={.status.phase}"]))
}

#[test]
fn sample_device_plugin() {
    let s = Server::start_with_agent("devplugin");
    s.wait_node_ready(Duration::from_secs(60));
    let mut plugin = Plugin::start(&s, &["--devices", "2"]);
    wait_until(
        Duration::from_secs(40),
        "example.com/sample: 2 allocatable",
        || node_resource(&s, "allocatable") == "2",
    );
    assert_eq!(node_resource(&s, "capacity"), "2");
    let describe = s.k(&["describe", "node"]);
    assert!(
        describe
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == [format!("{RESOURCE}:").as_str(), "2"]),
        "describe node lacks {RESOURCE}: 2\n{describe}"
    );

    // A bad resource name: the agent refuses it with upstream's error and the
    // plugin exits.
    let mut bad = Plugin::start_in(
        &s,
        &["--resource-name", "kubernetes.io/bad"],
        "bad-plugin.log",
    );
    let status = wait_exit(&mut bad.0, Duration::from_secs(30));
    assert!(!status.success(), "a bad resource name must fail");
    let log = std::fs::read_to_string(s.data_dir.join("bad-plugin.log")).expect("bad log");
    assert!(
        log.contains(r#"registration refused: the ResourceName "kubernetes.io/bad" is invalid"#),
        "{log}"
    );

    s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod("p1", 1)));
    wait_until(Duration::from_secs(90), "p1 Running", || {
        phase(&s, "p1") == "Running"
    });
    let mut logs = String::new();
    wait_until(Duration::from_secs(30), "p1 logs", || {
        logs = stdout(&s.kubectl(&["logs", "p1"]));
        logs.contains("devices=sample-")
    });
    // The env names the device and its mounted file holds its ID.
    let dev = logs
        .lines()
        .find_map(|l| l.strip_prefix("devices="))
        .expect("devices line")
        .to_string();
    assert!(dev == "sample-0" || dev == "sample-1", "{logs}");
    assert!(
        logs.lines().any(|l| l == dev),
        "mounted file of {dev} missing:\n{logs}"
    );

    s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod("p2", 1)));
    wait_until(Duration::from_secs(90), "p2 Running", || {
        phase(&s, "p2") == "Running"
    });
    // A third device: none left, the scheduler keeps it Pending.
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod("p3", 1)));
    wait_until(Duration::from_secs(30), "p3 unschedulable", || {
        stdout(&s.kubectl(&[
            "get",
            "pod",
            "p3",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].message}",
        ]))
        .contains("Insufficient example.com/sample")
    });
    assert_eq!(phase(&s, "p3"), "Pending");

    // Plugin restart: the running pod keeps its devices (the checkpoint names
    // them) and the node gets its devices back.
    let uid = stdout(&s.kubectl(&["get", "pod", "p1", "-o", "jsonpath={.metadata.uid}"]));
    plugin.stop();
    let mut plugin = Plugin::start(&s, &["--devices", "2"]);
    wait_until(
        Duration::from_secs(40),
        "devices back after restart",
        || node_resource(&s, "allocatable") == "2",
    );
    assert_eq!(phase(&s, "p1"), "Running");
    let cp = std::fs::read_to_string(
        s.data_dir
            .join("agent/device-plugins/kubelet_internal_checkpoint"),
    )
    .expect("checkpoint");
    let cp: serde_json::Value = serde_json::from_str(&cp).expect("checkpoint json");
    let entry = cp["Data"]["PodDeviceEntries"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["PodUID"] == uid.as_str()))
        .unwrap_or_else(|| panic!("p1 ({uid}) not in the checkpoint: {cp}"));
    assert_eq!(entry["DeviceIDs"]["-1"], json!([dev]));
    assert_eq!(phase(&s, "p3"), "Pending");

    s.k(&[
        "delete",
        "pod",
        "p1",
        "p2",
        "p3",
        "--wait=true",
        "--timeout=60s",
    ]);
    plugin.stop();
}

/// The Topology Manager with the Device Manager as hint provider, on this
/// one-NUMA-node machine: the plugin puts sample-0 on node 1 (a node this
/// machine lacks, as a device behind another socket) and sample-1 on node 0.
/// Under `restricted` a pod gets sample-1, though the unaligned sample-0
/// sorts first; the next pod could only get sample-0 and is rejected with
/// upstream's TopologyAffinityError. (`single-numa-node` would admit with no
/// affinity here, as upstream: on one node the only mask is the default one.)
#[test]
fn restricted_gives_the_aligned_device_and_rejects_an_unaligned_one() {
    let s = Server::start_with_agent_args("devtopo", &["--topology-manager-policy", "restricted"]);
    s.wait_node_ready(Duration::from_secs(60));
    let mut plugin = Plugin::start(&s, &["--devices", "2", "--numa-nodes", "1,0"]);
    wait_until(
        Duration::from_secs(40),
        "example.com/sample: 2 allocatable",
        || node_resource(&s, "allocatable") == "2",
    );
    s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod("aligned", 1)));
    wait_until(Duration::from_secs(90), "aligned started", || {
        matches!(phase(&s, "aligned").as_str(), "Running" | "Failed")
    });
    let aligned = s.k(&["get", "pod", "aligned", "-o", "jsonpath={.status}"]);
    let logs = stdout(&s.kubectl(&["logs", "aligned"]));
    assert_eq!(phase(&s, "aligned"), "Running", "{aligned}\n{logs}");
    wait_until(Duration::from_secs(30), "aligned's device", || {
        stdout(&s.kubectl(&["logs", "aligned"])).contains("devices=sample-1")
    });

    s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod("unaligned", 1)));
    wait_until(Duration::from_secs(60), "unaligned Failed", || {
        phase(&s, "unaligned") == "Failed"
    });
    let status = |field: &str| {
        stdout(&s.kubectl(&[
            "get",
            "pod",
            "unaligned",
            "-o",
            &format!("jsonpath={{.status.{field}}}"),
        ]))
    };
    assert_eq!(status("reason"), "TopologyAffinityError");
    assert_eq!(
        status("message"),
        "Pod was rejected: Resources cannot be allocated with Topology locality"
    );
    // Nothing stays reserved for the rejected pod: the checkpoint holds only
    // the aligned pod's device.
    let cp = std::fs::read_to_string(
        s.data_dir
            .join("agent/device-plugins/kubelet_internal_checkpoint"),
    )
    .expect("checkpoint");
    let cp: serde_json::Value = serde_json::from_str(&cp).expect("checkpoint json");
    let entries = cp["Data"]["PodDeviceEntries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(entries.len(), 1, "{cp}");
    // Keyed by the device's NUMA node, as upstream's checkpoint.
    assert_eq!(entries[0]["DeviceIDs"], json!({"0": ["sample-1"]}), "{cp}");

    s.k(&[
        "delete",
        "pod",
        "aligned",
        "unaligned",
        "--wait=true",
        "--timeout=60s",
    ]);
    plugin.stop();
}

impl Plugin {
    fn start_in(s: &Server, args: &[&str], log: &str) -> Plugin {
        let log = std::fs::File::create(s.data_dir.join(log)).expect("plugin log");
        Plugin(
            Command::new(env!("CARGO_BIN_EXE_berth"))
                .args(["device-plugin", "sample", "--data-dir"])
                .arg(&s.data_dir)
                .args(args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start berth device-plugin"),
        )
    }
}

fn wait_exit(c: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Ok(Some(st)) = c.try_wait() {
            return st;
        }
        assert!(std::time::Instant::now() < deadline, "plugin did not exit");
        std::thread::sleep(Duration::from_millis(100));
    }
}
