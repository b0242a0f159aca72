//! The `proxy` subresources of Pods, Services and Nodes on real containerd,
//! through real kubectl (`get --raw`, `create --raw`, `kubectl proxy`) and curl.
//! Needs root and `scripts/install-deps`; one agent server, plus one simulated node.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Server, kubectl_path, stderr, stdout, wait_until};

/// `web`: busybox httpd on a named container port with a page and an echoing
/// CGI script; a Service in front of it (named target port) and one selecting
/// nothing.
const OBJECTS: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: busybox
    ports: [{name: http, containerPort: 8080}]
    command:
    - sh
    - -c
    - |
      mkdir -p /www/cgi-bin
      echo hello-through-proxy > /www/index.html
      cat > /www/cgi-bin/echo <<'EOF'
      #!/bin/sh
      echo "Content-Type: text/plain"
      echo
      echo "method=$REQUEST_METHOD query=$QUERY_STRING agent=$HTTP_USER_AGENT"
      echo "probe=$HTTP_X_PROBE auth=$HTTP_AUTHORIZATION"
      head -c "${CONTENT_LENGTH:-0}"
      EOF
      chmod +x /www/cgi-bin/echo
      exec httpd -f -p 8080 -h /www
---
apiVersion: v1
kind: Pod
metadata: {name: on-sim}
spec:
  nodeName: proxysub-sim-0
  containers:
  - name: c
    image: busybox
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: empty}
spec:
  selector: {app: nothing}
  ports: [{port: 80}]
"#;

const POD: &str = "/api/v1/namespaces/default/pods";
const SVC: &str = "/api/v1/namespaces/default/services";

/// (HTTP code, body) of a request on the trusted plain port.
fn curl(s: &Server, args: &[&str], path: &str) -> (u16, String) {
    let url = format!("{}{path}", s.http);
    let mut all = vec!["-s", "-w", "\n%{http_code}"];
    all.extend(args);
    all.push(&url);
    let text = stdout(&s.curl(&all));
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// A child process ended when the test ends, passing or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn proxy_subresources() {
    let s = Server::start_with_agent("proxysub");
    // Timed from here: starting waits for other suites' agent servers.
    let started = Instant::now();
    let mut node = String::new();
    wait_until(Duration::from_secs(30), "the agent's node", || {
        node = stdout(&s.kubectl(&[
            "get",
            "nodes",
            "-l",
            "node-role.kubernetes.io/control-plane",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ]));
        !node.is_empty()
    });
    // A simulated node (its pods get made-up IPs), once the agent's node holds
    // the first podCIDR (the pod bridge is set up for it).
    let _sim = Killed(s.sim(1, "proxysub-sim-"));
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(OBJECTS));
    assert!(out.status.success(), "{}", stderr(&out));
    let page = format!("{POD}/web:8080/proxy/index.html");
    // Short tries: a SYN sent while the pod's network is still coming up can
    // go unanswered until the proxy's 30 s dial timeout.
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut tries = Vec::new();
    loop {
        let t = Instant::now();
        let got = curl(&s, &["--max-time", "2"], &page);
        if got == (200, "hello-through-proxy\n".to_string()) {
            break;
        }
        tries.push(format!("{:?} {got:?}", t.elapsed()));
        assert!(
            Instant::now() < deadline,
            "httpd never answered through the pod proxy: {tries:#?}\n{}",
            stdout(&s.kubectl(&["describe", "pod", "web"]))
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Pods: numeric, named and default (first container) ports.
    for name in ["web:8080", "web:http", "web", "http:web:8080"] {
        let out = s.k(&["get", "--raw", &format!("{POD}/{name}/proxy/index.html")]);
        assert_eq!(out, "hello-through-proxy\n", "{name}");
    }
    // Methods, bodies, queries and headers reach the pod; answers come back as
    // sent. (busybox httpd hands a CGI script the body of a POST with a
    // Content-Length only: kubectl streams its body without one.)
    let echo = format!("{POD}/web:8080/proxy/cgi-bin/echo?a=1&b=two");
    let out = s.kubectl_stdin(&["create", "--raw", &echo, "-f", "-"], Some("posted"));
    let text = stdout(&out);
    assert!(
        text.starts_with("method=POST query=a=1&b=two agent=kubectl.1.33/"),
        "{text} {}",
        stderr(&out)
    );
    let out = s.kubectl(&["delete", "--raw", &echo]);
    assert!(
        stdout(&out).starts_with("method=DELETE query=a=1&b=two"),
        "{}",
        stderr(&out)
    );
    let (code, body) = curl(&s, &["-X", "PUT"], &echo);
    assert_eq!(code, 200, "{body}");
    assert!(
        body.starts_with("method=PUT query=a=1&b=two agent=curl/"),
        "{body}"
    );
    // Over HTTPS with the admin token: the token stays with the API server.
    let token = std::fs::read_to_string(s.data_dir.join("tls/token"))
        .or_else(|_| std::fs::read_to_string(s.data_dir.join("token")))
        .expect("admin token");
    let body = stdout(&s.curl(&[
        "-sk",
        "-H",
        &format!("Authorization: Bearer {}", token.trim()),
        "-H",
        "X-Probe: yes",
        "--data-binary",
        "posted-body",
        &format!("{}{echo}", s.https),
    ]));
    assert!(body.contains("\nprobe=yes auth=\n"), "{body}");
    assert!(body.ends_with("\nposted-body"), "{body}");
    let (code, body) = curl(&s, &[], &format!("{POD}/web:8080/proxy/no-such-page"));
    assert_eq!(code, 404, "the backend's 404 passes through: {body}");
    assert!(!body.contains("\"kind\":\"Status\""), "{body}");
    // HEAD: the backend's headers, no body.
    let head = stdout(&s.curl(&["-s", "-I", &format!("{}{page}", s.http)]));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("content-length: 20\r\n"),
        "{head}"
    );
    // `…/proxy` is sent on to `…/proxy/` (GET), keeping the query.
    let redirect = stdout(&s.curl(&[
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{redirect_url}",
        &format!("{}{POD}/web/proxy?x=1", s.http),
    ]));
    assert!(redirect.starts_with("301 "), "{redirect}");
    assert!(
        redirect.ends_with(&format!("{POD}/web/proxy/?x=1")),
        "{redirect}"
    );

    // Errors as upstream words them.
    let err = |path: &str| {
        let out = s.kubectl(&["get", "--raw", path]);
        assert!(!out.status.success(), "{path}: {}", stdout(&out));
        stderr(&out)
    };
    let e = err(&format!("{POD}/nope:8080/proxy/"));
    assert!(e.contains("(NotFound): pods \"nope\" not found"), "{e}");
    let e = err(&format!("{POD}/web:81/proxy/"));
    assert!(
        e.contains("(ServiceUnavailable): error trying to reach service: dial tcp"),
        "{e}"
    );
    assert!(e.contains(":81: connect: connection refused"), "{e}");
    let e = err(&format!("{POD}/ftp:web:21/proxy/"));
    assert!(
        e.contains("(BadRequest): invalid pod request \"ftp:web:21\""),
        "{e}"
    );

    // Services: by port number (mapped to the port's name) and by port name.
    for name in ["web:80", "web:http", "http:web:80"] {
        let out = s.k(&["get", "--raw", &format!("{SVC}/{name}/proxy/index.html")]);
        assert_eq!(out, "hello-through-proxy\n", "{name}");
    }
    let e = err(&format!("{SVC}/empty/proxy/"));
    assert!(
        e.contains("(ServiceUnavailable): no endpoints available for service \"empty\""),
        "{e}"
    );
    let e = err(&format!("{SVC}/web:81/proxy/"));
    assert!(
        e.contains("no service port 81 found for service \"web\""),
        "{e}"
    );
    let e = err(&format!("{SVC}/nope/proxy/"));
    assert!(e.contains("(NotFound): services \"nope\" not found"), "{e}");

    // Nodes: the kubelet's server, over TLS with the API server's client certificate.
    let out = s.k(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{node}/proxy/healthz"),
    ]);
    assert_eq!(out, "ok");
    // An upgrade (WebSocket) passes through: the kubelet's exec endpoint.
    let exec = stdout(&s.curl(&[
        "-s",
        "-i",
        "-N",
        "--http1.1",
        "--max-time",
        "10",
        "-H",
        "Connection: Upgrade",
        "-H",
        "Upgrade: websocket",
        "-H",
        "Sec-WebSocket-Version: 13",
        "-H",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "-H",
        "Sec-WebSocket-Protocol: v5.channel.k8s.io",
        &format!(
            "{}/api/v1/nodes/{node}/proxy/exec/default/web/httpd?command=echo&command=hi-from-exec&output=1",
            s.http
        ),
    ]));
    assert!(
        exec.starts_with("HTTP/1.1 101 Switching Protocols"),
        "{exec}"
    );
    assert!(exec.contains("hi-from-exec"), "{exec}");
    let (code, body) = curl(
        &s,
        &[],
        &format!("/api/v1/nodes/{node}/proxy/no-such-route"),
    );
    assert_eq!((code, body.trim()), (404, "404 page not found"));
    // Simulated nodes and their pods are never dialed.
    let e = err("/api/v1/nodes/proxysub-sim-0/proxy/healthz");
    assert!(
        e.contains("(ServiceUnavailable): error trying to reach service: dial tcp"),
        "{e}"
    );
    assert!(e.contains("simulated node has no kubelet server"), "{e}");
    wait_until(
        Duration::from_secs(20),
        "a pod IP on the simulated node",
        || !stdout(&s.kubectl(&["get", "pod/on-sim", "-o", "jsonpath={.status.podIP}"])).is_empty(),
    );
    let e = err(&format!("{POD}/on-sim:80/proxy/"));
    assert!(e.contains("simulated node has no pod network"), "{e}");

    // `kubectl proxy` in front of the API server reaches the pod through it.
    let mut proxy = Command::new(kubectl_path())
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(["proxy", "--port=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl proxy");
    let mut line = String::new();
    BufReader::new(proxy.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("kubectl proxy address");
    let addr = line.trim().rsplit(' ').next().unwrap_or("").to_string();
    let got = stdout(&s.curl(&[
        "-s",
        &format!("http://{addr}{SVC}/web:http/proxy/index.html"),
    ]));
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert_eq!(got, "hello-through-proxy\n", "kubectl proxy said {line:?}");

    let took = started.elapsed();
    eprintln!("proxy_subresources took {took:?}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}
