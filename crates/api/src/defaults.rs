//! API defaulting as upstream's `SetDefaults_*` functions and the generated
//! `SetObjectDefaults_*` wiring, applied to wire-form objects, plus the pure
//! create/update preparation upstream's registry strategies do
//! (`prepare_for_create`, `prepare_for_update`) and the defaults admission
//! plugins add to pods (`admit_pod_priority`, `default_service_account_name`,
//! `default_toleration_seconds`).
//!
//! Only fields that are absent (or null, or for plain strings and numbers,
//! empty/zero as Go sees them) are filled; values of the wrong JSON type are
//! left alone for validation to report.

use serde_json::{Map, Value, json};

use crate::quantity::Quantity;
use crate::registry::{ResourceType, Strategy};

mod pod;

pub use pod::{default_pod_spec, default_pod_template, image_tag};

/// Applies upstream's defaults for `group`/`version`/`kind` in place.
pub fn apply_defaults(group: &str, version: &str, kind: &str, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    match (group, version, kind) {
        ("", "v1", "Pod") => pod::default_pod(obj),
        ("", "v1", "PodTemplate") => with_template(obj, &["template"]),
        ("", "v1", "ReplicationController") => default_replication_controller(obj),
        ("", "v1", "Service") => default_service(obj),
        ("", "v1", "Namespace") => default_namespace(obj),
        ("", "v1", "Secret") => default_secret(obj),
        ("", "v1", "PersistentVolume") => default_persistent_volume(obj),
        ("", "v1", "PersistentVolumeClaim") => {
            let status = ensure_path(obj, &["status"]);
            if let Some(s) = status {
                default_if_empty(s, "phase", "Pending");
            }
            if let Some(spec) = ensure_path(obj, &["spec"]) {
                default_pvc_spec(spec);
            }
        }
        ("", "v1", "Endpoints") => {
            for subset in arr_mut(obj, &["subsets"]) {
                for p in subset
                    .get_mut("ports")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    if let Some(p) = obj_mut(p) {
                        default_if_empty(p, "protocol", "TCP");
                    }
                }
            }
        }
        ("", "v1", "Node") => default_node(obj),
        ("", "v1", "LimitRange") => default_limit_range(obj),
        ("", "v1", "ResourceQuota") => {
            for path in [["spec", "hard"], ["status", "hard"], ["status", "used"]] {
                round_resource_list(get_path_mut(obj, &path));
            }
        }
        ("apps", "v1", "Deployment") => {
            default_deployment(obj);
            with_template(obj, &["spec", "template"]);
        }
        ("apps", "v1", "ReplicaSet") => {
            if let Some(spec) = ensure_path(obj, &["spec"]) {
                default_if_absent(spec, "replicas", json!(1));
            }
            with_template(obj, &["spec", "template"]);
        }
        ("apps", "v1", "StatefulSet") => {
            default_stateful_set(obj);
            with_template(obj, &["spec", "template"]);
        }
        ("apps", "v1", "DaemonSet") => {
            default_daemon_set(obj);
            with_template(obj, &["spec", "template"]);
        }
        ("batch", "v1", "Job") => {
            default_job(obj);
            with_template(obj, &["spec", "template"]);
        }
        ("batch", "v1", "CronJob") => {
            default_cron_job(obj);
            with_template(obj, &["spec", "jobTemplate", "spec", "template"]);
        }
        // v2beta2 (served for the seed article) defaults as v2 does.
        ("autoscaling", "v2" | "v2beta2", "HorizontalPodAutoscaler") => default_hpa_v2(obj),
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => {
            if let Some(spec) = ensure_path(obj, &["spec"]) {
                default_if_absent(spec, "minReplicas", json!(1));
            }
        }
        ("networking.k8s.io", "v1", "NetworkPolicy") => default_network_policy(obj),
        ("networking.k8s.io", "v1beta1", k) => crate::networking::default_v1beta1(k, obj),
        ("networking.k8s.io", "v1", "IngressClass") => {
            if let Some(p) = get_path_mut(obj, &["spec", "parameters"]).and_then(obj_mut) {
                default_if_absent(p, "scope", json!("Cluster"));
            }
        }
        ("scheduling.k8s.io", "v1", "PriorityClass") => {
            if let Some(m) = obj_mut(obj) {
                default_if_absent(m, "preemptionPolicy", json!("PreemptLowerPriority"));
            }
        }
        ("storage.k8s.io", "v1", "StorageClass") => {
            if let Some(m) = obj_mut(obj) {
                default_if_absent(m, "reclaimPolicy", json!("Delete"));
                default_if_absent(m, "volumeBindingMode", json!("Immediate"));
            }
        }
        ("storage.k8s.io", "v1", "CSIDriver") => {
            if let Some(spec) = ensure_path(obj, &["spec"]) {
                default_if_absent(spec, "attachRequired", json!(true));
                default_if_absent(spec, "podInfoOnMount", json!(false));
                default_if_absent(spec, "storageCapacity", json!(false));
                default_if_absent(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
                default_if_absent(spec, "requiresRepublish", json!(false));
                // SELinuxMountReadWriteOncePod is on by default upstream.
                default_if_absent(spec, "seLinuxMount", json!(false));
                if spec
                    .get("volumeLifecycleModes")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                {
                    spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
                }
            }
        }
        ("rbac.authorization.k8s.io", "v1", "RoleBinding" | "ClusterRoleBinding") => {
            default_role_binding(obj)
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration") => {
            default_webhooks(obj, false)
        }
        ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration") => {
            default_webhooks(obj, true)
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy") => {
            if let Some(spec) = ensure_path(obj, &["spec"]) {
                default_if_absent(spec, "failurePolicy", json!("Fail"));
                if let Some(m) = spec.get_mut("matchConstraints").and_then(obj_mut) {
                    default_match_resources(m);
                }
            }
        }
        ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding") => {
            if let Some(m) = get_path_mut(obj, &["spec", "matchResources"]).and_then(obj_mut) {
                default_match_resources(m);
            }
        }
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => default_crd(obj),
        _ => {}
    }
}

fn with_template(obj: &mut Value, path: &[&str]) {
    if let Some(t) = get_path_mut(obj, path)
        && t.is_object()
    {
        default_pod_template(t);
    }
}

fn default_replication_controller(obj: &mut Value) {
    let labels =
        crate::validation::jv::obj_at(obj, &["spec", "template", "metadata", "labels"]).cloned();
    if let Some(labels) = labels {
        if let Some(spec) = ensure_path(obj, &["spec"])
            && spec
                .get("selector")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        {
            spec.insert("selector".into(), Value::Object(labels.clone()));
        }
        if let Some(meta) = ensure_path(obj, &["metadata"])
            && meta
                .get("labels")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
        {
            meta.insert("labels".into(), Value::Object(labels));
        }
    }
    if let Some(spec) = ensure_path(obj, &["spec"]) {
        default_if_absent(spec, "replicas", json!(1));
    }
    with_template(obj, &["spec", "template"]);
}

/// Service defaults. IP families, `ipFamilyPolicy` and cluster IPs are left
/// to the allocator in the registry, as upstream does.
fn default_service(obj: &mut Value) {
    let Some(spec) = ensure_path(obj, &["spec"]) else {
        return;
    };
    default_if_empty(spec, "sessionAffinity", "None");
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        Some("ClientIP") => {
            let has_timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"))
                .is_some_and(|t| !t.is_null());
            if !has_timeout {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    default_if_empty(spec, "type", "ClusterIP");
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for p in ports.iter_mut().filter_map(obj_mut) {
            default_if_empty(p, "protocol", "TCP");
            let unset = match p.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.is_empty(),
                _ => false,
            };
            if unset && let Some(port) = p.get("port").cloned() {
                p.insert("targetPort".into(), port);
            }
        }
    }
    let stype = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let has_external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let externally_accessible = stype == "LoadBalancer"
        || stype == "NodePort"
        || (stype == "ClusterIP" && has_external_ips);
    if externally_accessible {
        default_if_empty(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(stype.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        default_if_absent(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if stype == "LoadBalancer" {
        default_if_absent(spec, "allocateLoadBalancerNodePorts", json!(true));
        for ing in arr_mut(obj, &["status", "loadBalancer", "ingress"]) {
            if ing
                .get("ip")
                .and_then(Value::as_str)
                .is_some_and(|ip| !ip.is_empty())
            {
                default_if_absent(ing, "ipMode", json!("VIP"));
            }
        }
    }
}

fn default_namespace(obj: &mut Value) {
    let name = crate::validation::jv::str_at(obj, &["metadata", "name"])
        .unwrap_or("")
        .to_string();
    if !name.is_empty()
        && let Some(labels) = ensure_path(obj, &["metadata", "labels"])
    {
        labels.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    if let Some(status) = ensure_path(obj, &["status"]) {
        default_if_empty(status, "phase", "Active");
    }
}

/// Secret type Opaque, and `stringData` folded into `data` (upstream does
/// the latter in conversion; the stored result is the same).
fn default_secret(obj: &mut Value) {
    let Some(m) = obj_mut(obj) else { return };
    default_if_empty(m, "type", "Opaque");
    let Some(Value::Object(string_data)) = m.get("stringData").cloned() else {
        return;
    };
    let Some(data) = ensure_obj(m, "data") else {
        return;
    };
    for (k, v) in string_data {
        if let Some(s) = v.as_str() {
            data.insert(k, json!(base64_encode(s.as_bytes())));
        }
    }
    m.remove("stringData");
}

fn default_persistent_volume(obj: &mut Value) {
    if let Some(status) = ensure_path(obj, &["status"]) {
        default_if_empty(status, "phase", "Pending");
    }
    if let Some(spec) = ensure_path(obj, &["spec"]) {
        default_if_empty(spec, "persistentVolumeReclaimPolicy", "Retain");
        default_if_absent(spec, "volumeMode", json!("Filesystem"));
        round_resource_list(spec.get_mut("capacity"));
        pod::default_volume_sources(spec);
    }
}

/// `SetDefaults_PersistentVolumeClaimSpec` plus resource rounding.
fn default_pvc_spec(spec: &mut Map<String, Value>) {
    default_if_absent(spec, "volumeMode", json!("Filesystem"));
    if let Some(res) = spec.get_mut("resources").and_then(obj_mut) {
        round_resource_list(res.get_mut("limits"));
        round_resource_list(res.get_mut("requests"));
    }
}

fn default_node(obj: &mut Value) {
    let Some(status) = get_path_mut(obj, &["status"]).and_then(obj_mut) else {
        return;
    };
    round_resource_list(status.get_mut("capacity"));
    round_resource_list(status.get_mut("allocatable"));
    let allocatable_missing = status.get("allocatable").is_none_or(Value::is_null);
    if allocatable_missing
        && let Some(cap) = status.get("capacity").filter(|c| c.is_object()).cloned()
    {
        status.insert("allocatable".into(), cap);
    }
}

fn default_limit_range(obj: &mut Value) {
    for item in arr_mut(obj, &["spec", "limits"]) {
        for f in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            round_resource_list(item.get_mut(f));
        }
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        let list = |item: &Map<String, Value>, f: &str| {
            item.get(f)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let max = list(item, "max");
        let min = list(item, "min");
        let Some(default) = ensure_obj(item, "default") else {
            continue;
        };
        for (k, v) in max {
            default.entry(k).or_insert(v);
        }
        let default = default.clone();
        let Some(default_request) = ensure_obj(item, "defaultRequest") else {
            continue;
        };
        for (k, v) in default.into_iter().chain(min) {
            default_request.entry(k).or_insert(v);
        }
    }
}

fn default_deployment(obj: &mut Value) {
    let Some(spec) = ensure_path(obj, &["spec"]) else {
        return;
    };
    default_if_absent(spec, "replicas", json!(1));
    if let Some(strategy) = ensure_obj(spec, "strategy") {
        default_if_empty(strategy, "type", "RollingUpdate");
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = ensure_obj(strategy, "rollingUpdate")
        {
            default_if_absent(ru, "maxUnavailable", json!("25%"));
            default_if_absent(ru, "maxSurge", json!("25%"));
        }
    }
    default_if_absent(spec, "revisionHistoryLimit", json!(10));
    default_if_absent(spec, "progressDeadlineSeconds", json!(600));
}

fn default_stateful_set(obj: &mut Value) {
    let Some(spec) = ensure_path(obj, &["spec"]) else {
        return;
    };
    default_if_empty(spec, "podManagementPolicy", "OrderedReady");
    if let Some(us) = ensure_obj(spec, "updateStrategy") {
        if us
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            us.insert("type".into(), json!("RollingUpdate"));
            ensure_obj(us, "rollingUpdate");
        }
        if us.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = us.get_mut("rollingUpdate").and_then(obj_mut)
        {
            default_if_absent(ru, "partition", json!(0));
        }
    }
    if let Some(policy) = ensure_obj(spec, "persistentVolumeClaimRetentionPolicy") {
        default_if_empty(policy, "whenDeleted", "Retain");
        default_if_empty(policy, "whenScaled", "Retain");
    }
    default_if_absent(spec, "replicas", json!(1));
    default_if_absent(spec, "revisionHistoryLimit", json!(10));
    if let Some(Value::Array(templates)) = spec.get_mut("volumeClaimTemplates") {
        for t in templates.iter_mut().filter_map(obj_mut) {
            // Upstream defaults the whole claim, status included.
            if let Some(status) = ensure_obj(t, "status") {
                default_if_empty(status, "phase", "Pending");
            }
            if let Some(s) = ensure_obj(t, "spec") {
                default_pvc_spec(s);
            }
        }
    }
}

fn default_daemon_set(obj: &mut Value) {
    let Some(spec) = ensure_path(obj, &["spec"]) else {
        return;
    };
    if let Some(us) = ensure_obj(spec, "updateStrategy") {
        default_if_empty(us, "type", "RollingUpdate");
        if us.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = ensure_obj(us, "rollingUpdate")
        {
            default_if_absent(ru, "maxUnavailable", json!(1));
            default_if_absent(ru, "maxSurge", json!(0));
        }
    }
    default_if_absent(spec, "revisionHistoryLimit", json!(10));
}

fn default_job(obj: &mut Value) {
    let template_labels =
        crate::validation::jv::obj_at(obj, &["spec", "template", "metadata", "labels"]).cloned();
    let Some(spec) = ensure_path(obj, &["spec"]) else {
        return;
    };
    let unset = |s: &Map<String, Value>, k: &str| s.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    default_if_absent(spec, "parallelism", json!(1));
    if unset(spec, "backoffLimit") {
        let limit = if unset(spec, "backoffLimitPerIndex") {
            6
        } else {
            i32::MAX as i64
        };
        spec.insert("backoffLimit".into(), json!(limit));
    }
    default_if_absent(spec, "completionMode", json!("NonIndexed"));
    default_if_absent(spec, "suspend", json!(false));
    let has_failure_policy = !unset(spec, "podFailurePolicy");
    if let Some(rules) = spec
        .get_mut("podFailurePolicy")
        .and_then(|p| p.get_mut("rules"))
        .and_then(Value::as_array_mut)
    {
        for rule in rules.iter_mut().filter_map(obj_mut) {
            for pattern in rule
                .get_mut("onPodConditions")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
                .filter_map(obj_mut)
            {
                default_if_empty(pattern, "status", "True");
            }
        }
    }
    let replacement = if has_failure_policy {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    default_if_absent(spec, "podReplacementPolicy", json!(replacement));
    default_if_absent(spec, "manualSelector", json!(false));
    if let Some(labels) = template_labels
        && let Some(meta) = ensure_path(obj, &["metadata"])
        && meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        meta.insert("labels".into(), Value::Object(labels));
    }
}

fn default_cron_job(obj: &mut Value) {
    let Some(spec) = ensure_path(obj, &["spec"]) else {
        return;
    };
    default_if_empty(spec, "concurrencyPolicy", "Allow");
    default_if_absent(spec, "suspend", json!(false));
    default_if_absent(spec, "successfulJobsHistoryLimit", json!(3));
    default_if_absent(spec, "failedJobsHistoryLimit", json!(1));
}

/// HPA v2: minReplicas 1, a CPU 80% target when no metric is given, and
/// scaling rules filled in when `behavior` is present. Scale-down
/// stabilization is left unset: the controller's flag (300 s) applies.
fn default_hpa_v2(obj: &mut Value) {
    let Some(spec) = ensure_path(obj, &["spec"]) else {
        return;
    };
    default_if_absent(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    let Some(behavior) = spec.get_mut("behavior").and_then(obj_mut) else {
        return;
    };
    let scale_up = json!({
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15}
        ]
    });
    let scale_down = json!({
        "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]
    });
    for (key, defaults) in [("scaleUp", scale_up), ("scaleDown", scale_down)] {
        let mut rules = match defaults {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        if let Some(given) = behavior.get(key).and_then(Value::as_object) {
            for (k, v) in given {
                if !v.is_null() {
                    rules.insert(k.clone(), v.clone());
                }
            }
        }
        behavior.insert(key.into(), Value::Object(rules));
    }
}

fn default_network_policy(obj: &mut Value) {
    let Some(spec) = ensure_path(obj, &["spec"]) else {
        return;
    };
    for dir in ["ingress", "egress"] {
        for rule in spec
            .get_mut(dir)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for p in rule
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(p) = obj_mut(p) {
                    default_if_absent(p, "protocol", json!("TCP"));
                }
            }
        }
    }
    if spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        let has_egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if has_egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn default_role_binding(obj: &mut Value) {
    if let Some(role_ref) = ensure_path(obj, &["roleRef"]) {
        default_if_empty(role_ref, "apiGroup", RBAC_GROUP);
    }
    for s in arr_mut(obj, &["subjects"]) {
        if s.get("apiGroup")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            match s.get("kind").and_then(Value::as_str) {
                Some("User" | "Group") => {
                    s.insert("apiGroup".into(), json!(RBAC_GROUP));
                }
                Some("ServiceAccount") => {
                    s.insert("apiGroup".into(), json!(""));
                }
                _ => {}
            }
        }
    }
}

fn default_webhooks(obj: &mut Value, mutating: bool) {
    for w in arr_mut(obj, &["webhooks"]) {
        default_if_absent(w, "failurePolicy", json!("Fail"));
        default_if_absent(w, "matchPolicy", json!("Equivalent"));
        default_if_absent(w, "namespaceSelector", json!({}));
        default_if_absent(w, "objectSelector", json!({}));
        default_if_absent(w, "timeoutSeconds", json!(10));
        if mutating {
            default_if_absent(w, "reinvocationPolicy", json!("Never"));
        }
        for r in w
            .get_mut("rules")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(r) = obj_mut(r) {
                default_if_absent(r, "scope", json!("*"));
            }
        }
        if let Some(svc) = w
            .get_mut("clientConfig")
            .and_then(obj_mut)
            .and_then(|c| c.get_mut("service"))
            .and_then(obj_mut)
        {
            default_if_absent(svc, "port", json!(443));
        }
    }
}

/// Upstream's `SetDefaults_MatchResources` (admission policies and bindings).
fn default_match_resources(m: &mut Map<String, Value>) {
    default_if_absent(m, "matchPolicy", json!("Equivalent"));
    default_if_absent(m, "namespaceSelector", json!({}));
    default_if_absent(m, "objectSelector", json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        for r in m
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(r) = obj_mut(r) {
                default_if_absent(r, "scope", json!("*"));
            }
        }
    }
}

fn default_crd(obj: &mut Value) {
    let Some(spec) = ensure_path(obj, &["spec"]) else {
        return;
    };
    if let Some(conv) = ensure_obj(spec, "conversion") {
        default_if_empty(conv, "strategy", "None");
        if let Some(svc) = conv
            .get_mut("webhook")
            .and_then(obj_mut)
            .and_then(|w| w.get_mut("clientConfig"))
            .and_then(obj_mut)
            .and_then(|c| c.get_mut("service"))
            .and_then(obj_mut)
        {
            default_if_absent(svc, "port", json!(443));
        }
    }
    if let Some(names) = spec.get_mut("names").and_then(obj_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !kind.is_empty() {
            default_if_empty(names, "singular", &kind.to_lowercase());
            default_if_empty(names, "listKind", &format!("{kind}List"));
        }
    }
}

// ---------------------------------------------------------------------------
// Registry-strategy preparation (pure parts of upstream's PrepareForCreate /
// PrepareForUpdate), driven by the registry entry: its strategy, and its
// `tracks_generation` and `keeps_status` facts.

/// Create-time mutations upstream's strategies make, after defaulting and
/// before validation; needs `metadata.uid` already set (for Jobs).
/// Namespaces get the `kubernetes` finalizer and phase Active, pods phase
/// Pending and their QoS class, Jobs a generated selector unless
/// `manualSelector`, controllers an empty status and generation 1.
pub fn prepare_for_create(rt: &ResourceType, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    match rt.strategy {
        Strategy::Namespace => {
            if let Some(spec) = ensure_path(obj, &["spec"]) {
                match spec.get_mut("finalizers") {
                    Some(Value::Array(f)) => {
                        if !f.iter().any(|x| x == "kubernetes") {
                            f.push(json!("kubernetes"));
                        }
                    }
                    _ => {
                        spec.insert("finalizers".into(), json!(["kubernetes"]));
                    }
                }
            }
            if let Some(m) = obj_mut(obj) {
                m.insert("status".into(), json!({"phase": "Active"}));
            }
            return;
        }
        Strategy::Pod => {
            let qos = crate::qos::qos_class(obj);
            let gated =
                !crate::validation::jv::arr_at(obj, &["spec", "schedulingGates"]).is_empty();
            let mut status = json!({"phase": "Pending", "qosClass": qos});
            if gated {
                status["conditions"] = json!([{
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": null,
                    "lastTransitionTime": null
                }]);
            }
            if let Some(m) = obj_mut(obj) {
                m.insert("status".into(), status);
            }
            return;
        }
        Strategy::Service => {
            if let Some(m) = obj_mut(obj) {
                m.insert("status".into(), json!({"loadBalancer": {}}));
            }
            return;
        }
        // Status is the PV controller's: a new claim starts Pending (upstream
        // resets it and its decoder defaults the phase), as does a new volume.
        Strategy::PersistentVolumeClaim | Strategy::PersistentVolume => {
            if let Some(m) = obj_mut(obj) {
                m.insert("status".into(), json!({"phase": "Pending"}));
            }
            return;
        }
        // The attacher reports status; v1 clears what a create sends.
        Strategy::VolumeAttachment => {
            if let Some(m) = obj_mut(obj) {
                m.insert("status".into(), json!({"attached": false}));
            }
            return;
        }
        Strategy::Job => generate_job_selector(obj),
        // Its status is the availability controller's.
        Strategy::APIService => {
            if let Some(m) = obj_mut(obj) {
                m.insert("status".into(), json!({}));
            }
            return;
        }
        _ => {}
    }
    if rt.tracks_generation
        && let Some(m) = obj_mut(obj)
    {
        m.insert("status".into(), json!({}));
        if let Some(meta) = ensure_obj(m, "metadata") {
            meta.insert("generation".into(), json!(1));
        }
    }
}

/// Update-time mutations: status is kept from the stored object (it changes
/// through `/status`), generation is carried over and bumped when the spec
/// changed; a Namespace keeps its finalizers (changed through `/finalize`).
pub fn prepare_for_update(rt: &ResourceType, new: &mut Value, old: &Value) {
    if !new.is_object() {
        return;
    }
    if rt.keeps_status {
        let old_status = old.get("status").cloned();
        if let Some(m) = obj_mut(new) {
            match old_status {
                Some(s) => {
                    m.insert("status".into(), s);
                }
                None => {
                    m.remove("status");
                }
            }
        }
    }
    if rt.strategy == Strategy::Namespace {
        let finalizers = crate::validation::jv::get(old, &["spec", "finalizers"]).cloned();
        if let (Some(f), Some(spec)) = (finalizers, ensure_path(new, &["spec"])) {
            spec.insert("finalizers".into(), f);
        }
    }
    if rt.tracks_generation {
        let old_gen = crate::validation::jv::get(old, &["metadata", "generation"])
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let changed = !crate::validation::semantic_eq(
            new.get("spec").unwrap_or(&Value::Null),
            old.get("spec").unwrap_or(&Value::Null),
        );
        let generation = if changed { old_gen + 1 } else { old_gen };
        if let Some(meta) = ensure_path(new, &["metadata"]) {
            meta.insert("generation".into(), json!(generation));
        }
    }
}

/// The labels and selector upstream's Job strategy generates.
fn generate_job_selector(obj: &mut Value) {
    if crate::validation::jv::get(obj, &["spec", "manualSelector"]).and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    let uid = crate::validation::jv::str_at(obj, &["metadata", "uid"])
        .unwrap_or("")
        .to_string();
    let name = crate::validation::jv::str_at(obj, &["metadata", "name"])
        .unwrap_or("")
        .to_string();
    if let Some(labels) = ensure_path(obj, &["spec", "template", "metadata", "labels"]) {
        for key in ["job-name", "batch.kubernetes.io/job-name"] {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        for key in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
            labels.entry(key).or_insert_with(|| json!(uid));
        }
    }
    if let Some(match_labels) = ensure_path(obj, &["spec", "selector", "matchLabels"]) {
        match_labels
            .entry("batch.kubernetes.io/controller-uid")
            .or_insert_with(|| json!(uid));
    }
}

/// The ServiceAccount admission plugin's defaulting: a pod without
/// `serviceAccountName` runs as `default`; the deprecated `serviceAccount`
/// mirrors it. Returns the name.
pub fn default_service_account_name(pod: &mut Value) -> String {
    let Some(spec) = ensure_path(pod, &["spec"]) else {
        return "default".to_string();
    };
    default_if_empty(spec, "serviceAccountName", "default");
    let name = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    default_if_empty(spec, "serviceAccount", &name);
    name
}

/// The DefaultTolerationSeconds admission plugin: a pod that does not tolerate
/// the not-ready and unreachable NoExecute taints tolerates each for 300 s.
pub fn default_toleration_seconds(pod: &mut Value) {
    let Some(spec) = ensure_path(pod, &["spec"]) else {
        return;
    };
    let tolerations = match spec.get_mut("tolerations") {
        Some(Value::Array(t)) => t,
        Some(Value::Null) | None => {
            spec.insert("tolerations".into(), json!([]));
            match spec.get_mut("tolerations") {
                Some(Value::Array(t)) => t,
                _ => return,
            }
        }
        Some(_) => return,
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
            let effect_ok = s("effect").is_empty() || s("effect") == "NoExecute";
            let key_ok = s("key") == key || (s("key").is_empty() && s("operator") == "Exists");
            effect_ok && key_ok
        });
        if !tolerated {
            tolerations.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300
            }));
        }
    }
}

/// Upstream's Priority admission on pod create: a named PriorityClass gives
/// `priority` and `preemptionPolicy`; without a name the global default class (the
/// lowest-valued one if several) does, else priority 0. A pod may not carry values
/// that differ from its class's.
pub fn admit_pod_priority(pod: &mut Value, classes: &[Value]) -> Result<(), String> {
    let Some(spec) = ensure_path(pod, &["spec"]) else {
        return Ok(());
    };
    let value = |c: &Value| c.get("value").and_then(Value::as_i64).unwrap_or(0);
    let policy = |c: &Value| {
        c.get("preemptionPolicy")
            .and_then(Value::as_str)
            .map(String::from)
    };
    let named = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(String::from);
    let (priority, preemption) = match named {
        Some(name) => {
            let class = classes
                .iter()
                .find(|c| c.pointer("/metadata/name").and_then(Value::as_str) == Some(&name))
                .ok_or_else(|| format!("no PriorityClass with name {name} was found"))?;
            (value(class), policy(class))
        }
        None => {
            let default = classes
                .iter()
                .filter(|c| c.get("globalDefault").and_then(Value::as_bool) == Some(true))
                .min_by_key(|c| value(c));
            match default {
                Some(c) => {
                    let name = c.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
                    spec.insert("priorityClassName".into(), name);
                    (value(c), policy(c))
                }
                None => (0, None),
            }
        }
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != priority
    {
        return Err(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        ));
    }
    spec.insert("priority".into(), json!(priority));
    let preemption = preemption.unwrap_or_else(|| "PreemptLowerPriority".into());
    if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str)
        && given != preemption
    {
        return Err(format!(
            "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {preemption} from the given PriorityClass name"
        ));
    }
    spec.insert("preemptionPolicy".into(), json!(preemption));
    Ok(())
}

// ---------------------------------------------------------------------------
// JSON helpers.

pub(crate) fn obj_mut(v: &mut Value) -> Option<&mut Map<String, Value>> {
    v.as_object_mut()
}

/// Sets `key` when it is absent or null (a nil pointer in Go).
pub(crate) fn default_if_absent(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), value);
    }
}

/// Sets a string `key` when absent, null or "" (Go's zero string).
pub(crate) fn default_if_empty(m: &mut Map<String, Value>, key: &str, value: &str) {
    let empty = match m.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    };
    if empty {
        m.insert(key.to_string(), Value::String(value.to_string()));
    }
}

/// Sets a number `key` when absent, null or 0 (Go's zero int).
pub(crate) fn default_if_zero(m: &mut Map<String, Value>, key: &str, value: i64) {
    let zero = match m.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        _ => false,
    };
    if zero {
        m.insert(key.to_string(), json!(value));
    }
}

/// The object at `key`, created empty when absent or null; `None` when the
/// value there is not an object.
pub(crate) fn ensure_obj<'a>(
    m: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), Value::Object(Map::new()));
    }
    m.get_mut(key).and_then(Value::as_object_mut)
}

/// [`ensure_obj`] along a path from the root object.
fn ensure_path<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = v.as_object_mut()?;
    for key in path {
        cur = ensure_obj(cur, key)?;
    }
    Some(cur)
}

fn get_path_mut<'a>(v: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, k| cur.get_mut(*k))
}

/// The objects of the array at `path` (none when absent or mistyped).
fn arr_mut<'a>(
    v: &'a mut Value,
    path: &[&str],
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    get_path_mut(v, path)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flat_map(|a| a.iter_mut())
        .filter_map(obj_mut)
}

/// Rewrites a quantity in upstream's serialised form (bare numbers become
/// strings); unparseable values are left for validation.
pub fn canonicalize_quantity(v: &mut Value) {
    if let Ok(q) = Quantity::from_json(v) {
        *v = Value::String(q.to_string());
    }
}

/// `SetDefaults_ResourceList`: every quantity rounded up to the milli and
/// written in upstream's serialised form.
pub(crate) fn round_resource_list(list: Option<&mut Value>) {
    let Some(m) = list.and_then(obj_mut) else {
        return;
    };
    for v in m.values_mut() {
        if let Ok(mut q) = Quantity::from_json(v) {
            q.round_up(-3);
            *v = Value::String(q.to_string());
        }
    }
}

fn base64_encode(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
