//! The webhooks of the current Mutating/ValidatingWebhookConfigurations, in
//! upstream's order (configurations sorted by name, webhooks in the order
//! they are listed), each parsed once when the configurations change
//! (upstream's `WebhookAccessor` with its parsed selectors and REST client).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use berth_api::selector::LabelSelector;
use rustls::RootCertStore;
use serde_json::Value;

use crate::client::{self, Endpoint};

/// `timeoutSeconds` when the configuration has none (upstream's default).
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 10;
/// The longest `timeoutSeconds` upstream accepts.
pub const MAX_TIMEOUT_SECONDS: u64 = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    Fail,
    Ignore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchPolicy {
    Exact,
    Equivalent,
}

/// One `rules[]` entry (`RuleWithOperations`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    pub operations: Vec<String>,
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*` (the default).
    pub scope: String,
}

/// One `matchConditions[]` entry: a CEL expression the caller evaluates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchCondition {
    pub name: String,
    pub expression: String,
}

/// One webhook of one configuration, ready to match and call.
#[derive(Debug, Clone)]
pub struct Webhook {
    /// `<configuration>/<webhook>/<n>`: unique even when a configuration
    /// repeats a name (upstream's accessor UID, used for reinvocation).
    pub(crate) uid: String,
    pub configuration: String,
    pub name: String,
    pub rules: Vec<Rule>,
    pub failure_policy: FailurePolicy,
    pub match_policy: MatchPolicy,
    /// A selector that does not parse makes matching requests fail with 500.
    pub(crate) namespace_selector: Result<LabelSelector, String>,
    pub(crate) object_selector: Result<LabelSelector, String>,
    pub side_effects: Option<String>,
    pub timeout: Duration,
    pub admission_review_versions: Vec<String>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke_if_needed: bool,
    pub match_conditions: Vec<MatchCondition>,
    /// Where and how to call it; an unusable clientConfig is an error each
    /// call reports (upstream's "could not get REST client").
    pub(crate) endpoint: Result<Arc<Endpoint>, String>,
}

/// A snapshot of every webhook, rebuilt whenever a configuration changes.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub(crate) mutating: Vec<Arc<Webhook>>,
    pub(crate) validating: Vec<Arc<Webhook>>,
}

impl Registry {
    /// Builds the snapshot from the MutatingWebhookConfiguration and
    /// ValidatingWebhookConfiguration objects (as stored: defaulted JSON).
    /// `default_roots` verifies webhooks whose `caBundle` is empty.
    pub fn new(
        mutating: &[Value],
        validating: &[Value],
        default_roots: &Arc<RootCertStore>,
    ) -> Registry {
        Registry {
            mutating: parse_configurations(mutating, true, default_roots),
            validating: parse_configurations(validating, false, default_roots),
        }
    }

    pub fn mutating(&self) -> impl Iterator<Item = &Webhook> {
        self.mutating.iter().map(Arc::as_ref)
    }

    pub fn validating(&self) -> impl Iterator<Item = &Webhook> {
        self.validating.iter().map(Arc::as_ref)
    }

    pub fn is_empty(&self) -> bool {
        self.mutating.is_empty() && self.validating.is_empty()
    }
}

fn parse_configurations(
    configs: &[Value],
    mutating: bool,
    roots: &Arc<RootCertStore>,
) -> Vec<Arc<Webhook>> {
    let mut sorted: Vec<(&str, &Value)> = configs
        .iter()
        .map(|c| (str_at(c, &["metadata", "name"]).unwrap_or(""), c))
        .collect();
    // Stable, so configurations without names keep their relative order.
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::new();
    for (config_name, config) in sorted {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for hook in arr(config.get("webhooks")) {
            let name = str_at(hook, &["name"]).unwrap_or("");
            let n = seen.entry(name).or_insert(0);
            let uid = format!("{config_name}/{name}/{n}");
            *n += 1;
            out.push(Arc::new(parse_webhook(
                hook,
                config_name,
                uid,
                mutating,
                roots,
            )));
        }
    }
    out
}

fn parse_webhook(
    v: &Value,
    configuration: &str,
    uid: String,
    mutating: bool,
    roots: &Arc<RootCertStore>,
) -> Webhook {
    let name = str_at(v, &["name"]).unwrap_or("").to_string();
    let rules = arr(v.get("rules")).iter().map(parse_rule).collect();
    let failure_policy = match str_at(v, &["failurePolicy"]) {
        Some("Ignore") => FailurePolicy::Ignore,
        _ => FailurePolicy::Fail,
    };
    // v1 defaults matchPolicy to Equivalent; stored objects always carry it.
    let match_policy = match str_at(v, &["matchPolicy"]) {
        Some("Exact") => MatchPolicy::Exact,
        _ => MatchPolicy::Equivalent,
    };
    let timeout_seconds = v
        .get("timeoutSeconds")
        .and_then(Value::as_i64)
        .map(|t| t.clamp(1, MAX_TIMEOUT_SECONDS as i64) as u64)
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let match_conditions = arr(v.get("matchConditions"))
        .iter()
        .map(|c| MatchCondition {
            name: str_at(c, &["name"]).unwrap_or("").to_string(),
            expression: str_at(c, &["expression"]).unwrap_or("").to_string(),
        })
        .collect();
    let endpoint = parse_client_config(v.get("clientConfig"), &name, roots).map(Arc::new);
    Webhook {
        uid,
        configuration: configuration.to_string(),
        rules,
        failure_policy,
        match_policy,
        namespace_selector: selector(v.get("namespaceSelector")),
        object_selector: selector(v.get("objectSelector")),
        side_effects: str_at(v, &["sideEffects"]).map(str::to_string),
        timeout: Duration::from_secs(timeout_seconds),
        admission_review_versions: strings(v.get("admissionReviewVersions")),
        reinvoke_if_needed: mutating && str_at(v, &["reinvocationPolicy"]) == Some("IfNeeded"),
        match_conditions,
        endpoint,
        name,
    }
}

/// An absent selector selects everything: v1 defaults it to `{}`.
fn selector(v: Option<&Value>) -> Result<LabelSelector, String> {
    match v {
        None | Some(Value::Null) => Ok(LabelSelector::everything()),
        Some(s) => LabelSelector::from_meta(s).map_err(|e| e.0),
    }
}

fn parse_rule(v: &Value) -> Rule {
    Rule {
        operations: strings(v.get("operations")),
        api_groups: strings(v.get("apiGroups")),
        api_versions: strings(v.get("apiVersions")),
        resources: strings(v.get("resources")),
        scope: str_at(v, &["scope"]).unwrap_or("*").to_string(),
    }
}

/// Upstream's `ClientManager.HookClient`: a service reference wins over a
/// URL; the errors carry upstream's (doubly wrapped) texts.
fn parse_client_config(
    cc: Option<&Value>,
    webhook: &str,
    roots: &Arc<RootCertStore>,
) -> Result<Endpoint, String> {
    let cc = cc.cloned().unwrap_or(Value::Null);
    let calling = |why: &str| format!("failed calling webhook \"{webhook}\": {why}");
    let ca_bundle = match cc.get("caBundle") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| format!("illegal base64 data in caBundle: {e}"))?,
        Some(_) => return Err("caBundle must be a base64 string".to_string()),
    };
    let tls = client::tls_config(&ca_bundle, roots)?;
    if let Some(svc) = cc.get("service").filter(|s| s.is_object()) {
        let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
        let port = u16::try_from(port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("invalid service port {port}"))?;
        return Ok(Endpoint::service(
            str_at(svc, &["namespace"]).unwrap_or(""),
            str_at(svc, &["name"]).unwrap_or(""),
            port,
            str_at(svc, &["path"]).unwrap_or(""),
            tls,
        ));
    }
    let url = str_at(&cc, &["url"]).unwrap_or("");
    if url.is_empty() {
        return Err(calling(
            "webhook configuration must have either service or URL",
        ));
    }
    let u = crate::url::parse(url).map_err(|e| calling(&format!("Unparsable URL: {e}")))?;
    if u.host.is_empty() {
        return Err(calling(&format!("Unparsable URL: no host in {url:?}")));
    }
    Ok(Endpoint::url(&u, tls))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |cur, k| cur.get(k))
        .and_then(Value::as_str)
}

fn arr(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn strings(v: Option<&Value>) -> Vec<String> {
    arr(v)
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roots() -> Arc<RootCertStore> {
        Arc::new(RootCertStore::empty())
    }

    fn config(name: &str, hooks: &[&str]) -> Value {
        json!({
            "metadata": {"name": name},
            "webhooks": hooks.iter().map(|h| json!({
                "name": h,
                "clientConfig": {"url": "https://127.0.0.1:8443/x"},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            })).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn configurations_sorted_by_name_webhooks_in_order() {
        let r = Registry::new(
            &[
                config("zz", &["z1.example.com"]),
                config(
                    "aa",
                    &["a2.example.com", "a1.example.com", "a2.example.com"],
                ),
            ],
            &[],
            &roots(),
        );
        let got: Vec<(&str, &str)> = r
            .mutating()
            .map(|w| (w.name.as_str(), w.uid.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("a2.example.com", "aa/a2.example.com/0"),
                ("a1.example.com", "aa/a1.example.com/0"),
                ("a2.example.com", "aa/a2.example.com/1"),
                ("z1.example.com", "zz/z1.example.com/0"),
            ]
        );
    }

    #[test]
    fn defaults_and_bad_input_never_panic() {
        let r = Registry::new(
            &[
                json!({"metadata": {"name": "x"}, "webhooks": [
                    {"name": "a.b.c"},
                    {"name": 5, "rules": "nope", "timeoutSeconds": 500, "namespaceSelector": 3,
                     "clientConfig": {"caBundle": "!!!", "url": "https://h"}},
                    {"name": "s.b.c", "clientConfig": {"service": {"namespace": "ns", "name": "svc", "port": 70000}}},
                    "garbage",
                ]}),
                json!("not even an object"),
            ],
            &[],
            &roots(),
        );
        let hooks: Vec<&Webhook> = r.mutating().collect();
        assert_eq!(hooks.len(), 4);
        assert_eq!(hooks[0].timeout, Duration::from_secs(10));
        assert_eq!(hooks[0].failure_policy, FailurePolicy::Fail);
        assert_eq!(hooks[0].match_policy, MatchPolicy::Equivalent);
        assert!(
            hooks[0]
                .namespace_selector
                .as_ref()
                .is_ok_and(|s| s.is_empty())
        );
        assert_eq!(
            hooks[0].endpoint.as_ref().err().map(String::as_str),
            Some(
                "failed calling webhook \"a.b.c\": webhook configuration must have either service or URL"
            )
        );
        assert_eq!(hooks[1].timeout, Duration::from_secs(30));
        assert!(hooks[1].namespace_selector.is_err());
        assert!(hooks[1].endpoint.is_err());
        assert!(hooks[2].endpoint.is_err());
    }
}
