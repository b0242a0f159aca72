//! Pod streams on real containerd: `kubectl logs`, `exec`, `attach` and
//! `port-forward` through the API server to the node agent's kubelet server.
//! Needs root and `scripts/install-deps`. All checks share one agent server
//! (agents on a machine take turns), plus one `berth agent` node.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{AgentProcess, Server, kubectl_path, stderr, stdout, wait_until};

fn jsonpath(s: &Server, what: &str, path: &str) -> String {
    stdout(&s.kubectl(&["get", what, "-o", &format!("jsonpath={path}")]))
}

fn node_ready(s: &Server, node: &str) -> bool {
    jsonpath(s, node, "{.status.conditions[?(@.type==\"Ready\")].status}") == "True"
}

/// Pods of this suite: `web` (busybox httpd + a ticker) on the agent's node,
/// `crash` (restarts, for --previous), `slow` (prints five lines and exits),
/// `missing` (an image that does not exist).
const PODS: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: busybox
    command: ["sh", "-c", "mkdir -p /www && echo hello-from-pod > /www/index.html && exec httpd -f -p 80 -h /www"]
  - name: ticker
    image: busybox
    command: ["sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "echo run $(cat /proc/sys/kernel/random/uuid); sleep 5; exit 1"]
---
apiVersion: v1
kind: Pod
metadata: {name: missing}
spec:
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  containers:
  - name: c
    image: no-such-image:1
"#;

const SLOW: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: slow}
spec:
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "sleep 1; for i in 1 2 3 4 5; do echo line $i; sleep 1; done"]
"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

#[test]
fn logs_exec_attach_port_forward_on_real_containers() {
    let s = Server::start_with_agent("streams");
    let node = wait_for_node(&s);
    assert_eq!(
        jsonpath(
            &s,
            &format!("node/{node}"),
            "{.status.daemonEndpoints.kubeletEndpoint.Port}"
        ),
        "10250"
    );
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(PODS));
    assert!(out.status.success(), "{}", stderr(&out));
    s.k(&["wait", "--for=condition=Ready", "pod/web", "--timeout=60s"]);

    logs(&s);
    logs_follow_until_exit(&s);
    exec(&s);
    exec_tty_through_tmux(&s);
    debug_through_tmux(&s);
    attach(&s);
    port_forward(&s);
    previous_logs(&s);
    errors(&s);
}

fn wait_for_node(s: &Server) -> String {
    let mut node = String::new();
    wait_until(Duration::from_secs(60), "node Ready", || {
        node = jsonpath(s, "nodes", "{.items[0].metadata.name}");
        !node.is_empty() && node_ready(s, &format!("node/{node}"))
    });
    node
}

fn logs(s: &Server) {
    wait_until(Duration::from_secs(10), "three ticks", || {
        s.k(&["logs", "web", "-c", "ticker"]).lines().count() >= 3
    });
    let all = s.k(&["logs", "web", "-c", "ticker"]);
    assert!(all.starts_with("tick 1\ntick 2\ntick 3\n"), "{all}");
    let tail = s.k(&["logs", "web", "-c", "ticker", "--tail=1"]);
    assert_eq!(tail.lines().count(), 1, "{tail}");
    assert!(tail.starts_with("tick "), "{tail}");
    // Timestamps as Go's RFC3339Nano, before each line.
    let ts = s.k(&["logs", "web", "-c", "ticker", "--tail=2", "--timestamps"]);
    let lines: Vec<&str> = ts.lines().collect();
    assert_eq!(lines.len(), 2, "{ts}");
    for l in lines {
        let (stamp, text) = l.split_once(' ').expect("timestamp and text");
        assert!(text.starts_with("tick "), "{l}");
        assert!(
            stamp.len() >= 20 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
            "{stamp}"
        );
    }
    let limited = s.k(&["logs", "web", "-c", "ticker", "--limit-bytes=6"]);
    assert_eq!(limited, "tick 1");
    let since = s.k(&["logs", "web", "-c", "ticker", "--since=1h"]);
    assert!(since.starts_with("tick 1\n"), "{since}");
    // Without -c kubectl picks the first container (httpd prints nothing);
    // --all-containers asks for each in turn.
    let all = s.k(&["logs", "web", "--all-containers", "--prefix"]);
    assert!(all.contains("[pod/web/ticker] tick 1"), "{all}");
    // The API server's own choice when no container is named.
    let (code, body) = s.request(
        "GET",
        "/api/v1/namespaces/default/pods/web/log",
        "application/json",
        None,
    );
    assert_eq!(code, 400);
    assert_eq!(
        body["message"],
        "a container name must be specified for pod web, choose one of: [httpd ticker]"
    );
    let (code, body) = s.request(
        "POST",
        "/api/v1/namespaces/default/pods/web/log?container=ticker",
        "application/json",
        Some("{}"),
    );
    assert_eq!(
        (code, &body["reason"]),
        (405, &serde_json::json!("MethodNotAllowed"))
    );
}

/// `logs -f` streams lines as they are written and returns when the container exits.
fn logs_follow_until_exit(s: &Server) {
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(SLOW));
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(Duration::from_secs(30), "slow running", || {
        jsonpath(s, "pod/slow", "{.status.phase}") == "Running"
    });
    let started = Instant::now();
    let out = s.kubectl(&["logs", "-f", "slow", "--request-timeout=30s"]);
    let took = started.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "line 1\nline 2\nline 3\nline 4\nline 5\n");
    // It waited for lines written after it started, and ended with the container.
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    wait_until(Duration::from_secs(10), "slow to succeed", || {
        jsonpath(s, "pod/slow", "{.status.phase}") == "Succeeded"
    });
}

fn exec(s: &Server) {
    assert_eq!(
        s.k(&["exec", "web", "-c", "ticker", "--", "echo", "hi"]),
        "hi\n"
    );
    let out = s.kubectl(&[
        "exec",
        "web",
        "-c",
        "ticker",
        "--",
        "sh",
        "-c",
        "echo oops >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("oops"), "{}", stderr(&out));
    // Closing stdin (v5's close message) ends `cat`.
    let out = s.kubectl_stdin(
        &["exec", "-i", "web", "-c", "ticker", "--", "cat"],
        Some("abc\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "abc\n");
    // kubectl cp writes through `tar` on stdin, which must see its end.
    let local = s.data_dir.join("payload.txt");
    std::fs::write(&local, "copied into the pod\n").expect("payload");
    s.k(&[
        "cp",
        &local.to_string_lossy(),
        "web:/tmp/payload.txt",
        "-c",
        "ticker",
    ]);
    assert_eq!(
        s.k(&[
            "exec",
            "web",
            "-c",
            "ticker",
            "--",
            "cat",
            "/tmp/payload.txt"
        ]),
        "copied into the pod\n"
    );
    let big: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    let out = s.kubectl_stdin(
        &["exec", "-i", "web", "-c", "ticker", "--", "wc", "-l"],
        Some(&big),
    );
    assert_eq!(stdout(&out).trim(), "20000", "{}", stderr(&out));
    // kubectl 1.29 speaks SPDY only: passed through to containerd.
    let old = "/usr/lib/google-cloud-sdk/bin/kubectl.1.29";
    if std::path::Path::new(old).exists() {
        let out = Command::new(old)
            .arg("--kubeconfig")
            .arg(&s.kubeconfig)
            .args([
                "exec",
                "web",
                "-c",
                "ticker",
                "--",
                "sh",
                "-c",
                "echo spdy; exit 4",
            ])
            .output()
            .expect("kubectl 1.29");
        assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
        assert_eq!(stdout(&out), "spdy\n");
    }
}

/// A kubectl command in a tmux terminal (100x30), driven by typed keys.
struct Terminal {
    session: String,
}

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux").args(args).output().expect("tmux")
}

impl Terminal {
    fn start(s: &Server, name: &str, kubectl_args: &str) -> Terminal {
        let session = format!("berth-streams-{name}-{}", std::process::id());
        // The pane stays a moment after kubectl returns, to show how it ended.
        let cmd = format!(
            "{} --kubeconfig {} {kubectl_args}; echo kubectl-exited-$?; sleep 5",
            kubectl_path().display(),
            s.kubeconfig.display()
        );
        let started = tmux(&[
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "100",
            "-y",
            "30",
            &cmd,
        ]);
        assert!(started.status.success(), "{}", stderr(&started));
        Terminal { session }
    }

    fn pane(&self) -> String {
        stdout(&tmux(&["capture-pane", "-p", "-t", &self.session]))
    }

    fn wait(&self, what: &str, f: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = self.pane();
        while !f(&last) {
            assert!(Instant::now() < deadline, "no {what} in the pane:\n{last}");
            std::thread::sleep(Duration::from_millis(200));
            last = self.pane();
        }
    }

    fn wait_prompt(&self) {
        self.wait("shell prompt", |p| {
            p.lines().any(|l| l.trim_end().ends_with(" #"))
        });
    }

    fn type_line(&self, text: &str) {
        tmux(&["send-keys", "-t", &self.session, text, "Enter"]);
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        tmux(&["kill-session", "-t", &self.session]);
    }
}

/// `kubectl exec -it … -- sh` in a terminal: typed input, output, resize, exit.
fn exec_tty_through_tmux(s: &Server) {
    let t = Terminal::start(s, "exec", "exec -it web -c ticker -- sh");
    t.wait_prompt();
    t.type_line("echo $((6*7))");
    t.wait("42", |p| p.lines().any(|l| l.trim() == "42"));
    t.type_line("stty size");
    t.wait("terminal size", |p| p.lines().any(|l| l.trim() == "30 100"));
    t.type_line("exit");
    // kubectl returns (status 0) when the shell exits.
    t.wait("kubectl's exit", |p| p.contains("kubectl-exited-0"));
}

/// The seed's `kubectl debug -it --target`: an ephemeral container attached
/// interactively, seeing the target container's processes.
fn debug_through_tmux(s: &Server) {
    let t = Terminal::start(
        s,
        "debug",
        "debug web -it --image=busybox --target=ticker -- sh",
    );
    t.wait_prompt();
    t.type_line("ps");
    t.wait("the target's processes", |p| p.contains("while true"));
    t.type_line("exit");
    t.wait("kubectl's exit", |p| p.contains("kubectl-exited-0"));
}

fn attach(s: &Server) {
    let mut child = Command::new(kubectl_path())
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(["attach", "web", "-c", "ticker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl attach");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a line from attach");
    assert!(line.starts_with("tick "), "{line}");
    let next = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("another line");
    let n = |l: &str| l.trim_start_matches("tick ").parse::<u64>().unwrap_or(0);
    assert_eq!(n(&next), n(&line) + 1, "{line} then {next}");
    let _ = child.kill();
    let _ = child.wait();
}

fn port_forward(s: &Server) {
    forward_with(s, &kubectl_path());
    // kubectl 1.29 forwards over plain SPDY, passed through to containerd.
    let old = std::path::Path::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.29");
    if old.exists() {
        forward_with(s, old);
    }
}

fn forward_with(s: &Server, kubectl: &std::path::Path) {
    let port = free_port();
    let mut child = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&s.kubeconfig)
        .args(["port-forward", "pod/web", &format!("{port}:80")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl port-forward");
    let url = format!("http://127.0.0.1:{port}/");
    let mut body = String::new();
    wait_until(Duration::from_secs(15), "port-forward to serve", || {
        body = stdout(&s.curl(&["-s", "--max-time", "3", &url]));
        !body.is_empty()
    });
    assert_eq!(body, "hello-from-pod\n", "{}", kubectl.display());
    // A second connection over the same forward.
    assert_eq!(
        stdout(&s.curl(&["-s", "--max-time", "3", &url])),
        "hello-from-pod\n"
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn previous_logs(s: &Server) {
    // Restarted, and its new instance running (it runs 5 s each time).
    wait_until(Duration::from_secs(60), "crash to run again", || {
        let restarts = jsonpath(
            s,
            "pod/crash",
            "{.status.containerStatuses[0].restartCount}",
        );
        let running = jsonpath(
            s,
            "pod/crash",
            "{.status.containerStatuses[0].state.running}",
        );
        restarts.parse::<u32>().unwrap_or(0) >= 1 && !running.is_empty()
    });
    let previous = s.k(&["logs", "crash", "--previous"]);
    assert!(previous.starts_with("run "), "{previous}");
    let mut current = String::new();
    wait_until(Duration::from_secs(4), "the new instance's log", || {
        current = s.k(&["logs", "crash"]);
        current.starts_with("run ")
    });
    assert_ne!(current, previous, "each run prints its own id");
}

fn errors(s: &Server) {
    let out = s.kubectl(&["exec", "web", "-c", "nosuch", "--", "true"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("container nosuch is not valid for pod web"),
        "{}",
        stderr(&out)
    );
    // A container that never started has no log yet.
    wait_until(Duration::from_secs(30), "missing to fail its pull", || {
        jsonpath(
            s,
            "pod/missing",
            "{.status.containerStatuses[0].state.waiting.reason}",
        )
        .contains("Image")
    });
    let out = s.kubectl(&["logs", "missing"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"container "c" in pod "missing" is waiting to start: "#),
        "{}",
        stderr(&out)
    );
    let out = s.kubectl(&["logs", "slow", "--previous"]);
    assert!(
        stderr(&out).contains(r#"previous terminated container "c" in pod "slow" not found"#),
        "{}",
        stderr(&out)
    );
    // A pod on a simulated node: its kubelet cannot be reached (and is never dialed).
    let mut sim = s.sim(1, "stream-sim-");
    let pod = "apiVersion: v1
kind: Pod
metadata: {name: on-sim}
spec:
  nodeName: stream-sim-0
  containers:
  - name: c
    image: busybox
";
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(pod));
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until(Duration::from_secs(20), "on-sim running", || {
        jsonpath(s, "pod/on-sim", "{.status.phase}") == "Running"
    });
    let out = s.kubectl(&["logs", "on-sim"]);
    assert!(
        stderr(&out).starts_with(
            "Error from server: Get \"https://10.40.0.1:10250/containerLogs/default/on-sim/c\": dial tcp 10.40.0.1:10250: connect: "
        ),
        "{}",
        stderr(&out)
    );
    let out = s.kubectl(&["exec", "on-sim", "--", "true"]);
    assert!(
        stderr(&out)
            .starts_with("Error from server: error dialing backend: dial tcp 10.40.0.1:10250: "),
        "{}",
        stderr(&out)
    );
    let _ = s.kubectl(&["delete", "pod", "on-sim", "--grace-period=0", "--force"]);
    let _ = sim.kill();
    let _ = sim.wait();
}

/// A `berth agent` node: the API server reaches its kubelet server by the
/// node's InternalIP; the agent trusts the cluster CA from its kubeconfig.
#[test]
fn berth_agent_nodes_serve_logs_and_exec() {
    let s = Server::start("streams-join");
    let agent = AgentProcess::start(&s, "streams-agent", &["--node-name", "stream-agent"]);
    wait_until(Duration::from_secs(60), "stream-agent Ready", || {
        node_ready(&s, "node/stream-agent")
    });
    let pod = r#"apiVersion: v1
kind: Pod
metadata: {name: joined}
spec:
  nodeName: stream-agent
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "echo hello from the joined node; exec sleep 3600"]
"#;
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(pod));
    assert!(out.status.success(), "{}", stderr(&out));
    s.k(&[
        "wait",
        "--for=condition=Ready",
        "pod/joined",
        "--timeout=60s",
    ]);
    assert_eq!(s.k(&["logs", "joined"]), "hello from the joined node\n");
    assert_eq!(
        s.k(&["exec", "joined", "--", "cat", "/etc/hostname"]),
        "joined\n"
    );
    assert!(
        !agent.log().contains("kubelet server not started"),
        "{}",
        agent.log()
    );
}
