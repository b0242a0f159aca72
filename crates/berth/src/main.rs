//! `berth`: one binary for the whole cluster.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use tracing::info;

// The API server allocates and frees many small JSON values per request;
// mimalloc spends a fraction of glibc malloc's time on that (issue 4 benchmarks).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod agent;
mod cgroups;
mod cpumanager;
mod dashboard;
mod device_plugin;
mod dns;
mod etcd_snapshot;
mod eviction;
mod footprint;
mod images;
mod killall;
mod kubelet_gc;
mod metrics;
mod netpol;
mod proxy;
mod secrets_encrypt;
mod store;
mod tlsbootstrap;
mod token;
mod topologymanager;

#[derive(Parser)]
#[command(
    name = "berth",
    version,
    about = "A Kubernetes-compatible container orchestrator in one binary"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a cluster: API server and embedded store (more components join as they land).
    Server(Box<ServerArgs>),
    /// Join a running server with simulated (hollow) nodes.
    Sim(SimArgs),
    /// Run the node agent (containerd, CNI, pods) joined to a server.
    Agent(Box<agent::AgentCmd>),
    /// Local images without a registry (build-local, import).
    Images(images::ImagesArgs),
    /// Print the web dashboard's URL and a login token (a ServiceAccount token).
    Dashboard(dashboard::DashboardArgs),
    /// Bootstrap tokens for joining nodes (create, list, delete), as kubeadm's.
    Token(token::TokenArgs),
    /// A CSI driver (Identity, Controller, Node on a unix socket) whose volumes are
    /// loop-mounted ext4 images on this node, as kubernetes-csi's hostpath driver.
    CsiHostpath(Box<berth_csi::hostpath::Config>),
    /// Encryption at rest of Secrets (status, rotate-keys, reencrypt), in the spirit of k3s's.
    SecretsEncrypt(secrets_encrypt::SecretsEncryptArgs),
    /// Device plugins (API v1beta1) for this node's agent: sample (fake devices), nvidia.
    DevicePlugin(device_plugin::DevicePluginArgs),
    /// Stop every container, pod sandbox, containerd-shim and Berth's containerd,
    /// and remove the network namespaces, mounts, cgroups, nftables tables and
    /// links Berth made (k3s-killall.sh's job); `--data-dir` limits it to one node.
    Killall(killall::KillallArgs),
    /// The embedded SQLite store: online backup and restore.
    Store(store::StoreArgs),
    /// Snapshots of a server's etcd (save, ls, delete, restore), as k3s's etcd-snapshot.
    EtcdSnapshot(etcd_snapshot::EtcdSnapshotArgs),
}

#[derive(clap::Args, Debug)]
struct SimArgs {
    /// Kubeconfig of the server to join.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// How many nodes to simulate.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Node name prefix; nodes are <prefix><index>.
    #[arg(long, default_value = "sim-node-")]
    name_prefix: String,
    /// Index of the first node, to add nodes beside an earlier simulator's.
    #[arg(long, default_value_t = 0)]
    first_index: usize,
    #[command(flatten)]
    shape: SimNodeArgs,
}

/// What each simulated node looks like.
#[derive(clap::Args, Debug, Clone)]
struct SimNodeArgs {
    /// Each simulated node's capacity (`pods` defaults to 110).
    #[arg(long, default_value = "cpu=4,memory=16Gi,ephemeral-storage=100Gi")]
    sim_node_capacity: String,
    /// Labels of each simulated node, `key=value,…` (as --node-labels), beside
    /// upstream's default ones and `type=berth-sim`.
    #[arg(long, default_value = "")]
    sim_node_labels: String,
    /// Taints of each simulated node, `key[=value]:Effect,…` (as --register-with-taints).
    #[arg(long, default_value = "")]
    sim_node_taints: String,
    /// NUMA cells per simulated node, sharing its CPUs and memory evenly; published
    /// in the Node annotation `node.berth.dev/numa-topology`.
    #[arg(long, default_value_t = 0)]
    sim_numa_nodes: u32,
    /// The simulated nodes' Topology Manager: `none`, or `single-numa-node`
    /// (pods' exclusive CPUs and devices placed on one cell each, or rejected
    /// with TopologyAffinityError; the cells' free resources published in the
    /// Node annotation `node.berth.dev/numa-resources`). Needs --sim-numa-nodes.
    #[arg(long, default_value = "none")]
    sim_topology_manager_policy: String,
    /// `container` or `pod`, as --topology-manager-scope.
    #[arg(long, default_value = "container")]
    sim_topology_manager_scope: String,
}

impl SimNodeArgs {
    /// The simulator's configuration for `count` nodes from `first_index` on.
    fn config(
        &self,
        count: usize,
        name_prefix: String,
        first_index: usize,
    ) -> Result<berth_kubelet::sim::SimConfig> {
        use berth_kubelet::node::{self, topology};
        let mut cfg = berth_kubelet::sim::SimConfig {
            count,
            name_prefix,
            first_index,
            ..Default::default()
        };
        cfg.capacity =
            node::parse_resources(&self.sim_node_capacity).context("--sim-node-capacity")?;
        cfg.labels
            .extend(topology::parse_labels(&self.sim_node_labels).context("--sim-node-labels")?);
        cfg.taints = topology::parse_taints(&self.sim_node_taints).context("--sim-node-taints")?;
        cfg.numa = topology::split_evenly(self.sim_numa_nodes, &cfg.capacity)
            .context("--sim-numa-nodes")?;
        match self.sim_topology_manager_policy.as_str() {
            "none" => {}
            "single-numa-node" if cfg.numa.is_empty() => {
                anyhow::bail!(
                    "--sim-topology-manager-policy single-numa-node needs --sim-numa-nodes"
                )
            }
            "single-numa-node" => {}
            other => anyhow::bail!(
                "--sim-topology-manager-policy: {other:?}: the simulator models none and single-numa-node"
            ),
        }
        cfg.topology_manager_policy = self.sim_topology_manager_policy.clone();
        cfg.topology_manager_scope = self
            .sim_topology_manager_scope
            .parse()
            .map_err(|e| anyhow::anyhow!("--sim-topology-manager-scope: {e}"))?;
        Ok(cfg)
    }
}

#[derive(clap::Args, Debug)]
struct ServerArgs {
    /// Folder for the store, certificates, token and kubeconfig.
    #[arg(
        long,
        short = 'd',
        default_value = "/var/lib/berth",
        env = "BERTH_DATA_DIR"
    )]
    data_dir: PathBuf,
    /// Address the API server listens on.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: IpAddr,
    /// HTTPS port of the API server (0 = any free port).
    #[arg(long, default_value_t = 6443)]
    secure_port: u16,
    /// Also serve plain HTTP on 127.0.0.1:PORT, trusted as admin without credentials. For tests.
    #[arg(long)]
    insecure_port: Option<u16>,
    /// Store cluster state in etcd at these endpoints (comma-separated), e.g. http://127.0.0.1:2379.
    #[arg(long, value_delimiter = ',')]
    datastore_endpoint: Vec<String>,
    /// Extra host names or IPs for the serving certificate.
    #[arg(long = "tls-san", value_delimiter = ',')]
    tls_san: Vec<String>,
    /// Where to write the admin kubeconfig (default: <data-dir>/kubeconfig.yaml).
    #[arg(long)]
    write_kubeconfig: Option<PathBuf>,
    /// Most events the API server's watch cache keeps, over all resources, for watches
    /// that resume from a resourceVersion (older ones get 410 Gone and relist). Each
    /// resource keeps its own last 75 s (at least 100 events) within this cap; when
    /// over it, the resource with the most events drops its oldest first.
    #[arg(long, default_value_t = berth_apiserver::WATCH_CACHE_EVENTS)]
    watch_cache_events: usize,
    /// How often old store revisions are compacted, in seconds (as kube-apiserver's --etcd-compaction-interval).
    #[arg(long, default_value_t = 300)]
    etcd_compaction_interval: u64,
    /// Do not run the scheduler (as k3s's --disable-scheduler).
    #[arg(long)]
    disable_scheduler: bool,
    /// Do not run the controllers (as k3s's --disable-controller-manager).
    #[arg(long)]
    disable_controller_manager: bool,
    /// A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file for the
    /// scheduler: profiles, plugins, weights (as kube-scheduler's --config).
    #[arg(long)]
    scheduler_config: Option<PathBuf>,
    /// Run this many simulated nodes (sim-node-0…) inside the server.
    #[arg(long, default_value_t = 0)]
    simulate_nodes: usize,
    #[command(flatten)]
    sim_shape: SimNodeArgs,
    /// Run the scheduler and the controller-manager only while holding their Leases
    /// (kube-system/kube-scheduler, kube-system/kube-controller-manager), as upstream's
    /// --leader-elect: servers sharing one store run one of each.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    leader_elect: bool,
    /// Run each controller as its own ServiceAccount kube-system/<controller>,
    /// bound to system:controller:<controller> (as kube-controller-manager's
    /// flag, which kubeadm and k3s turn on); false runs them all with the
    /// admin credentials, as upstream then needs the controller-manager's own
    /// credential to hold every controller's role.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    use_service_account_credentials: bool,
    /// How long a node may go without renewing its Lease or posting status before it
    /// is marked Unknown and tainted unreachable (as kube-controller-manager's flag).
    #[arg(long, default_value = "50s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    node_monitor_grace_period: std::time::Duration,
    /// How often node health is checked.
    #[arg(long, default_value = "5s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    node_monitor_period: std::time::Duration,
    /// The grace period of a node that never posted status.
    #[arg(long, default_value = "1m0s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    node_startup_grace_period: std::time::Duration,
    /// Nodes per second whose NoExecute taints (and so pod evictions) start when the zone is healthy.
    #[arg(long, default_value_t = 0.1)]
    node_eviction_rate: f64,
    /// Nodes per second in a partially disrupted zone of more than 50 nodes.
    #[arg(long, default_value_t = 0.01)]
    secondary_node_eviction_rate: f64,
    /// How often every HorizontalPodAutoscaler is synced (as kube-controller-manager's flag).
    #[arg(long, default_value = "15s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    horizontal_pod_autoscaler_sync_period: std::time::Duration,
    /// How often every ResourceQuota's usage is recomputed in full (as
    /// kube-controller-manager's flag); changes are counted at once.
    #[arg(long, default_value = "5m", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    resource_quota_sync_period: std::time::Duration,
    /// Usage within 1 ± this of the target keeps the replica count.
    #[arg(long, default_value_t = 0.1)]
    horizontal_pod_autoscaler_tolerance: f64,
    /// How long after a pod starts its CPU samples may be skipped while it is not ready.
    #[arg(long, default_value = "5m0s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    horizontal_pod_autoscaler_cpu_initialization_period: std::time::Duration,
    /// How long after a pod starts it is still treated as becoming ready.
    #[arg(long, default_value = "30s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    horizontal_pod_autoscaler_initial_readiness_delay: std::time::Duration,
    /// The scale-down stabilization window of HPAs without `behavior`.
    #[arg(long, default_value = "5m0s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    horizontal_pod_autoscaler_downscale_stabilization: std::time::Duration,
    /// How many HorizontalPodAutoscalers are synced at once.
    #[arg(long, default_value_t = 5)]
    concurrent_horizontal_pod_autoscaler_syncs: usize,
    /// Do not run the node agent on this machine (as k3s's --disable-agent).
    #[arg(long)]
    disable_agent: bool,
    /// Create the default StorageClass `local-path` (Berth's local-path
    /// provisioner, as k3s ships one) when it is missing.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    default_storage_class: bool,
    #[command(flatten)]
    ingress: agent::IngressArgs,
    #[command(flatten)]
    agent: agent::AgentArgs,
    #[command(flatten)]
    dns: dns::ClusterDnsArgs,
    #[command(flatten)]
    proxy: proxy::ProxyArgs,
    #[command(flatten)]
    network_policy: netpol::NetworkPolicyArgs,
    #[command(flatten)]
    metrics: metrics::MetricsArgs,
    /// The range Service cluster IPs come from (as k3s's --service-cidr,
    /// kube-apiserver's --service-cluster-ip-range); the first IP is the
    /// `kubernetes` Service's.
    #[arg(
        long,
        alias = "service-cluster-ip-range",
        default_value = "10.43.0.0/16"
    )]
    service_cidr: berth_apiserver::alloc::Cidr,
    /// The range NodePort Services' node ports come from.
    #[arg(long, default_value = "30000-32767")]
    service_node_port_range: berth_apiserver::alloc::PortRange,
    /// An audit.k8s.io/v1 Policy file (YAML or JSON): which requests are recorded
    /// and at what level (as kube-apiserver's flag). Needs --audit-log-path.
    #[arg(long)]
    audit_policy_file: Option<PathBuf>,
    /// Where audit events are written, one JSON object a line; `-` is standard output.
    #[arg(long)]
    audit_log_path: Option<PathBuf>,
    /// The most days a rotated audit log is kept, by the time in its name (0: no limit).
    #[arg(long, default_value_t = berth_apiserver::audit::DEFAULT_LOG_MAX_AGE_DAYS, value_parser = non_negative, allow_negative_numbers = true)]
    audit_log_maxage: u32,
    /// The most rotated audit logs kept (0: no limit).
    #[arg(long, default_value_t = berth_apiserver::audit::DEFAULT_LOG_MAX_BACKUPS, value_parser = non_negative, allow_negative_numbers = true)]
    audit_log_maxbackup: u32,
    /// The size in megabytes at which the audit log is rotated (0: never).
    #[arg(long, default_value_t = berth_apiserver::audit::DEFAULT_LOG_MAX_SIZE_MB, value_parser = non_negative, allow_negative_numbers = true)]
    audit_log_maxsize: u32,
    /// Admission plugins to enable besides the default ones (comma-separated;
    /// they always run in upstream's order, as kube-apiserver's flag).
    #[arg(long, value_delimiter = ',')]
    enable_admission_plugins: Vec<String>,
    /// Admission plugins to turn off, default ones included.
    #[arg(long, value_delimiter = ',')]
    disable_admission_plugins: Vec<String>,
    /// An AdmissionConfiguration (apiserver.config.k8s.io/v1) with the
    /// PodSecurity plugin's PodSecurityConfiguration (cluster defaults,
    /// exemptions), inline or by path.
    #[arg(long)]
    admission_control_config_file: Option<PathBuf>,
    /// Authorizers in the order they are asked (comma-separated): Node, RBAC,
    /// AlwaysAllow, AlwaysDeny (as kube-apiserver's flag). Members of
    /// system:masters, as the admin kubeconfig's user, are always allowed.
    #[arg(long, default_value = "Node,RBAC", value_parser = parse_authorization_modes)]
    authorization_mode: AuthorizationModes,
    /// Requests without credentials are system:anonymous (group
    /// system:unauthenticated, allowed what RBAC gives them: /version,
    /// /healthz, /livez, /readyz); false refuses them with 401 Unauthorized
    /// (as kube-apiserver's flag).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    anonymous_auth: bool,
    /// The most non-mutating requests (get, list) served at once; more get 429
    /// with Retry-After (watches, exec, logs and proxy are not counted; 0: no limit).
    #[arg(long, default_value_t = berth_apiserver::inflight::DEFAULT_MAX_REQUESTS_INFLIGHT)]
    max_requests_inflight: usize,
    /// The most mutating requests served at once (0: no limit).
    #[arg(long, default_value_t = berth_apiserver::inflight::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT)]
    max_mutating_requests_inflight: usize,
    /// An EncryptionConfiguration (apiserver.config.k8s.io/v1) naming the
    /// resources encrypted at rest and their providers (aescbc, aesgcm,
    /// secretbox, identity), as kube-apiserver's flag. `berth secrets-encrypt`
    /// reports and re-encrypts.
    #[arg(long)]
    encryption_provider_config: Option<PathBuf>,
}

/// `--authorization-mode` as one value (clap would take a `Vec` for repeats).
#[derive(Debug, Clone)]
struct AuthorizationModes(Vec<berth_apiserver::authorization::Mode>);

/// The audit log's numbers, refused below 0 as upstream refuses them.
fn non_negative(s: &str) -> Result<u32, String> {
    match s.parse::<i64>() {
        Ok(n) if n < 0 => Err(format!("{n} can't be a negative number")),
        _ => s.parse::<u32>().map_err(|e| e.to_string()),
    }
}

fn parse_authorization_modes(s: &str) -> Result<AuthorizationModes, String> {
    berth_apiserver::authorization::parse_modes(s).map(AuthorizationModes)
}

async fn server(args: ServerArgs) -> Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let compaction = std::time::Duration::from_secs(args.etcd_compaction_interval);
    let store: Arc<dyn berth_store::Store> = if args.datastore_endpoint.is_empty() {
        let path = args.data_dir.join("db").join("state.db");
        info!(path = %path.display(), "using the embedded store");
        // Compaction is driven below, the same way for both backends.
        let opts = berth_store::sqlite::SqliteOptions {
            compaction_interval: None,
            ..Default::default()
        };
        Arc::new(
            berth_store::sqlite::SqliteStore::open_with(&path, opts)
                .context("opening the embedded store")?,
        )
    } else {
        info!(endpoints = ?args.datastore_endpoint, "using etcd");
        Arc::new(
            berth_store::etcd::EtcdStore::connect_with(
                &args.datastore_endpoint,
                Default::default(),
            )
            .await
            .context("connecting to etcd")?,
        )
    };
    if !compaction.is_zero() {
        tokio::spawn(berth_apiserver::compactor(store.clone(), compaction));
    }
    // A bad scheduler configuration is a start-up error, before anything listens.
    let scheduler_config = match &args.scheduler_config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            berth_scheduler::SchedulerConfig::from_yaml(&text)
                .map_err(|e| anyhow::anyhow!("scheduler configuration {}: {e}", path.display()))?
        }
        None => berth_scheduler::SchedulerConfig::default(),
    };
    let admission_plugins = berth_apiserver::admission::Config {
        enable: args.enable_admission_plugins.clone(),
        disable: args.disable_admission_plugins.clone(),
    }
    .resolve()
    .map_err(anyhow::Error::msg)?;
    let config = berth_apiserver::Config {
        data_dir: args.data_dir.clone(),
        audit: berth_apiserver::audit::Options {
            policy_file: args.audit_policy_file.clone(),
            log_path: args.audit_log_path.clone(),
            log_max_age_days: args.audit_log_maxage,
            log_max_backups: args.audit_log_maxbackup,
            log_max_size_mb: args.audit_log_maxsize,
        },
        bind_address: args.bind_address,
        secure_port: args.secure_port,
        insecure_port: args.insecure_port,
        tls_sans: args.tls_san,
        kubeconfig: args.write_kubeconfig,
        watch_cache_events: args.watch_cache_events,
        services: berth_apiserver::alloc::ServiceRanges {
            cidr: args.service_cidr,
            node_ports: args.service_node_port_range,
        },
        admission_plugins,
        admission_config_file: args.admission_control_config_file.clone(),
        authorization_modes: args.authorization_mode.0.clone(),
        anonymous_auth: args.anonymous_auth,
        max_requests_inflight: args.max_requests_inflight,
        max_mutating_requests_inflight: args.max_mutating_requests_inflight,
        encryption_provider_config: args.encryption_provider_config.clone(),
    };
    let api = berth_apiserver::ApiServer::bind(config, store).await?;
    info!(kubeconfig = %api.kubeconfig.display(), "wrote kubeconfig");
    println!("Wrote kubeconfig {}", api.kubeconfig.display());
    println!("API server at https://{}", api.secure_addr);
    if let Some(a) = api.insecure_addr {
        println!("Plain HTTP (trusted, loopback) at http://{a}");
    }
    let kubeconfig = api.kubeconfig.clone();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let serving = tokio::spawn(api.serve(rx));
    // Components are API clients like any other, each with its own identity
    // (a client certificate from the cluster CA, as kubeadm writes
    // scheduler.conf and kubelet.conf), so RBAC and the Node authorizer hold
    // them to upstream's roles. Each names itself in User-Agent, which names
    // its field manager in managedFields. The simulator (a test tool) and
    // the install-time default StorageClass keep the admin credentials.
    let creds = ComponentCreds::new(&args.data_dir, &kubeconfig)?;
    if args.simulate_nodes > 0 {
        let client = client_from(&kubeconfig, "kubelet").await?;
        let cfg = args
            .sim_shape
            .config(args.simulate_nodes, "sim-node-".into(), 0)?;
        start_simulator(client, cfg);
    }
    // Leader-elected components release their Leases on shutdown.
    let (stop_components, components_stop) = tokio::sync::watch::channel(false);
    let mut components = Vec::new();
    if !args.disable_scheduler {
        let kc = creds.kubeconfig(&tlsbootstrap::Identity::scheduler())?;
        let component = start_component(
            &kc.clone(),
            "kube-scheduler",
            args.leader_elect,
            components_stop.clone(),
            move || {
                let (kc, scheduler_config) = (kc.clone(), scheduler_config.clone());
                async move {
                    let result = match client_from(&kc, "kube-scheduler").await {
                        Ok(client) => berth_scheduler::run(client, scheduler_config)
                            .await
                            .map_err(anyhow::Error::from),
                        Err(e) => Err(e),
                    };
                    if let Err(e) = result {
                        tracing::error!(error = %e, "scheduler stopped");
                    }
                }
            },
        )
        .await?;
        components.push(component);
    }
    if !args.disable_controller_manager {
        let (kc, token_dir) = if args.use_service_account_credentials {
            let kc = creds.kubeconfig(&tlsbootstrap::Identity::controller_manager())?;
            (kc, Some(creds.dir.join("controllers")))
        } else {
            (kubeconfig.clone(), None)
        };
        let nlc = berth_controllers::nodelifecycle::Config {
            monitor_period: args.node_monitor_period,
            grace_period: args.node_monitor_grace_period,
            startup_grace_period: args.node_startup_grace_period,
            eviction_rate: args.node_eviction_rate,
            secondary_eviction_rate: args.secondary_node_eviction_rate,
        };
        // The CA the API server's PKI wrote (published as kube-root-ca.crt).
        let controllers = berth_controllers::Config {
            root_ca_file: args.data_dir.join("tls").join("server-ca.crt"),
            service_account_key_dir: args.data_dir.join("tls"),
            // The client certificates of joining nodes are the cluster CA's.
            cluster_signing_cert_file: args.data_dir.join("tls").join("server-ca.crt"),
            cluster_signing_key_file: args.data_dir.join("tls").join("server-ca.key"),
            cluster_signing_duration: berth_controllers::certificates::signer::DEFAULT_DURATION,
            hpa: berth_controllers::podautoscaler::Config {
                sync_period: args.horizontal_pod_autoscaler_sync_period,
                tolerance: args.horizontal_pod_autoscaler_tolerance,
                cpu_initialization_period: args.horizontal_pod_autoscaler_cpu_initialization_period,
                initial_readiness_delay: args.horizontal_pod_autoscaler_initial_readiness_delay,
                downscale_stabilization: args.horizontal_pod_autoscaler_downscale_stabilization,
                concurrent_syncs: args.concurrent_horizontal_pod_autoscaler_syncs,
            },
            resource_quota: berth_controllers::resourcequota::Config {
                sync_period: args.resource_quota_sync_period,
            },
        };
        let component = start_component(
            &kc.clone(),
            "kube-controller-manager",
            args.leader_elect,
            components_stop.clone(),
            move || {
                let (kc, nlc, controllers) = (kc.clone(), nlc.clone(), controllers.clone());
                let token_dir = token_dir.clone();
                async move {
                    match config_from(&kc, "kube-controller-manager").await {
                        Ok(config) => {
                            let clients = match kube::Client::try_from(config.clone()) {
                                Ok(root) => match token_dir {
                                    Some(dir) => {
                                        berth_controllers::ClientBuilder::service_accounts(
                                            root, config, dir,
                                        )
                                    }
                                    None => berth_controllers::ClientBuilder::Shared(root),
                                },
                                Err(e) => {
                                    tracing::error!(error = %e, "controller-manager stopped");
                                    return;
                                }
                            };
                            let node_controller = clients.client("node-controller").await;
                            tokio::join!(
                                berth_controllers::run_all(clients, controllers),
                                berth_controllers::nodelifecycle::run(node_controller, nlc),
                            );
                        }
                        Err(e) => tracing::error!(error = %e, "controller-manager stopped"),
                    }
                }
            },
        )
        .await?;
        components.push(component);
    }
    if args.default_storage_class {
        let client = client_from(&kubeconfig, "berth-storage").await?;
        tokio::spawn(ensure_default_storage_class(client));
    }
    let node_agent = if args.disable_agent {
        None
    } else {
        let node = args
            .agent
            .node_name
            .clone()
            .unwrap_or_else(berth_kubelet::agent::machine::hostname);
        let kc = creds.kubeconfig(&tlsbootstrap::Identity::kubelet(&node))?;
        let client = client_from(&kc, "kubelet").await?;
        Some(agent::start(client, &args.agent, &args.data_dir).await?)
    };
    let service_proxy = match &node_agent {
        Some(a) => {
            let kc = creds.kubeconfig(&tlsbootstrap::Identity::kube_proxy())?;
            let client = client_from(&kc, "kube-proxy").await?;
            proxy::start(client, &args.proxy, &a.node_name, &args.agent.cluster_cidr).await
        }
        None => None,
    };
    let network_policy = match &node_agent {
        Some(a) => {
            // As on a joined node: the service proxy's user (see agent.rs).
            let kc = creds.kubeconfig(&tlsbootstrap::Identity::kube_proxy())?;
            let client = client_from(&kc, netpol::COMPONENT).await?;
            netpol::start(client, &args.network_policy, &a.node_name).await
        }
        None => None,
    };
    if !args.ingress.disable_ingress {
        let kc = creds.kubeconfig(&tlsbootstrap::Identity::ingress())?;
        let client = client_from(&kc, "berth-ingress").await?;
        start_ingress(client, &args.ingress, args.agent.node_name.clone()).await;
    }
    if !args.dns.disable_dns {
        let kc = creds.kubeconfig(&tlsbootstrap::Identity::dns())?;
        let client = client_from(&kc, "coredns").await?;
        let (servers, domain) = (&args.agent.cluster_dns, &args.agent.cluster_domain);
        dns::start_cluster_dns(client, &args.dns, servers, domain).await;
    }
    if !args.metrics.disable_metrics_server {
        let client = client_from(&kubeconfig, "metrics-server").await?;
        // Reachable from the API server and listed in Endpoints (not loopback,
        // which upstream refuses in endpoints).
        let ip = berth_kubelet::agent::machine::host_ipv4()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        metrics::start(client, &args.metrics, &args.data_dir, ip).await?;
    }
    let node_local_dns =
        dns::start_node_local_dns(&args.agent.node_local_dns, &args.agent.cluster_dns).await;
    shutdown_signal().await;
    info!("shutting down");
    if let Some(n) = node_local_dns {
        n.shutdown().await;
    }
    let _ = stop_components.send(true);
    for c in components {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(3), c).await;
    }
    if let Some(n) = network_policy {
        n.shutdown().await;
    }
    if let Some(p) = service_proxy {
        p.shutdown().await;
    }
    if let Some(a) = node_agent {
        a.shutdown().await;
    }
    let _ = tx.send(true);
    let _ = serving.await;
    Ok(())
}

/// Runs a control-plane component: with `leader_elect`, only while this process
/// holds the component's Lease in kube-system (the component is stopped when the
/// Lease is lost and contends again, and releases the Lease when `stop` turns
/// true; see berth_runtime::leaderelection); otherwise at once.
async fn start_component<F, Fut>(
    kubeconfig: &std::path::Path,
    name: &'static str,
    leader_elect: bool,
    mut stop: tokio::sync::watch::Receiver<bool>,
    component: F,
) -> Result<tokio::task::JoinHandle<()>>
where
    F: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    if leader_elect {
        use berth_runtime::leaderelection;
        let client = client_from(kubeconfig, name).await?;
        let cfg = leaderelection::Config::new(name, leaderelection::default_identity());
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        Ok(tokio::spawn(leaderelection::run_until(
            client, cfg, component, stopped,
        )))
    } else {
        Ok(tokio::spawn(async move {
            tokio::select! {
                _ = component() => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        }))
    }
}

/// Binds the ingress ports and runs the ingress controller. Ports that cannot be
/// bound (80/443 need privileges) are reported and the server goes on without it.
/// Creates the `local-path` StorageClass unless one of that name exists
/// (an administrator's edits or deletion of the default flag are kept).
async fn ensure_default_storage_class(client: kube::Client) {
    let api: kube::Api<k8s_openapi::api::storage::v1::StorageClass> = kube::Api::all(client);
    let class = berth_kubelet::localpath::default_storage_class();
    for _ in 0..30 {
        match api.create(&kube::api::PostParams::default(), &class).await {
            Ok(_) => return info!("created the default StorageClass local-path"),
            Err(kube::Error::Api(s)) if s.code == 409 => return,
            Err(e) => {
                tracing::debug!(error = %e, "creating the default StorageClass");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
    tracing::warn!("could not create the default StorageClass local-path");
}

async fn start_ingress(client: kube::Client, args: &agent::IngressArgs, node_name: Option<String>) {
    let (http_port, https_port) = (args.ingress_http_port, args.ingress_https_port);
    let any = std::net::IpAddr::from([0, 0, 0, 0]);
    let node_address = berth_kubelet::agent::machine::host_ipv4()
        .map(std::net::IpAddr::from)
        .unwrap_or(std::net::IpAddr::from([127, 0, 0, 1]));
    let cfg = berth_ingress::Config {
        http: (any, http_port).into(),
        https: (any, https_port).into(),
        node_address,
        node_name: node_name.unwrap_or_else(berth_kubelet::agent::machine::hostname),
    };
    let listeners = match berth_ingress::Listeners::bind(&cfg).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "ingress controller not started (--disable-ingress, or --ingress-http-port/--ingress-https-port)");
            return;
        }
    };
    if let (Some(h), Some(s)) = (listeners.http_addr(), listeners.https_addr()) {
        println!("Ingress at http://{h} and https://{s}");
    }
    tokio::spawn(async move {
        if let Err(e) = berth_ingress::run(client, cfg, listeners).await {
            tracing::error!(error = %e, "ingress controller stopped");
        }
    });
}

fn start_simulator(client: kube::Client, cfg: berth_kubelet::sim::SimConfig) {
    tokio::spawn(async move {
        if let Err(e) = berth_kubelet::sim::Simulator::run(client, cfg).await {
            tracing::error!(error = %e, "node simulator stopped");
        }
    });
}

async fn sim(args: SimArgs) -> Result<()> {
    let client = client_from(&args.kubeconfig, "kubelet").await?;
    let cfg = args
        .shape
        .config(args.nodes, args.name_prefix, args.first_index)?;
    start_simulator(client, cfg);
    println!("Simulating {} nodes", args.nodes);
    shutdown_signal().await;
    Ok(())
}

async fn run_agent(mut args: agent::AgentCmd) -> Result<()> {
    // Each with its own User-Agent, as in `berth server` (status writes name
    // their component); with a bootstrap token each with its own identity too.
    let clients = agent::clients(&args).await?;
    args.agent.client_ca_pem = agent::cluster_ca(&args).await;
    let a = agent::start(clients.kubelet, &args.agent, &args.data_dir).await?;
    let service_proxy = match clients.proxy {
        Some(c) => proxy::start(c, &args.proxy, &a.node_name, &args.agent.cluster_cidr).await,
        None => None,
    };
    let network_policy = match clients.network_policy {
        Some(c) => netpol::start(c, &args.network_policy, &a.node_name).await,
        None => None,
    };
    if let Some(client) = clients.ingress {
        start_ingress(client, &args.ingress, Some(a.node_name.clone())).await;
    }
    let node_local_dns =
        dns::start_node_local_dns(&args.agent.node_local_dns, &args.agent.cluster_dns).await;
    shutdown_signal().await;
    if let Some(n) = node_local_dns {
        n.shutdown().await;
    }
    if let Some(n) = network_policy {
        n.shutdown().await;
    }
    if let Some(p) = service_proxy {
        p.shutdown().await;
    }
    a.shutdown().await;
    Ok(())
}

/// A client for the component `component` (its User-Agent is upstream's form,
/// `kube-scheduler/v1.33.0 (berth …)`).
async fn client_from(kubeconfig: &std::path::Path, component: &str) -> Result<kube::Client> {
    Ok(kube::Client::try_from(
        config_from(kubeconfig, component).await?,
    )?)
}

/// [`client_from`]'s configuration.
async fn config_from(kubeconfig: &std::path::Path, component: &str) -> Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    let ua = format!("{component}/v1.33.0 (berth {})", env!("CARGO_PKG_VERSION"));
    config.headers.push((http::header::USER_AGENT, ua.parse()?));
    Ok(config)
}

/// The kubeconfigs of the components inside `berth server`, under
/// `<data-dir>/cred` (k3s's place for them), issued by the cluster CA.
struct ComponentCreds {
    dir: std::path::PathBuf,
    ca_cert: std::path::PathBuf,
    ca_key: std::path::PathBuf,
    cluster: tlsbootstrap::Cluster,
}

impl ComponentCreds {
    /// Reaching the cluster where the admin kubeconfig does.
    fn new(data_dir: &std::path::Path, admin_kubeconfig: &std::path::Path) -> Result<Self> {
        let yaml = std::fs::read_to_string(admin_kubeconfig)
            .with_context(|| format!("reading {}", admin_kubeconfig.display()))?;
        let cluster = tlsbootstrap::cluster_of(&yaml)
            .with_context(|| format!("reading {}", admin_kubeconfig.display()))?;
        let tls = data_dir.join("tls");
        Ok(ComponentCreds {
            dir: data_dir.join("cred"),
            ca_cert: tls.join("server-ca.crt"),
            ca_key: tls.join("server-ca.key"),
            cluster,
        })
    }

    fn kubeconfig(&self, id: &tlsbootstrap::Identity) -> Result<std::path::PathBuf> {
        tlsbootstrap::ensure_signed(&self.ca_cert, &self.ca_key, &self.cluster, &self.dir, id)
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BERTH_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: log files stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if matches!(cli.command, Command::Agent(_)) {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        rt.worker_threads(cpus.min(footprint::AGENT_WORKER_THREADS));
    }
    let rt = rt.enable_all().build()?;
    match cli.command {
        Command::Server(args) => rt.block_on(server(*args)),
        Command::Sim(args) => rt.block_on(sim(args)),
        Command::Agent(args) => rt.block_on(run_agent(*args)),
        Command::Images(args) => rt.block_on(images::run(args)),
        Command::Token(args) => rt.block_on(token::run(args)),
        Command::Dashboard(args) => rt.block_on(dashboard::run(args)),
        Command::SecretsEncrypt(args) => rt.block_on(secrets_encrypt::run(args)),
        Command::DevicePlugin(args) => rt.block_on(device_plugin::run(args)),
        Command::Killall(args) => rt.block_on(killall::run(args)),
        Command::Store(args) => store::run(args),
        Command::EtcdSnapshot(args) => rt.block_on(etcd_snapshot::run(args)),
        Command::CsiHostpath(config) => Ok(rt.block_on(berth_csi::hostpath::run(*config))?),
    }
}
