//! CustomResourceDefinitions (apiextensions.k8s.io/v1) as served resources: what one
//! CRD contributes to the [registry](crate::registry) once it is Established: one
//! [`ResourceType`] per served version, named by `status.acceptedNames` (as
//! upstream's apiextensions-apiserver serves the accepted names, not the requested
//! ones), carrying the version's schema, printer columns and scale paths.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::Value;

use crate::registry::ResourceType;

/// What a CRD says about one served version of its resource.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomResource {
    /// The CRD's name, `<plural>.<group>`.
    pub crd_name: &'static str,
    /// The CRD's uid (a recreated CRD is a new set of resources).
    pub crd_uid: &'static str,
    /// This version's `schema.openAPIV3Schema` (`None` only for a CRD without one,
    /// which v1 validation refuses).
    pub schema: Option<Value>,
    /// `additionalPrinterColumns`, or upstream's default `Age` column.
    pub printer_columns: Vec<PrinterColumn>,
    /// `subresources.scale`.
    pub scale: Option<ScaleSubresource>,
    /// `selectableFields[*].jsonPath`, usable in field selectors besides
    /// `metadata.name` and `metadata.namespace`.
    pub selectable_fields: Vec<String>,
    /// The Warning sent with every request to a deprecated version.
    pub deprecation_warning: Option<String>,
    /// The CRD is being deleted: no new objects (upstream answers creates with 405).
    pub terminating: bool,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    /// integer, number, string, boolean or date.
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
    pub json_path: String,
}

/// `subresources.scale`: where the replica counts and selector live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSubresource {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// The finalizer that makes deleting a CRD delete its objects first.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Strings of custom resource types live as long as the process: identical ones
/// (the same CRD rebuilt after a status write) are stored once.
pub(crate) fn intern(s: &str) -> &'static str {
    static SEEN: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut guard = match SEEN.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    let set = guard.get_or_insert_with(HashSet::new);
    if let Some(s) = set.get(s) {
        return s;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

fn intern_list(v: Option<&Value>) -> &'static [&'static str] {
    let list: Vec<&'static str> = v
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(intern).collect())
        .unwrap_or_default();
    if list.is_empty() {
        return &[];
    }
    Box::leak(list.into_boxed_slice())
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(n) => cur = n,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

/// Whether the CRD's `Established` condition is True.
pub fn is_established(crd: &Value) -> bool {
    condition_true(crd, "Established")
}

/// Whether condition `type_` of a CRD is True.
pub fn condition_true(crd: &Value, type_: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(type_)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// The storage version of a CRD (the one version with `storage: true`).
pub fn storage_version(crd: &Value) -> Option<&str> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
        .get("name")?
        .as_str()
}

fn no_schema(_: &mut k8s_openapi::schemars::SchemaGenerator) -> k8s_openapi::schemars::Schema {
    k8s_openapi::schemars::Schema::default()
}

fn no_schema_name() -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed("")
}

/// Custom objects are not decoded through a typed struct: pruning and validation
/// against the CRD's schema take its place.
fn identity(v: Value) -> Result<Value, serde_json::Error> {
    Ok(v)
}

/// The resources an Established CRD serves, one per served version, in upstream's
/// version priority order. Names come from `status.acceptedNames`.
pub fn resource_types(crd: &Value) -> Vec<ResourceType> {
    let group = intern(str_at(crd, &["spec", "group"]));
    let names = crd
        .pointer("/status/acceptedNames")
        .cloned()
        .unwrap_or(Value::Null);
    let plural = intern(str_at(&names, &["plural"]));
    let kind = intern(str_at(&names, &["kind"]));
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return Vec::new();
    }
    let singular = match str_at(&names, &["singular"]) {
        "" => intern(&kind.to_ascii_lowercase()),
        s => intern(s),
    };
    let list_kind = match str_at(&names, &["listKind"]) {
        "" => intern(&format!("{kind}List")),
        s => intern(s),
    };
    let short_names = intern_list(names.get("shortNames"));
    let categories = intern_list(names.get("categories"));
    let namespaced = str_at(crd, &["spec", "scope"]) != "Cluster";
    let storage = intern(storage_version(crd).unwrap_or(""));
    let crd_name = intern(str_at(crd, &["metadata", "name"]));
    let crd_uid = intern(str_at(crd, &["metadata", "uid"]));
    let terminating = crd
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    let mut versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
                .collect()
        })
        .unwrap_or_default();
    versions.sort_by(|a, b| compare_versions(str_at(a, &["name"]), str_at(b, &["name"])));
    versions
        .into_iter()
        .filter(|v| !str_at(v, &["name"]).is_empty())
        .map(|v| {
            let version = intern(str_at(v, &["name"]));
            let sub = v.get("subresources");
            let has_status = sub.and_then(|s| s.get("status")).is_some();
            let scale = sub.and_then(|s| s.get("scale")).map(|s| ScaleSubresource {
                spec_replicas_path: str_at(s, &["specReplicasPath"]).to_string(),
                status_replicas_path: str_at(s, &["statusReplicasPath"]).to_string(),
                label_selector_path: s
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(String::from),
            });
            let subresources: &'static [&'static str] = match (has_status, scale.is_some()) {
                (true, true) => &["status", "scale"],
                (true, false) => &["status"],
                (false, true) => &["scale"],
                (false, false) => &[],
            };
            let custom = CustomResource {
                crd_name,
                crd_uid,
                schema: v.pointer("/schema/openAPIV3Schema").cloned(),
                printer_columns: printer_columns(v),
                scale,
                selectable_fields: v
                    .get("selectableFields")
                    .and_then(Value::as_array)
                    .map(|fs| {
                        fs.iter()
                            .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                            .map(|p| p.trim_start_matches('.').to_string())
                            .collect()
                    })
                    .unwrap_or_default(),
                deprecation_warning: (v.get("deprecated").and_then(Value::as_bool) == Some(true))
                    .then(
                        || match v.get("deprecationWarning").and_then(Value::as_str) {
                            Some(w) => w.to_string(),
                            // Upstream's default text.
                            None => format!("{group}/{version} {kind} is deprecated"),
                        },
                    ),
                terminating,
            };
            ResourceType {
                group,
                version,
                kind,
                list_kind,
                plural,
                singular,
                namespaced,
                short_names,
                categories,
                subresources,
                verbs: crate::registry::VERBS,
                storage_group: group,
                storage_version: storage,
                storage_plural: plural,
                roundtrip: identity,
                schema: no_schema,
                schema_name: no_schema_name,
                custom: Some(Box::leak(Box::new(custom))),
                name_rule: crate::validation::NameRule::Subdomain,
                // Status and generation follow the CRD's subresources
                // (the API server's custom resource strategy).
                kube_finalizers: false,
                tracks_generation: false,
                keeps_status: false,
                validate: None,
                strategy: crate::registry::Strategy::CustomResource,
            }
        })
        .collect()
}

/// `additionalPrinterColumns`, or upstream's default when there are none: `Age`
/// from `.metadata.creationTimestamp`.
fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    let cols: Vec<PrinterColumn> = version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| PrinterColumn {
                    name: str_at(c, &["name"]).to_string(),
                    type_: str_at(c, &["type"]).to_string(),
                    format: str_at(c, &["format"]).to_string(),
                    description: str_at(c, &["description"]).to_string(),
                    priority: c
                        .get("priority")
                        .and_then(Value::as_i64)
                        .and_then(|p| i32::try_from(p).ok())
                        .unwrap_or(0),
                    json_path: str_at(c, &["jsonPath"]).to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    if version.get("additionalPrinterColumns").is_some() {
        return cols;
    }
    vec![PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        format: String::new(),
        description: crate::printers::AGE_DESC.into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
}

/// A version name's place in upstream's ordering (`CompareKubeAwareVersionStrings`):
/// GA (`v2`, `v1`) before beta before alpha, higher numbers first within each;
/// names of another shape last, alphabetically.
fn version_key(v: &str) -> (u8, u64, u64, String) {
    let parse = |s: &str| -> Option<(u8, u64, u64)> {
        let rest = s.strip_prefix('v')?;
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return None;
        }
        let major: u64 = rest[..digits].parse().ok()?;
        if rest[..digits].starts_with('0') {
            return None;
        }
        match &rest[digits..] {
            "" => Some((0, major, 0)),
            tail => {
                let (tier, num) = if let Some(n) = tail.strip_prefix("beta") {
                    (1, n)
                } else if let Some(n) = tail.strip_prefix("alpha") {
                    (2, n)
                } else {
                    return None;
                };
                if num.is_empty()
                    || !num.bytes().all(|b| b.is_ascii_digit())
                    || num.starts_with('0')
                {
                    return None;
                }
                Some((tier, major, num.parse().ok()?))
            }
        }
    };
    match parse(v) {
        // Higher numbers first: invert them for an ascending sort.
        Some((tier, major, minor)) => (tier, u64::MAX - major, u64::MAX - minor, String::new()),
        None => (3, 0, 0, v.to_string()),
    }
}

/// Orders version names as upstream's discovery does, preferred first.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    version_key(a).cmp(&version_key(b))
}

/// `.spec.replicas` → `/spec/replicas` (the simple paths `specReplicasPath` and
/// friends allow).
pub fn json_pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .fold(String::new(), |mut acc, seg| {
            acc.push('/');
            acc.push_str(&seg.replace('~', "~0").replace('/', "~1"));
            acc
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com", "uid": "u1"},
            "spec": {
                "group": "stable.example.com",
                "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object"}},
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                     "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec", "priority": 1}]},
                    {"name": "v2", "served": false, "storage": false}
                ]
            },
            "status": {"acceptedNames": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList", "shortNames": ["ct"], "categories": ["all"]}}
        })
    }

    #[test]
    fn served_versions_become_resources_preferred_first() {
        let rts = resource_types(&crd());
        let versions: Vec<&str> = rts.iter().map(|r| r.version).collect();
        assert_eq!(versions, ["v1", "v1beta1"]);
        let v1 = &rts[0];
        assert_eq!(
            (v1.group, v1.kind, v1.plural, v1.list_kind),
            ("stable.example.com", "CronTab", "crontabs", "CronTabList")
        );
        assert!(v1.namespaced);
        assert_eq!(v1.short_names, ["ct"]);
        assert_eq!(v1.categories, ["all"]);
        assert_eq!(v1.subresources, ["status", "scale"]);
        assert_eq!(v1.storage_version, "v1");
        let c = v1.custom.unwrap();
        assert_eq!(c.printer_columns[0].json_path, ".spec.cronSpec");
        assert_eq!(
            c.scale.as_ref().unwrap().spec_replicas_path,
            ".spec.replicas"
        );
        assert!(c.deprecation_warning.is_none());
        // Without additionalPrinterColumns: upstream's Age column.
        let b = rts[1].custom.unwrap();
        assert_eq!(b.printer_columns[0].name, "Age");
        assert_eq!(
            b.deprecation_warning.as_deref(),
            Some("stable.example.com/v1beta1 CronTab is deprecated")
        );
        assert_eq!(rts[1].storage_version, "v1");
    }

    #[test]
    fn no_accepted_names_serves_nothing() {
        let mut c = crd();
        c["status"] = json!({});
        assert!(resource_types(&c).is_empty());
    }

    #[test]
    fn version_priority_as_upstream() {
        // Upstream's documented example order.
        let mut vs = vec![
            "v11alpha2",
            "foo10",
            "v10",
            "v2",
            "v1",
            "v11beta2",
            "v10beta3",
            "v3beta1",
            "v12alpha1",
            "foo1",
        ];
        vs.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            vs,
            [
                "v10",
                "v2",
                "v1",
                "v11beta2",
                "v10beta3",
                "v3beta1",
                "v12alpha1",
                "v11alpha2",
                "foo1",
                "foo10"
            ]
        );
    }

    #[test]
    fn pointers() {
        assert_eq!(json_pointer(".spec.replicas"), "/spec/replicas");
        assert_eq!(json_pointer(".status.a/b"), "/status/a~1b");
    }

    #[test]
    fn interned_strings_are_shared() {
        let a = intern("crontabs-intern-test");
        let b = intern(&String::from("crontabs-intern-test"));
        assert!(std::ptr::eq(a, b));
    }
}
