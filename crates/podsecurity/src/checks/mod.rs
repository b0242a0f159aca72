//! One module per upstream check (`policy/check_<id>.go`), each with its
//! versions and its table of failing and passing pods.

mod allow_privilege_escalation;
mod app_armor_profile;
mod capabilities_baseline;
mod capabilities_restricted;
mod host_namespaces;
mod host_path_volumes;
mod host_ports;
mod privileged;
mod proc_mount;
mod restricted_volumes;
mod run_as_non_root;
mod run_as_user;
mod se_linux_options;
mod seccomp_profile_baseline;
mod seccomp_profile_restricted;
mod sysctls;
mod windows_host_process;

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::api::Level;
use crate::registry::CheckResult;

/// A check over a pod's `metadata` and `spec` (upstream's `CheckPodFn`).
pub type CheckPodFn = fn(&Value, &Value) -> CheckResult;

/// A check's behaviour from a version on (upstream's `VersionedCheck`).
#[derive(Debug, Clone, Copy)]
pub struct VersionedCheck {
    /// The `v1.N` minor from which this behaviour applies.
    pub minimum_version: u32,
    pub check_pod: CheckPodFn,
    /// Baseline checks this restricted check replaces at this version.
    pub override_check_ids: &'static [&'static str],
}

/// A check, by upstream's ID (upstream's `Check`).
#[derive(Debug, Clone)]
pub struct Check {
    pub id: &'static str,
    pub level: Level,
    /// Strictly increasing minimum versions.
    pub versions: Vec<VersionedCheck>,
}

/// Upstream's default checks (as of Kubernetes 1.33).
pub fn all() -> Vec<Check> {
    vec![
        allow_privilege_escalation::check(),
        app_armor_profile::check(),
        capabilities_baseline::check(),
        capabilities_restricted::check(),
        host_namespaces::check(),
        host_path_volumes::check(),
        host_ports::check(),
        privileged::check(),
        proc_mount::check(),
        restricted_volumes::check(),
        run_as_non_root::check(),
        run_as_user::check(),
        se_linux_options::check(),
        seccomp_profile_baseline::check(),
        seccomp_profile_restricted::check(),
        sysctls::check(),
        windows_host_process::check(),
    ]
}

fn versioned(minimum_version: u32, check_pod: CheckPodFn) -> VersionedCheck {
    VersionedCheck {
        minimum_version,
        check_pod,
        override_check_ids: &[],
    }
}

/// Upstream's `visitContainers`: init containers, containers, then ephemeral
/// containers.
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |k| spec.get(k).and_then(Value::as_array).into_iter().flatten())
}

fn name(container: &Value) -> &str {
    container.get("name").and_then(Value::as_str).unwrap_or("")
}

/// The container's `securityContext` (None when unset).
fn security_context(container: &Value) -> Option<&Map<String, Value>> {
    container.get("securityContext").and_then(Value::as_object)
}

/// The pod's `spec.securityContext`.
fn pod_security_context(spec: &Value) -> Option<&Map<String, Value>> {
    spec.get("securityContext").and_then(Value::as_object)
}

/// `obj[a][b]...` as a string ("" when unset, as Go's zero value).
fn str_at<'a>(obj: Option<&'a Map<String, Value>>, path: &[&str]) -> Option<&'a str> {
    let (last, init) = path.split_last()?;
    let mut m = obj?;
    for k in init {
        m = m.get(*k)?.as_object()?;
    }
    m.get(*last)?.as_str()
}

/// `obj[a][b]...` as a bool (None when unset: Go's nil pointer).
fn bool_at(obj: Option<&Map<String, Value>>, path: &[&str]) -> Option<bool> {
    let (last, init) = path.split_last()?;
    let mut m = obj?;
    for k in init {
        m = m.get(*k)?.as_object()?;
    }
    m.get(*last)?.as_bool()
}

/// Whether `obj[a][b]...` is an object (Go's non-nil struct pointer).
fn object_at<'a>(
    obj: Option<&'a Map<String, Value>>,
    path: &[&str],
) -> Option<&'a Map<String, Value>> {
    let mut m = obj?;
    for k in path {
        m = m.get(*k)?.as_object()?;
    }
    Some(m)
}

/// The string items of `obj[key]`.
fn strings<'a>(obj: &'a Map<String, Value>, key: &str) -> Vec<&'a str> {
    obj.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The pod's annotations.
fn annotations(metadata: &Value) -> Option<&Map<String, Value>> {
    metadata.get("annotations").and_then(Value::as_object)
}

/// Upstream's `joinQuote`: `"a", "b"` (no escaping, as upstream's).
fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let items: Vec<String> = items.into_iter().map(|s| s.as_ref().to_string()).collect();
    if items.is_empty() {
        return String::new();
    }
    format!("\"{}\"", items.join("\", \""))
}

fn pluralize(singular: &'static str, plural: &'static str, count: usize) -> &'static str {
    if count == 1 { singular } else { plural }
}

/// `container "a"` / `containers "a", "b"`.
fn containers_phrase(names: &[&str]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// A sorted set, as apimachinery's `sets.String.List()`.
type Sorted<'a> = BTreeSet<&'a str>;

/// `spec.os.name: windows`: from 1.25 the restricted Linux-only checks skip these pods.
fn is_windows(spec: &Value) -> bool {
    spec.get("os")
        .and_then(|o| o.get("name"))
        .and_then(Value::as_str)
        == Some("windows")
}

/// `spec.volumes` as (name, volume).
fn volumes(spec: &Value) -> impl Iterator<Item = (&str, &Map<String, Value>)> {
    spec.get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(|v| (v.get("name").and_then(Value::as_str).unwrap_or(""), v))
}

/// Table tests for one check function.
#[cfg(test)]
mod testing {
    use serde_json::Value;

    use super::CheckPodFn;

    /// `(what, pod {metadata, spec}, None when allowed or Some((reason, detail)))`.
    pub type Case<'a> = (&'a str, Value, Option<(&'a str, &'a str)>);

    pub fn run(f: CheckPodFn, cases: &[Case<'_>]) {
        let null = Value::Null;
        for (what, pod, want) in cases {
            let meta = pod.get("metadata").unwrap_or(&null);
            let spec = pod.get("spec").unwrap_or(&null);
            let got = f(meta, spec);
            match want {
                None => assert!(got.allowed, "{what}: {got:?}"),
                Some((reason, detail)) => {
                    assert!(!got.allowed, "{what}: allowed");
                    assert_eq!(got.forbidden_reason, *reason, "{what}");
                    assert_eq!(got.forbidden_detail, *detail, "{what}");
                }
            }
        }
    }
}
