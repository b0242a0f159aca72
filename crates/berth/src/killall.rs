//! `berth killall`: stop everything a Berth node made on this machine, as
//! k3s-killall.sh does for k3s. A stopped `berth server`/`berth agent` leaves
//! its pods running (as upstream's kubelet does), with their pod IPs still
//! answering on the pod bridge; this is the way to a clean machine.
//!
//! In order: the `berth server`/`berth agent` processes (SIGTERM, then
//! SIGKILL), every pod sandbox through the node's containerd while it still
//! answers (CRI StopPodSandbox/RemovePodSandbox: CNI DEL releases the IP,
//! removes the veth and the network namespace), every containerd-shim left
//! and the processes under it (containers, pause), Berth's containerd, then
//! what they leave behind: CNI network namespaces, mounts under the data dir,
//! pod cgroups, host-local IP allocations and CNI result caches, and the
//! node-wide networking (the `berth0` bridge with its pod route, the
//! `nodelocaldns` link, the nftables tables `ip berth-proxy` and
//! `inet berth-netpol`).
//!
//! `--data-dir` limits it to one node's things: processes whose socket,
//! config or `--data-dir` is that data dir, the network namespaces and
//! cgroups its pods were in, mounts under it. The node-wide networking is
//! then removed only when no other Berth node runs on the machine.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

/// The data dir `berth server`/`berth agent` use without `--data-dir`.
const DEFAULT_DATA_DIR: &str = "/var/lib/berth";
/// Where iproute2 and containerd pin network namespaces.
const NETNS_DIR: &str = "/run/netns";
/// libcni's cache of ADD results (one file per container and network).
const CNI_RESULTS_DIR: &str = "/var/lib/cni/results";
/// The first line containerd's config gets from Berth.
const CONFIG_HEADER: &str = "# Written by Berth";
/// nftables tables Berth programs: (family, name).
const NFT_TABLES: [(&str, &str); 2] = [("ip", berth_proxy::TABLE), ("inet", berth_netpol::TABLE)];
/// Links Berth creates in the host network namespace.
const LINKS: [&str; 2] = [
    berth_kubelet::cni::BRIDGE,
    berth_dns::nodelocal::DEFAULT_INTERFACE,
];
/// NodeLocal DNSCache's default address, on `lo` where dummy links are missing.
const NODE_LOCAL_DNS_ADDR: &str = "169.254.20.10/32";

#[derive(clap::Args, Debug)]
pub struct KillallArgs {
    /// Only what the node on this data dir made (its processes, containerd,
    /// pods' network namespaces, mounts and cgroups); without it, every Berth
    /// node on this machine.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// What killall acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Scope {
    Machine,
    DataDir(PathBuf),
}

impl Scope {
    fn covers(&self, data_dir: &Path) -> bool {
        match self {
            Scope::Machine => true,
            Scope::DataDir(d) => same_path(d, data_dir),
        }
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || canon(a) == canon(b)
}

/// One process from `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Proc {
    pid: i32,
    ppid: i32,
    argv: Vec<String>,
}

impl Proc {
    fn program(&self) -> &str {
        self.argv
            .first()
            .map(|a| a.rsplit('/').next().unwrap_or(a))
            .unwrap_or("")
    }

    /// The value of `flag` (`flag V` or `flag=V`).
    fn flag(&self, flag: &str) -> Option<&str> {
        let mut it = self.argv.iter().skip(1);
        while let Some(a) = it.next() {
            if a == flag {
                return it.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
        None
    }
}

/// What a process is to Berth.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    /// `berth server` or `berth agent` on a data dir; `node` when it runs a node
    /// agent (a server without `--disable-agent`, or an agent).
    Berth { data_dir: PathBuf, node: bool },
    /// containerd started with Berth's config in `<data_dir>/agent/containerd`.
    Containerd { data_dir: PathBuf },
    /// A containerd-shim serving Berth's containerd of `data_dir`.
    Shim { data_dir: PathBuf },
}

/// `<data_dir>` from `<data_dir>/agent/containerd/<file>`.
fn data_dir_of_containerd_file(p: &Path, file: &str) -> Option<PathBuf> {
    if p.file_name()? != file {
        return None;
    }
    let containerd = p.parent()?;
    let agent = containerd.parent()?;
    if containerd.file_name()? != "containerd" || agent.file_name()? != "agent" {
        return None;
    }
    Some(agent.parent()?.to_path_buf())
}

/// Classifies a process; `berth_config` says whether a containerd config file
/// is one Berth wrote.
fn role(p: &Proc, berth_config: &dyn Fn(&Path) -> bool) -> Option<Role> {
    let program = p.program();
    if program == "berth" {
        let sub = p.argv.get(1).map(String::as_str)?;
        if sub != "server" && sub != "agent" {
            return None;
        }
        let data_dir = PathBuf::from(p.flag("--data-dir").unwrap_or(DEFAULT_DATA_DIR));
        let node = sub == "agent" || !p.argv.iter().any(|a| a == "--disable-agent");
        return Some(Role::Berth { data_dir, node });
    }
    if program == "containerd" {
        let config = Path::new(p.flag("--config").or_else(|| p.flag("-c"))?);
        let data_dir = data_dir_of_containerd_file(config, "config.toml")?;
        return berth_config(config).then_some(Role::Containerd { data_dir });
    }
    if program.starts_with("containerd-shim") {
        let sock = Path::new(p.flag("-address")?);
        let data_dir = data_dir_of_containerd_file(sock, "containerd.sock")?;
        let config = sock.with_file_name("config.toml");
        return berth_config(&config).then_some(Role::Shim { data_dir });
    }
    None
}

fn is_berth_config(path: &Path) -> bool {
    match std::fs::read_to_string(path) {
        Ok(text) => text.starts_with(CONFIG_HEADER),
        // Gone with its data dir: the path's shape is all there is to go by.
        Err(_) => true,
    }
}

/// Every process in `/proc` (those that vanish meanwhile are skipped).
fn read_procs() -> Vec<Proc> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(ppid) = parse_ppid(&stat) else {
            continue;
        };
        let argv = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        out.push(Proc { pid, ppid, argv });
    }
    out
}

/// The parent pid from `/proc/<pid>/stat` (after the parenthesised command,
/// which may itself hold spaces and parentheses).
fn parse_ppid(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `roots` and every process below them, children before parents.
fn process_trees(procs: &[Proc], roots: &[i32]) -> Vec<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for p in procs {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    fn visit(
        pid: i32,
        children: &BTreeMap<i32, Vec<i32>>,
        seen: &mut BTreeSet<i32>,
        order: &mut Vec<i32>,
    ) {
        if !seen.insert(pid) {
            return;
        }
        for c in children.get(&pid).into_iter().flatten() {
            visit(*c, children, seen, order);
        }
        order.push(pid);
    }
    for r in roots {
        visit(*r, &children, &mut seen, &mut order);
    }
    order
}

fn alive(pid: i32) -> bool {
    // A zombie has exited; only its parent's wait is missing.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory effects; a vanished pid is ESRCH.
    unsafe { libc::kill(pid, sig) };
}

/// Waits until none of `pids` is alive or `limit` passes; those still alive.
fn wait_gone(pids: &[i32], limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM, then SIGKILL after `grace`; waits for them to go.
fn terminate(pids: &[i32], grace: Duration) -> Vec<i32> {
    for p in pids {
        signal(*p, libc::SIGTERM);
    }
    let left = wait_gone(pids, grace);
    for p in &left {
        signal(*p, libc::SIGKILL);
    }
    wait_gone(&left, Duration::from_secs(5))
}

/// The network namespace inode of a process (`net:[N]`).
fn netns_inode(pid: i32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()?;
    parse_ns_link(&link.to_string_lossy())
}

fn parse_ns_link(link: &str) -> Option<u64> {
    link.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// One line of `/proc/self/mountinfo`: mount root, mount point, fs type and
/// super options (octal escapes undone).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    root: String,
    point: String,
    fstype: String,
    super_opts: String,
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            Some(Mount {
                root: berth_csi::hostpath::mount::unescape_octal(pre.get(3)?),
                point: berth_csi::hostpath::mount::unescape_octal(pre.get(4)?),
                fstype: post.first()?.to_string(),
                super_opts: post.get(2).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

fn mounts() -> Vec<Mount> {
    parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// Mount points at or under `dir`, deepest (latest mounted) first.
fn mounts_under(mounts: &[Mount], dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = mounts
        .iter()
        .filter(|m| Path::new(&m.point).starts_with(dir))
        .map(|m| m.point.clone())
        .collect();
    out.reverse();
    out.dedup();
    out
}

fn umount_detach(point: &str) -> std::io::Result<()> {
    let c = std::ffi::CString::new(point).map_err(std::io::Error::other)?;
    // SAFETY: a NUL-terminated path; umount2 reads it only.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The cgroup directories (in every hierarchy) of a process, from the text
/// of `/proc/<pid>/cgroup` and the cgroup mounts.
fn cgroup_dirs(proc_cgroup: &str, mounts: &[Mount]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let mount = mounts.iter().find(|m| {
            if ctrls.is_empty() {
                m.fstype == "cgroup2"
            } else {
                m.fstype == "cgroup"
                    && ctrls
                        .split(',')
                        .all(|c| m.super_opts.split(',').any(|o| o == c))
            }
        });
        let Some(m) = mount else { continue };
        let rel = path.strip_prefix(m.root.as_str()).unwrap_or(path);
        out.push(Path::new(&m.point).join(rel.trim_start_matches('/')));
    }
    out
}

/// Removes the cgroup dirs pods were in (only below a `berth` cgroup), then
/// their pod cgroup when empty; how many went.
fn remove_cgroups(dirs: &BTreeSet<PathBuf>) -> usize {
    let mut removed = 0;
    let mut parents = BTreeSet::new();
    for d in dirs.iter().rev() {
        if !d.components().any(|c| c.as_os_str() == "berth") {
            continue;
        }
        if rmdir_retry(d) {
            removed += 1;
        }
        if let Some(p) = d.parent().filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("pod"))
        }) {
            parents.insert(p.to_path_buf());
        }
    }
    for p in parents.iter().rev() {
        if rmdir_retry(p) {
            removed += 1;
        }
    }
    removed
}

/// rmdir, retried briefly while the kernel still counts exiting tasks.
fn rmdir_retry(d: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match std::fs::remove_dir(d) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                eprintln!("warning: cgroup {} not removed: {e}", d.display());
                return false;
            }
        }
    }
}

/// The data dir a libcni result cache entry belongs to: its network config's
/// host-local `dataDir` is `<data_dir>/agent/cni/ipam`.
fn cni_result_data_dir(text: &str) -> Option<PathBuf> {
    use base64::Engine;
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let config = base64::engine::general_purpose::STANDARD
        .decode(v.get("config")?.as_str()?)
        .ok()?;
    let config: serde_json::Value = serde_json::from_slice(&config).ok()?;
    let plugins = config.get("plugins")?.as_array()?;
    let ipam = plugins
        .iter()
        .find_map(|p| p.get("ipam")?.get("dataDir")?.as_str())?;
    let ipam = Path::new(ipam);
    if ipam.file_name()? != "ipam" {
        return None;
    }
    let cni = ipam.parent()?;
    let agent = cni.parent()?;
    (cni.file_name()? == "cni" && agent.file_name()? == "agent")
        .then(|| agent.parent().map(Path::to_path_buf))
        .flatten()
}

fn command_ok(program: &str, args: &[&str]) -> std::io::Result<std::process::Output> {
    std::process::Command::new(program).args(args).output()
}

/// What was done, for the summary.
#[derive(Default)]
struct Report {
    lines: Vec<String>,
}

impl Report {
    fn did(&mut self, what: String) {
        println!("{what}");
        self.lines.push(what);
    }
}

pub async fn run(args: KillallArgs) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "berth killall must run as root: it stops containers and removes network namespaces, mounts, cgroups and nftables tables"
        );
    }
    let scope = match &args.data_dir {
        Some(d) => Scope::DataDir(std::path::absolute(d)?),
        None => Scope::Machine,
    };
    let k = Killall {
        me: std::process::id() as i32,
        scope,
    };
    let mut report = Report::default();
    // Data dirs as first seen, before their processes go.
    let first = k.roles();
    k.stop_berth_processes(&first, &mut report);
    let containerd_dirs = k.stop_pods_through_containerd(&mut report).await;
    let pods = k.kill_shims(&mut report);
    k.stop_containerd(&mut report);
    k.remove_netns(&pods.netns, &mut report);
    let data_dirs = scope_data_dirs(&k.scope, &first, &containerd_dirs);
    for dir in &data_dirs {
        unmount_under(dir, &mut report);
    }
    let removed = remove_cgroups(&pods.cgroups);
    if removed > 0 {
        report.did(format!("removed {removed} pod cgroup dir(s)"));
    }
    for dir in &data_dirs {
        release_ips(dir, &mut report);
    }
    let caches = remove_cni_results(&k.scope);
    if caches > 0 {
        report.did(format!(
            "removed {caches} CNI result cache(s) in {CNI_RESULTS_DIR}"
        ));
    }
    // Node-wide networking, unless another Berth node still uses it.
    let procs = read_procs();
    let others = other_nodes(&procs, &classify(&procs, k.me));
    if others.is_empty() {
        remove_node_networking(&mut report);
    } else {
        println!(
            "kept the {} bridge, the nodelocaldns link and the nftables tables: another Berth node runs here (process {})",
            berth_kubelet::cni::BRIDGE,
            pid_list(&others)
        );
    }
    if report.lines.is_empty() {
        match &k.scope {
            Scope::Machine => println!(
                "Nothing to do: no Berth processes, pods, network namespaces, mounts, nftables tables or links on this machine."
            ),
            Scope::DataDir(d) => println!(
                "Nothing to do: no Berth processes, pods, network namespaces or mounts of {} on this machine.",
                d.display()
            ),
        }
    }
    Ok(())
}

/// One run: what it acts on, and its own pid (never a target).
struct Killall {
    me: i32,
    scope: Scope,
}

/// What the killed pods' processes were in.
struct PodTraces {
    netns: BTreeSet<u64>,
    cgroups: BTreeSet<PathBuf>,
}

impl Killall {
    fn roles(&self) -> Vec<(i32, Role)> {
        classify(&read_procs(), self.me)
    }

    /// Pids of the processes in scope with a role `which` accepts.
    fn pids(&self, roles: &[(i32, Role)], which: impl Fn(&Role) -> Option<&Path>) -> Vec<i32> {
        roles
            .iter()
            .filter(|(_, r)| which(r).is_some_and(|d| self.scope.covers(d)))
            .map(|(p, _)| *p)
            .collect()
    }

    /// `berth server`/`berth agent` first, so nothing restarts what follows.
    fn stop_berth_processes(&self, roles: &[(i32, Role)], report: &mut Report) {
        let berths = self.pids(roles, |r| match r {
            Role::Berth { data_dir, .. } => Some(data_dir),
            _ => None,
        });
        if berths.is_empty() {
            return;
        }
        let left = terminate(&berths, Duration::from_secs(10));
        report.did(format!(
            "stopped berth server/agent process(es) {}",
            pid_list(&berths)
        ));
        if !left.is_empty() {
            eprintln!("warning: still running: {}", pid_list(&left));
        }
    }

    /// Pod sandboxes through each containerd in scope while it answers, so
    /// CNI DEL runs; the containerds' data dirs.
    async fn stop_pods_through_containerd(&self, report: &mut Report) -> Vec<PathBuf> {
        let dirs: Vec<PathBuf> = self
            .roles()
            .into_iter()
            .filter_map(|(_, r)| match r {
                Role::Containerd { data_dir } if self.scope.covers(&data_dir) => Some(data_dir),
                _ => None,
            })
            .collect();
        for data_dir in &dirs {
            let sock = data_dir.join("agent/containerd/containerd.sock");
            match stop_sandboxes(&sock).await {
                Ok(names) if names.is_empty() => {}
                Ok(names) => report.did(format!(
                    "stopped and removed {} pod sandbox(es) through {}: {}",
                    names.len(),
                    sock.display(),
                    names.join(", ")
                )),
                Err(e) => eprintln!(
                    "warning: pod sandboxes not stopped through {}: {e}",
                    sock.display()
                ),
            }
        }
        dirs
    }

    /// SIGKILL to every shim left and what runs under it (containers,
    /// pause); the network namespaces and cgroups those were in.
    fn kill_shims(&self, report: &mut Report) -> PodTraces {
        let procs = read_procs();
        let shims = self.pids(&classify(&procs, self.me), |r| match r {
            Role::Shim { data_dir } => Some(data_dir),
            _ => None,
        });
        let tree = process_trees(&procs, &shims);
        let all_mounts = mounts();
        let mut traces = PodTraces {
            netns: BTreeSet::new(),
            cgroups: BTreeSet::new(),
        };
        for pid in &tree {
            // Only what runs in a pod: the shims themselves live in the host's.
            if shims.contains(pid) {
                continue;
            }
            traces.netns.extend(netns_inode(*pid));
            if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
                traces.cgroups.extend(cgroup_dirs(&text, &all_mounts));
            }
        }
        if let Some(host) = netns_inode(self.me) {
            traces.netns.remove(&host);
        }
        if tree.is_empty() {
            return traces;
        }
        for pid in &tree {
            signal(*pid, libc::SIGKILL);
        }
        let left = wait_gone(&tree, Duration::from_secs(5));
        report.did(format!(
            "killed {} process(es) under {} containerd-shim(s)",
            tree.len() - shims.len(),
            shims.len()
        ));
        if !left.is_empty() {
            eprintln!("warning: still running: {}", pid_list(&left));
        }
        traces
    }

    fn stop_containerd(&self, report: &mut Report) {
        let pids = self.pids(&self.roles(), |r| match r {
            Role::Containerd { data_dir } => Some(data_dir),
            _ => None,
        });
        if pids.is_empty() {
            return;
        }
        let left = terminate(&pids, Duration::from_secs(10));
        report.did(format!("stopped containerd {}", pid_list(&pids)));
        if !left.is_empty() {
            eprintln!("warning: containerd still running: {}", pid_list(&left));
        }
    }

    /// The pods' network namespaces (by inode); machine-wide also every CNI
    /// (`cni-*`) namespace no process is in any more.
    fn remove_netns(&self, pods: &BTreeSet<u64>, report: &mut Report) {
        let in_use: BTreeSet<u64> = read_procs()
            .iter()
            .filter_map(|p| netns_inode(p.pid))
            .collect();
        for entry in std::fs::read_dir(NETNS_DIR).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(meta) = std::fs::metadata(entry.path()) else {
                continue;
            };
            let ours = pods.contains(&meta.ino())
                || (self.scope == Scope::Machine
                    && name.starts_with("cni-")
                    && !in_use.contains(&meta.ino()));
            if !ours {
                continue;
            }
            let path = entry.path();
            let _ = umount_detach(&path.to_string_lossy());
            match std::fs::remove_file(&path) {
                Ok(()) => report.did(format!("removed network namespace {name}")),
                Err(e) => eprintln!("warning: network namespace {name} not removed: {e}"),
            }
        }
    }
}

/// Every mount under `dir`, innermost first; a further pass catches what a
/// propagated mount brought back.
fn unmount_under(dir: &Path, report: &mut Report) {
    let mut count = 0;
    for _ in 0..3 {
        let points = mounts_under(&mounts(), dir);
        if points.is_empty() {
            break;
        }
        for p in points {
            match umount_detach(&p) {
                Ok(()) => count += 1,
                Err(e) => eprintln!("warning: {p} not unmounted: {e}"),
            }
        }
    }
    if count > 0 {
        report.did(format!(
            "unmounted {count} mount(s) under {}",
            dir.display()
        ));
    }
}

/// host-local's allocations of the node's pods (all of them are gone now).
fn release_ips(dir: &Path, report: &mut Report) {
    let ipam = dir.join("agent/cni/ipam");
    let network = ipam.join(berth_kubelet::cni::NETWORK);
    let released: Vec<String> = berth_kubelet::cni::allocated_ips(&ipam)
        .into_iter()
        .filter(|ip| std::fs::remove_file(network.join(ip)).is_ok())
        .collect();
    if !released.is_empty() {
        report.did(format!(
            "released pod IP(s) {} of {}",
            released.join(", "),
            dir.display()
        ));
    }
}

/// Processes of Berth nodes still running: `berth server` with its agent,
/// `berth agent`, and containerds a live Berth process supervises. An orphaned
/// containerd (its berth process gone, often its data dir too) is a leftover,
/// not a node.
fn other_nodes(procs: &[Proc], roles: &[(i32, Role)]) -> Vec<i32> {
    let berths: BTreeSet<i32> = roles
        .iter()
        .filter(|(_, r)| matches!(r, Role::Berth { .. }))
        .map(|(p, _)| *p)
        .collect();
    let parent = |pid: i32| procs.iter().find(|p| p.pid == pid).map(|p| p.ppid);
    roles
        .iter()
        .filter(|(pid, r)| match r {
            Role::Berth { node, .. } => *node,
            Role::Containerd { .. } => parent(*pid).is_some_and(|pp| berths.contains(&pp)),
            Role::Shim { .. } => false,
        })
        .map(|(p, _)| *p)
        .collect()
}

fn pid_list(pids: &[i32]) -> String {
    pids.iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn classify(procs: &[Proc], me: i32) -> Vec<(i32, Role)> {
    procs
        .iter()
        .filter(|p| p.pid != me)
        .filter_map(|p| role(p, &is_berth_config).map(|r| (p.pid, r)))
        .collect()
}

/// The data dirs whose mounts and IP allocations go: the one named, or
/// machine-wide every one a Berth process or containerd used, and the default.
fn scope_data_dirs(scope: &Scope, roles: &[(i32, Role)], containerds: &[PathBuf]) -> Vec<PathBuf> {
    match scope {
        Scope::DataDir(d) => vec![d.clone()],
        Scope::Machine => {
            let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
            dirs.insert(PathBuf::from(DEFAULT_DATA_DIR));
            dirs.extend(containerds.iter().cloned());
            for (_, r) in roles {
                match r {
                    Role::Berth { data_dir, .. }
                    | Role::Containerd { data_dir }
                    | Role::Shim { data_dir } => {
                        dirs.insert(data_dir.clone());
                    }
                }
            }
            // Mounts of containerd's state wherever a data dir was.
            for m in mounts() {
                if let Some(i) = m.point.find("/agent/containerd/") {
                    dirs.insert(PathBuf::from(&m.point[..i]));
                }
            }
            dirs.into_iter().collect()
        }
    }
}

/// libcni's cached results of Berth's network (and containerd's loopback
/// entries of the same containers) for the data dirs in scope.
fn remove_cni_results(scope: &Scope) -> usize {
    let mut ids = BTreeSet::new();
    let mut removed = 0;
    let entries: Vec<_> = std::fs::read_dir(CNI_RESULTS_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    let prefix = format!("{}-", berth_kubelet::cni::NETWORK);
    for e in &entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let ours = match cni_result_data_dir(&text) {
            Some(d) => scope.covers(&d),
            None => *scope == Scope::Machine,
        };
        if ours && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
            if let Some((id, _)) = rest.rsplit_once('-') {
                ids.insert(id.to_string());
            }
        }
    }
    for e in &entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let loopback = name
            .strip_prefix("cni-loopback-")
            .and_then(|r| r.rsplit_once('-'))
            .is_some_and(|(id, _)| ids.contains(id));
        if loopback && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// StopPodSandbox and RemovePodSandbox for every sandbox; their names.
async fn stop_sandboxes(sock: &Path) -> Result<Vec<String>> {
    use berth_kubelet::runtime::{Filter, Runtime};
    if tokio::net::UnixStream::connect(sock).await.is_err() {
        return Ok(Vec::new());
    }
    let rt = berth_kubelet::cri::CriRuntime::connect(sock)?;
    let work = async {
        let mut names = Vec::new();
        for s in rt.list_sandboxes(&Filter::default()).await? {
            rt.stop_sandbox(&s.id).await?;
            rt.remove_sandbox(&s.id).await?;
            names.push(format!("{}/{}", s.namespace, s.name));
        }
        anyhow::Ok(names)
    };
    match tokio::time::timeout(Duration::from_secs(30), work).await {
        Ok(r) => r,
        Err(_) => bail!("containerd did not answer within 30 s"),
    }
}

/// The `berth0` bridge (its pod route goes with it), the nodelocaldns link or
/// address, and Berth's nftables tables.
fn remove_node_networking(report: &mut Report) {
    for link in LINKS {
        if !Path::new("/sys/class/net").join(link).exists() {
            continue;
        }
        match command_ok("ip", &["link", "del", link]) {
            Ok(o) if o.status.success() => report.did(format!("removed link {link}")),
            Ok(o) => eprintln!(
                "warning: ip link del {link}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => eprintln!("warning: ip link del {link}: {e}"),
        }
    }
    if let Ok(o) = command_ok("ip", &["-o", "addr", "show", "dev", "lo"])
        && String::from_utf8_lossy(&o.stdout).contains(NODE_LOCAL_DNS_ADDR)
        && command_ok("ip", &["addr", "del", NODE_LOCAL_DNS_ADDR, "dev", "lo"])
            .is_ok_and(|o| o.status.success())
    {
        report.did(format!("removed address {NODE_LOCAL_DNS_ADDR} from lo"));
    }
    let tables = match command_ok("nft", &["list", "tables"]) {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        // No nft: Berth could not have made tables either.
        _ => return,
    };
    for (family, name) in NFT_TABLES {
        if !tables
            .lines()
            .any(|l| l.trim() == format!("table {family} {name}"))
        {
            continue;
        }
        match command_ok("nft", &["delete", "table", family, name]) {
            Ok(o) if o.status.success() => {
                report.did(format!("removed nftables table {family} {name}"))
            }
            Ok(o) => eprintln!(
                "warning: nft delete table {family} {name}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => eprintln!("warning: nft delete table {family} {name}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: i32, ppid: i32, argv: &str) -> Proc {
        Proc {
            pid,
            ppid,
            argv: argv.split(' ').map(String::from).collect(),
        }
    }

    #[test]
    fn roles_from_command_lines() {
        let yes = |_: &Path| true;
        let no = |_: &Path| false;
        let d = |s: &str| PathBuf::from(s);
        type IsBerthConfig<'a> = &'a dyn Fn(&Path) -> bool;
        let cases: Vec<(&str, IsBerthConfig, Option<Role>)> = vec![
            (
                "/x/berth server --data-dir /tmp/a --disable-agent",
                &yes,
                Some(Role::Berth {
                    data_dir: d("/tmp/a"),
                    node: false,
                }),
            ),
            (
                "berth server --data-dir=/tmp/a",
                &yes,
                Some(Role::Berth {
                    data_dir: d("/tmp/a"),
                    node: true,
                }),
            ),
            (
                "berth agent --kubeconfig k",
                &yes,
                Some(Role::Berth {
                    data_dir: d(DEFAULT_DATA_DIR),
                    node: true,
                }),
            ),
            ("berth killall --data-dir /tmp/a", &yes, None),
            ("berth", &yes, None),
            (
                "/usr/bin/containerd --config /tmp/a/agent/containerd/config.toml",
                &yes,
                Some(Role::Containerd {
                    data_dir: d("/tmp/a"),
                }),
            ),
            // Not Berth's config, or not Berth's layout: someone else's containerd.
            (
                "/usr/bin/containerd --config /tmp/a/agent/containerd/config.toml",
                &no,
                None,
            ),
            (
                "/usr/bin/containerd --config /etc/containerd/config.toml",
                &yes,
                None,
            ),
            ("/usr/bin/containerd", &yes, None),
            (
                "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id abc -address /tmp/a/agent/containerd/containerd.sock",
                &yes,
                Some(Role::Shim {
                    data_dir: d("/tmp/a"),
                }),
            ),
            (
                "/usr/bin/containerd-shim-runc-v2 -namespace moby -id abc -address /run/containerd/containerd.sock",
                &yes,
                None,
            ),
            ("/pause", &yes, None),
        ];
        for (argv, cfg, want) in cases {
            assert_eq!(role(&proc(1, 0, argv), cfg), want, "{argv}");
        }
    }

    #[test]
    fn other_nodes_are_live_berth_nodes_not_leftovers() {
        let procs = [
            proc(1, 0, "init"),
            proc(10, 1, "berth server --data-dir /a"),
            proc(
                11,
                10,
                "containerd --config /a/agent/containerd/config.toml",
            ),
            proc(20, 1, "berth server --data-dir /b --disable-agent"),
            proc(30, 1, "containerd --config /c/agent/containerd/config.toml"),
            proc(40, 1, "berth agent --data-dir /d"),
        ];
        let roles: Vec<(i32, Role)> = procs
            .iter()
            .filter_map(|p| role(p, &|_: &Path| true).map(|r| (p.pid, r)))
            .collect();
        assert_eq!(other_nodes(&procs, &roles), [10, 11, 40]);
    }

    #[test]
    fn ppid_from_stat_with_odd_command_names() {
        let cases = [
            ("12 (pause) S 7 12 12 0 -1", Some(7)),
            ("12 (a) b (c)) R 99 1 1", Some(99)),
            ("garbage", None),
        ];
        for (stat, want) in cases {
            assert_eq!(parse_ppid(stat), want, "{stat}");
        }
    }

    #[test]
    fn process_trees_list_children_before_parents() {
        let procs = [
            proc(1, 0, "init"),
            proc(10, 1, "shim"),
            proc(11, 10, "pause"),
            proc(12, 10, "nginx"),
            proc(13, 12, "worker"),
            proc(20, 1, "other"),
        ];
        let order = process_trees(&procs, &[10]);
        assert_eq!(order.len(), 4);
        let at = |p| order.iter().position(|x| *x == p).unwrap();
        assert!(at(13) < at(12) && at(12) < at(10) && at(11) < at(10));
        assert!(!order.contains(&20) && !order.contains(&1));
        assert!(process_trees(&procs, &[]).is_empty());
    }

    const MOUNTINFO: &str = "\
22 1 0:21 / /proc rw - proc proc rw
30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
33 25 0:29 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd
40 1 0:40 / /tmp/a/agent/containerd/state/x/rootfs rw - overlay overlay rw,lowerdir=l
41 1 0:41 / /tmp/a/agent/containerd/state/x/shm rw - tmpfs shm rw
42 1 0:42 / /tmp/ab/agent/pods/p rw - tmpfs tmpfs rw
43 1 0:43 / /tmp/a\\040b/x rw - tmpfs tmpfs rw
";

    #[test]
    fn mounts_under_a_data_dir_innermost_first_and_not_its_neighbours() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(
            mounts_under(&m, Path::new("/tmp/a")),
            [
                "/tmp/a/agent/containerd/state/x/shm",
                "/tmp/a/agent/containerd/state/x/rootfs"
            ]
        );
        assert_eq!(mounts_under(&m, Path::new("/tmp/a b")), ["/tmp/a b/x"]);
        assert!(mounts_under(&m, Path::new("/tmp/none")).is_empty());
    }

    #[test]
    fn cgroup_dirs_in_every_hierarchy() {
        let m = parse_mountinfo(MOUNTINFO);
        let text = "4:cpu,cpuacct:/t/berth/besteffort/podu1/c1\n3:memory:/t/berth/besteffort/podu1/c1\n1:name=systemd:/t\n0::/t\n9:pids:/nowhere\n";
        let got = cgroup_dirs(text, &m);
        assert_eq!(
            got,
            [
                PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/t/berth/besteffort/podu1/c1"),
                PathBuf::from("/sys/fs/cgroup/memory/t/berth/besteffort/podu1/c1"),
                PathBuf::from("/sys/fs/cgroup/systemd/t"),
                PathBuf::from("/sys/fs/cgroup/unified/t"),
            ]
        );
    }

    #[test]
    fn namespace_links_and_cni_caches() {
        assert_eq!(parse_ns_link("net:[4026532281]"), Some(4026532281));
        assert_eq!(parse_ns_link("mnt:[1]"), None);
        use base64::Engine;
        let config = serde_json::json!({"plugins": [{"type": "bridge", "ipam": {"dataDir": "/tmp/a/agent/cni/ipam"}}]});
        let b64 = base64::engine::general_purpose::STANDARD.encode(config.to_string());
        let cache = serde_json::json!({"kind": "cniCacheV1", "config": b64}).to_string();
        assert_eq!(cni_result_data_dir(&cache), Some(PathBuf::from("/tmp/a")));
        let other =
            serde_json::json!({"plugins": [{"ipam": {"dataDir": "/var/lib/cni/networks"}}]});
        let b64 = base64::engine::general_purpose::STANDARD.encode(other.to_string());
        let cache = serde_json::json!({"config": b64}).to_string();
        assert_eq!(cni_result_data_dir(&cache), None);
        assert_eq!(cni_result_data_dir("not json"), None);
    }

    #[test]
    fn scope_compares_paths() {
        let s = Scope::DataDir(PathBuf::from("/tmp/a"));
        assert!(s.covers(Path::new("/tmp/a")));
        assert!(!s.covers(Path::new("/tmp/ab")));
        assert!(Scope::Machine.covers(Path::new("/anything")));
    }
}
