//! The audit log end to end: `berth server --audit-policy-file ... --audit-log-path ...`
//! with a policy logging Secrets at Metadata and pods at RequestResponse, a real
//! kubectl session, and the log read back event by event, field by field
//! (upstream's audit.k8s.io/v1 JSON lines). No node agent: the pod stays Pending.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Server, stderr, stdout, temp_dir, wait_until};
use serde_json::Value;

const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
rules:
# Secrets: who and what, never their data.
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets"]
# Pods: the request and response bodies too (not their subresources).
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods"]
"#;

fn read_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The events of one request, by audit ID, in log order.
fn by_id(events: &[Value]) -> BTreeMap<String, Vec<Value>> {
    let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in events {
        m.entry(s(e, "/auditID").to_string())
            .or_default()
            .push(e.clone());
    }
    m
}

/// The one kubectl request with this verb on this resource (and name, if given):
/// all its stages.
fn kubectl_request(events: &[Value], verb: &str, resource: &str, name: &str) -> Vec<Value> {
    let found: Vec<Vec<Value>> = by_id(events)
        .into_values()
        .filter(|evs| {
            evs.iter().any(|e| {
                s(e, "/userAgent").starts_with("kubectl")
                    && s(e, "/verb") == verb
                    && s(e, "/objectRef/resource") == resource
                    && (name.is_empty() || s(e, "/objectRef/name") == name)
            })
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one kubectl {verb} {resource} {name}: {found:#?}"
    );
    found.into_iter().next().unwrap_or_default()
}

fn stages(evs: &[Value]) -> Vec<&str> {
    evs.iter().map(|e| s(e, "/stage")).collect()
}

#[test]
fn kubectl_session_is_audited_as_the_policy_says() {
    let dir = temp_dir("audit");
    let policy = dir.join("policy.yaml");
    std::fs::write(&policy, POLICY).expect("write the policy");
    let log = dir.join("audit").join("audit.log");
    let (policy_arg, log_arg) = (policy.display().to_string(), log.display().to_string());
    let srv = Server::start_with(
        dir.clone(),
        &[
            "--audit-policy-file",
            &policy_arg,
            "--audit-log-path",
            &log_arg,
        ],
    );
    let me = srv.k(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert!(!me.is_empty());
    srv.wait_for_default_service_account("default");

    // The session.
    srv.k(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    srv.k(&["get", "secret", "s1", "-o", "json"]);
    srv.k(&["run", "web", "--image=busybox", "--restart=Never"]);
    srv.k(&["get", "pods"]);
    let forbidden = srv.kubectl(&["get", "secrets", "--as=alice"]);
    assert!(!forbidden.status.success(), "alice has no role");
    assert!(
        stderr(&forbidden).contains("Forbidden"),
        "{}",
        stderr(&forbidden)
    );
    // A watch the server ends after a second; a client's own Audit-ID.
    let watch = srv.curl(&[
        "-s",
        "-o",
        "/dev/null",
        &format!(
            "{}/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1",
            srv.http
        ),
    ]);
    assert!(watch.status.success());
    let traced = srv.curl(&[
        "-si",
        "-H",
        "Audit-ID: e2e-trace-1",
        &format!("{}/api/v1/namespaces/default/secrets/s1", srv.http),
    ]);
    let traced = stdout(&traced).to_ascii_lowercase();
    assert!(traced.contains("\naudit-id: e2e-trace-1\r\n"), "{traced}");
    let plain = srv.curl(&[
        "-si",
        &format!("{}/api/v1/namespaces/default/configmaps", srv.http),
    ]);
    let plain = stdout(&plain).to_ascii_lowercase();
    let id = plain
        .lines()
        .find_map(|l| l.strip_prefix("audit-id: "))
        .map(str::trim)
        .unwrap_or("")
        .to_string();
    assert_eq!(
        id.len(),
        36,
        "every response has an Audit-ID, audited or not: {plain}"
    );

    // Lines reach the file once the writer's queue is drained.
    wait_until(Duration::from_secs(10), "the session's events", || {
        let events = read_log(&log);
        events.iter().any(|e| s(e, "/auditID") == "e2e-trace-1")
            && events
                .iter()
                .any(|e| s(e, "/verb") == "watch" && s(e, "/stage") == "ResponseComplete")
    });
    let events = read_log(&log);
    for e in &events {
        assert_eq!(s(e, "/kind"), "Event");
        assert_eq!(s(e, "/apiVersion"), "audit.k8s.io/v1");
        // Level None is the default: only the policy's resources appear.
        let resource = s(e, "/objectRef/resource");
        assert!(
            resource == "secrets" || resource == "pods",
            "not in the policy: {e}"
        );
        assert!(
            s(e, "/requestReceivedTimestamp").len() == "2026-12-02T19:04:40.123456Z".len()
                && s(e, "/stageTimestamp").ends_with('Z'),
            "microsecond timestamps: {e}"
        );
    }

    let common = |evs: &[Value], level: &str, verb: &str, name: &str, code: i64| {
        let want_stages = ["RequestReceived", "ResponseComplete"];
        assert_eq!(stages(evs), want_stages, "{evs:#?}");
        let id = s(&evs[0], "/auditID");
        assert_eq!(id.len(), 36, "a UUID");
        for e in evs {
            assert_eq!(s(e, "/auditID"), id, "one ID across stages");
            assert_eq!(s(e, "/level"), level);
            assert_eq!(s(e, "/verb"), verb);
            assert_eq!(s(e, "/user/username"), me);
            assert_eq!(s(e, "/objectRef/namespace"), "default");
            assert_eq!(s(e, "/objectRef/apiVersion"), "v1");
            assert!(e["objectRef"].get("apiGroup").is_none(), "core group: {e}");
            assert_eq!(e["sourceIPs"][0], "127.0.0.1");
        }
        let done = &evs[1];
        assert_eq!(s(done, "/objectRef/name"), name);
        assert_eq!(done["responseStatus"]["code"], code);
        assert_eq!(
            s(done, "/annotations/authorization.k8s.io~1decision"),
            "allow"
        );
        assert!(evs[0].get("responseStatus").is_none());
        done.clone()
    };

    // Secrets at Metadata: no bodies, whatever the verb.
    let create = kubectl_request(&events, "create", "secrets", "");
    let done = common(&create, "Metadata", "create", "s1", 201);
    assert_eq!(
        s(&create[0], "/objectRef/name"),
        "",
        "the name comes from the body"
    );
    assert!(
        s(&done, "/requestURI").starts_with("/api/v1/namespaces/default/secrets?"),
        "{done}"
    );
    let get = kubectl_request(&events, "get", "secrets", "s1");
    let done = common(&get, "Metadata", "get", "s1", 200);
    assert_eq!(
        s(&done, "/requestURI"),
        "/api/v1/namespaces/default/secrets/s1"
    );
    for e in create.iter().chain(&get) {
        assert!(
            e.get("requestObject").is_none() && e.get("responseObject").is_none(),
            "{e}"
        );
        assert!(
            !e.to_string().contains("aHVudGVyMg"),
            "the secret's data is never logged"
        );
    }

    // Pods at RequestResponse: what was sent and what came back.
    let run = kubectl_request(&events, "create", "pods", "");
    let done = common(&run, "RequestResponse", "create", "web", 201);
    assert_eq!(s(&done, "/requestObject/kind"), "Pod");
    assert_eq!(s(&done, "/requestObject/metadata/name"), "web");
    assert_eq!(
        s(&done, "/requestObject/spec/containers/0/image"),
        "busybox"
    );
    assert_eq!(s(&done, "/responseObject/kind"), "Pod");
    assert!(!s(&done, "/responseObject/metadata/uid").is_empty());
    assert_eq!(s(&done, "/responseObject/status/phase"), "Pending");
    let list = kubectl_request(&events, "list", "pods", "");
    let done = common(&list, "RequestResponse", "list", "", 200);
    assert!(done.get("requestObject").is_none());
    // kubectl asks for a Table, and the Table is what is logged, as upstream.
    assert_eq!(s(&done, "/responseObject/kind"), "Table");
    assert_eq!(
        s(&done, "/responseObject/rows/0/object/metadata/name"),
        "web"
    );

    // The forbidden list: the policy saw the authenticated user; the
    // impersonated one and upstream's 403 are recorded.
    let denied = kubectl_request(&events, "list", "secrets", "");
    assert_eq!(stages(&denied), ["RequestReceived", "ResponseComplete"]);
    let done = &denied[1];
    assert_eq!(s(done, "/user/username"), me);
    assert_eq!(s(done, "/impersonatedUser/username"), "alice");
    assert_eq!(done["responseStatus"]["code"], 403);
    assert_eq!(s(done, "/responseStatus/status"), "Failure");
    assert_eq!(s(done, "/responseStatus/reason"), "Forbidden");
    assert_eq!(
        s(done, "/responseStatus/message"),
        "secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""
    );
    assert_eq!(
        s(done, "/annotations/authorization.k8s.io~1decision"),
        "forbid"
    );
    assert!(
        done["annotations"]
            .get("authorization.k8s.io/reason")
            .is_some()
    );

    // The watch is long-running: its response starts, then completes.
    let watches: Vec<Vec<Value>> = by_id(&events)
        .into_values()
        .filter(|evs| {
            s(&evs[0], "/verb") == "watch" && s(&evs[0], "/userAgent").starts_with("curl")
        })
        .collect();
    assert_eq!(watches.len(), 1, "{watches:#?}");
    assert_eq!(
        stages(&watches[0]),
        ["RequestReceived", "ResponseStarted", "ResponseComplete"]
    );
    assert_eq!(watches[0][1]["responseStatus"]["code"], 200);
    assert_eq!(
        s(&watches[0][2], "/requestURI"),
        "/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1"
    );

    // The client's Audit-ID is the event's.
    let traced: Vec<&Value> = events
        .iter()
        .filter(|e| s(e, "/auditID") == "e2e-trace-1")
        .collect();
    assert_eq!(traced.len(), 2);
    assert_eq!(s(traced[1], "/objectRef/name"), "s1");
    // The configmap list was not audited (level None), but had its ID.
    assert!(events.iter().all(|e| s(e, "/auditID") != id));
}

/// A bad policy or log stops `berth server` before it serves, with upstream's message.
#[test]
fn bad_audit_configuration_is_a_startup_error() {
    let dir = temp_dir("audit-bad");
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n",
    )
    .expect("write");
    let blocker = dir.join("not-a-dir");
    std::fs::write(&blocker, "").expect("write");
    let policy_arg = format!("--audit-policy-file={}", policy.display());
    let good = dir.join("good.yaml");
    std::fs::write(&good, POLICY).expect("write");
    let good_arg = format!("--audit-policy-file={}", good.display());
    let cases: [(Vec<String>, String); 3] = [
        (
            vec![
                policy_arg.clone(),
                format!("--audit-log-path={}", dir.join("a.log").display()),
            ],
            format!(
                "loading audit policy file: rules[0].level: Unsupported value: \"Everything\": supported values: \"None\", \"Metadata\", \"Request\", \"RequestResponse\": from file {}",
                policy.display()
            ),
        ),
        (
            vec![
                good_arg,
                format!("--audit-log-path={}", blocker.join("audit.log").display()),
            ],
            "ensureLogFile:".to_string(),
        ),
        (
            vec!["--audit-log-maxage=-1".to_string()],
            "-1 can't be a negative number".to_string(),
        ),
    ];
    for (args, want) in cases {
        let mut child = Command::new(env!("CARGO_BIN_EXE_berth"))
            .args([
                "server",
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                "0",
            ])
            .args([
                "--disable-agent",
                "--disable-ingress",
                "--disable-dns",
                "--data-dir",
            ])
            .arg(dir.join("data"))
            .args(&args)
            .env("BERTH_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start berth server");
        let mut exited = None;
        for _ in 0..300 {
            if let Some(st) = child.try_wait().expect("wait") {
                exited = Some(st);
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let Some(status) = exited else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("berth server {args:?} kept running");
        };
        let out = child.wait_with_output().expect("output");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!status.success(), "{args:?}");
        assert!(err.contains(&want), "{args:?}: want {want:?} in:\n{err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `--audit-log-path -`: the events are standard output's lines.
#[test]
fn events_go_to_stdout_with_a_dash() {
    use std::io::{BufRead, BufReader};
    let dir = temp_dir("audit-stdout");
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  nonResourceURLs: [\"/version\"]\n",
    )
    .expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args([
            "server",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            "0",
        ])
        .args([
            "--insecure-port",
            "0",
            "--disable-agent",
            "--disable-ingress",
        ])
        .args([
            "--disable-dns",
            "--disable-scheduler",
            "--disable-controller-manager",
        ])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg(format!("--audit-policy-file={}", policy.display()))
        .arg("--audit-log-path=-")
        .env("BERTH_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start berth server");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut http = String::new();
    for line in lines.by_ref() {
        let line = line.expect("line");
        if let Some(a) = line.strip_prefix("Plain HTTP (trusted, loopback) at ") {
            http = a.trim().to_string();
            break;
        }
    }
    assert!(!http.is_empty(), "berth server did not start");
    let out = Command::new("curl")
        .args(["-s", "-H", "Audit-ID: stdout-1", &format!("{http}/version")])
        .output()
        .expect("curl");
    assert!(out.status.success());
    // The reader stops at the event (or at EOF if the server died).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && s(&v, "/auditID") == "stdout-1"
            {
                let _ = tx.send(v);
            }
        }
    });
    let received = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("RequestReceived on stdout");
    let complete = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("ResponseComplete on stdout");
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        (s(&received, "/stage"), s(&complete, "/stage")),
        ("RequestReceived", "ResponseComplete")
    );
    assert_eq!(s(&complete, "/verb"), "get");
    assert_eq!(s(&complete, "/requestURI"), "/version");
    assert_eq!(complete["responseStatus"]["code"], 200);
    assert!(complete.get("objectRef").is_none());
}
