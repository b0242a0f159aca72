//! A container's environment, as upstream's kubelet builds it
//! (`makeEnvironmentVariables`): envFrom first (with prefixes), then env in
//! order, each `value` expanded with `$(VAR)` against what came before;
//! valueFrom resolved from the pod (fieldRef), its resources (resourceFieldRef)
//! and the ConfigMaps/Secrets the agent fetched. Errors carry upstream's
//! messages, which become the `CreateContainerConfigError` waiting message.

use std::collections::{BTreeMap, HashMap};

use berth_api::quantity::Quantity;
use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, Pod, Secret};

/// Why a container's environment could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// The message of a NotFound from the kubelet's ConfigMap manager.
    #[error("configmap {0:?} not found")]
    ConfigMapNotFound(String),
    #[error("secret {0:?} not found")]
    SecretNotFound(String),
    #[error("couldn't find key {key} in ConfigMap {namespace}/{name}")]
    ConfigMapKeyNotFound {
        key: String,
        namespace: String,
        name: String,
    },
    #[error("couldn't find key {key} in Secret {namespace}/{name}")]
    SecretKeyNotFound {
        key: String,
        namespace: String,
        name: String,
    },
    /// fieldRef / resourceFieldRef problems, worded as upstream.
    #[error("{0}")]
    Field(String),
}

/// Everything besides the pod that the environment may read.
#[derive(Debug, Clone, Copy)]
pub struct EnvSources<'a> {
    /// ConfigMaps of the pod's namespace by name (absent: not found).
    pub config_maps: &'a BTreeMap<String, ConfigMap>,
    /// Secrets of the pod's namespace by name.
    pub secrets: &'a BTreeMap<String, Secret>,
    /// The pod's IPs, primary first.
    pub pod_ips: &'a [String],
    /// The node's IPs, primary first.
    pub host_ips: &'a [String],
    /// The node's allocatable, standing in for unset limits (resourceFieldRef).
    pub node_allocatable: &'a BTreeMap<String, Quantity>,
    /// Service link variables (added last, never overriding).
    pub service_env: &'a BTreeMap<String, String>,
}

/// The reason of the Warning event for each of [`Environment::warnings`].
pub const INVALID_ENV_NAMES_REASON: &str = "InvalidEnvironmentVariableNames";

/// The environment of a container, and the warnings upstream records as
/// `InvalidEnvironmentVariableNames` events on the pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    pub vars: Vec<(String, String)>,
    pub warnings: Vec<String>,
}

impl Environment {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An ordered map: a later set of an existing name replaces it in place.
#[derive(Default)]
struct EnvMap {
    order: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl EnvMap {
    fn set(&mut self, k: String, v: String) {
        match self.index.get(&k) {
            Some(&i) => self.order[i].1 = v,
            None => {
                self.index.insert(k.clone(), self.order.len());
                self.order.push((k, v));
            }
        }
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.index.get(k).map(|&i| self.order[i].1.as_str())
    }
}

/// Relaxed environment variable names (the default since 1.32): printable
/// ASCII except `=`.
fn is_env_var_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| (32..=126).contains(&b) && b != b'=')
}

/// Builds a container's environment.
pub fn make_environment(
    pod: &Pod,
    container: &Container,
    src: &EnvSources<'_>,
) -> Result<Environment, EnvError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mut env = EnvMap::default();
    let mut warnings = Vec::new();

    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (kind, name, data): (&str, String, Vec<(String, String)>) =
            if let Some(cm) = &from.config_map_ref {
                let optional = cm.optional.unwrap_or(false);
                match src.config_maps.get(&cm.name) {
                    Some(c) => ("configMap", cm.name.clone(), config_map_data(c)),
                    None if optional => continue,
                    None => return Err(EnvError::ConfigMapNotFound(cm.name.clone())),
                }
            } else if let Some(s) = &from.secret_ref {
                let optional = s.optional.unwrap_or(false);
                match src.secrets.get(&s.name) {
                    Some(sec) => ("secret", s.name.clone(), secret_data(sec)),
                    None if optional => continue,
                    None => return Err(EnvError::SecretNotFound(s.name.clone())),
                }
            } else {
                continue;
            };
        let mut invalid = Vec::new();
        for (k, v) in data {
            let k = format!("{prefix}{k}");
            if !is_env_var_name(&k) {
                invalid.push(k);
                continue;
            }
            env.set(k, v);
        }
        if !invalid.is_empty() {
            invalid.sort();
            warnings.push(format!(
                "Keys [{}] from the EnvFrom {kind} {namespace}/{name} were skipped since they are considered invalid environment variable names.",
                invalid.join(", ")
            ));
        }
    }

    for var in container.env.iter().flatten() {
        let value = match resolve_var(var, pod, container, src, &env, &namespace)? {
            Some(v) => v,
            None => continue, // an optional reference that is missing
        };
        env.set(var.name.clone(), value);
    }

    let mut vars = env.order;
    let declared: std::collections::HashSet<String> = vars.iter().map(|(k, _)| k.clone()).collect();
    for (k, v) in src.service_env {
        if !declared.contains(k) {
            vars.push((k.clone(), v.clone()));
        }
    }
    Ok(Environment { vars, warnings })
}

fn config_map_data(cm: &ConfigMap) -> Vec<(String, String)> {
    cm.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn secret_data(s: &Secret) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect();
    // stringData is write-only in the API; honour it for objects not yet normalised.
    for (k, v) in s.string_data.iter().flatten() {
        out.push((k.clone(), v.clone()));
    }
    out
}

fn resolve_var(
    var: &EnvVar,
    pod: &Pod,
    container: &Container,
    src: &EnvSources<'_>,
    env: &EnvMap,
    namespace: &str,
) -> Result<Option<String>, EnvError> {
    let value = var.value.clone().unwrap_or_default();
    if !value.is_empty() {
        let mapping = |name: &str| {
            env.get(name)
                .or_else(|| src.service_env.get(name).map(String::as_str))
                .map(str::to_string)
        };
        return Ok(Some(expand(&value, &mapping)));
    }
    let Some(from) = &var.value_from else {
        return Ok(Some(String::new()));
    };
    if let Some(f) = &from.field_ref {
        let version = f.api_version.as_deref().unwrap_or("v1");
        return pod_field_value(pod, version, &f.field_path, src).map(Some);
    }
    if let Some(r) = &from.resource_field_ref {
        let divisor = r.divisor.as_ref().map(|q| q.0.as_str());
        let target = match r.container_name.as_deref() {
            None | Some("") => container,
            Some(name) => pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == name))
                .ok_or_else(|| EnvError::Field(format!("container {name} not found")))?,
        };
        return container_resource_value(&r.resource, divisor, target, src.node_allocatable)
            .map(Some);
    }
    if let Some(cm) = &from.config_map_key_ref {
        let optional = cm.optional.unwrap_or(false);
        let Some(c) = src.config_maps.get(&cm.name) else {
            if optional {
                return Ok(None);
            }
            return Err(EnvError::ConfigMapNotFound(cm.name.clone()));
        };
        return match c.data.as_ref().and_then(|d| d.get(&cm.key)) {
            Some(v) => Ok(Some(v.clone())),
            None if optional => Ok(None),
            None => Err(EnvError::ConfigMapKeyNotFound {
                key: cm.key.clone(),
                namespace: namespace.to_string(),
                name: cm.name.clone(),
            }),
        };
    }
    if let Some(sk) = &from.secret_key_ref {
        let optional = sk.optional.unwrap_or(false);
        let Some(s) = src.secrets.get(&sk.name) else {
            if optional {
                return Ok(None);
            }
            return Err(EnvError::SecretNotFound(sk.name.clone()));
        };
        let data = secret_data(s);
        return match data.into_iter().find(|(k, _)| *k == sk.key) {
            Some((_, v)) => Ok(Some(v)),
            None if optional => Ok(None),
            None => Err(EnvError::SecretKeyNotFound {
                key: sk.key.clone(),
                namespace: namespace.to_string(),
                name: sk.name.clone(),
            }),
        };
    }
    Ok(Some(String::new()))
}

/// `metadata.labels['key']` → ("metadata.labels", "key").
pub fn split_subscripted_path(path: &str) -> Option<(&str, &str)> {
    let s = path.strip_suffix("']")?;
    let (head, key) = s.split_once("['")?;
    if head.is_empty() {
        return None;
    }
    Some((head, key))
}

/// The value of a downward API field of the pod (env fieldRef and
/// downwardAPI volume items), as upstream's `podFieldSelectorRuntimeValue`.
pub fn pod_field_value(
    pod: &Pod,
    api_version: &str,
    field_path: &str,
    src: &EnvSources<'_>,
) -> Result<String, EnvError> {
    let path = convert_field_label(api_version, field_path)?;
    let spec = pod.spec.clone().unwrap_or_default();
    match path.as_str() {
        "spec.nodeName" => return Ok(spec.node_name.unwrap_or_default()),
        "spec.serviceAccountName" => return Ok(spec.service_account_name.unwrap_or_default()),
        "status.hostIP" => {
            return src
                .host_ips
                .first()
                .cloned()
                .ok_or_else(|| EnvError::Field("no host IP known for the node".into()));
        }
        "status.hostIPs" => return Ok(src.host_ips.join(",")),
        "status.podIP" => return Ok(src.pod_ips.first().cloned().unwrap_or_default()),
        "status.podIPs" => return Ok(src.pod_ips.join(",")),
        _ => {}
    }
    extract_field_path(pod, &path)
}

/// Upstream's `ConvertDownwardAPIFieldLabel` for pods.
fn convert_field_label(version: &str, label: &str) -> Result<String, EnvError> {
    if version != "v1" {
        return Err(EnvError::Field(format!(
            "unsupported pod version: {version}"
        )));
    }
    if let Some((path, _)) = split_subscripted_path(label) {
        return match path {
            "metadata.annotations" | "metadata.labels" => Ok(label.to_string()),
            _ => Err(EnvError::Field(format!(
                "field label does not support subscript: {label}"
            ))),
        };
    }
    match label {
        "metadata.annotations"
        | "metadata.labels"
        | "metadata.name"
        | "metadata.namespace"
        | "metadata.uid"
        | "spec.nodeName"
        | "spec.restartPolicy"
        | "spec.serviceAccountName"
        | "spec.schedulerName"
        | "status.phase"
        | "status.hostIP"
        | "status.hostIPs"
        | "status.podIP"
        | "status.podIPs" => Ok(label.to_string()),
        "spec.host" => Ok("spec.nodeName".to_string()),
        _ => Err(EnvError::Field(format!(
            "field label not supported: {label}"
        ))),
    }
}

/// Upstream's `fieldpath.ExtractFieldPathAsString` over pod metadata.
fn extract_field_path(pod: &Pod, path: &str) -> Result<String, EnvError> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some((head, key)) = split_subscripted_path(path) {
        return match head {
            "metadata.annotations" => Ok(annotations.get(key).cloned().unwrap_or_default()),
            "metadata.labels" => Ok(labels.get(key).cloned().unwrap_or_default()),
            _ => Err(EnvError::Field(format!(
                "fieldPath {path:?} does not support subscript"
            ))),
        };
    }
    match path {
        "metadata.annotations" => Ok(format_map(annotations)),
        "metadata.labels" => Ok(format_map(labels)),
        "metadata.name" => Ok(meta.name.clone().unwrap_or_default()),
        "metadata.namespace" => Ok(meta.namespace.clone().unwrap_or_default()),
        "metadata.uid" => Ok(meta.uid.clone().unwrap_or_default()),
        _ => Err(EnvError::Field(format!("unsupported fieldPath: {path}"))),
    }
}

/// `key="value"` lines in key order, values quoted as Go's `strconv.Quote`.
pub fn format_map(m: &BTreeMap<String, String>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Go's `strconv.Quote` (one implementation, in the API crate).
pub use berth_api::validation::go_quote;

/// A container resource as a downward API value (`ExtractContainerResourceValue`):
/// unset limits fall back to the node's allocatable; the value is divided by
/// the divisor and rounded up.
pub fn container_resource_value(
    resource: &str,
    divisor: Option<&str>,
    container: &Container,
    node_allocatable: &BTreeMap<String, Quantity>,
) -> Result<String, EnvError> {
    let divisor = match divisor {
        None => Quantity::from_value(1, berth_api::quantity::Format::DecimalSI),
        Some(d) => {
            let q = Quantity::parse(d)
                .map_err(|e| EnvError::Field(format!("invalid divisor {d:?}: {e}")))?;
            if q.is_zero() {
                Quantity::from_value(1, berth_api::quantity::Format::DecimalSI)
            } else {
                q
            }
        }
    };
    let (kind, name) = resource
        .split_once('.')
        .filter(|(k, _)| *k == "limits" || *k == "requests")
        .ok_or_else(|| EnvError::Field(format!("unsupported container resource : {resource}")))?;
    let supported =
        matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
    if !supported {
        return Err(EnvError::Field(format!(
            "unsupported container resource : {resource}"
        )));
    }
    let res = container.resources.clone().unwrap_or_default();
    let list = if kind == "limits" {
        res.limits.unwrap_or_default()
    } else {
        res.requests.unwrap_or_default()
    };
    let mut value = match list.get(name) {
        Some(q) => Quantity::parse(&q.0)
            .map_err(|e| EnvError::Field(format!("invalid quantity {:?}: {e}", q.0)))?,
        None => Quantity::zero(),
    };
    let defaults_from_node =
        kind == "limits" && matches!(name, "cpu" | "memory" | "ephemeral-storage");
    if defaults_from_node
        && value.is_zero()
        && let Some(a) = node_allocatable.get(name)
    {
        value = a.clone();
    }
    let ratio = if name == "cpu" {
        value.milli_value() as f64 / divisor.milli_value() as f64
    } else {
        value.value() as f64 / divisor.value() as f64
    };
    Ok((ratio.ceil() as i64).to_string())
}

/// Expands `$(VAR)` references (upstream's `expansion.Expand`): `$$` is a
/// literal `$`, an unknown or unterminated reference is left as written.
pub fn expand(input: &str, mapping: &dyn Fn(&str) -> Option<String>) -> String {
    let b = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < b.len() {
        if b[cursor] == b'$' && cursor + 1 < b.len() {
            out.extend_from_slice(&b[checkpoint..cursor]);
            let rest = &b[cursor + 1..];
            let advance = match rest[0] {
                b'$' => {
                    out.push(b'$');
                    1
                }
                b'(' => match rest.iter().position(|&c| c == b')') {
                    Some(close) => {
                        let name = String::from_utf8_lossy(&rest[1..close]);
                        match mapping(&name) {
                            Some(v) => out.extend_from_slice(v.as_bytes()),
                            None => {
                                out.extend_from_slice(b"$(");
                                out.extend_from_slice(&rest[1..close]);
                                out.push(b')');
                            }
                        }
                        close + 1
                    }
                    None => {
                        out.extend_from_slice(b"$(");
                        1
                    }
                },
                other => {
                    out.push(b'$');
                    out.push(other);
                    1
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.extend_from_slice(&b[checkpoint.min(b.len())..]);
    String::from_utf8_lossy(&out).into_owned()
}

/// Expands with a plain variable list (the container's resolved environment).
pub fn expand_with(input: &str, vars: &[(String, String)]) -> String {
    let map: HashMap<&str, &str> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    expand(input, &|name| map.get(name).map(|v| v.to_string()))
}

/// A container's command and args with `$(VAR)` expanded against its
/// environment (`ExpandContainerCommandAndArgs`).
pub fn expand_command_and_args(
    container: &Container,
    env: &Environment,
) -> (Vec<String>, Vec<String>) {
    let cmd = container
        .command
        .iter()
        .flatten()
        .map(|c| expand_with(c, &env.vars))
        .collect();
    let args = container
        .args
        .iter()
        .flatten()
        .map(|a| expand_with(a, &env.vars))
        .collect();
    (cmd, args)
}

/// An exec probe's command, expanded against the container's literal env
/// values only (`ExpandContainerCommandOnlyStatic`): valueFrom variables
/// count as empty.
pub fn expand_command_only_static(command: &[String], container: &Container) -> Vec<String> {
    let vars: Vec<(String, String)> = container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect();
    command.iter().map(|c| expand_with(c, &vars)).collect()
}

/// The ConfigMaps and Secrets a container's environment reads (what the agent
/// must fetch before calling [`make_environment`]).
pub fn referenced_objects(container: &Container) -> (Vec<String>, Vec<String>) {
    let mut cms = Vec::new();
    let mut secrets = Vec::new();
    for f in container.env_from.iter().flatten() {
        if let Some(c) = &f.config_map_ref {
            cms.push(c.name.clone());
        }
        if let Some(s) = &f.secret_ref {
            secrets.push(s.name.clone());
        }
    }
    for e in container.env.iter().flatten() {
        if let Some(from) = &e.value_from {
            if let Some(c) = &from.config_map_key_ref {
                cms.push(c.name.clone());
            }
            if let Some(s) = &from.secret_key_ref {
                secrets.push(s.name.clone());
            }
        }
    }
    cms.sort();
    cms.dedup();
    secrets.sort();
    secrets.dedup();
    (cms, secrets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-1",
                "labels": {"app": "web", "tier": "fe"},
                "annotations": {"note": "a \"b\"\n"}},
            "spec": {"nodeName": "node-1", "serviceAccountName": "builder",
                "containers": [{"name": "app", "image": "busybox",
                    "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "250m", "memory": "32Mi"}}},
                    {"name": "side", "image": "busybox", "resources": {"limits": {"cpu": "1500m"}}}]}
        }))
        .unwrap()
    }

    fn container(env: serde_json::Value) -> Container {
        let mut c = pod().spec.unwrap().containers[0].clone();
        let extra: Container = serde_json::from_value(
            json!({"name": "app", "env": env.get("env"), "envFrom": env.get("envFrom")}),
        )
        .unwrap();
        c.env = extra.env;
        c.env_from = extra.env_from;
        c
    }

    fn cms() -> BTreeMap<String, ConfigMap> {
        let mut m = BTreeMap::new();
        m.insert(
            "conf".to_string(),
            serde_json::from_value(json!({"metadata": {"name": "conf"}, "data": {"MODE": "prod", "LEVEL": "3", "bad=key": "x"}})).unwrap(),
        );
        m
    }

    fn secrets() -> BTreeMap<String, Secret> {
        let mut m = BTreeMap::new();
        m.insert(
            "creds".to_string(),
            serde_json::from_value(
                json!({"metadata": {"name": "creds"}, "data": {"PASSWORD": "czNjcjN0"}}),
            )
            .unwrap(),
        );
        m
    }

    fn run(env: serde_json::Value) -> Result<Environment, EnvError> {
        let cms = cms();
        let secrets = secrets();
        let mut alloc = BTreeMap::new();
        alloc.insert("cpu".to_string(), Quantity::parse("4").unwrap());
        alloc.insert("memory".to_string(), Quantity::parse("8Gi").unwrap());
        let svc = BTreeMap::from([
            (
                "KUBERNETES_PORT".to_string(),
                "tcp://10.96.0.1:443".to_string(),
            ),
            ("MODE".to_string(), "svc".to_string()),
        ]);
        let src = EnvSources {
            config_maps: &cms,
            secrets: &secrets,
            pod_ips: &["10.1.0.5".to_string(), "fd00::5".to_string()],
            host_ips: &["192.168.1.10".to_string()],
            node_allocatable: &alloc,
            service_env: &svc,
        };
        make_environment(&pod(), &container(env), &src)
    }

    #[test]
    fn expansion_as_upstream() {
        let vars = vec![
            ("A".to_string(), "alpha".to_string()),
            ("EMPTY".to_string(), String::new()),
        ];
        let cases = [
            ("$(A)", "alpha"),
            ("x-$(A)-y", "x-alpha-y"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$alpha"),
            ("$(MISSING)", "$(MISSING)"),
            ("$(EMPTY)z", "z"),
            ("$(A", "$(A"),
            ("$A", "$A"),
            ("trailing$", "trailing$"),
            ("$()", "$()"),
            ("$(A)$(A)", "alphaalpha"),
            ("ü$(A)ü", "üalphaü"),
            ("$ü", "$ü"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(expand_with(input, &vars), want, "{input:?}");
        }
    }

    #[test]
    fn env_sources() {
        let e = run(json!({
            "envFrom": [{"configMapRef": {"name": "conf"}}, {"prefix": "S_", "secretRef": {"name": "creds"}}],
            "env": [
                {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['app']"}}},
                {"name": "LABELS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels"}}},
                {"name": "NOTE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "IPS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIPs"}}},
                {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                {"name": "MEM_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                {"name": "CPU_REQ_M", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}},
                {"name": "CPU_REQ", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu"}}},
                {"name": "SIDE_CPU", "valueFrom": {"resourceFieldRef": {"containerName": "side", "resource": "limits.cpu"}}},
                {"name": "LEVEL2", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "LEVEL"}}},
                {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}},
                {"name": "MODE", "value": "dev-$(LEVEL)-$(NAME)"},
                {"name": "LINK", "value": "$(KUBERNETES_PORT)"},
                {"name": "LATER", "value": "$(NOT_YET)"},
                {"name": "NOT_YET", "value": "x"}
            ]
        }))
        .unwrap();
        let want = [
            ("MODE", "dev-3-web"),
            ("LEVEL", "3"),
            ("S_PASSWORD", "s3cr3t"),
            ("NAME", "web"),
            ("NS", "shop"),
            ("UID", "u-1"),
            ("APP", "web"),
            ("LABELS", "app=\"web\"\ntier=\"fe\""),
            ("NOTE", "note=\"a \\\"b\\\"\\n\""),
            ("NODE", "node-1"),
            ("SA", "builder"),
            ("IP", "10.1.0.5"),
            ("IPS", "10.1.0.5,fd00::5"),
            ("HOST", "192.168.1.10"),
            ("MEM_LIMIT", "64"),
            ("CPU_LIMIT", "4"), // unset limit: node allocatable
            ("CPU_REQ_M", "250"),
            ("CPU_REQ", "1"), // rounded up
            ("SIDE_CPU", "2"),
            ("LEVEL2", "3"),
            ("PW", "s3cr3t"),
            ("LINK", "tcp://10.96.0.1:443"),
            ("LATER", "$(NOT_YET)"),
            ("NOT_YET", "x"),
            ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
        ];
        for (k, v) in want {
            assert_eq!(e.get(k), Some(v), "{k}");
        }
        // envFrom keys come first; MODE keeps its place but takes env's value;
        // the service's MODE does not override.
        assert_eq!(e.vars[0].0, "LEVEL");
        assert_eq!(e.vars.iter().filter(|(k, _)| k == "MODE").count(), 1);
        assert_eq!(e.warnings, vec![
            "Keys [bad=key] from the EnvFrom configMap shop/conf were skipped since they are considered invalid environment variable names.".to_string()
        ]);
    }

    #[test]
    fn errors_as_upstream() {
        let cases = [
            (
                json!({"envFrom": [{"configMapRef": {"name": "x"}}]}),
                r#"configmap "x" not found"#,
            ),
            (
                json!({"envFrom": [{"secretRef": {"name": "x"}}]}),
                r#"secret "x" not found"#,
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "k"}}}]}),
                r#"configmap "x" not found"#,
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "nope"}}}]}),
                "couldn't find key nope in ConfigMap shop/conf",
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope"}}}]}),
                "couldn't find key nope in Secret shop/creds",
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k"}}}]}),
                r#"secret "x" not found"#,
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.foo"}}}]}),
                "field label not supported: spec.foo",
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.restartPolicy"}}}]}),
                "unsupported fieldPath: spec.restartPolicy",
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name['x']"}}}]}),
                "field label does not support subscript: metadata.name['x']",
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}}]}),
                "unsupported pod version: v2",
            ),
            (
                json!({"env": [{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}]}),
                "unsupported container resource : limits.gpu",
            ),
        ];
        for (env, want) in cases {
            let err = run(env.clone()).unwrap_err();
            assert_eq!(err.to_string(), want, "{env}");
        }
    }

    #[test]
    fn optional_references_are_skipped() {
        let e = run(json!({
            "envFrom": [{"configMapRef": {"name": "x", "optional": true}}],
            "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "k", "optional": true}}},
                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "nope", "optional": true}}},
                {"name": "C", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k", "optional": true}}},
                {"name": "D", "value": "d"}
            ]
        }))
        .unwrap();
        assert_eq!(e.get("A"), None);
        assert_eq!(e.get("B"), None);
        assert_eq!(e.get("C"), None);
        assert_eq!(e.get("D"), Some("d"));
    }

    #[test]
    fn static_expansion_for_exec_probes() {
        let c = container(json!({"env": [
            {"name": "FILE", "value": "/tmp/healthy"},
            {"name": "FROM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        ]}));
        let cmd: Vec<String> = ["test", "-f", "$(FILE)", "$(FROM)", "$(NONE)"]
            .map(String::from)
            .into();
        assert_eq!(
            expand_command_only_static(&cmd, &c),
            ["test", "-f", "/tmp/healthy", "", "$(NONE)"]
        );
    }

    #[test]
    fn command_and_args_expansion_and_references() {
        let mut c = container(
            json!({"envFrom": [{"configMapRef": {"name": "conf"}}], "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "PASSWORD"}}}]}),
        );
        c.command = Some(vec!["echo".into(), "$(MODE)".into()]);
        c.args = Some(vec!["$$(MODE)".into()]);
        let env = Environment {
            vars: vec![("MODE".into(), "prod".into())],
            warnings: vec![],
        };
        assert_eq!(
            expand_command_and_args(&c, &env),
            (
                vec!["echo".to_string(), "prod".to_string()],
                vec!["$(MODE)".to_string()]
            )
        );
        assert_eq!(
            referenced_objects(&c),
            (vec!["conf".to_string()], vec!["creds".to_string()])
        );
    }
}
