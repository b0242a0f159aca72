//! Resource quota evaluation, shared by the ResourceQuota admission plugin and
//! the resource quota controller (upstream's `pkg/quota/v1`: resource list
//! arithmetic, and the core evaluators of `pkg/quota/v1/evaluator/core` —
//! pods, services, persistent volume claims — plus the generic object
//! counters of `staging/src/k8s.io/apiserver/pkg/quota/v1/generic`).
//!
//! Objects are plain JSON values; nothing here reads or writes anything.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::quantity::{Format, Quantity};

#[cfg(test)]
mod tests;

/// A resource name → quantity map (upstream's `ResourceList`), sorted by name.
pub type ResourceList = BTreeMap<String, Quantity>;

// ---------------------------------------------------------------------------
// Resource names (upstream's core/v1 constants).

pub const PODS: &str = "pods";
pub const SERVICES: &str = "services";
pub const SERVICES_NODE_PORTS: &str = "services.nodeports";
pub const SERVICES_LOAD_BALANCERS: &str = "services.loadbalancers";
pub const PERSISTENT_VOLUME_CLAIMS: &str = "persistentvolumeclaims";
pub const REQUESTS_STORAGE: &str = "requests.storage";
/// `<class>.storageclass.storage.k8s.io/<resource>`.
pub const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
pub const REQUESTS_PREFIX: &str = "requests.";
const HUGE_PAGES_PREFIX: &str = "hugepages-";
const REQUESTS_HUGE_PAGES_PREFIX: &str = "requests.hugepages-";

/// Upstream's scope names.
pub const SCOPE_TERMINATING: &str = "Terminating";
pub const SCOPE_NOT_TERMINATING: &str = "NotTerminating";
pub const SCOPE_BEST_EFFORT: &str = "BestEffort";
pub const SCOPE_NOT_BEST_EFFORT: &str = "NotBestEffort";
pub const SCOPE_PRIORITY_CLASS: &str = "PriorityClass";
pub const SCOPE_CROSS_NAMESPACE_POD_AFFINITY: &str = "CrossNamespacePodAffinity";
pub const SCOPE_VOLUME_ATTRIBUTES_CLASS: &str = "VolumeAttributesClass";
pub const STANDARD_SCOPES: &[&str] = &[
    SCOPE_TERMINATING,
    SCOPE_NOT_TERMINATING,
    SCOPE_BEST_EFFORT,
    SCOPE_NOT_BEST_EFFORT,
    SCOPE_PRIORITY_CLASS,
    SCOPE_CROSS_NAMESPACE_POD_AFFINITY,
    SCOPE_VOLUME_ATTRIBUTES_CLASS,
];

/// Resources a pod's quota usage may name (upstream's `podResources`).
const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    PODS,
];

/// Resources whose quota makes every container state its value (upstream's
/// backward-compatible `validationSet`).
const POD_CONSTRAINED: &[&str] = &[
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// Upstream's standard quota resources (`standardQuotaResources`).
pub const STANDARD_QUOTA_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    PODS,
    SERVICES,
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    PERSISTENT_VOLUME_CLAIMS,
    "configmaps",
    SERVICES_NODE_PORTS,
    SERVICES_LOAD_BALANCERS,
];

/// Counted in whole units (upstream's `integerResources`).
const INTEGER_RESOURCES: &[&str] = &[
    PODS,
    SERVICES,
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    PERSISTENT_VOLUME_CLAIMS,
    "configmaps",
    SERVICES_NODE_PORTS,
    SERVICES_LOAD_BALANCERS,
];

/// The core resources whose plain name is also an object count (upstream's
/// legacy object count aliases).
const LEGACY_COUNTS: &[&str] = &[
    "configmaps",
    "resourcequotas",
    "replicationcontrollers",
    "secrets",
];

/// `IsStandardQuotaResourceName`.
pub fn is_standard_quota_resource(name: &str) -> bool {
    STANDARD_QUOTA_RESOURCES.contains(&name)
        || name.starts_with(HUGE_PAGES_PREFIX)
        || name.starts_with(REQUESTS_HUGE_PAGES_PREFIX)
}

/// `IsIntegerResourceName`: the object counts and extended resources.
pub fn is_integer_resource(name: &str) -> bool {
    INTEGER_RESOURCES.contains(&name) || is_extended_resource(name) || name.starts_with("count/")
}

/// `IsNativeResource`: no domain, or a `kubernetes.io/` one.
pub fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `IsExtendedResourceName`: a domain-qualified, non-native name that is not
/// itself prefixed with `requests.`.
pub fn is_extended_resource(name: &str) -> bool {
    if is_native_resource(name) || name.starts_with(REQUESTS_PREFIX) {
        return false;
    }
    crate::validation::is_qualified_name(&format!("{REQUESTS_PREFIX}{name}")).is_empty()
}

/// `requests.<extended resource>`, the only form quota accepts for them.
fn is_extended_resource_for_quota(name: &str) -> bool {
    name.strip_prefix(REQUESTS_PREFIX)
        .is_some_and(is_extended_resource)
}

/// The object count name of a resource: `count/<plural>` for the core group,
/// `count/<plural>.<group>` otherwise.
pub fn object_count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

// ---------------------------------------------------------------------------
// Resource list arithmetic (upstream's `quota` helpers).

/// Reads a resource list; values that are not quantities are left out
/// (validation refuses them before anything is stored).
pub fn parse_list(v: Option<&Value>) -> ResourceList {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), Quantity::from_json(v).ok()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// A resource list as JSON (each quantity in its string form).
pub fn list_to_json(list: &ResourceList) -> Value {
    Value::Object(
        list.iter()
            .map(|(k, q)| (k.clone(), json!(q.to_string())))
            .collect::<Map<_, _>>(),
    )
}

/// `Add`: every key of either list, summed.
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, q) in b {
        out.entry(k.clone()).or_insert_with(Quantity::zero).add(q);
    }
    out
}

/// `SubtractWithNonNegativeResult`: `a - b` per key of either list, never
/// below zero.
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    for (k, q) in a {
        let mut v = q.clone();
        if let Some(o) = b.get(k) {
            v.sub(o);
        }
        if v.sign() < 0 {
            v = Quantity::zero();
        }
        out.insert(k.clone(), v);
    }
    for k in b.keys() {
        out.entry(k.clone()).or_insert_with(Quantity::zero);
    }
    out
}

/// `Mask`: only the entries named in `names`.
pub fn mask<'a>(list: &ResourceList, names: impl IntoIterator<Item = &'a str>) -> ResourceList {
    let names: BTreeSet<&str> = names.into_iter().collect();
    list.iter()
        .filter(|(k, _)| names.contains(k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `LessThanOrEqual`: whether every entry of `a` that `b` also names is at
/// most `b`'s, and the names that are not.
pub fn less_than_or_equal(a: &ResourceList, b: &ResourceList) -> (bool, Vec<String>) {
    let exceeded: Vec<String> = a
        .iter()
        .filter(|(k, q)| b.get(*k).is_some_and(|limit| *q > limit))
        .map(|(k, _)| k.clone())
        .collect();
    (exceeded.is_empty(), exceeded)
}

/// `RemoveZeros`.
pub fn remove_zeros(list: &ResourceList) -> ResourceList {
    list.iter()
        .filter(|(_, q)| !q.is_zero())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `IsNegative`: the names of negative entries.
pub fn negative(list: &ResourceList) -> Vec<String> {
    list.iter()
        .filter(|(_, q)| q.sign() < 0)
        .map(|(k, _)| k.clone())
        .collect()
}

/// Whether two lists hold the same names and values (`Equals`).
pub fn equals(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len() && a.iter().all(|(k, q)| b.get(k) == Some(q))
}

/// Upstream's `prettyPrint`: `name=value` sorted by name, comma-joined.
pub fn pretty_print(list: &ResourceList) -> String {
    list.iter()
        .map(|(k, q)| format!("{k}={q}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Upstream's `prettyPrintResourceNames`: sorted, comma-joined.
pub fn pretty_print_names<S: AsRef<str>>(names: &[S]) -> String {
    let mut v: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    v.sort_unstable();
    v.join(",")
}

// ---------------------------------------------------------------------------
// Pod resources (upstream's `resourcehelper.PodRequests` / `PodLimits`).

fn containers<'a>(pod: &'a Value, field: &str) -> &'a [Value] {
    pod.pointer(&format!("/spec/{field}"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn container_list(c: &Value, which: &str) -> ResourceList {
    parse_list(c.get("resources").and_then(|r| r.get(which)))
}

fn max_into(into: &mut ResourceList, other: &ResourceList) {
    for (k, q) in other {
        match into.get(k) {
            Some(cur) if cur >= q => {}
            _ => {
                into.insert(k.clone(), q.clone());
            }
        }
    }
}

/// A pod's effective `requests` or `limits` (`which`): the containers' sum,
/// or the largest init container's (sidecars, `restartPolicy: Always`, add to
/// everything started after them), whichever is larger per resource; pod-level
/// `spec.resources` replace cpu and memory where set; `overhead` is added when
/// asked (quota counts it, LimitRanger does not).
pub fn pod_resources(pod: &Value, which: &str, overhead: bool) -> ResourceList {
    let mut total = ResourceList::new();
    for c in containers(pod, "containers") {
        total = add(&total, &container_list(c, which));
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in containers(pod, "initContainers") {
        let own = container_list(c, which);
        let effective = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            total = add(&total, &own);
            sidecars = add(&sidecars, &own);
            sidecars.clone()
        } else {
            add(&own, &sidecars)
        };
        max_into(&mut init_max, &effective);
    }
    max_into(&mut total, &init_max);
    let pod_level = parse_list(pod.pointer(&format!("/spec/resources/{which}")));
    for r in ["cpu", "memory"] {
        if let Some(q) = pod_level.get(r) {
            total.insert(r.to_string(), q.clone());
        }
    }
    if overhead {
        total = add(&total, &parse_list(pod.pointer("/spec/overhead")));
    }
    total
}

// ---------------------------------------------------------------------------
// Evaluators.

/// The write quota admission is looking at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// One requirement of a quota's scopes (a `scopes` entry is `Exists`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeRequirement {
    pub scope_name: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// The quota's `spec.scopes` (as `Exists`) and `spec.scopeSelector`
/// expressions (upstream's `getScopeSelectorsFromQuota`).
pub fn quota_scopes(quota: &Value) -> Vec<ScopeRequirement> {
    let mut out: Vec<ScopeRequirement> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| ScopeRequirement {
            scope_name: s.to_string(),
            operator: "Exists".into(),
            values: Vec::new(),
        })
        .collect();
    for e in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        out.push(ScopeRequirement {
            scope_name: s("scopeName"),
            operator: s("operator"),
            values: e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
        });
    }
    out
}

/// Which evaluator counts a resource's objects (upstream's quota registry:
/// pods, services and claims have their own; anything else is counted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evaluator {
    Pod,
    Service,
    PersistentVolumeClaim,
    /// `count/<plural>[.<group>]` and, for a few core kinds, the plain name.
    ObjectCount {
        count_name: String,
        legacy: Option<&'static str>,
    },
}

impl Evaluator {
    /// The evaluator of `group`/`plural`.
    pub fn for_resource(group: &str, plural: &str) -> Evaluator {
        match (group, plural) {
            ("", "pods") => Evaluator::Pod,
            ("", "services") => Evaluator::Service,
            ("", "persistentvolumeclaims") => Evaluator::PersistentVolumeClaim,
            _ => Evaluator::ObjectCount {
                count_name: object_count_name(group, plural),
                legacy: if group.is_empty() {
                    LEGACY_COUNTS.iter().copied().find(|l| *l == plural)
                } else {
                    None
                },
            },
        }
    }

    /// The resource (group, plural) an object-count name counts, if it is one
    /// the pod/service/claim evaluators do not handle.
    pub fn counted_resource(name: &str) -> Option<(String, String)> {
        if let Some(legacy) = LEGACY_COUNTS.iter().find(|l| **l == name) {
            return Some((String::new(), legacy.to_string()));
        }
        let gr = name.strip_prefix("count/")?;
        let (plural, group) = gr.split_once('.').unwrap_or((gr, ""));
        if plural.is_empty() {
            return None;
        }
        match Evaluator::for_resource(group, plural) {
            Evaluator::ObjectCount { .. } => Some((group.to_string(), plural.to_string())),
            _ => None,
        }
    }

    /// Whether a write can change this evaluator's usage (`Handles`).
    pub fn handles(&self, op: Operation, subresource: Option<&str>) -> bool {
        match self {
            Evaluator::Pod => match subresource {
                None => op == Operation::Create,
                // In-place resize changes requests and limits.
                Some("resize") => op == Operation::Update,
                Some(_) => false,
            },
            // A service's type can change, and a claim can grow.
            Evaluator::Service | Evaluator::PersistentVolumeClaim => subresource.is_none(),
            Evaluator::ObjectCount { .. } => op == Operation::Create && subresource.is_none(),
        }
    }

    /// The names among `names` this evaluator measures (`MatchingResources`).
    pub fn matching_resources<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        names
            .into_iter()
            .filter(|n| match self {
                Evaluator::Pod => {
                    POD_RESOURCES.contains(n)
                        || n.starts_with(HUGE_PAGES_PREFIX)
                        || n.starts_with(REQUESTS_HUGE_PAGES_PREFIX)
                        || is_extended_resource_for_quota(n)
                }
                Evaluator::Service => [
                    "count/services",
                    SERVICES,
                    SERVICES_NODE_PORTS,
                    SERVICES_LOAD_BALANCERS,
                ]
                .contains(n),
                Evaluator::PersistentVolumeClaim => {
                    [
                        "count/persistentvolumeclaims",
                        PERSISTENT_VOLUME_CLAIMS,
                        REQUESTS_STORAGE,
                    ]
                    .contains(n)
                        || n.split_once(STORAGE_CLASS_SUFFIX)
                            .is_some_and(|(class, r)| {
                                !class.is_empty()
                                    && (r == REQUESTS_STORAGE || r == PERSISTENT_VOLUME_CLAIMS)
                            })
                }
                Evaluator::ObjectCount { count_name, legacy } => {
                    *n == count_name || Some(*n) == *legacy
                }
            })
            .map(String::from)
            .collect()
    }

    /// Whether one scope requirement selects `obj` (`MatchesScope`). Only
    /// pods have scopes: a scoped quota never matches anything else.
    pub fn matches_scope(&self, req: &ScopeRequirement, obj: &Value) -> bool {
        match self {
            Evaluator::Pod => pod_matches_scope(req, obj),
            _ => false,
        }
    }

    /// Whether a quota applies to `obj` (`Matches`): it constrains at least
    /// one resource this evaluator measures, and every scope selects it.
    /// `hard` is the quota's `status.hard` for admission, `spec.hard` for
    /// the controller.
    pub fn matches(&self, quota: &Value, hard: &ResourceList, obj: &Value) -> bool {
        !self
            .matching_resources(hard.keys().map(String::as_str))
            .is_empty()
            && quota_scopes(quota)
                .iter()
                .all(|s| self.matches_scope(s, obj))
    }

    /// Refuses an object that does not state what a quota needs to count it
    /// (`Constraints`): with a cpu or memory quota, every container must set
    /// the corresponding request or limit.
    pub fn constraints(&self, required: &[String], obj: &Value) -> Result<(), String> {
        if *self != Evaluator::Pod {
            return Ok(());
        }
        let required: BTreeSet<&str> = required
            .iter()
            .map(String::as_str)
            .filter(|r| POD_CONSTRAINED.contains(r))
            .collect();
        if required.is_empty() {
            return Ok(());
        }
        let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for c in containers(obj, "containers")
            .iter()
            .chain(containers(obj, "initContainers"))
        {
            let usage =
                pod_usage_helper(&container_list(c, "requests"), &container_list(c, "limits"));
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            for r in &required {
                if !usage.contains_key(*r) {
                    missing.entry(r).or_default().insert(name);
                }
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let parts: Vec<String> = missing
            .iter()
            .map(|(r, names)| {
                format!(
                    "{r} for: {}",
                    names.iter().copied().collect::<Vec<_>>().join(",")
                )
            })
            .collect();
        Err(format!("must specify {}", parts.join("; ")))
    }

    /// The quota usage of one object (`Usage`). `now` decides whether a pod
    /// stuck terminating past its grace period still counts.
    pub fn usage(&self, obj: &Value, now: DateTime<Utc>) -> ResourceList {
        let one = || Quantity::from_value(1, Format::DecimalSI);
        let mut out = ResourceList::new();
        match self {
            Evaluator::Pod => {
                // count/pods tracks every stored pod; the rest only live ones.
                out.insert("count/pods".into(), one());
                if counts_pod(obj, now) {
                    let requests = pod_resources(obj, "requests", true);
                    let limits = pod_resources(obj, "limits", true);
                    out = add(&out, &pod_usage_helper(&requests, &limits));
                }
            }
            Evaluator::Service => {
                out.insert("count/services".into(), one());
                out.insert(SERVICES.into(), one());
                let ports = obj
                    .pointer("/spec/ports")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len) as i64;
                let ports = Quantity::from_value(ports, Format::DecimalSI);
                match obj.pointer("/spec/type").and_then(Value::as_str) {
                    Some("NodePort") => {
                        out.insert(SERVICES_NODE_PORTS.into(), ports);
                    }
                    Some("LoadBalancer") => {
                        out.insert(SERVICES_LOAD_BALANCERS.into(), one());
                        let allocate = obj
                            .pointer("/spec/allocateLoadBalancerNodePorts")
                            .and_then(Value::as_bool)
                            .unwrap_or(true);
                        if allocate {
                            out.insert(SERVICES_NODE_PORTS.into(), ports);
                        }
                    }
                    _ => {}
                }
            }
            Evaluator::PersistentVolumeClaim => {
                out.insert("count/persistentvolumeclaims".into(), one());
                out.insert(PERSISTENT_VOLUME_CLAIMS.into(), one());
                let class = obj
                    .pointer("/spec/storageClassName")
                    .and_then(Value::as_str)
                    .or_else(|| {
                        obj.pointer(
                            "/metadata/annotations/volume.beta.kubernetes.io~1storage-class",
                        )
                        .and_then(Value::as_str)
                    })
                    .filter(|c| !c.is_empty());
                if let Some(class) = class {
                    out.insert(
                        format!("{class}{STORAGE_CLASS_SUFFIX}{PERSISTENT_VOLUME_CLAIMS}"),
                        one(),
                    );
                }
                // The larger of the request and what a resize allocated.
                let mut storage =
                    parse_list(obj.pointer("/spec/resources/requests")).remove("storage");
                if let Some(alloc) =
                    parse_list(obj.pointer("/status/allocatedResources")).remove("storage")
                    && storage.as_ref().is_none_or(|s| alloc > *s)
                {
                    storage = Some(alloc);
                }
                if let Some(mut q) = storage {
                    q.round_up(0);
                    if let Some(class) = class {
                        out.insert(
                            format!("{class}{STORAGE_CLASS_SUFFIX}{REQUESTS_STORAGE}"),
                            q.clone(),
                        );
                    }
                    out.insert(REQUESTS_STORAGE.into(), q);
                }
            }
            Evaluator::ObjectCount { count_name, legacy } => {
                out.insert(count_name.clone(), one());
                if let Some(l) = legacy {
                    out.insert(l.to_string(), one());
                }
            }
        }
        out
    }

    /// The summed usage of the objects a quota selects among `objs`, with a
    /// zero for every tracked resource (`CalculateUsageStats`).
    pub fn usage_stats(
        &self,
        resources: &[String],
        scopes: &[ScopeRequirement],
        objs: &[Value],
        now: DateTime<Utc>,
    ) -> ResourceList {
        let mut used: ResourceList = resources
            .iter()
            .map(|r| (r.clone(), Quantity::zero()))
            .collect();
        for o in objs {
            if scopes.iter().all(|s| self.matches_scope(s, o)) {
                used = add(&used, &self.usage(o, now));
            }
        }
        used
    }
}

/// The quota view of a pod's requests and limits (`podComputeUsageHelper`).
fn pod_usage_helper(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut out = ResourceList::new();
    out.insert(PODS.into(), Quantity::from_value(1, Format::DecimalSI));
    for r in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(r) {
            out.insert(r.into(), q.clone());
            out.insert(format!("requests.{r}"), q.clone());
        }
        if let Some(q) = limits.get(r) {
            out.insert(format!("limits.{r}"), q.clone());
        }
    }
    for (r, q) in requests {
        if r.starts_with(HUGE_PAGES_PREFIX) {
            out.insert(r.clone(), q.clone());
            out.insert(format!("{REQUESTS_PREFIX}{r}"), q.clone());
        }
        if is_extended_resource(r) {
            out.insert(format!("{REQUESTS_PREFIX}{r}"), q.clone());
        }
    }
    out
}

/// Whether a pod's compute resources count (`QuotaV1Pod`): not once it has
/// finished, nor once it is stuck terminating past its grace period.
pub fn counts_pod(pod: &Value, now: DateTime<Utc>) -> bool {
    if matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Failed" | "Succeeded")
    ) {
        return false;
    }
    let deleted = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok());
    let grace = pod
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    if let (Some(at), Some(grace)) = (deleted, grace) {
        let end = at.with_timezone(&Utc) + chrono::Duration::seconds(grace.clamp(0, 1 << 40));
        if now > end {
            return false;
        }
    }
    true
}

fn is_terminating(pod: &Value) -> bool {
    pod.pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s >= 0)
}

fn pod_matches_scope(req: &ScopeRequirement, pod: &Value) -> bool {
    let best_effort = || crate::qos::qos_class(pod) == crate::qos::BEST_EFFORT;
    match req.scope_name.as_str() {
        SCOPE_TERMINATING => is_terminating(pod),
        SCOPE_NOT_TERMINATING => !is_terminating(pod),
        SCOPE_BEST_EFFORT => best_effort(),
        SCOPE_NOT_BEST_EFFORT => !best_effort(),
        SCOPE_PRIORITY_CLASS => {
            let class = pod
                .pointer("/spec/priorityClassName")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty());
            // As a label selector over {PriorityClass: <class>}.
            match req.operator.as_str() {
                "Exists" => class.is_some(),
                "DoesNotExist" => class.is_none(),
                "In" => class.is_some_and(|c| req.values.iter().any(|v| v == c)),
                "NotIn" => class.is_none_or(|c| !req.values.iter().any(|v| v == c)),
                _ => false,
            }
        }
        SCOPE_CROSS_NAMESPACE_POD_AFFINITY => uses_cross_namespace_affinity(pod),
        _ => false,
    }
}

/// Pod (anti-)affinity terms with `namespaces` or a `namespaceSelector`.
fn uses_cross_namespace_affinity(pod: &Value) -> bool {
    let Some(aff) = pod.pointer("/spec/affinity") else {
        return false;
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let Some(a) = aff.get(*kind) else {
            return false;
        };
        let required = a
            .get("requiredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        let preferred = a
            .get("preferredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|w| w.get("podAffinityTerm"));
        required.chain(preferred).any(|t| {
            t.get("namespaceSelector").is_some_and(|s| !s.is_null())
                || t.get("namespaces")
                    .and_then(Value::as_array)
                    .is_some_and(|n| !n.is_empty())
        })
    })
}

/// The usage a quota should show (upstream's `CalculateUsage` for one
/// quota): every evaluator measuring a resource of `hard` sums the objects it
/// counts (`objects(evaluator)` gives them), masked to `hard`'s names.
/// Resources no evaluator measures (unknown names) get no entry.
pub fn calculate_usage(
    quota: &Value,
    hard: &ResourceList,
    evaluators: &[Evaluator],
    mut objects: impl FnMut(&Evaluator) -> Vec<Value>,
    now: DateTime<Utc>,
) -> ResourceList {
    let scopes = quota_scopes(quota);
    let mut used = ResourceList::new();
    for e in evaluators {
        let tracked = e.matching_resources(hard.keys().map(String::as_str));
        if tracked.is_empty() {
            continue;
        }
        let objs = objects(e);
        used = add(&used, &e.usage_stats(&tracked, &scopes, &objs, now));
    }
    mask(&used, hard.keys().map(String::as_str))
}

/// The evaluators a quota's hard names call for: the pod, service and claim
/// evaluators when they measure one of them, plus an object counter per
/// other `count/…` (or legacy) name.
pub fn evaluators_for(hard: &ResourceList) -> Vec<Evaluator> {
    let mut out: Vec<Evaluator> = [
        Evaluator::Pod,
        Evaluator::Service,
        Evaluator::PersistentVolumeClaim,
    ]
    .into_iter()
    .filter(|e| {
        !e.matching_resources(hard.keys().map(String::as_str))
            .is_empty()
    })
    .collect();
    for name in hard.keys() {
        if let Some((group, plural)) = Evaluator::counted_resource(name) {
            let e = Evaluator::for_resource(&group, &plural);
            if !out.contains(&e) {
                out.push(e);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Admission (upstream's `CheckRequest` of the quota admission controller).

/// What quota admission decided for one write: the new `status.used` of each
/// quota (by index) it charges, empty when nothing changes.
pub type Charges = Vec<(usize, ResourceList)>;

/// Checks one write against the namespace's quotas (upstream's
/// `CheckRequest`): every quota that matches the object (its `status.hard`
/// names a resource the evaluator measures, its scopes select the object)
/// must have usage for those resources, the object must state what they
/// need, and used + the object's usage (less the old object's on updates)
/// must stay within `status.hard`. The error is the reason text (callers
/// prefix `<resource> "<name>" is forbidden: `).
pub fn check_request(
    quotas: &[Value],
    evaluator: &Evaluator,
    obj: &Value,
    old: Option<&Value>,
    now: DateTime<Utc>,
) -> Result<Charges, String> {
    let mut interesting = Vec::new();
    for (i, q) in quotas.iter().enumerate() {
        let hard = parse_list(q.pointer("/status/hard"));
        if !evaluator.matches(q, &hard, obj) {
            continue;
        }
        let name = q
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let restricted = evaluator.matching_resources(hard.keys().map(String::as_str));
        evaluator
            .constraints(&restricted, obj)
            .map_err(|e| format!("failed quota: {name}: {e}"))?;
        let used = parse_list(q.pointer("/status/used"));
        if restricted.iter().any(|r| !used.contains_key(r)) {
            return Err(format!(
                "status unknown for quota: {name}, resources: {}",
                pretty_print_names(&restricted)
            ));
        }
        interesting.push((i, hard, used));
    }
    if interesting.is_empty() {
        return Ok(Vec::new());
    }
    let mut delta = evaluator.usage(obj, now);
    let neg = negative(&delta);
    if !neg.is_empty() {
        return Err(format!(
            "quota usage is negative for resource(s): {}",
            pretty_print_names(&neg)
        ));
    }
    if let Some(old) = old {
        delta = subtract_non_negative(&delta, &evaluator.usage(old, now));
    }
    let delta = remove_zeros(&delta);
    if delta.is_empty() {
        return Ok(Vec::new());
    }
    let mut charges = Vec::new();
    for (i, hard, used) in interesting {
        let requested = mask(&delta, hard.keys().map(String::as_str));
        let new_used = add(&used, &requested);
        let masked = mask(&new_used, requested.keys().map(String::as_str));
        let (ok, exceeded) = less_than_or_equal(&masked, &hard);
        if !ok {
            let name = quotas[i]
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let ex = || exceeded.iter().map(String::as_str);
            return Err(format!(
                "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
                pretty_print(&mask(&requested, ex())),
                pretty_print(&mask(&used, ex())),
                pretty_print(&mask(&hard, ex())),
            ));
        }
        if !equals(&new_used, &used) {
            charges.push((i, new_used));
        }
    }
    Ok(charges)
}
