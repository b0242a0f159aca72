//! Test harness: a real `berth server` process on free ports with a temp data dir,
//! driven by real kubectl (and curl on the trusted plain-HTTP port).
#![allow(dead_code)]

pub mod cgroup;
pub mod tls;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The Deployment most suites apply: 2 replicas of nginx with a container port.
pub const WEB_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
";

/// A Service in front of [`WEB_DEPLOYMENT`].
pub const WEB_SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 80
";

pub struct Server {
    pub child: Child,
    pub data_dir: PathBuf,
    pub https: String,
    pub http: String,
    pub kubeconfig: PathBuf,
    extra_args: Vec<String>,
    agent: bool,
    /// Held while an agent server runs: agents on one machine share the pod
    /// bridge and podCIDR, so test binaries take turns (a file lock).
    agent_lock: Option<std::fs::File>,
}

/// Node agents under test keep upstream's memory threshold but not its disk
/// ones (`nodefs.available<10%`, `imagefs.available<15%`): build artifacts
/// often fill this machine's disk past them, which would put every test node
/// under DiskPressure (tainted, pods evicted). A suite naming `--eviction-hard`
/// itself (the eviction suite) keeps its own.
fn with_test_eviction_thresholds(args: &mut Vec<String>) {
    if !args.iter().any(|a| a.starts_with("--eviction-hard")) {
        args.push(TEST_EVICTION_HARD.into());
    }
}

const TEST_EVICTION_HARD: &str = "--eviction-hard=memory.available<100Mi";

/// Waits for the machine-wide agent lock.
fn agent_lock() -> std::fs::File {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("berth-node-agent.lock"))
        .expect("agent lock file");
    f.lock().expect("agent lock");
    f
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "berth-{tag}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish()
}

impl Server {
    /// `berth sim` joining this server with `nodes` simulated nodes named
    /// `prefix0`, `prefix1`, … (a separate process the caller ends).
    pub fn sim(&self, nodes: usize, prefix: &str) -> Child {
        Command::new(env!("CARGO_BIN_EXE_berth"))
            .args([
                "sim",
                "--nodes",
                &nodes.to_string(),
                "--name-prefix",
                prefix,
            ])
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env("BERTH_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start berth sim")
    }

    pub fn start(tag: &str) -> Server {
        Self::start_with(temp_dir(tag), &[])
    }

    /// A server that also runs the real node agent (containerd, CNI): only the node
    /// suites ask for one; every other server runs with `--disable-agent`.
    pub fn start_with_agent(tag: &str) -> Server {
        Self::spawn(temp_dir(tag), &[], true)
    }

    /// [`Server::start_with_agent`] with extra `berth server` flags.
    pub fn start_with_agent_args(tag: &str, extra: &[&str]) -> Server {
        Self::spawn(temp_dir(tag), extra, true)
    }

    pub fn start_with(data_dir: PathBuf, extra: &[&str]) -> Server {
        Self::spawn(data_dir, extra, false)
    }

    fn spawn(data_dir: PathBuf, extra: &[&str], agent: bool) -> Server {
        let agent_lock = agent.then(agent_lock);
        let mut extra_args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        if agent {
            with_test_eviction_thresholds(&mut extra_args);
        }
        let no_agent: &[&str] = if agent { &[] } else { &["--disable-agent"] };
        // The ingress controller binds ports: only suites that name them get one.
        let no_ingress: &[&str] = if extra.contains(&"--ingress-http-port") {
            &[]
        } else {
            &["--disable-ingress"]
        };
        // The cluster DNS binds port 53: agent servers and suites naming its address get one.
        let no_dns: &[&str] = if agent || extra.contains(&"--cluster-dns-bind") {
            &[]
        } else {
            &["--disable-dns"]
        };
        // Loopback unless the suite names an address: pods reach the API server
        // through the `kubernetes` Service, which cannot DNAT to loopback.
        let bind: &[&str] = if extra.contains(&"--bind-address") {
            &[]
        } else {
            &["--bind-address", "127.0.0.1"]
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_berth"))
            .arg("server")
            .args(bind)
            .args(["--secure-port", "0", "--insecure-port", "0", "--data-dir"])
            .arg(&data_dir)
            .args(no_agent)
            .args(no_ingress)
            .args(no_dns)
            .args(&extra_args)
            .env("BERTH_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start berth server");
        let stdout = child.stdout.take().expect("stdout");
        let mut reader = BufReader::new(stdout);
        let (mut https, mut http, mut kubeconfig) = (String::new(), String::new(), PathBuf::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        while (https.is_empty() || http.is_empty()) && Instant::now() < deadline {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            let line = line.trim();
            if let Some(p) = line.strip_prefix("Wrote kubeconfig ") {
                kubeconfig = PathBuf::from(p);
            } else if let Some(a) = line.strip_prefix("API server at ") {
                https = a.to_string();
            } else if let Some(a) = line.strip_prefix("Plain HTTP (trusted, loopback) at ") {
                http = a.to_string();
            }
        }
        assert!(
            !https.is_empty() && !http.is_empty(),
            "berth server did not start"
        );
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in reader.lines() {});
        let s = Server {
            child,
            data_dir,
            https,
            http,
            kubeconfig,
            extra_args,
            agent,
            agent_lock,
        };
        s.wait_ready();
        s
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let out = self.curl(&[
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &format!("{}/readyz", self.http),
            ]);
            if String::from_utf8_lossy(&out.stdout) == "200" {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("server never became ready");
    }

    /// Runs kubectl (`BERTH_KUBECTL`, else kubectl 1.33 where installed, else `kubectl`).
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_stdin(args, None)
    }

    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(kubectl_path());
        cmd.arg("--kubeconfig").arg(&self.kubeconfig);
        cmd.arg("--cache-dir").arg(self.data_dir.join("kube-cache"));
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
    pub fn k(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The status of condition `type_` on the first Node; empty while no
    /// Node has registered (a failed kubectl is not a failure here).
    pub fn node_condition(&self, type_: &str) -> String {
        let path =
            format!("jsonpath={{.items[0].status.conditions[?(@.type==\"{type_}\")].status}}");
        stdout(&self.kubectl(&["get", "nodes", "-o", &path]))
    }

    /// Waits until the first Node registers and reports Ready=True.
    pub fn wait_node_ready(&self, limit: Duration) {
        wait_until(limit, "node Ready", || {
            self.node_condition("Ready") == "True"
        });
    }

    /// `ctr` against the agent's containerd (namespace `k8s.io`), which must
    /// succeed; returns stdout.
    pub fn ctr(&self, args: &[&str]) -> String {
        let sock = self.data_dir.join("agent/containerd/containerd.sock");
        let out = Command::new("ctr")
            .arg("--address")
            .arg(&sock)
            .args(["-n", "k8s.io"])
            .args(args)
            .output()
            .expect("ctr");
        assert!(
            out.status.success(),
            "ctr {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits for the ServiceAccount controller to create `default` in `ns`:
    /// as upstream, it appears shortly after the namespace, not with it.
    pub fn wait_for_default_service_account(&self, ns: &str) {
        wait_until(
            Duration::from_secs(30),
            &format!("serviceaccount {ns}/default"),
            || {
                self.kubectl(&["get", "serviceaccount", "default", "-n", ns])
                    .status
                    .success()
            },
        );
    }

    /// Waits until `kubectl auth can-i` answers yes for `as_user` (RBAC
    /// changes and aggregated roles take effect shortly after they are written).
    pub fn wait_until_allowed(&self, as_user: &str, verb: &str, resource: &str, ns: &str) {
        wait_until(
            Duration::from_secs(10),
            &format!("{as_user} may {verb} {resource} in {ns}"),
            || {
                let as_flag = format!("--as={as_user}");
                self.kubectl(&["auth", "can-i", verb, resource, "-n", ns, &as_flag])
                    .status
                    .success()
            },
        );
    }

    pub fn curl(&self, args: &[&str]) -> Output {
        Command::new("curl").args(args).output().expect("run curl")
    }

    /// A JSON request on the plain port; returns (HTTP code, body).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let url = format!("{}{}", self.http, path);
        let mut args = vec![
            "-s",
            "-X",
            method,
            "-H",
            "Accept: application/json",
            "-w",
            "\n%{http_code}",
            &url,
        ];
        let ct = format!("Content-Type: {content_type}");
        // A body past the kernel's argument limit goes through a file.
        let from_file;
        if let Some(b) = body {
            let data = if b.len() > 64 * 1024 {
                let path = self.data_dir.join("request-body");
                std::fs::write(&path, b).expect("write the request body");
                from_file = format!("@{}", path.display());
                from_file.as_str()
            } else {
                b
            };
            args.extend(["-H", &ct, "--data-binary", data]);
        }
        let out = self.curl(&args);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        let v = serde_json::from_str(body).unwrap_or(serde_json::Value::String(body.to_string()));
        (code.trim().parse().unwrap_or(0), v)
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a new process on the same data dir.
    pub fn restart(mut self) -> Server {
        self.kill9();
        let dir = self.data_dir.clone();
        let extra: Vec<String> = std::mem::take(&mut self.extra_args);
        let agent = self.agent;
        // Released here and taken again by the new process's Server.
        drop(self.agent_lock.take());
        std::mem::forget(self);
        let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
        Server::spawn(dir, &refs, agent)
    }
}

/// `berth agent` as its own process, joined to a server (which should run
/// without its own agent): holds the machine-wide agent lock while it runs.
pub struct AgentProcess {
    pub child: Child,
    pub data_dir: PathBuf,
    kubeconfig: PathBuf,
    /// The flags it was started with (after `--data-dir`), for [`AgentProcess::restart`].
    args: Vec<String>,
    _lock: std::fs::File,
}

impl AgentProcess {
    /// Starts `berth agent --kubeconfig <server's>` with `extra` flags.
    pub fn start(server: &Server, tag: &str, extra: &[&str]) -> AgentProcess {
        let kubeconfig = server.kubeconfig.to_string_lossy().into_owned();
        let mut args = vec!["--kubeconfig", kubeconfig.as_str()];
        args.extend_from_slice(extra);
        Self::join(server, tag, &args)
    }

    /// Starts `berth agent` with only `args` to reach `server` (e.g. `--server`,
    /// `--token`, `--server-ca`).
    pub fn join(server: &Server, tag: &str, args: &[&str]) -> AgentProcess {
        let lock = agent_lock();
        let data_dir = temp_dir(tag);
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        with_test_eviction_thresholds(&mut args);
        AgentProcess {
            child: spawn_agent(&data_dir, &args),
            data_dir,
            kubeconfig: server.kubeconfig.clone(),
            args,
            _lock: lock,
        }
    }

    /// Stops the agent (as its Drop does, pods removed) and starts it again
    /// with the same flags on the same data dir; its log goes on.
    pub fn restart(&mut self) {
        let sock = self.data_dir.join("agent/containerd/containerd.sock");
        stop_agent(&self.kubeconfig, &sock, &mut self.child);
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn_agent(&self.data_dir, &self.args);
    }

    /// Waits up to `limit` for the agent to exit; panics if it keeps running.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "berth agent kept running: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The kubeconfig TLS bootstrapping wrote for `component` (`kubelet`,
    /// `kube-proxy`, `berth-ingress`).
    pub fn component_kubeconfig(&self, component: &str) -> PathBuf {
        self.data_dir.join(format!("{component}.kubeconfig"))
    }

    /// kubectl with `component`'s kubeconfig: as that component's user.
    pub fn kubectl_as(&self, component: &str, args: &[&str]) -> Output {
        Command::new(kubectl_path())
            .arg("--kubeconfig")
            .arg(self.component_kubeconfig(component))
            .arg("--cache-dir")
            .arg(self.data_dir.join(format!("kube-cache-{component}")))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl")
    }
}

/// `berth agent --data-dir <data_dir> <args>`, stderr appended to `agent.log`.
fn spawn_agent(data_dir: &Path, args: &[String]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data_dir.join("agent.log"))
        .expect("agent log");
    Command::new(env!("CARGO_BIN_EXE_berth"))
        .arg("agent")
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env("BERTH_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start berth agent")
}

impl AgentProcess {
    /// What the agent wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("agent.log")).unwrap_or_default()
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let sock = self.data_dir.join("agent/containerd/containerd.sock");
        stop_agent(&self.kubeconfig, &sock, &mut self.child);
        let _ = self.child.kill();
        let _ = self.child.wait();
        killall(&self.data_dir);
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.agent {
            let sock = self.data_dir.join("agent/containerd/containerd.sock");
            stop_agent(&self.kubeconfig, &sock, &mut self.child);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.agent {
            killall(&self.data_dir);
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// `berth killall --data-dir`, still under the agent lock: whatever the stop
/// left of this node (pods whose deletion timed out or a server killed with
/// SIGKILL left running, their network namespaces and mounts, the pod bridge
/// and nftables tables) goes, so old pods' IPs never answer for the next
/// server's pods. Tens of milliseconds when there is nothing to do.
pub fn killall(data_dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_berth"))
        .arg("killall")
        .arg("--data-dir")
        .arg(data_dir)
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => eprintln!(
            "berth killall --data-dir {} failed: {}{}",
            data_dir.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => eprintln!("berth killall --data-dir {}: {e}", data_dir.display()),
    }
}

/// Deletes every pod (their containers would outlive containerd and keep mounts
/// in the data dir), waits for the agent's containerd at `sock` to have removed
/// them, then SIGTERMs `child` so it stops the containerd it started.
fn stop_agent(kubeconfig: &Path, sock: &Path, child: &mut Child) {
    let kubectl = |args: &[&str]| {
        let _ = Command::new(kubectl_path())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output();
    };
    // The workload controllers first, or they replace the pods deleted below
    // (a Deployment's pods came back and outlived the server).
    kubectl(&[
        "delete",
        "deployments,replicasets,statefulsets,daemonsets,jobs,cronjobs,replicationcontrollers",
        "--all",
        "-A",
        "--wait=false",
    ]);
    let delete_pods = || {
        kubectl(&[
            "delete",
            "pods",
            "--all",
            "-A",
            "--grace-period=0",
            "--force",
            "--wait=false",
        ])
    };
    delete_pods();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut next_delete = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        // Pods a controller made meanwhile go too.
        if Instant::now() >= next_delete {
            delete_pods();
            next_delete = Instant::now() + Duration::from_secs(3);
        }
        let out = Command::new("ctr")
            .arg("--address")
            .arg(sock)
            .args(["-n", "k8s.io", "containers", "ls", "-q"])
            .output();
        match out {
            Ok(o) if o.status.success() && !o.stdout.is_empty() => {
                std::thread::sleep(Duration::from_millis(200))
            }
            _ => break,
        }
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// POSTs JSON (`data` as curl's `--data-binary` takes it: a body, or `@file`) to
/// `base` + `path`; returns the HTTP code.
pub fn post_code(base: &str, path: &str, data: &str) -> String {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args([
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            data,
        ])
        .arg(format!("{base}{path}"))
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn kubectl_path() -> PathBuf {
    if let Ok(p) = std::env::var("BERTH_KUBECTL") {
        return PathBuf::from(p);
    }
    let v133 = Path::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33");
    if v133.exists() {
        return v133.to_path_buf();
    }
    PathBuf::from("kubectl")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Polls `f` every 200 ms until it holds; panics naming `what` after `limit`.
pub fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out waiting for {what}");
}

/// kind/name → resourceVersion of every ConfigMap and Secret in namespace `ns`,
/// but `kube-root-ca.crt` (a restored server has its own cluster CA, which its
/// root CA publisher writes there): what the backup/restore suites compare.
pub fn resource_versions(s: &Server, ns: &str) -> std::collections::BTreeMap<String, i64> {
    let out = s.k(&[
        "get",
        "configmaps,secrets",
        "-n",
        ns,
        "-o",
        "jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion}{\"\\n\"}{end}",
    ]);
    out.lines()
        .filter_map(|l| {
            let (name, rv) = l.split_once('=')?;
            if name == "ConfigMap/kube-root-ca.crt" {
                return None;
            }
            Some((name.to_string(), rv.parse().ok()?))
        })
        .collect()
}

/// What the backup/restore suites save and read back: namespace `ns` with
/// ConfigMaps `c0`… (`configmaps` of them), a Secret `pw`, and a label on the
/// ConfigMap `moved` (an update, so resourceVersions are not creation order).
pub fn create_backup_objects(s: &Server, ns: &str, configmaps: usize, moved: &str) {
    s.k(&["create", "namespace", ns]);
    for i in 0..configmaps {
        s.k(&[
            "create",
            "configmap",
            &format!("c{i}"),
            "-n",
            ns,
            &format!("--from-literal=i={i}"),
        ]);
    }
    s.k(&[
        "create",
        "secret",
        "generic",
        "pw",
        "-n",
        ns,
        "--from-literal=password=s3cret",
    ]);
    s.k(&["label", "configmap", moved, "-n", ns, "moved=yes"]);
}
