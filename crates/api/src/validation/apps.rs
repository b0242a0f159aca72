//! Workload controllers: Deployment, ReplicaSet, StatefulSet, DaemonSet,
//! ReplicationController, Job and CronJob.

use serde_json::{Map, Value};

use super::meta::{string_map, validate_label_selector, validate_labels};
use super::pod::validate_pod_template_spec;
use super::{
    FieldError, immutable, is_valid_percent, non_negative, opt_int, opt_obj, opt_str, semantic_eq,
};
use crate::selector::LabelSelector;

const SELECTOR_MISMATCH: &str = "`selector` does not match template `labels`";

fn spec_of(obj: &Value) -> (&Map<String, Value>, Vec<FieldError>) {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    let empty = EMPTY.get_or_init(Map::new);
    match obj.get("spec") {
        Some(Value::Object(m)) => (m, Vec::new()),
        None | Some(Value::Null) => (empty, Vec::new()),
        Some(other) => (
            empty,
            vec![FieldError::type_invalid("spec", other, "object")],
        ),
    }
}

fn template_labels(tmpl: Option<&Value>) -> Map<String, Value> {
    tmpl.and_then(|t| t.get("metadata"))
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Required, non-empty, well-formed selector; returns the parsed selector
/// (a nil selector selects nothing, as upstream's conversion does).
fn validate_selector(
    errs: &mut Vec<FieldError>,
    spec: &Map<String, Value>,
    kind_word: &str,
    required: bool,
) -> Option<LabelSelector> {
    let sel = spec.get("selector").filter(|v| !v.is_null());
    match sel {
        None => {
            if required {
                errs.push(FieldError::required("spec.selector", ""));
            }
        }
        Some(s) => {
            errs.extend(validate_label_selector(Some(s), "spec.selector"));
            let count = super::jv::obj_at(s, &["matchLabels"]).map_or(0, Map::len)
                + super::jv::arr_at(s, &["matchExpressions"]).len();
            if s.is_object() && count == 0 {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    s.clone(),
                    format!("empty selector is invalid for {kind_word}"),
                ));
            }
        }
    }
    match LabelSelector::from_meta(sel.unwrap_or(&Value::Null)) {
        Ok(s) => Some(s),
        Err(_) => {
            if let Some(s) = sel {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    s.clone(),
                    "invalid label selector",
                ));
            }
            None
        }
    }
}

/// `ValidatePodTemplateSpecForReplicaSet` and its StatefulSet/DaemonSet
/// siblings: labels must match, restartPolicy must be Always, no deadline.
fn validate_controller_template(
    errs: &mut Vec<FieldError>,
    spec: &Map<String, Value>,
    selector: Option<&LabelSelector>,
    deadline_msg: Option<&str>,
) {
    let tmpl = spec.get("template").filter(|v| !v.is_null());
    let Some(tmpl) = tmpl else {
        errs.push(FieldError::required("spec.template", ""));
        return;
    };
    if !tmpl.is_object() {
        errs.push(FieldError::type_invalid("spec.template", tmpl, "object"));
        return;
    }
    let labels = template_labels(Some(tmpl));
    if let Some(sel) = selector
        && !sel.is_empty()
        && !sel.matches(&labels)
    {
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            Value::Object(labels),
            SELECTOR_MISMATCH,
        ));
    }
    errs.extend(validate_pod_template_spec(tmpl, "spec.template"));
    let policy = super::jv::str_at(tmpl, &["spec", "restartPolicy"]).unwrap_or("");
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            policy,
            &["Always"],
        ));
    }
    if let Some(msg) = deadline_msg
        && super::jv::get(tmpl, &["spec", "activeDeadlineSeconds"]).is_some_and(|v| !v.is_null())
    {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            msg,
        ));
    }
}

fn int_or_percent_value(v: Option<&Value>) -> (i64, bool) {
    match v {
        Some(Value::String(s)) => (s.trim_end_matches('%').parse().unwrap_or(0), true),
        Some(Value::Number(n)) => (n.as_i64().unwrap_or(0), false),
        _ => (0, false),
    }
}

/// `ValidatePositiveIntOrPercent`.
fn positive_int_or_percent(errs: &mut Vec<FieldError>, v: Option<&Value>, path: &str) {
    match v {
        Some(Value::String(s)) => {
            for m in is_valid_percent(s) {
                errs.push(FieldError::invalid(path, s.as_str(), m));
            }
        }
        Some(Value::Number(_)) => non_negative(errs, v, path),
        None | Some(Value::Null) => {}
        Some(other) => errs.push(FieldError::invalid(
            path,
            other.clone(),
            "must be an integer or percentage (e.g '5%')",
        )),
    }
}

/// maxUnavailable/maxSurge as for Deployments and DaemonSets.
fn validate_rolling_update(errs: &mut Vec<FieldError>, ru: &Map<String, Value>, path: &str) {
    let mu_path = format!("{path}.maxUnavailable");
    positive_int_or_percent(errs, ru.get("maxUnavailable"), &mu_path);
    positive_int_or_percent(errs, ru.get("maxSurge"), &format!("{path}.maxSurge"));
    let (mu, mu_pct) = int_or_percent_value(ru.get("maxUnavailable"));
    let (ms, _) = int_or_percent_value(ru.get("maxSurge"));
    if mu == 0 && ms == 0 {
        errs.push(FieldError::invalid(
            &mu_path,
            ru.get("maxUnavailable").cloned().unwrap_or(Value::Null),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
    if mu_pct && mu > 100 {
        errs.push(FieldError::invalid(
            &mu_path,
            ru.get("maxUnavailable").cloned().unwrap_or(Value::Null),
            "must not be greater than 100%",
        ));
    }
}

fn selector_immutable(errs: &mut Vec<FieldError>, obj: &Value, old: Option<&Value>) {
    if let Some(old) = old {
        immutable(
            errs,
            super::jv::get(obj, &["spec", "selector"]),
            super::jv::get(old, &["spec", "selector"]),
            "spec.selector",
        );
    }
}

pub(super) fn validate_deployment(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let (spec, mut errs) = spec_of(obj);
    non_negative(&mut errs, spec.get("replicas"), "spec.replicas");
    let selector = validate_selector(&mut errs, spec, "deployment", true);
    if let Some(sel) = &selector {
        validate_controller_template(
            &mut errs,
            spec,
            Some(sel),
            Some("activeDeadlineSeconds in ReplicaSet is not Supported"),
        );
    }
    let sp = "spec.strategy";
    let strategy = opt_obj(&mut errs, spec.get("strategy"), sp);
    let stype = strategy
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let rolling = strategy
        .and_then(|s| s.get("rollingUpdate"))
        .filter(|v| !v.is_null());
    match stype {
        "Recreate" => {
            if rolling.is_some() {
                errs.push(FieldError::forbidden(
                    format!("{sp}.rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match rolling.and_then(Value::as_object) {
            Some(ru) => validate_rolling_update(&mut errs, ru, &format!("{sp}.rollingUpdate")),
            None => errs.push(FieldError::required(
                format!("{sp}.rollingUpdate"),
                "this should be defaulted and never be nil",
            )),
        },
        _ => errs.push(FieldError::not_supported(
            sp,
            strategy
                .map(|s| Value::Object(s.clone()))
                .unwrap_or(Value::Null),
            &["Recreate", "RollingUpdate"],
        )),
    }
    non_negative(
        &mut errs,
        spec.get("minReadySeconds"),
        "spec.minReadySeconds",
    );
    non_negative(
        &mut errs,
        spec.get("revisionHistoryLimit"),
        "spec.revisionHistoryLimit",
    );
    let pds_path = "spec.progressDeadlineSeconds";
    if let Some(pds) = opt_int(&mut errs, spec.get("progressDeadlineSeconds"), pds_path) {
        non_negative(&mut errs, spec.get("progressDeadlineSeconds"), pds_path);
        let min_ready = spec
            .get("minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if pds <= min_ready {
            errs.push(FieldError::invalid(
                pds_path,
                pds,
                "must be greater than minReadySeconds",
            ));
        }
    }
    selector_immutable(&mut errs, obj, old);
    errs
}

pub(super) fn validate_replica_set(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let (spec, mut errs) = spec_of(obj);
    non_negative(&mut errs, spec.get("replicas"), "spec.replicas");
    non_negative(
        &mut errs,
        spec.get("minReadySeconds"),
        "spec.minReadySeconds",
    );
    let selector = validate_selector(&mut errs, spec, "deployment", true);
    if let Some(sel) = &selector {
        validate_controller_template(
            &mut errs,
            spec,
            Some(sel),
            Some("activeDeadlineSeconds in ReplicaSet is not Supported"),
        );
    }
    selector_immutable(&mut errs, obj, old);
    errs
}

/// Spec fields a StatefulSet update may change.
const STATEFULSET_MUTABLE: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// The spec with each volumeClaimTemplate added to the pod template as the
/// claim volume the controller gives every pod, so volumeMounts naming a
/// claim template validate (upstream skips pod-spec validation here).
fn with_claim_volumes(spec: &Map<String, Value>) -> Map<String, Value> {
    let mut spec = spec.clone();
    let claims: Vec<String> = spec
        .get("volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| super::jv::str_at(c, &["metadata", "name"]))
        .map(String::from)
        .collect();
    if claims.is_empty() {
        return spec;
    }
    let Some(pod) = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    else {
        return spec;
    };
    let vols = pod
        .entry("volumes")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(vols) = vols.as_array_mut() {
        for c in claims {
            if !vols
                .iter()
                .any(|v| v.get("name").and_then(Value::as_str) == Some(&c))
            {
                vols.push(
                    serde_json::json!({"name": c, "persistentVolumeClaim": {"claimName": c}}),
                );
            }
        }
    }
    spec
}

pub(super) fn validate_stateful_set(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let (spec, mut errs) = spec_of(obj);
    let pmp = opt_str(
        &mut errs,
        spec.get("podManagementPolicy"),
        "spec.podManagementPolicy",
    )
    .unwrap_or("");
    match pmp {
        "OrderedReady" | "Parallel" => {}
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        other => errs.push(FieldError::invalid(
            "spec.podManagementPolicy",
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let us = opt_obj(&mut errs, spec.get("updateStrategy"), "spec.updateStrategy");
    let utype = us
        .and_then(|u| u.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let rolling = us
        .and_then(|u| u.get("rollingUpdate"))
        .filter(|v| !v.is_null());
    match utype {
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        "OnDelete" => {
            if let Some(r) = rolling {
                errs.push(FieldError::invalid(
                    "spec.updateStrategy.rollingUpdate",
                    r.clone(),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(r) = rolling {
                non_negative(
                    &mut errs,
                    r.get("partition"),
                    "spec.updateStrategy.rollingUpdate.partition",
                );
            }
        }
        _ => errs.push(FieldError::invalid(
            "spec.updateStrategy",
            us.map(|u| Value::Object(u.clone())).unwrap_or(Value::Null),
            "must be 'RollingUpdate' or 'OnDelete'",
        )),
    }
    non_negative(&mut errs, spec.get("replicas"), "spec.replicas");
    non_negative(
        &mut errs,
        spec.get("minReadySeconds"),
        "spec.minReadySeconds",
    );
    non_negative(
        &mut errs,
        spec.get("revisionHistoryLimit"),
        "spec.revisionHistoryLimit",
    );
    non_negative(
        &mut errs,
        spec.get("ordinals").and_then(|o| o.get("start")),
        "spec.ordinals.start",
    );
    let selector = validate_selector(&mut errs, spec, "statefulset", true);
    if let Some(sel) = &selector {
        validate_controller_template(
            &mut errs,
            &with_claim_volumes(spec),
            Some(sel),
            Some("activeDeadlineSeconds in StatefulSet is not Supported"),
        );
    }
    if let Some(old) = old {
        let strip = |v: Option<&Value>| -> Value {
            let mut m = v.and_then(Value::as_object).cloned().unwrap_or_default();
            for f in STATEFULSET_MUTABLE {
                m.remove(*f);
            }
            Value::Object(m)
        };
        if !semantic_eq(&strip(obj.get("spec")), &strip(old.get("spec"))) {
            errs.push(FieldError::forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
    }
    errs
}

pub(super) fn validate_daemon_set(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let (spec, mut errs) = spec_of(obj);
    let selector = validate_selector(&mut errs, spec, "daemonset", false);
    validate_controller_template(&mut errs, spec, selector.as_ref(), None);
    if let Some(tmpl) = spec.get("template")
        && let Some(ads) =
            super::jv::get(tmpl, &["spec", "activeDeadlineSeconds"]).filter(|v| !v.is_null())
    {
        errs.push(FieldError::invalid(
            "spec.template.spec.activeDeadlineSeconds",
            ads.clone(),
            "activeDeadlineSeconds must be nil for DaemonSets",
        ));
    }
    non_negative(
        &mut errs,
        spec.get("minReadySeconds"),
        "spec.minReadySeconds",
    );
    non_negative(
        &mut errs,
        spec.get("templateGeneration"),
        "spec.templateGeneration",
    );
    non_negative(
        &mut errs,
        spec.get("revisionHistoryLimit"),
        "spec.revisionHistoryLimit",
    );
    let us = opt_obj(&mut errs, spec.get("updateStrategy"), "spec.updateStrategy");
    let utype = us
        .and_then(|u| u.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    match utype {
        "OnDelete" => {}
        "RollingUpdate" => match us
            .and_then(|u| u.get("rollingUpdate"))
            .and_then(Value::as_object)
        {
            Some(ru) => validate_rolling_update(&mut errs, ru, "spec.updateStrategy.rollingUpdate"),
            None => errs.push(FieldError::required(
                "spec.updateStrategy.rollingUpdate",
                "this should be defaulted and never be nil",
            )),
        },
        other => errs.push(FieldError::not_supported(
            "spec.updateStrategy",
            other,
            &["OnDelete", "RollingUpdate"],
        )),
    }
    selector_immutable(&mut errs, obj, old);
    errs
}

pub(super) fn validate_replication_controller(obj: &Value) -> Vec<FieldError> {
    let (spec, mut errs) = spec_of(obj);
    non_negative(&mut errs, spec.get("replicas"), "spec.replicas");
    non_negative(
        &mut errs,
        spec.get("minReadySeconds"),
        "spec.minReadySeconds",
    );
    let pairs = string_map(&mut errs, spec.get("selector"), "spec.selector");
    if pairs.is_empty() {
        errs.push(FieldError::required("spec.selector", ""));
    }
    errs.extend(validate_labels(spec.get("selector"), "spec.selector"));
    let selector = LabelSelector::from_pairs(pairs.iter().copied());
    validate_controller_template(
        &mut errs,
        spec,
        Some(&selector),
        Some("activeDeadlineSeconds in ReplicationController is not Supported"),
    );
    errs
}

/// `ValidateJobSpec`; `path` is where the job spec sits, `needs_selector`
/// false for a CronJob's job template.
fn validate_job_spec(
    errs: &mut Vec<FieldError>,
    spec: &Map<String, Value>,
    path: &str,
    needs_selector: bool,
) {
    for f in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        non_negative(errs, spec.get(f), &format!("{path}.{f}"));
    }
    let mode_path = format!("{path}.completionMode");
    if let Some(mode) = opt_str(errs, spec.get("completionMode"), &mode_path)
        && !matches!(mode, "NonIndexed" | "Indexed")
    {
        errs.push(FieldError::not_supported(
            mode_path,
            mode,
            &["NonIndexed", "Indexed"],
        ));
    }
    let prp_path = format!("{path}.podReplacementPolicy");
    if let Some(p) = opt_str(errs, spec.get("podReplacementPolicy"), &prp_path)
        && !matches!(p, "TerminatingOrFailed" | "Failed")
    {
        errs.push(FieldError::not_supported(
            prp_path,
            p,
            &["Failed", "TerminatingOrFailed"],
        ));
    }
    let sel_path = format!("{path}.selector");
    let sel = spec.get("selector").filter(|v| !v.is_null());
    match sel {
        None if needs_selector => errs.push(FieldError::required(&sel_path, "")),
        None => {}
        Some(s) => errs.extend(validate_label_selector(Some(s), &sel_path)),
    }
    let tmpl_path = format!("{path}.template");
    let Some(tmpl) = spec.get("template").filter(|v| v.is_object()) else {
        errs.push(FieldError::required(&tmpl_path, ""));
        return;
    };
    if let Some(s) = sel
        && let Ok(selector) = LabelSelector::from_meta(s)
        && !selector.matches(&template_labels(Some(tmpl)))
    {
        errs.push(FieldError::invalid(
            format!("{tmpl_path}.metadata.labels"),
            Value::Object(template_labels(Some(tmpl))),
            SELECTOR_MISMATCH,
        ));
    }
    errs.extend(validate_pod_template_spec(tmpl, &tmpl_path));
    let policy = super::jv::str_at(tmpl, &["spec", "restartPolicy"]).unwrap_or("");
    if !matches!(policy, "OnFailure" | "Never") {
        errs.push(FieldError::not_supported(
            format!("{tmpl_path}.spec.restartPolicy"),
            policy,
            &["OnFailure", "Never"],
        ));
    }
}

pub(super) fn validate_job(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let (spec, mut errs) = spec_of(obj);
    validate_job_spec(&mut errs, spec, "spec", true);
    if let Some(old) = old {
        let get = |v: &Value, f: &str| super::jv::get(v, &["spec", f]).cloned();
        for f in [
            "completions",
            "selector",
            "completionMode",
            "podFailurePolicy",
            "backoffLimitPerIndex",
        ] {
            immutable(
                &mut errs,
                get(obj, f).as_ref(),
                get(old, f).as_ref(),
                &format!("spec.{f}"),
            );
        }
        // A suspended job that never started may still have its template changed.
        let suspended =
            super::jv::get(old, &["spec", "suspend"]).and_then(Value::as_bool) == Some(true);
        let started = super::jv::get(old, &["status", "startTime"]).is_some_and(|v| !v.is_null());
        if !suspended || started {
            immutable(
                &mut errs,
                get(obj, "template").as_ref(),
                get(old, "template").as_ref(),
                "spec.template",
            );
        }
    }
    errs
}

pub(super) fn validate_cron_job(obj: &Value) -> Vec<FieldError> {
    let (spec, mut errs) = spec_of(obj);
    let name = super::jv::str_at(obj, &["metadata", "name"]).unwrap_or("");
    if name.len() > 52 {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be no more than 52 characters",
        ));
    }
    let schedule = opt_str(&mut errs, spec.get("schedule"), "spec.schedule").unwrap_or("");
    if schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else if let Err(msg) = check_schedule(schedule) {
        errs.push(FieldError::invalid("spec.schedule", schedule, msg));
    }
    let cp = opt_str(
        &mut errs,
        spec.get("concurrencyPolicy"),
        "spec.concurrencyPolicy",
    )
    .unwrap_or("");
    match cp {
        "Allow" | "Forbid" | "Replace" => {}
        "" => errs.push(FieldError::required("spec.concurrencyPolicy", "")),
        other => errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            other,
            &["Allow", "Forbid", "Replace"],
        )),
    }
    for f in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        non_negative(&mut errs, spec.get(f), &format!("spec.{f}"));
    }
    let jt = opt_obj(&mut errs, spec.get("jobTemplate"), "spec.jobTemplate");
    let job_spec = jt.and_then(|t| t.get("spec")).and_then(Value::as_object);
    match job_spec {
        Some(js) => validate_job_spec(&mut errs, js, "spec.jobTemplate.spec", false),
        None => errs.push(FieldError::required("spec.jobTemplate.spec.template", "")),
    }
    errs
}

/// A light check of a cron schedule: five fields (or a `@` macro), each of
/// digits, `*`, `?`, `,`, `-`, `/` and month/day names.
fn check_schedule(schedule: &str) -> Result<(), String> {
    let body = schedule
        .strip_prefix("TZ=")
        .or_else(|| schedule.strip_prefix("CRON_TZ="))
        .and_then(|s| s.split_once(' ').map(|(_, rest)| rest))
        .unwrap_or(schedule);
    if let Some(m) = body.strip_prefix('@') {
        let known = [
            "yearly", "annually", "monthly", "weekly", "daily", "midnight", "hourly",
        ];
        if known.contains(&m) || m.starts_with("every ") {
            return Ok(());
        }
        return Err(format!("unrecognized descriptor: {body}"));
    }
    let fields: Vec<&str> = body.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: {}",
            fields.len(),
            body
        ));
    }
    for f in fields {
        let ok = f
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '*' | '?' | ',' | '-' | '/'));
        if !ok {
            return Err(format!("failed to parse int from {f}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_spec() -> Value {
        json!({
            "containers": [{"name": "app", "image": "nginx", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}],
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst"
        })
    }

    fn deployment() -> Value {
        json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec()},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600
            }
        })
    }

    fn set(mut v: Value, ptr: &str, x: Value) -> Value {
        if let Some(slot) = v.pointer_mut(ptr) {
            *slot = x;
        }
        v
    }

    fn msgs(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn deployment_table() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("valid", deployment(), vec![]),
            (
                "negative replicas",
                set(deployment(), "/spec/replicas", json!(-1)),
                vec!["spec.replicas: Invalid value: -1: must be greater than or equal to 0"],
            ),
            (
                "selector mismatch",
                set(
                    deployment(),
                    "/spec/template/metadata/labels",
                    json!({"app": "other"}),
                ),
                vec![
                    "spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`",
                ],
            ),
            (
                "missing selector",
                set(deployment(), "/spec/selector", Value::Null),
                vec![
                    "spec.selector: Required value",
                    "spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`",
                ],
            ),
            (
                "empty selector",
                set(deployment(), "/spec/selector", json!({})),
                vec!["spec.selector: Invalid value: {}: empty selector is invalid for deployment"],
            ),
            (
                "restart policy",
                set(
                    deployment(),
                    "/spec/template/spec/restartPolicy",
                    json!("Never"),
                ),
                vec![
                    "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
                ],
            ),
            (
                "both zero",
                set(
                    deployment(),
                    "/spec/strategy/rollingUpdate",
                    json!({"maxUnavailable": 0, "maxSurge": 0}),
                ),
                vec![
                    "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
                ],
            ),
            (
                "over 100%",
                set(
                    deployment(),
                    "/spec/strategy/rollingUpdate/maxUnavailable",
                    json!("150%"),
                ),
                vec![
                    "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%",
                ],
            ),
            (
                "recreate with rolling update",
                set(deployment(), "/spec/strategy/type", json!("Recreate")),
                vec![
                    "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'",
                ],
            ),
            (
                "deadline",
                set(deployment(), "/spec/progressDeadlineSeconds", json!(0)),
                vec![
                    "spec.progressDeadlineSeconds: Invalid value: 0: must be greater than minReadySeconds",
                ],
            ),
        ];
        for (name, obj, want) in cases {
            assert_eq!(msgs(validate_deployment(&obj, None)), want, "{name}");
        }
    }

    #[test]
    fn deployment_selector_is_immutable() {
        let old = deployment();
        let new = set(
            set(
                deployment(),
                "/spec/selector",
                json!({"matchLabels": {"app": "web2"}}),
            ),
            "/spec/template/metadata/labels",
            json!({"app": "web2"}),
        );
        assert_eq!(
            msgs(validate_deployment(&new, Some(&old))),
            vec![
                "spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web2\"}}: field is immutable"
            ]
        );
        assert!(
            validate_deployment(&set(deployment(), "/spec/replicas", json!(5)), Some(&old))
                .is_empty()
        );
    }

    #[test]
    fn full_invalid_message_for_deployment() {
        let obj = set(deployment(), "/spec/replicas", json!(-1));
        let errs =
            super::super::validate(super::super::tests::rt("apps", "Deployment"), &obj, None);
        assert_eq!(
            super::super::invalid_message("Deployment.apps", "web", &errs),
            "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
    }

    #[test]
    fn replica_set_and_rc() {
        let rs = json!({"spec": {"replicas": 2, "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": pod_spec()}}});
        assert_eq!(
            msgs(validate_replica_set(&rs, None)),
            vec![
                "spec.template.metadata.labels: Invalid value: {\"app\":\"b\"}: `selector` does not match template `labels`"
            ]
        );
        let rc = json!({"spec": {"replicas": 1, "selector": {}, "template": {"metadata": {"labels": {"app": "a"}}, "spec": pod_spec()}}});
        assert_eq!(
            msgs(validate_replication_controller(&rc)),
            vec!["spec.selector: Required value"]
        );
    }

    #[test]
    fn stateful_set_rules() {
        let sts = json!({"spec": {
            "replicas": 1, "podManagementPolicy": "OrderedReady", "serviceName": "web",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": pod_spec()}
        }});
        assert!(validate_stateful_set(&sts, None).is_empty());
        let bad = set(sts.clone(), "/spec/podManagementPolicy", json!("Random"));
        assert_eq!(
            msgs(validate_stateful_set(&bad, None)),
            vec![
                "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"
            ]
        );
        let renamed = set(sts.clone(), "/spec/serviceName", json!("other"));
        assert_eq!(
            msgs(validate_stateful_set(&renamed, Some(&sts))),
            vec![
                "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
            ]
        );
        assert!(
            validate_stateful_set(&set(sts.clone(), "/spec/replicas", json!(3)), Some(&sts))
                .is_empty()
        );
    }

    #[test]
    fn stateful_set_mounts_may_name_claim_templates() {
        let sts = |mount: &str| {
            json!({"spec": {
                "replicas": 1, "podManagementPolicy": "OrderedReady", "serviceName": "web",
                "updateStrategy": {"type": "RollingUpdate"},
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                    "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "db", "image": "postgres",
                        "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File",
                        "volumeMounts": [{"name": mount, "mountPath": "/data"}]}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"]}}]
            }})
        };
        assert_eq!(
            msgs(validate_stateful_set(&sts("data"), None)),
            Vec::<String>::new()
        );
        assert_eq!(
            msgs(validate_stateful_set(&sts("other"), None)),
            vec!["spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"other\""]
        );
    }

    #[test]
    fn daemon_set_rules() {
        let ds = json!({"spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}}, "spec": pod_spec()},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
        }});
        assert!(validate_daemon_set(&ds, None).is_empty());
        let bad = set(ds.clone(), "/spec/updateStrategy/type", json!("Sometimes"));
        assert_eq!(
            msgs(validate_daemon_set(&bad, None)),
            vec![
                "spec.updateStrategy: Unsupported value: \"Sometimes\": supported values: \"OnDelete\", \"RollingUpdate\""
            ]
        );
    }

    #[test]
    fn job_and_cron_job_rules() {
        let mut job_pod = pod_spec();
        job_pod["restartPolicy"] = json!("Never");
        let job = json!({"spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u1"}}, "spec": job_pod},
            "backoffLimit": 6, "completions": 1, "parallelism": 1
        }});
        assert!(validate_job(&job, None).is_empty());
        let always = set(
            job.clone(),
            "/spec/template/spec/restartPolicy",
            json!("Always"),
        );
        assert_eq!(
            msgs(validate_job(&always, None)),
            vec![
                "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
            ]
        );
        let more = set(job.clone(), "/spec/completions", json!(3));
        assert_eq!(
            msgs(validate_job(&more, Some(&job))),
            vec!["spec.completions: Invalid value: 3: field is immutable"]
        );

        let cj = json!({"metadata": {"name": "nightly"}, "spec": {"schedule": "0 0 * * *", "concurrencyPolicy": "Allow",
            "jobTemplate": {"spec": {"template": {"spec": set(pod_spec(), "/restartPolicy", json!("OnFailure"))}}}}});
        assert!(validate_cron_job(&cj).is_empty());
        let bad = set(
            set(cj.clone(), "/spec/schedule", json!("")),
            "/spec/concurrencyPolicy",
            json!("Sometimes"),
        );
        assert_eq!(
            msgs(validate_cron_job(&bad)),
            vec![
                "spec.schedule: Required value",
                "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
            ]
        );
        assert!(check_schedule("*/5 * * * *").is_ok());
        assert!(check_schedule("@hourly").is_ok());
        assert!(check_schedule("* * *").is_err());
    }
}
