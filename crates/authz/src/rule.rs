//! Whether one PolicyRule allows a request (upstream's `RuleAllows` and the
//! matchers of `pkg/apis/rbac/v1/evaluation_helpers.go`).
//!
//! These run for every rule of every applicable binding on every request, so
//! they compare borrowed strings and never build `resource/subresource`.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::Attributes;

/// `*` in verbs, apiGroups, resources and nonResourceURLs.
pub(crate) const ALL: &str = "*";

/// A rule's optional list as a slice (absent and empty mean the same).
pub(crate) fn list(field: &Option<Vec<String>>) -> &[String] {
    field.as_deref().unwrap_or(&[])
}

/// True when any of `rules` allows the request (upstream's `RulesAllow`).
pub fn rules_allow(a: &Attributes, rules: &[PolicyRule]) -> bool {
    rules.iter().any(|r| rule_allows(a, r))
}

/// True when `rule` allows the request (upstream's `RuleAllows`).
pub fn rule_allows(a: &Attributes, rule: &PolicyRule) -> bool {
    if a.resource_request {
        verb_matches(rule, &a.verb)
            && api_group_matches(rule, &a.api_group)
            && resource_matches(rule, &a.resource, &a.subresource)
            && resource_name_matches(rule, &a.name)
    } else {
        verb_matches(rule, &a.verb) && non_resource_url_matches(rule, &a.path)
    }
}

pub(crate) fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == ALL || v == verb)
}

pub(crate) fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    list(&rule.api_groups)
        .iter()
        .any(|g| g == ALL || g == group)
}

/// `*` matches anything; otherwise the rule names `resource` or
/// `resource/subresource` exactly, or `*/subresource` for any resource's
/// subresource. `pods/*` is not special: it only matches a subresource literally
/// named `*`.
pub(crate) fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    list(&rule.resources).iter().any(|r| {
        if r == ALL {
            return true;
        }
        if subresource.is_empty() {
            return r == resource;
        }
        is_joined(r, resource, subresource)
            || (r.len() == subresource.len() + 2 && r.starts_with("*/") && r.ends_with(subresource))
    })
}

/// `candidate == resource + "/" + subresource`, without building the right side.
fn is_joined(candidate: &str, resource: &str, subresource: &str) -> bool {
    candidate.len() == resource.len() + 1 + subresource.len()
        && candidate.starts_with(resource)
        && candidate.as_bytes()[resource.len()] == b'/'
        && candidate.ends_with(subresource)
}

/// An empty resourceNames list allows every name; a non-empty one never matches a
/// request without a name (list, watch of a collection, create).
pub(crate) fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = list(&rule.resource_names);
    names.is_empty() || names.iter().any(|n| n == name)
}

/// `*` matches every path, a trailing `*` is a prefix match, anything else exact.
pub(crate) fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    list(&rule.non_resource_urls).iter().any(|u| {
        u == ALL || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Option<Vec<String>> {
        if v.is_empty() {
            None
        } else {
            Some(v.iter().map(|s| s.to_string()).collect())
        }
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            api_groups: strings(groups),
            resources: strings(resources),
            resource_names: strings(names),
            non_resource_urls: None,
        }
    }

    fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            non_resource_urls: strings(urls),
            ..Default::default()
        }
    }

    fn req(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            namespace: "ns".into(),
            resource_request: true,
            ..Default::default()
        }
    }

    fn path_req(verb: &str, path: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn resource_rules_match_as_upstream() {
        let cases: &[(&str, PolicyRule, Attributes, bool)] = &[
            (
                "exact",
                rule(&["get"], &[""], &["pods"], &[]),
                req("get", "", "pods", "", "web"),
                true,
            ),
            (
                "other verb",
                rule(&["get"], &[""], &["pods"], &[]),
                req("list", "", "pods", "", ""),
                false,
            ),
            (
                "verb star",
                rule(&["*"], &[""], &["pods"], &[]),
                req("deletecollection", "", "pods", "", ""),
                true,
            ),
            (
                "other group",
                rule(&["get"], &[""], &["deployments"], &[]),
                req("get", "apps", "deployments", "", ""),
                false,
            ),
            (
                "group star",
                rule(&["get"], &["*"], &["deployments"], &[]),
                req("get", "apps", "deployments", "", ""),
                true,
            ),
            (
                "no groups matches nothing",
                rule(&["get"], &[], &["pods"], &[]),
                req("get", "", "pods", "", ""),
                false,
            ),
            (
                "resource star",
                rule(&["get"], &[""], &["*"], &[]),
                req("get", "", "pods", "log", ""),
                true,
            ),
            (
                "resource does not cover subresource",
                rule(&["get"], &[""], &["pods"], &[]),
                req("get", "", "pods", "log", ""),
                false,
            ),
            (
                "resource/subresource",
                rule(&["get"], &[""], &["pods/log"], &[]),
                req("get", "", "pods", "log", ""),
                true,
            ),
            (
                "subresource rule does not cover resource",
                rule(&["get"], &[""], &["pods/log"], &[]),
                req("get", "", "pods", "", ""),
                false,
            ),
            (
                "star/subresource",
                rule(&["get"], &["*"], &["*/scale"], &[]),
                req("get", "apps", "deployments", "scale", ""),
                true,
            ),
            (
                "star/subresource other subresource",
                rule(&["get"], &["*"], &["*/scale"], &[]),
                req("get", "apps", "deployments", "status", ""),
                false,
            ),
            (
                "star/subresource never matches the resource",
                rule(&["get"], &["*"], &["*/scale"], &[]),
                req("get", "apps", "deployments", "", ""),
                false,
            ),
            (
                "pods/star is not a wildcard",
                rule(&["get"], &[""], &["pods/*"], &[]),
                req("get", "", "pods", "log", ""),
                false,
            ),
            (
                "prefix of a joined name is not a match",
                rule(&["get"], &[""], &["pods/logs"], &[]),
                req("get", "", "pods", "log", ""),
                false,
            ),
            (
                "resourceNames hit",
                rule(&["get"], &[""], &["configmaps"], &["a", "b"]),
                req("get", "", "configmaps", "", "b"),
                true,
            ),
            (
                "resourceNames miss",
                rule(&["get"], &[""], &["configmaps"], &["a"]),
                req("get", "", "configmaps", "", "c"),
                false,
            ),
            (
                "resourceNames never match a nameless list",
                rule(&["list"], &[""], &["configmaps"], &["a"]),
                req("list", "", "configmaps", "", ""),
                false,
            ),
            (
                "resourceNames never match create",
                rule(&["create"], &[""], &["configmaps"], &["a"]),
                req("create", "", "configmaps", "", ""),
                false,
            ),
            (
                "a non-resource rule never matches a resource",
                url_rule(&["*"], &["*"]),
                req("get", "", "pods", "", ""),
                false,
            ),
        ];
        for (name, rule, attrs, want) in cases {
            assert_eq!(rule_allows(attrs, rule), *want, "{name}");
        }
    }

    #[test]
    fn non_resource_rules_match_as_upstream() {
        let cases: &[(&str, PolicyRule, Attributes, bool)] = &[
            (
                "exact",
                url_rule(&["get"], &["/healthz"]),
                path_req("get", "/healthz"),
                true,
            ),
            (
                "exact is not prefix",
                url_rule(&["get"], &["/healthz"]),
                path_req("get", "/healthz/etcd"),
                false,
            ),
            (
                "star",
                url_rule(&["get"], &["*"]),
                path_req("get", "/anything"),
                true,
            ),
            (
                "trailing star",
                url_rule(&["get"], &["/apis/*"]),
                path_req("get", "/apis/apps/v1"),
                true,
            ),
            (
                "trailing star matches its prefix",
                url_rule(&["get"], &["/apis/*"]),
                path_req("get", "/apis/"),
                true,
            ),
            (
                "trailing star needs the slash",
                url_rule(&["get"], &["/apis/*"]),
                path_req("get", "/apis"),
                false,
            ),
            (
                "bare prefix star",
                url_rule(&["get"], &["/api*"]),
                path_req("get", "/apis"),
                true,
            ),
            (
                "verb",
                url_rule(&["get"], &["/healthz"]),
                path_req("post", "/healthz"),
                false,
            ),
            (
                "verb star",
                url_rule(&["*"], &["/healthz"]),
                path_req("post", "/healthz"),
                true,
            ),
            (
                "a resource rule never matches a path",
                rule(&["*"], &["*"], &["*"], &[]),
                path_req("get", "/healthz"),
                false,
            ),
        ];
        for (name, rule, attrs, want) in cases {
            assert_eq!(rule_allows(attrs, rule), *want, "{name}");
        }
    }
}
