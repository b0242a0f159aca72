//! ServiceAccount tokens for pods' projected volumes (upstream's
//! `pkg/kubelet/token`, the kubelet token manager).
//!
//! A token is requested through TokenRequest
//! (`POST /api/v1/namespaces/<ns>/serviceaccounts/<sa>/token`) bound to its pod,
//! cached per (namespace, service account, pod, audience, expirationSeconds),
//! and requested again once it is older than 80 % of its lifetime or 24 h
//! ([`requires_refresh`]). When a refresh fails the old token is kept while it
//! is valid ([`after_failed_fetch`]). Tokens of deleted pods are dropped
//! ([`TokenManager::delete_service_account_token`]) and expired ones are swept
//! every [`GC_PERIOD`]. The decisions are pure functions of the clock; the
//! API call is the [`TokenRequester`] boundary.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_runtime::clock::Clock;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use tracing::warn;

use crate::volumes::TokenSource;

/// A token is refreshed once it is this old, whatever its lifetime (a server
/// may grant far longer than asked, e.g. its extended 3607 s tokens).
pub const MAX_TTL: SignedDuration = SignedDuration::from_hours(24);
/// Up to this much earlier, at random, so the tokens of pods started together
/// are not all refreshed in the same second.
pub const MAX_JITTER: SignedDuration = SignedDuration::from_secs(10);
/// How often expired tokens are dropped from the cache.
pub const GC_PERIOD: Duration = Duration::from_secs(60);
/// The shortest time between "refresh due" and expiry: 20 % of the shortest
/// lifetime upstream allows (600 s), less the jitter. A volume re-written
/// more often than this always gets a fresh token before the old one expires.
pub const MIN_REFRESH_WINDOW: SignedDuration = SignedDuration::from_secs(
    crate::volumes::MIN_TOKEN_EXPIRATION_SECONDS * 20 / 100 - MAX_JITTER.as_secs(),
);

/// What a token is cached under: who it is for and what it was asked with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenKey {
    pub namespace: String,
    pub service_account: String,
    pub pod_name: String,
    pub pod_uid: String,
    pub source: TokenSource,
}

impl fmt::Display for TokenKey {
    /// Upstream's cache key (`%q/%q/%#v/%#v/%#v`): safe to log, it holds no
    /// secret, and it names the token in "expired and refresh failed".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let audiences = match &self.source.audience {
            Some(a) => format!("[]string{{{a:?}}}"),
            None => "[]string(nil)".to_string(),
        };
        write!(
            f,
            "{:?}/{:?}/{audiences}/{}/v1.BoundObjectReference{{Kind:\"Pod\", APIVersion:\"v1\", Name:{:?}, UID:{:?}}}",
            self.service_account,
            self.namespace,
            self.source.expiration_seconds,
            self.pod_name,
            self.pod_uid
        )
    }
}

/// A token the API server issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedToken {
    pub token: String,
    pub expiration: Timestamp,
    /// Its expiry less the lifetime the server granted.
    pub issued_at: Timestamp,
}

impl CachedToken {
    /// From the server's reply. The lifetime is the reply's
    /// `spec.expirationSeconds` (what was granted, which may exceed what was
    /// asked), else the requested one.
    pub fn from_response(tr: &TokenRequest, requested_seconds: i64) -> Result<Self, String> {
        let status = tr
            .status
            .as_ref()
            .ok_or_else(|| "the TokenRequest reply has no status".to_string())?;
        if status.token.is_empty() {
            return Err("the TokenRequest reply has no token".into());
        }
        let expiration = status.expiration_timestamp.0;
        let lifetime = tr.spec.expiration_seconds.unwrap_or(requested_seconds);
        let issued_at = expiration
            .checked_sub(SignedDuration::from_secs(lifetime))
            .map_err(|e| format!("the TokenRequest reply's expiration is out of range: {e}"))?;
        Ok(CachedToken {
            token: status.token.clone(),
            expiration,
            issued_at,
        })
    }

    fn lifetime_seconds(&self) -> i64 {
        self.expiration.duration_since(self.issued_at).as_secs()
    }
}

/// Whether a token has expired (upstream: now is after its expiry).
pub fn expired(t: &CachedToken, now: Timestamp) -> bool {
    now > t.expiration
}

/// Upstream's `requiresRefresh`: the token is older than [`MAX_TTL`], or
/// within 20 % of its lifetime of expiring (both moved earlier by `jitter`),
/// or issued "in the future" (the system clock went back).
pub fn requires_refresh(t: &CachedToken, now: Timestamp, jitter: SignedDuration) -> bool {
    if now.duration_since(t.issued_at) > MAX_TTL - jitter {
        return true;
    }
    // Upstream truncates 20 % of the lifetime to whole seconds.
    let window = SignedDuration::from_secs(t.lifetime_seconds() * 20 / 100) + jitter;
    if t.expiration.duration_since(now) < window {
        return true;
    }
    now < t.issued_at
}

/// What a failed TokenRequest leaves the volume with (upstream's
/// `GetServiceAccountToken`): the old token while it is valid (the failure
/// is only logged), else the error the FailedMount event carries.
pub fn after_failed_fetch(
    cached: Option<&CachedToken>,
    now: Timestamp,
    key: &TokenKey,
    err: &str,
) -> Result<String, String> {
    match cached {
        None => Err(format!("failed to fetch token: {err}")),
        Some(t) if expired(t, now) => Err(format!("token {key} expired and refresh failed: {err}")),
        Some(t) => Ok(t.token.clone()),
    }
}

/// The TokenRequest the kubelet sends for a key: bound to the pod, the
/// projection's audience when it has one (else the server's default
/// audiences), its lifetime.
pub fn token_request(key: &TokenKey) -> TokenRequest {
    TokenRequest {
        spec: TokenRequestSpec {
            audiences: key.source.audience.iter().cloned().collect(),
            expiration_seconds: Some(key.source.expiration_seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(key.pod_name.clone()),
                uid: Some(key.pod_uid.clone()),
            }),
        },
        ..TokenRequest::default()
    }
}

/// The TokenRequest subresource, as a boundary (a fake in tests).
#[async_trait::async_trait]
pub trait TokenRequester: Send + Sync + 'static {
    /// `POST serviceaccounts/<service_account>/token` in `namespace`; the error
    /// is the server's message, as upstream prints a Go API error.
    async fn create_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, String>;
}

/// The real requester: kube-rs's `create_token_request`.
pub struct ApiTokenRequester(pub kube::Client);

#[async_trait::async_trait]
impl TokenRequester for ApiTokenRequester {
    async fn create_token(
        &self,
        namespace: &str,
        service_account: &str,
        request: &TokenRequest,
    ) -> Result<TokenRequest, String> {
        let api: Api<ServiceAccount> = Api::namespaced(self.0.clone(), namespace);
        api.create_token_request(service_account, &PostParams::default(), request)
            .await
            .map_err(|e| match e {
                // A Status: its message alone (`serviceaccounts "x" not found`),
                // as Go's StatusError prints.
                kube::Error::Api(s) if !s.message.is_empty() => s.message,
                e => e.to_string(),
            })
    }
}

/// Random jitter in whole seconds below [`MAX_JITTER`], as upstream's.
fn random_jitter() -> SignedDuration {
    use std::hash::{BuildHasher, Hasher};
    // Each RandomState is freshly keyed, so the hash of nothing is a cheap
    // random number; spreading refreshes needs nothing better.
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let max = MAX_JITTER.as_secs().unsigned_abs();
    SignedDuration::from_secs(i64::try_from(r % max).unwrap_or(0))
}

/// The agent's token cache (upstream's token `Manager`).
pub struct TokenManager {
    requester: Arc<dyn TokenRequester>,
    clock: Arc<dyn Clock>,
    jitter: fn() -> SignedDuration,
    cache: Mutex<HashMap<TokenKey, CachedToken>>,
}

impl TokenManager {
    pub fn new(requester: Arc<dyn TokenRequester>, clock: Arc<dyn Clock>) -> Self {
        TokenManager {
            requester,
            clock,
            jitter: random_jitter,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<TokenKey, CachedToken>> {
        // Entries are replaced whole: a panic elsewhere cannot leave one half-written.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The token for `key`: the cached one unless it needs a refresh, else a
    /// new one from the API server; an error only when there is no valid
    /// token (`failed to fetch token: <server error>`).
    pub async fn get_service_account_token(&self, key: &TokenKey) -> Result<String, String> {
        let cached = self.cache().get(key).cloned();
        let now = self.clock.now();
        if let Some(t) = &cached
            && !requires_refresh(t, now, (self.jitter)())
        {
            return Ok(t.token.clone());
        }
        let reply = self
            .requester
            .create_token(&key.namespace, &key.service_account, &token_request(key))
            .await
            .and_then(|tr| CachedToken::from_response(&tr, key.source.expiration_seconds));
        match reply {
            Ok(t) => {
                let token = t.token.clone();
                self.cache().insert(key.clone(), t);
                Ok(token)
            }
            Err(e) => {
                let now = self.clock.now();
                let kept = after_failed_fetch(cached.as_ref(), now, key, &e);
                if kept.is_ok() {
                    warn!(cache_key = %key, error = %e, "couldn't update token");
                }
                kept
            }
        }
    }

    /// Drops the tokens of a pod that was deleted.
    pub fn delete_service_account_token(&self, pod_uid: &str) {
        self.cache().retain(|k, _| k.pod_uid != pod_uid);
    }

    /// Drops expired tokens (their pods' volumes would fetch new ones anyway).
    pub fn cleanup(&self) {
        let now = self.clock.now();
        self.cache().retain(|_, t| !expired(t, now));
    }

    /// Sweeps expired tokens every [`GC_PERIOD`] until the task is dropped.
    pub async fn run_cleanup(self: Arc<Self>) {
        loop {
            tokio::time::sleep(GC_PERIOD).await;
            self.cleanup();
        }
    }

    #[cfg(test)]
    fn cached(&self) -> Vec<TokenKey> {
        let mut keys: Vec<TokenKey> = self.cache().keys().cloned().collect();
        keys.sort_by(|a, b| (&a.pod_uid, &a.source).cmp(&(&b.pod_uid, &b.source)));
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_runtime::clock::FakeClock;
    use k8s_openapi::api::authentication::v1::TokenRequestStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn t0() -> Timestamp {
        FakeClock::default().now()
    }

    fn at(secs: i64) -> Timestamp {
        t0().checked_add(SignedDuration::from_secs(secs)).unwrap()
    }

    /// A token issued at t0 for `lifetime` seconds.
    fn issued(lifetime: i64) -> CachedToken {
        CachedToken {
            token: "old".into(),
            expiration: at(lifetime),
            issued_at: t0(),
        }
    }

    fn key(uid: &str, audience: Option<&str>, exp: i64) -> TokenKey {
        TokenKey {
            namespace: "shop".into(),
            service_account: "default".into(),
            pod_name: "web".into(),
            pod_uid: uid.into(),
            source: TokenSource {
                audience: audience.map(String::from),
                expiration_seconds: exp,
            },
        }
    }

    #[test]
    fn refresh_after_80_percent_or_24_hours() {
        const YEAR: i64 = 365 * 24 * 3600;
        // (lifetime, now since issue, jitter, refresh?)
        let cases = [
            (3600, 0, 0, false),
            (3600, 2879, 0, false),
            // Exactly 80 %: upstream refreshes only once "after" it.
            (3600, 2880, 0, false),
            (3600, 2881, 0, true),
            // The jitter moves the deadline earlier.
            (3600, 2871, 10, true),
            (3600, 2869, 10, false),
            // 20 % of 3607 s is 721 s, once truncated.
            (3607, 2886, 0, false),
            (3607, 2887, 0, true),
            (600, 479, 0, false),
            (600, 481, 0, true),
            (3600, 3601, 0, true),
            // A long-lived token (the server's extended 3607 s tokens) is
            // refreshed after 24 h however long it has left.
            (YEAR, 24 * 3600, 0, false),
            (YEAR, 24 * 3600 + 1, 0, true),
            (YEAR, 24 * 3600 - 9, 10, true),
            (YEAR, 24 * 3600 - 11, 10, false),
            // Issued in the future: the clock went back.
            (3600, -1, 0, true),
        ];
        for (lifetime, age, jitter, want) in cases {
            assert_eq!(
                requires_refresh(
                    &issued(lifetime),
                    at(age),
                    SignedDuration::from_secs(jitter)
                ),
                want,
                "lifetime {lifetime} age {age} jitter {jitter}"
            );
        }
    }

    #[test]
    fn expiry() {
        for (now, want) in [(3599, false), (3600, false), (3601, true)] {
            assert_eq!(expired(&issued(3600), at(now)), want, "{now}");
        }
    }

    #[test]
    fn failed_fetch_keeps_a_valid_token() {
        let k = key("u-1", None, 3600);
        let err = r#"serviceaccounts "default" not found"#;
        let old = issued(3600);
        // (cached token, now, result)
        let cases = [
            (None, 0, Err(format!("failed to fetch token: {err}"))),
            (Some(&old), 3000, Ok("old".to_string())),
            (Some(&old), 3600, Ok("old".to_string())),
            (
                Some(&old),
                3601,
                Err(format!("token {k} expired and refresh failed: {err}")),
            ),
        ];
        for (cached, now, want) in cases {
            assert_eq!(after_failed_fetch(cached, at(now), &k, err), want, "{now}");
        }
    }

    #[test]
    fn key_prints_as_upstream() {
        assert_eq!(
            key("u-1", None, 3607).to_string(),
            r#""default"/"shop"/[]string(nil)/3607/v1.BoundObjectReference{Kind:"Pod", APIVersion:"v1", Name:"web", UID:"u-1"}"#
        );
        assert_eq!(
            key("u-1", Some("vault"), 600).to_string(),
            r#""default"/"shop"/[]string{"vault"}/600/v1.BoundObjectReference{Kind:"Pod", APIVersion:"v1", Name:"web", UID:"u-1"}"#
        );
    }

    #[test]
    fn request_body() {
        let cases = [
            (
                key("u-1", None, 3607),
                json!({"audiences": [], "expirationSeconds": 3607,
                    "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-1"}}),
            ),
            (
                key("u-2", Some("vault"), 600),
                json!({"audiences": ["vault"], "expirationSeconds": 600,
                    "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-2"}}),
            ),
        ];
        for (k, spec) in cases {
            let body = serde_json::to_value(token_request(&k)).unwrap();
            assert_eq!(body["apiVersion"], "authentication.k8s.io/v1");
            assert_eq!(body["kind"], "TokenRequest");
            assert_eq!(body["spec"], spec, "{k}");
        }
    }

    fn reply(token: &str, granted: Option<i64>, expires: Timestamp) -> TokenRequest {
        TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: granted,
                ..TokenRequestSpec::default()
            },
            status: Some(TokenRequestStatus {
                token: token.into(),
                expiration_timestamp: Time(expires),
            }),
            ..TokenRequest::default()
        }
    }

    #[test]
    fn cached_token_from_reply() {
        let year = 365 * 24 * 3600;
        // (reply, requested lifetime, cached token or error)
        let cases = [
            (reply("a", Some(3600), at(3600)), 3600, Ok((at(3600), t0()))),
            // The server granted more than asked: the lifetime is what it granted.
            (reply("a", Some(year), at(year)), 3607, Ok((at(year), t0()))),
            (reply("a", None, at(600)), 600, Ok((at(600), t0()))),
            (
                reply("", Some(3600), at(3600)),
                3600,
                Err("the TokenRequest reply has no token".to_string()),
            ),
            (
                TokenRequest::default(),
                3600,
                Err("the TokenRequest reply has no status".to_string()),
            ),
        ];
        for (tr, requested, want) in cases {
            let got =
                CachedToken::from_response(&tr, requested).map(|t| (t.expiration, t.issued_at));
            assert_eq!(got, want, "{tr:?}");
        }
    }

    /// Issues `tok-<n>` tokens valid for what was asked, or fails with `fail`.
    struct FakeRequester {
        clock: Arc<FakeClock>,
        fail: Mutex<Option<String>>,
        requests: Mutex<Vec<(String, String, TokenRequest)>>,
    }

    #[async_trait::async_trait]
    impl TokenRequester for FakeRequester {
        async fn create_token(
            &self,
            namespace: &str,
            service_account: &str,
            request: &TokenRequest,
        ) -> Result<TokenRequest, String> {
            let mut requests = self.requests.lock().unwrap();
            requests.push((namespace.into(), service_account.into(), request.clone()));
            if let Some(e) = self.fail.lock().unwrap().clone() {
                return Err(e);
            }
            let secs = request.spec.expiration_seconds.unwrap();
            let exp = self
                .clock
                .now()
                .checked_add(SignedDuration::from_secs(secs))
                .unwrap();
            Ok(reply(&format!("tok-{}", requests.len()), Some(secs), exp))
        }
    }

    fn manager() -> (TokenManager, Arc<FakeRequester>, Arc<FakeClock>) {
        let clock = Arc::new(FakeClock::default());
        let requester = Arc::new(FakeRequester {
            clock: clock.clone(),
            fail: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
        });
        let mut m = TokenManager::new(requester.clone(), clock.clone());
        m.jitter = || SignedDuration::ZERO;
        (m, requester, clock)
    }

    #[tokio::test]
    async fn manager_caches_refreshes_and_keeps_valid_tokens() {
        let (m, req, clock) = manager();
        let k = key("u-1", None, 3600);
        let fail = |e: Option<&str>| *req.fail.lock().unwrap() = e.map(String::from);
        let requests = || req.requests.lock().unwrap().len();
        /// Seconds to step, what the server fails with, the token or error,
        /// requests so far.
        type Step<'a> = (u64, Option<&'a str>, Result<&'a str, String>, usize);
        let steps: [Step; 7] = [
            (0, None, Ok("tok-1"), 1),
            // Cached until 80 % of its hour.
            (2880, None, Ok("tok-1"), 1),
            (1, None, Ok("tok-2"), 2),
            // A failed refresh keeps the valid token, and is tried again each time.
            (2881, Some("etcdserver: request timed out"), Ok("tok-2"), 3),
            (700, Some("etcdserver: request timed out"), Ok("tok-2"), 4),
            (
                20,
                Some("etcdserver: request timed out"),
                Err(format!(
                    "token {k} expired and refresh failed: etcdserver: request timed out"
                )),
                5,
            ),
            (0, None, Ok("tok-6"), 6),
        ];
        for (i, (step, failing, want, n)) in steps.into_iter().enumerate() {
            clock.step(Duration::from_secs(step));
            fail(failing);
            let got = m.get_service_account_token(&k).await;
            assert_eq!(got, want.map(String::from), "step {i}");
            assert_eq!(requests(), n, "step {i}");
        }
        let (ns, sa, body) = req.requests.lock().unwrap()[0].clone();
        assert_eq!((ns.as_str(), sa.as_str()), ("shop", "default"));
        assert_eq!(body, token_request(&k));
    }

    #[tokio::test]
    async fn manager_first_fetch_failure() {
        let (m, req, _) = manager();
        *req.fail.lock().unwrap() = Some(r#"serviceaccounts "robot" not found"#.into());
        let mut k = key("u-1", None, 3600);
        k.service_account = "robot".into();
        assert_eq!(
            m.get_service_account_token(&k).await,
            Err(r#"failed to fetch token: serviceaccounts "robot" not found"#.to_string())
        );
        assert!(m.cached().is_empty());
    }

    #[tokio::test]
    async fn manager_drops_deleted_pods_and_expired_tokens() {
        let (m, _, clock) = manager();
        let keys = [
            key("u-1", None, 3600),
            key("u-1", Some("vault"), 600),
            key("u-2", None, 3600),
        ];
        let mut tokens = Vec::new();
        for k in &keys {
            tokens.push(m.get_service_account_token(k).await.unwrap());
        }
        // One token per audience and lifetime, even for the same pod.
        assert_eq!(tokens, ["tok-1", "tok-2", "tok-3"]);
        assert_eq!(m.cached(), keys);
        m.delete_service_account_token("u-2");
        assert_eq!(m.cached(), keys[..2]);
        // The 600 s token expires first; cleanup keeps the valid ones.
        clock.step(Duration::from_secs(601));
        m.cleanup();
        assert_eq!(m.cached(), keys[..1]);
        m.delete_service_account_token("u-1");
        assert!(m.cached().is_empty());
    }

    #[test]
    fn jitter_stays_below_its_maximum() {
        for _ in 0..100 {
            let j = random_jitter();
            assert!(j >= SignedDuration::ZERO && j < MAX_JITTER, "{j:?}");
        }
    }
}
