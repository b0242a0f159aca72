//! securityContext on real containers: `berth server` with its node agent
//! (containerd, local busybox image), each setting checked from inside the
//! container (`id`, `/proc/self/status`, `/proc/self/ns/*`, writes), and the
//! agent's admission (sysctls, AppArmor) and sandbox checks (hostUsers).
//! Needs root and `scripts/install-deps`, as the node suite.

mod common;

use std::time::{Duration, Instant};

use common::{Server, wait_until};
use serde_json::{Value, json};

/// Prints the container's network, PID and IPC namespaces.
const NS_SCRIPT: &str = "for n in net pid ipc; do readlink /proc/self/ns/$n; done";

/// Upstream's unsafe sysctl allowed through the agent flag in this suite.
const ALLOWED_UNSAFE: &str = "net.core.somaxconn";

fn agent_server() -> Server {
    let s = Server::start_with_agent_args("secctx", &["--allowed-unsafe-sysctls", ALLOWED_UNSAFE]);
    wait_until(Duration::from_secs(60), "node Ready", || {
        let out = s.kubectl(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        String::from_utf8_lossy(&out.stdout) == "True"
    });
    s
}

/// A busybox container running `script` with securityContext `sc`.
fn container(name: &str, script: &str, sc: Value) -> Value {
    json!({"name": name, "image": "busybox", "imagePullPolicy": "IfNotPresent",
           "command": ["sh", "-c", script], "securityContext": sc})
}

fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["restartPolicy"] = json!("Never");
    spec["terminationGracePeriodSeconds"] = json!(1);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn apply(s: &Server, obj: &Value) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&obj.to_string()));
    assert!(out.status.success(), "{}", common::stderr(&out));
}

fn jsonpath(s: &Server, pod: &str, path: &str) -> String {
    let out = s.kubectl(&["get", "pod", pod, "-o", &format!("jsonpath={path}")]);
    common::stdout(&out)
}

fn wait_for(s: &Server, pod: &str, path: &str, f: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        last = jsonpath(s, pod, path);
        if f(&last) {
            return last;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!(
        "pod {pod}: {path} never matched; last {last:?}\n{}",
        s.k(&["get", "pod", pod, "-o", "yaml"])
    );
}

/// Waits for a pod to finish and returns its phase.
fn finished(s: &Server, pod: &str) -> String {
    wait_for(s, pod, "{.status.phase}", |p| {
        p == "Succeeded" || p == "Failed"
    })
}

/// Waits for a pod to succeed; on failure shows why (its status and logs).
fn succeeded(s: &Server, pod: &str) {
    let phase = finished(s, pod);
    assert_eq!(
        phase,
        "Succeeded",
        "pod {pod}:\n{}\n{}",
        s.k(&["get", "pod", pod, "-o", "yaml"]),
        common::stdout(&s.kubectl(&["logs", pod, "--all-containers"]))
    );
}

fn logs(s: &Server, pod: &str, c: &str) -> String {
    s.k(&["logs", pod, "-c", c])
}

/// A `/proc/self/status` field as the container printed it (`grep Name:`).
fn status_field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {name} in {out:?}"))
}

fn host_ns(kind: &str) -> String {
    std::fs::read_link(format!("/proc/self/ns/{kind}"))
        .expect("own namespace")
        .display()
        .to_string()
}

fn run(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().expect("run");
    assert!(out.status.success(), "{cmd:?}: {}", common::stderr(&out));
    common::stdout(&out)
}

/// Imports `name`, a one-layer busybox image whose config says `USER user`,
/// into the agent's containerd (a docker archive, as `docker save` writes).
fn import_image_with_user(s: &Server, name: &str, user: &str) {
    use std::process::Command;
    let dir = common::temp_dir("secctx-image");
    let root = dir.join("rootfs/bin");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::copy("/bin/busybox", root.join("busybox")).expect("busybox-static");
    for applet in ["sh", "id"] {
        std::os::unix::fs::symlink("busybox", root.join(applet)).unwrap();
    }
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    run(Command::new("tar")
        .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
        .arg(dir.join("rootfs"))
        .arg("-cf")
        .arg(out.join("layer.tar"))
        .arg("."));
    let sum = run(Command::new("sha256sum").arg(out.join("layer.tar")));
    let diff_id = sum.split_whitespace().next().unwrap().to_string();
    let config = json!({"architecture": "amd64", "os": "linux",
        "config": {"User": user, "Cmd": ["sh"], "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff_id}")]}});
    std::fs::write(out.join("config.json"), config.to_string()).unwrap();
    let manifest = json!([{"Config": "config.json", "RepoTags": [name], "Layers": ["layer.tar"]}]);
    std::fs::write(out.join("manifest.json"), manifest.to_string()).unwrap();
    let archive = dir.join("image.tar");
    run(Command::new("tar")
        .arg("-C")
        .arg(&out)
        .arg("-cf")
        .arg(&archive)
        .args(["manifest.json", "config.json", "layer.tar"]));
    run(Command::new("ctr")
        .arg("--address")
        .arg(s.data_dir.join("agent/containerd/containerd.sock"))
        .args(["-n", "k8s.io", "images", "import", "--all-platforms"])
        .arg(&archive));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn security_context_reaches_the_container() {
    let s = agent_server();
    import_image_with_user(&s, "berth.test/user-uid:1", "65534");
    import_image_with_user(&s, "berth.test/user-name:1", "nobody");
    let with_image = |mut c: Value, image: &str| {
        c["image"] = json!(image);
        c
    };
    let status = "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status";
    let veth = |n: u32| {
        format!(
            "if ip link add v{n} type veth peer name w{n}; then echo net-admin-ok; else echo denied; fi"
        )
    };
    // A Localhost seccomp profile under <data-dir>/agent/seccomp that refuses mkdir.
    let profiles = s.data_dir.join("agent/seccomp");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("deny-mkdir.json"),
        json!({"defaultAction": "SCMP_ACT_ALLOW",
               "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]})
        .to_string(),
    )
    .unwrap();
    let pods = [
        pod(
            "ids",
            json!({"securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000,
                                       "supplementalGroups": [4000], "runAsNonRoot": true},
                   "containers": [container("inherit", "id", json!({})),
                                  container("own", "id -u; id -g", json!({"runAsUser": 2000, "runAsGroup": 5000}))]}),
        ),
        pod(
            "nonroot",
            json!({"securityContext": {"runAsNonRoot": true},
                   "containers": [container("c", "true", json!({}))]}),
        ),
        pod(
            "nonroot-uid",
            json!({"securityContext": {"runAsNonRoot": true},
                   "containers": [with_image(container("c", "id -u", json!({})), "berth.test/user-uid:1")]}),
        ),
        pod(
            "nonroot-name",
            json!({"securityContext": {"runAsNonRoot": true},
                   "containers": [with_image(container("c", "id -u", json!({})), "berth.test/user-name:1")]}),
        ),
        pod(
            "caps",
            json!({"containers": [
                container("drop", status, json!({"capabilities": {"drop": ["ALL"]}})),
                // This kernel has no `dummy` link type: a veth pair needs NET_ADMIN as well.
                container("add", &veth(0), json!({"capabilities": {"add": ["NET_ADMIN"]}})),
                container("plain", &veth(1), json!({})),
            ]}),
        ),
        pod(
            "privileged",
            json!({"containers": [container("c", &format!("{}; {status}", veth(2)), json!({"privileged": true}))]}),
        ),
        pod(
            "privs",
            json!({"containers": [
                container("nnp", status, json!({"allowPrivilegeEscalation": false})),
                container("default", status, json!({})),
                container("rtdefault", status, json!({"seccompProfile": {"type": "RuntimeDefault"}})),
                container("local", &format!("if mkdir /tmp/d 2>/dev/null; then echo made; else echo mkdir-denied; fi; {status}"),
                          json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "deny-mkdir.json"}})),
                container("rofs", "if touch /x 2>/dev/null; then echo wrote; else echo write-failed; fi; touch /tmp/x 2>/dev/null || echo tmp-read-only",
                          json!({"readOnlyRootFilesystem": true})),
                container("ns", NS_SCRIPT, json!({})),
            ]}),
        ),
        pod(
            "podseccomp",
            json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                   "containers": [container("c", status, json!({})),
                                  container("unconfined", status, json!({"seccompProfile": {"type": "Unconfined"}}))]}),
        ),
        pod(
            "hostns",
            json!({"hostNetwork": true, "hostPID": true, "hostIPC": true,
                   "containers": [container("c", NS_SCRIPT, json!({}))]}),
        ),
        pod(
            "sysctls",
            json!({"securityContext": {"sysctls": [
                        {"name": "net.ipv4.ip_local_port_range", "value": "2000 60000"},
                        {"name": ALLOWED_UNSAFE, "value": "512"}]},
                   "containers": [container("c", "cat /proc/sys/net/ipv4/ip_local_port_range /proc/sys/net/core/somaxconn", json!({}))]}),
        ),
        pod(
            "unsafe-sysctl",
            json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]},
                   "containers": [container("c", "true", json!({}))]}),
        ),
        pod(
            "apparmor",
            json!({"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                   "containers": [container("c", "cat /proc/self/attr/current", json!({}))]}),
        ),
        pod(
            "strict-groups",
            json!({"securityContext": {"runAsUser": 1000, "supplementalGroups": [4000],
                                       "supplementalGroupsPolicy": "Strict"},
                   "containers": [container("c", "id -G", json!({}))]}),
        ),
        pod(
            "userns",
            json!({"hostUsers": false, "containers": [container("c", "true", json!({}))]}),
        ),
    ];
    for p in &pods {
        apply(&s, p);
    }

    // uid, gid and groups: the pod's, the container's own where it sets them.
    succeeded(&s, "ids");
    let id = logs(&s, "ids", "inherit");
    assert!(id.starts_with("uid=1000 gid=3000"), "{id}");
    let groups = id.split("groups=").nth(1).unwrap_or("");
    for g in ["2000", "3000", "4000"] {
        assert!(groups.split(',').any(|x| x.starts_with(g)), "{g} in {id}");
    }
    assert_eq!(logs(&s, "ids", "own").trim(), "2000\n5000");

    // runAsNonRoot with an image that runs as root.
    let uid = jsonpath(&s, "nonroot", "{.metadata.uid}");
    wait_for(
        &s,
        "nonroot",
        "{.status.containerStatuses[0].state.waiting.reason}",
        |r| r == "CreateContainerConfigError",
    );
    assert_eq!(
        jsonpath(
            &s,
            "nonroot",
            "{.status.containerStatuses[0].state.waiting.message}"
        ),
        format!(
            "container has runAsNonRoot and image will run as root (pod: \"nonroot_default({uid})\", container: c)"
        )
    );

    // An image whose USER is a non-root uid passes (and runs as it); a user
    // name cannot be verified.
    succeeded(&s, "nonroot-uid");
    assert_eq!(logs(&s, "nonroot-uid", "c").trim(), "65534");
    let uid = jsonpath(&s, "nonroot-name", "{.metadata.uid}");
    wait_for(
        &s,
        "nonroot-name",
        "{.status.containerStatuses[0].state.waiting.reason}",
        |r| r == "CreateContainerConfigError",
    );
    assert_eq!(
        jsonpath(
            &s,
            "nonroot-name",
            "{.status.containerStatuses[0].state.waiting.message}"
        ),
        format!(
            "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root (pod: \"nonroot-name_default({uid})\", container: c)"
        )
    );

    // Capabilities: none left after drop ALL, NET_ADMIN added on request only.
    succeeded(&s, "caps");
    assert_eq!(
        status_field(&logs(&s, "caps", "drop"), "CapEff"),
        "0000000000000000"
    );
    assert_eq!(logs(&s, "caps", "add").trim(), "net-admin-ok");
    assert!(logs(&s, "caps", "plain").contains("denied"));
    // A privileged container (in a privileged sandbox) has them all.
    succeeded(&s, "privileged");
    let out = logs(&s, "privileged", "c");
    assert!(out.starts_with("net-admin-ok"), "{out}");
    assert_ne!(status_field(&out, "CapEff"), "0000000000000000");

    // no_new_privs, seccomp (Unconfined by default, as upstream), read-only root.
    succeeded(&s, "privs");
    let nnp = logs(&s, "privs", "nnp");
    assert_eq!(status_field(&nnp, "NoNewPrivs"), "1");
    let default = logs(&s, "privs", "default");
    assert_eq!(status_field(&default, "NoNewPrivs"), "0");
    assert_eq!(status_field(&default, "Seccomp"), "0");
    assert_eq!(
        status_field(&logs(&s, "privs", "rtdefault"), "Seccomp"),
        "2"
    );
    let local = logs(&s, "privs", "local");
    assert!(local.starts_with("mkdir-denied"), "{local}");
    assert_eq!(status_field(&local, "Seccomp"), "2");
    assert_eq!(
        logs(&s, "privs", "rofs").trim(),
        "write-failed\ntmp-read-only"
    );
    succeeded(&s, "podseccomp");
    assert_eq!(status_field(&logs(&s, "podseccomp", "c"), "Seccomp"), "2");
    assert_eq!(
        status_field(&logs(&s, "podseccomp", "unconfined"), "Seccomp"),
        "0"
    );

    // Host namespaces: the node's with hostNetwork/hostPID/hostIPC, else the pod's own.
    let host: Vec<String> = ["net", "pid", "ipc"].iter().map(|k| host_ns(k)).collect();
    succeeded(&s, "hostns");
    let shared: Vec<String> = logs(&s, "hostns", "c").lines().map(String::from).collect();
    assert_eq!(shared, host);
    let own: Vec<String> = logs(&s, "privs", "ns").lines().map(String::from).collect();
    assert_eq!(own.len(), 3, "{own:?}");
    for (o, h) in own.iter().zip(&host) {
        assert_ne!(o, h);
    }

    // Sysctls: the safe set and --allowed-unsafe-sysctls reach the pod; others are refused.
    succeeded(&s, "sysctls");
    let values: Vec<String> = logs(&s, "sysctls", "c")
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(values, ["2000 60000", "512"]);
    assert_eq!(finished(&s, "unsafe-sysctl"), "Failed");
    assert_eq!(
        jsonpath(&s, "unsafe-sysctl", "{.status.reason}"),
        "SysctlForbidden"
    );
    assert_eq!(
        jsonpath(&s, "unsafe-sysctl", "{.status.message}"),
        "Pod was rejected: forbidden sysctl: \"kernel.msgmax\" not allowlisted"
    );

    // AppArmor: enforced where the host has it, else the pod is refused.
    let host_apparmor = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|v| v.starts_with('Y'))
        && std::path::Path::new("/sys/kernel/security/apparmor").exists();
    let phase = finished(&s, "apparmor");
    if host_apparmor {
        assert_eq!(phase, "Succeeded");
        let label = logs(&s, "apparmor", "c");
        assert!(label.contains("(enforce)"), "{label}");
    } else {
        assert_eq!(phase, "Failed");
        assert_eq!(jsonpath(&s, "apparmor", "{.status.reason}"), "AppArmor");
        assert_eq!(
            jsonpath(&s, "apparmor", "{.status.message}"),
            "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host"
        );
    }

    // supplementalGroupsPolicy: Strict needs a runtime that reports it
    // (containerd 2.0 on); containerd 1.x does not, and the pod is refused.
    let containerd = std::process::Command::new("containerd")
        .arg("--version")
        .output()
        .expect("containerd --version");
    let containerd = common::stdout(&containerd);
    let old_containerd = containerd
        .split_whitespace()
        .nth(2)
        .is_some_and(|v| v.trim_start_matches('v').starts_with("1."));
    if old_containerd {
        assert_eq!(finished(&s, "strict-groups"), "Failed");
        assert_eq!(
            jsonpath(&s, "strict-groups", "{.status.reason}"),
            "SupplementalGroupsPolicyNotSupported"
        );
        assert_eq!(
            jsonpath(&s, "strict-groups", "{.status.message}"),
            "Pod was rejected: SupplementalGroupsPolicy=Strict is not supported in this node"
        );
    } else {
        succeeded(&s, "strict-groups");
        assert_eq!(
            logs(&s, "strict-groups", "c").trim(),
            "0 4000",
            "{containerd}"
        );
    }

    // hostUsers: false cannot be honoured by containerd 1.6: no sandbox, an event.
    wait_until(Duration::from_secs(30), "userns sandbox refused", || {
        s.k(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=userns,reason=FailedCreatePodSandBox",
            "-o",
            "jsonpath={.items[*].message}",
        ])
        .contains(
            "Failed to create pod sandbox: RuntimeClass handler \"\" does not support user namespaces",
        )
    });
    assert_eq!(jsonpath(&s, "userns", "{.status.phase}"), "Pending");

    // API validation: a Localhost seccomp profile needs its name.
    let bad = pod(
        "bad-seccomp",
        json!({"containers": [container("c", "true", json!({"seccompProfile": {"type": "Localhost"}}))]}),
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&bad.to_string()));
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains(
            "spec.containers[0].securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"
        ),
        "{}",
        common::stderr(&out)
    );
}

/// A malformed or non-namespaced `--allowed-unsafe-sysctls` stops the node
/// agent before it starts anything, as upstream's kubelet refuses to start.
#[test]
fn unsafe_sysctl_patterns_are_checked_at_start() {
    for (pattern, want) in [
        (
            "vm.swappiness",
            "invalid --allowed-unsafe-sysctls: the sysctls \"vm.swappiness\" are not known to be namespaced",
        ),
        (
            "Net.Core",
            "invalid --allowed-unsafe-sysctls: sysctl \"Net.Core\" must have at most 253 characters",
        ),
    ] {
        let dir = common::temp_dir("secctx-flag");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_berth"))
            .arg("server")
            .arg("--data-dir")
            .arg(&dir)
            .args(["--secure-port", "0", "--insecure-port", "0"])
            .args([
                "--bind-address",
                "127.0.0.1",
                "--disable-ingress",
                "--disable-dns",
            ])
            .args(["--allowed-unsafe-sysctls", pattern])
            .env("BERTH_LOG", "warn")
            .output()
            .expect("run berth server");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!out.status.success(), "{pattern}");
        let err = common::stderr(&out);
        assert!(err.contains(want), "{pattern}: {err}");
    }
}
