//! Berth's service proxy (kube-proxy's nftables mode): on every node, Services'
//! ClusterIPs, NodePorts and external IPs are programmed into Berth's own
//! nftables table (`ip berth-proxy`) so connections reach a ready endpoint.
//!
//! - [`model`]: Services and endpoints → the desired [`ruleset::Ruleset`] (pure).
//! - [`ruleset`]: whole-table and incremental nft transactions, the repair fingerprint.
//! - [`nft`]: the kernel boundary ([`nft::NftBackend`]: `nft -f -`, or a fake).
//! - [`syncer`]: applies rulesets, checks the table, cleans up.
//! - [`conntrack`]: stale UDP conntrack entries after endpoint changes.
//! - [`proxier`]: the kube-rs watches and the sync loop.

pub mod conntrack;
pub mod convert;
pub mod model;
pub mod nft;
pub mod proxier;
pub mod ruleset;
pub mod syncer;
pub mod sysctl;

use std::time::Duration;

pub use proxier::{Proxy, start};

/// The table Berth programs.
pub const TABLE: &str = "berth-proxy";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("nft: {0}")]
    Nft(String),
    #[error("conntrack: {0}")]
    Conntrack(String),
}

/// The proxy's settings (kube-proxy's flags where they exist).
#[derive(Clone, Debug)]
pub struct Config {
    pub node: model::NodeConfig,
    /// The nftables table (family ip).
    pub table: String,
    /// Changes within this long of the last sync wait for the next one
    /// (kube-proxy's --nftables-min-sync-period, 1 s).
    pub min_sync_period: Duration,
    /// How often the table is checked against what was applied and repaired
    /// (kube-proxy's --nftables-sync-period is 30 s).
    pub sync_period: Duration,
}

impl Config {
    pub fn new(node: model::NodeConfig) -> Config {
        Config {
            node,
            table: TABLE.into(),
            min_sync_period: Duration::from_secs(1),
            sync_period: Duration::from_secs(30),
        }
    }
}

/// Parses `a.b.c.d/len` (IPv4 only; the first of a comma-separated list).
pub fn parse_cidr(s: &str) -> Option<(std::net::Ipv4Addr, u8)> {
    let first = s.split(',').next()?.trim();
    let (ip, len) = first.split_once('/')?;
    let len: u8 = len.parse().ok().filter(|l| *l <= 32)?;
    Some((ip.parse().ok()?, len))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parse_cidr() {
        let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().expect("ip");
        let cases = [
            ("10.42.0.0/16", Some((ip("10.42.0.0"), 16))),
            ("10.42.0.0/16,fd00::/56", Some((ip("10.42.0.0"), 16))),
            ("10.42.0.0/33", None),
            ("10.42.0.0", None),
            ("fd00::/56", None),
        ];
        for (input, want) in cases {
            assert_eq!(super::parse_cidr(input), want, "{input}");
        }
    }
}
