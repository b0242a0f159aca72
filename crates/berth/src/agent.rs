//! The node agent as `berth server` runs it (in-process) and as `berth agent`
//! runs it on another machine.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Node agent flags shared by `berth server` and `berth agent`.
#[derive(clap::Args, Debug, Clone)]
pub struct AgentArgs {
    /// Use this CRI socket instead of starting Berth's own containerd.
    #[arg(long)]
    pub container_runtime_endpoint: Option<String>,
    /// The kubelet server's port (logs, exec, attach, port-forward for the API server).
    #[arg(long, default_value_t = 10250)]
    pub kubelet_port: u16,
    /// CA for the client certificates the kubelet server accepts (default: the
    /// cluster CA of a server in the same data dir, or --kubeconfig's).
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// The cluster CA read from `berth agent --kubeconfig`.
    #[arg(skip)]
    pub client_ca_pem: Option<String>,
    /// The node's name (default: the host name).
    #[arg(long)]
    pub node_name: Option<String>,
    /// Range node podCIDRs (/24 each) come from.
    #[arg(long, default_value = "10.42.0.0/16")]
    pub cluster_cidr: String,
    /// Cluster DNS server(s) written into pods' resolv.conf (dnsPolicy ClusterFirst).
    #[arg(long, default_value = "10.43.0.10", value_delimiter = ',')]
    pub cluster_dns: Vec<String>,
    /// Cluster domain (pods' DNS search path).
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// Comma-separated unsafe sysctls or sysctl patterns (ending in `*`)
    /// pods may set beyond the safe set; only namespaced ones (`kernel.shm*`,
    /// `kernel.msg*`, `kernel.sem`, `fs.mqueue.*`, `net.*`).
    #[arg(long, value_delimiter = ',')]
    pub allowed_unsafe_sysctls: Vec<String>,
    #[command(flatten)]
    pub node_local_dns: crate::dns::NodeLocalDnsArgs,
    #[command(flatten)]
    pub cgroups: crate::cgroups::CgroupArgs,
    #[command(flatten)]
    pub eviction: crate::eviction::EvictionArgs,
    #[command(flatten)]
    pub gc: crate::kubelet_gc::GcArgs,
    #[command(flatten)]
    pub cpu_manager: crate::cpumanager::CpuManagerArgs,
    #[command(flatten)]
    pub topology_manager: crate::topologymanager::TopologyManagerArgs,
}

/// Ingress controller flags (it runs on every node, as k3s's Traefik).
#[derive(clap::Args, Debug, Clone)]
pub struct IngressArgs {
    /// Do not run the ingress controller (Ingresses of `berth.dev/ingress` classes).
    #[arg(long)]
    pub disable_ingress: bool,
    /// The port the ingress controller serves HTTP on, on every address of the node.
    #[arg(long, default_value_t = 80)]
    pub ingress_http_port: u16,
    /// The port the ingress controller serves HTTPS on.
    #[arg(long, default_value_t = 443)]
    pub ingress_https_port: u16,
}

/// `berth agent`: join a server as a node.
#[derive(clap::Args, Debug)]
pub struct AgentCmd {
    /// The API server, e.g. https://10.0.0.1:6443 (with --token).
    #[arg(long)]
    pub server: Option<String>,
    /// Bearer token for --server. A bootstrap token (`<id>.<secret>`, from
    /// `berth token create`) only joins: the node agent, service proxy and
    /// ingress controller get client certificates of their own through
    /// CertificateSigningRequests, kept in `<data-dir>/*.kubeconfig` and
    /// reused on restart. Any other token is used as is by every component.
    #[arg(long, env = "BERTH_TOKEN")]
    pub token: Option<String>,
    /// The cluster CA (PEM, `<server data-dir>/tls/server-ca.crt`) that --server's
    /// certificate must chain to. Without it the server's certificate is not
    /// verified (a warning says so).
    #[arg(long, env = "BERTH_SERVER_CA")]
    pub server_ca: Option<PathBuf>,
    /// A kubeconfig instead of --server/--token.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Folder for containerd, CNI state, pod volumes and logs.
    #[arg(
        long,
        short = 'd',
        default_value = "/var/lib/berth",
        env = "BERTH_DATA_DIR"
    )]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub ingress: IngressArgs,
    #[command(flatten)]
    pub proxy: crate::proxy::ProxyArgs,
    #[command(flatten)]
    pub network_policy: crate::netpol::NetworkPolicyArgs,
}

fn config(args: &AgentArgs, data_dir: &Path) -> berth_kubelet::agent::AgentConfig {
    let mut cfg = berth_kubelet::agent::AgentConfig::new(data_dir);
    if let Some(n) = &args.node_name {
        cfg.node_name = n.clone();
    }
    cfg.kubelet_port = args.kubelet_port;
    cfg.client_ca_pem = client_ca(args, data_dir);
    cfg.runtime_endpoint = args
        .container_runtime_endpoint
        .as_ref()
        .map(|e| PathBuf::from(e.trim_start_matches("unix://")));
    cfg.cluster_cidr = args.cluster_cidr.clone();
    cfg.cluster_dns = args.cluster_dns.clone();
    // NodeLocal DNSCache on: pods ask it (169.254.20.10) instead.
    if let Some(ns) = crate::dns::node_local_nameserver(&args.node_local_dns) {
        cfg.cluster_dns = vec![ns];
    }
    cfg.cluster_domain = args.cluster_domain.clone();
    cfg.allowed_unsafe_sysctls = args
        .allowed_unsafe_sysctls
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    cfg
}

/// Starts the agent with `client` (its User-Agent names it kubelet).
pub async fn start(
    client: kube::Client,
    args: &AgentArgs,
    data_dir: &Path,
) -> Result<berth_kubelet::agent::Agent> {
    let mut cfg = config(args, data_dir);
    cfg.cgroups = args.cgroups.config()?;
    cfg.cpu_manager = args.cpu_manager.config(&mut cfg.cgroups)?;
    cfg.topology_manager = args.topology_manager.config()?;
    cfg.eviction = args.eviction.settings()?;
    (cfg.container_gc, cfg.image_gc) = args.gc.policies()?;
    let agent = berth_kubelet::agent::Agent::start(client, cfg)
        .await
        .context("starting the node agent (run with --disable-agent to go without one)")?;
    println!(
        "Node agent: node {} with pod CIDR {} (runtime {})",
        agent.node_name,
        agent.pod_cidr,
        agent.runtime_socket.display()
    );
    Ok(agent)
}

/// The clients of `berth agent`'s components.
pub struct Clients {
    pub kubelet: kube::Client,
    /// None when the component is disabled.
    pub proxy: Option<kube::Client>,
    pub ingress: Option<kube::Client>,
    pub network_policy: Option<kube::Client>,
}

/// The bootstrap token of `--server --token`, if the token is one.
fn bootstrap_token(cmd: &AgentCmd) -> Option<&str> {
    cmd.server.as_ref()?;
    let token = cmd.token.as_deref()?;
    berth_authn::bootstrap::parse(token).map(|_| token)
}

/// Every component's client: with a bootstrap token, each under its own
/// certificate (TLS bootstrapping); otherwise all with the given credentials.
pub async fn clients(cmd: &AgentCmd) -> Result<Clients> {
    let proxy = !cmd.proxy.disable_kube_proxy;
    let ingress = !cmd.ingress.disable_ingress;
    let network_policy = !cmd.network_policy.disable_network_policy;
    if bootstrap_token(cmd).is_none() {
        return Ok(Clients {
            kubelet: client_for(cmd, "kubelet").await?,
            proxy: match proxy {
                true => Some(crate::proxy::agent_client(cmd).await?),
                false => None,
            },
            ingress: match ingress {
                true => Some(client_for(cmd, "berth-ingress").await?),
                false => None,
            },
            network_policy: match network_policy {
                true => Some(client_for(cmd, crate::netpol::COMPONENT).await?),
                false => None,
            },
        });
    }
    use crate::tlsbootstrap::{Cluster, Identity, ensure};
    let cluster = Cluster {
        server: cmd.server.clone().unwrap_or_default(),
        ca_pem: match &cmd.server_ca {
            Some(p) => Some(
                std::fs::read_to_string(p)
                    .with_context(|| format!("reading --server-ca {}", p.display()))?,
            ),
            None => None,
        },
    };
    let node = cmd
        .agent
        .node_name
        .clone()
        .unwrap_or_else(berth_kubelet::agent::machine::hostname);
    let bootstrap = client_for(cmd, "kubelet-bootstrap").await?;
    let mut ids = vec![Identity::kubelet(&node)];
    ids.extend(proxy.then(Identity::kube_proxy));
    ids.extend(ingress.then(Identity::ingress));
    let mut clients = Vec::new();
    for id in &ids {
        let path = ensure(&bootstrap, &cluster, &cmd.data_dir, id).await?;
        // Each kubeconfig is named after its component, as its User-Agent.
        clients.push(kubeconfig_client(&path, id.file).await?);
    }
    let mut clients = clients.into_iter();
    let kubelet = clients.next().context("no kubelet client")?;
    // The policy controller runs as the service proxy's user (its role adds
    // pods, namespaces and networkpolicies), as k3s's agent runs both under
    // one identity; its own User-Agent still names it.
    let network_policy = match network_policy {
        true => {
            let id = Identity::kube_proxy();
            let path = ensure(&bootstrap, &cluster, &cmd.data_dir, &id).await?;
            Some(kubeconfig_client(&path, crate::netpol::COMPONENT).await?)
        }
        false => None,
    };
    Ok(Clients {
        kubelet,
        proxy: if proxy { clients.next() } else { None },
        ingress: if ingress { clients.next() } else { None },
        network_policy,
    })
}

/// A client from `kubeconfig` whose User-Agent names `component`.
async fn kubeconfig_client(kubeconfig: &Path, component: &str) -> Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    let ua = format!("{component}/v1.33.0 (berth {})", env!("CARGO_PKG_VERSION"));
    config.headers.push((http::header::USER_AGENT, ua.parse()?));
    Ok(kube::Client::try_from(config)?)
}

/// [`client`] for another node component (its User-Agent names `component`).
pub async fn client_for(cmd: &AgentCmd, component: &str) -> Result<kube::Client> {
    let mut config = match (&cmd.server, &cmd.kubeconfig) {
        (Some(server), _) => {
            let token = cmd
                .token
                .clone()
                .context("--server needs --token (or use --kubeconfig)")?;
            let mut c = kube::Config::new(server.parse().context("--server")?);
            c.auth_info.token = Some(token.into());
            match &cmd.server_ca {
                Some(path) => c.root_cert = Some(ca_certs(path)?),
                None => {
                    tracing::warn!("no --server-ca: the API server's certificate is not verified");
                    c.accept_invalid_certs = true;
                }
            }
            c
        }
        (None, Some(kc)) => {
            let kc = kube::config::Kubeconfig::read_from(kc)?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?
        }
        (None, None) => anyhow::bail!("berth agent needs --server and --token, or --kubeconfig"),
    };
    let ua = format!("{component}/v1.33.0 (berth {})", env!("CARGO_PKG_VERSION"));
    config.headers.push((http::header::USER_AGENT, ua.parse()?));
    Ok(kube::Client::try_from(config)?)
}

/// The CA whose client certificates the kubelet server trusts.
fn client_ca(args: &AgentArgs, data_dir: &Path) -> Option<String> {
    if let Some(f) = &args.client_ca_file {
        return std::fs::read_to_string(f).ok();
    }
    args.client_ca_pem
        .clone()
        .or_else(|| std::fs::read_to_string(data_dir.join("tls").join("server-ca.crt")).ok())
}

/// The cluster CA (as PEM) for the kubelet server: `--server-ca` with
/// `--server`, else the one in `--kubeconfig`.
pub async fn cluster_ca(cmd: &AgentCmd) -> Option<String> {
    if cmd.server.is_some() {
        return std::fs::read_to_string(cmd.server_ca.as_ref()?).ok();
    }
    let kc = kube::config::Kubeconfig::read_from(cmd.kubeconfig.as_ref()?).ok()?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .ok()?;
    config
        .root_cert
        .map(|certs| berth_kubelet::server::pem_from_der(&certs))
}

/// The DER certificates of a PEM bundle.
fn ca_certs(path: &Path) -> Result<Vec<Vec<u8>>> {
    let pem =
        std::fs::read(path).with_context(|| format!("reading --server-ca {}", path.display()))?;
    let certs: Vec<Vec<u8>> = rustls_pemfile::certs(&mut pem.as_slice())
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("--server-ca {}: not PEM certificates", path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "--server-ca {}: no certificate in it",
        path.display()
    );
    Ok(certs)
}
