//! Protobuf responses (`Accept: application/vnd.kubernetes.protobuf`): objects,
//! lists, Status errors and watch streams, as upstream's protobuf serializer and its
//! length-delimited watch framing write them; and kubectl, whose typed clients ask
//! for protobuf first.

mod common;

use berth_api::protobuf;
use common::Server;
use serde_json::{Value, json};

const PB: &str = "application/vnd.kubernetes.protobuf";

struct Reply {
    code: u16,
    content_type: String,
    body: Vec<u8>,
}

/// A request on the plain port with `accept`; the body's raw bytes come back.
fn call(s: &Server, method: &str, path: &str, accept: &str, json_body: Option<&Value>) -> Reply {
    let dir = common::temp_dir("protobuf-responses-body");
    let out_file = dir.join("out");
    let url = format!("{}{}", s.http, path);
    let accept = format!("Accept: {accept}");
    let out_path = out_file.display().to_string();
    let mut args = vec![
        "-s",
        "-X",
        method,
        "-H",
        &accept,
        "-o",
        &out_path,
        "-w",
        "%{http_code} %{content_type}",
        &url,
    ];
    let data = json_body.map(Value::to_string);
    if let Some(d) = &data {
        args.extend(["-H", "Content-Type: application/json", "--data-binary", d]);
    }
    let out = s.curl(&args);
    let meta = String::from_utf8_lossy(&out.stdout).into_owned();
    let (code, content_type) = meta.split_once(' ').unwrap_or((&meta, ""));
    let body = std::fs::read(&out_file).unwrap_or_default();
    let _ = std::fs::remove_dir_all(dir);
    Reply {
        code: code.trim().parse().unwrap_or(0),
        content_type: content_type.trim().to_string(),
        body,
    }
}

fn decoded(r: &Reply) -> Value {
    assert!(
        r.body.starts_with(protobuf::MAGIC),
        "not protobuf ({}): {}",
        r.content_type,
        String::from_utf8_lossy(&r.body)
    );
    protobuf::decode(&r.body).unwrap_or_else(|e| panic!("decode: {e}"))
}

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80}]}]}
            }
        }
    })
}

#[test]
fn objects_lists_errors_and_watches_in_protobuf() {
    // No controllers: the Deployment's resourceVersion must stay the one the POST returned.
    let s = Server::start_with(
        common::temp_dir("protobuf-responses"),
        &["--disable-controller-manager", "--disable-scheduler"],
    );
    let deploys = "/apis/apps/v1/namespaces/default/deployments";
    let (code, body) = s.request(
        "POST",
        deploys,
        "application/json",
        Some(&deployment("web").to_string()),
    );
    assert_eq!(code, 201, "{body}");

    // One object.
    let r = call(&s, "GET", &format!("{deploys}/web"), PB, None);
    assert_eq!(r.code, 200);
    assert_eq!(r.content_type, PB);
    let d = decoded(&r);
    assert_eq!(d["apiVersion"], "apps/v1");
    assert_eq!(d["kind"], "Deployment");
    assert_eq!(d["metadata"]["name"], "web");
    assert_eq!(d["metadata"]["namespace"], "default");
    assert_eq!(
        d["metadata"]["resourceVersion"],
        body["metadata"]["resourceVersion"]
    );
    assert_eq!(d["metadata"]["uid"], body["metadata"]["uid"]);
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    // Defaults survive the trip (strategy, maxSurge as an IntOrString).
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");

    // client-go's typed clients in protobuf mode: `<protobuf>, */*`.
    let r = call(
        &s,
        "GET",
        &format!("{deploys}/web"),
        &format!("{PB}, */*"),
        None,
    );
    assert_eq!(r.content_type, PB);
    assert_eq!(decoded(&r)["metadata"]["name"], "web");
    // JSON first stays JSON.
    let r = call(
        &s,
        "GET",
        &format!("{deploys}/web"),
        &format!("application/json, {PB}"),
        None,
    );
    assert_eq!(r.content_type, "application/json");

    // A list (through the decoding path, not the JSON byte splice).
    let (code, _) = s.request(
        "POST",
        deploys,
        "application/json",
        Some(&deployment("api").to_string()),
    );
    assert_eq!(code, 201);
    let r = call(&s, "GET", deploys, &format!("{PB}, application/json"), None);
    assert_eq!(r.code, 200);
    assert_eq!(r.content_type, PB);
    let list = decoded(&r);
    assert_eq!(list["kind"], "DeploymentList");
    assert_eq!(list["apiVersion"], "apps/v1");
    let names: Vec<&str> = list["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["metadata"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["api", "web"]);
    assert!(
        list["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty()),
        "{list}"
    );
    // An empty list of another kind.
    let r = call(&s, "GET", "/api/v1/namespaces/default/secrets", PB, None);
    let empty = decoded(&r);
    assert_eq!(empty["kind"], "SecretList");

    // The metadata client: PartialObjectMetadataList in protobuf.
    let r = call(
        &s,
        "GET",
        deploys,
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        None,
    );
    assert_eq!(r.code, 200);
    let pom = decoded(&r);
    assert_eq!(pom["kind"], "PartialObjectMetadataList");
    assert_eq!(pom["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(pom["items"][0]["metadata"]["labels"]["app"], "api");
    assert!(pom["items"][0].get("spec").is_none());

    // Tables are JSON only upstream: a protobuf Table clause is passed over...
    let r = call(
        &s,
        "GET",
        deploys,
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        None,
    );
    assert_eq!(r.code, 200);
    let table: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    assert_eq!(
        table["kind"],
        "Table",
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    // ... and alone it is not acceptable (the 406 Status itself is JSON: nothing
    // in that Accept is acceptable for errors either).
    let r = call(
        &s,
        "GET",
        deploys,
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
        None,
    );
    assert_eq!(r.code, 406);
    let status: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    assert_eq!(status["reason"], "NotAcceptable", "{status}");

    // A Status error in protobuf.
    let r = call(&s, "GET", &format!("{deploys}/nope"), PB, None);
    assert_eq!(r.code, 404);
    assert_eq!(r.content_type, PB);
    let st = decoded(&r);
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["apiVersion"], "v1");
    assert_eq!(st["status"], "Failure");
    assert_eq!(st["reason"], "NotFound");
    assert_eq!(st["code"], 404);
    assert_eq!(st["message"], "deployments.apps \"nope\" not found");
    assert_eq!(st["details"]["name"], "nope");
    assert_eq!(st["details"]["group"], "apps");
    assert_eq!(st["details"]["kind"], "deployments");

    // A write answered in protobuf (kubectl create's typed client).
    let r = call(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &format!("{PB}, */*"),
        Some(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm"}, "data": {"k": "v"}})),
    );
    assert_eq!(r.code, 201);
    assert_eq!(r.content_type, PB);
    let cm = decoded(&r);
    assert_eq!(cm["data"]["k"], "v");
    assert!(cm["metadata"]["creationTimestamp"].is_string(), "{cm}");
    // A conflict on a write: Status in protobuf.
    let r = call(
        &s,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        PB,
        Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})),
    );
    assert_eq!(r.code, 409);
    assert_eq!(decoded(&r)["reason"], "AlreadyExists");

    // A short watch: length-prefixed raw WatchEvents, objects in envelopes.
    let r = call(
        &s,
        "GET",
        &format!(
            "{deploys}?watch=true&timeoutSeconds=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        ),
        PB,
        None,
    );
    assert_eq!(r.code, 200);
    assert_eq!(
        r.content_type,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let frames = protobuf::split_watch_frames(&r.body).unwrap_or_else(|e| panic!("frames: {e}"));
    let events: Vec<(String, Value)> = frames
        .iter()
        .map(|f| protobuf::decode_watch_event(f).unwrap_or_else(|e| panic!("event: {e}")))
        .collect();
    let added: Vec<&str> = events
        .iter()
        .filter(|(t, _)| t == "ADDED")
        .filter_map(|(_, o)| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(added, ["api", "web"], "{events:?}");
    for (t, o) in &events {
        assert_eq!(o["kind"], "Deployment", "{t}: {o}");
    }
    let (last_type, bookmark) = events.last().cloned().unwrap_or_default();
    assert_eq!(last_type, "BOOKMARK", "{events:?}");
    assert_eq!(
        bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    // A watch from the list's revision sees the change made since.
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let (code, _) = s.request(
        "DELETE",
        &format!("{deploys}/api"),
        "application/json",
        None,
    );
    assert_eq!(code, 200);
    let r = call(
        &s,
        "GET",
        &format!("{deploys}?watch=true&timeoutSeconds=1&resourceVersion={rv}"),
        &format!("{PB}, application/json"),
        None,
    );
    let frames = protobuf::split_watch_frames(&r.body).unwrap_or_else(|e| panic!("frames: {e}"));
    let events: Vec<(String, Value)> = frames
        .iter()
        .filter_map(|f| protobuf::decode_watch_event(f).ok())
        .collect();
    // The deployment controller also writes status meanwhile: MODIFIED events may come first.
    assert!(
        events
            .iter()
            .all(|(t, _)| t == "MODIFIED" || t == "DELETED"),
        "{events:?}"
    );
    let deleted: Vec<&(String, Value)> = events.iter().filter(|(t, _)| t == "DELETED").collect();
    assert_eq!(deleted.len(), 1, "{events:?}");
    assert_eq!(deleted[0].1["metadata"]["name"], "api");
}

#[test]
fn kubectl_typed_requests_work_with_protobuf_replies() {
    let s = Server::start("protobuf-responses-kubectl");
    // These kubectl commands use typed clients that send and accept protobuf.
    s.k(&["create", "namespace", "team"]);
    let out = s.kubectl(&[
        "-v=8",
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=2",
        "-n",
        "team",
    ]);
    let log = common::stderr(&out);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("Response Body")
            || log.contains("Accept: application/vnd.kubernetes.protobuf"),
        "{log}"
    );
    assert!(common::stdout(&out).contains("deployment.apps/web created"));
    s.k(&[
        "create",
        "configmap",
        "c",
        "--from-literal=a=b",
        "-n",
        "team",
    ]);
    s.k(&[
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=p=q",
        "-n",
        "team",
    ]);
    // A second create is an AlreadyExists Status, which kubectl must decode.
    let out = s.kubectl(&[
        "create",
        "configmap",
        "c",
        "--from-literal=a=b",
        "-n",
        "team",
    ]);
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains("configmaps \"c\" already exists"),
        "{}",
        common::stderr(&out)
    );
    let out = s.k(&[
        "get",
        "deploy",
        "web",
        "-n",
        "team",
        "-o",
        "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}",
    ]);
    assert_eq!(out, "2 nginx:1.27");
    // `rollout status`, `scale` and `describe` read through typed clients as well.
    s.k(&["scale", "deploy", "web", "--replicas=3", "-n", "team"]);
    let out = s.k(&["describe", "deploy", "web", "-n", "team"]);
    assert!(out.contains("Replicas:"), "{out}");
    let out = s.k(&["get", "cm", "c", "-n", "team", "-o", "jsonpath={.data.a}"]);
    assert_eq!(out, "b");

    // `kubectl logs deploy/x` waits for a running pod through a protobuf list and
    // watch (`;stream=watch`): it gets past the wait only by decoding the events.
    let logs = std::process::Command::new(common::kubectl_path())
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .arg("--cache-dir")
        .arg(s.data_dir.join("kube-cache"))
        .args([
            "logs",
            "deploy/web",
            "-n",
            "team",
            "--pod-running-timeout=30s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kubectl logs");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
    let (code, body) = s.request(
        "POST",
        "/api/v1/namespaces/team/pods",
        "application/json",
        Some(&pod.to_string()),
    );
    assert_eq!(code, 201, "{body}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let running = json!({"status": {"phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0,
            "image": "nginx:1.27", "imageID": "", "started": true,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}});
    let (code, body) = s.request(
        "PATCH",
        "/api/v1/namespaces/team/pods/web-1/status",
        "application/merge-patch+json",
        Some(&running.to_string()),
    );
    assert_eq!(code, 200, "{body}");
    let out = logs.wait_with_output().expect("kubectl logs output");
    // No node here: after the wait, the log request of a pod without a node is
    // an empty stream, as upstream answers it.
    assert!(
        out.status.success() && common::stdout(&out).is_empty(),
        "{:?} {} {}",
        out.status,
        common::stdout(&out),
        common::stderr(&out)
    );
    assert!(
        common::stderr(&out).contains("using pod/"),
        "{}",
        common::stderr(&out)
    );
}
