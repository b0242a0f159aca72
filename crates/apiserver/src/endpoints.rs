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
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let sp = ports
        .iter()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        .ok_or_else(|| format!("no service port {port} found for service \"{name}\""))?;
    let port_name = sp.get("name").and_then(Value::as_str).unwrap_or("");
    let (slices, _) = cache.snapshot(&format!(
        "/registry/endpointslices.discovery.k8s.io/{namespace}/"
    ));
    for (_, s) in slices {
        let Ok(slice) = objects::decode_at(&s.bytes, s.mod_revision) else {
            continue;
        };
        if objects::labels(&slice)
            .get("kubernetes.io/service-name")
            .and_then(Value::as_str)
            != Some(name)
        {
            continue;
        }
        let Some(target) = slice
            .get("ports")
            .and_then(Value::as_array)
            .and_then(|ps| {
                ps.iter()
                    .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
            })
            .and_then(|p| p.get("port").and_then(Value::as_u64))
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        let endpoints = slice
            .get("endpoints")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for ep in endpoints {
            if ep.pointer("/conditions/ready").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            if let Some(ip) = ep
                .get("addresses")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .and_then(|a| a.parse::<std::net::IpAddr>().ok())
            {
                return Ok(SocketAddr::new(ip, target));
            }
        }
    }
    Err(format!("no endpoints available for service \"{name}\""))
}
