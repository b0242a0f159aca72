//! Ingress end to end: a real `berth server` with its ingress controller on free
//! ports, real kubectl, curl with Host headers and `--resolve` for SNI.
//!
//! Backends here are HTTP servers this test starts on 127.0.0.1, reached through
//! selector-less Services and EndpointSlices the test writes (readiness is set
//! in the slice). Each answers `backend=<name> path=… host=… xff=… proto=… xfh=…`,
//! so a response names the backend that served it.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{AgentProcess, Server, stderr, stdout};

const CLASS: &str = "apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: berth
  annotations:
    ingressclass.kubernetes.io/is-default-class: \"true\"
spec:
  controller: berth.dev/ingress
";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A server with the ingress controller on free ports: (server, http, https).
fn ingress_server(tag: &str) -> (Server, u16, u16) {
    let (http, https) = (free_port(), free_port());
    let s = Server::start_with(
        common::temp_dir(tag),
        &[
            "--ingress-http-port",
            &http.to_string(),
            "--ingress-https-port",
            &https.to_string(),
        ],
    );
    (s, http, https)
}

fn apply(s: &Server, yaml: &str) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(yaml));
    assert!(
        out.status.success(),
        "apply failed: {}\n{yaml}",
        stderr(&out)
    );
}

/// Starts a backend answering with its name; returns its port.
fn backend(name: &str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind backend");
    let port = l.local_addr().expect("addr").port();
    let name = name.to_string();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let name = name.clone();
            std::thread::spawn(move || serve(conn, &name));
        }
    });
    port
}

fn serve(conn: TcpStream, name: &str) {
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut conn = conn;
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut headers = std::collections::HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let h = |k: &str| headers.get(k).cloned().unwrap_or_default();
    if h("upgrade").eq_ignore_ascii_case("websocket") {
        let _ = conn.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        );
        // Echo, prefixed with the backend's name.
        let mut buf = [0u8; 1024];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut out = format!("{name}:").into_bytes();
            out.extend_from_slice(&buf[..n]);
            if conn.write_all(&out).is_err() {
                break;
            }
        }
        return;
    }
    let body = format!(
        "backend={name} path={path} host={} xff={} proto={} xfh={}\n",
        h("host"),
        h("x-forwarded-for"),
        h("x-forwarded-proto"),
        h("x-forwarded-host")
    );
    let _ = conn.write_all(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
}

/// A selector-less Service `name` (port 80, named `http`) and its EndpointSlice:
/// one endpoint on 127.0.0.1 per (port, ready).
fn service_yaml(name: &str, endpoints: &[(u16, bool)]) -> String {
    let mut y = format!(
        "apiVersion: v1
kind: Service
metadata:
  name: {name}
spec:
  ports:
  - name: http
    port: 80
    targetPort: 8080
"
    );
    // One slice per port: a slice's endpoints share its ports.
    for (i, (port, ready)) in endpoints.iter().enumerate() {
        y.push_str(&format!(
            "---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}-{i}
  labels:
    kubernetes.io/service-name: {name}
addressType: IPv4
ports:
- name: http
  port: {port}
  protocol: TCP
endpoints:
- addresses: [\"127.0.0.1\"]
  conditions:
    ready: {ready}
"
        ));
    }
    y
}

/// A Service backed by a new local backend named `name`.
fn backed_service(s: &Server, name: &str) {
    let port = backend(name);
    apply(s, &service_yaml(name, &[(port, true)]));
}

/// (HTTP code, body) of a request through the ingress.
fn get(port: u16, host: &str, path: &str) -> (u16, String) {
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "--path-as-is",
            "-m",
            "5",
            "-H",
            &format!("Host: {host}"),
            "-w",
            "\n%{http_code}",
            &format!("http://127.0.0.1:{port}{path}"),
        ])
        .output()
        .expect("curl");
    let text = stdout(&out);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// The backend that answered (`None` for an answer of the ingress itself).
fn served_by(port: u16, host: &str, path: &str) -> (u16, Option<String>) {
    let (code, body) = get(port, host, path);
    let name = body
        .strip_prefix("backend=")
        .and_then(|b| b.split_whitespace().next())
        .map(String::from);
    (code, name)
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out waiting for {what}");
}

/// Upstream's path-matching examples (docs: Ingress → Path types → Examples),
/// each row its own host: (paths with types, request, backend expected).
/// Backends are named after their path and type; `default` is the default backend.
#[test]
fn upstream_path_table_end_to_end() {
    let (s, http, _) = ingress_server("ing-paths");
    apply(&s, CLASS);
    type Row<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let rows: &[Row] = &[
        (&[("/", "Prefix")], "/", "p-root"),
        (&[("/", "Prefix")], "/anything/at/all", "p-root"),
        (&[("/foo", "Exact")], "/foo", "e-foo"),
        (&[("/foo", "Exact")], "/bar", "default"),
        (&[("/foo", "Exact")], "/foo/", "default"),
        (&[("/foo/", "Exact")], "/foo", "default"),
        (&[("/foo", "Prefix")], "/foo", "p-foo"),
        (&[("/foo", "Prefix")], "/foo/", "p-foo"),
        (&[("/foo/", "Prefix")], "/foo", "p-foo-slash"),
        (&[("/foo/", "Prefix")], "/foo/", "p-foo-slash"),
        (&[("/aaa/bb", "Prefix")], "/aaa/bbb", "default"),
        (&[("/aaa/bbb", "Prefix")], "/aaa/bbb", "p-aaa-bbb"),
        (&[("/aaa/bbb/", "Prefix")], "/aaa/bbb", "p-aaa-bbb-slash"),
        (&[("/aaa/bbb", "Prefix")], "/aaa/bbb/", "p-aaa-bbb"),
        (&[("/aaa/bbb", "Prefix")], "/aaa/bbb/ccc", "p-aaa-bbb"),
        (&[("/aaa/bbb", "Prefix")], "/aaa/bbbxyz", "default"),
        (&[("/", "Prefix"), ("/aaa", "Prefix")], "/aaa/ccc", "p-aaa"),
        (
            &[("/", "Prefix"), ("/aaa", "Prefix"), ("/aaa/bbb", "Prefix")],
            "/aaa/bbb",
            "p-aaa-bbb",
        ),
        (
            &[("/", "Prefix"), ("/aaa", "Prefix"), ("/aaa/bbb", "Prefix")],
            "/ccc",
            "p-root",
        ),
        (&[("/aaa", "Prefix")], "/ccc", "default"),
        (&[("/foo", "Prefix"), ("/foo", "Exact")], "/foo", "e-foo"),
        // ImplementationSpecific is Prefix here.
        (&[("/foo", "ImplementationSpecific")], "/foo/x", "i-foo"),
        (&[("/foo", "ImplementationSpecific")], "/foox", "default"),
    ];
    let backend_name = |path: &str, t: &str| {
        let p = path.trim_matches('/').replace('/', "-");
        let p = if p.is_empty() { "root".to_string() } else { p };
        let slash = if path.len() > 1 && path.ends_with('/') {
            "-slash"
        } else {
            ""
        };
        format!("{}-{p}{slash}", &t[..1].to_ascii_lowercase())
    };
    let mut names: Vec<String> = vec!["default".into()];
    for (paths, _, _) in rows {
        for (p, t) in *paths {
            names.push(backend_name(p, t));
        }
    }
    names.sort();
    names.dedup();
    for n in &names {
        backed_service(&s, n);
    }
    let mut yaml = String::from(
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: default-backend
spec:
  defaultBackend:
    service: {name: default, port: {number: 80}}
",
    );
    for (i, (paths, _, _)) in rows.iter().enumerate() {
        yaml.push_str(&format!(
            "---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: row{i}
spec:
  rules:
  - host: row{i}.example.com
    http:
      paths:
"
        ));
        for (p, t) in *paths {
            // By port name for some, number for others: both resolve.
            let port = if i % 2 == 0 {
                "{name: http}"
            } else {
                "{number: 80}"
            };
            yaml.push_str(&format!(
                "      - path: {p}\n        pathType: {t}\n        backend:\n          service: {{name: {}, port: {port}}}\n",
                backend_name(p, t)
            ));
        }
    }
    apply(&s, &yaml);
    let last = rows.len() - 1;
    wait_until("the last row served", || {
        served_by(http, &format!("row{last}.example.com"), "/foox").1 == Some("default".into())
    });
    for (i, (paths, request, want)) in rows.iter().enumerate() {
        let (code, got) = served_by(http, &format!("row{i}.example.com"), request);
        assert_eq!(code, 200, "row {i} {paths:?} {request}");
        assert_eq!(
            got.as_deref(),
            Some(*want),
            "row {i}: paths {paths:?} request {request}"
        );
    }
    // The default class was set by admission on every Ingress.
    let classes = s.k(&[
        "get",
        "ingress",
        "-o",
        "jsonpath={range .items[*]}{.spec.ingressClassName}{\"\\n\"}{end}",
    ]);
    assert_eq!(classes.lines().count(), rows.len() + 1, "{classes}");
    assert!(classes.lines().all(|c| c == "berth"), "{classes}");
}

#[test]
fn hosts_classes_status_headers_and_websocket() {
    let (s, http, _) = ingress_server("ing-hosts");
    apply(&s, CLASS);
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: other
spec:
  controller: example.com/ingress-controller
",
    );
    for n in ["wild", "exact", "other"] {
        backed_service(&s, n);
    }
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: wildcard
spec:
  rules:
  - host: \"*.foo.com\"
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: wild, port: {number: 80}}}}
  - host: exact.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: exact, port: {name: http}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: elsewhere
spec:
  ingressClassName: other
  rules:
  - host: other.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: other, port: {number: 80}}}}
",
    );
    wait_until("wildcard served", || {
        served_by(http, "bar.foo.com", "/").1 == Some("wild".into())
    });
    let cases = [
        ("bar.foo.com", 200, Some("wild")),
        ("BAR.foo.com:8080", 200, Some("wild")),
        ("baz.bar.foo.com", 404, None),
        ("foo.com", 404, None),
        ("exact.example.com", 200, Some("exact")),
        // Another class's Ingress is not served here.
        ("other.example.com", 404, None),
        ("nothing.example.com", 404, None),
    ];
    for (host, code, want) in cases {
        let (c, got) = served_by(http, host, "/x");
        assert_eq!((c, got.as_deref()), (code, want), "{host}");
    }
    let (_, body) = get(http, "nothing.example.com", "/");
    assert_eq!(body, "default backend - 404\n");
    // X-Forwarded-* describe the request as received.
    let (_, body) = get(http, "exact.example.com", "/hdr");
    assert!(
        body.contains("host=exact.example.com xff=127.0.0.1 proto=http xfh=exact.example.com"),
        "{body}"
    );
    // The backend closes every connection (`Connection: close`); the client's
    // connection to the ingress stays open for the next request.
    let url = format!("http://127.0.0.1:{http}/keep");
    let out = std::process::Command::new("curl")
        .args([
            "-sv",
            "-m",
            "5",
            "-H",
            "Host: exact.example.com",
            &url,
            &url,
        ])
        .output()
        .expect("curl");
    assert_eq!(stdout(&out).matches("backend=exact").count(), 2);
    let trace = stderr(&out);
    assert!(trace.contains("Re-using existing connection"), "{trace}");
    assert!(
        !trace.to_ascii_lowercase().contains("< connection: close"),
        "{trace}"
    );
    // Ours got the node's address in status; the other class's did not.
    wait_until("status set", || {
        let ip = s.k(&[
            "get",
            "ingress",
            "wildcard",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ]);
        ip.parse::<std::net::IpAddr>().is_ok()
    });
    let ip = s.k(&[
        "get",
        "ingress",
        "wildcard",
        "-o",
        "jsonpath={.status.loadBalancer.ingress[0].ip}",
    ]);
    // The address answers too.
    let (c, got) = {
        let out = std::process::Command::new("curl")
            .args([
                "-s",
                "-m",
                "5",
                "-H",
                "Host: exact.example.com",
                &format!("http://{ip}:{http}/"),
            ])
            .output()
            .expect("curl");
        (out.status.success(), stdout(&out))
    };
    assert!(c && got.starts_with("backend=exact"), "{ip}: {got}");
    let other = s.k(&["get", "ingress", "elsewhere", "-o", "jsonpath={.status}"]);
    assert!(!other.contains("loadBalancer\":{\"ingress"), "{other}");

    // WebSocket: the upgrade passes and bytes flow both ways.
    let mut ws = TcpStream::connect(("127.0.0.1", http)).expect("connect");
    ws.set_read_timeout(Some(Duration::from_secs(5))).ok();
    ws.write_all(b"GET /chat HTTP/1.1\r\nHost: exact.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        .expect("write");
    let mut buf = [0u8; 1024];
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = ws.read(&mut buf).expect("read 101");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&head));
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    ws.write_all(b"ping").expect("write ping");
    let n = ws.read(&mut buf).expect("read echo");
    assert_eq!(&buf[..n], b"exact:ping");

    // Changes take effect without restarting: repoint the wildcard rule.
    s.k(&[
        "patch",
        "ingress",
        "wildcard",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/rules/0/http/paths/0/backend/service/name","value":"exact"}]"#,
    ]);
    wait_until("wildcard repointed", || {
        served_by(http, "bar.foo.com", "/").1 == Some("exact".into())
    });
}

#[test]
fn readiness_retries_and_503() {
    let (s, http, _) = ingress_server("ing-ready");
    apply(&s, CLASS);
    let (a, b) = (backend("a"), backend("b"));
    // An endpoint marked ready with nothing listening: connections to it fail
    // and the request goes on to another endpoint.
    let dead = free_port();
    apply(
        &s,
        &service_yaml("web", &[(a, true), (b, false), (dead, true)]),
    );
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  rules:
  - host: web.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
  - host: missing.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: missing, port: {number: 80}}}}
",
    );
    wait_until("web served", || {
        served_by(http, "web.example.com", "/").0 == 200
    });
    for i in 0..12 {
        let (code, got) = served_by(http, "web.example.com", &format!("/{i}"));
        assert_eq!((code, got.as_deref()), (200, Some("a")), "request {i}");
    }
    // The missing Service: 503 and an event; the rest keeps serving.
    assert_eq!(served_by(http, "missing.example.com", "/").0, 503);
    wait_until("ServiceNotFound event", || {
        s.k(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=web",
        ])
        .contains("Service \"default/missing\" not found")
    });
    let events = s.k(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=web",
    ]);
    assert!(events.contains("ServiceNotFound"), "{events}");
    // A resource backend (accepted by the API) and a rule an older Ingress
    // already serves: events on the newer Ingress, the rest keeps serving.
    // creationTimestamp has whole seconds and a tie goes to the smaller name
    // ("newer" < "web"): make sure "newer" really is created later.
    std::thread::sleep(Duration::from_millis(1100));
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: newer
spec:
  rules:
  - host: web.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: missing, port: {number: 80}}}}
      - path: /icons
        pathType: ImplementationSpecific
        backend:
          resource: {apiGroup: k8s.example.com, kind: StorageBucket, name: icon-assets}
",
    );
    wait_until("events on the newer Ingress", || {
        let ev = s.k(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=newer",
        ]);
        ev.contains("RuleConflict") && ev.contains("UnsupportedBackend")
    });
    let ev = s.k(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=newer",
    ]);
    assert!(
        ev.contains("resource backend k8s.example.com/StorageBucket \"icon-assets\" is not supported by berth.dev/ingress"),
        "{ev}"
    );
    assert!(
        ev.contains(
            "host \"web.example.com\" path / (Prefix) is already served for an older Ingress"
        ),
        "{ev}"
    );
    for path in ["/", "/icons/x"] {
        assert_eq!(
            served_by(http, "web.example.com", path).1.as_deref(),
            Some("a"),
            "{path}"
        );
    }
    // Every endpoint unready: 503.
    apply(
        &s,
        &service_yaml("web", &[(a, false), (b, false), (dead, false)]),
    );
    wait_until("503", || served_by(http, "web.example.com", "/").0 == 503);
    let (_, body) = get(http, "web.example.com", "/");
    assert_eq!(body, "503 Service Temporarily Unavailable\n");
    // b ready again: only b answers.
    apply(
        &s,
        &service_yaml("web", &[(a, false), (b, true), (dead, false)]),
    );
    wait_until("b serves", || {
        served_by(http, "web.example.com", "/").1 == Some("b".into())
    });
    for _ in 0..6 {
        assert_eq!(
            served_by(http, "web.example.com", "/").1.as_deref(),
            Some("b")
        );
    }
}

/// A self-signed certificate for `host` (PEM cert, PEM key) made by openssl.
fn certificate(dir: &std::path::Path, host: &str) -> (String, String) {
    let (crt, key) = (
        dir.join(format!("{host}.crt")),
        dir.join(format!("{host}.key")),
    );
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .args([
            "-subj",
            &format!("/CN={host}"),
            "-addext",
            &format!("subjectAltName=DNS:{host}"),
        ])
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{}", stderr(&out));
    (
        crt.to_string_lossy().into_owned(),
        key.to_string_lossy().into_owned(),
    )
}

#[test]
fn tls_with_sni_and_a_malformed_secret() {
    let (s, http, https) = ingress_server("ing-tls");
    apply(&s, CLASS);
    backed_service(&s, "secure");
    let dir = common::temp_dir("ing-tls-certs");
    let (crt, key) = certificate(&dir, "secure.example.com");
    s.k(&[
        "create",
        "secret",
        "tls",
        "secure-tls",
        "--cert",
        &crt,
        "--key",
        &key,
    ]);
    // A Secret whose certificate is not one.
    s.k(&[
        "create",
        "secret",
        "generic",
        "broken-tls",
        "--type=kubernetes.io/tls",
        "--from-literal=tls.crt=not a certificate",
        "--from-literal=tls.key=not a key",
    ]);
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: secure
spec:
  tls:
  - hosts: [secure.example.com]
    secretName: secure-tls
  rules:
  - host: secure.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: secure, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: broken
spec:
  tls:
  - hosts: [broken.example.com]
    secretName: broken-tls
  rules:
  - host: broken.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: secure, port: {number: 80}}}}
",
    );
    let curl_tls = |host: &str, extra: &[&str]| {
        let resolve = format!("{host}:{https}:127.0.0.1");
        let url = format!("https://{host}:{https}/tls");
        let mut args = vec!["-s", "-m", "5", "--resolve", &resolve];
        args.extend_from_slice(extra);
        args.push(&url);
        std::process::Command::new("curl")
            .args(&args)
            .output()
            .expect("curl")
    };
    wait_until("HTTPS served with the Secret's certificate", || {
        let out = curl_tls("secure.example.com", &["--cacert", &crt]);
        out.status.success() && stdout(&out).starts_with("backend=secure")
    });
    let body = stdout(&curl_tls("secure.example.com", &["--cacert", &crt]));
    assert!(body.contains("proto=https"), "{body}");
    assert!(
        body.contains(&format!("xfh=secure.example.com:{https}")),
        "{body}"
    );
    // The malformed Secret: an event, and its host falls back to the default
    // certificate (not trusted by the Secret's CA) while still routing.
    wait_until("InvalidCertificate event", || {
        s.k(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=broken",
        ])
        .contains("InvalidCertificate")
    });
    let out = curl_tls("broken.example.com", &["--cacert", &crt]);
    assert!(!out.status.success(), "verified with the wrong certificate");
    let out = curl_tls("broken.example.com", &["-k"]);
    assert!(
        stdout(&out).starts_with("backend=secure"),
        "{}",
        stdout(&out)
    );
    // Plain HTTP still serves the TLS host.
    assert_eq!(
        served_by(http, "secure.example.com", "/").1.as_deref(),
        Some("secure")
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The seed article's v1beta1 manifests: IngressClass (its `apiGroup` carries a
/// version, which upstream's validation refuses too) and a v1beta1 Ingress with
/// serviceName/servicePort, read back as v1 and v1beta1.
#[test]
fn v1beta1_manifests_and_default_class_admission() {
    let s = Server::start("ing-v1beta1");
    let seed = "apiVersion: networking.k8s.io/v1beta1
kind: IngressClass
metadata:
  name: external-lb
  annotations:
    ingressclass.kubernetes.io/is-default-class: \"true\"
spec:
  controller: example.com/ingress-controller
  parameters:
    apiGroup: k8s.example.com/v1alpha
    kind: IngressParameters
    name: external-lb
";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(seed));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("IngressClass \"external-lb\" is invalid: spec.parameters.apiGroup: Invalid value: \"k8s.example.com/v1alpha\": a lowercase RFC 1123 subdomain"),
        "{}",
        stderr(&out)
    );
    apply(
        &s,
        &seed.replace("k8s.example.com/v1alpha", "k8s.example.com"),
    );
    let v1 = s.k(&[
        "get",
        "ingressclasses.v1.networking.k8s.io",
        "external-lb",
        "-o",
        "json",
    ]);
    let v1: serde_json::Value = serde_json::from_str(&v1).expect("json");
    assert_eq!(v1["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(v1["spec"]["parameters"]["scope"], "Cluster");
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1beta1
kind: Ingress
metadata:
  name: legacy
spec:
  backend:
    serviceName: web
    servicePort: 80
  rules:
  - host: foo.example.com
    http:
      paths:
      - path: /app
        backend:
          serviceName: app
          servicePort: http
",
    );
    let v1 = s.k(&[
        "get",
        "ingresses.v1.networking.k8s.io",
        "legacy",
        "-o",
        "json",
    ]);
    let v1: serde_json::Value = serde_json::from_str(&v1).expect("json");
    assert_eq!(v1["spec"]["ingressClassName"], "external-lb");
    assert_eq!(
        v1["spec"]["defaultBackend"],
        serde_json::json!({"service": {"name": "web", "port": {"number": 80}}})
    );
    let path = &v1["spec"]["rules"][0]["http"]["paths"][0];
    assert_eq!(path["pathType"], "ImplementationSpecific");
    assert_eq!(
        path["backend"],
        serde_json::json!({"service": {"name": "app", "port": {"name": "http"}}})
    );
    // Every request to a version upstream removed carries upstream's deprecation warning.
    let out = s.kubectl(&["get", "ingresses.v1beta1.networking.k8s.io", "legacy"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Warning: networking.k8s.io/v1beta1 Ingress is deprecated in v1.19+, unavailable in v1.22+; use networking.k8s.io/v1 Ingress"),
        "{}",
        stderr(&out)
    );
    let out = s.kubectl(&["get", "ingresses.v1.networking.k8s.io", "legacy"]);
    assert!(!stderr(&out).contains("deprecated"), "{}", stderr(&out));
    let (code, beta) = s.request(
        "GET",
        "/apis/networking.k8s.io/v1beta1/namespaces/default/ingresses/legacy",
        "",
        None,
    );
    assert_eq!(code, 200, "{beta}");
    assert_eq!(beta["apiVersion"], "networking.k8s.io/v1beta1");
    assert_eq!(
        beta["spec"]["backend"],
        serde_json::json!({"serviceName": "web", "servicePort": 80})
    );
    assert_eq!(
        beta["spec"]["rules"][0]["http"]["paths"][0]["backend"],
        serde_json::json!({"serviceName": "app", "servicePort": "http"})
    );
    // kubectl explain reads v1beta1's own schema.
    let explain = s.k(&[
        "explain",
        "ingress.spec.backend",
        "--api-version=networking.k8s.io/v1beta1",
    ]);
    assert!(explain.contains("VERSION:    v1beta1"), "{explain}");
    assert!(explain.contains("serviceName\t<string>"), "{explain}");
    assert!(explain.contains("servicePort\t<IntOrString>"), "{explain}");
    // Discovery lists v1 first (preferred), then v1beta1.
    let versions = s.k(&["api-versions"]);
    assert!(versions.contains("networking.k8s.io/v1\n"), "{versions}");
    assert!(
        versions.contains("networking.k8s.io/v1beta1\n"),
        "{versions}"
    );
    // v1 requires pathType; upstream's message.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: typeless
spec:
  rules:
  - http:
      paths:
      - path: /x
        backend: {service: {name: web, port: {number: 80}}}
",
        ),
    );
    assert!(
        stderr(&out).contains(
            "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"
        ),
        "{}",
        stderr(&out)
    );
    // A second default class, newer: new Ingresses get it (upstream 1.33).
    std::thread::sleep(Duration::from_millis(1100));
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: newer
  annotations:
    ingressclass.kubernetes.io/is-default-class: \"true\"
spec:
  controller: berth.dev/ingress
",
    );
    apply(
        &s,
        "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: later
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
",
    );
    let class = s.k(&[
        "get",
        "ingress",
        "later",
        "-o",
        "jsonpath={.spec.ingressClassName}",
    ]);
    assert_eq!(class, "newer");
}

/// Real pods: busybox `httpd` in a Deployment on a node joined with `berth agent`
/// (containerd; the server runs no agent of its own), endpoints from the
/// EndpointSlice controller, served by the ingress controller the agent runs.
/// Needs root and the node agent's dependencies, as `tests/node.rs`.
#[test]
fn busybox_httpd_pods_through_an_agent_node() {
    let (http, https) = (free_port(), free_port());
    let s = Server::start("ing-pods");
    let (http_flag, https_flag) = (http.to_string(), https.to_string());
    let agent = AgentProcess::start(
        &s,
        "ing-pods-agent",
        &[
            "--ingress-http-port",
            &http_flag,
            "--ingress-https-port",
            &https_flag,
        ],
    );
    let _cleanup = PodCleanup(&s, &agent);
    s.wait_node_ready(Duration::from_secs(90));
    apply(&s, CLASS);
    apply(&s, PODS);
    let deadline = Instant::now() + Duration::from_secs(90);
    let ready = || {
        s.k(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ])
    };
    while ready() != "2" {
        assert!(
            Instant::now() < deadline,
            "pods never ready:\n{}\n{}",
            s.k(&["get", "pods", "-o", "wide"]),
            s.k(&["get", "events"])
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let pods: std::collections::BTreeSet<String> = s
        .k(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(pods.len(), 2, "{pods:?}");
    wait_until_for(
        Duration::from_secs(30),
        "served through the ingress",
        || get(http, "web.example.com", "/").0 == 200,
    );
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        let (code, body) = get(http, "web.example.com", "/");
        assert_eq!(code, 200, "{body}");
        seen.insert(body.trim().to_string());
    }
    assert_eq!(seen, pods, "responses come from both pods, balanced");
    // Another host: nothing matches.
    assert_eq!(get(http, "other.example.com", "/").0, 404);
    // The agent's node reports its address on the Ingress.
    let node_ip = s.k(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={.items[0].status.addresses[?(@.type==\"InternalIP\")].address}",
    ]);
    wait_until_for(
        Duration::from_secs(30),
        "the agent node's address in the status",
        || {
            s.k(&[
                "get",
                "ingress",
                "web",
                "-o",
                "jsonpath={.status.loadBalancer.ingress[*].ip}",
            ]) == node_ip
        },
    );
    // No pods left: 503 once the endpoints are gone.
    s.k(&["scale", "deployment", "web", "--replicas=0"]);
    wait_until_for(Duration::from_secs(60), "503 without pods", || {
        get(http, "web.example.com", "/").0 == 503
    });
}

/// Deletes the test's pods and waits for the agent to remove their sandboxes
/// (also when the test fails), so no pod outlives its server.
struct PodCleanup<'a>(&'a Server, &'a AgentProcess);

impl Drop for PodCleanup<'_> {
    fn drop(&mut self) {
        let s = self.0;
        let _ = s.kubectl(&["delete", "deployment", "--all", "--wait=true"]);
        let _ = s.kubectl(&["delete", "pods", "--all", "--wait=true", "--timeout=60s"]);
        let sock = self.1.data_dir.join("agent/containerd/containerd.sock");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let out = std::process::Command::new("ctr")
                .arg("--address")
                .arg(&sock)
                .args(["-n", "k8s.io", "containers", "ls", "-q"])
                .output();
            if out.is_ok_and(|o| o.stdout.is_empty()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

fn wait_until_for(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("timed out waiting for {what}");
}

/// Two busybox httpd pods answering with their own name, ready once serving.
const PODS: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: busybox
        command: [\"sh\", \"-c\", \"mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www\"]
        ports:
        - {name: http, containerPort: 8080}
        readinessProbe:
          httpGet: {path: /index.html, port: http}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: http}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  rules:
  - host: web.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
";
