//! The node agent on real containers: registers its Node, runs containerd (or
//! uses one), imports the local images, sets up CNI on the node's podCIDR, and
//! runs one worker per pod bound to the node (watch with
//! `fieldSelector=spec.nodeName=<node>`).

pub mod actions;
pub mod eviction;
pub mod gc;
pub mod health;
pub mod hooks;
pub mod hosts;
pub mod machine;
pub mod podspec;
pub mod security;
pub mod status;
pub mod termination;
pub mod volumemanager;
pub mod worker;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_runtime::events::{EventSource, Recorder};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, NodeAddress, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::backoff::{Backoff, BackoffConfig};
use crate::cri::{ContainerdConfig, ContainerdProcess, CriRuntime};
use crate::images;
use crate::node::{NodeAgent, NodeConfig};
use crate::prober::Prober;
use crate::prober::exec::{RuntimeExec, strip_runtime_prefix};
use crate::prober::manager::{ProbeManager, ProberUpdate};
use crate::runtime::{Filter, Runtime};
use crate::{Error, Result};

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub node_name: String,
    /// `<data-dir>/agent`.
    pub dir: PathBuf,
    /// An existing CRI socket; None: Berth starts its own containerd.
    pub runtime_endpoint: Option<PathBuf>,
    /// Where node podCIDRs (/24 each) are taken from.
    pub cluster_cidr: String,
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    pub sandbox_image: String,
    pub backoff: BackoffConfig,
    pub max_grace: Duration,
    /// The kubelet server's port (`--kubelet-port`; 0 picks a free one).
    pub kubelet_port: u16,
    /// CA whose client certificates the kubelet server accepts (the cluster CA);
    /// without one the server is not started.
    pub client_ca_pem: Option<String>,
    /// Cgroup flags: `--cgroups-per-qos`, `--cgroup-driver`, `--pod-max-pids`,
    /// `--enforce-node-allocatable`, `--kube-reserved`, `--system-reserved` and
    /// their cgroups (the reservations also shape the Node's allocatable).
    pub cgroups: crate::cgroups::CgroupsConfig,
    /// `--eviction-*` (the hard thresholds also shape the Node's allocatable).
    pub eviction: crate::eviction::Settings,
    /// `<data-dir>/storage`: the local-path provisioner's volumes on this node.
    pub storage_dir: PathBuf,
    /// `--allowed-unsafe-sysctls`: sysctls (or `prefix*` patterns) pods may
    /// set beyond upstream's safe set.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// `--maximum-dead-containers*`, `--minimum-container-ttl-duration`.
    pub container_gc: crate::runtime::gc::ContainerGcPolicy,
    /// `--image-gc-*`, `--minimum-image-ttl-duration`, `--image-maximum-gc-age`.
    pub image_gc: crate::images::gc::ImageGcPolicy,
    /// `--cpu-manager-policy`, `--reserved-cpus`, `--cpu-manager-reconcile-period`.
    pub cpu_manager: crate::cm::cpumanager::CpuManagerConfig,
    /// `--topology-manager-policy`, `--topology-manager-scope`, `--topology-manager-policy-options`.
    pub topology_manager: crate::cm::topologymanager::TopologyManagerConfig,
}

impl AgentConfig {
    pub fn new(data_dir: &std::path::Path) -> Self {
        AgentConfig {
            node_name: machine::hostname(),
            dir: data_dir.join("agent"),
            runtime_endpoint: None,
            cluster_cidr: "10.42.0.0/16".into(),
            cluster_dns: vec!["10.43.0.10".into()],
            cluster_domain: "cluster.local".into(),
            sandbox_image: images::PAUSE_IMAGE.into(),
            backoff: BackoffConfig::default(),
            max_grace: Duration::from_secs(3600),
            kubelet_port: 10250,
            client_ca_pem: None,
            cgroups: crate::cgroups::CgroupsConfig::default(),
            eviction: crate::eviction::Settings::default(),
            storage_dir: data_dir.join("storage"),
            allowed_unsafe_sysctls: Vec::new(),
            container_gc: Default::default(),
            image_gc: Default::default(),
            cpu_manager: Default::default(),
            topology_manager: Default::default(),
        }
    }
}

/// A running agent; `shutdown` stops its tasks and Berth's containerd (pods keep
/// running under their shims, as when upstream's kubelet restarts).
pub struct Agent {
    tasks: Vec<JoinHandle<()>>,
    containerd: Option<ContainerdProcess>,
    pub node_name: String,
    pub pod_cidr: String,
    pub runtime_socket: PathBuf,
}

impl Agent {
    pub async fn start(client: Client, cfg: AgentConfig) -> Result<Agent> {
        std::fs::create_dir_all(&cfg.dir)?;
        cfg.image_gc
            .validate()
            .map_err(|e| Error::Invalid(format!("image garbage collection: {e}")))?;
        // The sysctl allowlist is checked before anything starts, as upstream's
        // kubelet refuses bad --allowed-unsafe-sysctls.
        let kernel = security::parse_kernel_version(&machine::kernel_version());
        let mut allowed = security::safe_sysctls(kernel);
        allowed.extend(cfg.allowed_unsafe_sysctls.iter().cloned());
        let mut admission = security::Admission {
            sysctls: security::SysctlAllowlist::new(&allowed)
                .map_err(|e| Error::Invalid(format!("--allowed-unsafe-sysctls: {e}")))?,
            apparmor_host_error: security::host_apparmor_error(),
            runtime: Default::default(),
        };
        let mut ccfg = ContainerdConfig::new(&cfg.dir, &cfg.sandbox_image);
        ccfg.apparmor = admission.apparmor_host_error.is_none();
        let (containerd, socket) = match &cfg.runtime_endpoint {
            Some(s) => (None, s.clone()),
            None => {
                let p = ContainerdProcess::start(&ccfg).await?;
                (p, ccfg.socket())
            }
        };
        let runtime =
            Arc::new(CriRuntime::connect(&socket).map_err(|e| Error::Runtime(e.to_string()))?);
        // containerd accepts on its socket before its CRI plugin is up
        // ("server is not initialized yet"): ask until it answers.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let (rt_name, rt_version) = loop {
            match runtime.version().await {
                Ok(v) => break v,
                Err(e) if std::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "waiting for the container runtime");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(Error::Runtime(format!("{}: {e}", socket.display()))),
            }
        };
        info!(runtime = %rt_name, version = %rt_version, "container runtime ready");
        admission.runtime = runtime.features().await.unwrap_or_else(|e| {
            warn!(error = %e, "runtime features unknown: user namespaces and Strict supplemental groups refused");
            Default::default()
        });
        // The local images (~0.7 s to build and import on a fresh data dir) are
        // only needed by pods: import them while the node registers, and start
        // the pod workers once they are in (upstream's node is Ready before it
        // has pulled any image).
        let images = tokio::spawn({
            let (runtime, socket, dir) = (runtime.clone(), socket.clone(), cfg.dir.join("images"));
            async move { ensure_local_images(runtime.as_ref(), &socket, &dir).await }
        });

        let host_ip = machine::host_ipv4()
            .map(|i| i.to_string())
            .unwrap_or_else(|| "127.0.0.1".into());
        let pod_cidr = pod_cidr(&client, &cfg).await?;
        crate::cni::write_config(
            &ccfg.cni_conf_dir,
            &cfg.dir.join("cni").join("ipam"),
            &pod_cidr,
        )
        .map_err(|e| Error::Runtime(e.to_string()))?;
        info!(node = %cfg.node_name, %pod_cidr, "pod network configured");

        let capacity = machine::capacity(&cfg.dir);
        // The root (node allocatable enforced) and QoS cgroups, before any pod.
        let cgroups = Arc::new(
            crate::cgroups::node::start_on_host(cfg.cgroups.clone(), &capacity)
                .map_err(|e| Error::Runtime(e.to_string()))?,
        );
        let mut ncfg = NodeConfig::new(cfg.node_name.clone(), capacity);
        ncfg.kube_reserved = cfg.cgroups.allocatable.kube_reserved.clone();
        ncfg.system_reserved = cfg.cgroups.allocatable.system_reserved.clone();
        let eviction_cfg = cfg.eviction.config()?;
        ncfg.eviction_hard = cfg.eviction.flags.hard.clone();
        ncfg.addresses = vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: host_ip.clone(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: cfg.node_name.clone(),
            },
        ];
        ncfg.roles = vec!["control-plane".into()];
        ncfg.pod_cidrs = vec![pod_cidr.clone()];
        ncfg.node_info.os_image = machine::os_image();
        ncfg.node_info.kernel_version = machine::kernel_version();
        ncfg.node_info.container_runtime_version = format!("{rt_name}://{rt_version}");
        let kubelet_server = bind_kubelet_server(&cfg, &host_ip).await;
        if let Some(s) = &kubelet_server {
            ncfg.kubelet_port = i32::from(s.port());
        }
        // The runtime's health before registration, so a healthy node registers Ready.
        let monitor = Arc::new(health::HealthMonitor::default());
        monitor.check_runtime(runtime.as_ref()).await;
        monitor.relist(runtime.as_ref()).await;
        // Registration first, so pods are only watched once the Node exists.
        crate::node::register(&client, &ncfg, &monitor.health()).await?;
        set_pod_cidr(&client, &cfg.node_name, &pod_cidr).await;
        let allocatable = crate::node::allocatable(&ncfg);
        let cpus = Arc::new(start_cpu_manager(&cfg)?);
        let devices = crate::cm::devicemanager::DeviceManager::start(
            crate::cm::devicemanager::plugins_dir(&cfg.dir),
            cpus.machine().numa.nodes.clone(),
        )
        .await
        .map_err(|e| Error::Runtime(e.to_string()))?;
        let topology = Arc::new(
            crate::cm::topologymanager::Manager::new(
                cfg.topology_manager.clone(),
                cpus.machine().numa.clone(),
                cpus.clone(),
                Some(devices.clone()),
            )
            .map_err(|e| Error::Runtime(format!("topology manager: {e}")))?,
        );
        let node_agent = NodeAgent::new(client.clone(), ncfg).with_extended_resources({
            let devices = devices.clone();
            Arc::new(move || devices.capacity())
        });
        let mut tasks = vec![
            tokio::spawn(health::run(monitor.clone(), runtime.clone())),
            tokio::spawn({
                let monitor = monitor.clone();
                async move {
                    if let Err(e) = node_agent.run(|| monitor.health()).await {
                        warn!(error = %e, "node status loop stopped");
                    }
                }
            }),
        ];

        let memory_capacity = machine::memory_bytes();
        let statuses = Arc::new(crate::status::manager::StatusManager::new(Arc::new(
            crate::status::manager::ApiStatusWriter(client.clone()),
        )));
        let prober = Prober::new(Arc::new(RuntimeExec(runtime.clone())));
        let (probes, probe_updates) = ProbeManager::new(
            prober,
            statuses.clone(),
            Arc::new(berth_runtime::clock::RealClock),
        );
        let (services, services_writer) = kube::runtime::reflector::store();
        let svc_api: Api<k8s_openapi::api::core::v1::Service> = Api::all(client.clone());
        tasks.push(tokio::spawn(async move {
            let stream = watcher::watcher(svc_api, berth_runtime::reflect::informer_config())
                .default_backoff()
                .reflect(services_writer)
                .applied_objects();
            futures::pin_mut!(stream);
            while let Some(r) = stream.next().await {
                if let Err(e) = r {
                    warn!(error = %e, "service watch");
                }
            }
        }));
        let tokens = Arc::new(crate::token::TokenManager::new(
            Arc::new(crate::token::ApiTokenRequester(client.clone())),
            Arc::new(berth_runtime::clock::RealClock),
        ));
        tasks.push(tokio::spawn(tokens.clone().run_cleanup()));
        let shared = Arc::new(worker::Shared {
            objects: Arc::new(crate::objects::ApiObjects(client.clone())),
            runtime: runtime.clone(),
            ctx: podspec::NodeContext {
                pods_dir: cfg.dir.join("pods"),
                logs_dir: cfg.dir.join("logs"),
                cluster_dns: cfg.cluster_dns.clone(),
                cluster_domain: cfg.cluster_domain.clone(),
                memory_capacity,
                host_dns: std::fs::read_to_string("/etc/resolv.conf")
                    .map(|t| podspec::parse_resolv_conf(&t))
                    .unwrap_or_default(),
                seccomp_root: cfg.dir.join("seccomp"),
            },
            node_name: cfg.node_name.clone(),
            host_ip,
            recorder: Recorder::new(
                client.clone(),
                EventSource::new("kubelet", cfg.node_name.clone()),
            ),
            backoff: Mutex::new(Backoff::new(cfg.backoff)),
            resync: Duration::from_secs(1),
            max_grace: cfg.max_grace,
            probes,
            statuses,
            pokes: Mutex::new(HashMap::new()),
            services,
            allocatable,
            tokens,
            cgroups,
            evictions: Arc::new(crate::eviction::Evictions::default()),
            admission,
            devices,
            cpus,
            topology,
        });
        tasks.push(tokio::spawn(cpu_manager_loop(shared.clone())));
        tasks.push(tokio::spawn(probe_updates_loop(
            shared.clone(),
            probe_updates,
        )));
        if let Some(s) = kubelet_server {
            let stats = crate::stats::StatsProvider::new(
                crate::stats::StatsConfig {
                    node_name: cfg.node_name.clone(),
                    root_dir: cfg.dir.clone(),
                    logs_dir: cfg.dir.join("logs"),
                    pods_dir: cfg.dir.join("pods"),
                    memory_capacity: u64::try_from(memory_capacity).unwrap_or(0),
                },
                runtime.clone(),
            );
            let deps = Arc::new(crate::server::Deps {
                client: client.clone(),
                runtime: runtime.clone(),
                stats: Arc::new(stats),
            });
            tasks.push(tokio::spawn(s.serve(deps)));
        }
        let stats: Arc<dyn crate::eviction::manager::SummaryProvider> =
            Arc::new(crate::stats::StatsProvider::new(
                crate::stats::StatsConfig {
                    node_name: cfg.node_name.clone(),
                    root_dir: cfg.dir.clone(),
                    logs_dir: cfg.dir.join("logs"),
                    pods_dir: cfg.dir.join("pods"),
                    memory_capacity: u64::try_from(memory_capacity).unwrap_or(0),
                },
                runtime.clone(),
            ));
        let mut local_images = images::LOCAL_IMAGES.to_vec();
        local_images.push(&cfg.sandbox_image);
        let collector = Arc::new(gc::GarbageCollector {
            runtime: runtime.clone(),
            containers: cfg.container_gc.clone(),
            images: tokio::sync::Mutex::new(crate::images::gc::ImageGcManager::new(
                cfg.image_gc.clone(),
                &local_images,
                std::time::Instant::now(),
            )),
            pods: gc::PodStates(shared.evictions.clone()),
            stats: stats.clone(),
            recorder: shared.recorder.clone(),
            node_name: cfg.node_name.clone(),
            root_dir: cfg.dir.clone(),
        });
        tasks.push(tokio::spawn(eviction::run(
            eviction_cfg,
            shared.clone(),
            monitor.clone(),
            stats,
            collector.clone(),
        )));
        tasks.push(tokio::spawn(crate::localpath::run::run(
            client.clone(),
            crate::localpath::run::Config {
                node_name: cfg.node_name.clone(),
                storage_dir: cfg.storage_dir.clone(),
            },
        )));
        let imported = match images.await {
            Ok(r) => r,
            Err(e) => Err(Error::Runtime(format!("importing the local images: {e}"))),
        };
        if let Err(e) = imported {
            for t in &tasks {
                t.abort();
            }
            return Err(e);
        }
        // Listed once the local images are in (then every 30 s).
        tasks.push(tokio::spawn(report_images(
            client.clone(),
            runtime.clone(),
            cfg.node_name.clone(),
        )));
        tasks.push(tokio::spawn(watch_pods(client.clone(), shared)));
        // Started once the local images are in, as upstream starts garbage
        // collection once the kubelet runs.
        tasks.push(tokio::spawn(gc::run_containers(collector.clone())));
        tasks.push(tokio::spawn(gc::run_images(collector)));
        Ok(Agent {
            tasks,
            containerd,
            node_name: cfg.node_name,
            pod_cidr,
            runtime_socket: socket,
        })
    }

    pub async fn shutdown(self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some(c) = self.containerd {
            c.stop().await;
        }
    }
}

/// The kubelet server (logs, exec, attach, port-forward for the API server);
/// failures are logged, not fatal: pods still run without it.
async fn bind_kubelet_server(
    cfg: &AgentConfig,
    host_ip: &str,
) -> Option<crate::server::KubeletServer> {
    let Some(ca) = &cfg.client_ca_pem else {
        warn!("no client CA for the kubelet server: logs, exec and port-forward are unavailable");
        return None;
    };
    let addr = std::net::SocketAddr::from(([0, 0, 0, 0], cfg.kubelet_port));
    let sans = [
        cfg.node_name.clone(),
        host_ip.to_string(),
        "localhost".into(),
        "127.0.0.1".into(),
    ];
    match crate::server::KubeletServer::bind(addr, ca, &sans).await {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(error = %e, "kubelet server not started");
            None
        }
    }
}

/// Imports the sandbox and busybox images when containerd lacks them.
async fn ensure_local_images(
    rt: &dyn Runtime,
    socket: &std::path::Path,
    dir: &std::path::Path,
) -> Result<()> {
    let mut missing = false;
    for i in [images::PAUSE_IMAGE, images::BUSYBOX_IMAGE] {
        if rt.image_status(i).await.ok().flatten().is_none() {
            missing = true;
        }
    }
    if !missing {
        return Ok(());
    }
    info!("building and importing the local busybox and pause images");
    let archives = images::build_local(dir)
        .await
        .map_err(|e| Error::Runtime(e.to_string()))?;
    // Building is deterministic and ctr missing is permanent (both fatal);
    // ctr's own failure is containerd not answering (restarting, stopped):
    // the node is already Ready and reports the runtime's health, so retry as
    // the kubelet retries image pulls instead of taking the agent down.
    for a in archives {
        let mut backoff = Duration::from_secs(1);
        loop {
            match images::import(socket, &a).await {
                Ok(_) => break,
                Err(e @ images::ImageError::Command(_)) => {
                    warn!(error = %e, retry_in = ?backoff, "importing a local image failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
                Err(e) => return Err(Error::Runtime(e.to_string())),
            }
        }
    }
    Ok(())
}

/// This node's podCIDR: the one its Node already has, else the lowest free /24.
async fn pod_cidr(client: &Client, cfg: &AgentConfig) -> Result<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&ListParams::default()).await?;
    let mut used = Vec::new();
    for n in &list.items {
        let cidr = n.spec.as_ref().and_then(|s| s.pod_cidr.clone());
        if n.metadata.name.as_deref() == Some(cfg.node_name.as_str()) {
            if let Some(c) = cidr {
                return Ok(c);
            }
            continue;
        }
        used.extend(cidr);
    }
    crate::cni::pick_pod_cidr(&cfg.cluster_cidr, used.iter().map(String::as_str))
        .map_err(|e| Error::Runtime(e.to_string()))
}

/// The CPU Manager on this machine's topology, its checkpoint restored.
fn start_cpu_manager(cfg: &AgentConfig) -> Result<crate::cm::cpumanager::CpuManager, Error> {
    let machine =
        berth_topology::machine::Machine::discover(&berth_topology::machine::RealSysfs::new())
            .map_err(|e| Error::Runtime(format!("reading the machine's CPU topology: {e}")))?;
    crate::cm::cpumanager::CpuManager::new(cfg.cpu_manager.clone(), machine, &cfg.dir)
        .map_err(|e| Error::Runtime(e.to_string()))
}

/// The CPU Manager's reconcile loop: cpusets of running containers follow
/// its state; assignments of pods no worker runs are dropped once the pod
/// watch has listed.
async fn cpu_manager_loop(shared: Arc<worker::Shared>) {
    loop {
        shared.cpus.next_reconcile().await;
        let workers = || -> HashSet<String> {
            let pokes = shared.pokes.lock().unwrap_or_else(|e| e.into_inner());
            pokes.keys().cloned().collect()
        };
        let live: Option<&(dyn Fn() -> HashSet<String> + Sync)> =
            shared.evictions.synced().then_some(&workers);
        shared.cpus.reconcile(shared.runtime.as_ref(), live).await;
    }
}

/// Sets spec.podCIDR(s) on an adopted Node that has none (a created one has it).
async fn set_pod_cidr(client: &Client, node: &str, cidr: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let has = nodes
        .get_opt(node)
        .await
        .ok()
        .flatten()
        .and_then(|n| n.spec.and_then(|s| s.pod_cidr))
        .is_some();
    if !has {
        let patch = json!({"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}});
        if let Err(e) = nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            warn!(error = %e, "setting the node's podCIDR");
        }
    }
}

/// The pod watch: one worker per pod uid, fed the newest pod object.
async fn watch_pods(client: Client, shared: Arc<worker::Shared>) {
    let api: Api<Pod> = Api::all(client);
    let wc = berth_runtime::reflect::informer_config()
        .fields(&format!("spec.nodeName={}", shared.node_name));
    let mut events = watcher::watcher(api, wc).default_backoff().boxed();
    let mut workers: HashMap<String, watch::Sender<Option<Pod>>> = HashMap::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut first_list = true;
    let mut finished: HashSet<String> = HashSet::new();
    loop {
        let ev = match events.try_next().await {
            Ok(Some(ev)) => ev,
            Ok(None) => return,
            Err(e) => {
                warn!(error = %e, "pod watch error");
                continue;
            }
        };
        // A worker that finished (pod terminated and confirmed) is not restarted
        // by the pod's last updates before its Delete event.
        workers.retain(|uid, tx| {
            let open = !tx.is_closed();
            if !open {
                finished.insert(uid.clone());
            }
            open
        });
        match ev {
            Event::Init => seen.clear(),
            Event::InitApply(p) => {
                if let Some(uid) = p.metadata.uid.clone() {
                    seen.insert(uid);
                }
                dispatch(&shared, &mut workers, p);
            }
            Event::InitDone => {
                // Pods deleted while the watch was down get no Delete event.
                for (uid, tx) in &workers {
                    if !seen.contains(uid) {
                        let _ = tx.send(None);
                    }
                }
                if first_list {
                    first_list = false;
                    remove_orphans(&shared, &seen).await;
                    shared.evictions.set_synced();
                }
            }
            Event::Apply(p) => {
                let done = p.metadata.deletion_timestamp.is_some()
                    && p.metadata
                        .uid
                        .as_ref()
                        .is_some_and(|u| finished.contains(u));
                if !done {
                    dispatch(&shared, &mut workers, p);
                }
            }
            Event::Delete(p) => {
                if let Some(uid) = p.metadata.uid.as_ref() {
                    shared.evictions.forget(uid);
                    finished.remove(uid);
                    if let Some(tx) = workers.get(uid) {
                        let _ = tx.send(None);
                    }
                }
            }
        }
    }
}

fn dispatch(
    shared: &Arc<worker::Shared>,
    workers: &mut HashMap<String, watch::Sender<Option<Pod>>>,
    pod: Pod,
) {
    let Some(uid) = pod.metadata.uid.clone() else {
        return;
    };
    shared.evictions.observe(&pod);
    if let Some(tx) = workers.get(&uid) {
        let _ = tx.send(Some(pod));
        return;
    }
    let (tx, rx) = watch::channel(Some(pod));
    workers.insert(uid.clone(), tx);
    tokio::spawn(worker::run(shared.clone(), uid, rx));
}

/// Sandboxes of pods this node no longer has (deleted while the agent was down).
async fn remove_orphans(shared: &worker::Shared, live: &HashSet<String>) {
    let sandboxes = shared
        .runtime
        .list_sandboxes(&Filter::default())
        .await
        .unwrap_or_default();
    for s in sandboxes {
        if s.uid.is_empty() || live.contains(&s.uid) {
            continue;
        }
        info!(pod = %format!("{}/{}", s.namespace, s.name), "removing the sandbox of a pod that is gone");
        let _ = shared.runtime.stop_sandbox(&s.id).await;
        let _ = shared.runtime.remove_sandbox(&s.id).await;
    }
    for uid in shared.cgroups.remove_orphans(live) {
        info!(pod = %uid, "removed the cgroup of a pod that is gone");
    }
}

/// Acts on the probe manager's output: events, kills of containers that failed
/// liveness/startup (the pod's worker then restarts them with back-off), and
/// status refreshes when a result changes.
async fn probe_updates_loop(
    shared: Arc<worker::Shared>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<ProberUpdate>,
) {
    use berth_runtime::events::EventType;
    use k8s_openapi::api::core::v1::ObjectReference;
    let reference = |ns: &str, pod: &str, uid: &str, container: &str| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.into()),
        namespace: Some(ns.into()),
        uid: Some(uid.into()),
        field_path: Some(format!("spec.containers{{{container}}}")),
        ..Default::default()
    };
    while let Some(u) = rx.recv().await {
        match u {
            ProberUpdate::Result { pod_uid, .. } => shared.poke(&pod_uid),
            ProberUpdate::Event {
                pod_uid,
                namespace,
                pod_name,
                container,
                event,
            } => {
                let t = if event.type_ == "Normal" {
                    EventType::Normal
                } else {
                    EventType::Warning
                };
                shared.recorder.event(
                    &reference(&namespace, &pod_name, &pod_uid, &container),
                    t,
                    event.reason,
                    event.message,
                );
            }
            ProberUpdate::Restart(req) => {
                shared.recorder.event(
                    &reference(&req.namespace, &req.pod_name, &req.pod_uid, &req.container),
                    EventType::Normal,
                    "Killing",
                    req.message.clone(),
                );
                let shared = shared.clone();
                tokio::spawn(async move {
                    let grace = Duration::from_secs(req.grace_period_seconds.max(0) as u64)
                        .min(shared.max_grace);
                    let id = strip_runtime_prefix(&req.container_id).to_string();
                    if let Err(e) = shared.runtime.stop_container(&id, grace).await {
                        warn!(error = %e, container = %req.container, "killing a container that failed its probe");
                    }
                    shared.poke(&req.pod_uid);
                });
            }
        }
    }
}

/// `status.images` of the Node (kubectl describe, the scheduler's ImageLocality),
/// from the runtime's image list, patched when it changes (upstream caps it at 50).
async fn report_images(client: Client, runtime: Arc<CriRuntime>, node: String) {
    let nodes: Api<Node> = Api::all(client);
    let mut last = serde_json::Value::Null;
    loop {
        if let Ok(mut images) = runtime.list_images().await {
            images.sort_by_key(|i| std::cmp::Reverse(i.size));
            let list: Vec<serde_json::Value> = images
                .iter()
                .take(50)
                .map(|i| {
                    let names: Vec<&String> =
                        i.repo_digests.iter().chain(i.repo_tags.iter()).collect();
                    json!({"names": names, "sizeBytes": i.size})
                })
                .collect();
            let list = json!(list);
            if list != last {
                let patch = json!({"status": {"images": list}});
                match nodes
                    .patch_status(&node, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => last = list,
                    Err(e) => warn!(error = %e, "node images status"),
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
}
