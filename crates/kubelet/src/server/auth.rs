//! Who may use the kubelet API, as upstream's kubelet decides it in webhook
//! mode (`--authentication-token-webhook`, `--authorization-mode=Webhook`,
//! `--anonymous-auth=false`; pkg/kubelet/server/auth.go and the delegating
//! authenticator/authorizer it is built from).
//!
//! - Authentication is a union, first success wins: a client certificate the
//!   TLS layer verified against the cluster CA (CN the user, O the groups),
//!   then `Authorization: Bearer <token>`, then a WebSocket subprotocol
//!   `base64url.bearer.authorization.k8s.io.<token>`; tokens are checked with a
//!   TokenReview. Nothing authenticated: 401 `Unauthorized`.
//! - Authorization asks a SubjectAccessReview per attribute set the path maps
//!   to (`nodes/<subresource>` of this node, verb from the method); the first
//!   allow wins, none: 403 naming every subresource tried. A review that could
//!   not be made is a 500, never an allow.
//!
//! Both reviews are cached as upstream caches them; the API calls sit behind
//! [`Reviewer`] so the decisions are tested without an API server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use berth_api::user::UserInfo;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use tracing::{debug, warn};

use super::streams::{Body, text};

/// Upstream's `authentication.webhook.cacheTTL` default. The delegating
/// authenticator uses it for both outcomes: a token the API server did not
/// recognise (without an error) is remembered as long as a good one.
pub const DEFAULT_TOKEN_CACHE_TTL: Duration = Duration::from_secs(120);
/// Upstream's `authorization.webhook.cacheAuthorizedTTL` default.
pub const DEFAULT_AUTHORIZED_TTL: Duration = Duration::from_secs(300);
/// Upstream's `authorization.webhook.cacheUnauthorizedTTL` default.
pub const DEFAULT_UNAUTHORIZED_TTL: Duration = Duration::from_secs(30);
/// Entries each cache holds at most, so a stream of distinct tokens cannot
/// grow memory without bound (upstream's caches are size-bounded too).
const CACHE_CAPACITY: usize = 4096;

/// The WebSocket subprotocol prefix that carries a bearer token (browsers
/// cannot set `Authorization` on a WebSocket).
pub const BEARER_PROTOCOL_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// Cache lifetimes (upstream's KubeletConfiguration `authentication.webhook`
/// and `authorization.webhook` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthConfig {
    pub authenticated_ttl: Duration,
    pub unauthenticated_ttl: Duration,
    pub authorized_ttl: Duration,
    pub unauthorized_ttl: Duration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            authenticated_ttl: DEFAULT_TOKEN_CACHE_TTL,
            unauthenticated_ttl: DEFAULT_TOKEN_CACHE_TTL,
            authorized_ttl: DEFAULT_AUTHORIZED_TTL,
            unauthorized_ttl: DEFAULT_UNAUTHORIZED_TTL,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("TokenReview: {0}")]
    TokenReview(#[source] kube::Error),
    #[error("SubjectAccessReview: {0}")]
    AccessReview(#[source] kube::Error),
    /// A fake's failure, in tests.
    #[error("{0}")]
    Other(String),
}

/// What a TokenReview said about a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOutcome {
    Authenticated(UserInfo),
    /// Not authenticated; `error` is the review's `status.error`.
    Unauthenticated {
        error: Option<String>,
    },
}

/// One authorization question: may `user` do `verb` on
/// `nodes/<name>/<subresource>`?
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub user: UserInfo,
    pub verb: &'static str,
    pub subresource: &'static str,
    pub name: String,
}

/// The two webhook calls the kubelet makes to the API server.
#[async_trait]
pub trait Reviewer: Send + Sync {
    async fn token_review(&self, token: &str) -> Result<TokenOutcome, ReviewError>;
    /// Whether the review allowed it (denied and no opinion are both "no").
    async fn access_review(&self, attrs: &Attributes) -> Result<bool, ReviewError>;
}

/// The reviews through the agent's API client.
pub struct ApiReviewer(pub kube::Client);

#[async_trait]
impl Reviewer for ApiReviewer {
    async fn token_review(&self, token: &str) -> Result<TokenOutcome, ReviewError> {
        let api: Api<TokenReview> = Api::all(self.0.clone());
        // No audiences: as upstream's kubelet, the API server's own apply.
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..Default::default()
        };
        let got = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(ReviewError::TokenReview)?;
        let status = got.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Ok(TokenOutcome::Unauthenticated {
                error: status.error.filter(|e| !e.is_empty()),
            });
        }
        let u = status.user.unwrap_or_default();
        Ok(TokenOutcome::Authenticated(UserInfo {
            name: u.username.unwrap_or_default(),
            uid: u.uid.unwrap_or_default(),
            groups: u.groups.unwrap_or_default(),
            extra: u.extra.unwrap_or_default(),
        }))
    }

    async fn access_review(&self, attrs: &Attributes) -> Result<bool, ReviewError> {
        let api: Api<SubjectAccessReview> = Api::all(self.0.clone());
        let review = SubjectAccessReview {
            spec: access_review_spec(attrs),
            ..Default::default()
        };
        let got = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(ReviewError::AccessReview)?;
        Ok(got.status.is_some_and(|s| s.allowed))
    }
}

/// The SubjectAccessReview spec upstream's webhook authorizer sends.
pub fn access_review_spec(a: &Attributes) -> SubjectAccessReviewSpec {
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    SubjectAccessReviewSpec {
        user: non_empty(&a.user.name),
        uid: non_empty(&a.user.uid),
        groups: (!a.user.groups.is_empty()).then(|| a.user.groups.clone()),
        extra: (!a.user.extra.is_empty()).then(|| a.user.extra.clone()),
        resource_attributes: Some(ResourceAttributes {
            namespace: Some(String::new()),
            verb: Some(a.verb.to_string()),
            group: Some(String::new()),
            version: Some("v1".into()),
            resource: Some("nodes".into()),
            subresource: Some(a.subresource.to_string()),
            name: Some(a.name.clone()),
            ..Default::default()
        }),
        non_resource_attributes: None,
    }
}

// ---------------------------------------------------------------------------
// Pure decisions.

/// The API verb of an HTTP method, upstream's table. HEAD (and any other
/// method) is not in it and gets the empty verb, as upstream's kubelet sends
/// it, although its documentation lists HEAD with GET.
pub fn api_verb(method: &Method) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::GET => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// `path` is `base` or below it (upstream's isSubpath: `/statsx` is not
/// under `/stats`).
fn is_subpath(path: &str, base: &str) -> bool {
    let base = base.trim_end_matches('/');
    path == base
        || path
            .strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The `nodes` subresources a path is authorized against, in order (upstream
/// with KubeletFineGrainedAuthz, on by default since 1.33): `/pods`,
/// `/runningpods/`, `/healthz` and `/configz` first try their own
/// subresource, then `proxy`; `/stats`, `/metrics`, `/logs` and
/// `/checkpoint` only their own; every other path (containerLogs, exec,
/// attach, portForward, run, spec, …) `proxy`.
pub fn subresources(path: &str) -> Vec<&'static str> {
    const ONLY: [(&str, &str); 4] = [
        ("/stats/", "stats"),
        ("/metrics", "metrics"),
        ("/logs/", "log"),
        ("/checkpoint", "checkpoint"),
    ];
    const FINE_THEN_PROXY: [(&str, &str); 4] = [
        ("/pods", "pods"),
        ("/runningpods/", "pods"),
        ("/healthz", "healthz"),
        ("/configz", "configz"),
    ];
    if let Some((_, sub)) = ONLY.iter().find(|(base, _)| is_subpath(path, base)) {
        return vec![sub];
    }
    if let Some((_, sub)) = FINE_THEN_PROXY
        .iter()
        .find(|(base, _)| is_subpath(path, base))
    {
        return vec![sub, "proxy"];
    }
    vec!["proxy"]
}

/// Every attribute set a request is authorized against, in order.
pub fn request_attributes(
    user: &UserInfo,
    method: &Method,
    path: &str,
    node: &str,
) -> Vec<Attributes> {
    let verb = api_verb(method);
    subresources(path)
        .into_iter()
        .map(|subresource| Attributes {
            user: user.clone(),
            verb,
            subresource,
            name: node.to_string(),
        })
        .collect()
}

/// Upstream kubelet's 403 body: the subresources tried as Go prints a
/// `[]string`, and a newline.
pub fn forbidden_message(attrs: &[Attributes]) -> String {
    let (name, verb) = attrs
        .first()
        .map(|a| (a.user.name.as_str(), a.verb))
        .unwrap_or_default();
    let subs: Vec<&str> = attrs.iter().map(|a| a.subresource).collect();
    format!(
        "Forbidden (user={name}, verb={verb}, resource=nodes, subresource(s)=[{}])\n",
        subs.join(" ")
    )
}

/// Upstream kubelet's 500 body when a SubjectAccessReview failed.
pub fn authorization_error_message(a: &Attributes) -> String {
    format!(
        "Authorization error (user={}, verb={}, resource=nodes, subresource={})",
        a.user.name, a.verb, a.subresource
    )
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive;
/// anything after a second space ignored), as upstream's bearertoken
/// authenticator reads it.
pub fn bearer_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
}

/// A bearer token in a WebSocket request's subprotocols, with the other
/// subprotocols (what the request keeps once the token is accepted), as
/// upstream's websocket ProtocolAuthenticator reads it.
#[derive(Debug, PartialEq, Eq)]
pub struct ProtocolToken {
    pub token: String,
    pub rest: Vec<String>,
}

/// `Ok(None)`: not a WebSocket request, or no token protocol in it.
pub fn websocket_token(headers: &HeaderMap) -> Result<Option<ProtocolToken>, &'static str> {
    use base64::Engine;
    let has_token = |name: header::HeaderName, want: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(want))
    };
    if !has_token(header::CONNECTION, "upgrade") || !has_token(header::UPGRADE, "websocket") {
        return Ok(None);
    }
    let mut token = None;
    let mut rest = Vec::new();
    for p in headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
    {
        let Some(encoded) = p.strip_prefix(BEARER_PROTOCOL_PREFIX) else {
            rest.push(p.to_string());
            continue;
        };
        if token.is_some() {
            return Err("multiple base64.bearer.authorization tokens specified");
        }
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| "invalid base64.bearer.authorization token encoding")?;
        token =
            Some(String::from_utf8(raw).map_err(|_| "invalid base64.bearer.authorization token")?);
    }
    match token.filter(|t| !t.is_empty()) {
        None => Ok(None),
        // The token protocol is removed before the request goes on, so at
        // least one other must remain to be echoed back.
        Some(_) if rest.is_empty() => Err("missing additional subprotocol"),
        Some(token) => Ok(Some(ProtocolToken { token, rest })),
    }
}

/// The user of a verified client certificate: CN the name, O the groups
/// (upstream's CommonNameUserConversion); none without a CN.
pub fn user_from_cert(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?;
    if name.is_empty() {
        return None;
    }
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    Some(UserInfo {
        name: name.to_string(),
        groups,
        ..Default::default()
    })
}

/// How long a token review's outcome is remembered; `None`: not at all.
/// Failed calls and reviews that report an error are asked again next time
/// (upstream's cached token authenticator does not cache errors).
pub fn token_ttl(
    outcome: &Result<TokenOutcome, ReviewError>,
    cfg: &AuthConfig,
) -> Option<Duration> {
    match outcome {
        Ok(TokenOutcome::Authenticated(_)) => Some(cfg.authenticated_ttl),
        Ok(TokenOutcome::Unauthenticated { error: None }) => Some(cfg.unauthenticated_ttl),
        Ok(TokenOutcome::Unauthenticated { error: Some(_) }) | Err(_) => None,
    }
}

/// How long an access review's answer is remembered; failed calls never.
pub fn decision_ttl(outcome: &Result<bool, ReviewError>, cfg: &AuthConfig) -> Option<Duration> {
    match outcome {
        Ok(true) => Some(cfg.authorized_ttl),
        Ok(false) => Some(cfg.unauthorized_ttl),
        Err(_) => None,
    }
}

/// A map whose entries expire; time is passed in, so it is tested without
/// waiting.
#[derive(Debug)]
pub struct TtlCache<V> {
    entries: HashMap<String, (V, Instant)>,
    capacity: usize,
}

impl<V: Clone> TtlCache<V> {
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            entries: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// The value, while it has not expired at `now`.
    pub fn get(&self, key: &str, now: Instant) -> Option<V> {
        self.entries
            .get(key)
            .filter(|(_, until)| now < *until)
            .map(|(v, _)| v.clone())
    }

    /// Remembers `value` until `now + ttl`. A full cache first forgets what
    /// has expired, then, if still full, what expires soonest.
    pub fn insert(&mut self, key: String, value: V, ttl: Duration, now: Instant) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, until)| now < *until);
            if self.entries.len() >= self.capacity
                && let Some(soonest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| k.clone())
            {
                self.entries.remove(&soonest);
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A token's cache key: its SHA-256, so tokens are not kept in memory.
fn token_key(token: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A decision's cache key: the review spec, as upstream keys its cache.
fn decision_key(a: &Attributes) -> String {
    serde_json::to_string(&access_review_spec(a)).unwrap_or_default()
}

// ---------------------------------------------------------------------------
// The filter.

/// The kubelet API's authenticator and authorizer for one node.
pub struct KubeletAuth {
    node_name: String,
    reviewer: Arc<dyn Reviewer>,
    config: AuthConfig,
    tokens: Mutex<TtlCache<Option<UserInfo>>>,
    decisions: Mutex<TtlCache<bool>>,
}

/// Tokio's clock, so paused-time tests move it.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl KubeletAuth {
    pub fn new(
        node_name: impl Into<String>,
        reviewer: Arc<dyn Reviewer>,
        config: AuthConfig,
    ) -> Self {
        KubeletAuth {
            node_name: node_name.into(),
            reviewer,
            config,
            tokens: Mutex::new(TtlCache::new(CACHE_CAPACITY)),
            decisions: Mutex::new(TtlCache::new(CACHE_CAPACITY)),
        }
    }

    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// Authenticates and authorizes a request: its user, or the response
    /// that refuses it. `cert_user` is the verified client certificate's.
    /// An accepted token is removed from the headers, so nothing the request
    /// is passed on to sees it.
    pub async fn filter(
        &self,
        cert_user: Option<&UserInfo>,
        method: &Method,
        path: &str,
        headers: &mut HeaderMap,
    ) -> Result<UserInfo, Response<Body>> {
        let Some(user) = self.authenticate(cert_user, headers).await else {
            return Err(text(StatusCode::UNAUTHORIZED, "Unauthorized"));
        };
        let attrs = request_attributes(&user, method, path, &self.node_name);
        for a in &attrs {
            match self.authorize(a).await {
                Ok(true) => return Ok(user),
                Ok(false) => {}
                Err(e) => {
                    warn!(
                        error = %e,
                        user = %a.user.name,
                        verb = a.verb,
                        subresource = a.subresource,
                        "kubelet API authorization error"
                    );
                    return Err(text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        authorization_error_message(a),
                    ));
                }
            }
        }
        debug!(user = %user.name, %method, path, "kubelet API request forbidden");
        Err(text(StatusCode::FORBIDDEN, forbidden_message(&attrs)))
    }

    async fn authenticate(
        &self,
        cert_user: Option<&UserInfo>,
        headers: &mut HeaderMap,
    ) -> Option<UserInfo> {
        if let Some(u) = cert_user {
            return Some(u.clone().with_authenticated_group());
        }
        if let Some(token) = bearer_token(headers)
            && let Some(u) = self.token_user(&token).await
        {
            headers.remove(header::AUTHORIZATION);
            return Some(u.with_authenticated_group());
        }
        match websocket_token(headers) {
            Ok(Some(p)) => {
                let u = self.token_user(&p.token).await?;
                headers.remove(header::SEC_WEBSOCKET_PROTOCOL);
                if let Ok(v) = HeaderValue::from_str(&p.rest.join(",")) {
                    headers.insert(header::SEC_WEBSOCKET_PROTOCOL, v);
                }
                Some(u.with_authenticated_group())
            }
            Ok(None) => None,
            Err(why) => {
                debug!(why, "kubelet API WebSocket token refused");
                None
            }
        }
    }

    /// The user a token authenticates as, from the cache or a TokenReview.
    async fn token_user(&self, token: &str) -> Option<UserInfo> {
        let key = token_key(token);
        if let Ok(cache) = self.tokens.lock()
            && let Some(hit) = cache.get(&key, now())
        {
            return hit;
        }
        let outcome = self.reviewer.token_review(token).await;
        if let Some(ttl) = token_ttl(&outcome, &self.config)
            && let Ok(mut cache) = self.tokens.lock()
        {
            let user = match &outcome {
                Ok(TokenOutcome::Authenticated(u)) => Some(u.clone()),
                _ => None,
            };
            cache.insert(key, user, ttl, now());
        }
        match outcome {
            Ok(TokenOutcome::Authenticated(u)) => Some(u),
            Ok(TokenOutcome::Unauthenticated { error }) => {
                debug!(
                    error = error.as_deref().unwrap_or(""),
                    "kubelet API token not authenticated"
                );
                None
            }
            Err(e) => {
                warn!(error = %e, "kubelet API token review failed");
                None
            }
        }
    }

    /// One attribute set's decision, from the cache or a SubjectAccessReview.
    async fn authorize(&self, a: &Attributes) -> Result<bool, ReviewError> {
        let key = decision_key(a);
        if let Ok(cache) = self.decisions.lock()
            && let Some(hit) = cache.get(&key, now())
        {
            return Ok(hit);
        }
        let outcome = self.reviewer.access_review(a).await;
        if let Some(ttl) = decision_ttl(&outcome, &self.config)
            && let (Ok(allowed), Ok(mut cache)) = (&outcome, self.decisions.lock())
        {
            cache.insert(key, *allowed, ttl, now());
        }
        outcome
    }
}

#[cfg(test)]
#[path = "auth_tests.rs"]
pub(crate) mod tests;
