use super::*;
use serde_json::json;

#[test]
fn parse_accepts_only_the_token_shape() {
    let cases: &[(&str, Option<(&str, &str)>)] = &[
        (
            "abcdef.0123456789abcdef",
            Some(("abcdef", "0123456789abcdef")),
        ),
        (
            "07401b.f395accd246ae52d",
            Some(("07401b", "f395accd246ae52d")),
        ),
        ("ABCDEF.0123456789abcdef", None),
        ("abcdef.0123456789ABCDEF", None),
        ("abcde.0123456789abcdef", None),
        ("abcdefg.0123456789abcdef", None),
        ("abcdef.0123456789abcde", None),
        ("abcdef.0123456789abcdef0", None),
        ("abcdef:0123456789abcdef", None),
        ("abcdef.0123456789abcd.f", None),
        ("abcdef.0123456789abcde-", None),
        ("", None),
        (".", None),
        ("eyJhbGciOiJFUzI1NiJ9.e30.sig", None),
    ];
    for (token, want) in cases {
        assert_eq!(parse(token), *want, "{token:?}");
    }
}

const NOW: i64 = 1_700_000_000; // 2023-11-14T22:13:20Z

fn b64(s: &str) -> String {
    STANDARD.encode(s)
}

/// A good Secret for `abcdef.0123456789abcdef`, changed by `edit`.
fn secret(edit: impl FnOnce(&mut Value)) -> Value {
    let mut s = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "data": {
            "token-id": b64("abcdef"),
            "token-secret": b64("0123456789abcdef"),
            "usage-bootstrap-authentication": b64("true"),
            "usage-bootstrap-signing": b64("true"),
            "expiration": b64("2023-11-14T23:00:00Z"),
            "auth-extra-groups": b64("system:bootstrappers:kubeadm:default-node-token,system:bootstrappers:a"),
        }
    });
    edit(&mut s);
    s
}

#[test]
fn authenticate_table() {
    type Want = Result<Vec<&'static str>, &'static str>;
    let ok_groups = vec![
        "system:bootstrappers",
        "system:bootstrappers:a",
        "system:bootstrappers:kubeadm:default-node-token",
        "system:authenticated",
    ];
    let shown = "kube-system/bootstrap-token-abcdef";
    let cases: Vec<(&str, Value, &str, Want)> = vec![
        (
            "good",
            secret(|_| {}),
            "0123456789abcdef",
            Ok(ok_groups.clone()),
        ),
        (
            "no extra groups, no expiration",
            secret(|s| {
                let d = s["data"].as_object_mut().expect("data");
                d.remove("auth-extra-groups");
                d.remove("expiration");
            }),
            "0123456789abcdef",
            Ok(vec!["system:bootstrappers", "system:authenticated"]),
        ),
        (
            "duplicate extra groups are folded",
            secret(|s| {
                s["data"]["auth-extra-groups"] =
                    json!(b64("system:bootstrappers:a,system:bootstrappers:a"));
            }),
            "0123456789abcdef",
            Ok(vec![
                "system:bootstrappers",
                "system:bootstrappers:a",
                "system:authenticated",
            ]),
        ),
        (
            "wrong secret",
            secret(|_| {}),
            "0123456789abcdee",
            Err("has invalid value for key token-secret."),
        ),
        (
            "secret prefix only",
            secret(|_| {}),
            "0123456789abcde",
            Err("has invalid value for key token-secret."),
        ),
        (
            "token-id differs",
            secret(|s| s["data"]["token-id"] = json!(b64("zzzzzz"))),
            "0123456789abcdef",
            Err("has invalid value for key token-id, expected abcdef."),
        ),
        (
            "expired",
            secret(|s| s["data"]["expiration"] = json!(b64("2023-11-14T22:00:00Z"))),
            "0123456789abcdef",
            Err(
                "Expired bootstrap token in kube-system/bootstrap-token-abcdef Secret: 2023-11-14T22:00:00Z",
            ),
        ),
        (
            "expires exactly now",
            secret(|s| s["data"]["expiration"] = json!(b64("2023-11-14T22:13:20Z"))),
            "0123456789abcdef",
            Err("Expired bootstrap token"),
        ),
        (
            "expiration with an offset, still valid",
            secret(|s| s["data"]["expiration"] = json!(b64("2023-11-15T00:00:00+01:00"))),
            "0123456789abcdef",
            Ok(ok_groups.clone()),
        ),
        (
            "unparseable expiration is expired",
            secret(|s| s["data"]["expiration"] = json!(b64("tomorrow"))),
            "0123456789abcdef",
            Err("Unparseable expiration time (tomorrow)"),
        ),
        (
            "usage not true",
            secret(|s| s["data"]["usage-bootstrap-authentication"] = json!(b64("false"))),
            "0123456789abcdef",
            Err("not marked usage-bootstrap-authentication=true."),
        ),
        (
            "usage missing",
            secret(|s| {
                s["data"]
                    .as_object_mut()
                    .expect("data")
                    .remove("usage-bootstrap-authentication");
            }),
            "0123456789abcdef",
            Err("not marked usage-bootstrap-authentication=true."),
        ),
        (
            "extra group outside system:bootstrappers:",
            secret(|s| {
                s["data"]["auth-extra-groups"] = json!(b64("system:bootstrappers:a,system:masters"))
            }),
            "0123456789abcdef",
            Err("bootstrap group \"system:masters\" is invalid"),
        ),
        (
            "extra group with a trailing dash",
            secret(|s| s["data"]["auth-extra-groups"] = json!(b64("system:bootstrappers:a-"))),
            "0123456789abcdef",
            Err("bootstrap group \"system:bootstrappers:a-\" is invalid"),
        ),
        (
            "bare prefix as extra group",
            secret(|s| s["data"]["auth-extra-groups"] = json!(b64("system:bootstrappers:"))),
            "0123456789abcdef",
            Err("is invalid (must match"),
        ),
        (
            "wrong type",
            secret(|s| s["type"] = json!("Opaque")),
            "0123456789abcdef",
            Err("has invalid type, expected bootstrap.kubernetes.io/token."),
        ),
        (
            "no data",
            secret(|s| {
                s.as_object_mut().expect("object").remove("data");
            }),
            "0123456789abcdef",
            Err("has invalid type"),
        ),
        (
            "being deleted",
            secret(|s| s["metadata"]["deletionTimestamp"] = json!("2023-11-14T22:00:00Z")),
            "0123456789abcdef",
            Err("is deleted and awaiting removal"),
        ),
        (
            "another secret's name",
            secret(|s| s["metadata"]["name"] = json!("bootstrap-token-zzzzzz")),
            "0123456789abcdef",
            Err("is not the bootstrap token secret kube-system/bootstrap-token-abcdef"),
        ),
        (
            "another namespace",
            secret(|s| s["metadata"]["namespace"] = json!("default")),
            "0123456789abcdef",
            Err("is not the bootstrap token secret"),
        ),
        (
            "data not base64",
            secret(|s| s["data"]["token-secret"] = json!("0123456789abcdef!")),
            "0123456789abcdef",
            Err("undecodable value for key token-secret"),
        ),
    ];
    for (name, secret, presented, want) in cases {
        let got = authenticate(&secret, "abcdef", presented, NOW);
        match (got, want) {
            (Ok(user), Ok(groups)) => {
                assert_eq!(user.name, "system:bootstrap:abcdef", "{name}");
                assert_eq!(user.groups, groups, "{name}");
                assert!(user.uid.is_empty() && user.extra.is_empty(), "{name}");
            }
            (Err(e), Err(text)) => {
                let msg = e.to_string();
                assert!(msg.contains(text), "{name}: {msg:?} lacks {text:?}");
                assert!(!msg.contains(presented), "{name}: leaks the secret: {msg}");
                if !matches!(e, BootstrapError::NotBootstrapSecret { .. }) {
                    assert!(msg.contains(shown), "{name}: {msg}");
                }
            }
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn group_pattern_bounds() {
    let long = |n: usize| format!("system:bootstrappers:{}", "a".repeat(n));
    let cases: &[(String, bool)] = &[
        (long(1), true),
        (long(256), true),
        (long(257), false),
        ("system:bootstrappers:x:y-z9".into(), true),
        ("system:bootstrappers:X".into(), false),
        ("system:bootstrappers:a.b".into(), false),
        ("system:bootstrappers:a:".into(), false),
        ("system:bootstrappers".into(), false),
        (" system:bootstrappers:a".into(), false),
    ];
    for (group, want) in cases {
        assert_eq!(is_bootstrap_group(group), *want, "{group}");
    }
}

#[test]
fn constant_time_eq_is_equality() {
    let cases: &[(&[u8], &[u8], bool)] = &[
        (b"", b"", true),
        (b"abc", b"abc", true),
        (b"abc", b"abd", false),
        (b"abc", b"ab", false),
        (b"", b"a", false),
    ];
    for (a, b, want) in cases {
        assert_eq!(constant_time_eq(a, b), *want, "{a:?} {b:?}");
    }
}
