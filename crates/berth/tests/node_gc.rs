//! Garbage collection on real containerd: under disk pressure the eviction
//! manager first reclaims node-level resources, as upstream's
//! `reclaimNodeLevelResources`: every dead container of a finished pod and every
//! unused image go (Berth's own images stay), and no pod is evicted for it.
//! Needs root and `scripts/install-deps`; takes the machine-wide agent lock.

mod common;

use std::time::Duration;

use berth_kubelet::images::tar::TarBuilder;
use berth_kubelet::images::{ImageSpec, docker_archive};
use common::{Server, wait_until};

const VICTIM: &str = "berth.local/gc-victim:1";

fn image_names(s: &Server) -> Vec<String> {
    s.ctr(&["images", "ls", "-q"])
        .lines()
        .map(String::from)
        .collect()
}

fn pod_containers(s: &Server, uid: &str) -> Vec<String> {
    let label = format!("labels.\"io.kubernetes.pod.uid\"=={uid}");
    s.ctr(&["containers", "ls", "-q", &label])
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn disk_pressure_reclaims_dead_containers_and_unused_images_before_evicting() {
    // Any ordinary disk has less than 99 % of its image filesystem free, so the
    // threshold is met from the start and the manager reclaims every 10 s.
    let s = Server::start_with_agent_args(
        "gc",
        &[
            "--eviction-hard",
            "imagefs.available<99%",
            "--minimum-image-ttl-duration",
            "0s",
        ],
    );
    wait_until(Duration::from_secs(60), "node DiskPressure", || {
        s.node_condition("Ready") == "True" && s.node_condition("DiskPressure") == "True"
    });
    let node = s.k(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);

    // A finished critical pod (admitted under pressure, never evicted): its
    // dead container goes although the pod still exists.
    let pod = format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: done
  namespace: kube-system
spec:
  nodeName: {node}
  priorityClassName: system-node-critical
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    imagePullPolicy: Never
    command: [\"sh\", \"-c\", \"echo done\"]
"
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until(Duration::from_secs(60), "pod Succeeded", || {
        s.k(&[
            "get",
            "pod",
            "done",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.status.phase}",
        ]) == "Succeeded"
    });
    let uid = s.k(&[
        "get",
        "pod",
        "done",
        "-n",
        "kube-system",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    wait_until(
        Duration::from_secs(30),
        "the finished pod's containers removed",
        || pod_containers(&s, &uid).is_empty(),
    );

    // An image no container uses goes; Berth's own (busybox, pause) stay.
    let layer = {
        let mut t = TarBuilder::new();
        t.file("victim", 0o644, b"collect me").expect("tar");
        t.finish()
    };
    let spec = ImageSpec {
        name: VICTIM,
        entrypoint: &[],
        cmd: &["/victim"],
    };
    let archive = s.data_dir.join("victim.tar");
    std::fs::write(&archive, docker_archive(&spec, &layer).expect("archive")).expect("write");
    s.ctr(&[
        "images",
        "import",
        "--all-platforms",
        archive.to_str().expect("path"),
    ]);
    assert!(
        image_names(&s).iter().any(|i| i == VICTIM),
        "{:?}",
        image_names(&s)
    );
    wait_until(Duration::from_secs(30), "the unused image removed", || {
        !image_names(&s).iter().any(|i| i == VICTIM)
    });
    let left = image_names(&s);
    for kept in [
        "docker.io/library/busybox:latest",
        "registry.k8s.io/pause:3.10",
    ] {
        assert!(left.iter().any(|i| i == kept), "{kept} removed: {left:?}");
    }
    // The reclaim did not make the node evict the finished pod's record.
    assert_eq!(
        s.k(&[
            "get",
            "pod",
            "done",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.status.phase}"
        ]),
        "Succeeded"
    );
    s.k(&["delete", "pod", "done", "-n", "kube-system", "--wait=true"]);
}
