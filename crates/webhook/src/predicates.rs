//! Which webhooks a request goes to: upstream's `predicates/rules`,
//! `predicates/namespace`, `predicates/object` and `ShouldCallHook`
//! (generic/webhook.go), with match conditions evaluated by the caller.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::attributes::{Attributes, GroupVersionResource, Hooks, MatchConditionInput};
use crate::config::{FailurePolicy, MatchPolicy, Rule, Webhook};
use crate::errors::AdmissionError;
use crate::request::Invocation;

/// Upstream never sends the objects that configure admission to webhooks
/// (`IsExemptAdmissionConfigurationResource`), so that a broken webhook
/// cannot lock its own configuration.
pub(crate) fn is_exempt(attrs: &Attributes<'_>) -> bool {
    attrs.kind.group == "admissionregistration.k8s.io"
        && matches!(
            attrs.kind.kind.as_str(),
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

/// Whether `rule` matches the request, its resource replaced by `resource`
/// (upstream's `rules.Matcher`).
pub(crate) fn rule_matches(
    rule: &Rule,
    attrs: &Attributes<'_>,
    resource: &GroupVersionResource,
) -> bool {
    scope_matches(rule, attrs, resource)
        && rule
            .operations
            .iter()
            .any(|o| o == "*" || o == attrs.operation.as_str())
        && exact_or_wildcard(&rule.api_groups, &resource.group)
        && exact_or_wildcard(&rule.api_versions, &resource.version)
        && rule.resources.iter().any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == resource.resource) && (sub == "*" || sub == attrs.subresource)
        })
}

fn exact_or_wildcard(items: &[String], requested: &str) -> bool {
    items.iter().any(|i| i == "*" || i == requested)
}

fn scope_matches(rule: &Rule, attrs: &Attributes<'_>, resource: &GroupVersionResource) -> bool {
    // A Namespace is cluster-scoped although its requests carry a namespace.
    let is_namespace =
        resource.group.is_empty() && resource.version == "v1" && resource.resource == "namespaces";
    let ns = attrs.effective_namespace();
    match rule.scope.as_str() {
        "" | "*" => true,
        "Namespaced" => !is_namespace && !ns.is_empty(),
        "Cluster" => is_namespace || ns.is_empty(),
        _ => false,
    }
}

/// `namespaceSelector`: requests for cluster-scoped objects other than
/// namespaces always match; a namespace being created or updated is matched
/// by its own (new) labels; otherwise the caller supplies the labels.
/// Returns the match, or the error to report should a rule match.
pub(crate) async fn match_namespace_selector(
    hook: &Webhook,
    attrs: &Attributes<'_>,
    object: Option<&Value>,
    hooks: &dyn Hooks,
) -> Result<bool, AdmissionError> {
    let ns = attrs.effective_namespace();
    let namespaces = attrs.resource.resource == "namespaces";
    if ns.is_empty() && !namespaces {
        return Ok(true);
    }
    let selector = hook
        .namespace_selector
        .as_ref()
        .map_err(AdmissionError::internal)?;
    if selector.is_empty() {
        return Ok(true);
    }
    use crate::attributes::Operation::*;
    if namespaces && attrs.subresource.is_empty() && matches!(attrs.operation, Create | Update) {
        let obj = object.ok_or_else(|| {
            AdmissionError::internal("object does not implement the Object interfaces")
        })?;
        return Ok(selector.matches(&labels_of(obj).unwrap_or_default()));
    }
    match hooks.namespace_labels(ns).await {
        Ok(Some(labels)) => Ok(selector.matches(&labels)),
        Ok(None) => Err(AdmissionError::namespace_not_found(ns)),
        Err(e) => Err(AdmissionError::internal(e)),
    }
}

/// `objectSelector`: the new or the old object's labels.
pub(crate) fn match_object_selector(
    hook: &Webhook,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Result<bool, AdmissionError> {
    let selector = hook
        .object_selector
        .as_ref()
        .map_err(AdmissionError::internal)?;
    if selector.is_empty() {
        return Ok(true);
    }
    let matches = |o: Option<&Value>| o.and_then(labels_of).is_some_and(|l| selector.matches(&l));
    Ok(matches(object) || matches(old_object))
}

/// `metadata.labels` of an object; `None` when it is not one (upstream's
/// `meta.Accessor` fails and the selector does not match).
fn labels_of(obj: &Value) -> Option<Map<String, Value>> {
    let meta = obj.as_object()?.get("metadata");
    match meta {
        None | Some(Value::Null) => Some(Map::new()),
        Some(Value::Object(m)) => Some(match m.get("labels") {
            Some(Value::Object(l)) => l.clone(),
            _ => Map::new(),
        }),
        Some(_) => None,
    }
}

/// Upstream's `ShouldCallHook` up to (not including) match conditions: the
/// invocation when the hook applies, `None` when it does not. Selector
/// errors are only reported for requests a rule matches.
pub(crate) async fn should_call_hook(
    hook: &Webhook,
    attrs: &Attributes<'_>,
    object: Option<&Value>,
    hooks: &dyn Hooks,
) -> Result<Option<Invocation>, AdmissionError> {
    let ns_match = match_namespace_selector(hook, attrs, object, hooks).await;
    if matches!(ns_match, Ok(false)) {
        return Ok(None);
    }
    let obj_match = match_object_selector(hook, object, attrs.old_object);
    if matches!(obj_match, Ok(false)) {
        return Ok(None);
    }
    let Some(invocation) = find_invocation(hook, attrs, hooks)? else {
        return Ok(None);
    };
    ns_match?;
    obj_match?;
    Ok(Some(invocation))
}

fn find_invocation(
    hook: &Webhook,
    attrs: &Attributes<'_>,
    hooks: &dyn Hooks,
) -> Result<Option<Invocation>, AdmissionError> {
    if hook
        .rules
        .iter()
        .any(|r| rule_matches(r, attrs, attrs.resource))
    {
        return Ok(Some(Invocation {
            resource: attrs.resource.clone(),
            subresource: attrs.subresource.to_string(),
            kind: attrs.kind.clone(),
        }));
    }
    if hook.match_policy != MatchPolicy::Equivalent {
        return Ok(None);
    }
    let equivalents = hooks.equivalent_resources(attrs.resource, attrs.subresource);
    // Earlier rules first, then the caller's order of equivalents.
    for rule in &hook.rules {
        for (resource, kind) in &equivalents {
            if resource == attrs.resource {
                continue;
            }
            if rule_matches(rule, attrs, resource) {
                if kind.kind.is_empty() {
                    return Err(AdmissionError::internal(format!(
                        "unable to convert to {resource}: unknown kind"
                    )));
                }
                return Ok(Some(Invocation {
                    resource: resource.clone(),
                    subresource: attrs.subresource.to_string(),
                    kind: kind.clone(),
                }));
            }
        }
    }
    Ok(None)
}

/// Upstream's `matchconditions` matcher over the caller's evaluations: any
/// false condition skips the webhook; errors (without a false) fail the
/// request under failurePolicy Fail and skip the webhook under Ignore.
pub(crate) fn match_conditions(
    hook: &Webhook,
    attrs: &Attributes<'_>,
    request: &Value,
    hooks: &dyn Hooks,
) -> Result<bool, AdmissionError> {
    let mut errors = Vec::new();
    for c in &hook.match_conditions {
        let input = MatchConditionInput {
            configuration: &hook.configuration,
            webhook: &hook.name,
            name: &c.name,
            expression: &c.expression,
            request,
        };
        match hooks.evaluate_match_condition(&input) {
            Ok(false) => return Ok(false),
            Ok(true) => {}
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        return Ok(true);
    }
    match hook.failure_policy {
        FailurePolicy::Ignore => Ok(false),
        FailurePolicy::Fail => {
            // utilerrors.NewAggregate's text.
            let msg = if errors.len() == 1 {
                errors.remove(0)
            } else {
                format!("[{}]", errors.join(", "))
            };
            tracing::warn!(webhook = %hook.name, error = %msg, "failed evaluating match conditions, failing closed");
            Err(AdmissionError::forbidden(
                &attrs.resource.group,
                &attrs.resource.resource,
                attrs.name,
                &msg,
            ))
        }
    }
}

/// Labels as a map, for callers building [`Hooks::namespace_labels`] answers
/// from a Namespace object.
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    labels_of(obj)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| v.as_str().map(|v| (k, v.to_string())))
        .collect()
}

#[cfg(test)]
mod tests;
