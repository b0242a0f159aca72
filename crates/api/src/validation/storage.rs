//! storage.k8s.io/v1 validation, as upstream's `pkg/apis/storage/validation`:
//! StorageClass, CSIDriver, CSINode and VolumeAttachment, create and update.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::volume::{validate_csi_driver_name, validate_pv_spec, validate_topology_selector_term};
use super::{
    FIELD_IMMUTABLE, FieldError, immutable, is_dns1123_subdomain, is_qualified_name, jv, opt_arr,
    opt_obj, opt_str, semantic_eq,
};

const RECLAIM_POLICIES: &[&str] = &["Delete", "Retain"];
const BINDING_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];
const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
/// Upstream lists these two in this order (not sorted).
const LIFECYCLE_MODES: &[&str] = &["Persistent", "Ephemeral"];
const MAX_PARAMETERS: usize = 512;
const MAX_PARAMETERS_SIZE: usize = 256 * 1024;
const MAX_ATTACHMENT_METADATA_SIZE: usize = 256 * 1024;
const MAX_VOLUME_ERROR_MESSAGE: usize = 1024;
/// `csiNodeIDMaxLength` (upstream's long node IDs are on by default).
const CSI_NODE_ID_MAX_LENGTH: usize = 192;
const EXACTLY_ONE_SOURCE: &str =
    "must specify exactly one of inlineVolumeSpec and persistentVolumeName";

fn empty() -> Value {
    Value::Object(Map::new())
}

/// `ValidateQualifiedName`: every message at `path`.
fn qualified_name(errs: &mut Vec<FieldError>, value: &str, path: &str) {
    for msg in is_qualified_name(value) {
        errs.push(FieldError::invalid(path, value, msg));
    }
}

/// `ValidateStorageClass` and, with `old`, `ValidateStorageClassUpdate`.
pub(super) fn validate_storage_class(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // validateProvisioner
    let provisioner = opt_str(&mut errs, obj.get("provisioner"), "provisioner").unwrap_or("");
    if provisioner.is_empty() {
        errs.push(FieldError::required("provisioner", ""));
    } else {
        qualified_name(&mut errs, &provisioner.to_lowercase(), "provisioner");
    }
    // validateParameters
    if let Some(params) = opt_obj(&mut errs, obj.get("parameters"), "parameters") {
        if params.len() > MAX_PARAMETERS {
            errs.push(FieldError::too_long("parameters", MAX_PARAMETERS));
        } else {
            let mut size = 0;
            for (k, v) in params {
                if k.is_empty() {
                    errs.push(FieldError::invalid(
                        "parameters",
                        k.as_str(),
                        "field can not be empty.",
                    ));
                }
                size += k.len() + v.as_str().map_or(0, str::len);
            }
            if size > MAX_PARAMETERS_SIZE {
                errs.push(FieldError::too_long("parameters", MAX_PARAMETERS_SIZE));
            }
        }
    }
    // validateReclaimPolicy
    if let Some(p) = opt_str(&mut errs, obj.get("reclaimPolicy"), "reclaimPolicy")
        && !p.is_empty()
        && !RECLAIM_POLICIES.contains(&p)
    {
        errs.push(FieldError::not_supported(
            "reclaimPolicy",
            p,
            RECLAIM_POLICIES,
        ));
    }
    // validateVolumeBindingMode
    match opt_str(&mut errs, obj.get("volumeBindingMode"), "volumeBindingMode") {
        None if obj.get("volumeBindingMode").is_none_or(Value::is_null) => {
            errs.push(FieldError::required("volumeBindingMode", ""));
        }
        Some(m) if !BINDING_MODES.contains(&m) => {
            errs.push(FieldError::not_supported(
                "volumeBindingMode",
                m,
                BINDING_MODES,
            ));
        }
        _ => {}
    }
    // validateAllowedTopologies
    let mut seen: Vec<Vec<(String, BTreeSet<String>)>> = Vec::new();
    for (i, term) in opt_arr(&mut errs, obj.get("allowedTopologies"), "allowedTopologies")
        .iter()
        .enumerate()
    {
        let p = format!("allowedTopologies[{i}]");
        let Some(term) = opt_obj(&mut errs, Some(term), &p) else {
            continue;
        };
        let (exprs, term_errs) = validate_topology_selector_term(term, &p);
        errs.extend(term_errs);
        if seen.contains(&exprs) {
            errs.push(FieldError::duplicate(
                format!("{p}.matchLabelExpressions"),
                "",
            ));
        }
        seen.push(exprs);
    }
    if let Some(old) = old {
        let differ = |k: &str| {
            !semantic_eq(
                obj.get(k).unwrap_or(&Value::Null),
                old.get(k).unwrap_or(&Value::Null),
            )
        };
        for field in ["parameters", "provisioner", "reclaimPolicy"] {
            if differ(field) {
                errs.push(FieldError::forbidden(
                    field,
                    format!("updates to {field} are forbidden."),
                ));
            }
        }
        immutable(
            &mut errs,
            obj.get("volumeBindingMode"),
            old.get("volumeBindingMode"),
            "volumeBindingMode",
        );
    }
    errs
}

/// `ValidateCSIDriver` and, with `old`, `ValidateCSIDriverUpdate`.
pub(super) fn validate_csi_driver(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    // The name is a DNS subdomain: the generic metadata checks cover it.
    let mut errs = Vec::new();
    let e = empty();
    let spec = obj.get("spec").unwrap_or(&e);
    let Some(s) = opt_obj(&mut errs, Some(spec), "spec") else {
        return errs;
    };
    // Upstream's path for attachRequired says "attachedRequired".
    for (field, path) in [
        ("attachRequired", "spec.attachedRequired"),
        ("podInfoOnMount", "spec.podInfoOnMount"),
        ("storageCapacity", "spec.storageCapacity"),
        ("seLinuxMount", "spec.seLinuxMount"),
    ] {
        match s.get(field) {
            None | Some(Value::Null) => errs.push(FieldError::required(path, "")),
            Some(Value::Bool(_)) => {}
            Some(v) => errs.push(FieldError::type_invalid(path, v, "boolean")),
        }
    }
    if let Some(p) = opt_str(&mut errs, s.get("fsGroupPolicy"), "spec.fsGroupPolicy")
        && !FS_GROUP_POLICIES.contains(&p)
    {
        errs.push(FieldError::not_supported(
            "spec.fsGroupPolicy",
            p,
            FS_GROUP_POLICIES,
        ));
    }
    errs.extend(validate_token_requests(s.get("tokenRequests")));
    let period_path = "spec.nodeAllocatableUpdatePeriodSeconds";
    if let Some(p) = super::opt_int(
        &mut errs,
        s.get("nodeAllocatableUpdatePeriodSeconds"),
        period_path,
    ) && p < 10
    {
        errs.push(FieldError::invalid(
            period_path,
            p,
            "must be greater than or equal to 10 seconds",
        ));
    }
    for m in opt_arr(
        &mut errs,
        s.get("volumeLifecycleModes"),
        "spec.volumeLifecycleModes",
    ) {
        if !m.as_str().is_some_and(|m| LIFECYCLE_MODES.contains(&m)) {
            errs.push(FieldError::not_supported(
                "spec.volumeLifecycleModes",
                m.clone(),
                LIFECYCLE_MODES,
            ));
        }
    }
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&e);
        // Upstream ≥ 1.33 lets podInfoOnMount and fsGroupPolicy change.
        for (field, path) in [
            ("attachRequired", "spec.attachedRequired"),
            ("volumeLifecycleModes", "spec.volumeLifecycleModes"),
        ] {
            immutable(&mut errs, spec.get(field), old_spec.get(field), path);
        }
    }
    errs
}

/// `validateTokenRequests`: distinct audiences, 10 minutes to 2^32 seconds.
fn validate_token_requests(v: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut audiences = BTreeSet::new();
    for (i, tr) in opt_arr(&mut errs, v, "spec.tokenRequests")
        .iter()
        .enumerate()
    {
        let p = format!("spec.tokenRequests[{i}]");
        let audience = tr.get("audience").and_then(Value::as_str).unwrap_or("");
        if !audiences.insert(audience) {
            errs.push(FieldError::duplicate(format!("{p}.audience"), audience));
            continue;
        }
        let ep = format!("{p}.expirationSeconds");
        if let Some(secs) = super::opt_int(&mut errs, tr.get("expirationSeconds"), &ep) {
            if secs < 600 {
                errs.push(FieldError::invalid(
                    &ep,
                    secs,
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if secs > 1 << 32 {
                errs.push(FieldError::invalid(
                    &ep,
                    secs,
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
        }
    }
    errs
}

/// `ValidateCSINode` and, with `old`, `ValidateCSINodeUpdate`.
pub(super) fn validate_csi_node(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let drivers = opt_arr(
        &mut errs,
        jv::get(obj, &["spec", "drivers"]),
        "spec.drivers",
    );
    let mut names = BTreeSet::new();
    for (i, d) in drivers.iter().enumerate() {
        let p = format!("spec.drivers[{i}]");
        let Some(d) = opt_obj(&mut errs, Some(d), &p) else {
            continue;
        };
        let name = d.get("name").and_then(Value::as_str).unwrap_or("");
        errs.extend(validate_csi_driver_name(name, &format!("{p}.name")));
        let node_id = d.get("nodeID").and_then(Value::as_str).unwrap_or("");
        if node_id.is_empty() {
            errs.push(FieldError::required(format!("{p}.nodeID"), ""));
        }
        if node_id.len() > CSI_NODE_ID_MAX_LENGTH {
            errs.push(FieldError::invalid(
                format!("{p}.nodeID"),
                node_id,
                format!("must be {CSI_NODE_ID_MAX_LENGTH} characters or less"),
            ));
        }
        super::non_negative(
            &mut errs,
            jv::get(&Value::Object(d.clone()), &["allocatable", "count"]),
            &format!("{p}.allocatable.count"),
        );
        if !names.insert(name) {
            errs.push(FieldError::duplicate(format!("{p}.name"), name));
        }
        // Upstream reports topology key errors at the driver's own path.
        let mut keys = BTreeSet::new();
        for k in opt_arr(
            &mut errs,
            d.get("topologyKeys"),
            &format!("{p}.topologyKeys"),
        ) {
            let key = k.as_str().unwrap_or("");
            if key.is_empty() {
                errs.push(FieldError::required(&p, ""));
            }
            if !keys.insert(key) {
                errs.push(FieldError::duplicate(&p, key));
            }
            qualified_name(&mut errs, key, &p);
        }
    }
    if let Some(old) = old {
        // A registered driver's entry is frozen; drivers may come and go.
        for od in jv::arr_at(old, &["spec", "drivers"]) {
            for nd in drivers {
                if od.get("name") == nd.get("name") && !semantic_eq(od, nd) {
                    errs.push(FieldError::invalid(
                        "spec.drivers",
                        nd.clone(),
                        FIELD_IMMUTABLE,
                    ));
                }
            }
        }
    }
    errs
}

/// `ValidateVolumeAttachment` (+ `ValidateVolumeAttachmentV1`) and, with
/// `old`, `ValidateVolumeAttachmentUpdate`.
pub(super) fn validate_volume_attachment(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let e = empty();
    let spec = obj.get("spec").unwrap_or(&e);
    let attacher = jv::str_at(spec, &["attacher"]).unwrap_or("");
    if attacher.is_empty() {
        errs.push(FieldError::required("spec.attacher", ""));
    }
    let source = jv::obj_at(spec, &["source"]);
    let inline = source
        .and_then(|s| s.get("inlineVolumeSpec"))
        .filter(|v| !v.is_null());
    let pv_name = source
        .and_then(|s| s.get("persistentVolumeName"))
        .filter(|v| !v.is_null());
    match (inline, pv_name) {
        (None, None) => errs.push(FieldError::required("spec.source", EXACTLY_ONE_SOURCE)),
        (Some(_), Some(_)) => errs.push(FieldError::forbidden("spec.source", EXACTLY_ONE_SOURCE)),
        (None, Some(n)) => {
            if n.as_str().unwrap_or("").is_empty() {
                errs.push(FieldError::required(
                    "spec.source.persistentVolumeName",
                    "must specify non empty persistentVolumeName",
                ));
            }
        }
        (Some(spec), None) => {
            errs.extend(validate_pv_spec(spec, true, "spec.source.inlineVolumeSpec"))
        }
    }
    let node = jv::str_at(spec, &["nodeName"]).unwrap_or("");
    for msg in is_dns1123_subdomain(node) {
        errs.push(FieldError::invalid("spec.nodeName", node, msg));
    }
    // validateVolumeAttachmentStatus
    let meta_size: usize = jv::obj_at(obj, &["status", "attachmentMetadata"])
        .map(|m| {
            m.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    if meta_size > MAX_ATTACHMENT_METADATA_SIZE {
        errs.push(FieldError::too_long(
            "status.attachmentMetadata",
            MAX_ATTACHMENT_METADATA_SIZE,
        ));
    }
    for which in ["attachError", "detachError"] {
        let code_path = format!("status.{which}.errorCode");
        if let Some(code) = super::opt_int(
            &mut errs,
            jv::get(obj, &["status", which, "errorCode"]),
            &code_path,
        ) && code < 0
        {
            errs.push(FieldError::invalid(
                code_path,
                code,
                super::inclusive_range_error(0, i64::from(i32::MAX)),
            ));
        }
        let msg = jv::str_at(obj, &["status", which, "message"]).unwrap_or("");
        if msg.len() > MAX_VOLUME_ERROR_MESSAGE {
            // Upstream reports the metadata limit here (its own slip).
            errs.push(FieldError::too_long(
                format!("status.{which}.message"),
                MAX_ATTACHMENT_METADATA_SIZE,
            ));
        }
    }
    // ValidateVolumeAttachmentV1
    if !attacher.is_empty() {
        errs.extend(validate_csi_driver_name(attacher, "spec.attacher"));
    }
    if let Some(n) = pv_name.and_then(Value::as_str)
        && !n.is_empty()
    {
        for msg in is_dns1123_subdomain(n) {
            errs.push(FieldError::invalid(
                "spec.source.persistentVolumeName",
                n,
                msg,
            ));
        }
    }
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&e);
        if !semantic_eq(spec, old_spec) {
            errs.push(FieldError::invalid("spec", spec.clone(), FIELD_IMMUTABLE));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn with(mut base: Value, key: &str, v: Value) -> Value {
        let mut cur = &mut base;
        let parts: Vec<&str> = key.split('.').collect();
        for p in &parts[..parts.len() - 1] {
            cur = &mut cur[*p];
        }
        cur[parts[parts.len() - 1]] = v;
        base
    }

    fn class() -> Value {
        json!({
            "metadata": {"name": "fast"},
            "provisioner": "rancher.io/local-path",
            "parameters": {"type": "ssd"},
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"
        })
    }

    #[test]
    fn storage_class_table() {
        let term = |key: &str, values: Value| json!({"matchLabelExpressions": [{"key": key, "values": values}]});
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("valid", class(), vec![]),
            (
                "no provisioner",
                with(class(), "provisioner", json!("")),
                vec!["provisioner: Required value"],
            ),
            (
                "provisioner not a qualified name",
                with(class(), "provisioner", json!("a/b/c")),
                vec![
                    "provisioner: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                ],
            ),
            (
                "empty parameter key",
                with(class(), "parameters", json!({"": "x"})),
                vec!["parameters: Invalid value: \"\": field can not be empty."],
            ),
            (
                "recycle",
                with(class(), "reclaimPolicy", json!("Recycle")),
                vec![
                    "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
                ],
            ),
            (
                "binding mode",
                with(class(), "volumeBindingMode", json!("Later")),
                vec![
                    "volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"",
                ],
            ),
            (
                "no binding mode",
                with(class(), "volumeBindingMode", Value::Null),
                vec!["volumeBindingMode: Required value"],
            ),
            (
                "topology terms",
                with(
                    class(),
                    "allowedTopologies",
                    json!([
                        term("topology.kubernetes.io/zone", json!(["a", "a"])),
                        term("zone", json!([])),
                        term("zone", json!(["b"])),
                        term("zone", json!(["b"]))
                    ]),
                ),
                vec![
                    "allowedTopologies[0].matchLabelExpressions[0].values[1]: Duplicate value: \"a\"",
                    "allowedTopologies[1].matchLabelExpressions[0].values: Required value",
                    "allowedTopologies[3].matchLabelExpressions: Duplicate value: \"\"",
                ],
            ),
        ];
        for (name, obj, want) in cases {
            assert_eq!(
                messages(&validate_storage_class(&obj, None)),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn storage_class_update_table() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "labels only",
                with(class(), "metadata.labels", json!({"a": "b"})),
                vec![],
            ),
            (
                "expansion may change",
                with(class(), "allowVolumeExpansion", json!(true)),
                vec![],
            ),
            (
                "parameters",
                with(class(), "parameters", json!({"type": "hdd"})),
                vec!["parameters: Forbidden: updates to parameters are forbidden."],
            ),
            (
                "provisioner",
                with(class(), "provisioner", json!("example.com/other")),
                vec!["provisioner: Forbidden: updates to provisioner are forbidden."],
            ),
            (
                "reclaim policy",
                with(class(), "reclaimPolicy", json!("Retain")),
                vec!["reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."],
            ),
            (
                "binding mode",
                with(class(), "volumeBindingMode", json!("Immediate")),
                vec!["volumeBindingMode: Invalid value: \"Immediate\": field is immutable"],
            ),
        ];
        for (name, new, want) in cases {
            assert_eq!(
                messages(&validate_storage_class(&new, Some(&class()))),
                want,
                "{name}"
            );
        }
    }

    fn driver() -> Value {
        json!({
            "metadata": {"name": "hostpath.csi.k8s.io"},
            "spec": {
                "attachRequired": true,
                "podInfoOnMount": false,
                "storageCapacity": false,
                "fsGroupPolicy": "ReadWriteOnceWithFSType",
                "requiresRepublish": false,
                "seLinuxMount": false,
                "volumeLifecycleModes": ["Persistent"]
            }
        })
    }

    #[test]
    fn csi_driver_table() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("valid", driver(), vec![]),
            (
                "update period",
                with(
                    driver(),
                    "spec.nodeAllocatableUpdatePeriodSeconds",
                    json!(5),
                ),
                vec![
                    "spec.nodeAllocatableUpdatePeriodSeconds: Invalid value: 5: must be greater than or equal to 10 seconds",
                ],
            ),
            (
                "attachRequired unset",
                with(driver(), "spec.attachRequired", Value::Null),
                vec!["spec.attachedRequired: Required value"],
            ),
            (
                "podInfoOnMount unset",
                with(driver(), "spec.podInfoOnMount", Value::Null),
                vec!["spec.podInfoOnMount: Required value"],
            ),
            (
                "fsGroupPolicy",
                with(driver(), "spec.fsGroupPolicy", json!("Always")),
                vec![
                    "spec.fsGroupPolicy: Unsupported value: \"Always\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\"",
                ],
            ),
            (
                "lifecycle mode",
                with(
                    driver(),
                    "spec.volumeLifecycleModes",
                    json!(["Persistent", "Forever"]),
                ),
                vec![
                    "spec.volumeLifecycleModes: Unsupported value: \"Forever\": supported values: \"Persistent\", \"Ephemeral\"",
                ],
            ),
            (
                "token requests",
                with(
                    driver(),
                    "spec.tokenRequests",
                    json!([
                        {"audience": "a", "expirationSeconds": 60},
                        {"audience": "a"},
                        {"audience": "b", "expirationSeconds": 5_000_000_000_i64}
                    ]),
                ),
                vec![
                    "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
                    "spec.tokenRequests[1].audience: Duplicate value: \"a\"",
                    "spec.tokenRequests[2].expirationSeconds: Invalid value: 5000000000: may not specify a duration larger than 2^32 seconds",
                ],
            ),
        ];
        for (name, obj, want) in cases {
            assert_eq!(messages(&validate_csi_driver(&obj, None)), want, "{name}");
        }
        let updates: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "requiresRepublish may change",
                with(driver(), "spec.requiresRepublish", json!(true)),
                vec![],
            ),
            (
                "storageCapacity may change",
                with(driver(), "spec.storageCapacity", json!(true)),
                vec![],
            ),
            (
                "attachRequired",
                with(driver(), "spec.attachRequired", json!(false)),
                vec!["spec.attachedRequired: Invalid value: false: field is immutable"],
            ),
            (
                "podInfoOnMount may change",
                with(driver(), "spec.podInfoOnMount", json!(true)),
                vec![],
            ),
            (
                "fsGroupPolicy may change",
                with(driver(), "spec.fsGroupPolicy", json!("File")),
                vec![],
            ),
            (
                "modes",
                with(driver(), "spec.volumeLifecycleModes", json!(["Ephemeral"])),
                vec![
                    "spec.volumeLifecycleModes: Invalid value: [\"Ephemeral\"]: field is immutable",
                ],
            ),
        ];
        for (name, new, want) in updates {
            assert_eq!(
                messages(&validate_csi_driver(&new, Some(&driver()))),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn csi_node_table() {
        let node =
            |drivers: Value| json!({"metadata": {"name": "n1"}, "spec": {"drivers": drivers}});
        let d = |name: &str, id: &str| json!({"name": name, "nodeID": id, "topologyKeys": ["topology.hostpath.csi/node"]});
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "valid",
                node(json!([d("a.example.com", "n1"), d("b.example.com", "n1")])),
                vec![],
            ),
            (
                "duplicate driver",
                node(json!([d("a.example.com", "n1"), d("a.example.com", "n1")])),
                vec!["spec.drivers[1].name: Duplicate value: \"a.example.com\""],
            ),
            (
                "no node id",
                node(json!([d("a.example.com", "")])),
                vec!["spec.drivers[0].nodeID: Required value"],
            ),
            (
                "long node id",
                node(json!([d("a.example.com", &"x".repeat(193))])),
                vec![],
            ),
            (
                "topology keys",
                node(
                    json!([{"name": "a.example.com", "nodeID": "n", "topologyKeys": ["k", "k", "a b"]}]),
                ),
                vec![
                    "spec.drivers[0]: Duplicate value: \"k\"",
                    "spec.drivers[0]: Invalid value: \"a b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                ],
            ),
            (
                "negative allocatable",
                node(
                    json!([{"name": "a.example.com", "nodeID": "n", "allocatable": {"count": -1}}]),
                ),
                vec![
                    "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0",
                ],
            ),
        ];
        for (name, obj, want) in cases {
            let got = messages(&validate_csi_node(&obj, None));
            if name == "long node id" {
                assert_eq!(got.len(), 1, "{got:?}");
                assert!(
                    got[0].ends_with("must be 192 characters or less"),
                    "{got:?}"
                );
                continue;
            }
            assert_eq!(got, want, "{name}");
        }
        let old = node(json!([d("a.example.com", "n1")]));
        let added = node(json!([d("a.example.com", "n1"), d("b.example.com", "n1")]));
        assert_eq!(
            messages(&validate_csi_node(&added, Some(&old))),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(&validate_csi_node(&node(json!([])), Some(&old))),
            Vec::<String>::new()
        );
        let changed = node(json!([d("a.example.com", "n2")]));
        let got = messages(&validate_csi_node(&changed, Some(&old)));
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with("spec.drivers: Invalid value: {"),
            "{got:?}"
        );
        assert!(got[0].ends_with("}: field is immutable"), "{got:?}");
    }

    #[test]
    fn volume_attachment_table() {
        let va = || {
            json!({
                "metadata": {"name": "csi-123"},
                "spec": {"attacher": "hostpath.csi.k8s.io", "nodeName": "node-1", "source": {"persistentVolumeName": "pv1"}}
            })
        };
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("valid", va(), vec![]),
            (
                "no attacher",
                with(va(), "spec.attacher", json!("")),
                vec!["spec.attacher: Required value"],
            ),
            (
                "no source",
                with(va(), "spec.source", json!({})),
                vec![
                    "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
                ],
            ),
            (
                "two sources",
                with(
                    va(),
                    "spec.source.inlineVolumeSpec",
                    json!({"csi": {"driver": "d", "volumeHandle": "h"}}),
                ),
                vec![
                    "spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
                ],
            ),
            (
                "empty pv name",
                with(va(), "spec.source.persistentVolumeName", json!("")),
                vec![
                    "spec.source.persistentVolumeName: Required value: must specify non empty persistentVolumeName",
                ],
            ),
            (
                "inline spec rules",
                with(
                    va(),
                    "spec.source",
                    json!({"inlineVolumeSpec": {"capacity": {"storage": "1Gi"}, "storageClassName": "x", "hostPath": {"path": "/x"}}}),
                ),
                vec![
                    "spec.source.inlineVolumeSpec.capacity: Forbidden: may not be specified in the context of inline volumes",
                    "spec.source.inlineVolumeSpec.csi: Required value: has to be specified in the context of inline volumes",
                    "spec.source.inlineVolumeSpec.storageClassName: Forbidden: may not be specified in the context of inline volumes",
                ],
            ),
            (
                "bad node name",
                with(va(), "spec.nodeName", json!("Node_1")),
                vec![
                    "spec.nodeName: Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
        ];
        for (name, obj, want) in cases {
            assert_eq!(
                messages(&validate_volume_attachment(&obj, None)),
                want,
                "{name}"
            );
        }
        let failed = with(
            va(),
            "status",
            json!({"attached": false, "attachError": {"errorCode": -1}}),
        );
        assert_eq!(
            messages(&validate_volume_attachment(&failed, None)),
            vec![
                "status.attachError.errorCode: Invalid value: -1: must be between 0 and 2147483647, inclusive"
            ]
        );
        let status = with(va(), "status", json!({"attached": true}));
        assert_eq!(
            messages(&validate_volume_attachment(&status, Some(&va()))),
            Vec::<String>::new()
        );
        let moved = with(va(), "spec.nodeName", json!("node-2"));
        let got = messages(&validate_volume_attachment(&moved, Some(&va())));
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("spec: Invalid value: {"), "{got:?}");
        assert!(got[0].ends_with("}: field is immutable"), "{got:?}");
    }
}
