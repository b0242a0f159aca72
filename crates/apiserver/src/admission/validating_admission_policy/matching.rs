//! Which requests a policy's `matchConstraints` or a binding's
//! `matchResources` select: upstream's `policy/matching` (namespace and
//! object selectors, `excludeResourceRules`, then `resourceRules` with
//! `resourceNames`) over the webhook rule matcher's semantics.
//!
//! Pure: the namespace labels come from the caller, so the rules are tested
//! without a server.

use berth_api::selector::LabelSelector;
use serde_json::{Map, Value};

/// The request as the matcher sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `CREATE`, `UPDATE`, `DELETE`.
    pub operation: &'a str,
    pub group: &'a str,
    pub version: &'a str,
    /// The plural resource.
    pub resource: &'a str,
    pub subresource: &'a str,
    /// Empty for cluster-scoped objects; a Namespace's own name for namespaces.
    pub namespace: &'a str,
    pub name: &'a str,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
}

impl Request<'_> {
    fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.resource == "namespaces"
    }
}

/// What the matcher asks of the server: a namespace's labels (`None` when it
/// does not exist).
pub trait Namespaces {
    fn labels(&self, name: &str) -> Option<Map<String, Value>>;
}

/// Upstream's `Matcher.Matches`: selectors first (a non-match ends it, an
/// error waits), then the excluded rules, then the rules; a selector error is
/// only reported for a request the rules select, so a broken selector cannot
/// refuse requests the policy never meant to see.
pub fn matches(mr: &Value, req: &Request<'_>, namespaces: &dyn Namespaces) -> Result<bool, String> {
    let ns_match = match_namespace_selector(mr.get("namespaceSelector"), req, namespaces);
    if matches!(ns_match, Ok(false)) {
        return Ok(false);
    }
    let obj_match = match_object_selector(mr.get("objectSelector"), req);
    if matches!(obj_match, Ok(false)) {
        return Ok(false);
    }
    if rules_match(arr(mr.get("excludeResourceRules")), req) {
        return Ok(false);
    }
    let rules = arr(mr.get("resourceRules"));
    if !rules.is_empty() && !rules_match(rules, req) {
        return Ok(false);
    }
    ns_match?;
    obj_match?;
    Ok(true)
}

/// Whether any named rule selects the request. `matchPolicy: Equivalent`
/// would also try the request's other versions; Berth serves each built-in
/// resource at one version (autoscaling aside), so only the request's own
/// resource is tried.
fn rules_match(rules: &[Value], req: &Request<'_>) -> bool {
    rules.iter().any(|r| {
        rule_matches(r, req) && {
            let names = arr(r.get("resourceNames"));
            names.is_empty() || names.iter().any(|n| n.as_str() == Some(req.name))
        }
    })
}

/// Upstream's `rules.Matcher`: operation, group, version, resource (with
/// subresource) and scope.
pub fn rule_matches(rule: &Value, req: &Request<'_>) -> bool {
    let any_or = |field: &str, want: &str| {
        arr(rule.get(field))
            .iter()
            .filter_map(Value::as_str)
            .any(|v| v == "*" || v == want)
    };
    let resource_ok = arr(rule.get("resources"))
        .iter()
        .filter_map(Value::as_str)
        .any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == req.resource) && (sub == "*" || sub == req.subresource)
        });
    let scope_ok = match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "" | "*" => true,
        // A Namespace is cluster-scoped although its requests carry its name.
        "Cluster" => req.is_namespace() || req.namespace.is_empty(),
        "Namespaced" => !req.is_namespace() && !req.namespace.is_empty(),
        _ => false,
    };
    any_or("operations", req.operation)
        && any_or("apiGroups", req.group)
        && any_or("apiVersions", req.version)
        && resource_ok
        && scope_ok
}

/// `namespaceSelector`: cluster-scoped objects other than namespaces always
/// match; a namespace being created or updated is matched by its new labels,
/// anything else by its namespace's stored labels.
fn match_namespace_selector(
    selector: Option<&Value>,
    req: &Request<'_>,
    namespaces: &dyn Namespaces,
) -> Result<bool, String> {
    if req.namespace.is_empty() && !req.is_namespace() {
        return Ok(true);
    }
    let selector = parse_selector(selector)?;
    if selector.is_empty() {
        return Ok(true);
    }
    if req.is_namespace()
        && req.subresource.is_empty()
        && matches!(req.operation, "CREATE" | "UPDATE")
    {
        return Ok(selector.matches(&labels_of(req.object)));
    }
    match namespaces.labels(req.namespace) {
        Some(labels) => Ok(selector.matches(&labels)),
        None => Err(format!("namespaces \"{}\" not found", req.namespace)),
    }
}

/// `objectSelector`: the new or the old object's labels.
fn match_object_selector(selector: Option<&Value>, req: &Request<'_>) -> Result<bool, String> {
    let selector = parse_selector(selector)?;
    if selector.is_empty() {
        return Ok(true);
    }
    let hit = |o: Option<&Value>| o.is_some() && selector.matches(&labels_of(o));
    Ok(hit(req.object) || hit(req.old_object))
}

/// An absent selector is upstream's default `{}`: everything.
fn parse_selector(selector: Option<&Value>) -> Result<LabelSelector, String> {
    match selector {
        None | Some(Value::Null) => Ok(LabelSelector::everything()),
        Some(s) => LabelSelector::from_meta(s).map_err(|e| e.0),
    }
}

fn labels_of(obj: Option<&Value>) -> Map<String, Value> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

pub(super) fn arr(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}
