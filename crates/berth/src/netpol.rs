//! NetworkPolicy enforcement on a node (`berth server` with its agent,
//! `berth agent`), as k3s runs kube-router's network policy controller beside
//! kube-proxy: `crates/netpol` programs the node's pods' allowed traffic into
//! the nftables table `inet berth-netpol`.

/// Network policy flags shared by `berth server` and `berth agent`.
#[derive(clap::Args, Debug, Clone)]
pub struct NetworkPolicyArgs {
    /// Do not enforce NetworkPolicies on this node (as k3s's
    /// --disable-network-policy): every pod then reaches every pod.
    #[arg(long)]
    pub disable_network_policy: bool,
}

/// The User-Agent (and, on a joined node, the log name) of the controller.
pub const COMPONENT: &str = "berth-network-policy";

/// Starts enforcement for node `node_name` with `client` (its User-Agent
/// names [`COMPONENT`]). A node without nft (or not root) gets a logged error
/// and no enforcement, not a failed start: policies then have no effect there,
/// which the error says.
pub async fn start(
    client: kube::Client,
    args: &NetworkPolicyArgs,
    node_name: &str,
) -> Option<berth_netpol::NetworkPolicyController> {
    if args.disable_network_policy {
        return None;
    }
    let cfg = berth_netpol::Config::new(node_name);
    match berth_netpol::start(client, cfg).await {
        Ok(c) => {
            println!(
                "Network policy: nftables table inet {}",
                berth_netpol::TABLE
            );
            Some(c)
        }
        Err(e) => {
            tracing::error!(error = %e, "network policy controller not started: NetworkPolicies are NOT enforced on this node (needs nft, br_netfilter and root; --disable-network-policy to go without)");
            None
        }
    }
}
