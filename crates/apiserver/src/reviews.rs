//! The review endpoints: answered from the request, never stored.
//! - authentication.k8s.io/v1 `SelfSubjectReview` (`kubectl auth whoami`) and
//!   `TokenReview` (is this token valid, and whose is it?);
//! - authorization.k8s.io/v1 `SelfSubjectAccessReview` (`kubectl auth can-i`),
//!   `SubjectAccessReview`, `LocalSubjectAccessReview` and
//!   `SelfSubjectRulesReview` (`kubectl auth can-i --list`).

use std::collections::BTreeMap;

use berth_api::user::UserInfo;
use berth_authz::{Attributes, Decision};
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Map, Value, json};

use crate::request::ResourcePath;
use crate::rest::Reply;
use crate::server::State;
use crate::status::{ApiError, ApiResult};

/// Answers a POST to a review resource by `user`.
pub async fn serve(
    state: &State,
    user: &UserInfo,
    rp: &ResourcePath,
    body: Value,
) -> ApiResult<Reply> {
    let rt = rp.rt;
    let decoded = crate::decode::decode_object(rt, body, crate::decode::FieldValidation::Ignore)?;
    let mut obj = decoded.obj;
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let status = match rt.kind {
        "SelfSubjectReview" => json!({"userInfo": user_info(user)}),
        "TokenReview" => token_review(state, &spec).await?,
        "SelfSubjectAccessReview" => {
            let a = access_attributes(rt, user.clone(), &spec, None)?;
            access_status(state, &a)
        }
        "SubjectAccessReview" => {
            let a = access_attributes(rt, subject(&spec), &spec, None)?;
            access_status(state, &a)
        }
        "LocalSubjectAccessReview" => {
            let ns = rp.namespace.as_deref().unwrap_or_default();
            let a = access_attributes(rt, subject(&spec), &spec, Some(ns))?;
            access_status(state, &a)
        }
        "SelfSubjectRulesReview" => {
            let ns = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
            rules_status(state, user, ns)
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    if let Some(m) = obj.as_object_mut() {
        m.insert("status".into(), status);
        m.insert("apiVersion".into(), json!(rt.api_version()));
        m.insert("kind".into(), json!(rt.kind));
        let meta = m.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("creationTimestamp".into(), Value::Null);
        }
    }
    Ok(Reply {
        code: 201,
        body: obj,
        warnings: decoded.warnings,
    })
}

/// `status.userInfo` / `status.user`: upstream's UserInfo (empty parts left out).
pub fn user_info(u: &UserInfo) -> Value {
    let mut m = Map::new();
    m.insert("username".into(), json!(u.name));
    if !u.uid.is_empty() {
        m.insert("uid".into(), json!(u.uid));
    }
    if !u.groups.is_empty() {
        m.insert("groups".into(), json!(u.groups));
    }
    if !u.extra.is_empty() {
        m.insert("extra".into(), json!(u.extra));
    }
    Value::Object(m)
}

/// The user a SubjectAccessReview asks about.
fn subject(spec: &Value) -> UserInfo {
    let strings = crate::objects::strings;
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), strings(Some(v))))
                .collect()
        })
        .unwrap_or_default();
    UserInfo {
        name: spec
            .get("user")
            .and_then(Value::as_str)
            .unwrap_or("")
            .into(),
        uid: spec.get("uid").and_then(Value::as_str).unwrap_or("").into(),
        groups: strings(spec.get("groups")),
        extra,
    }
}

/// The attributes an access review asks about; 422 as upstream's validation
/// when it asks about both kinds or neither, or a local review names another
/// namespace.
fn access_attributes(
    rt: &berth_api::registry::ResourceType,
    user: UserInfo,
    spec: &Value,
    local_ns: Option<&str>,
) -> ApiResult<Attributes> {
    let res = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let invalid = |field: &str, value: &str, why: &str| {
        let message = format!(
            "{}.{} \"\" is invalid: {field}: Invalid value: \"{value}\": {why}",
            rt.kind, rt.group
        );
        ApiError::invalid(
            rt,
            "",
            message,
            vec![
                json!({"reason": "FieldValueInvalid", "message": format!("Invalid value: \"{value}\": {why}"), "field": field}),
            ],
        )
    };
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match (res, non) {
        (Some(_), Some(_)) => Err(invalid(
            "spec.nonResourceAttributes",
            "null",
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => Err(invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        (Some(r), None) => {
            let namespace = s(r, "namespace");
            if let Some(ns) = local_ns
                && namespace != ns
            {
                return Err(invalid(
                    "spec.resourceAttributes.namespace",
                    &namespace,
                    "must match metadata.namespace",
                ));
            }
            Ok(Attributes {
                user,
                verb: s(r, "verb"),
                namespace,
                api_group: s(r, "group"),
                api_version: s(r, "version"),
                resource: s(r, "resource"),
                subresource: s(r, "subresource"),
                name: s(r, "name"),
                resource_request: true,
                path: String::new(),
            })
        }
        (None, Some(n)) => {
            if local_ns.is_some() {
                return Err(invalid(
                    "spec.nonResourceAttributes",
                    "null",
                    "disallowed on this kind of request",
                ));
            }
            Ok(Attributes {
                user,
                verb: s(n, "verb"),
                path: s(n, "path"),
                ..Default::default()
            })
        }
    }
}

fn access_status(state: &State, a: &Attributes) -> Value {
    let (d, reason) = state.authorizer.authorize(&state.rest, a);
    let mut st = json!({"allowed": d == Decision::Allow});
    if d == Decision::Deny {
        st["denied"] = json!(true);
    }
    if !reason.is_empty() {
        st["reason"] = json!(reason);
    }
    st
}

fn rules_status(state: &State, user: &UserInfo, ns: &str) -> Value {
    if user.in_group(berth_api::user::MASTERS) {
        // The privileged group may do anything anywhere, as upstream reports it.
        return json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
    }
    let r = state.authorizer.index(&state.rest).rules_for(user, ns);
    let rule = |p: &PolicyRule, non_resource: bool| {
        let mut m = Map::new();
        m.insert("verbs".into(), json!(p.verbs));
        if non_resource {
            m.insert(
                "nonResourceURLs".into(),
                json!(p.non_resource_urls.clone().unwrap_or_default()),
            );
        } else {
            m.insert(
                "apiGroups".into(),
                json!(p.api_groups.clone().unwrap_or_default()),
            );
            m.insert(
                "resources".into(),
                json!(p.resources.clone().unwrap_or_default()),
            );
            if let Some(n) = p.resource_names.as_ref().filter(|n| !n.is_empty()) {
                m.insert("resourceNames".into(), json!(n));
            }
        }
        Value::Object(m)
    };
    let mut st = json!({
        "resourceRules": r.resource_rules.iter().map(|p| rule(p, false)).collect::<Vec<_>>(),
        "nonResourceRules": r.non_resource_rules.iter().map(|p| rule(p, true)).collect::<Vec<_>>(),
        "incomplete": r.incomplete,
    });
    if !r.evaluation_error.is_empty() {
        st["evaluationError"] = json!(r.evaluation_error);
    }
    st
}

async fn token_review(state: &State, spec: &Value) -> ApiResult<Value> {
    let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
    let audiences: Vec<String> = crate::objects::strings(spec.get("audiences"));
    if token.is_empty() {
        return Ok(json!({"user": {}, "error": "token is required"}));
    }
    let want = if audiences.is_empty() {
        state.authenticator.issuer.api_audiences().to_vec()
    } else {
        audiences.clone()
    };
    Ok(
        match state.authenticator.token(&state.rest, token, &want).await {
            Ok(u) => json!({"authenticated": true, "user": user_info(&u), "audiences": want}),
            Err(e) => json!({"user": {}, "error": e.0}),
        },
    )
}
