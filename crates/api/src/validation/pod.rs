//! Pod, PodSpec and PodTemplateSpec validation (upstream's `ValidatePodCreate`,
//! `ValidatePodSpec`, `ValidatePodTemplateSpec`, `ValidatePodUpdate`).

use std::collections::{BTreeSet, HashSet};

use serde_json::{Map, Value};

use super::meta::{string_map, validate_annotations, validate_labels};
use super::{
    FieldError, inclusive_range_error, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    is_relaxed_env_var_name, is_valid_label_value, is_valid_port_name, is_valid_port_num,
    non_negative, opt_arr, opt_int, opt_obj, opt_str, semantic_eq,
};
use crate::quantity::Quantity;

const SUPPORTED_PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const TERMINATION_MESSAGE_POLICIES: &[&str] = &["File", "FallbackToLogsOnError"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];
const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";
/// Volume sources a volume may name (exactly one of them is set).
pub(crate) const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];
const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

/// Upstream's message for a forbidden pod spec change.
pub const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// A Pod on create or update (metadata is validated by the caller).
pub(super) fn validate_pod(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    if !spec.is_object() {
        if spec.is_null() {
            errs.push(FieldError::required("spec.containers", ""));
        } else {
            errs.push(FieldError::type_invalid("spec", spec, "object"));
        }
        return errs;
    }
    errs.extend(validate_pod_spec(spec, "spec"));
    match old {
        None => {
            if !super::jv::arr_at(spec, &["ephemeralContainers"]).is_empty() {
                errs.push(FieldError::forbidden(
                    "spec.ephemeralContainers",
                    "cannot be set on create",
                ));
            }
        }
        Some(old) => errs.extend(validate_pod_update(obj, old)),
    }
    errs
}

/// `pods/<name>/ephemeralcontainers` (upstream's ValidatePodEphemeralContainersUpdate):
/// the new ephemeral containers are checked with the rest of the spec, a target must
/// name one of the pod's containers, and existing ones may not be changed or removed.
pub fn validate_ephemeral_containers_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let spec = new.get("spec").unwrap_or(&Value::Null);
    let mut errs = validate_pod_spec(spec, "spec");
    let targets: HashSet<&str> = ["containers", "initContainers"]
        .iter()
        .flat_map(|f| super::jv::arr_at(spec, &[f]))
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    let new_ecs = super::jv::arr_at(spec, &["ephemeralContainers"]);
    for (i, ec) in new_ecs.iter().enumerate() {
        if let Some(t) = ec.get("targetContainerName").and_then(Value::as_str)
            && !t.is_empty()
            && !targets.contains(t)
        {
            errs.push(FieldError::not_found(
                format!("spec.ephemeralContainers[{i}].targetContainerName"),
                t,
            ));
        }
    }
    let old_spec = old.get("spec").unwrap_or(&Value::Null);
    for old_ec in super::jv::arr_at(old_spec, &["ephemeralContainers"]) {
        let name = old_ec.get("name").and_then(Value::as_str).unwrap_or("");
        let kept = new_ecs
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name));
        let verb = match kept {
            None => "removed",
            Some(c) if c != old_ec => "changed",
            Some(_) => continue,
        };
        errs.push(FieldError::forbidden(
            "spec.ephemeralContainers",
            format!("existing ephemeral containers \"{name}\" may not be {verb}\n"),
        ));
    }
    errs
}

/// A PodTemplate object: its `template` is a PodTemplateSpec.
pub(super) fn validate_pod_template(obj: &Value) -> Vec<FieldError> {
    match obj.get("template") {
        Some(t) if t.is_object() => validate_pod_template_spec(t, "template"),
        Some(t) if !t.is_null() => vec![FieldError::type_invalid("template", t, "object")],
        _ => validate_pod_template_spec(&Value::Object(Map::new()), "template"),
    }
}

/// `ValidatePodTemplateSpec`: template labels and annotations (at
/// `<path>.labels`, as upstream reports them) and the pod spec.
pub fn validate_pod_template_spec(tmpl: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = tmpl.get("metadata").unwrap_or(&Value::Null);
    errs.extend(validate_labels(
        meta.get("labels"),
        &format!("{path}.labels"),
    ));
    errs.extend(validate_annotations(
        meta.get("annotations"),
        &format!("{path}.annotations"),
    ));
    let spec_path = format!("{path}.spec");
    match tmpl.get("spec") {
        Some(s) if s.is_object() => {
            errs.extend(validate_pod_spec(s, &spec_path));
            if !super::jv::arr_at(s, &["ephemeralContainers"]).is_empty() {
                errs.push(FieldError::forbidden(
                    format!("{spec_path}.ephemeralContainers"),
                    "ephemeral containers not allowed in pod template",
                ));
            }
        }
        Some(s) if !s.is_null() => errs.push(FieldError::type_invalid(spec_path, s, "object")),
        _ => errs.extend(validate_pod_spec(&Value::Object(Map::new()), &spec_path)),
    }
    errs
}

/// `ValidatePodSpec` on a defaulted spec at `path`.
pub fn validate_pod_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(s) = spec.as_object() else {
        errs.push(FieldError::type_invalid(path, spec, "object"));
        return errs;
    };
    let volumes = validate_volumes(&mut errs, s.get("volumes"), &format!("{path}.volumes"));
    let restart_policy = opt_str(
        &mut errs,
        s.get("restartPolicy"),
        &format!("{path}.restartPolicy"),
    )
    .unwrap_or("");

    let containers_path = format!("{path}.containers");
    let containers = opt_arr(&mut errs, s.get("containers"), &containers_path);
    let init_path = format!("{path}.initContainers");
    let inits = opt_arr(&mut errs, s.get("initContainers"), &init_path);
    let mut names: HashSet<String> = HashSet::new();
    if containers.is_empty() {
        errs.push(FieldError::required(&containers_path, ""));
    }
    for (i, c) in containers.iter().enumerate() {
        let p = format!("{containers_path}[{i}]");
        let Some(c) = object(&mut errs, c, &p) else {
            continue;
        };
        validate_container_common(&mut errs, c, &volumes, &p);
        check_unique_name(&mut errs, c, &mut names, &p);
        validate_lifecycle_and_probes(&mut errs, c, &p, true);
        if c.get("restartPolicy").is_some_and(|v| !v.is_null()) {
            errs.push(FieldError::forbidden(
                format!("{p}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    for (i, c) in inits.iter().enumerate() {
        let p = format!("{init_path}[{i}]");
        let Some(c) = object(&mut errs, c, &p) else {
            continue;
        };
        validate_container_common(&mut errs, c, &volumes, &p);
        check_unique_name(&mut errs, c, &mut names, &p);
        let policy = opt_str(
            &mut errs,
            c.get("restartPolicy"),
            &format!("{p}.restartPolicy"),
        );
        match policy {
            None => validate_lifecycle_and_probes(&mut errs, c, &p, false),
            Some("Always") => validate_lifecycle_and_probes(&mut errs, c, &p, true),
            Some(other) => errs.push(FieldError::not_supported(
                format!("{p}.restartPolicy"),
                other,
                &["Always"],
            )),
        }
    }
    let eph_path = format!("{path}.ephemeralContainers");
    for (i, c) in opt_arr(&mut errs, s.get("ephemeralContainers"), &eph_path)
        .iter()
        .enumerate()
    {
        let p = format!("{eph_path}[{i}]");
        let Some(c) = object(&mut errs, c, &p) else {
            continue;
        };
        validate_container_common(&mut errs, c, &volumes, &p);
        check_unique_name(&mut errs, c, &mut names, &p);
        for forbidden in [
            "ports",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
            "lifecycle",
        ] {
            if c.get(forbidden)
                .is_some_and(|v| !v.is_null() && v != &Value::Array(vec![]))
            {
                errs.push(FieldError::forbidden(
                    format!("{p}.{forbidden}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
    }
    validate_host_ports(&mut errs, containers, inits, &containers_path, &init_path);
    super::security::validate_security(&mut errs, s, path);

    let host_network = s
        .get("hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if host_network {
        for (cs, cp) in [(containers, &containers_path), (inits, &init_path)] {
            for (i, c) in cs.iter().enumerate() {
                for (j, port) in super::jv::arr_at(c, &["ports"]).iter().enumerate() {
                    let host = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
                    let container = port
                        .get("containerPort")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    if host != container {
                        errs.push(FieldError::invalid(
                            format!("{cp}[{i}].ports[{j}].hostPort"),
                            host,
                            "must match `containerPort` when `hostNetwork` is true",
                        ));
                    }
                }
            }
        }
    }

    let rp_path = format!("{path}.restartPolicy");
    match restart_policy {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required(rp_path, "")),
        other => errs.push(FieldError::not_supported(rp_path, other, RESTART_POLICIES)),
    }
    let dns_path = format!("{path}.dnsPolicy");
    match opt_str(&mut errs, s.get("dnsPolicy"), &dns_path).unwrap_or("") {
        "" => errs.push(FieldError::required(dns_path, "")),
        p if DNS_POLICIES.contains(&p) => {}
        other => errs.push(FieldError::not_supported(dns_path, other, DNS_POLICIES)),
    }
    errs.extend(validate_labels(
        s.get("nodeSelector"),
        &format!("{path}.nodeSelector"),
    ));

    for (field, rule) in [
        (
            "serviceAccountName",
            is_dns1123_subdomain as fn(&str) -> Vec<String>,
        ),
        ("nodeName", is_dns1123_subdomain),
        ("hostname", is_dns1123_label),
        ("subdomain", is_dns1123_label),
        ("priorityClassName", is_dns1123_subdomain),
    ] {
        let p = format!("{path}.{field}");
        if let Some(v) = opt_str(&mut errs, s.get(field), &p)
            && !v.is_empty()
        {
            for msg in rule(v) {
                errs.push(FieldError::invalid(&p, v, msg));
            }
        }
    }
    let ads_path = format!("{path}.activeDeadlineSeconds");
    if let Some(v) = opt_int(&mut errs, s.get("activeDeadlineSeconds"), &ads_path)
        && !(1..=i32::MAX as i64).contains(&v)
    {
        errs.push(FieldError::invalid(
            ads_path,
            v,
            inclusive_range_error(1, i32::MAX as i64),
        ));
    }

    errs.extend(validate_tolerations(
        s.get("tolerations"),
        &format!("{path}.tolerations"),
    ));
    if let Some(pp) = opt_str(
        &mut errs,
        s.get("preemptionPolicy"),
        &format!("{path}.preemptionPolicy"),
    ) {
        let valid = ["Never", "PreemptLowerPriority"];
        if !valid.contains(&pp) {
            errs.push(FieldError::not_supported(
                format!("{path}.preemptionPolicy"),
                pp,
                &valid,
            ));
        }
    }
    if let Some(res) = opt_obj(&mut errs, s.get("resources"), &format!("{path}.resources")) {
        validate_resources(&mut errs, res, &format!("{path}.resources"));
    }
    errs
}

fn object<'a>(
    errs: &mut Vec<FieldError>,
    v: &'a Value,
    path: &str,
) -> Option<&'a Map<String, Value>> {
    let o = v.as_object();
    if o.is_none() {
        errs.push(FieldError::type_invalid(path, v, "object"));
    }
    o
}

fn check_unique_name(
    errs: &mut Vec<FieldError>,
    c: &Map<String, Value>,
    names: &mut HashSet<String>,
    p: &str,
) {
    let name = c.get("name").and_then(Value::as_str).unwrap_or("");
    if !names.insert(name.to_string()) {
        errs.push(FieldError::duplicate(format!("{p}.name"), name));
    }
}

/// `validateContainerCommon`: what every kind of container must satisfy.
fn validate_container_common(
    errs: &mut Vec<FieldError>,
    c: &Map<String, Value>,
    volumes: &BTreeSet<String>,
    p: &str,
) {
    let name_path = format!("{p}.name");
    let name = opt_str(errs, c.get("name"), &name_path).unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(&name_path, ""));
    } else {
        for msg in is_dns1123_label(name) {
            errs.push(FieldError::invalid(&name_path, name, msg));
        }
    }
    let image = opt_str(errs, c.get("image"), &format!("{p}.image")).unwrap_or("");
    if image.is_empty() {
        errs.push(FieldError::required(format!("{p}.image"), ""));
    } else if image.trim() != image {
        errs.push(FieldError::invalid(
            format!("{p}.image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    let tmp_path = format!("{p}.terminationMessagePolicy");
    match opt_str(errs, c.get("terminationMessagePolicy"), &tmp_path).unwrap_or("") {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(tmp_path, "")),
        other => errs.push(FieldError::not_supported(
            tmp_path,
            other,
            TERMINATION_MESSAGE_POLICIES,
        )),
    }
    validate_container_ports(errs, c.get("ports"), &format!("{p}.ports"));
    validate_env(errs, c.get("env"), &format!("{p}.env"));
    validate_volume_mounts(
        errs,
        c.get("volumeMounts"),
        volumes,
        &format!("{p}.volumeMounts"),
    );
    let pull_path = format!("{p}.imagePullPolicy");
    match opt_str(errs, c.get("imagePullPolicy"), &pull_path).unwrap_or("") {
        "" => errs.push(FieldError::required(pull_path, "")),
        v if PULL_POLICIES.contains(&v) => {}
        other => errs.push(FieldError::not_supported(pull_path, other, PULL_POLICIES)),
    }
    if let Some(res) = opt_obj(errs, c.get("resources"), &format!("{p}.resources")) {
        validate_resources(errs, res, &format!("{p}.resources"));
    }
}

fn validate_container_ports(errs: &mut Vec<FieldError>, ports: Option<&Value>, path: &str) {
    let mut names = HashSet::new();
    for (i, port) in opt_arr(errs, ports, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(port) = object(errs, port, &p) else {
            continue;
        };
        let name = opt_str(errs, port.get("name"), &format!("{p}.name")).unwrap_or("");
        if !name.is_empty() {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                for m in msgs {
                    errs.push(FieldError::invalid(format!("{p}.name"), name, m));
                }
            } else if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(format!("{p}.name"), name));
            }
        }
        let cp_path = format!("{p}.containerPort");
        match opt_int(errs, port.get("containerPort"), &cp_path).unwrap_or(0) {
            0 => errs.push(FieldError::required(cp_path, "")),
            n => {
                for m in is_valid_port_num(n) {
                    errs.push(FieldError::invalid(&cp_path, n, m));
                }
            }
        }
        let hp_path = format!("{p}.hostPort");
        let host_port = opt_int(errs, port.get("hostPort"), &hp_path).unwrap_or(0);
        if host_port != 0 {
            for m in is_valid_port_num(host_port) {
                errs.push(FieldError::invalid(&hp_path, host_port, m));
            }
        }
        validate_protocol(errs, port.get("protocol"), &format!("{p}.protocol"));
    }
}

pub(super) fn validate_protocol(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    match opt_str(errs, v, path).unwrap_or("") {
        "" => errs.push(FieldError::required(path, "")),
        p if SUPPORTED_PROTOCOLS.contains(&p) => {}
        other => errs.push(FieldError::not_supported(path, other, SUPPORTED_PROTOCOLS)),
    }
}

/// Host ports must be unique per (hostIP, protocol, port) across containers.
fn validate_host_ports(
    errs: &mut Vec<FieldError>,
    containers: &[Value],
    inits: &[Value],
    cp: &str,
    ip: &str,
) {
    let mut seen = HashSet::new();
    for (cs, path) in [(containers, cp), (inits, ip)] {
        for (i, c) in cs.iter().enumerate() {
            for (j, port) in super::jv::arr_at(c, &["ports"]).iter().enumerate() {
                let host_port = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
                if host_port == 0 {
                    continue;
                }
                let key = format!(
                    "{}/{}/{}",
                    port.get("hostIP").and_then(Value::as_str).unwrap_or(""),
                    port.get("protocol").and_then(Value::as_str).unwrap_or(""),
                    host_port
                );
                if !seen.insert(key.clone()) {
                    errs.push(FieldError::duplicate(
                        format!("{path}[{i}].ports[{j}].hostPort"),
                        key,
                    ));
                }
            }
        }
    }
}

fn validate_env(errs: &mut Vec<FieldError>, env: Option<&Value>, path: &str) {
    for (i, e) in opt_arr(errs, env, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(e) = object(errs, e, &p) else {
            continue;
        };
        let name = opt_str(errs, e.get("name"), &format!("{p}.name")).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            for m in is_relaxed_env_var_name(name) {
                errs.push(FieldError::invalid(format!("{p}.name"), name, m));
            }
        }
        let value = e.get("value").and_then(Value::as_str).unwrap_or("");
        if let Some(from) = opt_obj(errs, e.get("valueFrom"), &format!("{p}.valueFrom")) {
            let sources = [
                "fieldRef",
                "resourceFieldRef",
                "configMapKeyRef",
                "secretKeyRef",
                "fileKeyRef",
            ];
            let set: Vec<&str> = sources
                .iter()
                .copied()
                .filter(|k| from.get(*k).is_some_and(|v| !v.is_null()))
                .collect();
            if set.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{p}.valueFrom"),
                    "",
                    "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
                ));
            } else if set.len() > 1 {
                errs.push(FieldError::invalid(
                    format!("{p}.valueFrom"),
                    "",
                    "may not have more than one field specified at a time",
                ));
            }
            if !value.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{p}.valueFrom"),
                    "",
                    "may not be specified when `value` is not empty",
                ));
            }
        }
    }
}

/// Volumes: unique DNS-1123 label names and exactly one source each.
/// Returns the set of valid names for mount checks.
fn validate_volumes(
    errs: &mut Vec<FieldError>,
    volumes: Option<&Value>,
    path: &str,
) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, v) in opt_arr(errs, volumes, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(v) = object(errs, v, &p) else {
            continue;
        };
        let sources: Vec<&str> = VOLUME_SOURCES
            .iter()
            .copied()
            .filter(|k| v.get(*k).is_some_and(|x| !x.is_null()))
            .collect();
        match sources.as_slice() {
            [] => errs.push(FieldError::required(&p, "must specify a volume type")),
            [one] => validate_volume_source(
                errs,
                one,
                v.get(*one).unwrap_or(&Value::Null),
                &format!("{p}.{one}"),
            ),
            [_, rest @ ..] => {
                for extra in rest {
                    errs.push(FieldError::forbidden(
                        format!("{p}.{extra}"),
                        "may not specify more than 1 volume type",
                    ));
                }
            }
        }
        let name_path = format!("{p}.name");
        let name = opt_str(errs, v.get("name"), &name_path).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(&name_path, ""));
        } else {
            for m in is_dns1123_label(name) {
                errs.push(FieldError::invalid(&name_path, name, m));
            }
        }
        if !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(name_path, name));
        }
    }
    names
}

fn validate_volume_source(errs: &mut Vec<FieldError>, kind: &str, src: &Value, p: &str) {
    let Some(o) = src.as_object() else {
        errs.push(FieldError::type_invalid(p, src, "object"));
        return;
    };
    let required = |errs: &mut Vec<FieldError>, field: &str| {
        if o.get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            errs.push(FieldError::required(format!("{p}.{field}"), ""));
        }
    };
    let mode = |errs: &mut Vec<FieldError>, field: &str| {
        let fp = format!("{p}.{field}");
        if let Some(m) = opt_int(errs, o.get(field), &fp)
            && !(0..=0o777).contains(&m)
        {
            errs.push(FieldError::invalid(fp, m, FILE_MODE_ERROR));
        }
    };
    match kind {
        "configMap" => {
            required(errs, "name");
            mode(errs, "defaultMode");
        }
        "secret" => {
            required(errs, "secretName");
            mode(errs, "defaultMode");
        }
        "downwardAPI" | "projected" => mode(errs, "defaultMode"),
        "persistentVolumeClaim" => required(errs, "claimName"),
        "hostPath" => {
            required(errs, "path");
            let tp = format!("{p}.type");
            if let Some(t) = opt_str(errs, o.get("type"), &tp)
                && !HOST_PATH_TYPES.contains(&t)
            {
                errs.push(FieldError::not_supported(tp, t, HOST_PATH_TYPES));
            }
        }
        "nfs" => {
            required(errs, "server");
            required(errs, "path");
        }
        "emptyDir" => {
            let mp = format!("{p}.medium");
            if let Some(m) = opt_str(errs, o.get("medium"), &mp)
                && !matches!(m, "" | "Memory" | "HugePages")
                && !m.starts_with("HugePages-")
            {
                errs.push(FieldError::not_supported(
                    mp,
                    m,
                    &["", "Memory", "HugePages"],
                ));
            }
            if let Some(q) = o.get("sizeLimit").filter(|v| !v.is_null()) {
                quantity(errs, q, &format!("{p}.sizeLimit"));
            }
        }
        _ => {}
    }
}

fn validate_volume_mounts(
    errs: &mut Vec<FieldError>,
    mounts: Option<&Value>,
    volumes: &BTreeSet<String>,
    path: &str,
) {
    let mut paths = HashSet::new();
    for (i, m) in opt_arr(errs, mounts, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(m) = object(errs, m, &p) else {
            continue;
        };
        let name = opt_str(errs, m.get("name"), &format!("{p}.name")).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(format!("{p}.name"), ""));
        }
        if !volumes.contains(name) {
            errs.push(FieldError::not_found(format!("{p}.name"), name));
        }
        let mount_path = opt_str(errs, m.get("mountPath"), &format!("{p}.mountPath")).unwrap_or("");
        if mount_path.is_empty() {
            errs.push(FieldError::required(format!("{p}.mountPath"), ""));
        } else if !paths.insert(mount_path.to_string()) {
            errs.push(FieldError::invalid(
                format!("{p}.mountPath"),
                mount_path,
                "must be unique",
            ));
        }
        let sub_path = opt_str(errs, m.get("subPath"), &format!("{p}.subPath")).unwrap_or("");
        let sub_path_expr =
            opt_str(errs, m.get("subPathExpr"), &format!("{p}.subPathExpr")).unwrap_or("");
        if !sub_path.is_empty() && !sub_path_expr.is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.subPathExpr"),
                sub_path_expr,
                "subPathExpr and subPath are mutually exclusive",
            ));
        }
        for (field, value) in [("subPath", sub_path), ("subPathExpr", sub_path_expr)] {
            if value.is_empty() {
                continue;
            }
            if value.starts_with('/') {
                errs.push(FieldError::invalid(
                    format!("{p}.{field}"),
                    value,
                    "must be a relative path",
                ));
            }
            if value.split('/').any(|part| part == "..") {
                errs.push(FieldError::invalid(
                    format!("{p}.{field}"),
                    value,
                    "must not contain '..'",
                ));
            }
        }
    }
}

/// Parses a quantity, reporting upstream's parse message at `path`.
fn quantity(errs: &mut Vec<FieldError>, v: &Value, path: &str) -> Option<Quantity> {
    match Quantity::from_json(v) {
        Ok(q) => Some(q),
        Err(e) => {
            errs.push(FieldError::invalid(path, v.clone(), e.to_string()));
            None
        }
    }
}

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn is_huge_pages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// Native, non-hugepage resources may be requested below their limit.
fn overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !is_huge_pages(name)
}

/// `validateContainerResourceName`.
pub(super) fn validate_container_resource_name(errs: &mut Vec<FieldError>, name: &str, path: &str) {
    for m in is_qualified_name(name) {
        errs.push(FieldError::invalid(path, name, m));
    }
    if !name.contains('/') {
        let standard =
            matches!(name, "cpu" | "memory" | "ephemeral-storage") || is_huge_pages(name);
        if !standard {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native_resource(name) {
        let extended = !name.starts_with("requests.")
            && is_qualified_name(&format!("requests.{name}")).is_empty();
        if !extended {
            errs.push(FieldError::invalid(
                path,
                name,
                "doesn't follow extended resource name standard",
            ));
        }
    }
}

/// `ValidateResourceRequirements`: names, non-negative values, requests ≤
/// limits (and = for resources that cannot be overcommitted).
fn validate_resources(errs: &mut Vec<FieldError>, res: &Map<String, Value>, path: &str) {
    let lim_path = format!("{path}.limits");
    let req_path = format!("{path}.requests");
    let mut limits = Vec::new();
    if let Some(lims) = opt_obj(errs, res.get("limits"), &lim_path) {
        for (name, v) in lims {
            let p = format!("{lim_path}[{name}]");
            validate_container_resource_name(errs, name, &p);
            if let Some(q) = quantity(errs, v, &p) {
                resource_value(errs, name, &q, &p);
                limits.push((name.as_str(), q));
            }
        }
    }
    if let Some(reqs) = opt_obj(errs, res.get("requests"), &req_path) {
        for (name, v) in reqs {
            let p = format!("{req_path}[{name}]");
            validate_container_resource_name(errs, name, &p);
            let Some(q) = quantity(errs, v, &p) else {
                continue;
            };
            resource_value(errs, name, &q, &p);
            match limits.iter().find(|(n, _)| *n == name) {
                Some((_, lim)) if q != *lim && !overcommit_allowed(name) => {
                    errs.push(FieldError::invalid(
                        &req_path,
                        q.to_string(),
                        format!("must be equal to {name} limit of {lim}"),
                    ))
                }
                Some((_, lim)) if q > *lim => errs.push(FieldError::invalid(
                    &req_path,
                    q.to_string(),
                    format!("must be less than or equal to {name} limit of {lim}"),
                )),
                Some(_) => {}
                None if !overcommit_allowed(name) => errs.push(FieldError::required(
                    &lim_path,
                    "Limit must be set for non overcommitable resources",
                )),
                None => {}
            }
        }
    }
}

fn resource_value(errs: &mut Vec<FieldError>, name: &str, q: &Quantity, path: &str) {
    if q.sign() < 0 {
        errs.push(FieldError::invalid(path, q.to_string(), super::IS_NEGATIVE));
    }
    // Extended resources are counted in whole units.
    if !is_native_resource(name) && q.milli_value() % 1000 != 0 {
        errs.push(FieldError::invalid(
            path,
            q.to_string(),
            "must be an integer",
        ));
    }
}

/// Probes and lifecycle hooks: allowed on regular and sidecar containers,
/// forbidden on plain init containers.
fn validate_lifecycle_and_probes(
    errs: &mut Vec<FieldError>,
    c: &Map<String, Value>,
    p: &str,
    allowed: bool,
) {
    for field in [
        "lifecycle",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
    ] {
        let fp = format!("{p}.{field}");
        let Some(v) = opt_obj(errs, c.get(field), &fp) else {
            continue;
        };
        if !allowed {
            errs.push(FieldError::forbidden(
                fp,
                "may not be set for init containers without restartPolicy=Always",
            ));
            continue;
        }
        if field == "lifecycle" {
            for hook in ["postStart", "preStop"] {
                let hp = format!("{fp}.{hook}");
                if let Some(h) = opt_obj(errs, v.get(hook), &hp) {
                    validate_handler(errs, h, &["exec", "httpGet", "tcpSocket", "sleep"], &hp);
                }
            }
            continue;
        }
        validate_handler(errs, v, &["exec", "httpGet", "tcpSocket", "grpc"], &fp);
        for n in [
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ] {
            non_negative(errs, v.get(n), &format!("{fp}.{n}"));
        }
        let tg_path = format!("{fp}.terminationGracePeriodSeconds");
        if let Some(tg) = opt_int(errs, v.get("terminationGracePeriodSeconds"), &tg_path)
            && tg <= 0
        {
            errs.push(FieldError::invalid(tg_path, tg, "must be greater than 0"));
        }
        if field != "readinessProbe"
            && let Some(st) = v.get("successThreshold").and_then(Value::as_i64)
            && st != 1
        {
            errs.push(FieldError::invalid(
                format!("{fp}.successThreshold"),
                st,
                "must be 1",
            ));
        }
    }
}

/// Exactly one handler of the allowed kinds, each well-formed.
fn validate_handler(errs: &mut Vec<FieldError>, h: &Map<String, Value>, kinds: &[&str], p: &str) {
    let mut count = 0;
    for kind in kinds {
        let Some(action) = h.get(*kind).filter(|v| !v.is_null()) else {
            continue;
        };
        let ap = format!("{p}.{kind}");
        if count > 0 {
            errs.push(FieldError::forbidden(
                ap,
                "may not specify more than 1 handler type",
            ));
            continue;
        }
        count += 1;
        let Some(a) = object(errs, action, &ap) else {
            continue;
        };
        match *kind {
            "exec" if super::jv::arr_at(action, &["command"]).is_empty() => {
                errs.push(FieldError::required(format!("{ap}.command"), ""));
            }
            "httpGet" => {
                if a.get("path")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    errs.push(FieldError::required(format!("{ap}.path"), ""));
                }
                validate_port_num_or_name(errs, a.get("port"), &format!("{ap}.port"));
                let scheme = a.get("scheme").and_then(Value::as_str).unwrap_or("");
                if !matches!(scheme, "HTTP" | "HTTPS") {
                    errs.push(FieldError::not_supported(
                        format!("{ap}.scheme"),
                        scheme,
                        &["HTTP", "HTTPS"],
                    ));
                }
            }
            "tcpSocket" => validate_port_num_or_name(errs, a.get("port"), &format!("{ap}.port")),
            "grpc" => {
                let port = a.get("port").and_then(Value::as_i64).unwrap_or(0);
                for m in is_valid_port_num(port) {
                    errs.push(FieldError::invalid(format!("{ap}.port"), port, m));
                }
            }
            "sleep" => {
                let secs = a.get("seconds").and_then(Value::as_i64).unwrap_or(0);
                if secs < 0 {
                    errs.push(FieldError::invalid(
                        format!("{ap}.seconds"),
                        secs,
                        "must be non-negative",
                    ));
                }
            }
            _ => {}
        }
    }
    if count == 0 {
        errs.push(FieldError::required(p, "must specify a handler type"));
    }
}

/// `ValidatePortNumOrName` for an IntOrString port.
pub(super) fn validate_port_num_or_name(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    match v {
        Some(Value::Number(n)) => {
            let port = n.as_i64().unwrap_or(0);
            for m in is_valid_port_num(port) {
                errs.push(FieldError::invalid(path, port, m));
            }
        }
        Some(Value::String(s)) => {
            for m in is_valid_port_name(s) {
                errs.push(FieldError::invalid(path, s.as_str(), m));
            }
        }
        None | Some(Value::Null) => {
            for m in is_valid_port_num(0) {
                errs.push(FieldError::invalid(path, 0, m));
            }
        }
        Some(other) => errs.push(FieldError::type_invalid(path, other, "integer or string")),
    }
}

/// `ValidateTolerations`.
pub(super) fn validate_tolerations(tolerations: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in opt_arr(&mut errs, tolerations, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(t) = object(&mut errs, t, &p) else {
            continue;
        };
        let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
        let (key, op, value, effect) = (s("key"), s("operator"), s("value"), s("effect"));
        if !key.is_empty() {
            for m in is_qualified_name(key) {
                errs.push(FieldError::invalid(format!("{p}.key"), key, m));
            }
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                format!("{p}.operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.get("tolerationSeconds").is_some_and(|v| !v.is_null()) && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                format!("{p}.effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = is_valid_label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{p}.operator"),
                        value,
                        msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{p}.operator"),
                        Value::Object(t.clone()),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                format!("{p}.operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
            errs.push(FieldError::not_supported(
                format!("{p}.effect"),
                effect,
                TAINT_EFFECTS,
            ));
        }
    }
    errs
}

/// `ValidatePodUpdate`: only images, activeDeadlineSeconds (downwards),
/// added tolerations, removed scheduling gates (and a once-negative grace
/// period set to 1) may change.
fn validate_pod_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (Some(new_spec), Some(old_spec)) = (
        new.get("spec").and_then(Value::as_object),
        old.get("spec").and_then(Value::as_object),
    ) else {
        return errs;
    };
    for field in ["containers", "initContainers"] {
        let n = new_spec
            .get(field)
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let o = old_spec
            .get(field)
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if n != o {
            errs.push(FieldError::forbidden(
                format!("spec.{field}"),
                "pod updates may not add or remove containers",
            ));
            return errs;
        }
    }

    let new_ads = new_spec
        .get("activeDeadlineSeconds")
        .and_then(Value::as_i64);
    let old_ads = old_spec
        .get("activeDeadlineSeconds")
        .and_then(Value::as_i64);
    match (new_ads, old_ads) {
        (Some(n), _) if !(0..=i32::MAX as i64).contains(&n) => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                n,
                inclusive_range_error(0, i32::MAX as i64),
            ));
            return errs;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                n,
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        (None, Some(_)) => errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }

    // Build the spec as it would be with only the permitted changes undone.
    let mut munged = new_spec.clone();
    for field in ["containers", "initContainers"] {
        let old_list = old_spec.get(field).and_then(Value::as_array);
        if let (Some(Value::Array(list)), Some(old_list)) = (munged.get_mut(field), old_list) {
            for (c, oc) in list.iter_mut().zip(old_list) {
                if let (Some(c), Some(img)) = (c.as_object_mut(), oc.get("image")) {
                    c.insert("image".into(), img.clone());
                }
            }
        }
    }
    let restore = |m: &mut Map<String, Value>, field: &str| match old_spec.get(field) {
        Some(v) => {
            m.insert(field.into(), v.clone());
        }
        None => {
            m.remove(field);
        }
    };
    restore(&mut munged, "activeDeadlineSeconds");

    errs.extend(validate_only_added_tolerations(
        new_spec.get("tolerations"),
        old_spec.get("tolerations"),
    ));
    restore(&mut munged, "tolerations");

    let gates = |s: &Map<String, Value>| -> Vec<String> {
        s.get("schedulingGates")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|g| g.get("name").and_then(Value::as_str).map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let old_gates = gates(old_spec);
    for g in gates(new_spec) {
        if !old_gates.contains(&g) {
            errs.push(FieldError::forbidden(
                "spec.schedulingGates",
                format!("only deletion is allowed, but found new scheduling gate '{g}'"),
            ));
        }
    }
    restore(&mut munged, "schedulingGates");
    if !old_gates.is_empty() && node_selector_only_added(new_spec, old_spec) {
        // Gated pods may gain node selector terms before scheduling.
        restore(&mut munged, "nodeSelector");
    }

    let old_grace = old_spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    let new_grace = munged
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    if old_grace.is_some_and(|g| g < 0) && new_grace == Some(1) {
        restore(&mut munged, "terminationGracePeriodSeconds");
    }

    let munged = Value::Object(munged);
    let old_value = Value::Object(old_spec.clone());
    if !semantic_eq(&munged, &old_value) {
        let mut diff = Vec::new();
        json_diff(&old_value, &munged, "spec", &mut diff);
        errs.push(FieldError::forbidden(
            "spec",
            format!("{POD_UPDATE_FORBIDDEN}\n{}", diff.join("\n")),
        ));
    }
    errs
}

fn node_selector_only_added(new: &Map<String, Value>, old: &Map<String, Value>) -> bool {
    let mut scratch = Vec::new();
    let n = string_map(&mut scratch, new.get("nodeSelector"), "");
    let o = string_map(&mut scratch, old.get("nodeSelector"), "");
    o.iter().all(|kv| n.contains(kv))
}

fn validate_only_added_tolerations(new: Option<&Value>, old: Option<&Value>) -> Vec<FieldError> {
    let strip = |t: &Value| -> Value {
        let mut t = t.clone();
        if let Some(o) = t.as_object_mut() {
            o.remove("tolerationSeconds");
        }
        t
    };
    let new_list: Vec<Value> = new
        .and_then(Value::as_array)
        .map(|a| a.iter().map(strip).collect())
        .unwrap_or_default();
    for o in old
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        let o = strip(o);
        if !new_list.iter().any(|n| semantic_eq(n, &o)) {
            return vec![FieldError::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            )];
        }
    }
    Vec::new()
}

/// A readable list of differences, standing in for upstream's `cmp.Diff`.
pub(super) fn json_diff(old: &Value, new: &Value, path: &str, out: &mut Vec<String>) {
    if semantic_eq(old, new) {
        return;
    }
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                json_diff(
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                    &format!("{path}.{k}"),
                    out,
                );
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                json_diff(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ => {
            out.push(format!("- {path}: {old}"));
            out.push(format!("+ {path}: {new}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A defaulted, valid pod spec.
    fn spec() -> Value {
        json!({
            "containers": [{
                "name": "app",
                "image": "nginx:1.27",
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]
            }],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30,
            "securityContext": {}
        })
    }

    fn with(mut base: Value, ptr: &str, v: Value) -> Value {
        if let Some(slot) = base.pointer_mut(ptr) {
            *slot = v;
        } else if let Some((parent, key)) = ptr.rsplit_once('/')
            && let Some(Value::Object(m)) = base.pointer_mut(parent)
        {
            m.insert(key.to_string(), v);
        }
        base
    }

    fn check(spec: &Value) -> Vec<String> {
        validate_pod_spec(spec, "spec")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn valid_spec_passes() {
        assert_eq!(check(&spec()), Vec::<String>::new());
    }

    #[test]
    fn pod_spec_table() {
        let label_msg = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
        let cases: Vec<(&str, Value, Vec<String>)> = vec![
            ("no containers", with(spec(), "/containers", json!([])), vec!["spec.containers: Required value".into()]),
            (
                "bad container name",
                with(spec(), "/containers/0/name", json!("App")),
                vec![format!("spec.containers[0].name: Invalid value: \"App\": {label_msg}")],
            ),
            ("no image", with(spec(), "/containers/0/image", json!("")), vec!["spec.containers[0].image: Required value".into()]),
            (
                "duplicate names",
                with(spec(), "/initContainers", json!([{"name": "app", "image": "busybox", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}])),
                vec!["spec.initContainers[0].name: Duplicate value: \"app\"".into()],
            ),
            (
                "port range",
                with(spec(), "/containers/0/ports/0/containerPort", json!(70000)),
                vec!["spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive".into()],
            ),
            (
                "port protocol",
                with(spec(), "/containers/0/ports/0/protocol", json!("HTTP")),
                vec!["spec.containers[0].ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"".into()],
            ),
            (
                "restart policy",
                with(spec(), "/restartPolicy", json!("Sometimes")),
                vec!["spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"".into()],
            ),
            (
                "dns policy",
                with(spec(), "/dnsPolicy", json!("Bogus")),
                vec!["spec.dnsPolicy: Unsupported value: \"Bogus\": supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\"".into()],
            ),
            (
                "requests above limits",
                with(spec(), "/containers/0/resources", json!({"limits": {"cpu": "1"}, "requests": {"cpu": "2"}})),
                vec!["spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1".into()],
            ),
            (
                "bad quantity",
                with(spec(), "/containers/0/resources", json!({"limits": {"memory": "1Gx"}})),
                vec!["spec.containers[0].resources.limits[memory]: Invalid value: \"1Gx\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into()],
            ),
            (
                "negative quantity",
                with(spec(), "/containers/0/resources", json!({"requests": {"memory": "-1"}})),
                vec!["spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0".into()],
            ),
            (
                "unknown resource",
                with(spec(), "/containers/0/resources", json!({"requests": {"gpu": "1"}})),
                vec!["spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource for containers".into()],
            ),
            (
                "extended resource must equal limit",
                with(spec(), "/containers/0/resources", json!({"requests": {"example.com/gpu": "1"}})),
                vec!["spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources".into()],
            ),
            (
                "probe without handler and negative period",
                with(spec(), "/containers/0/livenessProbe", json!({"periodSeconds": -1, "successThreshold": 1})),
                vec![
                    "spec.containers[0].livenessProbe: Required value: must specify a handler type".into(),
                    "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0".into(),
                ],
            ),
            (
                "liveness success threshold",
                with(spec(), "/containers/0/livenessProbe", json!({"tcpSocket": {"port": 80}, "successThreshold": 2})),
                vec!["spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1".into()],
            ),
            (
                "probe with two handlers",
                with(spec(), "/containers/0/readinessProbe", json!({"exec": {"command": ["true"]}, "httpGet": {"path": "/", "port": "http", "scheme": "HTTP"}})),
                vec!["spec.containers[0].readinessProbe.httpGet: Forbidden: may not specify more than 1 handler type".into()],
            ),
            (
                "unknown volume mount",
                with(spec(), "/containers/0/volumeMounts/0/name", json!("other")),
                vec!["spec.containers[0].volumeMounts[0].name: Not found: \"other\"".into()],
            ),
            (
                "volume without source",
                with(spec(), "/volumes/0", json!({"name": "data"})),
                vec!["spec.volumes[0]: Required value: must specify a volume type".into()],
            ),
            (
                "init container probe forbidden",
                with(spec(), "/initContainers", json!([{"name": "init", "image": "busybox", "imagePullPolicy": "Always", "terminationMessagePolicy": "File", "readinessProbe": {"exec": {"command": ["x"]}}}])),
                vec!["spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always".into()],
            ),
            (
                "toleration exists with value",
                with(spec(), "/tolerations", json!([{"key": "k", "operator": "Exists", "value": "v"}])),
                vec!["spec.tolerations[0].operator: Invalid value: {\"key\":\"k\",\"operator\":\"Exists\",\"value\":\"v\"}: value must be empty when `operator` is 'Exists'".into()],
            ),
            (
                "active deadline",
                with(spec(), "/activeDeadlineSeconds", json!(0)),
                vec!["spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive".into()],
            ),
            (
                "host network ports",
                with(with(spec(), "/hostNetwork", json!(true)), "/containers/0/ports/0/hostPort", json!(8080)),
                vec!["spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true".into()],
            ),
        ];
        for (name, s, want) in cases {
            assert_eq!(check(&s), want, "{name}");
        }
    }

    #[test]
    fn template_spec_reports_template_paths() {
        let tmpl = json!({"metadata": {"labels": {"app": "-x"}}, "spec": with(spec(), "/ephemeralContainers", json!([{"name": "dbg", "image": "busybox", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}]))});
        let got: Vec<String> = validate_pod_template_spec(&tmpl, "spec.template")
            .iter()
            .map(|e| e.field.clone())
            .collect();
        assert_eq!(
            got,
            vec![
                "spec.template.labels",
                "spec.template.spec.ephemeralContainers"
            ]
        );
    }

    #[test]
    fn pod_update_rules() {
        let old = json!({"metadata": {"name": "p"}, "spec": with(spec(), "/activeDeadlineSeconds", json!(100))});
        // Image, a lower deadline and an added toleration are allowed.
        let ok = with(
            with(
                with(old.clone(), "/spec/containers/0/image", json!("nginx:1.28")),
                "/spec/activeDeadlineSeconds",
                json!(50),
            ),
            "/spec/tolerations",
            json!([{"key": "k", "operator": "Exists"}]),
        );
        assert_eq!(validate_pod_update(&ok, &old), vec![]);

        let higher = with(old.clone(), "/spec/activeDeadlineSeconds", json!(200));
        assert_eq!(
            validate_pod_update(&higher, &old)[0].to_string(),
            "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"
        );

        let changed = with(old.clone(), "/spec/restartPolicy", json!("Never"));
        let errs = validate_pod_update(&changed, &old);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec");
        assert!(errs[0].detail.starts_with(POD_UPDATE_FORBIDDEN));
        assert!(
            errs[0]
                .detail
                .contains("- spec.restartPolicy: \"Always\"\n+ spec.restartPolicy: \"Never\"")
        );

        let added = with(old.clone(), "/spec/containers/1", json!({}));
        let mut two = old.clone();
        if let Some(Value::Array(cs)) = two.pointer_mut("/spec/containers") {
            cs.push(json!({"name": "b", "image": "x"}));
        }
        let _ = added;
        assert_eq!(
            validate_pod_update(&two, &old)[0].to_string(),
            "spec.containers: Forbidden: pod updates may not add or remove containers"
        );

        let with_tol = with(
            old.clone(),
            "/spec/tolerations",
            json!([{"key": "k", "operator": "Equal", "value": "a"}]),
        );
        let modified = with(
            old.clone(),
            "/spec/tolerations",
            json!([{"key": "k", "operator": "Equal", "value": "b"}]),
        );
        assert_eq!(
            validate_pod_update(&modified, &with_tol)[0].to_string(),
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
        );
    }

    #[test]
    fn pod_create_forbids_ephemeral_containers() {
        let pod = json!({"spec": with(spec(), "/ephemeralContainers", json!([{"name": "dbg", "image": "busybox", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}]))});
        let errs: Vec<String> = validate_pod(&pod, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec!["spec.ephemeralContainers: Forbidden: cannot be set on create"]
        );
    }

    #[test]
    fn ephemeral_containers_update() {
        let ec = |name: &str, image: &str, target: Option<&str>| {
            let mut c = json!({"name": name, "image": image, "imagePullPolicy": "Always", "terminationMessagePolicy": "File"});
            if let Some(t) = target {
                c["targetContainerName"] = json!(t);
            }
            c
        };
        let pod =
            |ecs: Vec<Value>| json!({"spec": with(spec(), "/ephemeralContainers", json!(ecs))});
        let old = pod(vec![ec("dbg", "busybox", None)]);
        let app = spec()["containers"][0]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let cases: Vec<(&str, Value, Vec<String>)> = vec![
            ("add one", pod(vec![ec("dbg", "busybox", None), ec("dbg2", "busybox", Some(&app))]), vec![]),
            (
                "unknown target",
                pod(vec![ec("dbg", "busybox", None), ec("dbg2", "busybox", Some("nope"))]),
                vec!["spec.ephemeralContainers[1].targetContainerName: Not found: \"nope\"".into()],
            ),
            (
                "removed",
                pod(vec![]),
                vec!["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be removed\n".into()],
            ),
            (
                "changed",
                pod(vec![ec("dbg", "busybox:2", None)]),
                vec!["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be changed\n".into()],
            ),
            (
                "name taken by a container",
                pod(vec![ec("dbg", "busybox", None), ec(&app, "busybox", None)]),
                vec![format!("spec.ephemeralContainers[1].name: Duplicate value: \"{app}\"")],
            ),
        ];
        for (what, new, want) in cases {
            let got: Vec<String> = validate_ephemeral_containers_update(&new, &old)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(got, want, "{what}");
        }
    }
}
