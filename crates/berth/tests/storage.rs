//! Storage on real containerd: `berth server` with its agent, the default
//! `local-path` StorageClass and the agent's provisioner (issue 15). Needs
//! root and `scripts/install-deps` (containerd, runc, CNI plugins, busybox).

mod common;

use std::time::Duration;

use common::{Server, stdout, wait_until};

const LIMIT: Duration = Duration::from_secs(60);

fn agent_server(tag: &str) -> Server {
    let s = Server::start_with_agent(tag);
    wait_until(LIMIT, "node Ready", || {
        stdout(&s.kubectl(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}",
        ])) == "True"
    });
    s
}

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(out.status.success(), "apply: {}", common::stderr(&out));
}

fn claim(name: &str, modes: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {name}\nspec:\n  accessModes: [{modes}]\n  resources:\n    requests:\n      storage: 64Mi\n"
    )
}

/// A busybox pod mounting `claim` at /data and running `sh -c script`.
fn pod(name: &str, claim: &str, script: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - name: c\n    image: busybox\n    imagePullPolicy: Never\n    command: [sh, -c, '{script}']\n    volumeMounts:\n    - {{name: d, mountPath: /data}}\n  volumes:\n  - name: d\n    persistentVolumeClaim: {{claimName: {claim}}}\n"
    )
}

fn get(s: &Server, what: &[&str], path: &str) -> String {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    let p = format!("jsonpath={path}");
    args.extend(["-o", &p]);
    stdout(&s.kubectl(&args))
}

fn events_of(s: &Server, name: &str) -> String {
    stdout(&s.kubectl(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={name}"),
        "-o",
        "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
    ]))
}

#[test]
fn local_path_claim_lifecycle() {
    let s = agent_server("storage-claim");
    // The default class, with upstream's columns.
    let classes = s.k(&["get", "storageclass"]);
    let header: Vec<&str> = classes
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE"
        ],
        "{classes}"
    );
    assert!(
        classes.contains("local-path (default)") && classes.contains("WaitForFirstConsumer"),
        "{classes}"
    );

    // A class-less claim gets local-path and waits for its first consumer.
    apply(&s, &claim("data", "ReadWriteOnce"));
    assert_eq!(
        get(&s, &["pvc", "data"], "{.spec.storageClassName}"),
        "local-path"
    );
    wait_until(LIMIT, "WaitForFirstConsumer event", || {
        events_of(&s, "data").contains(
            "WaitForFirstConsumer: waiting for first consumer to be created before binding",
        )
    });
    assert_eq!(get(&s, &["pvc", "data"], "{.status.phase}"), "Pending");

    // The first pod binds it on this node and writes a file.
    apply(
        &s,
        &pod("writer", "data", "echo kept > /data/f && sleep 3600"),
    );
    wait_until(LIMIT, "claim Bound", || {
        get(&s, &["pvc", "data"], "{.status.phase}") == "Bound"
    });
    let pv = get(&s, &["pvc", "data"], "{.spec.volumeName}");
    let node = get(&s, &["nodes"], "{.items[0].metadata.name}");
    assert_eq!(
        get(
            &s,
            &["pv", &pv],
            "{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}"
        ),
        node
    );
    let dir = get(&s, &["pv", &pv], "{.spec.local.path}");
    assert!(
        dir.starts_with(&s.data_dir.join("storage").display().to_string()),
        "{dir}"
    );
    wait_until(LIMIT, "file written", || {
        std::fs::read_to_string(format!("{dir}/f")).is_ok_and(|c| c == "kept\n")
    });

    // A second pod on the claim sees the file.
    s.k(&["delete", "pod", "writer", "--wait=true"]);
    apply(&s, &pod("reader", "data", "cat /data/f && sleep 3600"));
    wait_until(LIMIT, "reader logs the file", || {
        stdout(&s.kubectl(&["logs", "reader"])) == "kept\n"
    });

    // pvc-protection keeps the claim while the pod exists.
    let out = s.kubectl(&["delete", "pvc", "data", "--wait=false"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !get(&s, &["pvc", "data"], "{.metadata.deletionTimestamp}").is_empty(),
        "claim gone while in use"
    );
    assert!(std::path::Path::new(&dir).exists());
    // Pod gone: claim, volume and directory follow (reclaim Delete).
    s.k(&["delete", "pod", "reader", "--wait=true"]);
    wait_until(LIMIT, "claim, volume and directory removed", || {
        !s.kubectl(&["get", "pvc", "data"]).status.success()
            && !s.kubectl(&["get", "pv", &pv]).status.success()
            && !std::path::Path::new(&dir).exists()
    });

    // Bad input: ReadWriteMany on local-path fails to provision.
    apply(&s, &claim("shared", "ReadWriteMany"));
    apply(&s, &pod("wants-shared", "shared", "sleep 3600"));
    wait_until(LIMIT, "ProvisioningFailed for ReadWriteMany", || {
        events_of(&s, "shared").contains("ProvisioningFailed")
    });
    s.k(&["delete", "pod", "wants-shared", "--wait=true"]);
    s.k(&["delete", "pvc", "shared", "--wait=true"]);

    // Bad input: a Recycle volume and a claim shrink are rejected.
    let recycle = "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: recycled\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Recycle\n  hostPath: {path: /tmp/berth-recycled}\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(recycle));
    assert!(!out.status.success());
    assert!(
        common::stderr(&out)
            .contains("spec.persistentVolumeReclaimPolicy: Unsupported value: \"Recycle\""),
        "{}",
        common::stderr(&out)
    );
    apply(&s, &claim("grow", "ReadWriteOnce"));
    apply(&s, &pod("grower", "grow", "sleep 3600"));
    wait_until(LIMIT, "grow Bound", || {
        get(&s, &["pvc", "grow"], "{.status.phase}") == "Bound"
    });
    let out = s.kubectl(&[
        "patch",
        "pvc",
        "grow",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"32Mi"}}}}"#,
    ]);
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains(
            "spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"
        ),
        "{}",
        common::stderr(&out)
    );
    let pv = get(&s, &["pvc", "grow"], "{.spec.volumeName}");
    let dir = get(&s, &["pv", &pv], "{.spec.local.path}");
    s.k(&["delete", "pod", "grower", "--wait=true"]);
    s.k(&["delete", "pvc", "grow", "--wait=true"]);
    wait_until(LIMIT, "grow's directory removed", || {
        !std::path::Path::new(&dir).exists()
    });
}

/// A StatefulSet's volumeClaimTemplates on local-path: each pod writes its
/// hostname into its own volume; recreated pods find their own file.
#[test]
fn stateful_set_claims_follow_their_pods() {
    let s = agent_server("storage-sts");
    apply(
        &s,
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  serviceName: web\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      terminationGracePeriodSeconds: 0\n      containers:\n      - name: c\n        image: busybox\n        imagePullPolicy: Never\n        command: [sh, -c, 'test -f /data/h || hostname > /data/h; cat /data/h; sleep 3600']\n        volumeMounts:\n        - {name: data, mountPath: /data}\n  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: 64Mi\n",
    );
    let logs_own_name = |pod: &str| stdout(&s.kubectl(&["logs", pod])) == format!("{pod}\n");
    for pod in ["web-0", "web-1"] {
        wait_until(LIMIT, &format!("{pod} logs its hostname"), || {
            logs_own_name(pod)
        });
    }
    let uids = get(&s, &["pods", "-l", "app=web"], "{.items[*].metadata.uid}");
    s.k(&["delete", "pods", "-l", "app=web", "--wait=true"]);
    for pod in ["web-0", "web-1"] {
        wait_until(
            LIMIT,
            &format!("recreated {pod} reads its own file"),
            || !uids.contains(&get(&s, &["pod", pod], "{.metadata.uid}")) && logs_own_name(pod),
        );
    }
    // Clean up: the claims outlive the set (upstream's default retention).
    s.k(&["delete", "statefulset", "web", "--wait=true"]);
    wait_until(LIMIT, "pods gone", || {
        get(&s, &["pods", "-l", "app=web"], "{.items[*].metadata.name}").is_empty()
    });
    assert_eq!(
        get(&s, &["pvc"], "{.items[*].metadata.name}"),
        "data-web-0 data-web-1"
    );
    s.k(&["delete", "pvc", "--all", "--wait=true"]);
    wait_until(LIMIT, "volumes deleted", || {
        get(&s, &["pv"], "{.items[*].metadata.name}").is_empty()
    });
}
