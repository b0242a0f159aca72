//! The 403 text of a denied request: upstream's `responsewriters.Forbidden`,
//! which wraps `forbiddenMessage` in `apierrors.NewForbidden`.

use berth_api::validation::go_quote;

use crate::Attributes;

/// Upstream's message for a denied request, e.g. `pods is forbidden: User "jane"
/// cannot list resource "pods" in API group "" in the namespace "dev"`, with the
/// authorizers' reason appended as `: <reason>` when there is one.
pub fn forbidden_message(a: &Attributes, reason: &str) -> String {
    // Upstream escapes HTML in its own text (not in the reason) so that an error
    // page never renders markup a client put in a path or name.
    let msg = sanitize(&message(a));
    let err = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    // apierrors.NewForbidden(GroupResource{group, resource}, name, err).
    if a.api_group.is_empty() && a.resource.is_empty() {
        return format!("forbidden: {err}");
    }
    let group_resource = if a.api_group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.api_group)
    };
    if a.name.is_empty() {
        format!("{group_resource} is forbidden: {err}")
    } else {
        format!("{group_resource} {} is forbidden: {err}", go_quote(&a.name))
    }
}

fn message(a: &Attributes) -> String {
    let user = go_quote(&a.user.name);
    if !a.resource_request {
        return format!("User {user} cannot {} path {}", a.verb, go_quote(&a.path));
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {}", go_quote(&a.namespace))
    };
    format!(
        "User {user} cannot {} resource {} in API group {} {scope}",
        a.verb,
        go_quote(&resource),
        go_quote(&a.api_group)
    )
}

fn sanitize(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_api::user::UserInfo;

    fn attrs(
        verb: &str,
        ns: &str,
        group: &str,
        resource: &str,
        sub: &str,
        name: &str,
    ) -> Attributes {
        Attributes {
            user: UserInfo::new("jane", &["system:authenticated"]),
            verb: verb.into(),
            namespace: ns.into(),
            api_group: group.into(),
            api_version: "v1".into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            resource_request: true,
            path: String::new(),
        }
    }

    fn path(verb: &str, path: &str) -> Attributes {
        Attributes {
            user: UserInfo::new("x", &[]),
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn forbidden_messages_as_upstream() {
        let cases: &[(&str, Attributes, &str, &str)] = &[
            (
                "namespaced list",
                attrs("list", "dev", "", "pods", "", ""),
                "",
                r#"pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "dev""#,
            ),
            (
                "named object",
                attrs("get", "dev", "", "pods", "", "web"),
                "",
                r#"pods "web" is forbidden: User "jane" cannot get resource "pods" in API group "" in the namespace "dev""#,
            ),
            (
                "subresource",
                attrs("get", "dev", "", "pods", "log", "web"),
                "",
                r#"pods "web" is forbidden: User "jane" cannot get resource "pods/log" in API group "" in the namespace "dev""#,
            ),
            (
                "group",
                attrs("create", "dev", "apps", "deployments", "", ""),
                "",
                r#"deployments.apps is forbidden: User "jane" cannot create resource "deployments" in API group "apps" in the namespace "dev""#,
            ),
            (
                "cluster scope",
                attrs("list", "", "", "nodes", "", ""),
                "",
                r#"nodes is forbidden: User "jane" cannot list resource "nodes" in API group "" at the cluster scope"#,
            ),
            (
                "cluster scope named with group",
                attrs(
                    "delete",
                    "",
                    "rbac.authorization.k8s.io",
                    "clusterroles",
                    "",
                    "admin",
                ),
                "",
                r#"clusterroles.rbac.authorization.k8s.io "admin" is forbidden: User "jane" cannot delete resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope"#,
            ),
            (
                "non-resource",
                path("get", "/foo"),
                "",
                r#"forbidden: User "x" cannot get path "/foo""#,
            ),
            (
                "reason appended",
                attrs("list", "dev", "", "pods", "", ""),
                r#"RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#,
                r#"pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "dev": RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found"#,
            ),
            (
                "html in the message is escaped, not in the reason",
                path("get", "/<script>&"),
                "<b>",
                r#"forbidden: User "x" cannot get path "/&lt;script&gt;&amp;": <b>"#,
            ),
            (
                "quotes in names are escaped as Go does",
                attrs("get", "dev", "", "pods", "", "a\"b"),
                "",
                r#"pods "a\"b" is forbidden: User "jane" cannot get resource "pods" in API group "" in the namespace "dev""#,
            ),
        ];
        for (name, a, reason, want) in cases {
            assert_eq!(forbidden_message(a, reason), *want, "{name}");
        }
    }
}
