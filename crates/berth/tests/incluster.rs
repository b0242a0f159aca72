//! In-cluster clients on real containerd: kubectl inside a pod with no kubeconfig
//! (client-go's in-cluster config: the ServiceAccount token, CA and namespace the
//! ServiceAccount admission plugin and the node agent mount, and
//! KUBERNETES_SERVICE_HOST/PORT → the `kubernetes` Service → the API server) against
//! RBAC, the mounted files themselves, `automountServiceAccountToken: false`, and the
//! Python client's in-cluster loader with a pod's token. Needs root and
//! `scripts/install-deps` (containerd, busybox-static, a static kubectl, the Python
//! `kubernetes` package).

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, kubectl_path, stderr, stdout, wait_until};

const NS: &str = "incluster";
const OTHER: &str = "incluster-other";
const SA: &str = "reader";
const MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// `berth images build-local --add-binary … --tag` names it so (the README's name).
const KUBECTL_IMAGE: &str = "berth.local/kubectl:latest";

/// `kubectl auth whoami`: the user and, as upstream's SelfSubjectReview, the pod
/// its bound token came from.
const WHOAMI: &str = "auth whoami -o jsonpath={.status.userInfo.username}/\
    {.status.userInfo.extra.authentication\\.kubernetes\\.io/pod-name[0]}";

/// What the in-cluster kubectl pods run: each command's section opens with
/// `== ARGS` and closes with `exit CODE`.
fn kubectl_script() -> String {
    let checks = [
        "get pods -n incluster -o name",
        "get pods -o name",
        "get pods -n incluster-other -o name",
        WHOAMI,
    ];
    let quoted: Vec<String> = checks.iter().map(|c| format!("'{c}'")).collect();
    format!(
        "for args in {}; do echo \"== $args\"; kubectl $args 2>&1; rc=$?; echo; \
         echo \"exit $rc\"; done",
        quoted.join(" ")
    )
}

#[test]
fn in_cluster_clients_use_the_pod_token_and_obey_rbac() {
    let started = Instant::now();
    // Not loopback: the service proxy DNATs 10.43.0.1:443 to the advertised address.
    let s = Server::start_with_agent_args("incluster", &["--bind-address", "0.0.0.0"]);
    s.wait_node_ready(Duration::from_secs(60));
    import_kubectl_image(&s);
    for ns in [NS, OTHER] {
        s.k(&["create", "namespace", ns]);
    }
    s.k(&["-n", NS, "create", "serviceaccount", SA]);
    // Pods need the `default` ServiceAccount (admission refuses them without it) and
    // the root CA publisher's ConfigMap (their projected volume reads it).
    wait_until(
        Duration::from_secs(30),
        "default SA and kube-root-ca.crt",
        || {
            s.kubectl(&[
                "-n",
                NS,
                "get",
                "serviceaccount/default",
                "configmap/kube-root-ca.crt",
            ])
            .status
            .success()
        },
    );
    apply(
        &s,
        &pod("shell", SA, KUBECTL_IMAGE, "Always", "sleep 3600", ""),
    );
    apply(
        &s,
        &pod(
            "nomount",
            "default",
            "busybox",
            "Always",
            "sleep 3600",
            "  automountServiceAccountToken: false\n",
        ),
    );
    for p in ["shell", "nomount"] {
        wait_for_phase(&s, p, &["Running"], Duration::from_secs(60));
    }

    mounted_files(&s);
    no_automount(&s);
    kubectl_in_a_pod_obeys_rbac(&s);
    python_in_cluster_loader(&s);
    eprintln!("incluster: {:?}", started.elapsed());
}

/// Builds busybox + the harness's kubectl as [`KUBECTL_IMAGE`] and imports it into
/// the agent's containerd.
fn import_kubectl_image(s: &Server) {
    let kubectl = resolve(&kubectl_path());
    let sock = s.data_dir.join("agent/containerd/containerd.sock");
    let out = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(["images", "build-local", "--add-binary"])
        .arg(format!("{}:/usr/local/bin/kubectl", kubectl.display()))
        .args(["--tag", KUBECTL_IMAGE, "--address"])
        .arg(&sock)
        .arg("--data-dir")
        .arg(&s.data_dir)
        .output()
        .expect("berth images build-local");
    assert!(
        out.status.success(),
        "berth images build-local --add-binary {}: {}{}",
        kubectl.display(),
        stderr(&out),
        stdout(&out)
    );
    assert!(stdout(&out).contains(KUBECTL_IMAGE), "{}", stdout(&out));
}

/// A program name as `Command` would find it on PATH.
fn resolve(program: &std::path::Path) -> PathBuf {
    if program.components().count() > 1 {
        return program.to_path_buf();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{} is not on PATH", program.display()))
}

fn pod(name: &str, sa: &str, image: &str, restart: &str, command: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {NS}}}
spec:
  serviceAccountName: {sa}
  restartPolicy: {restart}
  terminationGracePeriodSeconds: 1
{extra}  containers:
  - name: c
    image: {image}
    imagePullPolicy: Never
    command: [\"sh\", \"-c\", {command:?}]
"
    )
}

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(out.status.success(), "{}\n{yaml}", stderr(&out));
}

fn get(s: &Server, what: &str, path: &str) -> String {
    stdout(&s.kubectl(&["-n", NS, "get", what, "-o", &format!("jsonpath={path}")]))
}

fn wait_for_phase(s: &Server, pod: &str, phases: &[&str], limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    let mut last = String::new();
    while Instant::now() < deadline {
        last = get(s, &format!("pod/{pod}"), "{.status.phase}");
        if phases.contains(&last.as_str()) {
            return last;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "pod {pod} never reached {phases:?} (last {last:?})\n{}\n{}",
        stdout(&s.kubectl(&["-n", NS, "get", "pod", pod, "-o", "yaml"])),
        stdout(&s.kubectl(&["-n", NS, "get", "events"]))
    );
}

fn exec(s: &Server, pod: &str, command: &[&str]) -> std::process::Output {
    let mut args = vec!["-n", NS, "exec", pod, "--"];
    args.extend_from_slice(command);
    s.kubectl(&args)
}

fn exec_ok(s: &Server, pod: &str, command: &[&str]) -> String {
    let out = exec(s, pod, command);
    assert!(
        out.status.success(),
        "exec {command:?} in {pod}: {}",
        stderr(&out)
    );
    stdout(&out)
}

/// The token, `ca.crt` and `namespace` under upstream's path and names, the
/// projected volume as upstream's admission plugin writes it, and the Service env.
fn mounted_files(s: &Server) {
    let volume = get(s, "pod/shell", "{.spec.volumes[?(@.projected)].name}");
    let suffix = volume.strip_prefix("kube-api-access-").unwrap_or("");
    assert!(
        suffix.len() == 5 && suffix.chars().all(|c| c.is_ascii_alphanumeric()),
        "{volume:?}"
    );
    assert_eq!(
        get(
            s,
            "pod/shell",
            &format!(
                "{{.spec.containers[0].volumeMounts[?(@.name==\"{volume}\")].mountPath}} \
                 {{.spec.containers[0].volumeMounts[?(@.name==\"{volume}\")].readOnly}}"
            )
        ),
        format!("{MOUNT} true")
    );
    let files = exec_ok(s, "shell", &["ls", MOUNT]);
    assert_eq!(files, "ca.crt\nnamespace\ntoken\n");

    let token = exec_ok(s, "shell", &["cat", &format!("{MOUNT}/token")]);
    let claims = jwt_claims(&token);
    let uid = get(s, "pod/shell", "{.metadata.uid}");
    assert_eq!(claims["sub"], format!("system:serviceaccount:{NS}:{SA}"));
    let k = &claims["kubernetes.io"];
    assert_eq!(k["namespace"], NS, "{claims}");
    assert_eq!(k["pod"]["name"], "shell", "{claims}");
    assert_eq!(k["pod"]["uid"], uid.as_str(), "{claims}");
    assert_eq!(k["serviceaccount"]["name"], SA, "{claims}");

    let ca = exec_ok(s, "shell", &["cat", &format!("{MOUNT}/ca.crt")]);
    let cluster_ca =
        std::fs::read_to_string(s.data_dir.join("tls/server-ca.crt")).expect("the cluster CA");
    assert_eq!(ca.trim(), cluster_ca.trim());
    assert_eq!(
        exec_ok(s, "shell", &["cat", &format!("{MOUNT}/namespace")]),
        NS
    );

    let env = exec_ok(s, "shell", &["env"]);
    for var in [
        "KUBERNETES_SERVICE_HOST=10.43.0.1",
        "KUBERNETES_SERVICE_PORT=443",
    ] {
        assert!(env.lines().any(|l| l == var), "{var} missing:\n{env}");
    }
}

/// The payload of a JWT, decoded (base64url without padding).
fn jwt_claims(token: &str) -> serde_json::Value {
    let parts: Vec<&str> = token.trim().split('.').collect();
    assert_eq!(parts.len(), 3, "not a JWT: {token:?}");
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in parts[1].bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => panic!("not base64url: {:?}", parts[1]),
        };
        bits = (bits << 6) | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    serde_json::from_slice(&out).expect("JWT claims are JSON")
}

/// `automountServiceAccountToken: false` on the pod or on its ServiceAccount: no
/// projected volume, no mount, nothing at the path.
fn no_automount(s: &Server) {
    assert_eq!(get(s, "pod/nomount", "{.spec.volumes}"), "");
    assert_eq!(
        get(s, "pod/nomount", "{.spec.containers[0].volumeMounts}"),
        ""
    );
    let out = exec(s, "nomount", &["ls", MOUNT]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("No such file or directory"),
        "{}",
        stderr(&out)
    );

    apply(
        s,
        &format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: quiet, namespace: {NS}}}\n\
             automountServiceAccountToken: false\n"
        ),
    );
    apply(s, &pod("quiet", "quiet", "busybox", "Never", "true", ""));
    assert_eq!(get(s, "pod/quiet", "{.spec.volumes}"), "");
    assert_eq!(
        get(s, "pod/quiet", "{.spec.containers[0].volumeMounts}"),
        ""
    );
}

/// Runs [`kubectl_script`] in a new pod and returns each section's output by its
/// command line (output and exit code).
fn run_kubectl_pod(s: &Server, name: &str) -> HashMap<String, (String, String)> {
    apply(
        s,
        &pod(name, SA, KUBECTL_IMAGE, "Never", &kubectl_script(), ""),
    );
    wait_for_phase(s, name, &["Succeeded", "Failed"], Duration::from_secs(60));
    let log = s.k(&["-n", NS, "logs", name]);
    let mut sections = HashMap::new();
    for section in log.split("== ").skip(1) {
        let (args, rest) = section.split_once('\n').unwrap_or((section, ""));
        let (output, code) = rest.trim_end().rsplit_once("exit ").unwrap_or((rest, "?"));
        sections.insert(
            args.to_string(),
            (output.trim().to_string(), code.trim().to_string()),
        );
    }
    assert_eq!(sections.len(), 4, "{log}");
    sections
}

fn forbidden(ns: &str) -> String {
    format!(
        "Error from server (Forbidden): pods is forbidden: User \
         \"system:serviceaccount:{NS}:{SA}\" cannot list resource \"pods\" in API group \"\" \
         in the namespace \"{ns}\""
    )
}

/// kubectl in a pod, with only what the pod was given: Forbidden without rights,
/// its namespace's pods once a RoleBinding grants `view` there, and still Forbidden
/// in another namespace.
fn kubectl_in_a_pod_obeys_rbac(s: &Server) {
    let user = format!("system:serviceaccount:{NS}:{SA}");
    let before = run_kubectl_pod(s, "before");
    let section = |m: &HashMap<String, (String, String)>, k: &str| {
        m.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no section {k:?}: {m:?}"))
    };
    for (args, ns) in [
        ("get pods -n incluster -o name", NS),
        ("get pods -o name", NS),
        ("get pods -n incluster-other -o name", OTHER),
    ] {
        assert_eq!(
            section(&before, args),
            (forbidden(ns), "1".into()),
            "{args}"
        );
    }
    // Upstream's SelfSubjectReview names the pod a bound token came from.
    assert_eq!(
        section(&before, WHOAMI),
        (format!("{user}/before"), "0".into())
    );

    s.k(&[
        "-n",
        NS,
        "create",
        "rolebinding",
        "reader-view",
        "--clusterrole=view",
        &format!("--serviceaccount={NS}:{SA}"),
    ]);
    s.wait_until_allowed(&user, "list", "pods", NS);
    let after = run_kubectl_pod(s, "after");
    for args in ["get pods -n incluster -o name", "get pods -o name"] {
        let (output, code) = section(&after, args);
        assert_eq!(code, "0", "{args}: {output}");
        let names: Vec<&str> = output.lines().collect();
        for p in ["pod/after", "pod/before", "pod/nomount", "pod/shell"] {
            assert!(names.contains(&p), "{args}: {p} missing from {output}");
        }
    }
    assert_eq!(
        section(&after, "get pods -n incluster-other -o name"),
        (forbidden(OTHER), "1".into())
    );
    assert_eq!(
        section(&after, WHOAMI),
        (format!("{user}/after"), "0".into())
    );
}

/// The Python client's in-cluster loader (what `load_incluster_config` runs) with
/// copies of the pod's token and CA, from the host: the env vars name the API
/// server's own address, as the pod's name the `kubernetes` Service.
fn python_in_cluster_loader(s: &Server) {
    let dir = s.data_dir.join("python-incluster");
    std::fs::create_dir_all(&dir).expect("python dir");
    for f in ["token", "ca.crt"] {
        let data = exec_ok(s, "shell", &["cat", &format!("{MOUNT}/{f}")]);
        std::fs::write(dir.join(f), data).expect("copy");
    }
    let port = s.https.rsplit(':').next().expect("the API server's port");
    let script = r#"
import json, os, sys
from kubernetes import client
from kubernetes.config.incluster_config import InClusterConfigLoader
token, ca, ns, other = sys.argv[1:5]
cfg = client.Configuration()
InClusterConfigLoader(token_filename=token, cert_filename=ca, environ=os.environ).load_and_set(cfg)
api = client.CoreV1Api(client.ApiClient(cfg))
out = {"host": cfg.host, "pods": sorted(p.metadata.name for p in api.list_namespaced_pod(ns).items)}
try:
    api.list_namespaced_pod(other)
    out["other"] = "allowed"
except client.exceptions.ApiException as e:
    out["other"] = {"status": e.status, "message": json.loads(e.body)["message"]}
print(json.dumps(out))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir.join("token"))
        .arg(dir.join("ca.crt"))
        .args([NS, OTHER])
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", port)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python: {}{}",
        stderr(&out),
        stdout(&out)
    );
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)));
    assert_eq!(v["host"], format!("https://127.0.0.1:{port}"));
    let pods: Vec<&str> = v["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    for p in ["after", "before", "shell"] {
        assert!(pods.contains(&p), "{p} missing from {pods:?}");
    }
    assert_eq!(v["other"]["status"], 403, "{v}");
    assert_eq!(
        v["other"]["message"],
        forbidden(OTHER).trim_start_matches("Error from server (Forbidden): "),
        "{v}"
    );
}
