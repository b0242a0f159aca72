//! `berth killall --data-dir`: after a server with a pod is killed with
//! SIGKILL (its pods keep running, as upstream's), killall leaves none of that
//! node's shims, pause processes, network namespaces, mounts, nftables tables,
//! pod bridge or route behind — checked on the machine's real state (`ps`,
//! `ip netns`, `/proc/mounts`, `nft list tables`, `ip route`), and the pod's IP
//! stops answering. A second run has nothing to do.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{Server, stdout, wait_until};

/// A pod serving `body` over HTTP on port 8080, with an emptyDir (a mount).
fn web(body: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: busybox
    command: [sh, -c, 'echo {body} > /tmp/index.html; exec httpd -f -p 8080 -h /tmp']
    volumeMounts:
    - {{name: scratch, mountPath: /scratch}}
  volumes:
  - name: scratch
    emptyDir: {{medium: Memory}}
"
    )
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    stdout(&out)
}

fn killall(data_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_berth"))
        .arg("killall")
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("run berth killall")
}

/// (pid, command line) of every process whose command line names `needle`.
fn processes_naming(needle: &str) -> Vec<(i32, String)> {
    run("ps", &["-eo", "pid=,args="])
        .lines()
        .filter(|l| l.contains(needle) && !l.contains("berth killall"))
        .filter_map(|l| {
            let l = l.trim_start();
            let (pid, args) = l.split_once(' ')?;
            Some((pid.parse().ok()?, args.to_string()))
        })
        .collect()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Children of `parents` (from `ps`).
fn children_of(parents: &[i32]) -> Vec<(i32, String)> {
    run("ps", &["-eo", "pid=,ppid=,args="])
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let pid: i32 = it.next()?.parse().ok()?;
            let ppid: i32 = it.next()?.parse().ok()?;
            parents
                .contains(&ppid)
                .then(|| (pid, it.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

fn mounts_under(dir: &Path) -> Vec<String> {
    let d = dir.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/mounts")
        .expect("/proc/mounts")
        .lines()
        .filter_map(|l| l.split(' ').nth(1).map(String::from))
        .filter(|p| p.starts_with(&d))
        .collect()
}

/// What the pod at `ip` serves (empty when nothing answers).
fn http_get(ip: &str) -> String {
    let out = run(
        "curl",
        &["-s", "-m", "2", &format!("http://{ip}:8080/index.html")],
    );
    out.trim().to_string()
}

fn http_ok(ip: &str) -> bool {
    http_get(ip) == "ok"
}

/// A server with its node agent, Ready, running [`web`] with `body`; the pod's IP.
fn start_web(tag: &str, body: &str) -> (Server, String) {
    let s = Server::start_with_agent(tag);
    s.wait_node_ready(Duration::from_secs(60));
    let out = s.kubectl_stdin(&["apply", "-f", "-"], Some(&web(body)));
    assert!(out.status.success(), "{}", common::stderr(&out));
    wait_until(Duration::from_secs(60), "pod web Running", || {
        stdout(&s.kubectl(&["get", "pod", "web", "-o", "jsonpath={.status.phase}"])) == "Running"
    });
    let ip = s.k(&["get", "pod", "web", "-o", "jsonpath={.status.podIP}"]);
    wait_until(
        Duration::from_secs(20),
        "the pod answering on its IP",
        || http_get(&ip) == body,
    );
    (s, ip)
}

/// The server killed with SIGKILL, its containerd still running: killall
/// stops the pods through it (CNI DEL), then stops it.
#[test]
fn killall_after_kill9_leaves_nothing_of_the_node() {
    kill9_then_killall("killall", false);
}

/// Server and containerd both killed with SIGKILL: only the shims, pause and
/// containers are left, and killall has to kill them and clean up after them
/// itself (netns, rootfs and shm mounts, cgroups, IPs).
#[test]
fn killall_without_containerd_kills_the_shims_itself() {
    kill9_then_killall("killall-shims", true);
}

fn kill9_then_killall(tag: &str, kill_containerd: bool) {
    let (mut s, ip) = start_web(tag, "ok");
    let cidr = s.k(&["get", "nodes", "-o", "jsonpath={.items[0].spec.podCIDR}"]);
    let dir = s.data_dir.clone();
    let sock = dir.join("agent/containerd/containerd.sock");
    let sock = sock.to_string_lossy().into_owned();

    // What the node made, seen before: the test looks for these afterwards.
    let shims: Vec<i32> = processes_naming(&sock)
        .into_iter()
        .filter(|(_, a)| a.contains("containerd-shim"))
        .map(|(p, _)| p)
        .collect();
    assert!(!shims.is_empty(), "no containerd-shim for {sock}");
    let pauses: Vec<i32> = children_of(&shims)
        .into_iter()
        .filter(|(_, a)| a.contains("pause"))
        .map(|(p, _)| p)
        .collect();
    assert!(!pauses.is_empty(), "no pause process under the shims");
    let netns_before: Vec<String> = run("ip", &["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    let pod_netns: Vec<String> = netns_before
        .iter()
        .filter(|n| n.starts_with("cni-"))
        .filter(|n| {
            // The namespace the pause process is in.
            let ns = std::fs::metadata(format!("/run/netns/{n}"))
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .ok();
            let pause = std::fs::read_link(format!("/proc/{}/ns/net", pauses[0]))
                .map(|l| l.to_string_lossy().into_owned())
                .unwrap_or_default();
            ns.is_some_and(|i| pause == format!("net:[{i}]"))
        })
        .cloned()
        .collect();
    assert_eq!(pod_netns.len(), 1, "the pod's netns among {netns_before:?}");
    assert!(
        !mounts_under(&dir).is_empty(),
        "no mounts under the data dir"
    );
    let tables = run("nft", &["list", "tables"]);
    assert!(tables.contains("table ip berth-proxy"), "{tables}");
    let routes = run("ip", &["route", "show", "dev", "berth0"]);
    assert!(routes.contains(cidr.trim()), "{routes}");

    // SIGKILL: the server goes, its pods stay (as upstream's kubelet).
    s.kill9();
    if kill_containerd {
        let config = dir.join("agent/containerd/config.toml");
        let containerd: Vec<i32> = processes_naming(&config.to_string_lossy())
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(containerd.len(), 1, "Berth's containerd: {containerd:?}");
        run("kill", &["-9", &containerd[0].to_string()]);
        wait_until(Duration::from_secs(10), "containerd gone", || {
            !alive(containerd[0])
        });
    }
    assert!(
        shims.iter().all(|p| alive(*p)),
        "shims went with the server"
    );
    assert!(http_ok(&ip), "the pod stopped answering with the server");

    let t = std::time::Instant::now();
    let out = killall(&dir);
    let took = t.elapsed();
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "killall failed: {}\n{text}",
        common::stderr(&out)
    );
    eprintln!("berth killall --data-dir took {took:?}:\n{text}");
    if kill_containerd {
        assert!(
            text.contains("killed") && text.contains("containerd-shim"),
            "{text}"
        );
    }

    let left = processes_naming(&dir.to_string_lossy());
    assert!(left.is_empty(), "processes of the data dir left: {left:?}");
    let alive_pids: Vec<i32> = shims
        .iter()
        .chain(&pauses)
        .copied()
        .filter(|p| alive(*p))
        .collect();
    assert!(
        alive_pids.is_empty(),
        "shim/pause still alive: {alive_pids:?}"
    );
    let netns_after = run("ip", &["netns", "list"]);
    for n in &pod_netns {
        assert!(!netns_after.contains(n.as_str()), "{n} left: {netns_after}");
    }
    let mounts = mounts_under(&dir);
    assert!(mounts.is_empty(), "mounts left: {mounts:?}");
    let tables = run("nft", &["list", "tables"]);
    assert!(
        !tables.contains("berth-proxy") && !tables.contains("berth-netpol"),
        "nft tables left: {tables}"
    );
    let routes = run("ip", &["route"]);
    assert!(
        !routes.contains("berth0") && !routes.contains(cidr.trim()),
        "routes left: {routes}"
    );
    assert!(!Path::new("/sys/class/net/berth0").exists(), "berth0 left");
    assert!(!http_ok(&ip), "the old pod still answers on {ip}");
    let ipam = dir.join("agent/cni/ipam/berth");
    let held: Vec<String> = std::fs::read_dir(&ipam)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.parse::<std::net::Ipv4Addr>().is_ok())
        .collect();
    assert!(held.is_empty(), "IPs still allocated: {held:?}");

    // Idempotent: a second run finds nothing and says so.
    let again = killall(&dir);
    assert!(again.status.success(), "{}", common::stderr(&again));
    assert!(
        stdout(&again).contains("Nothing to do"),
        "{}",
        stdout(&again)
    );
    if !kill_containerd {
        return;
    }

    // The next server on this machine gets the same pod IP: only its own pod
    // answers there (before killall, the old pod kept the IP and answered ARP).
    drop(s);
    let (_s2, ip2) = start_web(&format!("{tag}-next"), "new");
    assert_eq!(ip2, ip, "the next server's pod got another IP");
    for _ in 0..10 {
        assert_eq!(http_get(&ip2), "new", "another pod answered on {ip2}");
    }
}

#[test]
fn killall_needs_root() {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_berth"))
        .args(["killall", "--data-dir", "/nonexistent"])
        .output()
        .expect("run setpriv (util-linux)");
    assert!(!out.status.success());
    let err = common::stderr(&out);
    assert!(err.contains("berth killall must run as root"), "{err}");
}
