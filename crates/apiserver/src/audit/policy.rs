//! The audit policy (`--audit-policy-file`, audit.k8s.io/v1 `Policy`):
//! loading with upstream's validation and messages
//! (`apiserver/pkg/audit/policy/reader.go`, `apis/audit/validation`), and the
//! rule evaluation of upstream's `policyRuleEvaluator` (`checker.go`): rules in
//! order, the first that matches decides; none matching is level None.

use std::path::Path;

use berth_api::user::UserInfo;
use berth_api::validation::{FieldError, aggregate_message, is_dns1123_subdomain};
use berth_authz::Attributes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AuditError;

/// How much of a request is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

impl Level {
    pub const NAMES: [&'static str; 4] = ["None", "Metadata", "Request", "RequestResponse"];

    fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "None" => Level::None,
            "Metadata" => Level::Metadata,
            "Request" => Level::Request,
            "RequestResponse" => Level::RequestResponse,
            _ => return None,
        })
    }
}

/// Where in its handling an event was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}

impl Stage {
    pub const NAMES: [&'static str; 4] = [
        "RequestReceived",
        "ResponseStarted",
        "ResponseComplete",
        "Panic",
    ];

    fn parse(s: &str) -> Option<Stage> {
        Some(match s {
            "RequestReceived" => Stage::RequestReceived,
            "ResponseStarted" => Stage::ResponseStarted,
            "ResponseComplete" => Stage::ResponseComplete,
            "Panic" => Stage::Panic,
            _ => return None,
        })
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of stages (`omitStages`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages(u8);

impl Stages {
    pub fn contains(self, s: Stage) -> bool {
        self.0 & s.bit() != 0
    }

    fn insert(&mut self, s: Stage) {
        self.0 |= s.bit();
    }

    fn union(self, other: Stages) -> Stages {
        Stages(self.0 | other.0)
    }
}

impl FromIterator<Stage> for Stages {
    fn from_iter<I: IntoIterator<Item = Stage>>(iter: I) -> Self {
        let mut s = Stages::default();
        for stage in iter {
            s.insert(stage);
        }
        s
    }
}

/// What the policy says about one request (upstream's `RequestAuditConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestAuditConfig {
    pub level: Level,
    pub omit_stages: Stages,
    pub omit_managed_fields: bool,
}

/// One `resources[]` entry of a rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupResources {
    pub group: String,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub level: Level,
    pub users: Vec<String>,
    pub user_groups: Vec<String>,
    pub verbs: Vec<String>,
    pub resources: Vec<GroupResources>,
    pub namespaces: Vec<String>,
    pub non_resource_urls: Vec<String>,
    /// The rule's own stages joined with the policy's, as upstream's evaluator
    /// joins them once at load.
    pub omit_stages: Stages,
    pub omit_managed_fields: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub rules: Vec<Rule>,
    pub omit_stages: Stages,
    pub omit_managed_fields: bool,
}

// The file as written. Strings stay strings until validation, which names
// the bad ones as upstream does.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPolicy {
    rules: Option<Vec<RawRule>>,
    omit_stages: Option<Vec<String>>,
    omit_managed_fields: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRule {
    level: Option<String>,
    users: Option<Vec<String>>,
    user_groups: Option<Vec<String>>,
    verbs: Option<Vec<String>>,
    resources: Option<Vec<RawGroupResources>>,
    namespaces: Option<Vec<String>>,
    #[serde(rename = "nonResourceURLs")]
    non_resource_urls: Option<Vec<String>>,
    omit_stages: Option<Vec<String>>,
    omit_managed_fields: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawGroupResources {
    group: Option<String>,
    resources: Option<Vec<String>>,
    resource_names: Option<Vec<String>>,
}

const POLICY_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "rules",
    "omitStages",
    "omitManagedFields",
];
const RULE_FIELDS: &[&str] = &[
    "level",
    "users",
    "userGroups",
    "verbs",
    "resources",
    "namespaces",
    "nonResourceURLs",
    "omitStages",
    "omitManagedFields",
];
const GROUP_RESOURCES_FIELDS: &[&str] = &["group", "resources", "resourceNames"];

/// Fields upstream's strict decoder would refuse (`unknown field "rules[0].foo"`).
fn unknown_fields(v: &Value) -> Vec<String> {
    fn check(v: &Value, known: &[&str], path: &str, out: &mut Vec<String>) {
        if let Some(m) = v.as_object() {
            for k in m.keys().filter(|k| !known.contains(&k.as_str())) {
                out.push(format!("unknown field \"{path}{k}\""));
            }
        }
    }
    let mut out = Vec::new();
    check(v, POLICY_FIELDS, "", &mut out);
    for (i, rule) in v["rules"].as_array().into_iter().flatten().enumerate() {
        check(rule, RULE_FIELDS, &format!("rules[{i}]."), &mut out);
        for (j, gr) in rule["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            check(
                gr,
                GROUP_RESOURCES_FIELDS,
                &format!("rules[{i}].resources[{j}]."),
                &mut out,
            );
        }
    }
    out
}

impl Policy {
    /// Reads and validates a policy file (upstream's `LoadPolicyFromFile`).
    pub fn load(path: &Path) -> Result<Policy, AuditError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            AuditError::Policy(format!(
                "failed to read file path {:?}: {e}",
                path.display()
            ))
        })?;
        Policy::parse(&text)
            .map_err(|e| AuditError::Policy(format!("{e}: from file {}", path.display())))
    }

    /// Parses a policy document, YAML or JSON (upstream's `LoadPolicyFromBytes`).
    pub fn parse(text: &str) -> Result<Policy, String> {
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => serde_saphyr::from_str(text)
                .map_err(|e| format!("failed decoding: error converting YAML to JSON: {e}"))?,
        };
        let Some(api_version) = v.get("apiVersion").and_then(Value::as_str) else {
            return Err(format!(
                "failed decoding: Object 'apiVersion' is missing in '{v}'"
            ));
        };
        let Some(kind) = v.get("kind").and_then(Value::as_str) else {
            return Err(format!(
                "failed decoding: Object 'Kind' is missing in '{v}'"
            ));
        };
        if api_version != "audit.k8s.io/v1" || kind != "Policy" {
            return Err(format!(
                "failed decoding: no kind {kind:?} is registered for version {api_version:?}"
            ));
        }
        // Upstream decodes strictly first and, on unknown fields only, warns
        // and decodes leniently.
        let unknown = unknown_fields(&v);
        if !unknown.is_empty() {
            tracing::warn!(
                "Audit policy contains errors, falling back to lenient decoding: strict decoding error: {}",
                unknown.join(", ")
            );
        }
        let raw: RawPolicy =
            serde_json::from_value(v).map_err(|e| format!("failed decoding: {e}"))?;
        let policy = validate(raw).map_err(|errs| aggregate_message(&errs))?;
        if policy.rules.is_empty() {
            return Err("loaded illegal policy with 0 rules".into());
        }
        Ok(policy)
    }

    /// The level, stages and managed-fields choice for a request (upstream's
    /// `EvaluatePolicyRule`). `user` is `None` for a request whose
    /// authentication failed: rules naming users or groups never match it.
    pub fn evaluate(&self, user: Option<&UserInfo>, attrs: &Attributes) -> RequestAuditConfig {
        for rule in &self.rules {
            if rule.matches(user, attrs) {
                return RequestAuditConfig {
                    level: rule.level,
                    omit_stages: rule.omit_stages,
                    omit_managed_fields: rule
                        .omit_managed_fields
                        .unwrap_or(self.omit_managed_fields),
                };
            }
        }
        RequestAuditConfig {
            level: Level::None,
            omit_stages: self.omit_stages,
            omit_managed_fields: self.omit_managed_fields,
        }
    }
}

fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|s| s == v)
}

impl Rule {
    fn matches(&self, user: Option<&UserInfo>, a: &Attributes) -> bool {
        if !self.users.is_empty() && !user.is_some_and(|u| has(&self.users, &u.name)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !user.is_some_and(|u| u.groups.iter().any(|g| has(&self.user_groups, g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, &a.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(a);
        }
        if !self.non_resource_urls.is_empty() {
            return !a.resource_request
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(&a.path, spec));
        }
        true
    }

    fn matches_resource(&self, a: &Attributes) -> bool {
        if !a.resource_request {
            return false;
        }
        // Cluster-scoped requests have the namespace "".
        if !self.namespaces.is_empty() && !has(&self.namespaces, &a.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        for gr in &self.resources {
            if gr.group != a.api_group && gr.group != "*" {
                continue;
            }
            if gr.resources.is_empty() {
                return true;
            }
            if !gr.resource_names.is_empty() && !has(&gr.resource_names, &a.name) {
                continue;
            }
            for res in &gr.resources {
                if *res == combined || res == "*" {
                    return true;
                }
                // `*/status`: that subresource of any resource.
                if !a.subresource.is_empty() && res.strip_prefix("*/") == Some(&a.subresource) {
                    return true;
                }
                // `pods/*`: the resource and every subresource of it.
                if res.strip_suffix("/*") == Some(&a.resource) {
                    return true;
                }
            }
        }
        false
    }
}

/// A `nonResourceURLs` entry: exact, `*`, or a prefix ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

fn stages(list: &[String], field: &str, errs: &mut Vec<FieldError>) -> Stages {
    let mut out = Stages::default();
    for (i, s) in list.iter().enumerate() {
        match Stage::parse(s) {
            Some(st) => out.insert(st),
            None => errs.push(FieldError::invalid(
                format!("{field}[{i}]"),
                s.as_str(),
                format!("allowed stages are {}", Stage::NAMES.join(",")),
            )),
        }
    }
    out
}

/// Upstream's `ValidatePolicy`, then the typed policy.
fn validate(raw: RawPolicy) -> Result<Policy, Vec<FieldError>> {
    let mut errs = Vec::new();
    let omit_stages = stages(
        raw.omit_stages.as_deref().unwrap_or_default(),
        "omitStages",
        &mut errs,
    );
    let mut rules = Vec::new();
    for (i, r) in raw.rules.unwrap_or_default().into_iter().enumerate() {
        let path = format!("rules[{i}]");
        let level = match r.level.as_deref().unwrap_or("") {
            "" => {
                errs.push(FieldError::required(format!("{path}.level"), ""));
                Level::None
            }
            other => Level::parse(other).unwrap_or_else(|| {
                errs.push(FieldError::not_supported(
                    format!("{path}.level"),
                    other,
                    &Level::NAMES,
                ));
                Level::None
            }),
        };
        let urls = r.non_resource_urls.unwrap_or_default();
        for (j, url) in urls.iter().enumerate() {
            if url == "*" {
                continue;
            }
            let field = format!("{path}.nonResourceURLs[{j}]");
            if !url.starts_with('/') {
                errs.push(FieldError::invalid(
                    &field,
                    url.as_str(),
                    "non-resource URL rules must begin with a '/' character",
                ));
            }
            if url.len() > 1 && url[..url.len() - 1].contains('*') {
                errs.push(FieldError::invalid(
                    &field,
                    url.as_str(),
                    "non-resource URL wildcards '*' must be the final character of the rule",
                ));
            }
        }
        let mut resources = Vec::new();
        for gr in r.resources.unwrap_or_default() {
            let gr = GroupResources {
                group: gr.group.unwrap_or_default(),
                resources: gr.resources.unwrap_or_default(),
                resource_names: gr.resource_names.unwrap_or_default(),
            };
            if !gr.group.is_empty() && gr.group != "*" {
                let msgs = is_dns1123_subdomain(&gr.group);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{path}.resources.group"),
                        gr.group.as_str(),
                        msgs.join(","),
                    ));
                }
            }
            if !gr.resource_names.is_empty() && gr.resources.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{path}.resources.resourceNames"),
                    serde_json::json!(gr.resource_names),
                    "using resourceNames requires at least one resource",
                ));
            }
            resources.push(gr);
        }
        let rule_stages = stages(
            r.omit_stages.as_deref().unwrap_or_default(),
            &format!("{path}.omitStages"),
            &mut errs,
        );
        let namespaces = r.namespaces.unwrap_or_default();
        if !urls.is_empty() && (!resources.is_empty() || !namespaces.is_empty()) {
            errs.push(FieldError::invalid(
                format!("{path}.nonResourceURLs"),
                serde_json::json!(urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        rules.push(Rule {
            level,
            users: r.users.unwrap_or_default(),
            user_groups: r.user_groups.unwrap_or_default(),
            verbs: r.verbs.unwrap_or_default(),
            resources,
            namespaces,
            non_resource_urls: urls,
            omit_stages: rule_stages.union(omit_stages),
            omit_managed_fields: r.omit_managed_fields,
        });
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(Policy {
        rules,
        omit_stages,
        omit_managed_fields: raw.omit_managed_fields.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests;
