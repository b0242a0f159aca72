//! NetworkPolicy enforcement on each node (k3s runs kube-router's policy
//! controller for this): the node's pods' allowed ingress and egress are
//! programmed into Berth's own nftables table (`inet berth-netpol`), beside
//! the service proxy's.
//!
//! - [`convert`]: Pods, Namespaces, NetworkPolicies → the model's plain data.
//! - [`model`]: upstream's semantics → per-pod allows and peer sets (pure),
//!   and a flow evaluator.
//! - [`ruleset`]: the model as the table's chains, maps and sets.
//! - [`controller`]: the watches, the debounced sync, repair and cleanup
//!   (the service proxy's syncer and nft backend).

pub mod controller;
pub mod convert;
pub mod model;
pub mod ruleset;

use std::time::Duration;

pub use controller::{NetworkPolicyController, start};

/// The table Berth programs.
pub const TABLE: &str = "berth-netpol";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Nft(#[from] berth_proxy::Error),
}

/// The controller's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// This node: only its pods are subjects here (each node judges its own
    /// pods' traffic; peers are pods of every node).
    pub node_name: String,
    /// The nftables table (family inet).
    pub table: String,
    /// Changes within this long of the last sync wait for the next one.
    pub min_sync_period: Duration,
    /// How often the table is checked against what was applied and repaired.
    pub sync_period: Duration,
}

impl Config {
    pub fn new(node_name: impl Into<String>) -> Config {
        Config {
            node_name: node_name.into(),
            table: TABLE.into(),
            min_sync_period: Duration::from_secs(1),
            sync_period: Duration::from_secs(30),
        }
    }
}
