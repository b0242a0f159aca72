//! The web dashboard in a real browser: a `berth server`, one real `berth
//! agent` node (containerd, for the pod's log) and two simulated nodes,
//! `berth dashboard` for the admin token, a ServiceAccount bound to `view` in
//! one namespace, and `dashboard/e2e/dashboard.mjs` (playwright-core driving
//! Debian's chromium) checking the views live, across an API server restart.
//! Screenshots land in `target/dashboard-screenshots/`. Fails (never skips)
//! without chromium or `dashboard/node_modules` (`scripts/install-deps`
//! installs both).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::{AgentProcess, Server, stderr, stdout, wait_until};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const VIEWER: &str = "apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer-view, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects:
- {kind: ServiceAccount, name: viewer, namespace: team-a}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: team-web, namespace: team-a}
spec:
  replicas: 1
  selector: {matchLabels: {app: team-web}}
  template:
    metadata: {labels: {app: team-web}}
    spec:
      nodeSelector: {type: berth-sim}
      containers: [{name: web, image: nginx:1.27}]
";

fn node_ready(s: &Server, node: &str) -> bool {
    let out = s.kubectl(&[
        "get",
        "node",
        node,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
    ]);
    stdout(&out) == "True"
}

/// `berth sim`, ended with the test.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP forwarder on a loopback port that stays put, to the API server's
/// current address: a restarted server listens on a new port, and the page's
/// origin (and the agent's server URL) must survive it. TLS passes through.
struct Forwarder {
    url: String,
    target: Arc<Mutex<String>>,
}

impl Forwarder {
    fn start(https: &str) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the forwarder");
        let port = listener.local_addr().expect("forwarder address").port();
        let target = Arc::new(Mutex::new(host_port(https)));
        let t = target.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let to = t.lock().map(|g| g.clone()).unwrap_or_default();
                std::thread::spawn(move || {
                    if let Ok(upstream) = TcpStream::connect(&to) {
                        pipe(client, upstream);
                    }
                });
            }
        });
        Forwarder {
            url: format!("https://127.0.0.1:{port}"),
            target,
        }
    }

    fn point_at(&self, https: &str) {
        *self.target.lock().expect("forwarder target") = host_port(https);
    }
}

fn host_port(https: &str) -> String {
    https.trim_start_matches("https://").to_string()
}

/// Copies both ways until either side closes; a closed side closes the other.
fn pipe(a: TcpStream, b: TcpStream) {
    let _ = (a.set_nodelay(true), b.set_nodelay(true));
    let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || copy(a, b));
    copy(b2, a2);
    let _ = up.join();
}

/// One direction, with plain reads and writes.
fn copy(mut from: TcpStream, mut to: TcpStream) {
    use std::io::Read;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

#[test]
fn dashboard_in_chromium() {
    let root = repo_root();
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} is missing: run scripts/install-deps"
    );
    assert!(
        root.join("dashboard/node_modules/playwright-core").is_dir(),
        "dashboard/node_modules is missing: run scripts/install-deps (npm ci in dashboard/)"
    );
    let started = Instant::now();
    let mut s = Server::start("dashboard");
    let fwd = Forwarder::start(&s.https);

    // The assets are public; the SPA answers unknown sub-paths with index.html,
    // `/dashboard` redirects, a stale hashed asset is a 404.
    for (path, want) in [
        ("/dashboard/pods/x", "200 text/html; charset=utf-8 no-cache"),
        ("/dashboard", "301 text/plain; charset=utf-8 no-cache"),
        (
            "/dashboard/assets/gone-1.js",
            "404 text/plain; charset=utf-8 no-cache",
        ),
    ] {
        let out = s.curl(&[
            "-sk",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{content_type} %header{cache-control}",
            &format!("{}{path}", s.https),
        ]);
        assert_eq!(stdout(&out), want, "{path}");
    }

    // The agent's node reaches the server through the forwarder too, so it
    // keeps working across the restart below.
    let agent_kubeconfig = s.data_dir.join("agent-kubeconfig.yaml");
    let kc = std::fs::read_to_string(&s.kubeconfig).expect("read the kubeconfig");
    std::fs::write(&agent_kubeconfig, kc.replace(&s.https, &fwd.url))
        .expect("write the agent's kubeconfig");
    let agent_kc = agent_kubeconfig.to_string_lossy().into_owned();
    let agent = AgentProcess::join(
        &s,
        "dashboard-agent",
        &["--kubeconfig", &agent_kc, "--node-name", "dash-agent"],
    );

    // The agent's node registers first, so it gets the first podCIDR
    // (10.42.0.0/24), the one this machine's pod bridge has; the simulated
    // nodes come after it.
    wait_until(Duration::from_secs(60), "dash-agent Ready", || {
        node_ready(&s, "dash-agent")
    });
    let _sim = KillOnDrop(s.sim(2, "sim-node-"));

    let out = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(["dashboard", "--kubeconfig"])
        .arg(&s.kubeconfig)
        .output()
        .expect("run berth dashboard");
    assert!(out.status.success(), "berth dashboard: {}", stderr(&out));
    let printed = stdout(&out);
    let mut lines = printed.lines();
    assert_eq!(
        lines.next().unwrap_or_default(),
        format!("Dashboard: {}/dashboard/", s.https),
        "{printed}"
    );
    let admin = lines.last().unwrap_or_default().trim().to_string();
    assert_eq!(admin.split('.').count(), 3, "a JWT: {printed}");

    let applied = s.kubectl_stdin(&["apply", "-f", "-"], Some(VIEWER));
    assert!(applied.status.success(), "{}", stderr(&applied));
    let view = s.k(&["create", "token", "viewer", "-n", "team-a"]);
    wait_until(Duration::from_secs(60), "the simulated nodes Ready", || {
        node_ready(&s, "sim-node-0") && node_ready(&s, "sim-node-1")
    });
    println!("cluster up in {:?}", started.elapsed());

    let shots = root.join("target/dashboard-screenshots");
    // Last run's pictures must not stand in for this run's.
    let _ = std::fs::remove_dir_all(&shots);
    let browser_started = Instant::now();
    let mut node = Command::new("node")
        .arg("e2e/dashboard.mjs")
        .current_dir(root.join("dashboard"))
        .env("BERTH_URL", &fwd.url)
        .env("BERTH_TOKEN", &admin)
        .env("BERTH_VIEW_TOKEN", view.trim())
        .env("BERTH_VIEW_NS", "team-a")
        .env("BERTH_NODE", "dash-agent")
        .env("BERTH_NODE_COUNT", "3")
        .env("SCREENSHOTS", &shots)
        .env("CHROMIUM", &chromium)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run node");
    let mut to_node = node.stdin.take().expect("node stdin");
    let from_node = node.stdout.take().expect("node stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from_node).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The browser checks' own waits are bounded; this bounds the whole run.
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut printed = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                println!("{line}");
                if line == "restart-server" {
                    let t = Instant::now();
                    s = s.restart();
                    fwd.point_at(&s.https);
                    println!("server restarted in {:?}", t.elapsed());
                    writeln!(to_node, "restarted").expect("answer the browser checks");
                } else if line == "delete-viewer" {
                    s.k(&["delete", "serviceaccount", "viewer", "-n", "team-a"]);
                    writeln!(to_node, "deleted").expect("answer the browser checks");
                }
                printed.push(line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = node.kill();
                panic!("the browser checks ran past 150 s:\n{}", printed.join("\n"));
            }
        }
    }
    let status = node.wait().expect("wait for node");
    if !status.success() {
        let log = agent.log();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "the browser checks failed ({status}); see failure.png in {}:\n{}\n\
             pods:\n{}\nagent log (last lines, newest first):\n{}",
            shots.display(),
            printed.join("\n"),
            stdout(&s.kubectl(&["get", "pods", "-A", "-o", "wide"])),
            tail.join("\n")
        );
    }
    assert_eq!(printed.last().map(String::as_str), Some("e2e ok"));
    println!("browser checks took {:?}", browser_started.elapsed());
    for name in [
        "login-error",
        "overview",
        "pods-pending",
        "pods-running",
        "pod-detail",
        "nodes",
        "workloads",
        "after-restart",
        "view-forbidden",
        "view-namespace",
        "view-scale-denied",
        "signed-out",
        "pods-1000",
    ] {
        assert!(
            shots.join(format!("{name}.png")).is_file(),
            "screenshot {name}"
        );
    }
}

/// `dashboard/dist` (what `cargo build` embeds) is the build of the committed
/// sources: a change to `dashboard/src` without `npm run build` fails here.
/// The build is reproducible (content-hashed names, no timestamps).
#[test]
fn committed_assets_are_the_build_of_the_sources() {
    let dash = repo_root().join("dashboard");
    assert!(
        dash.join("node_modules/.bin/vite").exists(),
        "dashboard/node_modules is missing: run scripts/install-deps (npm ci in dashboard/)"
    );
    let tsc = Command::new(dash.join("node_modules/.bin/tsc"))
        .arg("--noEmit")
        .current_dir(&dash)
        .output()
        .expect("run tsc");
    assert!(
        tsc.status.success(),
        "tsc: {}{}",
        stdout(&tsc),
        stderr(&tsc)
    );
    let out = common::temp_dir("dashboard-build");
    let vite = Command::new(dash.join("node_modules/.bin/vite"))
        .args(["build", "--emptyOutDir", "--outDir"])
        .arg(&out)
        .current_dir(&dash)
        .output()
        .expect("run vite build");
    assert!(vite.status.success(), "vite build: {}", stderr(&vite));
    let files = |root: &std::path::Path| {
        let mut v = Vec::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("read a build dir").flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else {
                    let rel = p.strip_prefix(root).expect("under root").to_path_buf();
                    v.push((rel, std::fs::read(&p).expect("read a built file")));
                }
            }
        }
        v.sort();
        v
    };
    let (built, committed) = (files(&out), files(&dash.join("dist")));
    let names = |v: &[(PathBuf, Vec<u8>)]| v.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&built),
        names(&committed),
        "dashboard/dist is stale: run `npm run build` in dashboard/ and commit dist"
    );
    for ((p, a), (_, b)) in built.iter().zip(&committed) {
        assert!(
            a == b,
            "dashboard/dist/{} differs from a fresh build",
            p.display()
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
