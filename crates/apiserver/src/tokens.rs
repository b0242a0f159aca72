//! `POST serviceaccounts/<name>/token` (TokenRequest): a bound ServiceAccount
//! token, as upstream's token REST storage issues it; and the issuer's
//! discovery documents (`/.well-known/openid-configuration`, `/openid/v1/jwks`).

use berth_authn::serviceaccount::{BoundClaims, BoundKind, BoundObject, ObjectRef};
use serde_json::{Value, json};

use crate::objects;
use crate::request::ResourcePath;
use crate::rest::Reply;
use crate::server::State;
use crate::status::{ApiError, ApiResult};

/// Upstream's default `expirationSeconds`.
const DEFAULT_EXPIRATION: i64 = 3600;
/// The shortest token upstream issues (10 minutes).
const MIN_EXPIRATION: i64 = 600;
/// The longest (2^32 seconds), as upstream's validation.
const MAX_EXPIRATION: i64 = 1 << 32;
/// The lifetime the ServiceAccount admission plugin asks for: upstream then
/// issues a token valid for a year (`--service-account-extend-token-expiration`,
/// on by default) so that clients that never re-read the file keep working,
/// and records when they should have (`warnafter`).
const WARN_ONLY_EXPIRATION: i64 = 3607;
const EXTENDED_EXPIRATION: i64 = 365 * 24 * 3600;

fn invalid(field: &str, value: &str, why: &str) -> ApiError {
    let mut e = ApiError::new(
        422,
        "Invalid",
        format!(
            "TokenRequest.authentication.k8s.io \"\" is invalid: {field}: Invalid value: {value}: {why}"
        ),
    );
    e.details = Some(
        json!({"group": "authentication.k8s.io", "kind": "TokenRequest", "causes": [
        {"reason": "FieldValueInvalid", "message": format!("Invalid value: {value}: {why}"), "field": field}]}),
    );
    e
}

fn get(state: &State, plural: &str, ns: Option<&str>, name: &str) -> ApiResult<Value> {
    let rt = berth_api::registry::lookup("", "v1", plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} are not registered")))?;
    let s = state
        .rest
        .cache
        .get(&objects::key(rt, ns, name))
        .ok_or_else(|| ApiError::not_found(rt, name))?;
    objects::decode_at(&s.bytes, s.mod_revision)
}

/// Issues a token for ServiceAccount `rp.name` in `rp.namespace`.
pub async fn request(
    state: &State,
    user: &berth_api::user::UserInfo,
    rp: &ResourcePath,
    body: Value,
) -> ApiResult<Reply> {
    let ns = rp
        .namespace
        .as_deref()
        .ok_or_else(ApiError::method_not_allowed)?;
    let name = rp
        .name
        .as_deref()
        .ok_or_else(ApiError::method_not_allowed)?;
    if body
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k != "TokenRequest")
    {
        return Err(ApiError::bad_request(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ));
    }
    let sa = get(state, "serviceaccounts", Some(ns), name)?;
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let expiration = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ApiError::bad_request("spec.expirationSeconds must be an integer"))?,
    };
    if expiration < MIN_EXPIRATION {
        return Err(invalid(
            "spec.expirationSeconds",
            &expiration.to_string(),
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > MAX_EXPIRATION {
        return Err(invalid(
            "spec.expirationSeconds",
            &expiration.to_string(),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    let mut audiences: Vec<String> = crate::objects::strings(spec.get("audiences"));
    if audiences.is_empty() {
        audiences = state.authenticator.issuer.api_audiences().to_vec();
    }
    let (bound, node) = match spec.get("boundObjectRef").filter(|v| !v.is_null()) {
        None => (None, None),
        Some(r) => bound_object(state, ns, r)?,
    };
    // NodeRestriction: a node may only get tokens for pods bound to it.
    if let Some(node) = crate::node_authorizer::node_name(user) {
        let forbidden = |why: &str| {
            ApiError::forbidden(format!("serviceaccounts \"{name}\" is forbidden: {why}"))
        };
        match &bound {
            Some(b) if b.kind == BoundKind::Pod => {
                let pod = get(state, "pods", Some(ns), &b.name)?;
                if pod.pointer("/spec/nodeName").and_then(Value::as_str) != Some(node) {
                    return Err(forbidden(
                        "node requested token bound to a pod scheduled on a different node",
                    ));
                }
            }
            _ => return Err(forbidden("node requested token not bound to a pod")),
        }
    }
    let now = chrono::Utc::now().timestamp();
    let pod_bound = matches!(&bound, Some(b) if b.kind == BoundKind::Pod);
    let (lifetime, warn_after) = if pod_bound && expiration == WARN_ONLY_EXPIRATION {
        (EXTENDED_EXPIRATION, Some(now + expiration))
    } else {
        (expiration, None)
    };
    let claims = BoundClaims {
        namespace: ns.to_string(),
        sa_name: name.to_string(),
        sa_uid: objects::meta_str(&sa, "uid").unwrap_or("").to_string(),
        audiences: audiences.clone(),
        issued_at: now,
        expires_at: now + lifetime,
        bound: bound.clone(),
        node,
        warn_after,
    };
    let token = state
        .authenticator
        .issuer
        .issue(&claims)
        .map_err(|e| ApiError::internal(format!("failed to sign the token: {e}")))?;
    let expires = chrono::DateTime::from_timestamp(now + expiration, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut out_spec = json!({"audiences": audiences, "expirationSeconds": expiration});
    if let Some(r) = spec.get("boundObjectRef").filter(|v| !v.is_null()) {
        let mut r = r.clone();
        if let (Some(b), Some(m)) = (&bound, r.as_object_mut()) {
            m.insert("uid".into(), json!(b.uid));
        }
        out_spec["boundObjectRef"] = r;
    }
    Ok(Reply {
        code: 201,
        body: json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
            "spec": out_spec,
            "status": {"token": token, "expirationTimestamp": expires},
        }),
        warnings: Vec::new(),
    })
}

/// The object a token is bound to, which must exist (with the given uid, if
/// any), and for a pod its node, as upstream adds it to the claims.
fn bound_object(
    state: &State,
    ns: &str,
    r: &Value,
) -> ApiResult<(Option<BoundObject>, Option<ObjectRef>)> {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (kind, api_version, name, uid) = (s("kind"), s("apiVersion"), s("name"), s("uid"));
    let (bk, plural, obj_ns) = match (kind.as_str(), api_version.as_str()) {
        ("Pod", "v1" | "") => (BoundKind::Pod, "pods", Some(ns)),
        ("Secret", "v1" | "") => (BoundKind::Secret, "secrets", Some(ns)),
        ("Node", "v1" | "") => (BoundKind::Node, "nodes", None),
        _ => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for object of kind {kind:?} in apiVersion {api_version:?}: only Pod, Secret and Node (v1) are supported"
            )));
        }
    };
    let obj = get(state, plural, obj_ns, &name)?;
    let actual = objects::meta_str(&obj, "uid").unwrap_or("").to_string();
    if !uid.is_empty() && uid != actual {
        let rt = berth_api::registry::lookup("", "v1", plural)
            .ok_or_else(|| ApiError::internal(format!("{plural} are not registered")))?;
        return Err(ApiError::conflict_msg(
            rt,
            &name,
            &format!(
                "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    let node = if bk == BoundKind::Pod {
        obj.pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .and_then(|n| {
                get(state, "nodes", None, n)
                    .ok()
                    .map(|node| (n.to_string(), node))
            })
            .map(|(n, node)| ObjectRef {
                name: n,
                uid: objects::meta_str(&node, "uid").unwrap_or("").to_string(),
            })
    } else {
        None
    };
    Ok((
        Some(BoundObject {
            kind: bk,
            name,
            uid: actual,
        }),
        node,
    ))
}

/// The issuer's OpenID discovery document, its keys under this server's URL.
pub fn openid_configuration(state: &State) -> Value {
    state
        .authenticator
        .issuer
        .openid_configuration(&format!("https://{}", state.server_address))
}

pub fn jwks(state: &State) -> Value {
    state.authenticator.issuer.jwks()
}
