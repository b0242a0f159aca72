//! The service proxy on a node (`berth server` with its agent, `berth agent`),
//! as k3s runs kube-proxy beside the kubelet.

use anyhow::Result;

/// Service proxy flags shared by `berth server` and `berth agent`.
#[derive(clap::Args, Debug, Clone)]
pub struct ProxyArgs {
    /// Do not run the service proxy (as k3s's --disable-kube-proxy): ClusterIPs
    /// and NodePorts are then not programmed on this node.
    #[arg(long)]
    pub disable_kube_proxy: bool,
    /// How often the proxy's nftables table is checked and repaired if edited
    /// (kube-proxy's --nftables-sync-period).
    #[arg(long = "proxy-sync-period", default_value = "30s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    pub sync_period: std::time::Duration,
    /// Changes closer than this to the last sync wait (kube-proxy's
    /// --nftables-min-sync-period).
    #[arg(long = "proxy-min-sync-period", default_value = "1s", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    pub min_sync_period: std::time::Duration,
}

/// Starts the proxy for node `node_name` (pods in `cluster_cidr`) with `client`
/// (its User-Agent names kube-proxy). A node without nftables gets a logged
/// error and no proxy, not a failed start.
pub async fn start(
    client: kube::Client,
    args: &ProxyArgs,
    node_name: &str,
    cluster_cidr: &str,
) -> Option<berth_proxy::Proxy> {
    if args.disable_kube_proxy {
        return None;
    }
    let mut node = berth_proxy::model::NodeConfig::new(node_name);
    node.cluster_cidr = berth_proxy::parse_cidr(cluster_cidr);
    let mut cfg = berth_proxy::Config::new(node);
    cfg.sync_period = args.sync_period;
    cfg.min_sync_period = args.min_sync_period;
    match berth_proxy::start(client, cfg).await {
        Ok(p) => {
            println!("Service proxy: nftables table ip {}", berth_proxy::TABLE);
            Some(p)
        }
        Err(e) => {
            tracing::error!(error = %e, "service proxy not started (needs nft and root; --disable-kube-proxy to go without)");
            None
        }
    }
}

/// `berth agent`'s client for the proxy: the agent's credentials, kube-proxy's
/// User-Agent.
pub async fn agent_client(cmd: &crate::agent::AgentCmd) -> Result<kube::Client> {
    crate::agent::client_for(cmd, "kube-proxy").await
}
