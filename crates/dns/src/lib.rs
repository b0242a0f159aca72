//! Cluster DNS (CoreDNS's kubernetes plugin, as k3s runs it: Services, endpoints
//! and pods of the cluster domain, other names forwarded to the node's
//! resolvers) and NodeLocal DNSCache (a cache on each node, on a link-local
//! address, forwarding misses to the cluster DNS over TCP).
//!
//! - `records`: the zone, pure (Services and EndpointSlices in, answers out).
//! - `cache`: the node-local cache, pure with a clock.
//! - `wire`: hickory-proto messages; `serve`: UDP/TCP listeners; `forward`:
//!   upstream clients; `metrics`: CoreDNS-named counters at `/metrics`.
//! - `cluster`: the cluster DNS component (watches, the `kube-dns` Service and
//!   its Endpoints); `nodelocal`: the cache component; `iface`: its dummy link.

pub mod cache;
pub mod cluster;
pub mod forward;
pub mod iface;
pub mod metrics;
pub mod nodelocal;
pub mod records;
pub mod serve;
pub mod wire;

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("upstream {0} did not answer in time")]
    Timeout(SocketAddr),
    #[error("no upstream DNS server configured")]
    NoUpstream,
    #[error("network interface: {0}")]
    Interface(String),
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}
