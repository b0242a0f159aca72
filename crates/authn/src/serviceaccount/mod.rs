//! ServiceAccount tokens as kube-apiserver issues and checks them
//! (`pkg/serviceaccount`): bound tokens from the TokenRequest API, legacy
//! Secret-based tokens, and the OIDC discovery documents that let others
//! verify them.
//!
//! Tokens are ES256 JWS (ECDSA P-256, fixed-size `r || s` signatures), which
//! upstream accepts for service-account keys; the key lives in one file.

mod claims;
mod key;

#[cfg(test)]
mod tests;

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use berth_api::user::UserInfo;
use serde_json::json;

pub use crate::{Error, TokenError};
pub use claims::LEGACY_ISSUER;
pub use key::KEY_FILE;

use claims::{BoundPayload, IssuerOnly, LegacyPayload, Private, Received, Ref};
use key::SigningKey;

/// The only JWS algorithm this issuer signs or accepts.
pub const ALGORITHM: &str = "ES256";
/// go-jose's `DefaultLeeway`, which upstream's validator uses for `exp`,
/// `nbf` and `iat`.
pub const LEEWAY_SECONDS: i64 = 60;
/// Where the discovery document is served (upstream's `OpenIDConfigPath`).
pub const OPENID_CONFIG_PATH: &str = "/.well-known/openid-configuration";
/// Where the key set is served (upstream's `JWKSPath`).
pub const JWKS_PATH: &str = "/openid/v1/jwks";

pub const USERNAME_PREFIX: &str = "system:serviceaccount:";
/// Every service account is in this group.
pub const ALL_SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// Prefix of the per-namespace group, `system:serviceaccounts:<ns>`.
pub const GROUP_PREFIX: &str = "system:serviceaccounts:";

pub const POD_NAME_KEY: &str = "authentication.kubernetes.io/pod-name";
pub const POD_UID_KEY: &str = "authentication.kubernetes.io/pod-uid";
pub const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
pub const NODE_UID_KEY: &str = "authentication.kubernetes.io/node-uid";
pub const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

/// Signs and verifies this cluster's service-account tokens with one key.
pub struct Issuer {
    issuer: String,
    api_audiences: Vec<String>,
    key: SigningKey,
}

impl std::fmt::Debug for Issuer {
    // Only public facts: the private key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.issuer)
            .field("api_audiences", &self.api_audiences)
            .field("kid", &self.key.kid())
            .finish()
    }
}

/// What a bound token (TokenRequest) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundClaims {
    pub namespace: String,
    pub sa_name: String,
    pub sa_uid: String,
    /// The token's `aud`; empty means the issuer's API audiences, as the
    /// TokenRequest API defaults them.
    pub audiences: Vec<String>,
    /// Unix seconds; also the `nbf`.
    pub issued_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
    pub bound: Option<BoundObject>,
    /// The pod's node, which upstream records for pod-bound tokens. Only
    /// valid with a Pod `bound`; a token bound to a Node says so in `bound`.
    pub node: Option<ObjectRef>,
    /// Unix seconds after which upstream's kubelet-token rollout counts the
    /// token as stale (`warnafter`).
    pub warn_after: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundKind {
    Pod,
    Secret,
    Node,
}

/// The object a bound token lives and dies with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundObject {
    pub kind: BoundKind,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub name: String,
    pub uid: String,
}

/// A token whose signature, issuer, times and audience checked out. The
/// caller must still confirm against the API what upstream's validator looks
/// up: the ServiceAccount exists with `sa_uid`; `bound` exists with its uid
/// (and is not being deleted); for legacy tokens, that the Secret
/// `legacy_secret` exists and holds exactly this token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub namespace: String,
    pub sa_name: String,
    pub sa_uid: String,
    pub bound: Option<BoundObject>,
    /// The node of a pod-bound token's pod, when the token records it.
    pub node: Option<ObjectRef>,
    /// Legacy tokens: the Secret they were minted for.
    pub legacy_secret: Option<String>,
    pub jti: Option<String>,
    /// The token's audiences that the caller accepts (upstream's
    /// `Response.Audiences`: their intersection, in the token's order).
    pub audiences: Vec<String>,
    pub expires_at: Option<i64>,
    /// The user as upstream's service-account authenticator makes it, with
    /// `system:authenticated` already added.
    pub user: UserInfo,
}

impl Issuer {
    /// Loads `<dir>/service-account.key` (PKCS#8 PEM, ECDSA P-256) or creates
    /// it with mode 0600. `issuer` is the `iss` of bound tokens and the
    /// discovery issuer; `api_audiences` are the audiences assumed when a
    /// token or a caller names none (upstream's `--api-audiences`, which
    /// defaults to the issuer).
    pub fn load_or_create(
        dir: &Path,
        issuer: &str,
        api_audiences: Vec<String>,
    ) -> Result<Issuer, Error> {
        Ok(Issuer {
            issuer: issuer.to_string(),
            api_audiences,
            key: SigningKey::load_or_create(dir)?,
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }

    /// The signing key's id, as in every token header and the JWKS.
    pub fn key_id(&self) -> &str {
        self.key.kid()
    }

    /// Signs a bound token with upstream's claims (`pkg/serviceaccount.Claims`).
    pub fn issue(&self, c: &BoundClaims) -> Result<String, Error> {
        if c.expires_at < c.issued_at {
            return Err(Error::Claims(format!(
                "expires at {} before it is issued at {}",
                c.expires_at, c.issued_at
            )));
        }
        let mut private = Private {
            namespace: c.namespace.clone(),
            serviceaccount: Ref {
                name: c.sa_name.clone(),
                uid: c.sa_uid.clone(),
            },
            // Upstream writes `warnafter` only when non-zero.
            warnafter: c.warn_after.filter(|w| *w != 0),
            ..Default::default()
        };
        let as_ref = |name: &str, uid: &str| {
            Some(Ref {
                name: name.to_string(),
                uid: uid.to_string(),
            })
        };
        if let Some(b) = &c.bound {
            let r = as_ref(&b.name, &b.uid);
            match b.kind {
                BoundKind::Pod => private.pod = r,
                BoundKind::Secret => private.secret = r,
                BoundKind::Node => private.node = r,
            }
        }
        if let Some(n) = &c.node {
            // Upstream refuses the same: one bound object per token; a node
            // rides along only as the bound pod's node.
            if c.bound.as_ref().map(|b| b.kind) != Some(BoundKind::Pod) {
                return Err(Error::Claims(
                    "token can only be bound to one object type; a node is recorded only for pod-bound tokens"
                        .into(),
                ));
            }
            private.node = as_ref(&n.name, &n.uid);
        }
        let audiences = if c.audiences.is_empty() {
            &self.api_audiences
        } else {
            &c.audiences
        };
        self.sign(&BoundPayload {
            aud: audiences,
            exp: c.expires_at,
            iat: c.issued_at,
            iss: &self.issuer,
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: private,
            nbf: c.issued_at,
            sub: make_username(&c.namespace, &c.sa_name),
        })
    }

    /// Signs a legacy Secret-based token (`pkg/serviceaccount.LegacyClaims`):
    /// legacy issuer, no audience, no expiry.
    pub fn issue_legacy(
        &self,
        namespace: &str,
        sa_name: &str,
        sa_uid: &str,
        secret_name: &str,
    ) -> Result<String, Error> {
        self.sign(&LegacyPayload {
            iss: LEGACY_ISSUER,
            namespace,
            secret_name,
            sa_name,
            sa_uid,
            sub: make_username(namespace, sa_name),
        })
    }

    fn sign(&self, payload: &impl serde::Serialize) -> Result<String, Error> {
        // go-jose writes `alg` then `kid` and no `typ`; so does this.
        let header = json!({ "alg": ALGORITHM, "kid": self.key.kid() });
        let mut token = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header)?);
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(serde_json::to_vec(payload)?));
        let signature = self.key.sign(token.as_bytes())?;
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(signature));
        Ok(token)
    }

    /// Verifies a token in upstream's order (`jwtTokenAuthenticator`): issuer
    /// peeked (else not ours), JOSE header, signature with this key, audience
    /// against `audiences` (empty: the API audiences; a token without `aud`,
    /// such as a legacy one, counts as having the API audiences), then the
    /// kind's own checks: `nbf`/`exp`/`iat` with 60 s leeway for bound
    /// tokens, the legacy claims for legacy ones (which never expire).
    pub fn verify(
        &self,
        token: &str,
        now_unix: i64,
        audiences: &[String],
    ) -> Result<Verified, TokenError> {
        if token.trim_start().starts_with('{') {
            return Err(TokenError::NotJwt);
        }
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::NotJwt);
        };
        let payload = URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| TokenError::NotJwt)?;
        let iss = serde_json::from_slice::<IssuerOnly>(&payload)
            .map_err(|_| TokenError::NotJwt)?
            .iss;
        let legacy = if iss == self.issuer {
            false
        } else if iss == LEGACY_ISSUER {
            true
        } else {
            return Err(TokenError::UnknownIssuer(iss));
        };

        self.check_header(header_b64)?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature_b64)
            .map_err(|e| TokenError::Malformed(format!("signature: {e}")))?;
        let signed = &token[..header_b64.len() + 1 + payload_b64.len()];
        if signature.len() != key::SIGNATURE_LEN || !self.key.verify(signed.as_bytes(), &signature)
        {
            return Err(TokenError::BadSignature);
        }

        let claims: Received = serde_json::from_slice(&payload)
            .map_err(|e| TokenError::InvalidClaims(format!("service account token claims: {e}")))?;
        let audiences = self.check_audiences(&claims.aud, audiences)?;
        if legacy {
            validate_legacy(claims, audiences)
        } else {
            validate_bound(claims, audiences, now_unix)
        }
    }

    fn check_header(&self, header_b64: &str) -> Result<(), TokenError> {
        #[derive(serde::Deserialize)]
        struct Header {
            alg: Option<String>,
            kid: Option<String>,
            crit: Option<serde_json::Value>,
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(header_b64)
            .map_err(|e| TokenError::Malformed(format!("header: {e}")))?;
        let header: Header = serde_json::from_slice(&bytes)
            .map_err(|e| TokenError::Malformed(format!("header: {e}")))?;
        let alg = header
            .alg
            .ok_or_else(|| TokenError::Malformed("header has no alg".into()))?;
        // Only ES256, whatever the header says: `none` and HMAC (which an
        // attacker could "sign" with our public key) never reach a verifier.
        if alg != ALGORITHM {
            return Err(TokenError::UnsupportedAlgorithm(alg));
        }
        // No extension is understood, so any critical one must be refused
        // (RFC 7515 4.1.11), as go-jose does.
        if header.crit.is_some() {
            return Err(TokenError::Malformed(
                "unsupported critical header parameters".into(),
            ));
        }
        match header.kid {
            Some(kid) if !kid.is_empty() && kid != self.key.kid() => Err(TokenError::NoKeyFound),
            _ => Ok(()),
        }
    }

    /// Upstream's audience rule: the token's audiences (or the API audiences
    /// when it has none) intersected with the requested ones (or the API
    /// audiences when none are requested). An empty intersection fails,
    /// unless the issuer has no API audiences at all, as upstream.
    fn check_audiences(
        &self,
        token_auds: &[String],
        requested: &[String],
    ) -> Result<Vec<String>, TokenError> {
        let token_auds = if token_auds.is_empty() {
            &self.api_audiences
        } else {
            token_auds
        };
        let requested = if requested.is_empty() {
            &self.api_audiences
        } else {
            requested
        };
        let both: Vec<String> = token_auds
            .iter()
            .filter(|a| requested.contains(a))
            .cloned()
            .collect();
        if both.is_empty() && !self.api_audiences.is_empty() {
            return Err(TokenError::WrongAudience {
                token: token_auds.to_vec(),
                target: requested.to_vec(),
            });
        }
        Ok(both)
    }

    /// `{"keys": [..]}`, served at [`JWKS_PATH`]. Field order is go-jose's.
    pub fn jwks(&self) -> serde_json::Value {
        let point = self.key.public_point();
        debug_assert_eq!(point.len(), key::POINT_LEN);
        json!({
            "keys": [{
                "use": "sig",
                "kty": "EC",
                "kid": self.key.kid(),
                "crv": "P-256",
                "alg": ALGORITHM,
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
            }]
        })
    }

    /// Upstream's OIDC discovery document, served at [`OPENID_CONFIG_PATH`];
    /// `jwks_base` is the external `https://host[:port]` the key set is
    /// reachable under.
    pub fn openid_configuration(&self, jwks_base: &str) -> serde_json::Value {
        json!({
            "issuer": self.issuer,
            "jwks_uri": format!("{}{JWKS_PATH}", jwks_base.trim_end_matches('/')),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [ALGORITHM],
        })
    }
}

/// go-jose's `Claims.ValidateWithLeeway` time checks, in its order, with the
/// texts upstream's validator maps them to. Absent claims are not checked.
fn check_times(c: &Received, now: i64) -> Result<(), TokenError> {
    if c.nbf
        .is_some_and(|nbf| now.saturating_add(LEEWAY_SECONDS) < nbf)
    {
        return Err(TokenError::NotValidYet);
    }
    if c.exp
        .is_some_and(|exp| now.saturating_sub(LEEWAY_SECONDS) > exp)
    {
        return Err(TokenError::Expired);
    }
    if c.iat
        .is_some_and(|iat| now.saturating_add(LEEWAY_SECONDS) < iat)
    {
        return Err(TokenError::IssuedInTheFuture);
    }
    Ok(())
}

fn validate_bound(c: Received, audiences: Vec<String>, now: i64) -> Result<Verified, TokenError> {
    check_times(&c, now)?;
    let missing = |what: &str| TokenError::InvalidClaims(format!("{what} claim is missing"));
    let private = c.kubernetes.ok_or_else(|| missing("kubernetes.io"))?;
    if private.namespace.is_empty() {
        return Err(missing("namespace"));
    }
    if private.serviceaccount.name.is_empty() {
        return Err(missing("serviceaccount name"));
    }
    if private.serviceaccount.uid.is_empty() {
        return Err(missing("serviceaccount uid"));
    }
    let object = |kind, r: Ref| BoundObject {
        kind,
        name: r.name,
        uid: r.uid,
    };
    let (bound, node) = match (private.pod, private.secret, private.node) {
        (None, None, None) => (None, None),
        (Some(pod), None, node) => (
            Some(object(BoundKind::Pod, pod)),
            node.map(|n| ObjectRef {
                name: n.name,
                uid: n.uid,
            }),
        ),
        (None, Some(secret), None) => (Some(object(BoundKind::Secret, secret)), None),
        (None, None, Some(node)) => (Some(object(BoundKind::Node, node)), None),
        _ => {
            return Err(TokenError::InvalidClaims(
                "token can only be bound to one object type".into(),
            ));
        }
    };
    let jti = c.jti.filter(|j| !j.is_empty());
    let mut user = service_account_user(
        &private.namespace,
        &private.serviceaccount.name,
        &private.serviceaccount.uid,
    );
    let mut extra = |key: &str, value: &str| {
        user.extra.insert(key.to_string(), vec![value.to_string()]);
    };
    if let Some(b) = bound.as_ref().filter(|b| b.kind == BoundKind::Pod) {
        // Upstream records the pod only when both its name and uid are known.
        if !b.name.is_empty() && !b.uid.is_empty() {
            extra(POD_NAME_KEY, &b.name);
            extra(POD_UID_KEY, &b.uid);
        }
    }
    if let Some(j) = &jti {
        // Upstream's `CredentialIDForJTI`.
        extra(CREDENTIAL_ID_KEY, &format!("JTI={j}"));
    }
    let node_ref = match &bound {
        Some(b) if b.kind == BoundKind::Node => Some((b.name.as_str(), b.uid.as_str())),
        _ => node.as_ref().map(|n| (n.name.as_str(), n.uid.as_str())),
    };
    if let Some((name, uid)) = node_ref.filter(|(name, _)| !name.is_empty()) {
        extra(NODE_NAME_KEY, name);
        // The uid is optional upstream, recorded only next to a name.
        if !uid.is_empty() {
            extra(NODE_UID_KEY, uid);
        }
    }
    Ok(Verified {
        namespace: private.namespace,
        sa_name: private.serviceaccount.name,
        sa_uid: private.serviceaccount.uid,
        bound,
        node,
        legacy_secret: None,
        jti,
        audiences,
        expires_at: c.exp,
        user: user.with_authenticated_group(),
    })
}

/// Upstream's `legacyValidator` checks that need no API lookup.
fn validate_legacy(c: Received, audiences: Vec<String>) -> Result<Verified, TokenError> {
    let present = |v: Option<String>, what: &str| {
        v.filter(|s| !s.is_empty())
            .ok_or_else(|| TokenError::InvalidClaims(format!("{what} claim is missing")))
    };
    if c.sub.is_empty() {
        return Err(TokenError::InvalidClaims("sub claim is missing".into()));
    }
    let namespace = present(c.legacy_namespace, "namespace")?;
    let secret = present(c.legacy_secret_name, "secretName")?;
    let sa_name = present(c.legacy_sa_name, "serviceAccountName")?;
    let sa_uid = present(c.legacy_sa_uid, "serviceAccountUID")?;
    match parse_username(&c.sub) {
        Some((ns, name)) if ns == namespace && name == sa_name => {}
        _ => return Err(TokenError::InvalidClaims("sub claim is invalid".into())),
    }
    let user = service_account_user(&namespace, &sa_name, &sa_uid).with_authenticated_group();
    Ok(Verified {
        namespace,
        sa_name,
        sa_uid,
        bound: None,
        node: None,
        legacy_secret: Some(secret),
        jti: None,
        audiences,
        expires_at: None,
        user,
    })
}

fn service_account_user(namespace: &str, name: &str, uid: &str) -> UserInfo {
    UserInfo {
        name: make_username(namespace, name),
        uid: uid.to_string(),
        groups: vec![
            ALL_SERVICE_ACCOUNTS_GROUP.to_string(),
            format!("{GROUP_PREFIX}{namespace}"),
        ],
        extra: Default::default(),
    }
}

/// `system:serviceaccount:<namespace>:<name>` (upstream's `MakeUsername`).
pub fn make_username(namespace: &str, name: &str) -> String {
    format!("{USERNAME_PREFIX}{namespace}:{name}")
}

/// Upstream's `SplitUsername`: `system:serviceaccount:<ns>:<name>` to
/// `(ns, name)`, when the namespace is a DNS-1123 label and the name a
/// DNS-1123 subdomain; `None` for anything else.
pub fn parse_username(name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix(USERNAME_PREFIX)?;
    let (namespace, sa) = rest.split_once(':')?;
    if sa.contains(':')
        || !berth_api::validation::is_dns1123_label(namespace).is_empty()
        || !berth_api::validation::is_dns1123_subdomain(sa).is_empty()
    {
        return None;
    }
    Some((namespace.to_string(), sa.to_string()))
}
