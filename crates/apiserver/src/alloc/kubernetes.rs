//! The `kubernetes` Service in `default` and its Endpoints/EndpointSlice
//! (upstream's bootstrap controller and endpoint reconciler): the first IP of
//! the Service CIDR, port 443 `https` → the API server's secure port, and the
//! API server's address as the one endpoint. Kept at start and every
//! [`INTERVAL`], so a deleted or edited object comes back.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tracing::warn;

use super::ServiceRanges;
use crate::request::{Query, ResourcePath};
use crate::rest::Rest;
use crate::status::{ApiError, ApiResult};

/// Upstream's endpoint reconciler interval.
pub const INTERVAL: Duration = Duration::from_secs(10);
const NAMESPACE: &str = "default";
const NAME: &str = "kubernetes";

/// Where clients reach the API server.
#[derive(Debug, Clone, Copy)]
pub struct ApiEndpoint {
    pub ip: IpAddr,
    pub port: u16,
}

/// The address to publish: the bind address, or for `0.0.0.0`/`::` the
/// address of the interface that holds the default route (as upstream picks
/// its advertise address), loopback only as the last resort.
pub fn advertise_address(bind: IpAddr) -> IpAddr {
    if !bind.is_unspecified() {
        return bind;
    }
    // A UDP connect sends nothing; it only asks the kernel for a route.
    let probe = || -> std::io::Result<IpAddr> {
        let s = std::net::UdpSocket::bind("0.0.0.0:0")?;
        s.connect("192.0.2.1:9")?;
        Ok(s.local_addr()?.ip())
    };
    match probe() {
        Ok(ip) if !ip.is_unspecified() => ip,
        _ => IpAddr::from([127, 0, 0, 1]),
    }
}

/// The Service as upstream's bootstrap controller creates it.
pub fn service(ranges: ServiceRanges, ep: ApiEndpoint) -> Value {
    let ip = ranges
        .cidr
        .nth(0)
        .map(|a| a.to_string())
        .unwrap_or_default();
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE,
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": ip,
            "clusterIPs": [ip],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": ep.port}],
            "sessionAffinity": "None",
        }
    })
}

fn ports(ep: ApiEndpoint) -> Value {
    json!([{"name": "https", "port": ep.port, "protocol": "TCP"}])
}

/// The Endpoints object (not mirrored into a second EndpointSlice).
pub fn endpoints(ep: ApiEndpoint) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": NAME, "namespace": NAMESPACE,
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": ep.ip.to_string()}], "ports": ports(ep)}],
    })
}

pub fn endpoint_slice(ep: ApiEndpoint) -> Value {
    let family = if ep.ip.is_ipv6() { "IPv6" } else { "IPv4" };
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": NAME, "namespace": NAMESPACE,
            "labels": {"kubernetes.io/service-name": NAME}},
        "addressType": family,
        "endpoints": [{"addresses": [ep.ip.to_string()], "conditions": {"ready": true}}],
        "ports": ports(ep),
    })
}

fn path(group: &str, version: &str, plural: &str, name: Option<&str>) -> ApiResult<ResourcePath> {
    let rt = berth_api::registry::lookup(group, version, plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} not registered")))?;
    Ok(ResourcePath {
        rt,
        namespace: Some(NAMESPACE.into()),
        name: name.map(String::from),
        subresource: None,
        legacy_watch: false,
    })
}

fn query() -> Query {
    Query {
        params: HashMap::new(),
        user_agent: "kube-apiserver/v1.33.0".into(),
        user: None,
    }
}

/// Creates `want`, or updates the fields in `keys` when they differ.
async fn create_or_reconcile(
    rest: &Rest,
    group: &str,
    version: &str,
    plural: &str,
    want: Value,
    reconcile: impl Fn(&Value, &Value) -> Option<Value>,
) -> ApiResult<()> {
    let one = path(group, version, plural, Some(NAME))?;
    match rest.get(&one).await {
        Ok(cur) => {
            if let Some(updated) = reconcile(&cur, &want) {
                rest.update(&one, updated, &query()).await?;
            }
            Ok(())
        }
        Err(e) if e.code == 404 => {
            let all = path(group, version, plural, None)?;
            match rest.create(&all, want, &query()).await {
                Ok(_) => Ok(()),
                Err(e) if e.code == 409 => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Copies `keys` (JSON pointers) from `want` into `cur` if any differs.
fn overwrite(cur: &Value, want: &Value, keys: &[&str]) -> Option<Value> {
    if keys.iter().all(|k| cur.pointer(k) == want.pointer(k)) {
        return None;
    }
    let mut out = cur.clone();
    for k in keys {
        let (parent, leaf) = k.rsplit_once('/')?;
        let target = if parent.is_empty() {
            Some(&mut out)
        } else {
            out.pointer_mut(parent)
        };
        if let Some(Value::Object(m)) = target {
            m.insert(
                leaf.to_string(),
                want.pointer(k).cloned().unwrap_or(Value::Null),
            );
        }
    }
    Some(out)
}

/// Where upstream keeps the default ServiceCIDR (`kubernetes`).
pub const SERVICE_CIDR_KEY: &str = "/registry/servicecidrs.networking.k8s.io/kubernetes";

/// The default ServiceCIDR object, as upstream's bootstrap creates it from
/// `--service-cluster-ip-range`; stored beside the IPAddress records.
pub fn service_cidr(ranges: ServiceRanges) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
        "metadata": {"name": NAME, "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": crate::objects::now_rfc3339(),
            "finalizers": ["networking.k8s.io/service-cidr-finalizer"]},
        "spec": {"cidrs": [ranges.cidr.to_string()]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "",
            "message": "Kubernetes Service CIDR is ready",
            "lastTransitionTime": crate::objects::now_rfc3339()}]},
    })
}

/// One reconcile of the ServiceCIDR record and the three objects.
pub async fn ensure(rest: &Rest, ranges: ServiceRanges, ep: ApiEndpoint) -> ApiResult<()> {
    if rest.store.get(SERVICE_CIDR_KEY).await?.is_none() {
        match rest
            .store
            .create(
                SERVICE_CIDR_KEY,
                crate::objects::encode(&service_cidr(ranges))?,
            )
            .await
        {
            Ok(_) | Err(berth_store::StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let svc = service(ranges, ep);
    create_or_reconcile(rest, "", "v1", "services", svc, |cur, want| {
        // Upstream reconciles the ports (and type) only; the IP is immutable.
        let same_ports = cur
            .pointer("/spec/ports/0/targetPort")
            .and_then(Value::as_i64)
            == want
                .pointer("/spec/ports/0/targetPort")
                .and_then(Value::as_i64)
            && cur
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map(Vec::len)
                == Some(1);
        if same_ports && cur.pointer("/spec/type") == want.pointer("/spec/type") {
            return None;
        }
        let mut out = cur.clone();
        out["spec"]["ports"] = want["spec"]["ports"].clone();
        out["spec"]["type"] = json!("ClusterIP");
        Some(out)
    })
    .await?;
    create_or_reconcile(rest, "", "v1", "endpoints", endpoints(ep), |cur, want| {
        overwrite(cur, want, &["/subsets"])
    })
    .await?;
    create_or_reconcile(
        rest,
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        endpoint_slice(ep),
        |cur, want| overwrite(cur, want, &["/addressType", "/endpoints", "/ports"]),
    )
    .await
}

/// At server start: the objects exist before the server answers, then they
/// are kept in place, and the allocation repair loop runs.
pub async fn start(
    state: &Arc<crate::server::State>,
    config: &crate::Config,
    secure: std::net::SocketAddr,
) -> ApiResult<()> {
    let ranges = config.services;
    let ep = ApiEndpoint {
        ip: advertise_address(config.bind_address),
        port: secure.port(),
    };
    ensure(&state.rest, ranges, ep).await?;
    tokio::spawn(run(state.clone(), ranges, ep));
    tokio::spawn(super::repair::run(state.rest.store.clone(), ranges));
    Ok(())
}

/// Keeps the objects in place while the server runs.
pub async fn run(state: Arc<crate::server::State>, ranges: ServiceRanges, ep: ApiEndpoint) {
    loop {
        if let Err(e) = ensure(&state.rest, ranges, ep).await {
            warn!(error = %e, "reconciling the kubernetes Service failed");
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_follow_the_server() {
        let ep = ApiEndpoint {
            ip: IpAddr::from([192, 168, 1, 5]),
            port: 6443,
        };
        let svc = service(ServiceRanges::default(), ep);
        assert_eq!(svc["spec"]["clusterIP"], "10.43.0.1");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 6443);
        assert_eq!(
            endpoints(ep)["subsets"][0]["addresses"][0]["ip"],
            "192.168.1.5"
        );
        assert_eq!(endpoint_slice(ep)["addressType"], "IPv4");
        assert_eq!(
            service_cidr(ServiceRanges::default())["spec"]["cidrs"],
            json!(["10.43.0.0/16"])
        );
        assert_eq!(
            advertise_address(IpAddr::from([10, 0, 0, 1])).to_string(),
            "10.0.0.1"
        );
        let moved = endpoints(ApiEndpoint { port: 7443, ..ep });
        let fix = overwrite(&endpoints(ep), &moved, &["/subsets"]).unwrap();
        assert_eq!(fix["subsets"][0]["ports"][0]["port"], 7443);
        assert!(overwrite(&moved, &moved, &["/subsets"]).is_none());
    }
}
