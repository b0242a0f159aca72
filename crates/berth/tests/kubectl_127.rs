//! kubectl 1.27 and 1.28 against a real `berth server`. Unlike 1.29+, they read
//! `/openapi/v2` in gnostic's protobuf before `apply` (validation, strategic merge patch
//! metadata) and `explain`, and fail without it.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{Server, stderr, stdout};

const KUBECTL_1_27: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.27";
const KUBECTL_1_28: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.28";

const DEPLOY: &str = common::WEB_DEPLOYMENT;

/// Runs the given kubectl binary against `s`, with its own cache dir.
fn kubectl(bin: &str, s: &Server, args: &[&str], stdin: Option<&str>) -> Output {
    let version = bin.rsplit('.').next().unwrap_or("x");
    let mut cmd = Command::new(bin);
    cmd.arg("--kubeconfig").arg(&s.kubeconfig);
    cmd.arg("--cache-dir")
        .arg(s.data_dir.join(format!("kube-cache-{version}")));
    cmd.args(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run kubectl");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("kubectl output")
}

/// kubectl that must succeed; returns stdout.
fn k(bin: &str, s: &Server, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(bin, s, args, stdin);
    assert!(
        out.status.success(),
        "{bin} {args:?} failed: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    stdout(&out)
}

fn installed(bin: &str) -> bool {
    let ok = Path::new(bin).exists();
    if !ok {
        println!("skipping: {bin} is not installed");
    }
    ok
}

/// What the server answers `GET /openapi/v2` with `accept`: (Content-Type, body size).
fn openapi_v2(s: &Server, accept: &str) -> (String, usize) {
    let out = s.curl(&[
        "-s",
        "-o",
        "/dev/null",
        "-H",
        &format!("Accept: {accept}"),
        "-w",
        "%{http_code} %{content_type} %{size_download}",
        &format!("{}/openapi/v2", s.http),
    ]);
    let text = stdout(&out);
    let parts: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(parts.first(), Some(&"200"), "{text}");
    (
        parts.get(1).unwrap_or(&"").to_string(),
        parts.get(2).and_then(|n| n.parse().ok()).unwrap_or(0),
    )
}

#[test]
fn kubectl_1_27_apply_and_explain() {
    if !installed(KUBECTL_1_27) {
        return;
    }
    let s = Server::start("kubectl127");
    let bin = KUBECTL_1_27;

    // Validation on (the default): kubectl downloads /openapi/v2 first.
    let out = k(bin, &s, &["apply", "-f", "-"], Some(DEPLOY));
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let out = k(bin, &s, &["apply", "-f", "-"], Some(DEPLOY));
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");

    // A new image: the strategic merge patch, computed from the schema's merge keys,
    // names the container and leaves its ports alone.
    let changed = DEPLOY.replace("nginx:1.27", "nginx:1.28");
    let out = kubectl(bin, &s, &["apply", "-f", "-", "-v=8"], Some(&changed));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("deployment.apps/web configured"),
        "{}",
        stdout(&out)
    );
    let log = stderr(&out);
    assert!(
        log.contains("GET https://") && log.contains("/openapi/v2"),
        "{log}"
    );
    assert!(
        log.contains(r#""$setElementOrder/containers":[{"name":"nginx"}]"#),
        "{log}"
    );
    assert!(
        !log.contains("error calculating patch from openapi spec"),
        "{log}"
    );
    let d: serde_json::Value =
        serde_json::from_str(&k(bin, &s, &["get", "deploy", "web", "-o", "json"], None))
            .expect("deployment JSON");
    let c = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(c.as_array().map(Vec::len), Some(1), "{c}");
    assert_eq!(c[0]["image"], "nginx:1.28");
    assert_eq!(c[0]["ports"][0]["containerPort"], 80, "{c}");

    let out = k(bin, &s, &["explain", "deployment.spec.replicas"], None);
    assert!(out.contains("replicas <integer>"), "{out}");
    assert!(out.contains("Number of desired pods"), "{out}");
    // The same from the v2 document itself.
    let out = k(
        bin,
        &s,
        &[
            "explain",
            "deployment.spec.replicas",
            "--output=plaintext-openapiv2",
        ],
        None,
    );
    assert!(out.contains("replicas <integer>"), "{out}");
    assert!(out.contains("Number of desired pods"), "{out}");
    let out = k(
        bin,
        &s,
        &[
            "explain",
            "pod.spec.containers",
            "--output=plaintext-openapiv2",
        ],
        None,
    );
    assert!(out.contains("RESOURCE: containers <[]Object>"), "{out}");
    assert!(out.contains("image\t<string>"), "{out}");

    // Content negotiation as upstream: protobuf when asked (answered with the
    // Content-Type spelling Go's mime parser accepts), JSON otherwise.
    let (ct, pb) = openapi_v2(
        &s,
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    );
    assert_eq!(
        ct,
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    let (ct, json) = openapi_v2(&s, "application/json");
    assert_eq!(ct, "application/json");
    assert!(pb > 100_000 && json > pb, "{pb} {json}");
}

#[test]
fn kubectl_1_28_apply_and_explain() {
    if !installed(KUBECTL_1_28) {
        return;
    }
    let s = Server::start("kubectl128");
    let bin = KUBECTL_1_28;
    let out = k(bin, &s, &["apply", "-f", "-"], Some(DEPLOY));
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let out = k(bin, &s, &["apply", "-f", "-"], Some(DEPLOY));
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");
    let out = k(bin, &s, &["explain", "pod"], None);
    assert!(out.contains("KIND:       Pod"), "{out}");
    assert!(out.contains("Pod is a collection of containers"), "{out}");
}
