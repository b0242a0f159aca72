//! The request path under hostile or heavy input: the in-flight limit, bodies
//! nested past any sane depth, YAML alias bombs, huge selectors. Every answer
//! is a clear 4xx (or upstream's 429), never a panic, and the server keeps serving.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Server;

fn metric(s: &Server, line_prefix: &str) -> Option<f64> {
    let out = s.curl(&["-s", &format!("{}/metrics", s.http)]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A POST as `token` whose body never comes until the returned child's stdin
/// is closed: it holds a slot of the mutating pool meanwhile.
fn stalled_post(s: &Server, token: &str) -> std::process::Child {
    Command::new("curl")
        .args([
            "-sk",
            "-X",
            "POST",
            "-T",
            "-",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Content-Type: application/json"])
        .arg(format!("{}/api/v1/namespaces/default/configmaps", s.https))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl")
}

#[test]
fn the_in_flight_limit_answers_429_with_retry_after_and_spares_system_masters() {
    let s = Server::start_with(
        common::temp_dir("inflight"),
        &["--max-mutating-requests-inflight=1"],
    );
    s.k(&[
        "create",
        "rolebinding",
        "sa-edit",
        "--clusterrole=edit",
        "--serviceaccount=default:default",
    ]);
    s.wait_for_default_service_account("default");
    // `edit` is an aggregated ClusterRole: its rules arrive when the
    // clusterrole-aggregation controller has run, shortly after start.
    s.wait_until_allowed(
        "system:serviceaccount:default:default",
        "create",
        "configmaps",
        "default",
    );
    let token = s.k(&["create", "token", "default"]);
    let token = token.trim();
    let mut holder = stalled_post(&s, token);
    let mutating = r#"apiserver_current_inflight_requests{request_kind="mutating"}"#;
    common::wait_until(
        Duration::from_secs(10),
        "the stalled POST holds its slot",
        || metric(&s, mutating) == Some(1.0),
    );

    // A second write by an ordinary user is refused at once, as upstream.
    // (The server's own components are ordinary users too, so they may be
    // refused meanwhile: the dropped count grows by at least this one.)
    let dropped = r#"apiserver_dropped_requests_total{request_kind="mutating"}"#;
    let dropped_before = metric(&s, dropped).unwrap_or(0.0);
    let out = s.curl(&[
        "-sk",
        "-i",
        "-X",
        "POST",
        "-H",
        &format!("Authorization: Bearer {token}"),
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"second"}}"#,
        &format!("{}/api/v1/namespaces/default/configmaps", s.https),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(
        text.starts_with("http/2 429") || text.starts_with("http/1.1 429"),
        "{text} {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("\nretry-after: 1\r"), "{text}");
    assert!(
        text.ends_with("too many requests, please try again later.\n"),
        "{text}"
    );
    // Reads have their own pool.
    let out = s.curl(&[
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        &format!("Authorization: Bearer {token}"),
        &format!("{}/api/v1/namespaces/default/configmaps", s.https),
    ]);
    let code = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(code, "200");
    // The admin (system:masters) is served even with the pool full.
    s.k(&["create", "configmap", "by-admin", "--from-literal=a=b"]);
    let dropped_after = metric(&s, dropped).unwrap_or(0.0);
    assert!(
        dropped_after >= dropped_before + 1.0,
        "dropped {dropped_before} -> {dropped_after}"
    );

    // The body ends (empty): the first request is answered, its slot freed.
    drop(holder.stdin.take());
    let mut code = String::new();
    holder
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut code)
        .expect("read");
    let _ = holder.wait();
    assert!(
        code.starts_with('4'),
        "an empty body is a client error: {code}"
    );
    common::wait_until(Duration::from_secs(10), "the slot is free", || {
        metric(&s, mutating) == Some(0.0)
    });
    s.k(&[
        "--token",
        token,
        "create",
        "configmap",
        "third",
        "--from-literal=a=b",
    ]);
}

#[test]
fn hostile_bodies_and_selectors_get_clear_errors() {
    let s = Server::start("hostile");
    let cms = "/api/v1/namespaces/default/configmaps";
    let deep = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));

    // JSON nested past the decoder's depth: 400, not a stack overflow.
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep"}},"x":{}}}"#,
        deep(200_000)
    );
    let (code, status) = s.request("POST", cms, "application/json", Some(&body));
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains("recursion limit"),
        "{status}"
    );

    // The same in YAML, and through server-side apply.
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\nx: {}\n",
        deep(200_000)
    );
    let (code, status) = s.request("POST", cms, "application/yaml", Some(&yaml));
    assert_eq!(code, 400, "{status}");
    let (code, status) = s.request(
        "PATCH",
        &format!("{cms}/deep?fieldManager=t"),
        "application/apply-patch+yaml",
        Some(&yaml),
    );
    assert_eq!(code, 400, "{status}");

    // A billion-laughs alias bomb is refused quickly, not expanded.
    let mut bomb = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\na0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]\n",
    );
    for i in 1..10 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
        ));
    }
    let started = Instant::now();
    let (code, status) = s.request(
        "PATCH",
        &format!("{cms}/lol?fieldManager=t"),
        "application/apply-patch+yaml",
        Some(&bomb),
    );
    assert_eq!(code, 400, "{status}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // Nesting a sane decoder allows reaches every write path without harm:
    // unknown fields are dropped (or refused when strict), as upstream.
    let nested = |depth: usize| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"nested"}},"data":{{"k":"v"}},"x":{}}}"#,
        nested(100)
    );
    let (code, status) = s.request("POST", cms, "application/json", Some(&body));
    assert_eq!(code, 201, "{status}");
    assert!(status.get("x").is_none(), "unknown field dropped: {status}");
    let (code, status) = s.request(
        "POST",
        &format!("{cms}?fieldValidation=Strict"),
        "application/json",
        Some(&body.replace("nested", "strict")),
    );
    assert_eq!(code, 400, "{status}");
    for (ct, patch) in [
        (
            "application/merge-patch+json",
            format!(r#"{{"x":{}}}"#, nested(100)),
        ),
        (
            "application/strategic-merge-patch+json",
            format!(r#"{{"x":{}}}"#, nested(100)),
        ),
        (
            "application/json-patch+json",
            format!(r#"[{{"op":"add","path":"/x","value":{}}}]"#, nested(100)),
        ),
        ("application/apply-patch+yaml", body.clone()),
    ] {
        let (code, status) = s.request(
            "PATCH",
            &format!("{cms}/nested?fieldManager=t"),
            ct,
            Some(&patch),
        );
        assert!(code == 200 || code == 201, "{ct}: {code} {status}");
        assert_eq!(status["data"]["k"], "v", "{ct}");
    }

    // A label selector of 100 KB: refused (the URI is over the server's
    // limit) or answered, but never a crash.
    let selector = format!("a in ({})", vec!["x"; 50_000].join(","));
    let out = s.curl(&[
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!(
            "{}{cms}?labelSelector={}",
            s.http,
            selector.replace(' ', "%20")
        ),
    ]);
    let code = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(code.starts_with('4') || code == "200", "{code}");

    let (code, _) = s.request("GET", "/readyz", "", None);
    assert_eq!(code, 200, "the server still serves");
}
