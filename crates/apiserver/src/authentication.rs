//! Authentication as kube-apiserver's union of authenticators: a verified
//! client certificate (CN user, O groups), then a bearer token (the admin
//! token, a bootstrap token, a ServiceAccount JWT); with no credentials the
//! request is anonymous (`system:anonymous`, `system:unauthenticated`) and RBAC
//! decides what it may see, unless `--anonymous-auth=false` refuses it (401).
//! A credential that is presented but not valid is 401.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_api::user::UserInfo;
use berth_authn::serviceaccount::{BoundKind, Issuer, Verified};
use http::HeaderMap;
use serde_json::Value;

use crate::objects;
use crate::rest::Rest;

/// What the connection layer learned about the client.
#[derive(Debug, Clone)]
pub enum ConnAuth {
    /// TLS: the verified client certificate's user, if any.
    Tls(Option<UserInfo>),
    /// The loopback-only plain port: trusted as admin (like the old insecure port).
    Trusted,
}

pub struct Authenticator {
    pub admin_token: String,
    /// Signs and verifies ServiceAccount tokens.
    pub issuer: Arc<Issuer>,
    /// Recently verified signatures (upstream caches token authentication the
    /// same way): what the API must still confirm (the ServiceAccount and
    /// bound object exist) is checked on every request regardless.
    verified: Mutex<HashMap<TokenKey, (Verified, Instant)>>,
    /// `--anonymous-auth`: a request without credentials is `system:anonymous`
    /// (true, upstream's default) or refused.
    anonymous: bool,
}

/// A token and the audiences it was checked for.
type TokenKey = (String, Vec<String>);

/// How long a verified signature is trusted without checking it again
/// (upstream's token cache keeps successes 10 s).
const VERIFIED_TTL: Duration = Duration::from_secs(10);
/// Most tokens remembered; the cache starts over when full.
const VERIFIED_MAX: usize = 10_000;

/// Why a token was refused: TokenReview's `status.error`; a request gets 401.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl Authenticator {
    pub fn new(admin_token: String, issuer: Arc<Issuer>, anonymous: bool) -> Self {
        Authenticator {
            admin_token,
            issuer,
            verified: Mutex::new(HashMap::new()),
            anonymous,
        }
    }

    /// The signature, issuer, audience and time checks of a JWT, remembered
    /// for [`VERIFIED_TTL`] (never past the token's own expiry).
    fn verify(&self, token: &str, audiences: &[String]) -> Result<Verified, String> {
        let now = chrono::Utc::now().timestamp();
        let key = (token.to_string(), audiences.to_vec());
        if let Ok(cache) = self.verified.lock()
            && let Some((v, at)) = cache.get(&key)
            && at.elapsed() < VERIFIED_TTL
            && v.expires_at.is_none_or(|exp| now < exp)
        {
            return Ok(v.clone());
        }
        let v = self
            .issuer
            .verify(token, now, audiences)
            .map_err(|e| e.to_string())?;
        if let Ok(mut cache) = self.verified.lock() {
            if cache.len() >= VERIFIED_MAX {
                cache.clear();
            }
            cache.insert(key, (v.clone(), Instant::now()));
        }
        Ok(v)
    }

    /// The request's user; Err is a 401.
    pub async fn authenticate(
        &self,
        rest: &Rest,
        conn: &ConnAuth,
        headers: &HeaderMap,
    ) -> Result<UserInfo, Refused> {
        match conn {
            ConnAuth::Trusted => return Ok(UserInfo::admin()),
            ConnAuth::Tls(Some(u)) => return Ok(u.clone().with_authenticated_group()),
            ConnAuth::Tls(None) => {}
        }
        let header = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match header.and_then(bearer) {
            Some(token) => self.token(rest, token, &[]).await,
            // No authenticator takes another scheme (Basic) or an empty bearer
            // token: upstream's union then falls through to anonymous.
            None if self.anonymous => Ok(UserInfo::anonymous()),
            None => Err(Refused("anonymous requests are not allowed".into())),
        }
    }

    /// The user of a bearer token (requests and TokenReview): `audiences`
    /// empty means the API server's own.
    pub async fn token(
        &self,
        rest: &Rest,
        token: &str,
        audiences: &[String],
    ) -> Result<UserInfo, Refused> {
        if constant_time_eq(token.as_bytes(), self.admin_token.as_bytes()) {
            return Ok(UserInfo::admin());
        }
        if let Some((id, secret)) = berth_authn::bootstrap::parse(token) {
            let obj = cached(
                rest,
                "secrets",
                Some("kube-system"),
                &format!("bootstrap-token-{id}"),
            )
            .ok_or_else(invalid)?;
            let now = chrono::Utc::now().timestamp();
            return berth_authn::bootstrap::authenticate(&obj, id, secret, now).map_err(|e| {
                tracing::debug!(error = %e, "bootstrap token refused");
                invalid()
            });
        }
        let verified = match self.verify(token, audiences) {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(error = %e, "bearer token refused");
                return Err(Refused(format!("[invalid bearer token, {e}]")));
            }
        };
        still_valid(rest, &verified, token)
            .map_err(|why| Refused(format!("[invalid bearer token, {why}]")))?;
        Ok(verified.user)
    }
}

fn invalid() -> Refused {
    Refused("invalid bearer token".into())
}

fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// What a signature cannot tell: the ServiceAccount and the object the token
/// is bound to must still exist, with the uids the token names (upstream's
/// `validator.Validate` with its getters), and a legacy token's Secret must
/// still hold it.
fn still_valid(rest: &Rest, v: &Verified, token: &str) -> Result<(), String> {
    let ns = v.namespace.as_str();
    let sa =
        cached(rest, "serviceaccounts", Some(ns), &v.sa_name).filter(|o| !objects::is_deleting(o));
    match sa {
        Some(sa)
            if v.sa_uid.is_empty() || objects::meta_str(&sa, "uid") == Some(v.sa_uid.as_str()) => {}
        Some(sa) => {
            return Err(format!(
                "service account UID ({}) does not match claim ({})",
                objects::meta_str(&sa, "uid").unwrap_or(""),
                v.sa_uid
            ));
        }
        None => return Err(format!("serviceaccounts \"{}\" not found", v.sa_name)),
    }
    if let Some(secret) = &v.legacy_secret {
        let s = cached(rest, "secrets", Some(ns), secret)
            .ok_or_else(|| format!("secrets \"{secret}\" not found"))?;
        if objects::is_deleting(&s) {
            return Err(format!("secrets \"{secret}\" is being deleted"));
        }
        // The Secret must still hold this very token (upstream's legacy
        // validator compares them): editing or emptying it revokes the token.
        use base64::Engine;
        let held = s
            .pointer("/data/token")
            .and_then(Value::as_str)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        if held.as_deref() != Some(token.as_bytes()) {
            return Err("token does not match the Secret's token".into());
        }
    }
    if let Some(b) = &v.bound {
        let (plural, bound_ns) = match b.kind {
            BoundKind::Pod => ("pods", Some(ns)),
            BoundKind::Secret => ("secrets", Some(ns)),
            BoundKind::Node => ("nodes", None),
        };
        let kind = plural.trim_end_matches('s');
        let obj = cached(rest, plural, bound_ns, &b.name)
            .ok_or_else(|| format!("{plural} \"{}\" not found", b.name))?;
        if objects::meta_str(&obj, "uid") != Some(b.uid.as_str()) {
            return Err(format!(
                "{kind} UID ({}) does not match claim ({})",
                objects::meta_str(&obj, "uid").unwrap_or(""),
                b.uid
            ));
        }
        if objects::is_deleting(&obj) {
            return Err(format!("{kind} \"{}\" is being deleted", b.name));
        }
    }
    Ok(())
}

/// One core/v1 object from the watch cache.
fn cached(rest: &Rest, plural: &str, ns: Option<&str>, name: &str) -> Option<Value> {
    let rt = berth_api::registry::lookup("", "v1", plural)?;
    let s = rest.cache.get(&objects::key(rt, ns, name))?;
    objects::decode_at(&s.bytes, s.mod_revision).ok()
}

pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The user of a verified client certificate: CN is the name, O the groups.
pub fn user_from_cert(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    Some(UserInfo {
        name,
        groups,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_forms() {
        let cases = [
            ("Bearer abc", Some("abc")),
            ("bearer  abc ", Some("abc")),
            ("Bearer ", None),
            ("Basic dXNlcjpwYXNz", None),
            ("abc", None),
        ];
        for (h, want) in cases {
            assert_eq!(bearer(h), want, "{h}");
        }
    }
}
