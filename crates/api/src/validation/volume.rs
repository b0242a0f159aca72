//! PersistentVolume and PersistentVolumeClaim validation, as upstream's
//! `ValidatePersistentVolume*` and `ValidatePersistentVolumeClaim*` in
//! `pkg/apis/core/validation`, plus the pieces storage.k8s.io shares with them
//! (`ValidateCSIDriverName`, `ValidateNodeSelector`, topology terms).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::pod::json_diff;
use super::{
    FIELD_IMMUTABLE, FieldError, immutable, is_dns1123_label, is_dns1123_subdomain,
    is_qualified_name, is_valid_label_value, jv, opt_arr, opt_obj, opt_str, semantic_eq,
    validate_label_selector,
};
use crate::quantity::Quantity;

/// `supportedAccessModes`, sorted as upstream's `sets.List`.
pub(super) const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];
/// Upstream also accepts `Recycle` (only for hostPath and NFS, and deprecated);
/// Berth has no recycler, so a Recycle volume would never be reclaimed.
const RECLAIM_POLICIES: &[&str] = &["Delete", "Retain"];
const NO_RECYCLER: &str =
    "Berth has no volume recycler (Recycle is deprecated upstream): use Delete or Retain";
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
/// `PersistentVolumeSource`'s members in the order upstream checks them: the
/// first one found is the volume's type, every later one is refused.
const PV_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cinder",
    "cephfs",
    "iscsi",
    "fc",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];
const INLINE_FORBIDDEN: &str = "may not be specified in the context of inline volumes";
const NOT_POSITIVE: &str = "must be greater than zero";
const CSI_DRIVER_NAME_MAX: usize = 63;
pub(super) const PVC_SPEC_IMMUTABLE: &str = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";
use crate::storage::ANN_BETA_STORAGE_CLASS as BETA_CLASS_ANNOTATION;

fn present<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

fn str_of<'a>(o: &'a Map<String, Value>, key: &str) -> &'a str {
    o.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `ValidateCSIDriverName`: required, at most 63 characters, a DNS subdomain
/// once lower-cased.
pub(super) fn validate_csi_driver_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if name.len() > CSI_DRIVER_NAME_MAX {
        errs.push(FieldError::too_long(path, CSI_DRIVER_NAME_MAX));
    }
    for msg in is_dns1123_subdomain(&name.to_lowercase()) {
        errs.push(FieldError::invalid(path, name, msg));
    }
    errs
}

/// `ValidateLabelName`: a qualified name, reported at `path`.
pub(super) fn validate_label_name(key: &str, path: &str) -> Vec<FieldError> {
    is_qualified_name(key)
        .into_iter()
        .map(|msg| FieldError::invalid(path, key, msg))
        .collect()
}

/// `ValidateNodeSelector` (a required node affinity's terms).
pub(super) fn validate_node_selector(sel: &Map<String, Value>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let terms_path = format!("{path}.nodeSelectorTerms");
    let terms = opt_arr(&mut errs, sel.get("nodeSelectorTerms"), &terms_path);
    if terms.is_empty() && errs.is_empty() {
        errs.push(FieldError::required(
            terms_path,
            "must have at least one node selector term",
        ));
        return errs;
    }
    for (i, term) in terms.iter().enumerate() {
        let tp = format!("{terms_path}[{i}]");
        let Some(term) = opt_obj(&mut errs, Some(term), &tp) else {
            continue;
        };
        let exprs_path = format!("{tp}.matchExpressions");
        for (j, req) in opt_arr(&mut errs, term.get("matchExpressions"), &exprs_path)
            .iter()
            .enumerate()
        {
            let rp = format!("{exprs_path}[{j}]");
            if let Some(req) = opt_obj(&mut errs, Some(req), &rp) {
                errs.extend(validate_node_selector_requirement(req, &rp));
            }
        }
        let fields_path = format!("{tp}.matchFields");
        for (j, req) in opt_arr(&mut errs, term.get("matchFields"), &fields_path)
            .iter()
            .enumerate()
        {
            let rp = format!("{fields_path}[{j}]");
            if let Some(req) = opt_obj(&mut errs, Some(req), &rp) {
                errs.extend(validate_node_field_selector_requirement(req, &rp));
            }
        }
    }
    errs
}

fn string_values<'a>(
    errs: &mut Vec<FieldError>,
    req: &'a Map<String, Value>,
    path: &str,
) -> Vec<&'a str> {
    opt_arr(errs, req.get("values"), path)
        .iter()
        .map(|v| v.as_str().unwrap_or(""))
        .collect()
}

/// `ValidateNodeSelectorRequirement`.
fn validate_node_selector_requirement(req: &Map<String, Value>, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let vp = format!("{p}.values");
    let values = string_values(&mut errs, req, &vp);
    let op = str_of(req, "operator");
    match op {
        "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
            &vp,
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
            &vp,
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 => errs.push(FieldError::required(
            &vp,
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        _ => errs.push(FieldError::invalid(
            format!("{p}.operator"),
            op,
            "not a valid selector operator",
        )),
    }
    errs.extend(validate_label_name(str_of(req, "key"), &format!("{p}.key")));
    for (i, v) in values.iter().enumerate() {
        for msg in is_valid_label_value(v) {
            errs.push(FieldError::invalid(format!("{vp}[{i}]"), *v, msg));
        }
    }
    errs
}

/// `ValidateNodeFieldSelectorRequirement`: only `metadata.name`, In/NotIn one value.
fn validate_node_field_selector_requirement(req: &Map<String, Value>, p: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let vp = format!("{p}.values");
    let values = string_values(&mut errs, req, &vp);
    let op = str_of(req, "operator");
    match op {
        "In" | "NotIn" if values.len() != 1 => errs.push(FieldError::required(
            &vp,
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        )),
        "In" | "NotIn" => {}
        _ => errs.push(FieldError::invalid(
            format!("{p}.operator"),
            op,
            "not a valid selector operator",
        )),
    }
    let key = str_of(req, "key");
    if key != "metadata.name" {
        errs.push(FieldError::invalid(
            format!("{p}.key"),
            key,
            "not a valid field selector key",
        ));
    } else {
        for (i, v) in values.iter().enumerate() {
            for msg in is_dns1123_subdomain(v) {
                errs.push(FieldError::invalid(format!("{vp}[{i}]"), *v, msg));
            }
        }
    }
    errs
}

/// `ValidateTopologySelectorTerm`: the term's requirements, and the key →
/// values map that StorageClass uses to find duplicate terms.
pub(super) fn validate_topology_selector_term(
    term: &Map<String, Value>,
    path: &str,
) -> (Vec<(String, BTreeSet<String>)>, Vec<FieldError>) {
    let mut errs = Vec::new();
    let mut exprs: Vec<(String, BTreeSet<String>)> = Vec::new();
    let ep = format!("{path}.matchLabelExpressions");
    for (i, req) in opt_arr(&mut errs, term.get("matchLabelExpressions"), &ep)
        .iter()
        .enumerate()
    {
        let ip = format!("{ep}[{i}]");
        let Some(req) = opt_obj(&mut errs, Some(req), &ip) else {
            continue;
        };
        let vp = format!("{ip}.values");
        let values = string_values(&mut errs, req, &vp);
        if values.is_empty() {
            errs.push(FieldError::required(&vp, ""));
        }
        let mut set = BTreeSet::new();
        for (j, v) in values.iter().enumerate() {
            if !set.insert(v.to_string()) {
                errs.push(FieldError::duplicate(format!("{vp}[{j}]"), *v));
            }
        }
        let key = str_of(req, "key");
        errs.extend(validate_label_name(key, &format!("{ip}.key")));
        if exprs.iter().any(|(k, _)| k == key) {
            errs.push(FieldError::duplicate(format!("{ip}.key"), key));
        }
        exprs.retain(|(k, _)| k != key);
        exprs.push((key.to_string(), set));
    }
    exprs.sort();
    (exprs, errs)
}

/// `ValidatePositiveQuantityValue` on a quantity at `path`.
fn positive_quantity(errs: &mut Vec<FieldError>, v: &Value, path: &str) -> Option<Quantity> {
    match Quantity::from_json(v) {
        Ok(q) if q.sign() <= 0 => {
            errs.push(FieldError::invalid(path, q.to_string(), NOT_POSITIVE));
            None
        }
        Ok(q) => Some(q),
        Err(e) => {
            errs.push(FieldError::invalid(path, v.clone(), e.to_string()));
            None
        }
    }
}

/// `validatePathNoBacksteps`.
fn no_backsteps(errs: &mut Vec<FieldError>, path_value: &str, path: &str) {
    if path_value.split('/').any(|part| part == "..") {
        errs.push(FieldError::invalid(
            path,
            path_value,
            "must not contain '..'",
        ));
    }
}

fn validate_secret_reference(errs: &mut Vec<FieldError>, r: &Value, path: &str) {
    let Some(r) = opt_obj(errs, Some(r), path) else {
        return;
    };
    let name = str_of(r, "name");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        for msg in is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), name, msg));
        }
    }
    let ns = str_of(r, "namespace");
    if ns.is_empty() {
        errs.push(FieldError::required(format!("{path}.namespace"), ""));
    } else {
        for msg in is_dns1123_label(ns) {
            errs.push(FieldError::invalid(format!("{path}.namespace"), ns, msg));
        }
    }
}

/// The checks of one persistent volume source that Berth's volume plugins
/// (and upstream's) rely on.
fn validate_pv_source(errs: &mut Vec<FieldError>, kind: &str, src: &Value, p: &str) {
    let Some(o) = opt_obj(errs, Some(src), p) else {
        return;
    };
    match kind {
        // validateHostPathVolumeSource
        "hostPath" | "local" => {
            let path = str_of(o, "path");
            if path.is_empty() {
                errs.push(FieldError::required(format!("{p}.path"), ""));
                return;
            }
            no_backsteps(errs, path, &format!("{p}.path"));
            if kind == "hostPath" {
                let tp = format!("{p}.type");
                if let Some(t) = opt_str(errs, o.get("type"), &tp)
                    && !HOST_PATH_TYPES.contains(&t)
                {
                    errs.push(FieldError::not_supported(tp, t, HOST_PATH_TYPES));
                }
            }
        }
        // validateNFSVolumeSource
        "nfs" => {
            if str_of(o, "server").is_empty() {
                errs.push(FieldError::required(format!("{p}.server"), ""));
            }
            let path = str_of(o, "path");
            if path.is_empty() {
                errs.push(FieldError::required(format!("{p}.path"), ""));
            } else if !path.starts_with('/') {
                errs.push(FieldError::invalid(
                    format!("{p}.path"),
                    path,
                    "must be an absolute path",
                ));
            }
        }
        // validateCSIPersistentVolumeSource
        "csi" => {
            errs.extend(validate_csi_driver_name(
                str_of(o, "driver"),
                &format!("{p}.driver"),
            ));
            if str_of(o, "volumeHandle").is_empty() {
                errs.push(FieldError::required(format!("{p}.volumeHandle"), ""));
            }
            for secret in [
                "controllerPublishSecretRef",
                "nodeStageSecretRef",
                "nodePublishSecretRef",
                "controllerExpandSecretRef",
                "nodeExpandSecretRef",
            ] {
                if let Some(r) = present(o, secret) {
                    validate_secret_reference(errs, r, &format!("{p}.{secret}"));
                }
            }
        }
        "iscsi" => {
            for f in ["targetPortal", "iqn"] {
                if str_of(o, f).is_empty() {
                    errs.push(FieldError::required(format!("{p}.{f}"), ""));
                }
            }
        }
        _ => {}
    }
}

/// `validateAccessModes` as the PV and PVC specs share it.
fn validate_access_modes(errs: &mut Vec<FieldError>, modes: &[Value], path: &str) {
    let (mut rwop, mut others) = (false, false);
    for m in modes {
        let s = m.as_str().unwrap_or("");
        if !ACCESS_MODES.contains(&s) {
            errs.push(FieldError::not_supported(path, m.clone(), ACCESS_MODES));
        } else if s == "ReadWriteOncePod" {
            rwop = true;
        } else {
            others = true;
        }
    }
    if rwop && others {
        errs.push(FieldError::forbidden(
            path,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

fn validate_class_name(errs: &mut Vec<FieldError>, spec: &Map<String, Value>, path: &str) {
    if let Some(c) = opt_str(errs, spec.get("storageClassName"), path)
        && !c.is_empty()
    {
        for msg in is_dns1123_subdomain(c) {
            errs.push(FieldError::invalid(path, c, msg));
        }
    }
}

fn validate_volume_mode(errs: &mut Vec<FieldError>, spec: &Map<String, Value>, path: &str) {
    if let Some(m) = opt_str(errs, spec.get("volumeMode"), path)
        && !VOLUME_MODES.contains(&m)
    {
        errs.push(FieldError::not_supported(path, m, VOLUME_MODES));
    }
}

/// `ValidatePersistentVolumeSpec`; `inline` is a VolumeAttachment's
/// `inlineVolumeSpec` (CSI only, no capacity, class or reclaim policy).
pub(super) fn validate_pv_spec(spec: &Value, inline: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(s) = opt_obj(&mut errs, Some(spec), path) else {
        return errs;
    };
    let modes_path = format!("{path}.accessModes");
    let modes = opt_arr(&mut errs, s.get("accessModes"), &modes_path);
    if inline {
        if present(s, "claimRef").is_some() {
            errs.push(FieldError::forbidden(
                format!("{path}.claimRef"),
                INLINE_FORBIDDEN,
            ));
        }
        if s.get("capacity")
            .and_then(Value::as_object)
            .is_some_and(|c| !c.is_empty())
        {
            errs.push(FieldError::forbidden(
                format!("{path}.capacity"),
                INLINE_FORBIDDEN,
            ));
        }
        if present(s, "csi").is_none() {
            errs.push(FieldError::required(
                format!("{path}.csi"),
                "has to be specified in the context of inline volumes",
            ));
        }
    } else if modes.is_empty() {
        errs.push(FieldError::required(&modes_path, ""));
    }
    validate_access_modes(&mut errs, modes, &modes_path);

    if !inline {
        let cap_path = format!("{path}.capacity");
        let empty = Map::new();
        let cap = opt_obj(&mut errs, s.get("capacity"), &cap_path).unwrap_or(&empty);
        if cap.is_empty() {
            errs.push(FieldError::required(&cap_path, ""));
        }
        if !cap.contains_key("storage") || cap.len() > 1 {
            errs.push(FieldError::not_supported(
                &cap_path,
                Value::Object(cap.clone()),
                &["storage"],
            ));
        }
        for (r, q) in cap {
            positive_quantity(&mut errs, q, &format!("{cap_path}[{r}]"));
        }
    }

    let policy_path = format!("{path}.persistentVolumeReclaimPolicy");
    if let Some(policy) = opt_str(
        &mut errs,
        s.get("persistentVolumeReclaimPolicy"),
        &policy_path,
    ) && !policy.is_empty()
    {
        if inline {
            errs.push(FieldError::forbidden(&policy_path, INLINE_FORBIDDEN));
        } else if !RECLAIM_POLICIES.contains(&policy) {
            let mut e = FieldError::not_supported(&policy_path, policy, RECLAIM_POLICIES);
            if policy == "Recycle" {
                e.detail = format!("{} ({NO_RECYCLER})", e.detail);
            }
            errs.push(e);
        }
    }

    let mut affinity = false;
    let na_path = format!("{path}.nodeAffinity");
    if let Some(na) = opt_obj(&mut errs, s.get("nodeAffinity"), &na_path) {
        if inline {
            errs.push(FieldError::forbidden(&na_path, INLINE_FORBIDDEN));
        } else {
            // validateVolumeNodeAffinity
            affinity = true;
            let rp = format!("{na_path}.required");
            match opt_obj(&mut errs, na.get("required"), &rp) {
                Some(req) => errs.extend(validate_node_selector(req, &rp)),
                None => errs.push(FieldError::required(
                    rp,
                    "must specify required node constraints",
                )),
            }
        }
    }

    let sources: Vec<&str> = PV_SOURCES
        .iter()
        .copied()
        .filter(|k| present(s, k).is_some())
        .collect();
    match sources.as_slice() {
        [] => errs.push(FieldError::required(path, "must specify a volume type")),
        [first, rest @ ..] => {
            let src = present(s, first).unwrap_or(&Value::Null);
            validate_pv_source(&mut errs, first, src, &format!("{path}.{first}"));
            if *first == "local" && !affinity {
                errs.push(FieldError::required(
                    &na_path,
                    "Local volume requires node affinity",
                ));
            }
            for extra in rest {
                errs.push(FieldError::forbidden(
                    format!("{path}.{extra}"),
                    "may not specify more than 1 volume type",
                ));
            }
        }
    }

    let class_path = format!("{path}.storageClassName");
    if inline {
        if s.get("storageClassName")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty())
        {
            errs.push(FieldError::forbidden(&class_path, INLINE_FORBIDDEN));
        }
    } else {
        validate_class_name(&mut errs, s, &class_path);
    }
    validate_volume_mode(&mut errs, s, &format!("{path}.volumeMode"));
    errs
}

/// `ValidatePersistentVolume` and, with `old`, `ValidatePersistentVolumeUpdate`.
pub(super) fn validate_persistent_volume(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    let mut errs = validate_pv_spec(spec, false, "spec");
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&empty);
        errs.extend(validate_pv_update(spec, old_spec));
    }
    errs
}

/// The volume source of a PV spec: every member of `PersistentVolumeSource`.
fn pv_source(spec: &Value) -> Value {
    let mut out = Map::new();
    if let Some(s) = spec.as_object() {
        for k in PV_SOURCES {
            if let Some(v) = present(s, k) {
                out.insert((*k).to_string(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn validate_pv_update(spec: &Value, old_spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut new_source = pv_source(spec);
    let old_source = pv_source(old_spec);
    // A CSI volume may gain a controllerExpandSecretRef it did not have.
    let old_has_expand =
        jv::get(&old_source, &["csi", "controllerExpandSecretRef"]).is_some_and(|v| !v.is_null());
    if old_source.get("csi").is_some()
        && !old_has_expand
        && let Some(csi) = new_source.get_mut("csi").and_then(Value::as_object_mut)
    {
        csi.remove("controllerExpandSecretRef");
    }
    if !semantic_eq(&new_source, &old_source) {
        let mut diff = Vec::new();
        json_diff(&old_source, &new_source, "spec", &mut diff);
        errs.push(FieldError::forbidden(
            "spec.persistentvolumesource",
            format!(
                "spec.persistentvolumesource is immutable after creation\n{}",
                diff.join("\n")
            ),
        ));
    }
    // Upstream reports these two without the `spec.` prefix.
    immutable(
        &mut errs,
        spec.get("volumeMode"),
        old_spec.get("volumeMode"),
        "volumeMode",
    );
    if old_spec.get("nodeAffinity").is_some_and(|v| !v.is_null()) {
        immutable(
            &mut errs,
            spec.get("nodeAffinity"),
            old_spec.get("nodeAffinity"),
            "nodeAffinity",
        );
    }
    errs
}

/// `ValidatePersistentVolumeClaimSpec`.
fn validate_pvc_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(s) = opt_obj(&mut errs, Some(spec), path) else {
        return errs;
    };
    let modes_path = format!("{path}.accessModes");
    let modes = opt_arr(&mut errs, s.get("accessModes"), &modes_path);
    if modes.is_empty() {
        errs.push(FieldError::required(
            &modes_path,
            "at least 1 access mode is required",
        ));
    }
    if let Some(sel) = present(s, "selector") {
        errs.extend(validate_label_selector(
            Some(sel),
            &format!("{path}.selector"),
        ));
    }
    validate_access_modes(&mut errs, modes, &modes_path);

    let storage_path = format!("{path}.resources[storage]");
    match jv::get(spec, &["resources", "requests", "storage"]).filter(|v| !v.is_null()) {
        None => errs.push(FieldError::required(&storage_path, "")),
        Some(q) => {
            positive_quantity(&mut errs, q, &storage_path);
        }
    }
    validate_class_name(&mut errs, s, &format!("{path}.storageClassName"));
    validate_volume_mode(&mut errs, s, &format!("{path}.volumeMode"));

    let ds = present(s, "dataSource");
    let dsr = present(s, "dataSourceRef");
    if let Some(ds) = ds {
        errs.extend(validate_data_source(ds, &format!("{path}.dataSource")));
    }
    if let Some(r) = dsr {
        errs.extend(validate_data_source_ref(
            r,
            &format!("{path}.dataSourceRef"),
        ));
    }
    let ref_ns = dsr
        .and_then(|r| r.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if !ref_ns.is_empty() {
        if ds.is_some() {
            errs.push(FieldError::invalid(
                path,
                format!("{path}.dataSource"),
                "may not be specified when dataSourceRef.namespace is specified",
            ));
        }
    } else if let (Some(ds), Some(r)) = (ds, dsr) {
        let same = |k: &str| {
            ds.get(k).and_then(Value::as_str).unwrap_or("")
                == r.get(k).and_then(Value::as_str).unwrap_or("")
        };
        if !(same("apiGroup") && same("kind") && same("name")) {
            errs.push(FieldError::invalid(
                path,
                format!("{path}.dataSource"),
                "must match dataSourceRef",
            ));
        }
    }
    errs
}

/// `validateDataSource`: a core kind must be a PersistentVolumeClaim (a clone);
/// a kind with an API group is a volume populator's or a snapshot's.
fn validate_data_source(ds: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(o) = opt_obj(&mut errs, Some(ds), path) else {
        return errs;
    };
    common_data_source(&mut errs, o, path);
    errs
}

fn common_data_source(errs: &mut Vec<FieldError>, o: &Map<String, Value>, path: &str) {
    let name = str_of(o, "name");
    let kind = str_of(o, "kind");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    if kind.is_empty() {
        errs.push(FieldError::required(format!("{path}.kind"), ""));
    }
    let group = o.get("apiGroup").and_then(Value::as_str).unwrap_or("");
    if group.is_empty() && kind != "PersistentVolumeClaim" {
        errs.push(FieldError::not_supported(
            path,
            kind,
            &["PersistentVolumeClaim"],
        ));
    }
    if !group.is_empty() {
        for msg in is_dns1123_subdomain(group) {
            errs.push(FieldError::invalid(format!("{path}.apiGroup"), group, msg));
        }
    }
}

/// `validateDataSourceRef`: as a dataSource, plus an optional namespace
/// (which needs a ReferenceGrant upstream's populators honour).
fn validate_data_source_ref(r: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(o) = opt_obj(&mut errs, Some(r), path) else {
        return errs;
    };
    common_data_source(&mut errs, o, path);
    if let Some(ns) = o.get("namespace").and_then(Value::as_str)
        && !ns.is_empty()
    {
        for msg in is_dns1123_label(ns) {
            errs.push(FieldError::invalid(format!("{path}.namespace"), ns, msg));
        }
    }
    errs
}

/// `ValidatePersistentVolumeClaim` and, with `old`,
/// `ValidatePersistentVolumeClaimUpdate`.
pub(super) fn validate_persistent_volume_claim(
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    let mut errs = validate_pvc_spec(spec, "spec");
    if let Some(old) = old {
        errs.extend(validate_pvc_update(obj, old));
    }
    errs
}

fn beta_class(obj: &Value) -> Option<&str> {
    jv::str_at(obj, &["metadata", "annotations", BETA_CLASS_ANNOTATION])
}

fn storage_request(obj: &Value) -> Option<Quantity> {
    jv::get(obj, &["spec", "resources", "requests", "storage"])
        .and_then(|v| Quantity::from_json(v).ok())
}

fn validate_pvc_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = Value::Object(Map::new());
    let mut new_spec = new.get("spec").unwrap_or(&empty).clone();
    let mut old_spec = old.get("spec").unwrap_or(&empty).clone();
    let (Some(ns), Some(os)) = (new_spec.as_object_mut(), old_spec.as_object_mut()) else {
        return errs;
    };
    // The PV controller sets volumeName once.
    if str_of(os, "volumeName").is_empty() {
        match ns.get("volumeName") {
            Some(v) => os.insert("volumeName".into(), v.clone()),
            None => os.remove("volumeName"),
        };
    }
    let old_class = present(os, "storageClassName").cloned();
    let new_class = present(ns, "storageClassName").cloned();
    let old_beta = beta_class(old);
    let new_beta = beta_class(new);
    // validateStorageClassUpgradeFromAnnotation: the beta annotation's class
    // may be copied into spec.storageClassName.
    let from_annotation = old_class.is_none()
        && old_beta.is_some()
        && old_beta == new_beta
        && new_class.as_ref().and_then(Value::as_str) == old_beta;
    if from_annotation {
        ns.remove("storageClassName");
    } else {
        if new_beta != old_beta {
            errs.push(FieldError::invalid(
                // ValidateImmutableAnnotation names the key as a child path.
                format!("metadata.annotations.{BETA_CLASS_ANNOTATION}"),
                new_beta.unwrap_or(""),
                FIELD_IMMUTABLE,
            ));
        }
        // validateStorageClassUpgradeFromNil (RetroactiveDefaultStorageClass):
        // a claim without a class may get one once.
        if old_beta.is_none() && old_class.is_none() && new_class.is_some() {
            ns.remove("storageClassName");
        }
    }
    let bound = jv::str_at(new, &["status", "phase"]) == Some("Bound");
    if bound {
        let old_storage = os
            .get("resources")
            .and_then(|r| r.get("requests"))
            .and_then(|r| r.get("storage"))
            .cloned();
        if let Some(reqs) = ns
            .get_mut("resources")
            .and_then(|r| r.get_mut("requests"))
            .and_then(Value::as_object_mut)
        {
            match old_storage {
                Some(q) => reqs.insert("storage".into(), q),
                None => reqs.remove("storage"),
            };
        }
        match present(os, "volumeAttributesClassName").cloned() {
            Some(v) => ns.insert("volumeAttributesClassName".into(), v),
            None => ns.remove("volumeAttributesClassName"),
        };
    }
    let new_spec = Value::Object(ns.clone());
    let old_spec = Value::Object(os.clone());
    if !semantic_eq(&new_spec, &old_spec) {
        let mut diff = Vec::new();
        json_diff(&old_spec, &new_spec, "spec", &mut diff);
        errs.push(FieldError::forbidden(
            "spec",
            format!("{PVC_SPEC_IMMUTABLE}\n{}", diff.join("\n")),
        ));
    }
    // RecoverVolumeExpansionFailure (on by default since 1.32): a request may
    // shrink back towards a failed expansion, never to the size the volume has.
    if let (Some(new_size), Some(old_size)) = (storage_request(new), storage_request(old))
        && new_size < old_size
    {
        let status_size = jv::get(old, &["status", "capacity", "storage"])
            .and_then(|v| Quantity::from_json(v).ok())
            .unwrap_or_else(Quantity::zero);
        if new_size <= status_size {
            errs.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
    }
    immutable(
        &mut errs,
        jv::get(new, &["spec", "volumeMode"]),
        jv::get(old, &["spec", "volumeMode"]),
        "volumeMode",
    );
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pv() -> Value {
        json!({
            "metadata": {"name": "pv1"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "volumeMode": "Filesystem",
                "hostPath": {"path": "/data/pv1", "type": ""}
            },
            "status": {"phase": "Pending"}
        })
    }

    fn pvc() -> Value {
        json!({
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeMode": "Filesystem",
                "storageClassName": "standard"
            },
            "status": {"phase": "Pending"}
        })
    }

    fn with(mut base: Value, ptr: &str, v: Value) -> Value {
        match base.pointer_mut(ptr) {
            Some(slot) => *slot = v,
            None => {
                let (parent, key) = ptr.rsplit_once('/').unwrap();
                base.pointer_mut(parent).unwrap()[key.replace("~1", "/")] = v;
            }
        }
        base
    }

    fn without(mut base: Value, ptr: &str) -> Value {
        let (parent, key) = ptr.rsplit_once('/').unwrap();
        base.pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove(key);
        base
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn valid_objects_pass() {
        assert_eq!(
            messages(&validate_persistent_volume(&pv(), None)),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(&validate_persistent_volume_claim(&pvc(), None)),
            Vec::<String>::new()
        );
        let local = with(
            without(pv(), "/spec/hostPath"),
            "/spec/local",
            json!({"path": "/mnt/disks/ssd1"}),
        );
        let local = with(
            local,
            "/spec/nodeAffinity",
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}
            ]}]}}),
        );
        assert_eq!(
            messages(&validate_persistent_volume(&local, None)),
            Vec::<String>::new()
        );
        let csi = with(
            without(pv(), "/spec/hostPath"),
            "/spec/csi",
            json!({"driver": "hostpath.csi.k8s.io", "volumeHandle": "h1"}),
        );
        assert_eq!(
            messages(&validate_persistent_volume(&csi, None)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn persistent_volume_table() {
        let affinity = |terms: Value| json!({"required": {"nodeSelectorTerms": terms}});
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "no capacity",
                without(pv(), "/spec/capacity"),
                vec![
                    "spec.capacity: Required value",
                    "spec.capacity: Unsupported value: {}: supported values: \"storage\"",
                ],
            ),
            (
                "capacity other than storage",
                with(
                    pv(),
                    "/spec/capacity",
                    json!({"storage": "1Gi", "cpu": "1"}),
                ),
                vec![
                    "spec.capacity: Unsupported value: {\"storage\":\"1Gi\",\"cpu\":\"1\"}: supported values: \"storage\"",
                ],
            ),
            (
                "zero capacity",
                with(pv(), "/spec/capacity/storage", json!("0")),
                vec!["spec.capacity[storage]: Invalid value: \"0\": must be greater than zero"],
            ),
            (
                "no source",
                without(pv(), "/spec/hostPath"),
                vec!["spec: Required value: must specify a volume type"],
            ),
            (
                "two sources",
                with(pv(), "/spec/nfs", json!({"server": "s", "path": "/x"})),
                vec!["spec.nfs: Forbidden: may not specify more than 1 volume type"],
            ),
            (
                "no access modes",
                without(pv(), "/spec/accessModes"),
                vec!["spec.accessModes: Required value"],
            ),
            (
                "bad access mode",
                with(pv(), "/spec/accessModes", json!(["ReadWriteSometimes"])),
                vec![
                    "spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                ],
            ),
            (
                "RWOP with others",
                with(
                    pv(),
                    "/spec/accessModes",
                    json!(["ReadWriteOncePod", "ReadWriteMany"]),
                ),
                vec![
                    "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
                ],
            ),
            (
                "recycle",
                with(
                    pv(),
                    "/spec/persistentVolumeReclaimPolicy",
                    json!("Recycle"),
                ),
                vec![
                    "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\" (Berth has no volume recycler (Recycle is deprecated upstream): use Delete or Retain)",
                ],
            ),
            (
                "bad reclaim policy",
                with(pv(), "/spec/persistentVolumeReclaimPolicy", json!("Keep")),
                vec![
                    "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Retain\"",
                ],
            ),
            (
                "hostPath without path",
                with(pv(), "/spec/hostPath", json!({})),
                vec!["spec.hostPath.path: Required value"],
            ),
            (
                "hostPath backsteps",
                with(pv(), "/spec/hostPath/path", json!("/data/../etc")),
                vec!["spec.hostPath.path: Invalid value: \"/data/../etc\": must not contain '..'"],
            ),
            (
                "hostPath bad type",
                with(pv(), "/spec/hostPath/type", json!("Dir")),
                vec![
                    "spec.hostPath.type: Unsupported value: \"Dir\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\"",
                ],
            ),
            (
                "local without affinity",
                with(
                    without(pv(), "/spec/hostPath"),
                    "/spec/local",
                    json!({"path": "/mnt/disk"}),
                ),
                vec!["spec.nodeAffinity: Required value: Local volume requires node affinity"],
            ),
            (
                "affinity without required",
                with(pv(), "/spec/nodeAffinity", json!({})),
                vec![
                    "spec.nodeAffinity.required: Required value: must specify required node constraints",
                ],
            ),
            (
                "affinity without terms",
                with(pv(), "/spec/nodeAffinity", affinity(json!([]))),
                vec![
                    "spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at least one node selector term",
                ],
            ),
            (
                "affinity bad operator and values",
                with(
                    pv(),
                    "/spec/nodeAffinity",
                    affinity(json!([{"matchExpressions": [
                        {"key": "a", "operator": "In"},
                        {"key": "b", "operator": "Exists", "values": ["x"]},
                        {"key": "c", "operator": "Gt", "values": ["1", "2"]},
                        {"key": "-d", "operator": "Near", "values": ["x"]}
                    ]}])),
                ),
                vec![
                    "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                    "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[2].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
                    "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[3].operator: Invalid value: \"Near\": not a valid selector operator",
                    "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[3].key: Invalid value: \"-d\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                ],
            ),
            (
                "affinity match fields",
                with(
                    pv(),
                    "/spec/nodeAffinity",
                    affinity(json!([{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                        {"key": "spec.nodeName", "operator": "In", "values": ["a"]}
                    ]}])),
                ),
                vec![
                    "spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                    "spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[1].key: Invalid value: \"spec.nodeName\": not a valid field selector key",
                ],
            ),
            (
                "bad volume mode",
                with(pv(), "/spec/volumeMode", json!("Raw")),
                vec![
                    "spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\"",
                ],
            ),
            (
                "bad class name",
                with(pv(), "/spec/storageClassName", json!("Fast_SSD")),
                vec![
                    "spec.storageClassName: Invalid value: \"Fast_SSD\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
            (
                "csi without driver or handle",
                with(without(pv(), "/spec/hostPath"), "/spec/csi", json!({})),
                // As upstream: the empty name also fails the subdomain check.
                vec![
                    "spec.csi.driver: Required value",
                    "spec.csi.driver: Invalid value: \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                    "spec.csi.volumeHandle: Required value",
                ],
            ),
            (
                "csi secret ref without namespace",
                with(
                    without(pv(), "/spec/hostPath"),
                    "/spec/csi",
                    json!({"driver": "d.example.com", "volumeHandle": "h", "nodePublishSecretRef": {"name": "s"}}),
                ),
                vec!["spec.csi.nodePublishSecretRef.namespace: Required value"],
            ),
            (
                "nfs relative path",
                with(
                    without(pv(), "/spec/hostPath"),
                    "/spec/nfs",
                    json!({"server": "nfs.example.com", "path": "exports"}),
                ),
                vec!["spec.nfs.path: Invalid value: \"exports\": must be an absolute path"],
            ),
        ];
        for (name, obj, want) in cases {
            assert_eq!(
                messages(&validate_persistent_volume(&obj, None)),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn persistent_volume_update_table() {
        let bound = with(
            pv(),
            "/spec/claimRef",
            json!({"namespace": "default", "name": "c"}),
        );
        let affine = with(
            pv(),
            "/spec/nodeAffinity",
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}),
        );
        let csi = with(
            without(pv(), "/spec/hostPath"),
            "/spec/csi",
            json!({"driver": "d.example.com", "volumeHandle": "h"}),
        );
        let cases: Vec<(&str, Value, Value, Vec<&str>)> = vec![
            ("claimRef may change", pv(), bound.clone(), vec![]),
            (
                "capacity and reclaim policy may change",
                pv(),
                with(
                    with(pv(), "/spec/capacity/storage", json!("2Gi")),
                    "/spec/persistentVolumeReclaimPolicy",
                    json!("Delete"),
                ),
                vec![],
            ),
            (
                "source is immutable",
                pv(),
                with(pv(), "/spec/hostPath/path", json!("/data/other")),
                vec![
                    "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n- spec.hostPath.path: \"/data/pv1\"\n+ spec.hostPath.path: \"/data/other\"",
                ],
            ),
            (
                "volume mode is immutable",
                pv(),
                with(pv(), "/spec/volumeMode", json!("Block")),
                vec!["volumeMode: Invalid value: \"Block\": field is immutable"],
            ),
            (
                "node affinity may be set once",
                pv(),
                affine.clone(),
                vec![],
            ),
            (
                "node affinity is immutable once set",
                affine.clone(),
                pv(),
                vec!["nodeAffinity: Invalid value: \"null\": field is immutable"],
            ),
            (
                "a CSI volume may gain a controllerExpandSecretRef",
                csi.clone(),
                with(
                    csi.clone(),
                    "/spec/csi/controllerExpandSecretRef",
                    json!({"name": "s", "namespace": "ns"}),
                ),
                vec![],
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                messages(&validate_persistent_volume(&new, Some(&old))),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn claim_table() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "no access modes",
                without(pvc(), "/spec/accessModes"),
                vec!["spec.accessModes: Required value: at least 1 access mode is required"],
            ),
            (
                "bad access mode",
                with(pvc(), "/spec/accessModes", json!(["RWO"])),
                vec![
                    "spec.accessModes: Unsupported value: \"RWO\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                ],
            ),
            (
                "no storage request",
                with(pvc(), "/spec/resources", json!({})),
                vec!["spec.resources[storage]: Required value"],
            ),
            (
                "zero storage request",
                with(pvc(), "/spec/resources/requests/storage", json!("0")),
                vec!["spec.resources[storage]: Invalid value: \"0\": must be greater than zero"],
            ),
            (
                "bad volume mode",
                with(pvc(), "/spec/volumeMode", json!("block")),
                vec![
                    "spec.volumeMode: Unsupported value: \"block\": supported values: \"Block\", \"Filesystem\"",
                ],
            ),
            (
                "bad selector",
                with(
                    pvc(),
                    "/spec/selector",
                    json!({"matchExpressions": [{"key": "k", "operator": "In"}]}),
                ),
                vec![
                    "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                ],
            ),
            (
                "core data source other than a claim",
                with(
                    pvc(),
                    "/spec/dataSource",
                    json!({"kind": "Secret", "name": "s"}),
                ),
                vec![
                    "spec.dataSource: Unsupported value: \"Secret\": supported values: \"PersistentVolumeClaim\"",
                ],
            ),
            (
                "data source without name",
                with(
                    pvc(),
                    "/spec/dataSource",
                    json!({"kind": "PersistentVolumeClaim"}),
                ),
                vec!["spec.dataSource.name: Required value"],
            ),
            (
                "data source and ref differ",
                with(
                    with(
                        pvc(),
                        "/spec/dataSource",
                        json!({"kind": "PersistentVolumeClaim", "name": "a"}),
                    ),
                    "/spec/dataSourceRef",
                    json!({"kind": "PersistentVolumeClaim", "name": "b"}),
                ),
                vec!["spec: Invalid value: \"spec.dataSource\": must match dataSourceRef"],
            ),
            (
                "snapshot data source",
                with(
                    pvc(),
                    "/spec/dataSource",
                    json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"}),
                ),
                vec![],
            ),
        ];
        for (name, obj, want) in cases {
            assert_eq!(
                messages(&validate_persistent_volume_claim(&obj, None)),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn claim_update_table() {
        let bound = with(
            with(
                with(pvc(), "/spec/volumeName", json!("pv1")),
                "/status/phase",
                json!("Bound"),
            ),
            "/status/capacity",
            json!({"storage": "1Gi"}),
        );
        let grow = |v: Value, size: &str| with(v, "/spec/resources/requests/storage", json!(size));
        let spec_forbidden = |diff: &str| format!("spec: Forbidden: {PVC_SPEC_IMMUTABLE}\n{diff}");
        let unclassed = without(pvc(), "/spec/storageClassName");
        let annotated = with(
            unclassed.clone(),
            "/metadata/annotations",
            json!({BETA_CLASS_ANNOTATION: "gold"}),
        );
        let cases: Vec<(&str, Value, Value, Vec<String>)> = vec![
            ("volumeName is set once", pvc(), with(pvc(), "/spec/volumeName", json!("pv1")), vec![]),
            (
                "volumeName is not changed after",
                bound.clone(),
                with(bound.clone(), "/spec/volumeName", json!("pv2")),
                vec![spec_forbidden("- spec.volumeName: \"pv1\"\n+ spec.volumeName: \"pv2\"")],
            ),
            ("a bound claim may grow", bound.clone(), grow(bound.clone(), "2Gi"), vec![]),
            (
                "an unbound claim may not",
                pvc(),
                grow(pvc(), "2Gi"),
                vec![spec_forbidden(
                    "- spec.resources.requests.storage: \"1Gi\"\n+ spec.resources.requests.storage: \"2Gi\"",
                )],
            ),
            (
                "shrinking to the volume's size",
                grow(bound.clone(), "2Gi"),
                bound.clone(),
                vec!["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity".to_string()],
            ),
            (
                "shrinking back towards a failed expansion",
                grow(bound.clone(), "3Gi"),
                grow(bound.clone(), "2Gi"),
                vec![],
            ),
            (
                "access modes are immutable",
                bound.clone(),
                with(bound.clone(), "/spec/accessModes", json!(["ReadWriteMany"])),
                vec![spec_forbidden(
                    "- spec.accessModes[0]: \"ReadWriteOnce\"\n+ spec.accessModes[0]: \"ReadWriteMany\"",
                )],
            ),
            (
                "class is immutable",
                pvc(),
                with(pvc(), "/spec/storageClassName", json!("other")),
                vec![spec_forbidden(
                    "- spec.storageClassName: \"standard\"\n+ spec.storageClassName: \"other\"",
                )],
            ),
            (
                "a claim without a class gets one (retroactive default)",
                unclassed.clone(),
                pvc(),
                vec![],
            ),
            (
                "the beta annotation's class moves into the spec",
                annotated.clone(),
                with(annotated.clone(), "/spec/storageClassName", json!("gold")),
                vec![],
            ),
            (
                "the beta annotation is immutable",
                annotated.clone(),
                with(
                    annotated.clone(),
                    "/metadata/annotations",
                    json!({BETA_CLASS_ANNOTATION: "silver"}),
                ),
                vec![format!(
                    "metadata.annotations.{BETA_CLASS_ANNOTATION}: Invalid value: \"silver\": field is immutable"
                )],
            ),
            (
                "volume mode is immutable",
                pvc(),
                with(pvc(), "/spec/volumeMode", json!("Block")),
                vec![
                    spec_forbidden("- spec.volumeMode: \"Filesystem\"\n+ spec.volumeMode: \"Block\""),
                    "volumeMode: Invalid value: \"Block\": field is immutable".to_string(),
                ],
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                messages(&validate_persistent_volume_claim(&new, Some(&old))),
                want,
                "{name}"
            );
        }
    }
}
