use std::path::PathBuf;

use super::*;
use serde_json::Value;

const ISS: &str = "https://kubernetes.default.svc.cluster.local";
const NOW: i64 = 1_700_000_000;

/// A P-256 key from `openssl genpkey -algorithm EC -pkeyopt
/// ec_paramgen_curve:P-256`, with the kid and JWK coordinates openssl and a
/// base64url encoder compute for it: `openssl pkey -pubout -outform DER |
/// openssl dgst -sha256 -binary | base64url`. Test-only, never a real key.
const OPENSSL_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgp8kzcSwfXVtXBKIV
gZTZ50ygjSXvlO//4e2yN9e7Cf2hRANCAAT6ar1jfXqSsPu8olP7GF9mSK/PRXS3
Rp5/PHJsr2/UrWNT1M+szSuVjh6S/pCB2u88r5bL3dSTr+oDvlLXZJyJ
-----END PRIVATE KEY-----
";
const OPENSSL_KID: &str = "mN8noVXoOBHvZoeM55U00rZVTk26-5LZjdVgk1ySzxs";
const OPENSSL_X: &str = "-mq9Y316krD7vKJT-xhfZkivz0V0t0aefzxybK9v1K0";
const OPENSSL_Y: &str = "Y1PUz6zNK5WOHpL-kIHa7zyvlsvd1JOv6gO-UtdknIk";
/// The same key as SEC1 (`openssl ec`), which Berth asks to be converted.
const OPENSSL_SEC1_KEY: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIKfJM3EsH11bVwSiFYGU2edMoI0l75Tv/+HtsjfXuwn9oAoGCCqGSM49
AwEHoUQDQgAE+mq9Y316krD7vKJT+xhfZkivz0V0t0aefzxybK9v1K1jU9TPrM0r
lY4ekv6QgdrvPK+Wy93Uk6/qA75S12SciQ==
-----END EC PRIVATE KEY-----
";

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!("berth-authn-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn issuer_at(dir: &Path, iss: &str) -> Issuer {
    Issuer::load_or_create(dir, iss, vec![iss.to_string()]).expect("issuer")
}

fn issuer() -> (TempDir, Issuer) {
    let dir = TempDir::new();
    let i = issuer_at(&dir.0, ISS);
    (dir, i)
}

fn claims() -> BoundClaims {
    BoundClaims {
        namespace: "default".into(),
        sa_name: "builder".into(),
        sa_uid: "sa-uid".into(),
        audiences: vec![],
        issued_at: NOW,
        expires_at: NOW + 3600,
        bound: Some(BoundObject {
            kind: BoundKind::Pod,
            name: "web-0".into(),
            uid: "pod-uid".into(),
        }),
        node: Some(ObjectRef {
            name: "node-a".into(),
            uid: "node-uid".into(),
        }),
        warn_after: Some(NOW + 3607),
    }
}

fn b64json(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).expect("json"))
}

fn decode_part(token: &str, i: usize) -> Value {
    let part = token.split('.').nth(i).expect("part");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64")).expect("json")
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn bound_token_has_upstreams_shape() {
    let (_dir, i) = issuer();
    let token = i.issue(&claims()).expect("issue");
    let header = decode_part(&token, 0);
    assert_eq!(
        serde_json::to_string(&header).expect("json"),
        format!(r#"{{"alg":"ES256","kid":"{}"}}"#, i.key_id())
    );
    let payload = decode_part(&token, 1);
    let jti = payload["jti"].as_str().expect("jti").to_string();
    assert!(uuid::Uuid::parse_str(&jti).is_ok(), "{jti}");
    // Keys sorted at every level, as Go's map encoding leaves them.
    let want = format!(
        concat!(
            r#"{{"aud":["{iss}"],"exp":1700003600,"iat":1700000000,"iss":"{iss}","jti":"{jti}","#,
            r#""kubernetes.io":{{"namespace":"default","node":{{"name":"node-a","uid":"node-uid"}},"#,
            r#""pod":{{"name":"web-0","uid":"pod-uid"}},"serviceaccount":{{"name":"builder","uid":"sa-uid"}},"#,
            r#""warnafter":1700003607}},"nbf":1700000000,"sub":"system:serviceaccount:default:builder"}}"#
        ),
        iss = ISS,
        jti = jti
    );
    assert_eq!(serde_json::to_string(&payload).expect("json"), want);
    assert_eq!(
        token.split('.').nth(2).map(str::len),
        Some(86),
        "64-byte r||s"
    );
}

#[test]
fn legacy_token_has_upstreams_shape() {
    let (_dir, i) = issuer();
    let token = i
        .issue_legacy("default", "builder", "sa-uid", "builder-token-x7k2q")
        .expect("issue");
    let payload = decode_part(&token, 1);
    assert_eq!(
        serde_json::to_string(&payload).expect("json"),
        concat!(
            r#"{"iss":"kubernetes/serviceaccount","#,
            r#""kubernetes.io/serviceaccount/namespace":"default","#,
            r#""kubernetes.io/serviceaccount/secret.name":"builder-token-x7k2q","#,
            r#""kubernetes.io/serviceaccount/service-account.name":"builder","#,
            r#""kubernetes.io/serviceaccount/service-account.uid":"sa-uid","#,
            r#""sub":"system:serviceaccount:default:builder"}"#
        )
    );
}

#[test]
fn bound_round_trip_table() {
    let (_dir, i) = issuer();
    let extra = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
            .collect()
    };
    struct Case {
        name: &'static str,
        claims: BoundClaims,
        audiences: Vec<String>,
        want_bound: Option<BoundKind>,
        want_node: bool,
        want_extra: Vec<(&'static str, &'static str)>,
        want_audiences: Vec<String>,
    }
    let cases = vec![
        Case {
            name: "pod-bound with its node",
            claims: claims(),
            audiences: vec![],
            want_bound: Some(BoundKind::Pod),
            want_node: true,
            want_extra: vec![
                (POD_NAME_KEY, "web-0"),
                (POD_UID_KEY, "pod-uid"),
                (NODE_NAME_KEY, "node-a"),
                (NODE_UID_KEY, "node-uid"),
            ],
            want_audiences: strings(&[ISS]),
        },
        Case {
            name: "secret-bound, explicit audiences",
            claims: BoundClaims {
                audiences: strings(&["vault", "sts.amazonaws.com"]),
                bound: Some(BoundObject {
                    kind: BoundKind::Secret,
                    name: "s".into(),
                    uid: "secret-uid".into(),
                }),
                node: None,
                ..claims()
            },
            audiences: strings(&["sts.amazonaws.com", "other"]),
            want_bound: Some(BoundKind::Secret),
            want_node: false,
            want_extra: vec![],
            want_audiences: strings(&["sts.amazonaws.com"]),
        },
        Case {
            name: "node-bound",
            claims: BoundClaims {
                bound: Some(BoundObject {
                    kind: BoundKind::Node,
                    name: "node-b".into(),
                    uid: "".into(),
                }),
                node: None,
                ..claims()
            },
            audiences: vec![],
            want_bound: Some(BoundKind::Node),
            want_node: false,
            want_extra: vec![(NODE_NAME_KEY, "node-b")],
            want_audiences: strings(&[ISS]),
        },
        Case {
            name: "unbound, no warnafter",
            claims: BoundClaims {
                bound: None,
                node: None,
                warn_after: None,
                ..claims()
            },
            audiences: strings(&[ISS]),
            want_bound: None,
            want_node: false,
            want_extra: vec![],
            want_audiences: strings(&[ISS]),
        },
    ];
    for c in cases {
        let token = i.issue(&c.claims).expect(c.name);
        let v = i.verify(&token, NOW, &c.audiences).expect(c.name);
        assert_eq!(
            (v.namespace.as_str(), v.sa_name.as_str(), v.sa_uid.as_str()),
            ("default", "builder", "sa-uid"),
            "{}",
            c.name
        );
        assert_eq!(v.bound.as_ref().map(|b| b.kind), c.want_bound, "{}", c.name);
        assert_eq!(v.bound, c.claims.bound, "{}", c.name);
        assert_eq!(v.node.is_some(), c.want_node, "{}", c.name);
        assert_eq!(v.legacy_secret, None, "{}", c.name);
        assert_eq!(v.audiences, c.want_audiences, "{}", c.name);
        assert_eq!(v.expires_at, Some(NOW + 3600), "{}", c.name);
        let jti = v.jti.clone().expect("jti");
        assert_eq!(v.user.name, "system:serviceaccount:default:builder");
        assert_eq!(v.user.uid, "sa-uid");
        assert_eq!(
            v.user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ],
            "{}",
            c.name
        );
        let mut want_extra = extra(&c.want_extra);
        want_extra.insert(CREDENTIAL_ID_KEY.into(), vec![format!("JTI={jti}")]);
        assert_eq!(v.user.extra, want_extra, "{}", c.name);
    }
}

#[test]
fn legacy_round_trip() {
    let (_dir, i) = issuer();
    let token = i
        .issue_legacy("kube-system", "deployer", "sa-uid", "deployer-token-abc")
        .expect("issue");
    // Legacy tokens never expire: a century later they still verify.
    let v = i
        .verify(&token, NOW + 100 * 365 * 86400, &[])
        .expect("verify");
    assert_eq!(v.namespace, "kube-system");
    assert_eq!(v.sa_name, "deployer");
    assert_eq!(v.sa_uid, "sa-uid");
    assert_eq!(v.legacy_secret.as_deref(), Some("deployer-token-abc"));
    assert_eq!(
        (v.bound, v.node, v.jti, v.expires_at),
        (None, None, None, None)
    );
    assert_eq!(v.audiences, strings(&[ISS]));
    assert_eq!(v.user.name, "system:serviceaccount:kube-system:deployer");
    assert_eq!(
        v.user.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated"
        ]
    );
    assert!(v.user.extra.is_empty());
    // Asking for the API audience explicitly is the same as asking for none.
    assert!(i.verify(&token, NOW, &strings(&[ISS])).is_ok());
}

/// Replaces the payload of `token`, keeping header and signature.
fn with_payload(token: &str, payload: &Value) -> String {
    let mut parts: Vec<String> = token.split('.').map(String::from).collect();
    parts[1] = b64json(payload);
    parts.join(".")
}

#[test]
fn verify_rejects_table() {
    let (_dir, i) = issuer();
    let (_other_dir, other) = issuer();
    let (_stranger_dir, stranger) = {
        let dir = TempDir::new();
        let s = issuer_at(&dir.0, "https://issuer.example.com");
        (dir, s)
    };
    let good = i.issue(&claims()).expect("issue");
    let exp = NOW + 3600;
    let [h, p, s]: [&str; 3] = good
        .split('.')
        .collect::<Vec<_>>()
        .try_into()
        .expect("three parts");
    let payload = decode_part(&good, 1);
    let kid = i.key_id().to_string();

    let mut tampered = payload.clone();
    tampered["kubernetes.io"]["serviceaccount"]["name"] = "admin".into();
    tampered["sub"] = "system:serviceaccount:default:admin".into();

    let mut bad_sig = URL_SAFE_NO_PAD.decode(s).expect("sig");
    bad_sig[10] ^= 1;

    let none = format!(
        "{}.{p}.",
        b64json(&serde_json::json!({"alg": "none", "kid": kid}))
    );
    // HS256 "signed" with the public key, the classic key-confusion attack.
    let hs_input = format!(
        "{}.{p}",
        b64json(&serde_json::json!({"alg": "HS256", "kid": kid}))
    );
    let hs_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, i.key.public_point());
    let hs256 = format!(
        "{hs_input}.{}",
        URL_SAFE_NO_PAD.encode(ring::hmac::sign(&hs_key, hs_input.as_bytes()))
    );
    let no_kid = format!("{}.{p}.{s}", b64json(&serde_json::json!({"alg": "ES256"})));
    let crit = format!(
        "{}.{p}.{s}",
        b64json(&serde_json::json!({"alg": "ES256", "crit": ["exp"], "exp": 1}))
    );

    let sign = |v: Value| i.sign(&v).expect("sign");
    let bound = |edit: &dyn Fn(&mut Value)| {
        let mut v = payload.clone();
        edit(&mut v);
        sign(v)
    };

    let legacy = i
        .issue_legacy("default", "builder", "sa-uid", "tok")
        .expect("legacy");
    let legacy_payload = decode_part(&legacy, 1);
    let legacy_edit = |edit: &dyn Fn(&mut Value)| {
        let mut v = legacy_payload.clone();
        edit(&mut v);
        sign(v)
    };

    type Check = fn(&TokenError) -> bool;
    /// (name, token, now, requested audiences, expected error, its text)
    type Case = (&'static str, String, i64, Vec<String>, Check, &'static str);
    let cases: Vec<Case> = vec![
        (
            "tampered payload",
            with_payload(&good, &tampered),
            NOW,
            vec![],
            |e| *e == TokenError::BadSignature,
            "go-jose/go-jose: error in cryptographic primitive",
        ),
        (
            "tampered signature",
            format!("{h}.{p}.{}", URL_SAFE_NO_PAD.encode(&bad_sig)),
            NOW,
            vec![],
            |e| *e == TokenError::BadSignature,
            "cryptographic primitive",
        ),
        (
            "truncated signature",
            format!("{h}.{p}.{}", &s[..40]),
            NOW,
            vec![],
            |e| *e == TokenError::BadSignature,
            "cryptographic primitive",
        ),
        (
            "alg none",
            none,
            NOW,
            vec![],
            |e| matches!(e, TokenError::UnsupportedAlgorithm(a) if a == "none"),
            r#"unexpected signature algorithm "none"; expected ["ES256"]"#,
        ),
        (
            "alg HS256 keyed with the public key",
            hs256,
            NOW,
            vec![],
            |e| matches!(e, TokenError::UnsupportedAlgorithm(a) if a == "HS256"),
            r#"unexpected signature algorithm "HS256""#,
        ),
        (
            "another issuer",
            stranger.issue(&claims()).expect("issue"),
            NOW,
            vec![],
            |e| matches!(e, TokenError::UnknownIssuer(s) if s == "https://issuer.example.com"),
            r#"token issuer "https://issuer.example.com" is invalid"#,
        ),
        (
            "our issuer, another key",
            other.issue(&claims()).expect("issue"),
            NOW,
            vec![],
            |e| *e == TokenError::NoKeyFound,
            "invalid signature, no keys found",
        ),
        (
            "another key without kid",
            {
                let t = other.issue(&claims()).expect("issue");
                let mut parts: Vec<&str> = t.split('.').collect();
                let header = b64json(&serde_json::json!({"alg": "ES256"}));
                parts[0] = &header;
                parts.join(".")
            },
            NOW,
            vec![],
            |e| *e == TokenError::BadSignature,
            "cryptographic primitive",
        ),
        (
            "our key, kid dropped from the signed header",
            no_kid,
            NOW,
            vec![],
            |e| *e == TokenError::BadSignature,
            "cryptographic primitive",
        ),
        (
            "critical header",
            crit,
            NOW,
            vec![],
            |e| matches!(e, TokenError::Malformed(_)),
            "unsupported critical header",
        ),
        (
            "expired beyond leeway",
            good.clone(),
            exp + LEEWAY_SECONDS + 1,
            vec![],
            |e| *e == TokenError::Expired,
            "service account token has expired",
        ),
        (
            "nbf beyond leeway",
            good.clone(),
            NOW - LEEWAY_SECONDS - 1,
            vec![],
            |e| *e == TokenError::NotValidYet,
            "service account token is not valid yet",
        ),
        (
            "iat in the future without nbf",
            bound(&|v| {
                v.as_object_mut().expect("object").remove("nbf");
                v["iat"] = (NOW + 600).into();
            }),
            NOW,
            vec![],
            |e| *e == TokenError::IssuedInTheFuture,
            "service account token is issued in the future",
        ),
        (
            "audience mismatch",
            i.issue(&BoundClaims {
                audiences: strings(&["vault"]),
                ..claims()
            })
            .expect("issue"),
            NOW,
            strings(&["sts.amazonaws.com", "other"]),
            |e| matches!(e, TokenError::WrongAudience { .. }),
            r#"token audiences ["vault"] is invalid for the target audiences ["sts.amazonaws.com" "other"]"#,
        ),
        (
            "bound token for another audience, API audience implied",
            i.issue(&BoundClaims {
                audiences: strings(&["vault"]),
                ..claims()
            })
            .expect("issue"),
            NOW,
            vec![],
            |e| matches!(e, TokenError::WrongAudience { .. }),
            r#"token audiences ["vault"] is invalid for the target audiences ["https://kubernetes.default.svc.cluster.local"]"#,
        ),
        (
            "legacy token for non-default audiences",
            legacy.clone(),
            NOW,
            strings(&["vault"]),
            |e| matches!(e, TokenError::WrongAudience { .. }),
            r#"token audiences ["https://kubernetes.default.svc.cluster.local"] is invalid for the target audiences ["vault"]"#,
        ),
        (
            "legacy sub names another account",
            legacy_edit(&|v| v["sub"] = "system:serviceaccount:default:admin".into()),
            NOW,
            vec![],
            |e| matches!(e, TokenError::InvalidClaims(_)),
            "sub claim is invalid",
        ),
        (
            "legacy without secret name",
            legacy_edit(&|v| {
                v.as_object_mut()
                    .expect("object")
                    .remove("kubernetes.io/serviceaccount/secret.name");
            }),
            NOW,
            vec![],
            |e| matches!(e, TokenError::InvalidClaims(_)),
            "secretName claim is missing",
        ),
        (
            "bound without private claims",
            bound(&|v| {
                v.as_object_mut().expect("object").remove("kubernetes.io");
            }),
            NOW,
            vec![],
            |e| matches!(e, TokenError::InvalidClaims(_)),
            "kubernetes.io claim is missing",
        ),
        (
            "bound to pod and secret",
            bound(&|v| {
                v["kubernetes.io"]["secret"] = serde_json::json!({"name": "s", "uid": "u"});
            }),
            NOW,
            vec![],
            |e| matches!(e, TokenError::InvalidClaims(_)),
            "token can only be bound to one object type",
        ),
        (
            "exp not a number",
            bound(&|v| v["exp"] = "tomorrow".into()),
            NOW,
            vec![],
            |e| matches!(e, TokenError::InvalidClaims(_)),
            "service account token claims",
        ),
    ];
    for (name, token, now, auds, check, text) in cases {
        match i.verify(&token, now, &auds) {
            Ok(v) => panic!("{name}: accepted as {v:?}"),
            Err(e) => {
                assert!(check(&e), "{name}: {e:?}");
                assert!(e.to_string().contains(text), "{name}: {e}");
                let not_ours = matches!(e, TokenError::UnknownIssuer(_) | TokenError::Malformed(_));
                assert_eq!(e.is_not_ours(), not_ours, "{name}: {e:?}");
            }
        }
    }
}

#[test]
fn leeway_edges_are_accepted() {
    let (_dir, i) = issuer();
    let token = i.issue(&claims()).expect("issue");
    let cases = [
        ("exactly at exp", NOW + 3600),
        ("exp plus leeway", NOW + 3600 + LEEWAY_SECONDS),
        ("nbf minus leeway", NOW - LEEWAY_SECONDS),
        ("issued", NOW),
    ];
    for (name, now) in cases {
        assert!(i.verify(&token, now, &[]).is_ok(), "{name}");
    }
}

#[test]
fn not_a_jwt_is_not_ours() {
    let (_dir, i) = issuer();
    let header = b64json(&serde_json::json!({"alg": "ES256"}));
    let ours = b64json(&serde_json::json!({"iss": ISS}));
    let cases: Vec<(&str, String, TokenError)> = vec![
        (
            "bootstrap token",
            "abcdef.0123456789abcdef".into(),
            TokenError::NotJwt,
        ),
        ("opaque", "s3cr3t".into(), TokenError::NotJwt),
        ("json", r#"{"iss":"x"}.a.b"#.into(), TokenError::NotJwt),
        (
            "four parts",
            format!("{header}.{ours}.a.b"),
            TokenError::NotJwt,
        ),
        (
            "padded payload",
            format!("{header}.{ours}=.a"),
            TokenError::NotJwt,
        ),
        (
            "payload not json",
            format!("{header}.bm90IGpzb24.a"),
            TokenError::NotJwt,
        ),
        (
            "iss not a string",
            format!("{header}.{}.a", b64json(&serde_json::json!({"iss": 7}))),
            TokenError::NotJwt,
        ),
        (
            "no iss",
            format!("{header}.{}.a", b64json(&serde_json::json!({"sub": "x"}))),
            TokenError::UnknownIssuer(String::new()),
        ),
        (
            "header not json",
            format!("bm90IGpzb24.{ours}.a"),
            TokenError::Malformed(String::new()),
        ),
    ];
    for (name, token, want) in cases {
        let e = i.verify(&token, NOW, &[]).expect_err(name);
        // The variant, not serde's wording inside `Malformed`.
        assert_eq!(
            std::mem::discriminant(&e),
            std::mem::discriminant(&want),
            "{name}: {e:?}"
        );
        assert!(e.is_not_ours(), "{name}");
    }
}

#[test]
fn aud_may_be_a_single_string() {
    let (_dir, i) = issuer();
    let mut payload = decode_part(&i.issue(&claims()).expect("issue"), 1);
    payload["aud"] = ISS.into();
    let token = i.sign(&payload).expect("sign");
    assert_eq!(
        i.verify(&token, NOW, &[]).expect("verify").audiences,
        strings(&[ISS])
    );
}

#[test]
fn without_api_audiences_any_audience_passes_as_upstream() {
    let dir = TempDir::new();
    let i = Issuer::load_or_create(&dir.0, ISS, vec![]).expect("issuer");
    let token = i
        .issue(&BoundClaims {
            audiences: strings(&["vault"]),
            ..claims()
        })
        .expect("issue");
    let v = i.verify(&token, NOW, &strings(&["other"])).expect("verify");
    assert!(v.audiences.is_empty());
}

#[test]
fn issue_refuses_inconsistent_claims() {
    let (_dir, i) = issuer();
    let node = Some(ObjectRef {
        name: "n".into(),
        uid: "u".into(),
    });
    let cases = vec![
        (
            "node beside a secret",
            BoundClaims {
                bound: Some(BoundObject {
                    kind: BoundKind::Secret,
                    name: "s".into(),
                    uid: "u".into(),
                }),
                node: node.clone(),
                ..claims()
            },
            "one object type",
        ),
        (
            "node without a pod",
            BoundClaims {
                bound: None,
                node: node.clone(),
                ..claims()
            },
            "one object type",
        ),
        (
            "expires before issued",
            BoundClaims {
                expires_at: NOW - 1,
                ..claims()
            },
            "before it is issued",
        ),
    ];
    for (name, c, text) in cases {
        let e = i.issue(&c).expect_err(name);
        assert!(matches!(e, Error::Claims(_)), "{name}: {e:?}");
        assert!(e.to_string().contains(text), "{name}: {e}");
    }
}

#[test]
fn key_is_persisted_private_and_reused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    let nested = dir.0.join("pki");
    let first = issuer_at(&nested, ISS);
    let token = first.issue(&claims()).expect("issue");
    let legacy = first
        .issue_legacy("default", "builder", "sa-uid", "tok")
        .expect("legacy");

    let path = nested.join(KEY_FILE);
    let meta = std::fs::metadata(&path).expect("key file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let pem = std::fs::read_to_string(&path).expect("read");
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{pem}");
    let leftovers: Vec<_> = std::fs::read_dir(&nested)
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(leftovers, [KEY_FILE], "no temporary files remain");

    let second = issuer_at(&nested, ISS);
    assert_eq!(second.key_id(), first.key_id());
    assert_eq!(second.jwks(), first.jwks());
    assert!(second.verify(&token, NOW, &[]).is_ok());
    assert!(second.verify(&legacy, NOW, &[]).is_ok());
}

#[test]
fn concurrent_first_loads_agree_on_one_key() {
    let dir = TempDir::new();
    let kids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| issuer_at(&dir.0, ISS).key_id().to_string()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert!(kids.iter().all(|k| *k == kids[0]), "{kids:?}");
    assert_eq!(issuer_at(&dir.0, ISS).key_id(), kids[0]);
}

#[test]
fn load_accepts_openssl_keys_and_names_bad_ones() {
    let ok = TempDir::new();
    std::fs::write(ok.0.join(KEY_FILE), OPENSSL_KEY).expect("write");
    let i = issuer_at(&ok.0, ISS);
    assert_eq!(i.key_id(), OPENSSL_KID, "kid as upstream computes it");
    let jwk = &i.jwks()["keys"][0];
    assert_eq!(
        (jwk["x"].as_str(), jwk["y"].as_str()),
        (Some(OPENSSL_X), Some(OPENSSL_Y))
    );

    let cases = [
        (OPENSSL_SEC1_KEY, "openssl pkcs8 -topk8 -nocrypt"),
        ("hello", "no PEM block found"),
        (
            "-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n",
            "not an ECDSA P-256 PKCS#8 private key",
        ),
    ];
    for (content, text) in cases {
        let dir = TempDir::new();
        std::fs::write(dir.0.join(KEY_FILE), content).expect("write");
        let e = Issuer::load_or_create(&dir.0, ISS, vec![]).expect_err(text);
        assert!(e.to_string().contains(text), "{e}");
        assert!(e.to_string().contains(KEY_FILE), "names the file: {e}");
    }
}

#[test]
fn jwks_alone_verifies_tokens() {
    let (_dir, i) = issuer();
    let token = i.issue(&claims()).expect("issue");
    let jwks = i.jwks();
    let keys = jwks["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 1);
    let jwk = &keys[0];
    assert_eq!(
        serde_json::to_string(jwk).expect("json"),
        format!(
            r#"{{"use":"sig","kty":"EC","kid":"{}","crv":"P-256","alg":"ES256","x":{},"y":{}}}"#,
            i.key_id(),
            jwk["x"],
            jwk["y"]
        ),
        "go-jose's field order"
    );
    assert_eq!(decode_part(&token, 0)["kid"], jwk["kid"]);

    let coord = |k: &str| {
        URL_SAFE_NO_PAD
            .decode(jwk[k].as_str().expect("coordinate"))
            .expect("base64url")
    };
    let (x, y) = (coord("x"), coord("y"));
    assert_eq!((x.len(), y.len()), (32, 32));
    let mut point = vec![0x04];
    point.extend_from_slice(&x);
    point.extend_from_slice(&y);
    assert_eq!(key::key_id(&point), i.key_id());

    let (signed, signature) = token.rsplit_once('.').expect("signature");
    let public =
        ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, &point);
    let signature = URL_SAFE_NO_PAD.decode(signature).expect("base64url");
    assert!(public.verify(signed.as_bytes(), &signature).is_ok());
    assert!(public.verify(b"something else", &signature).is_err());
}

#[test]
fn openid_configuration_is_upstreams_document() {
    let (_dir, i) = issuer();
    for base in ["https://10.0.0.1:6443", "https://10.0.0.1:6443/"] {
        assert_eq!(
            serde_json::to_string(&i.openid_configuration(base)).expect("json"),
            concat!(
                r#"{"issuer":"https://kubernetes.default.svc.cluster.local","#,
                r#""jwks_uri":"https://10.0.0.1:6443/openid/v1/jwks","#,
                r#""response_types_supported":["id_token"],"#,
                r#""subject_types_supported":["public"],"#,
                r#""id_token_signing_alg_values_supported":["ES256"]}"#
            )
        );
    }
}

#[test]
fn parse_username_table() {
    let cases: &[(&str, Option<(&str, &str)>)] = &[
        (
            "system:serviceaccount:default:builder",
            Some(("default", "builder")),
        ),
        (
            "system:serviceaccount:kube-system:a.b-c",
            Some(("kube-system", "a.b-c")),
        ),
        ("system:serviceaccount:default", None),
        ("system:serviceaccount:default:a:b", None),
        ("system:serviceaccount::builder", None),
        ("system:serviceaccount:default:", None),
        ("system:serviceaccount:Default:builder", None),
        ("system:serviceaccount:a.b:builder", None),
        ("system:serviceaccounts:default:builder", None),
        ("system:admin", None),
        ("", None),
    ];
    for (name, want) in cases {
        let got = parse_username(name);
        let want = want.map(|(a, b)| (a.to_string(), b.to_string()));
        assert_eq!(got, want, "{name}");
    }
    assert_eq!(
        parse_username(&make_username("ns", "sa")),
        Some(("ns".into(), "sa".into()))
    );
}

#[test]
fn debug_shows_no_private_key() {
    let (_dir, i) = issuer();
    let shown = format!("{i:?}");
    assert!(shown.contains(i.key_id()) && shown.contains(ISS), "{shown}");
}
