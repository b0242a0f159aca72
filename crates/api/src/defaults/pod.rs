//! Pod and PodTemplateSpec defaulting (upstream's `SetDefaults_Pod`,
//! `SetDefaults_PodSpec`, `SetDefaults_Container`, … as wired by
//! `SetObjectDefaults_Pod` in zz_generated.defaults.go).

use serde_json::{Map, Value, json};

use super::{
    default_if_absent, default_if_empty, default_if_zero, ensure_obj, obj_mut, round_resource_list,
};

/// Defaults for a whole Pod: pod-only defaults, then the spec.
pub fn default_pod(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(obj_mut) else {
        return;
    };
    pod_only_defaults(spec);
    default_pod_spec(spec);
}

/// Defaults for a PodTemplateSpec (`{metadata, spec}`) inside a workload.
pub fn default_pod_template(template: &mut Value) {
    if let Some(spec) = template.get_mut("spec").and_then(obj_mut) {
        default_pod_spec(spec);
    }
}

/// What `SetDefaults_Pod` adds only to Pods (not templates): requests from
/// limits, enableServiceLinks, host ports under host networking.
fn pod_only_defaults(spec: &mut Map<String, Value>) {
    for field in ["containers", "initContainers"] {
        for c in containers_mut(spec, field) {
            let Some(res) = c.get_mut("resources").and_then(obj_mut) else {
                continue;
            };
            let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            if limits.is_empty() {
                continue;
            }
            let Some(requests) = ensure_obj(res, "requests") else {
                continue;
            };
            for (k, v) in limits {
                requests.entry(k).or_insert(v);
            }
        }
    }
    default_if_absent(spec, "enableServiceLinks", json!(true));
    if spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        for field in ["containers", "initContainers"] {
            for c in containers_mut(spec, field) {
                let Some(Value::Array(ports)) = c.get_mut("ports") else {
                    continue;
                };
                for p in ports.iter_mut().filter_map(obj_mut) {
                    let container_port = p.get("containerPort").cloned().unwrap_or(Value::Null);
                    if p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                        && !container_port.is_null()
                    {
                        p.insert("hostPort".into(), container_port);
                    }
                }
            }
        }
    }
}

fn containers_mut<'a>(
    spec: &'a mut Map<String, Value>,
    field: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    spec.get_mut(field)
        .and_then(|v| v.as_array_mut())
        .into_iter()
        .flat_map(|a| a.iter_mut())
        .filter_map(obj_mut)
}

/// `SetDefaults_PodSpec` plus the generated defaults for volumes and every
/// kind of container.
pub fn default_pod_spec(spec: &mut Map<String, Value>) {
    default_if_empty(spec, "dnsPolicy", "ClusterFirst");
    default_if_empty(spec, "restartPolicy", "Always");
    default_if_absent(spec, "securityContext", json!({}));
    default_if_absent(spec, "terminationGracePeriodSeconds", json!(30));
    default_if_empty(spec, "schedulerName", "default-scheduler");

    if let Some(Value::Array(volumes)) = spec.get_mut("volumes") {
        for v in volumes.iter_mut().filter_map(obj_mut) {
            default_volume(v);
        }
    }
    for field in ["initContainers", "containers", "ephemeralContainers"] {
        for c in containers_mut(spec, field) {
            default_container(c);
        }
    }
    round_resource_list(spec.get_mut("overhead"));
    if let Some(res) = spec.get_mut("resources").and_then(obj_mut) {
        round_resource_list(res.get_mut("limits"));
        round_resource_list(res.get_mut("requests"));
    }
}

use crate::validation::pod::VOLUME_SOURCES;

/// File mode 0644, upstream's default for projected files.
const DEFAULT_MODE: i64 = 0o644;

fn default_volume(v: &mut Map<String, Value>) {
    if !VOLUME_SOURCES
        .iter()
        .any(|k| v.get(*k).is_some_and(|x| !x.is_null()))
    {
        v.insert("emptyDir".into(), json!({}));
    }
    default_volume_sources(v);
    if let Some(e) = v.get_mut("emptyDir").and_then(obj_mut)
        && let Some(q) = e.get_mut("sizeLimit")
    {
        super::canonicalize_quantity(q);
    }
    if let Some(p) = v.get_mut("projected").and_then(obj_mut) {
        default_if_absent(p, "defaultMode", json!(DEFAULT_MODE));
        if let Some(Value::Array(sources)) = p.get_mut("sources") {
            for s in sources.iter_mut().filter_map(obj_mut) {
                if let Some(d) = s.get_mut("downwardAPI").and_then(obj_mut) {
                    default_downward_items(d);
                }
                if let Some(t) = s.get_mut("serviceAccountToken").and_then(obj_mut) {
                    default_if_absent(t, "expirationSeconds", json!(3600));
                }
            }
        }
    }
    if let Some(e) = v.get_mut("ephemeral").and_then(obj_mut)
        && let Some(spec) = e
            .get_mut("volumeClaimTemplate")
            .and_then(obj_mut)
            .and_then(|t| t.get_mut("spec"))
            .and_then(obj_mut)
    {
        super::default_pvc_spec(spec);
    }
}

/// Source defaults shared by pod volumes and PersistentVolumes.
pub(super) fn default_volume_sources(v: &mut Map<String, Value>) {
    if let Some(h) = v.get_mut("hostPath").and_then(obj_mut) {
        default_if_absent(h, "type", json!(""));
    }
    for (source, field) in [("secret", "defaultMode"), ("configMap", "defaultMode")] {
        if let Some(s) = v.get_mut(source).and_then(obj_mut) {
            default_if_absent(s, field, json!(DEFAULT_MODE));
        }
    }
    if let Some(d) = v.get_mut("downwardAPI").and_then(obj_mut) {
        default_if_absent(d, "defaultMode", json!(DEFAULT_MODE));
        default_downward_items(d);
    }
    if let Some(i) = v.get_mut("iscsi").and_then(obj_mut) {
        default_if_empty(i, "iscsiInterface", "default");
    }
    if let Some(r) = v.get_mut("rbd").and_then(obj_mut) {
        default_if_empty(r, "pool", "rbd");
        default_if_empty(r, "user", "admin");
        default_if_empty(r, "keyring", "/etc/ceph/keyring");
    }
    if let Some(a) = v.get_mut("azureDisk").and_then(obj_mut) {
        default_if_absent(a, "cachingMode", json!("ReadWrite"));
        default_if_absent(a, "fsType", json!("ext4"));
        default_if_absent(a, "readOnly", json!(false));
        default_if_absent(a, "kind", json!("Shared"));
    }
    if let Some(s) = v.get_mut("scaleIO").and_then(obj_mut) {
        default_if_empty(s, "storageMode", "ThinProvisioned");
        default_if_empty(s, "fsType", "xfs");
    }
}

fn default_downward_items(d: &mut Map<String, Value>) {
    if let Some(Value::Array(items)) = d.get_mut("items") {
        for item in items.iter_mut().filter_map(obj_mut) {
            if let Some(f) = item.get_mut("fieldRef").and_then(obj_mut) {
                default_if_empty(f, "apiVersion", "v1");
            }
        }
    }
}

/// `SetDefaults_Container` and what the generated code adds per container.
fn default_container(c: &mut Map<String, Value>) {
    if c.get("imagePullPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if image_tag(image).as_deref() == Some("latest") {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    default_if_empty(c, "terminationMessagePath", "/dev/termination-log");
    default_if_empty(c, "terminationMessagePolicy", "File");
    if let Some(Value::Array(ports)) = c.get_mut("ports") {
        for p in ports.iter_mut().filter_map(obj_mut) {
            default_if_empty(p, "protocol", "TCP");
        }
    }
    if let Some(Value::Array(env)) = c.get_mut("env") {
        for e in env.iter_mut().filter_map(obj_mut) {
            if let Some(f) = e
                .get_mut("valueFrom")
                .and_then(obj_mut)
                .and_then(|vf| vf.get_mut("fieldRef"))
                .and_then(obj_mut)
            {
                default_if_empty(f, "apiVersion", "v1");
            }
        }
    }
    if let Some(res) = c.get_mut("resources").and_then(obj_mut) {
        round_resource_list(res.get_mut("limits"));
        round_resource_list(res.get_mut("requests"));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(obj_mut) {
            default_probe(p);
        }
    }
    if let Some(l) = c.get_mut("lifecycle").and_then(obj_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = l
                .get_mut(hook)
                .and_then(obj_mut)
                .and_then(|h| h.get_mut("httpGet"))
                .and_then(obj_mut)
            {
                default_http_get(h);
            }
        }
    }
}

fn default_probe(p: &mut Map<String, Value>) {
    default_if_zero(p, "timeoutSeconds", 1);
    default_if_zero(p, "periodSeconds", 10);
    default_if_zero(p, "successThreshold", 1);
    default_if_zero(p, "failureThreshold", 3);
    if let Some(h) = p.get_mut("httpGet").and_then(obj_mut) {
        default_http_get(h);
    }
    if let Some(g) = p.get_mut("grpc").and_then(obj_mut) {
        default_if_absent(g, "service", json!(""));
    }
}

fn default_http_get(h: &mut Map<String, Value>) {
    default_if_empty(h, "path", "/");
    default_if_empty(h, "scheme", "HTTP");
}

/// The tag an image reference resolves to, as upstream's `ParseImageName`:
/// `latest` when neither tag nor digest is given, `None` when the reference
/// does not parse (which defaults the pull policy to IfNotPresent).
pub fn image_tag(image: &str) -> Option<String> {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let (algo, hex) = d.split_once(':')?;
        let ok = !algo.is_empty()
            && algo
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'.' | b'_' | b'-'))
            && hex.len() >= 32
            && hex.bytes().all(|c| c.is_ascii_hexdigit());
        if !ok {
            return None;
        }
    }
    // A tag is a ':' after the last '/'.
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    if let Some(t) = tag {
        let b = t.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= 128
            && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
            && b.iter()
                .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
        if !ok {
            return None;
        }
    }
    if !valid_repository(repo) {
        return None;
    }
    match (tag, digest) {
        (Some(t), _) => Some(t.to_string()),
        (None, Some(_)) => Some(String::new()),
        (None, None) => Some("latest".to_string()),
    }
}

/// `[domain/]path` with lowercase path components.
fn valid_repository(repo: &str) -> bool {
    if repo.is_empty() {
        return false;
    }
    let mut parts: Vec<&str> = repo.split('/').collect();
    let first = parts.first().copied().unwrap_or("");
    let has_domain = parts.len() > 1
        && (first.contains('.')
            || first.contains(':')
            || first == "localhost"
            || first.to_lowercase() != first);
    if has_domain {
        let host = first.split(':').next().unwrap_or("");
        if host.is_empty()
            || !host
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-'))
        {
            return false;
        }
        parts.remove(0);
    }
    parts.iter().all(|p| {
        let b = p.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|&c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags() {
        let cases: &[(&str, Option<&str>)] = &[
            ("nginx", Some("latest")),
            ("nginx:latest", Some("latest")),
            ("nginx:1.27", Some("1.27")),
            ("docker.io/library/nginx", Some("latest")),
            ("localhost:5000/app", Some("latest")),
            ("localhost:5000/app:v1", Some("v1")),
            ("registry.example.com:443/team/app:2.0", Some("2.0")),
            (
                "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                Some(""),
            ),
            (
                "nginx:1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                Some("1"),
            ),
            ("Nginx", None),
            ("", None),
            ("nginx:", None),
            ("nginx@sha256:zz", None),
        ];
        for (image, want) in cases {
            assert_eq!(image_tag(image).as_deref(), *want, "{image}");
        }
    }
}
