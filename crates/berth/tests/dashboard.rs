//! The web dashboard in a real browser: a `berth server` with simulated nodes,
//! `berth dashboard` for the admin token, a ServiceAccount bound to `view` in
//! one namespace, and `dashboard/e2e/dashboard.mjs` (playwright-core driving
//! Debian's chromium) checking the views live. Screenshots land in
//! `target/dashboard-screenshots/`. Fails (never skips) without chromium or
//! `dashboard/node_modules` (`scripts/install-deps` installs both).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

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
      containers: [{name: web, image: nginx:1.27}]
";

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
    let s = common::Server::start_with(common::temp_dir("dashboard"), &["--simulate-nodes", "2"]);

    // The assets are public; the SPA answers unknown sub-paths with index.html.
    let head = s.curl(&[
        "-sk",
        "-D",
        "-",
        "-o",
        "/dev/null",
        &format!("{}/dashboard/pods/x", s.https),
    ]);
    let head = common::stdout(&head).to_lowercase();
    assert!(
        head.starts_with("http/1.1 200") || head.starts_with("http/2 200"),
        "{head}"
    );
    assert!(head.contains("content-type: text/html"), "{head}");

    let out = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(["dashboard", "--kubeconfig"])
        .arg(&s.kubeconfig)
        .output()
        .expect("run berth dashboard");
    assert!(
        out.status.success(),
        "berth dashboard: {}",
        common::stderr(&out)
    );
    let printed = common::stdout(&out);
    let mut lines = printed.lines();
    let url = lines.next().unwrap_or_default();
    assert_eq!(
        url,
        format!("Dashboard: {}/dashboard/", s.https),
        "{printed}"
    );
    let admin = lines.last().unwrap_or_default().trim().to_string();
    assert_eq!(admin.split('.').count(), 3, "a JWT: {printed}");

    let applied = s.kubectl_stdin(&["apply", "-f", "-"], Some(VIEWER));
    assert!(applied.status.success(), "{}", common::stderr(&applied));
    let view = s.k(&["create", "token", "viewer", "-n", "team-a"]);
    common::wait_until(
        std::time::Duration::from_secs(60),
        "the simulated nodes",
        || s.k(&["get", "nodes", "-o", "name"]).lines().count() == 2,
    );

    let shots = root.join("target/dashboard-screenshots");
    let started = Instant::now();
    let run = Command::new("node")
        .arg("e2e/dashboard.mjs")
        .current_dir(root.join("dashboard"))
        .env("BERTH_URL", &s.https)
        .env("BERTH_TOKEN", &admin)
        .env("BERTH_VIEW_TOKEN", view.trim())
        .env("BERTH_VIEW_NS", "team-a")
        .env("BERTH_NODE", "sim-node-0")
        .env("SCREENSHOTS", &shots)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("run node");
    let (o, e) = (common::stdout(&run), common::stderr(&run));
    println!("{o}");
    eprintln!("{e}");
    assert!(run.status.success(), "the browser checks failed:\n{o}\n{e}");
    assert!(o.contains("e2e ok"), "{o}");
    println!("browser checks took {:?}", started.elapsed());
    for name in [
        "login-error",
        "overview",
        "pods-pending",
        "pods-running",
        "pod-detail",
        "nodes",
        "workloads",
        "view-forbidden",
    ] {
        assert!(
            shots.join(format!("{name}.png")).is_file(),
            "screenshot {name}"
        );
    }
}
