//! Service cluster IPs and node ports.
//!
//! As upstream 1.33's IPAddress allocator, every allocated cluster IP is one
//! stored `networking.k8s.io/v1` IPAddress object (`/registry/ipaddresses.networking.k8s.io/<ip>`)
//! whose `parentRef` names the Service; every node port is one key under
//! [`NODE_PORT_PREFIX`]. Claiming is the store's create-if-absent, so two
//! writers can never both get one value, and the state is the store's, so it
//! survives restarts. The store has no multi-key transactions, so as upstream
//! a claim happens before the Service is written and is undone if the write
//! fails; `repair` removes what a crash between the two leaves behind and
//! re-creates records for Services whose records went missing.
//!
//! `fields` (pure) decides what a write holds; this module claims and releases.

pub mod fields;
pub mod kubernetes;
pub mod range;
pub mod repair;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use berth_api::validation::FieldError;
use berth_store::{RangeRequest, Store, StoreError};
use serde_json::{Value, json};
use tracing::warn;

pub use range::{Cidr, PortRange, RangeError};

use crate::objects;
use crate::status::{ApiError, ApiResult};

/// Where IPAddress objects live (upstream's resource, cluster-scoped).
pub const IP_PREFIX: &str = "/registry/ipaddresses.networking.k8s.io/";
/// One key per allocated node port.
pub const NODE_PORT_PREFIX: &str = "/registry/berth.dev/servicenodeports/";
/// Upstream's IPAddress `managed-by` value for the Service allocator.
pub const MANAGED_BY: &str = "ipallocator.k8s.io";

/// `--service-cidr` and `--service-node-port-range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceRanges {
    pub cidr: Cidr,
    pub node_ports: PortRange,
}

impl Default for ServiceRanges {
    fn default() -> Self {
        ServiceRanges {
            cidr: Cidr::default_service_cidr(),
            node_ports: PortRange::default(),
        }
    }
}

/// Values claimed for one write, undone if the write does not happen.
#[derive(Debug, Default)]
#[must_use]
pub struct Claims {
    keys: Vec<String>,
}

pub struct Allocator {
    store: Arc<dyn Store>,
    ranges: ServiceRanges,
}

fn ip_key(ip: &str) -> String {
    format!("{IP_PREFIX}{ip}")
}

fn port_key(port: i64) -> String {
    format!("{NODE_PORT_PREFIX}{port}")
}

fn parent_of(svc: &Value) -> (String, String) {
    (
        objects::namespace(svc).unwrap_or("").to_string(),
        objects::name(svc).unwrap_or("").to_string(),
    )
}

/// Whether a stored allocation record names this Service.
fn record_parent(record: &Value) -> (String, String) {
    let p = record.pointer("/spec/parentRef");
    let s = |k: &str| {
        p.and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (s("namespace"), s("name"))
}

fn invalid(name: &str, errs: Vec<FieldError>) -> ApiError {
    let causes = errs.iter().map(FieldError::to_cause).collect();
    let message = berth_api::validation::invalid_message("Service", name, &errs);
    match berth_api::registry::lookup("", "v1", "services") {
        Some(rt) => ApiError::invalid(rt, name, message, causes),
        None => ApiError::new(422, "Invalid", message),
    }
}

impl Allocator {
    pub fn new(store: Arc<dyn Store>, ranges: ServiceRanges) -> Self {
        Allocator { store, ranges }
    }

    pub fn ranges(&self) -> ServiceRanges {
        self.ranges
    }

    /// Field fix-ups before validation on create; 422 on what the cluster cannot do.
    pub fn prepare_create(&self, svc: &mut Value) -> ApiResult<()> {
        fields::normalize_cluster_ips(svc, None);
        let errs = fields::init_ip_family_fields(svc, self.ranges.cidr.family());
        if errs.is_empty() {
            Ok(())
        } else {
            Err(invalid(&parent_of(svc).1, errs))
        }
    }

    /// Field fix-ups before validation on update of the main resource.
    pub fn prepare_update(&self, new: &mut Value, old: &Value) -> ApiResult<()> {
        fields::patch_allocated_values(new, old);
        fields::normalize_cluster_ips(new, Some(old));
        fields::drop_type_dependent_fields(new, old);
        let errs = fields::init_ip_family_fields(new, self.ranges.cidr.family());
        if errs.is_empty() {
            Ok(())
        } else {
            Err(invalid(&parent_of(new).1, errs))
        }
    }

    /// After validation: claims the cluster IP and node ports `new` needs and
    /// `old` did not hold, filling in what was left to the allocator.
    pub async fn claim(
        &self,
        new: &mut Value,
        old: Option<&Value>,
        dry_run: bool,
    ) -> ApiResult<Claims> {
        let mut claims = Claims::default();
        match self.claim_inner(new, old, dry_run, &mut claims).await {
            Ok(()) => Ok(claims),
            Err(e) => {
                self.undo(claims).await;
                Err(e)
            }
        }
    }

    async fn claim_inner(
        &self,
        new: &mut Value,
        old: Option<&Value>,
        dry_run: bool,
        claims: &mut Claims,
    ) -> ApiResult<()> {
        let name = parent_of(new).1;
        let old_ips: Vec<String> = old.map(fields::allocated_ips).unwrap_or_default();
        if fields::needs_cluster_ip(new) {
            let ips = fields::cluster_ips(new);
            match ips.first().map(String::as_str) {
                Some("None") => {
                    if let Some(s) = new.get_mut("spec").and_then(Value::as_object_mut) {
                        s.insert("clusterIP".into(), json!("None"));
                    }
                }
                None | Some("") => {
                    let ip = self.claim_next_ip(new, dry_run, claims).await?;
                    if let Some(s) = new.get_mut("spec").and_then(Value::as_object_mut) {
                        s.insert("clusterIP".into(), json!(ip));
                        s.insert("clusterIPs".into(), json!([ip]));
                    }
                }
                Some(ip) if old_ips.iter().any(|o| o == ip) => {}
                Some(ip) => {
                    let ip = ip.to_string();
                    if let Err(why) = self.claim_ip(&ip, new, dry_run, claims).await? {
                        return Err(invalid(
                            &name,
                            vec![FieldError {
                                kind: berth_api::validation::FieldErrorType::Invalid,
                                field: "spec.clusterIPs".into(),
                                value: None,
                                detail: format!(
                                    "{}: failed to allocate IP {ip}: {why}",
                                    fields::go_string_slice(&ips)
                                ),
                            }],
                        ));
                    }
                }
            }
        }
        let held: HashSet<i64> = old
            .map(fields::allocated_node_ports)
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut mine: HashSet<i64> = HashSet::new();
        if fields::needs_node_ports(new) {
            let allocate = fields::should_allocate_node_ports(new);
            let ports = fields::ports_of(new);
            // On create, entries with the same port number (TCP and UDP) share
            // one node port, as upstream's initNodePorts; on update each unset
            // one gets its own (updateNodePorts).
            let mut by_port: std::collections::HashMap<i64, i64> = Default::default();
            for &(i, svc_port, requested) in &ports {
                if requested == 0 && !allocate {
                    continue;
                }
                let field = format!("spec.ports[{i}].nodePort");
                let shared = if old.is_none() {
                    by_port.get(&svc_port).copied()
                } else {
                    None
                };
                let wanted = match (shared, requested) {
                    (Some(p), 0) => p,
                    (Some(_), r) => r,
                    (None, 0) if old.is_none() => ports
                        .iter()
                        .find(|(_, sp, r)| *sp == svc_port && *r != 0)
                        .map_or(0, |p| p.2),
                    (None, r) => r,
                };
                let port = if wanted == 0 {
                    self.claim_next_port(new, dry_run, claims).await?
                } else {
                    if !held.contains(&wanted) && mine.insert(wanted) {
                        self.claim_port_checked(wanted, &field, &name, new, dry_run, claims)
                            .await?;
                    }
                    wanted
                };
                mine.insert(port);
                by_port.entry(svc_port).or_insert(port);
                if port != requested
                    && let Some(o) = new
                        .pointer_mut(&format!("/spec/ports/{i}"))
                        .and_then(Value::as_object_mut)
                {
                    o.insert("nodePort".into(), json!(port));
                }
            }
        }
        if fields::needs_health_check_port(new) {
            let hc = new
                .pointer("/spec/healthCheckNodePort")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if hc == 0 {
                let p = self.claim_next_port(new, dry_run, claims).await?;
                if let Some(s) = new.get_mut("spec").and_then(Value::as_object_mut) {
                    s.insert("healthCheckNodePort".into(), json!(p));
                }
            } else if !held.contains(&hc) && !mine.contains(&hc) {
                self.claim_port_checked(
                    hc,
                    "spec.healthCheckNodePort",
                    &name,
                    new,
                    dry_run,
                    claims,
                )
                .await?;
            }
        }
        Ok(())
    }

    async fn claim_port_checked(
        &self,
        port: i64,
        field: &str,
        name: &str,
        svc: &Value,
        dry_run: bool,
        claims: &mut Claims,
    ) -> ApiResult<()> {
        let why = if !self.ranges.node_ports.contains(port) {
            Some(format!(
                "provided port is not in the valid range. The range of valid ports is {}",
                self.ranges.node_ports
            ))
        } else if !self
            .claim_key(&port_key(port), port_record(svc), dry_run, claims)
            .await?
        {
            Some("provided port is already allocated".to_string())
        } else {
            None
        };
        match why {
            Some(why) => Err(invalid(name, vec![FieldError::invalid(field, port, why)])),
            None => Ok(()),
        }
    }

    /// Claims one specific IP; `Ok(Err(reason))` when it cannot be had.
    async fn claim_ip(
        &self,
        ip: &str,
        svc: &Value,
        dry_run: bool,
        claims: &mut Claims,
    ) -> ApiResult<Result<(), String>> {
        let Ok(addr) = ip.parse::<IpAddr>() else {
            return Ok(Err(format!("{ip} is not a valid IP address")));
        };
        let cidr = self.ranges.cidr;
        if !cidr.contains(addr) {
            return Ok(Err(
                "the provided network does not match the current range".into()
            ));
        }
        if !cidr.usable(addr) {
            return Ok(Err(format!(
                "the provided IP ({addr}) is not in the valid range. The range of valid IPs is {cidr}"
            )));
        }
        let record = ip_record(&addr.to_string(), cidr.family(), svc);
        if self
            .claim_key(&ip_key(&addr.to_string()), record, dry_run, claims)
            .await?
        {
            Ok(Ok(()))
        } else {
            Ok(Err("provided IP is already allocated".into()))
        }
    }

    async fn existing(&self, prefix: &str) -> ApiResult<HashSet<String>> {
        let resp = self
            .store
            .range(RangeRequest {
                prefix: prefix.to_string(),
                ..Default::default()
            })
            .await?;
        Ok(resp
            .kvs
            .into_iter()
            .filter_map(|kv| kv.key.strip_prefix(prefix).map(String::from))
            .collect())
    }

    async fn claim_next_ip(
        &self,
        svc: &Value,
        dry_run: bool,
        claims: &mut Claims,
    ) -> ApiResult<String> {
        let taken = self.existing(IP_PREFIX).await?;
        let cidr = self.ranges.cidr;
        for off in cidr.dynamic_order(u128::from(rand::random::<u64>())) {
            let Some(ip) = cidr.nth(off).map(|a| a.to_string()) else {
                continue;
            };
            if taken.contains(&ip) {
                continue;
            }
            let record = ip_record(&ip, cidr.family(), svc);
            if self
                .claim_key(&ip_key(&ip), record, dry_run, claims)
                .await?
            {
                return Ok(ip);
            }
        }
        Err(ApiError::internal(
            "failed to allocate a serviceIP: range is full",
        ))
    }

    async fn claim_next_port(
        &self,
        svc: &Value,
        dry_run: bool,
        claims: &mut Claims,
    ) -> ApiResult<i64> {
        let taken = self.existing(NODE_PORT_PREFIX).await?;
        let claimed: HashSet<String> = claims
            .keys
            .iter()
            .filter_map(|k| k.strip_prefix(NODE_PORT_PREFIX).map(String::from))
            .collect();
        let range = self.ranges.node_ports;
        for port in range.dynamic_order(rand::random::<u32>()) {
            let s = port.to_string();
            if taken.contains(&s) || claimed.contains(&s) {
                continue;
            }
            if self
                .claim_key(
                    &port_key(i64::from(port)),
                    port_record(svc),
                    dry_run,
                    claims,
                )
                .await?
            {
                return Ok(i64::from(port));
            }
        }
        Err(ApiError::internal(
            "failed to allocate a nodePort: range is full",
        ))
    }

    /// Create-if-absent; false when someone holds the key already.
    async fn claim_key(
        &self,
        key: &str,
        record: Value,
        dry_run: bool,
        claims: &mut Claims,
    ) -> ApiResult<bool> {
        if dry_run {
            return Ok(self.store.get(key).await?.is_none());
        }
        match self.store.create(key, objects::encode(&record)?).await {
            Ok(_) => {
                claims.keys.push(key.to_string());
                Ok(true)
            }
            Err(StoreError::AlreadyExists(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Gives back what a failed write had claimed.
    pub async fn undo(&self, claims: Claims) {
        for key in claims.keys {
            if let Err(e) = self.store.delete(&key, None).await
                && !matches!(e, StoreError::NotFound(_))
            {
                warn!(key, error = %e, "releasing an allocation failed; repair will");
            }
        }
    }

    /// After a successful write (or delete, `new == None`): releases the IPs
    /// and ports `old` held that `new` does not.
    pub async fn release_unused(&self, old: &Value, new: Option<&Value>) {
        let keep_ips: Vec<String> = new.map(fields::allocated_ips).unwrap_or_default();
        let keep_ports = new.map(fields::allocated_node_ports).unwrap_or_default();
        let parent = parent_of(old);
        for ip in fields::allocated_ips(old) {
            if !keep_ips.contains(&ip) {
                self.release_key(&ip_key(&ip), &parent).await;
            }
        }
        for port in fields::allocated_node_ports(old) {
            if !keep_ports.contains(&port) {
                self.release_key(&port_key(port), &parent).await;
            }
        }
    }

    /// Deletes a record only while it still names `parent`.
    async fn release_key(&self, key: &str, parent: &(String, String)) {
        let kv = match self.store.get(key).await {
            Ok(Some(kv)) => kv,
            Ok(None) => return,
            Err(e) => {
                warn!(key, error = %e, "reading an allocation failed; repair will release it");
                return;
            }
        };
        let owned = serde_json::from_slice::<Value>(&kv.value)
            .map(|r| &record_parent(&r) == parent)
            .unwrap_or(false);
        if owned && let Err(e) = self.store.delete(key, Some(kv.mod_revision)).await {
            warn!(key, error = %e, "releasing an allocation failed; repair will");
        }
    }
}

/// The IPAddress object upstream's allocator writes for a Service's IP.
pub fn ip_record(ip: &str, family: &str, svc: &Value) -> Value {
    let (ns, name) = parent_of(svc);
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {
            "name": ip,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": objects::now_rfc3339(),
            "labels": {
                "ipaddress.kubernetes.io/ip-family": family,
                "ipaddress.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": ns, "name": name}},
    })
}

/// A node port's record: the Service holding it, in the IPAddress's shape.
pub fn port_record(svc: &Value) -> Value {
    let (ns, name) = parent_of(svc);
    json!({
        "metadata": {"creationTimestamp": objects::now_rfc3339()},
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": ns, "name": name}},
    })
}
