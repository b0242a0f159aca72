//! RBAC's own write rules (upstream's `policybased` REST storage for roles and
//! bindings): nobody grants permissions they do not hold. A Role or
//! ClusterRole write needs every rule it grants to be held by the writer
//! (or the `escalate` verb on it); a binding write needs the rules of its
//! role (or the `bind` verb on that role). Aggregated ClusterRoles need
//! `escalate`. system:masters and the API server itself are exempt.

use berth_api::user::UserInfo;
use berth_authz::Attributes;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::Value;

use crate::admission::{self, forbidden};
use crate::rest::Rest;
use crate::status::{ApiError, ApiResult};

fn check_attrs(user: &UserInfo, verb: &str, resource: &str, ns: &str, name: &str) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: verb.into(),
        namespace: ns.into(),
        api_group: "rbac.authorization.k8s.io".into(),
        resource: resource.into(),
        name: name.into(),
        resource_request: true,
        ..Default::default()
    }
}

/// Refuses a create or update of a Role, ClusterRole, RoleBinding or
/// ClusterRoleBinding that would grant its writer more than they have.
pub fn confirm_no_escalation(
    rest: &Rest,
    a: &admission::Attributes<'_>,
    obj: &Value,
) -> ApiResult<()> {
    if a.rt.group != "rbac.authorization.k8s.io" || a.subresource.is_some() {
        return Ok(());
    }
    let Some(user) = a.user else {
        return Ok(());
    };
    if user.in_group(berth_api::user::MASTERS) {
        return Ok(());
    }
    let ns = a.namespace.unwrap_or("");
    let authz = &rest.authorizer;
    match a.rt.kind {
        "Role" | "ClusterRole" => {
            if authz.allowed(
                rest,
                &check_attrs(user, "escalate", a.rt.plural, ns, a.name),
            ) {
                return Ok(());
            }
            if obj.get("aggregationRule").is_some_and(|r| !r.is_null()) {
                return Err(forbidden(
                    a,
                    "must have cluster-admin privileges to use the aggregationRule",
                ));
            }
            let rules: Vec<PolicyRule> = match obj.get("rules") {
                Some(r) if !r.is_null() => serde_json::from_value(r.clone())
                    .map_err(|e| ApiError::bad_request(format!("rules: {e}")))?,
                _ => Vec::new(),
            };
            authz
                .index(rest)
                .confirm_no_escalation(user, ns, &rules)
                .map_err(|e| forbidden(a, e))
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let role_kind = obj
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            let role_name = obj
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let (resource, role_ns) = match role_kind {
                "Role" => ("roles", ns),
                _ => ("clusterroles", ""),
            };
            // `bind` on the referenced role, checked in the binding's namespace
            // (so a RoleBinding to a ClusterRole may be allowed by a Role).
            if authz.allowed(rest, &check_attrs(user, "bind", resource, ns, role_name)) {
                return Ok(());
            }
            let index = authz.index(rest);
            let rules = index
                .get_role_reference_rules(role_ns, role_kind, role_name)
                .map_err(|e| forbidden(a, e))?;
            index
                .confirm_no_escalation(user, ns, &rules)
                .map_err(|e| forbidden(a, e))
        }
        _ => Ok(()),
    }
}
