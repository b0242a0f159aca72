//! From API objects to what the proxy serves (pure): the routing table of the
//! Ingresses of Berth's classes, the ready endpoints of each backend, the TLS
//! certificates by host, and the problems to report as events.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend, IngressClass};
use rustls::sign::CertifiedKey;

use crate::router::{HostMatch, PathType, Router};
use crate::tls;

/// The `spec.controller` of IngressClasses this controller serves.
pub const CONTROLLER: &str = "berth.dev/ingress";
/// The legacy class annotation (still honoured by controllers upstream).
const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A Service port as a backend names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PortRef {
    Number(i32),
    Name(String),
}

/// One backend: a Service port in a namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BackendKey {
    pub namespace: String,
    pub service: String,
    pub port: PortRef,
}

/// Something wrong with an Ingress, reported as a Warning event on it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Problem {
    pub namespace: String,
    pub name: String,
    pub reason: &'static str,
    pub message: String,
}

/// Everything the proxy needs, rebuilt whole on every change.
#[derive(Default)]
pub struct Snapshot {
    pub router: Router<BackendKey>,
    /// Ready endpoints per backend (absent or empty: 503).
    pub endpoints: HashMap<BackendKey, Vec<SocketAddr>>,
    /// Certificates by TLS host, exact hosts first.
    pub certs: Vec<(HostMatch, Arc<CertifiedKey>)>,
    /// (namespace, name) of every Ingress served.
    pub served: Vec<(String, String)>,
    pub problems: Vec<Problem>,
}

impl Snapshot {
    /// The certificate for an SNI name.
    pub fn cert_for(&self, sni: &str) -> Option<Arc<CertifiedKey>> {
        let host = crate::router::normalize_host(sni);
        self.certs
            .iter()
            .find(|(m, _)| m.covers(&host))
            .map(|(_, c)| c.clone())
    }
}

/// The API objects a snapshot is built from.
#[derive(Default)]
pub struct Inputs<'a> {
    pub ingresses: &'a [Arc<Ingress>],
    pub classes: &'a [Arc<IngressClass>],
    pub services: &'a [Arc<Service>],
    pub slices: &'a [Arc<EndpointSlice>],
    pub secrets: &'a [Arc<Secret>],
}

fn ns_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// The class an Ingress asks for: `spec.ingressClassName`, else the legacy annotation.
fn class_of(ing: &Ingress) -> Option<&str> {
    ing.spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref())
        .or_else(|| {
            ing.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CLASS_ANNOTATION))
                .map(String::as_str)
        })
}

/// Whether an Ingress is this controller's: its class exists and names
/// [`CONTROLLER`]. Ingresses of other classes, or of none, are ignored.
pub fn is_ours(ing: &Ingress, classes: &[Arc<IngressClass>]) -> bool {
    let Some(class) = class_of(ing) else {
        return false;
    };
    classes.iter().any(|c| {
        c.metadata.name.as_deref() == Some(class)
            && c.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(CONTROLLER)
    })
}

fn path_type_name(t: PathType) -> &'static str {
    match t {
        PathType::Exact => "Exact",
        PathType::Prefix => "Prefix",
        PathType::ImplementationSpecific => "ImplementationSpecific",
    }
}

/// A backend as a key, or why it cannot be served.
fn backend_key(ns: &str, b: &IngressBackend) -> Result<BackendKey, String> {
    if let Some(r) = &b.resource {
        return Err(format!(
            "resource backend {}{} {:?} is not supported by {CONTROLLER}",
            r.api_group
                .as_deref()
                .map(|g| format!("{g}/"))
                .unwrap_or_default(),
            r.kind,
            r.name
        ));
    }
    let svc = b
        .service
        .as_ref()
        .ok_or_else(|| "backend names no Service".to_string())?;
    let port = svc.port.as_ref();
    let port = match (
        port.and_then(|p| p.name.clone()).filter(|n| !n.is_empty()),
        port.and_then(|p| p.number),
    ) {
        (Some(name), _) => PortRef::Name(name),
        (None, Some(n)) => PortRef::Number(n),
        (None, None) => return Err(format!("backend Service {:?} names no port", svc.name)),
    };
    Ok(BackendKey {
        namespace: ns.to_string(),
        service: svc.name.clone(),
        port,
    })
}

/// Builds the snapshot. Ingresses are taken oldest first, so the oldest wins
/// a rule or default backend two of them claim (as ingress-nginx does).
pub fn build(inputs: &Inputs<'_>) -> Snapshot {
    let mut snap = Snapshot::default();
    let mut ours: Vec<&Arc<Ingress>> = inputs
        .ingresses
        .iter()
        .filter(|i| i.metadata.deletion_timestamp.is_none() && is_ours(i, inputs.classes))
        .collect();
    ours.sort_by(|a, b| {
        let ts = |i: &Ingress| i.metadata.creation_timestamp.as_ref().map(|t| t.0);
        ts(a)
            .cmp(&ts(b))
            .then_with(|| ns_name(&a.metadata).cmp(&ns_name(&b.metadata)))
    });
    let mut backends: HashSet<BackendKey> = HashSet::new();
    // Which Ingresses use each backend, to report its problems on them.
    let mut users: HashMap<BackendKey, Vec<(String, String)>> = HashMap::new();
    let mut exact_certs = Vec::new();
    let mut wildcard_certs = Vec::new();
    for ing in ours {
        let (ns, name) = ns_name(&ing.metadata);
        let mut problem = |reason: &'static str, message: String| {
            snap.problems.push(Problem {
                namespace: ns.clone(),
                name: name.clone(),
                reason,
                message,
            })
        };
        let Some(spec) = &ing.spec else { continue };
        if let Some(b) = &spec.default_backend {
            match backend_key(&ns, b) {
                Ok(k) => {
                    if snap.router.set_default(k.clone()) {
                        users
                            .entry(k.clone())
                            .or_default()
                            .push((ns.clone(), name.clone()));
                        backends.insert(k);
                    } else {
                        problem(
                            "DefaultBackendConflict",
                            "defaultBackend ignored: an older Ingress of the class already sets one".into(),
                        );
                    }
                }
                Err(msg) => problem("UnsupportedBackend", format!("defaultBackend: {msg}")),
            }
        }
        for rule in spec.rules.iter().flatten() {
            let host = rule.host.as_deref().unwrap_or("");
            for p in rule.http.iter().flat_map(|h| &h.paths) {
                let path = p.path.as_deref().unwrap_or("/");
                let Some(pt) = PathType::parse(&p.path_type) else {
                    problem(
                        "InvalidPathType",
                        format!("path {path}: unknown pathType {:?}", p.path_type),
                    );
                    continue;
                };
                let key = match backend_key(&ns, &p.backend) {
                    Ok(k) => k,
                    Err(msg) => {
                        problem(
                            "UnsupportedBackend",
                            format!("host {host:?} path {path}: {msg}; the path is not served"),
                        );
                        continue;
                    }
                };
                match snap.router.add(host, path, pt, key.clone()) {
                    Ok(()) => {
                        users
                            .entry(key.clone())
                            .or_default()
                            .push((ns.clone(), name.clone()));
                        backends.insert(key);
                    }
                    Err(c) => problem(
                        "RuleConflict",
                        format!(
                            "host {:?} path {} ({}) is already served for an older Ingress; this rule is ignored",
                            c.host,
                            c.path,
                            path_type_name(c.path_type)
                        ),
                    ),
                }
            }
        }
        for t in spec.tls.iter().flatten() {
            let Some(secret_name) = t.secret_name.as_deref().filter(|s| !s.is_empty()) else {
                continue;
            };
            let secret = inputs.secrets.iter().find(|s| {
                s.metadata.namespace.as_deref() == Some(ns.as_str())
                    && s.metadata.name.as_deref() == Some(secret_name)
            });
            let Some(secret) = secret else {
                problem(
                    "SecretNotFound",
                    format!("TLS Secret \"{ns}/{secret_name}\" not found"),
                );
                continue;
            };
            let data = secret.data.as_ref();
            let get = |k: &str| data.and_then(|d| d.get(k)).map(|b| b.0.as_slice());
            match tls::certified_key(get("tls.crt"), get("tls.key")) {
                Ok(key) => {
                    let key = Arc::new(key);
                    for h in t.hosts.iter().flatten() {
                        match HostMatch::parse(h) {
                            m @ HostMatch::Exact(_) => exact_certs.push((m, key.clone())),
                            m @ HostMatch::Wildcard(_) => wildcard_certs.push((m, key.clone())),
                            HostMatch::Any => {}
                        }
                    }
                }
                Err(e) => problem(
                    "InvalidCertificate",
                    format!("TLS Secret \"{ns}/{secret_name}\": {e}"),
                ),
            }
        }
    }
    snap.certs = exact_certs.into_iter().chain(wildcard_certs).collect();
    for key in backends {
        let report = |snap: &mut Snapshot, reason: &'static str, message: String| {
            for (ns, name) in users.get(&key).into_iter().flatten() {
                snap.problems.push(Problem {
                    namespace: ns.clone(),
                    name: name.clone(),
                    reason,
                    message: message.clone(),
                });
            }
        };
        match resolve(&key, inputs) {
            Ok(addrs) => {
                snap.endpoints.insert(key, addrs);
            }
            Err((reason, msg)) => report(&mut snap, reason, msg),
        }
    }
    let mut seen = HashSet::new();
    snap.problems.retain(|p| seen.insert(p.clone()));
    snap.served = users
        .into_values()
        .flatten()
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    snap.served.sort();
    snap
}

/// The ready endpoints of a backend: the Service port it names, then that
/// port's name in the Service's EndpointSlices.
fn resolve(
    key: &BackendKey,
    inputs: &Inputs<'_>,
) -> Result<Vec<SocketAddr>, (&'static str, String)> {
    let svc = inputs
        .services
        .iter()
        .find(|s| {
            s.metadata.namespace.as_deref() == Some(key.namespace.as_str())
                && s.metadata.name.as_deref() == Some(key.service.as_str())
        })
        .ok_or_else(|| {
            (
                "ServiceNotFound",
                format!("Service \"{}/{}\" not found", key.namespace, key.service),
            )
        })?;
    let ports = svc.spec.as_ref().and_then(|s| s.ports.as_ref());
    let port = ports
        .into_iter()
        .flatten()
        .find(|p| match &key.port {
            PortRef::Number(n) => p.port == *n,
            PortRef::Name(n) => p.name.as_deref() == Some(n.as_str()),
        })
        .ok_or_else(|| {
            let port = match &key.port {
                PortRef::Number(n) => n.to_string(),
                PortRef::Name(n) => format!("{n:?}"),
            };
            (
                "PortNotFound",
                format!(
                    "Service \"{}/{}\" has no port {port}",
                    key.namespace, key.service
                ),
            )
        })?;
    let port_name = port.name.clone().unwrap_or_default();
    let mut out = Vec::new();
    for slice in inputs.slices.iter().filter(|s| {
        s.metadata.namespace.as_deref() == Some(key.namespace.as_str())
            && s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                .map(String::as_str)
                == Some(key.service.as_str())
    }) {
        let Some(target) = slice.ports.iter().flatten().find(|p| {
            p.name.clone().unwrap_or_default() == port_name
                && p.protocol.as_deref().unwrap_or("TCP") == "TCP"
        }) else {
            continue;
        };
        let Some(number) = target.port.and_then(|n| u16::try_from(n).ok()) else {
            continue;
        };
        for ep in &slice.endpoints {
            let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            if !ready {
                continue;
            }
            if let Some(ip) = ep.addresses.first().and_then(|a| a.parse::<IpAddr>().ok()) {
                let addr = SocketAddr::new(ip, number);
                if !out.contains(&addr) {
                    out.push(addr);
                }
            }
        }
    }
    Ok(out)
}

/// The annotation each node's ingress controller sets on its Node: the address it
/// serves on. Every controller derives the same `status.loadBalancer.ingress`
/// (all serving nodes that are Ready) from these, so several nodes never fight
/// over the status.
pub const NODE_ADDRESS_ANNOTATION: &str = "ingress.berth.dev/address";

/// The addresses served Ingresses report: every Node carrying
/// [`NODE_ADDRESS_ANNOTATION`] whose Ready condition is not False/Unknown, sorted.
/// A controller whose own Node does not exist (a server without a node agent)
/// adds its own address.
pub fn serving_addresses(nodes: &[Arc<Node>], own_node: &str, own: IpAddr) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = nodes
        .iter()
        .filter(|n| {
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
            ready.is_none_or(|c| c.status == "True")
        })
        .filter_map(|n| {
            n.metadata
                .annotations
                .as_ref()?
                .get(NODE_ADDRESS_ANNOTATION)
        })
        .filter_map(|a| a.parse().ok())
        .collect();
    if !nodes
        .iter()
        .any(|n| n.metadata.name.as_deref() == Some(own_node))
    {
        out.push(own);
    }
    out.sort();
    out.dedup();
    out
}

/// The `status.loadBalancer.ingress` for `addresses`.
pub fn load_balancer_status(addresses: &[IpAddr]) -> serde_json::Value {
    let ingress: Vec<serde_json::Value> = addresses
        .iter()
        .map(|a| serde_json::json!({"ip": a.to_string()}))
        .collect();
    serde_json::json!({"status": {"loadBalancer": {"ingress": ingress}}})
}

/// Whether an Ingress's status already reports exactly `addresses`, in order.
pub fn status_is(ing: &Ingress, addresses: &[IpAddr]) -> bool {
    let ips: Vec<Option<String>> = ing
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .map(|i| i.ip.clone())
        .collect();
    let want: Vec<Option<String>> = addresses.iter().map(|a| Some(a.to_string())).collect();
    ips == want
}

/// Problems as a map keyed by Ingress, for tests and logs.
pub fn problems_by_ingress(snap: &Snapshot) -> BTreeMap<(String, String), Vec<&'static str>> {
    let mut out: BTreeMap<(String, String), Vec<&'static str>> = BTreeMap::new();
    for p in &snap.problems {
        out.entry((p.namespace.clone(), p.name.clone()))
            .or_default()
            .push(p.reason);
    }
    out
}

#[cfg(test)]
mod tests;
