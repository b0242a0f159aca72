//! Which address serves a Service's port, as kube-apiserver's endpoint routing
//! (`--enable-aggregator-routing`) resolves it for webhooks and aggregated API
//! servers: a ready endpoint of the Service's EndpointSlices, at the target port
//! of the slice port named as the Service port. The API server needs no service
//! proxy on its own host for it.

use std::net::SocketAddr;

use serde_json::Value;

use crate::objects;
use crate::watchcache::WatchCache;

/// The address of port `port` of Service `namespace/name`, or upstream's words
/// for why there is none.
pub fn resolve_service(
    cache: &WatchCache,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<SocketAddr, String> {
    let svc = cache
        .get(&format!("/registry/services/{namespace}/{name}"))
        .and_then(|s| objects::decode_at(&s.bytes, s.mod_revision).ok())
        .ok_or_else(|| format!("service \"{name}\" not found"))?;
    // The same port and endpoint choice as the services/proxy subresource.
    let port_name =
        crate::proxy::service_port_name(&svc, name, &port.to_string()).map_err(|e| e.message)?;
    let (slices, _) = cache.snapshot(&format!(
        "/registry/endpointslices.discovery.k8s.io/{namespace}/"
    ));
    let slices: Vec<Value> = slices
        .iter()
        .filter_map(|(_, s)| objects::decode_at(&s.bytes, s.mod_revision).ok())
        .filter(|s| {
            objects::labels(s)
                .get("kubernetes.io/service-name")
                .and_then(Value::as_str)
                == Some(name)
        })
        .collect();
    crate::proxy::candidates(&slices, &port_name)
        .0
        .first()
        .map(|c| SocketAddr::new(c.ip, c.port))
        .ok_or_else(|| format!("no endpoints available for service \"{name}\""))
}
