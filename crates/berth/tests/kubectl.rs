//! Real kubectl against a real `berth server` (HTTPS, client certificate).

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Server, stderr, stdout};

fn deploy_and_svc() -> String {
    format!("{}---\n{}", common::WEB_DEPLOYMENT, common::WEB_SERVICE)
}

#[test]
fn discovery_version_and_fresh_cluster() {
    let s = Server::start("discovery");
    let v = s.k(&["version", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&v).unwrap();
    assert_eq!(v["serverVersion"]["major"], "1");
    assert_eq!(v["serverVersion"]["minor"], "33");

    let res = s.k(&["api-resources"]);
    let header = res.lines().next().unwrap();
    for col in ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"] {
        assert!(header.contains(col), "{header}");
    }
    let deploy = res
        .lines()
        .find(|l| l.starts_with("deployments "))
        .expect("deployments listed");
    assert!(
        deploy.contains("deploy") && deploy.contains("apps/v1") && deploy.contains("Deployment"),
        "{deploy}"
    );
    assert!(
        res.lines()
            .any(|l| l.starts_with("pods ") && l.contains(" po ")),
        "{res}"
    );
    assert!(
        res.lines()
            .any(|l| l.starts_with("horizontalpodautoscalers ") && l.contains("autoscaling/v2")),
        "{res}"
    );

    let ns = s.k(&["get", "ns"]);
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            ns.lines().any(|l| l.starts_with(n) && l.contains("Active")),
            "{ns}"
        );
    }
    // A fresh cluster holds the API server's own Service and, as k3s's bundled
    // metrics-server, the metrics server's selector-less one.
    let all = s.kubectl(&["get", "all", "-A"]);
    assert!(all.status.success(), "{}", stderr(&all));
    let rows_text = stdout(&all);
    let rows: Vec<&str> = rows_text.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{rows_text}");
    let metrics: Vec<&str> = rows[1].split_whitespace().collect();
    assert_eq!(
        [metrics[0], metrics[1], metrics[2], metrics[4], metrics[5]],
        [
            "kube-system",
            "service/metrics-server",
            "ClusterIP",
            "<none>",
            "443/TCP"
        ],
        "{rows_text}"
    );
    let cols: Vec<&str> = rows[0].split_whitespace().collect();
    assert_eq!(
        &cols[..6],
        [
            "default",
            "service/kubernetes",
            "ClusterIP",
            "10.43.0.1",
            "<none>",
            "443/TCP"
        ],
        "{rows_text}"
    );

    let ci = s.kubectl(&["cluster-info"]);
    assert!(ci.status.success(), "{}", stderr(&ci));
    assert!(
        stdout(&ci).contains("is running at https://127.0.0.1:"),
        "{}",
        stdout(&ci)
    );
}

#[test]
fn apply_get_describe_label_scale_delete() {
    let s = Server::start("apply");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&deploy_and_svc()));
    assert!(out.status.success(), "apply failed: {}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("deployment.apps/web created") && text.contains("service/web created"),
        "{text}"
    );

    // Re-applying the same file changes nothing.
    let again = s.kubectl_stdin(&["apply", "-f", "-"], Some(&deploy_and_svc()));
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stdout(&again).contains("deployment.apps/web unchanged"),
        "{}",
        stdout(&again)
    );

    let get = s.k(&["get", "deploy,svc"]);
    let lines: Vec<&str> = get.lines().collect();
    assert!(
        lines.iter().any(|l| l.starts_with("NAME")
            && l.contains("READY")
            && l.contains("UP-TO-DATE")
            && l.contains("AVAILABLE")
            && l.contains("AGE")),
        "{get}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("deployment.apps/web") && l.contains("0/2")),
        "{get}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("TYPE") && l.contains("CLUSTER-IP") && l.contains("PORT(S)")),
        "{get}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("service/web") && l.contains("80/TCP")),
        "{get}"
    );

    let wide = s.k(&["get", "deploy", "web", "-o", "wide"]);
    assert!(
        wide.contains("CONTAINERS") && wide.contains("nginx:1.27") && wide.contains("app=web"),
        "{wide}"
    );

    // -o yaml shows defaults and round-trips through replace.
    let yaml = s.k(&["get", "deploy", "web", "-o", "yaml"]);
    for want in [
        "revisionHistoryLimit: 10",
        "progressDeadlineSeconds: 600",
        "maxSurge: 25%",
        "terminationMessagePath: /dev/termination-log",
        "imagePullPolicy: IfNotPresent",
        "generation: 1",
        "uid:",
    ] {
        assert!(yaml.contains(want), "missing {want} in\n{yaml}");
    }
    let replaced = s.kubectl_stdin(&["replace", "-f", "-"], Some(&yaml));
    assert!(replaced.status.success(), "{}", stderr(&replaced));

    let desc = s.k(&["describe", "deploy", "web"]);
    assert!(
        desc.contains("Name:") && desc.contains("web") && desc.contains("Replicas:"),
        "{desc}"
    );

    s.k(&["label", "deploy", "web", "tier=frontend"]);
    s.k(&["annotate", "deploy", "web", "note=hello"]);
    let labels = s.k(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.metadata.labels.tier} {.metadata.annotations.note}",
    ]);
    assert_eq!(labels, "frontend hello");
    let sel = s.k(&["get", "deploy", "-l", "tier=frontend", "-o", "name"]);
    assert_eq!(sel.trim(), "deployment.apps/web");
    let none = s.kubectl(&["get", "deploy", "-l", "tier=backend"]);
    assert!(
        stderr(&none).contains("No resources found in default namespace."),
        "{}",
        stderr(&none)
    );

    let scaled = s.k(&["scale", "deploy", "web", "--replicas=3"]);
    assert!(scaled.contains("deployment.apps/web scaled"), "{scaled}");
    let r = s.k(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.spec.replicas} {.metadata.generation}",
    ]);
    assert_eq!(r, "3 2", "scale must bump generation once");

    // kubectl set image is a strategic merge patch: the container keeps its ports.
    s.k(&["set", "image", "deploy/web", "nginx=nginx:1.28"]);
    let c = s.k(&["get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}"]);
    assert_eq!(c, "nginx:1.28 80");

    let del = s.k(&["delete", "deploy", "web"]);
    assert!(del.contains("deployment.apps \"web\" deleted"), "{del}");
    let gone = s.kubectl(&["get", "deploy", "web"]);
    assert!(!gone.status.success());
    assert!(
        stderr(&gone).contains("Error from server (NotFound): deployments.apps \"web\" not found"),
        "{}",
        stderr(&gone)
    );
}

#[test]
fn get_watch_streams_changes() {
    let s = Server::start("watch");
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\ndata:\n  a: b\n";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(cm));
    assert!(out.status.success(), "{}", stderr(&out));

    let mut watch = std::process::Command::new(common::kubectl_path())
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(["get", "cm", "-w", "--request-timeout=30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = BufReader::new(watch.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in reader.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The initial state, then a change made by another client.
    let first = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(first.starts_with("NAME"), "{first}");
    let row = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(row.starts_with("c1 "), "{row}");
    std::thread::sleep(Duration::from_millis(300));
    // (`kubectl create configmap` sends protobuf, which is issue 3's work.)
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c2\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
            if l.starts_with("c2 ") {
                seen.push(l);
                break;
            }
            seen.push(l);
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        seen.iter().any(|l| l.starts_with("c2 ")),
        "watch did not stream the new configmap: {seen:?}"
    );
}

#[test]
fn bad_input_gets_clear_errors() {
    let s = Server::start("badinput");
    let cases: &[(&str, &str, &str, &str, u16, &str)] = &[
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            "{not json",
            400,
            "json parse error",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/yaml",
            "a: [",
            400,
            "YAML",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            r#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}"#,
            400,
            "does not match the expected API version",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#,
            422,
            "RFC 1123",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
            "application/json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"dta":{}}"#,
            400,
            "unknown field \"dta\"",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
            "application/json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","name":"y"}}"#,
            400,
            "strict decoding error: duplicate field \"metadata.name\"",
        ),
        (
            "POST",
            "/api/v1/namespaces/nope/configmaps",
            "application/json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}"#,
            404,
            "namespaces \"nope\" not found",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?labelSelector=a%20in%20(",
            "application/json",
            "",
            400,
            "",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?fieldSelector=spec.frobnicate%3Dx",
            "application/json",
            "",
            400,
            "field label not supported",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?limit=1&continue=garbage",
            "application/json",
            "",
            400,
            "continue",
        ),
        (
            "GET",
            "/api/v1/frobs",
            "application/json",
            "",
            404,
            "could not find the requested resource",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/missing",
            "application/merge-patch+json",
            "{}",
            404,
            "configmaps \"missing\" not found",
        ),
    ];
    for (method, path, ct, body, code, msg) in cases {
        let (got, v) = s.request(
            method,
            path,
            ct,
            if body.is_empty() { None } else { Some(body) },
        );
        assert_eq!(got, *code, "{method} {path}: {v}");
        assert_eq!(v["kind"], "Status", "{method} {path}: {v}");
        assert_eq!(v["code"], *code as i64, "{v}");
        assert!(
            v["message"].as_str().unwrap_or("").contains(msg),
            "{method} {path}: {v}"
        );
    }
    // A body over 3 MiB is refused with 413.
    let big = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big"}},"data":{{"a":"{}"}}}}"#,
        "x".repeat(3 * 1024 * 1024 + 10)
    );
    let path = s.data_dir.join("big.json");
    std::fs::write(&path, big).unwrap();
    let code = common::post_code(
        &s.http,
        "/api/v1/namespaces/default/configmaps",
        &format!("@{}", path.display()),
    );
    assert_eq!(code, "413");
    // Still serving.
    let (code, _) = s.request("GET", "/api/v1/namespaces", "", None);
    assert_eq!(code, 200);
    // Anonymous HTTPS requests are system:anonymous, whom RBAC allows only
    // health and version (403 elsewhere, as upstream); a bad token is 401.
    let anon = s.curl(&[
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("{}/api/v1/pods", s.https),
    ]);
    assert_eq!(stdout(&anon), "403");
    let bad = s.curl(&[
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        "Authorization: Bearer not-a-token",
        &format!("{}/version", s.https),
    ]);
    assert_eq!(stdout(&bad), "401");
    let ver = s.curl(&[
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("{}/version", s.https),
    ]);
    assert_eq!(stdout(&ver), "200");
}

#[test]
fn namespace_deletion_removes_its_content() {
    let s = Server::start("nsdelete");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: team\ndata:\n  a: b\n"));
    assert!(out.status.success(), "{}", stderr(&out));
    let fin = s.k(&[
        "get",
        "ns",
        "team",
        "-o",
        "jsonpath={.spec.finalizers} {.metadata.labels.kubernetes\\.io/metadata\\.name}",
    ]);
    assert_eq!(fin, r#"["kubernetes"] team"#);
    // kubectl waits until the namespace is really gone.
    let del = s.k(&["delete", "ns", "team", "--timeout=60s"]);
    assert!(del.contains("namespace \"team\" deleted"), "{del}");
    let gone = s.kubectl(&["get", "ns", "team"]);
    assert!(
        stderr(&gone).contains("namespaces \"team\" not found"),
        "{}",
        stderr(&gone)
    );
    let (code, list) = s.request("GET", "/api/v1/namespaces/team/configmaps", "", None);
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "{list}");
}

#[test]
fn etcd_backend_serves_kubectl() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let etcd = rt
        .block_on(berth_store::etcd_process::EtcdProcess::start())
        .expect("start a real etcd (Debian's etcd-server)");
    let s = Server::start_with(
        common::temp_dir("etcd"),
        &["--datastore-endpoint", etcd.endpoint()],
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&deploy_and_svc()));
    assert!(out.status.success(), "{}", stderr(&out));
    s.k(&["scale", "deploy", "web", "--replicas=4"]);
    let r = s.k(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(r, "4");
    // State lives in etcd: a new server process on a fresh data dir sees it.
    let s2 = Server::start_with(
        common::temp_dir("etcd2"),
        &["--datastore-endpoint", etcd.endpoint()],
    );
    let r = s2.k(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(r, "4");
    drop(s2);
    drop(s);
    drop(etcd);
}

/// Priority admission as upstream: built-in system classes, a named class sets
/// `priority`, a missing class or a conflicting value is Forbidden.
#[test]
fn priority_classes_and_admission() {
    let s = Server::start_with(
        common::temp_dir("prio"),
        &["--disable-scheduler", "--disable-controller-manager"],
    );
    // Without the controller-manager nothing makes the `default` ServiceAccount,
    // which ServiceAccount admission needs before any pod, as upstream.
    s.k(&["create", "serviceaccount", "default"]);
    let pcs = s.k(&["get", "priorityclasses", "-o", "name"]);
    for pc in ["system-cluster-critical", "system-node-critical"] {
        assert!(
            pcs.contains(&format!("priorityclass.scheduling.k8s.io/{pc}")),
            "{pcs}"
        );
    }
    s.k(&["create", "priorityclass", "high", "--value=1000"]);
    let pod = |name: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{extra}  containers:\n  - name: c\n    image: busybox\n"
        )
    };
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&pod("hi", "  priorityClassName: high\n")),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        s.k(&["get", "pod", "hi", "-o", "jsonpath={.spec.priority}"]),
        "1000"
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&pod("none", "")));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        s.k(&["get", "pod", "none", "-o", "jsonpath={.spec.priority}"]),
        "0"
    );
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&pod("bad", "  priorityClassName: nope\n")),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains("pods \"bad\" is forbidden: no PriorityClass with name nope was found"),
        "{}",
        stderr(&out)
    );
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(&pod("lie", "  priorityClassName: high\n  priority: 5\n")),
    );
    assert!(
        stderr(&out).contains("the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"),
        "{}",
        stderr(&out)
    );
}
