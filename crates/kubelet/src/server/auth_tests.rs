use super::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A Reviewer answering from tables, counting its calls.
#[derive(Default)]
pub(crate) struct FakeReviewer {
    /// token → outcome; a token not listed fails the call (API down).
    pub tokens: HashMap<String, TokenOutcome>,
    /// (user, verb, subresource) allowed.
    pub allow: Vec<(String, &'static str, &'static str)>,
    /// Every access review fails (API down).
    pub access_down: AtomicBool,
    pub token_calls: AtomicUsize,
    pub access_calls: Mutex<Vec<Attributes>>,
}

impl FakeReviewer {
    pub fn allowing(allow: &[(&str, &'static str, &'static str)]) -> Self {
        FakeReviewer {
            allow: allow
                .iter()
                .map(|(u, v, s)| (u.to_string(), *v, *s))
                .collect(),
            ..Default::default()
        }
    }

    pub fn with_token(mut self, token: &str, outcome: TokenOutcome) -> Self {
        self.tokens.insert(token.into(), outcome);
        self
    }

    fn access_count(&self) -> usize {
        self.access_calls.lock().map(|c| c.len()).unwrap_or(0)
    }
}

#[async_trait]
impl Reviewer for FakeReviewer {
    async fn token_review(&self, token: &str) -> Result<TokenOutcome, ReviewError> {
        self.token_calls.fetch_add(1, Ordering::SeqCst);
        self.tokens
            .get(token)
            .cloned()
            .ok_or_else(|| ReviewError::Other("connection refused".into()))
    }

    async fn access_review(&self, a: &Attributes) -> Result<bool, ReviewError> {
        if let Ok(mut c) = self.access_calls.lock() {
            c.push(a.clone());
        }
        if self.access_down.load(Ordering::SeqCst) {
            return Err(ReviewError::Other("connection refused".into()));
        }
        Ok(self
            .allow
            .iter()
            .any(|(u, v, s)| *u == a.user.name && *v == a.verb && *s == a.subresource))
    }
}

#[test]
fn verbs_from_methods() {
    let cases = [
        (Method::GET, "get"),
        (Method::POST, "create"),
        (Method::PUT, "update"),
        (Method::PATCH, "patch"),
        (Method::DELETE, "delete"),
        // Not in upstream's table: the empty verb.
        (Method::HEAD, ""),
        (Method::OPTIONS, ""),
    ];
    for (m, want) in cases {
        assert_eq!(api_verb(&m), want, "{m}");
    }
}

#[test]
fn subresources_from_paths() {
    let cases: [(&str, &[&str]); 24] = [
        ("/stats/summary", &["stats"]),
        ("/stats", &["stats"]),
        ("/statsx", &["proxy"]),
        ("/metrics", &["metrics"]),
        ("/metrics/cadvisor", &["metrics"]),
        ("/metrics/probes", &["metrics"]),
        ("/logs/", &["log"]),
        ("/logs/syslog", &["log"]),
        ("/checkpoint/ns/p/c", &["checkpoint"]),
        ("/pods", &["pods", "proxy"]),
        ("/pods/", &["pods", "proxy"]),
        ("/podsx", &["proxy"]),
        ("/runningpods/", &["pods", "proxy"]),
        ("/healthz", &["healthz", "proxy"]),
        ("/healthz/syncloop", &["healthz", "proxy"]),
        ("/configz", &["configz", "proxy"]),
        ("/containerLogs/ns/p/c", &["proxy"]),
        ("/exec/ns/p/c", &["proxy"]),
        ("/attach/ns/p/c", &["proxy"]),
        ("/portForward/ns/p", &["proxy"]),
        ("/run/ns/p/c", &["proxy"]),
        // Upstream's kubelet has no spec subresource: /spec is proxy.
        ("/spec/", &["proxy"]),
        ("/", &["proxy"]),
        ("/nope", &["proxy"]),
    ];
    for (path, want) in cases {
        assert_eq!(subresources(path), want, "{path}");
    }
}

#[test]
fn attributes_name_this_node() {
    let u = UserInfo::new("alice", &["devs"]);
    let got = request_attributes(&u, &Method::GET, "/pods", "node-1");
    assert_eq!(
        got,
        vec![
            Attributes {
                user: u.clone(),
                verb: "get",
                subresource: "pods",
                name: "node-1".into(),
            },
            Attributes {
                user: u.clone(),
                verb: "get",
                subresource: "proxy",
                name: "node-1".into(),
            },
        ]
    );
    let spec = serde_json::to_value(access_review_spec(&got[1])).unwrap();
    assert_eq!(
        spec,
        serde_json::json!({
            "user": "alice",
            "groups": ["devs"],
            "resourceAttributes": {"namespace": "", "verb": "get", "group": "", "version": "v1",
                "resource": "nodes", "subresource": "proxy", "name": "node-1"},
        })
    );
}

#[test]
fn refusal_texts() {
    let u = UserInfo::new("system:serviceaccount:default:nobody", &[]);
    let cases = [
        (
            Method::GET,
            "/pods",
            "Forbidden (user=system:serviceaccount:default:nobody, verb=get, resource=nodes, subresource(s)=[pods proxy])\n",
        ),
        (
            Method::POST,
            "/exec/ns/p/c",
            "Forbidden (user=system:serviceaccount:default:nobody, verb=create, resource=nodes, subresource(s)=[proxy])\n",
        ),
        (
            Method::GET,
            "/stats/summary",
            "Forbidden (user=system:serviceaccount:default:nobody, verb=get, resource=nodes, subresource(s)=[stats])\n",
        ),
    ];
    for (m, path, want) in cases {
        assert_eq!(
            forbidden_message(&request_attributes(&u, &m, path, "n")),
            want,
            "{path}"
        );
    }
    let a = &request_attributes(&u, &Method::GET, "/healthz", "n")[0];
    assert_eq!(
        authorization_error_message(a),
        "Authorization error (user=system:serviceaccount:default:nobody, verb=get, resource=nodes, subresource=healthz)"
    );
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[test]
fn bearer_header_forms() {
    let cases = [
        ("Bearer abc", Some("abc")),
        ("bearer abc", Some("abc")),
        ("BEARER abc", Some("abc")),
        ("  Bearer abc  ", Some("abc")),
        ("Bearer abc extra", Some("abc")),
        ("Bearer  abc", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic YWxhZGRpbjpvcGVu", None),
        ("abc", None),
    ];
    for (value, want) in cases {
        let h = headers(&[("authorization", value)]);
        assert_eq!(bearer_token(&h).as_deref(), want, "{value:?}");
    }
    assert_eq!(bearer_token(&HeaderMap::new()), None);
}

#[test]
fn websocket_token_forms() {
    use base64::Engine;
    let enc = |t: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(t);
    let proto = |t: &str| format!("{BEARER_PROTOCOL_PREFIX}{}", enc(t));
    let ws = [("connection", "Upgrade"), ("upgrade", "websocket")];
    let with = |protocols: &[&str]| {
        let mut h = headers(&ws);
        for p in protocols {
            h.append(
                header::SEC_WEBSOCKET_PROTOCOL,
                HeaderValue::from_str(p).unwrap(),
            );
        }
        h
    };
    let ok = |token: &str, rest: &[&str]| {
        Ok(Some(ProtocolToken {
            token: token.into(),
            rest: rest.iter().map(|s| s.to_string()).collect(),
        }))
    };
    let p = proto("tok");
    let two = format!("v5.channel.k8s.io, {p}");
    let bad = format!("{BEARER_PROTOCOL_PREFIX}!!!");
    let cases: Vec<(HeaderMap, Result<Option<ProtocolToken>, &str>)> = vec![
        (with(&[&two]), ok("tok", &["v5.channel.k8s.io"])),
        (
            with(&["v5.channel.k8s.io", &p]),
            ok("tok", &["v5.channel.k8s.io"]),
        ),
        (with(&["v5.channel.k8s.io"]), Ok(None)),
        (with(&[&p]), Err("missing additional subprotocol")),
        (
            with(&["v4.channel.k8s.io", &p, &proto("other")]),
            Err("multiple base64.bearer.authorization tokens specified"),
        ),
        (
            with(&["v4.channel.k8s.io", &bad]),
            Err("invalid base64.bearer.authorization token encoding"),
        ),
        (
            with(&["v4.channel.k8s.io", BEARER_PROTOCOL_PREFIX]),
            Ok(None),
        ),
        // Not a WebSocket request: the protocol header means nothing.
        (headers(&[("sec-websocket-protocol", &two)]), Ok(None)),
    ];
    for (i, (h, want)) in cases.into_iter().enumerate() {
        assert_eq!(websocket_token(&h), want, "case {i}");
    }
}

#[test]
fn cache_lifetimes() {
    let cfg = AuthConfig::default();
    let u = UserInfo::new("u", &[]);
    fn down<T>() -> Result<T, ReviewError> {
        Err(ReviewError::Other("down".into()))
    }
    let token_cases: Vec<(Result<TokenOutcome, ReviewError>, Option<u64>)> = vec![
        (Ok(TokenOutcome::Authenticated(u)), Some(120)),
        (Ok(TokenOutcome::Unauthenticated { error: None }), Some(120)),
        (
            Ok(TokenOutcome::Unauthenticated {
                error: Some("invalid bearer token".into()),
            }),
            None,
        ),
        (down(), None),
    ];
    for (outcome, want) in token_cases {
        assert_eq!(
            token_ttl(&outcome, &cfg),
            want.map(Duration::from_secs),
            "{outcome:?}"
        );
    }
    let decision_cases: Vec<(Result<bool, ReviewError>, Option<u64>)> =
        vec![(Ok(true), Some(300)), (Ok(false), Some(30)), (down(), None)];
    for (outcome, want) in decision_cases {
        assert_eq!(
            decision_ttl(&outcome, &cfg),
            want.map(Duration::from_secs),
            "{outcome:?}"
        );
    }
}

#[test]
fn ttl_cache_expires_and_stays_bounded() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let mut c = TtlCache::new(2);
    c.insert("a".into(), 1, s(10), t0);
    assert_eq!(c.get("a", t0), Some(1));
    assert_eq!(c.get("a", t0 + s(9)), Some(1));
    assert_eq!(c.get("a", t0 + s(10)), None, "expired at its deadline");
    assert_eq!(c.get("b", t0), None);
    // Full: what expires soonest goes first.
    c.insert("b".into(), 2, s(100), t0);
    c.insert("c".into(), 3, s(50), t0 + s(1));
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c.get("a", t0), c.get("b", t0), c.get("c", t0)),
        (None, Some(2), Some(3))
    );
    // Full of live entries: the soonest to expire (c) makes room.
    c.insert("d".into(), 4, s(100), t0 + s(2));
    assert_eq!(
        (c.get("b", t0), c.get("c", t0), c.get("d", t0)),
        (Some(2), None, Some(4))
    );
    // Replacing a key never evicts another.
    c.insert("d".into(), 5, s(100), t0 + s(3));
    assert_eq!(
        (c.len(), c.get("b", t0), c.get("d", t0)),
        (2, Some(2), Some(5))
    );
}

#[test]
fn certificate_users() {
    let cert = |dn: &[(rcgen::DnType, &str)]| {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (t, v) in dn {
            params.distinguished_name.push(t.clone(), *v);
        }
        params.self_signed(&key).unwrap().der().to_vec()
    };
    use rcgen::DnType::{CommonName, OrganizationName};
    let cases: Vec<(Vec<u8>, Option<UserInfo>)> = vec![
        (
            cert(&[
                (CommonName, "kube-apiserver-kubelet-client"),
                (OrganizationName, "system:masters"),
            ]),
            Some(UserInfo::new(
                "kube-apiserver-kubelet-client",
                &["system:masters"],
            )),
        ),
        (
            cert(&[(CommonName, "bob")]),
            Some(UserInfo::new("bob", &[])),
        ),
        (cert(&[(OrganizationName, "devs")]), None),
    ];
    for (der, want) in cases {
        assert_eq!(user_from_cert(&der), want);
    }
    assert_eq!(user_from_cert(b"not a certificate"), None);
}

const NODE: &str = "node-1";
const SA: &str = "system:serviceaccount:default:reader";

fn sa_user() -> UserInfo {
    UserInfo::new(SA, &["system:serviceaccounts", "system:authenticated"])
}

fn auth(fake: FakeReviewer) -> (KubeletAuth, Arc<FakeReviewer>) {
    let fake = Arc::new(fake);
    (
        KubeletAuth::new(NODE, fake.clone(), AuthConfig::default()),
        fake,
    )
}

async fn body(r: Response<Body>) -> (u16, String) {
    use http_body_util::BodyExt;
    let code = r.status().as_u16();
    let b = r.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&b).into_owned())
}

/// (code, body) of a refused request, or 200 and the user's name.
async fn outcome(
    a: &KubeletAuth,
    cert: Option<&UserInfo>,
    method: Method,
    path: &str,
    h: &mut HeaderMap,
) -> (u16, String) {
    match a.filter(cert, &method, path, h).await {
        Ok(u) => (200, u.name),
        Err(r) => body(r).await,
    }
}

#[tokio::test]
async fn who_gets_through() {
    let apiserver = UserInfo::new("kube-apiserver-kubelet-client", &["system:masters"]);
    let fake = FakeReviewer::allowing(&[
        ("kube-apiserver-kubelet-client", "get", "proxy"),
        ("kube-apiserver-kubelet-client", "create", "proxy"),
        (SA, "get", "pods"),
        (SA, "get", "stats"),
    ])
    .with_token("good", TokenOutcome::Authenticated(sa_user()))
    .with_token("unknown", TokenOutcome::Unauthenticated { error: None })
    .with_token(
        "expired",
        TokenOutcome::Unauthenticated {
            error: Some("service account token has expired".into()),
        },
    );
    let (a, _) = auth(fake);
    const CERT: &str = "kube-apiserver-kubelet-client";
    // (client certificate, method, path, bearer token, code, what: the user
    // let through, or the refusal's text after "user=<name>, ")
    type Case<'a> = (bool, Method, &'a str, Option<&'a str>, u16, &'a str);
    let cases: [Case; 15] = [
        (true, Method::GET, "/containerLogs/ns/p/c", None, 200, CERT),
        (true, Method::POST, "/exec/ns/p/c", None, 200, CERT),
        // /healthz falls back to nodes/proxy.
        (true, Method::GET, "/healthz", None, 200, CERT),
        (
            true,
            Method::GET,
            "/stats/summary",
            None,
            403,
            "verb=get, resource=nodes, subresource(s)=[stats]",
        ),
        // A certificate wins over a bad token.
        (true, Method::GET, "/healthz", Some("unknown"), 200, CERT),
        (false, Method::GET, "/pods", None, 401, "Unauthorized"),
        (false, Method::GET, "/healthz", None, 401, "Unauthorized"),
        (
            false,
            Method::GET,
            "/pods",
            Some("unknown"),
            401,
            "Unauthorized",
        ),
        (
            false,
            Method::GET,
            "/pods",
            Some("expired"),
            401,
            "Unauthorized",
        ),
        // The TokenReview could not be made.
        (
            false,
            Method::GET,
            "/pods",
            Some("api-down"),
            401,
            "Unauthorized",
        ),
        (false, Method::GET, "/pods", Some("good"), 200, SA),
        (false, Method::GET, "/stats/summary", Some("good"), 200, SA),
        (
            false,
            Method::GET,
            "/exec/ns/p/c",
            Some("good"),
            403,
            "verb=get, resource=nodes, subresource(s)=[proxy]",
        ),
        (
            false,
            Method::GET,
            "/healthz",
            Some("good"),
            403,
            "verb=get, resource=nodes, subresource(s)=[healthz proxy]",
        ),
        (
            false,
            Method::DELETE,
            "/pods",
            Some("good"),
            403,
            "verb=delete, resource=nodes, subresource(s)=[pods proxy]",
        ),
    ];
    for (i, (cert, method, path, token, code, what)) in cases.into_iter().enumerate() {
        let cert_user = cert.then(|| apiserver.clone());
        let mut h = match token {
            Some(t) => headers(&[("authorization", &format!("Bearer {t}"))]),
            None => HeaderMap::new(),
        };
        let user = if cert { CERT } else { SA };
        let want = match code {
            403 => format!("Forbidden (user={user}, {what})\n"),
            _ => what.to_string(),
        };
        assert_eq!(
            outcome(&a, cert_user.as_ref(), method, path, &mut h).await,
            (code, want),
            "case {i}: {path}"
        );
    }
}

#[tokio::test]
async fn accepted_credentials_go_no_further() {
    use base64::Engine;
    let fake = FakeReviewer::allowing(&[(SA, "get", "proxy")])
        .with_token("good", TokenOutcome::Authenticated(sa_user()));
    let (a, _) = auth(fake);
    let mut h = headers(&[("authorization", "Bearer good"), ("x-other", "kept")]);
    let u = a
        .filter(None, &Method::GET, "/exec/ns/p/c", &mut h)
        .await
        .unwrap();
    assert_eq!(u, sa_user());
    assert!(h.get(header::AUTHORIZATION).is_none());
    assert_eq!(h.get("x-other").unwrap(), "kept");

    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("good");
    let protocols =
        format!("v5.channel.k8s.io, {BEARER_PROTOCOL_PREFIX}{token}, v4.channel.k8s.io");
    let mut h = headers(&[
        ("connection", "Upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-protocol", &protocols),
    ]);
    let u = a
        .filter(None, &Method::GET, "/exec/ns/p/c", &mut h)
        .await
        .unwrap();
    assert_eq!(u.name, SA);
    assert_eq!(
        h.get(header::SEC_WEBSOCKET_PROTOCOL).unwrap(),
        "v5.channel.k8s.io,v4.channel.k8s.io"
    );
    // A certificate's user joins system:authenticated, as upstream's group adder.
    let u = UserInfo::new("kube-apiserver-kubelet-client", &["system:masters"]);
    let fake = FakeReviewer::allowing(&[("kube-apiserver-kubelet-client", "get", "proxy")]);
    let (a, fake) = auth(fake);
    a.filter(
        Some(&u),
        &Method::GET,
        "/exec/ns/p/c",
        &mut HeaderMap::new(),
    )
    .await
    .unwrap();
    let asked = fake.access_calls.lock().unwrap()[0].user.clone();
    assert_eq!(asked.groups, ["system:masters", "system:authenticated"]);
}

#[tokio::test]
async fn authorization_errors_are_500_and_never_allow() {
    let fake = FakeReviewer::allowing(&[(SA, "get", "pods")])
        .with_token("good", TokenOutcome::Authenticated(sa_user()));
    fake.access_down.store(true, Ordering::SeqCst);
    let (a, fake) = auth(fake);
    let mut h = headers(&[("authorization", "Bearer good")]);
    assert_eq!(
        outcome(&a, None, Method::GET, "/pods", &mut h).await,
        (
            500,
            format!("Authorization error (user={SA}, verb=get, resource=nodes, subresource=pods)")
        )
    );
    // Not cached: the API back, the next request is allowed.
    fake.access_down.store(false, Ordering::SeqCst);
    let mut h = headers(&[("authorization", "Bearer good")]);
    assert_eq!(
        outcome(&a, None, Method::GET, "/pods", &mut h).await,
        (200, SA.into())
    );
}

#[tokio::test(start_paused = true)]
async fn reviews_are_cached_for_upstreams_lifetimes() {
    let fake = FakeReviewer::allowing(&[(SA, "get", "proxy")])
        .with_token("good", TokenOutcome::Authenticated(sa_user()))
        .with_token("unknown", TokenOutcome::Unauthenticated { error: None })
        .with_token(
            "expired",
            TokenOutcome::Unauthenticated {
                error: Some("expired".into()),
            },
        );
    let (a, fake) = auth(fake);
    let call = |token: &'static str, path: &'static str| {
        let a = &a;
        async move {
            let mut h = headers(&[("authorization", &format!("Bearer {token}"))]);
            outcome(a, None, Method::GET, path, &mut h).await.0
        }
    };
    let tokens = || fake.token_calls.load(Ordering::SeqCst);
    let s = Duration::from_secs;

    // Allowed (exec → proxy): one TokenReview, one SAR, then both cached.
    assert_eq!(call("good", "/exec/ns/p/c").await, 200);
    assert_eq!(call("good", "/exec/ns/p/c").await, 200);
    assert_eq!((tokens(), fake.access_count()), (1, 1));
    // Denied (stats): cached 30 s.
    assert_eq!(call("good", "/stats/summary").await, 403);
    assert_eq!(call("good", "/stats/summary").await, 403);
    assert_eq!(fake.access_count(), 2);
    tokio::time::advance(s(31)).await;
    assert_eq!(call("good", "/stats/summary").await, 403);
    assert_eq!(fake.access_count(), 3, "a denial is asked again after 30 s");
    assert_eq!(call("good", "/exec/ns/p/c").await, 200);
    assert_eq!(fake.access_count(), 3, "an allow is remembered 5 min");
    // The token itself: remembered 2 min.
    assert_eq!(tokens(), 1);
    tokio::time::advance(s(90)).await;
    assert_eq!(call("good", "/exec/ns/p/c").await, 200);
    assert_eq!(tokens(), 2, "the token is reviewed again after 2 min");
    tokio::time::advance(s(180)).await;
    assert_eq!(call("good", "/exec/ns/p/c").await, 200);
    assert_eq!(
        fake.access_count(),
        4,
        "the allow is asked again after 5 min"
    );

    // An unrecognised token is remembered; one the review reports an error
    // for, or one whose review failed, is not.
    let before = tokens();
    for t in [
        "unknown", "unknown", "expired", "expired", "api-down", "api-down",
    ] {
        assert_eq!(call(t, "/pods").await, 401, "{t}");
    }
    assert_eq!(tokens() - before, 5);
}
