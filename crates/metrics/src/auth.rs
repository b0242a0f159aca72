//! Delegated authentication and authorization, as an aggregated API server
//! does it (k8s.io/apiserver's delegating options, which metrics-server uses):
//! the front proxy's client certificate (signed by the request-header CA, with
//! an allowed name) carries the user in `X-Remote-User`/`X-Remote-Group`/
//! `X-Remote-Extra-*`; a client certificate of the cluster CA is its CN and O;
//! a bearer token is checked with a TokenReview; anything else is anonymous.
//! Every request but the health checks is then authorized with a
//! SubjectAccessReview. Both reviews are cached 10 s, as upstream's defaults.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::HeaderMap;

/// Who is asking (upstream's `user.Info`).
pub use berth_api::user::UserInfo as User;

/// What the TLS layer saw of the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    None,
    /// Signed by the request-header CA.
    FrontProxy {
        cn: String,
    },
    /// Signed by the cluster's client CA.
    Client {
        cn: String,
        orgs: Vec<String>,
    },
}

/// The request an authorization is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attributes {
    Resource {
        verb: String,
        resource: String,
        namespace: String,
        name: String,
    },
    NonResource {
        verb: String,
        path: String,
    },
}

/// The API calls delegation needs (the API client; a fake in tests).
#[async_trait::async_trait]
pub trait Reviewer: Send + Sync {
    /// A TokenReview: the user, or `None` when the token is not valid.
    async fn token(&self, token: &str) -> Result<Option<User>, String>;
    /// A SubjectAccessReview: allowed, with the reason given.
    async fn access(&self, user: &User, attrs: &Attributes) -> Result<(bool, String), String>;
}

const CACHE_TTL: Duration = Duration::from_secs(10);

/// A cache of reviews by what they were asked, each with when it was made.
type Cache<K, V> = Mutex<HashMap<K, (Instant, V)>>;

pub struct Delegation<R> {
    reviewer: R,
    allowed_names: Vec<String>,
    tokens: Cache<String, Option<User>>,
    decisions: Cache<(User, Attributes), (bool, String)>,
}

/// Why a request is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Unauthorized,
    Forbidden(String),
    /// A review could not be made (500).
    Failed(String),
}

fn all(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
        .collect()
}

fn cached<K: std::hash::Hash + Eq + Clone, V: Clone>(
    map: &Mutex<HashMap<K, (Instant, V)>>,
    key: &K,
) -> Option<V> {
    let mut m = map.lock().ok()?;
    match m.get(key) {
        Some((at, v)) if at.elapsed() < CACHE_TTL => Some(v.clone()),
        Some(_) => {
            m.remove(key);
            None
        }
        None => None,
    }
}

fn remember<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, (Instant, V)>>, key: K, v: V) {
    if let Ok(mut m) = map.lock() {
        // Bounded: a burst of distinct callers cannot grow it without end.
        if m.len() > 10_000 {
            m.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        }
        m.insert(key, (Instant::now(), v));
    }
}

impl<R: Reviewer> Delegation<R> {
    /// `allowed_names`: the front proxy CNs accepted (`--requestheader-allowed-names`; empty: any).
    pub fn new(reviewer: R, allowed_names: Vec<String>) -> Self {
        Delegation {
            reviewer,
            allowed_names,
            tokens: Mutex::new(HashMap::new()),
            decisions: Mutex::new(HashMap::new()),
        }
    }

    pub async fn authenticate(&self, peer: &Peer, headers: &HeaderMap) -> Result<User, Refusal> {
        match peer {
            Peer::FrontProxy { cn } => {
                if !self.allowed_names.is_empty() && !self.allowed_names.contains(cn) {
                    return Err(Refusal::Unauthorized);
                }
                let name = headers
                    .get("x-remote-user")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                if name.is_empty() {
                    return Err(Refusal::Unauthorized);
                }
                let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
                for (k, v) in headers {
                    if let Some(key) = k.as_str().strip_prefix("x-remote-extra-")
                        && let Ok(v) = v.to_str()
                    {
                        let key = percent_encoding::percent_decode_str(key)
                            .decode_utf8_lossy()
                            .into_owned();
                        extra.entry(key).or_default().push(v.to_string());
                    }
                }
                Ok(User {
                    name: name.to_string(),
                    uid: headers
                        .get("x-remote-uid")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string(),
                    groups: all(headers, "x-remote-group"),
                    extra,
                })
            }
            Peer::Client { cn, orgs } => Ok(User {
                name: cn.clone(),
                groups: orgs.clone(),
                ..Default::default()
            }),
            Peer::None => {
                let token = headers
                    .get(http::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::trim)
                    .filter(|t| !t.is_empty());
                let Some(token) = token else {
                    return Ok(User::anonymous());
                };
                let user = match cached(&self.tokens, &token.to_string()) {
                    Some(u) => u,
                    None => {
                        let u = self.reviewer.token(token).await.map_err(Refusal::Failed)?;
                        remember(&self.tokens, token.to_string(), u.clone());
                        u
                    }
                };
                user.ok_or(Refusal::Unauthorized)
            }
        }
    }

    pub async fn authorize(&self, user: &User, attrs: &Attributes) -> Result<(), Refusal> {
        let key = (user.clone(), attrs.clone());
        let (allowed, reason) = match cached(&self.decisions, &key) {
            Some(d) => d,
            None => {
                let d = self
                    .reviewer
                    .access(user, attrs)
                    .await
                    .map_err(Refusal::Failed)?;
                remember(&self.decisions, key, d.clone());
                d
            }
        };
        if allowed {
            Ok(())
        } else {
            Err(Refusal::Forbidden(forbidden_message(user, attrs, &reason)))
        }
    }
}

/// Upstream's 403 text, from the API server's own builder.
pub fn forbidden_message(user: &User, attrs: &Attributes, reason: &str) -> String {
    let mut a = berth_authz::Attributes {
        user: user.clone(),
        ..Default::default()
    };
    match attrs {
        Attributes::Resource {
            verb,
            resource,
            namespace,
            name,
        } => {
            a.verb = verb.clone();
            a.resource = resource.clone();
            a.namespace = namespace.clone();
            a.name = name.clone();
            a.api_group = crate::api::GROUP.into();
            a.api_version = crate::api::VERSION.into();
            a.resource_request = true;
        }
        Attributes::NonResource { verb, path } => {
            a.verb = verb.clone();
            a.path = path.clone();
        }
    }
    berth_authz::forbidden_message(&a, reason)
}

/// Sorts a verified client certificate by the CA that issued it (rustls has
/// checked it chains to one of them), reading its subject as a user.
pub fn classify(
    cert_der: &[u8],
    request_header_ca_subject: &[u8],
    client_ca_subject: &[u8],
) -> Peer {
    use x509_parser::prelude::*;
    let Ok((_, cert)) = X509Certificate::from_der(cert_der) else {
        return Peer::None;
    };
    let cn = cert
        .subject()
        .iter_common_name()
        .filter_map(|a| a.as_str().ok())
        .next()
        .unwrap_or("")
        .to_string();
    let issuer = cert.issuer().as_raw();
    if issuer == request_header_ca_subject {
        Peer::FrontProxy { cn }
    } else if issuer == client_ca_subject {
        let orgs = cert
            .subject()
            .iter_organization()
            .filter_map(|a| a.as_str().ok().map(String::from))
            .collect();
        Peer::Client { cn, orgs }
    } else {
        Peer::None
    }
}

/// The raw subject of the first certificate in `pem`.
pub fn subject_of(pem: &str) -> Option<Vec<u8>> {
    use x509_parser::prelude::*;
    let der = rustls_pemfile::certs(&mut pem.as_bytes()).next()?.ok()?;
    let (_, cert) = X509Certificate::from_der(der.as_ref()).ok()?;
    Some(cert.subject().as_raw().to_vec())
}

/// The reviews over the API client.
pub struct ApiReviewer(pub kube::Client);

#[async_trait::async_trait]
impl Reviewer for ApiReviewer {
    async fn token(&self, token: &str) -> Result<Option<User>, String> {
        use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
        let api: kube::Api<TokenReview> = kube::Api::all(self.0.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let out = api
            .create(&Default::default(), &review)
            .await
            .map_err(|e| e.to_string())?;
        let status = out.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let u = status.user.unwrap_or_default();
        Ok(Some(User {
            name: u.username.unwrap_or_default(),
            uid: u.uid.unwrap_or_default(),
            groups: u.groups.unwrap_or_default(),
            extra: u.extra.unwrap_or_default().into_iter().collect(),
        }))
    }

    async fn access(&self, user: &User, attrs: &Attributes) -> Result<(bool, String), String> {
        use k8s_openapi::api::authorization::v1::{
            NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
        };
        let mut spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone().into_iter().collect()),
            ..Default::default()
        };
        match attrs {
            Attributes::Resource {
                verb,
                resource,
                namespace,
                name,
            } => {
                spec.resource_attributes = Some(ResourceAttributes {
                    group: Some(crate::api::GROUP.into()),
                    version: Some(crate::api::VERSION.into()),
                    resource: Some(resource.clone()),
                    verb: Some(verb.clone()),
                    namespace: Some(namespace.clone()),
                    name: Some(name.clone()),
                    ..Default::default()
                })
            }
            Attributes::NonResource { verb, path } => {
                spec.non_resource_attributes = Some(NonResourceAttributes {
                    path: Some(path.clone()),
                    verb: Some(verb.clone()),
                })
            }
        }
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.0.clone());
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let out = api
            .create(&Default::default(), &review)
            .await
            .map_err(|e| e.to_string())?;
        let status = out.status.unwrap_or_default();
        Ok((status.allowed, status.reason.unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Fake {
        reviews: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Reviewer for Fake {
        async fn token(&self, token: &str) -> Result<Option<User>, String> {
            self.reviews.fetch_add(1, Ordering::SeqCst);
            Ok((token == "good").then(|| User {
                name: "system:serviceaccount:default:hpa".into(),
                groups: vec!["system:serviceaccounts".into()],
                ..Default::default()
            }))
        }
        async fn access(&self, user: &User, _: &Attributes) -> Result<(bool, String), String> {
            self.reviews.fetch_add(1, Ordering::SeqCst);
            Ok((
                user.groups.iter().any(|g| g == "system:masters"),
                String::new(),
            ))
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[tokio::test]
    async fn who_is_asking() {
        let d = Delegation::new(Fake::default(), vec!["system:auth-proxy".into()]);
        let proxy = Peer::FrontProxy {
            cn: "system:auth-proxy".into(),
        };
        let h = headers(&[
            ("x-remote-user", "alice"),
            ("x-remote-group", "dev"),
            ("x-remote-group", "system:authenticated"),
            ("x-remote-extra-scopes%2Fa", "x"),
        ]);
        let u = d.authenticate(&proxy, &h).await.unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, ["dev", "system:authenticated"]);
        assert_eq!(u.extra["scopes/a"], ["x"]);
        // Another proxy name, or no user header: refused.
        let other = Peer::FrontProxy {
            cn: "mallory".into(),
        };
        assert_eq!(d.authenticate(&other, &h).await, Err(Refusal::Unauthorized));
        assert_eq!(
            d.authenticate(&proxy, &headers(&[])).await,
            Err(Refusal::Unauthorized)
        );
        // X-Remote-* from a plain client is ignored: it is who its certificate says.
        let client = Peer::Client {
            cn: "bob".into(),
            orgs: vec!["ops".into()],
        };
        assert_eq!(d.authenticate(&client, &h).await.unwrap().name, "bob");
        assert_eq!(
            d.authenticate(&Peer::None, &h).await.unwrap().name,
            "system:anonymous"
        );
        let bearer = headers(&[("authorization", "Bearer good")]);
        assert_eq!(
            d.authenticate(&Peer::None, &bearer).await.unwrap().name,
            "system:serviceaccount:default:hpa"
        );
        d.authenticate(&Peer::None, &bearer).await.unwrap();
        assert_eq!(
            d.reviewer.reviews.load(Ordering::SeqCst),
            1,
            "the token review is cached"
        );
        let bad = headers(&[("authorization", "Bearer bad")]);
        assert_eq!(
            d.authenticate(&Peer::None, &bad).await,
            Err(Refusal::Unauthorized)
        );
    }

    #[tokio::test]
    async fn forbidden_in_upstream_words_and_cached() {
        let d = Delegation::new(Fake::default(), vec![]);
        let user = User {
            name: "alice".into(),
            ..Default::default()
        };
        let attrs = Attributes::Resource {
            verb: "list".into(),
            resource: "pods".into(),
            namespace: "default".into(),
            name: String::new(),
        };
        let err = d.authorize(&user, &attrs).await.unwrap_err();
        assert_eq!(
            err,
            Refusal::Forbidden("pods.metrics.k8s.io is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"metrics.k8s.io\" in the namespace \"default\"".into())
        );
        d.authorize(&user, &attrs).await.unwrap_err();
        assert_eq!(d.reviewer.reviews.load(Ordering::SeqCst), 1);
        let admin = User {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        };
        d.authorize(&admin, &attrs).await.unwrap();
        let node = Attributes::Resource {
            verb: "get".into(),
            resource: "nodes".into(),
            namespace: String::new(),
            name: "n1".into(),
        };
        assert_eq!(
            forbidden_message(&user, &node, ""),
            "nodes.metrics.k8s.io \"n1\" is forbidden: User \"alice\" cannot get resource \"nodes\" in API group \"metrics.k8s.io\" at the cluster scope"
        );
    }
}
