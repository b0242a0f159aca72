//! Berth's node agent library.
//!
//! `node` is the Node object as a kubelet registers and maintains it (capacity,
//! allocatable, labels, conditions, Lease heartbeats); the real node agent and the
//! simulator in `sim` both use it. Everything here talks to the cluster only
//! through the API server (kube-rs), as upstream's kubelet does.

pub mod agent;
pub mod backoff;
pub mod cgroups;
pub mod cm;
pub mod cni;
pub mod cri;
pub mod envvars;
pub mod eviction;
pub mod images;
pub mod localpath;
pub mod node;
pub mod objects;
pub mod prober;
pub mod runtime;
pub mod server;
pub mod servicelinks;
pub mod sim;
pub mod stats;
pub mod status;
pub mod token;
pub mod volumes;

#[cfg(test)]
pub(crate) mod testutil;

/// Errors from the node library and the simulator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("invalid quantity {value:?} for {what}: {source}")]
    Quantity {
        what: String,
        value: String,
        source: berth_api::quantity::QuantityError,
    },
    #[error("invalid eviction threshold {0:?}")]
    Eviction(String),
    #[error("invalid {0}")]
    Invalid(String),
    #[error("encoding failed: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    MissingRuntime(#[from] cri::MissingRuntime),
    #[error("container runtime: {0}")]
    Runtime(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("node simulator: {0}")]
    Sim(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
