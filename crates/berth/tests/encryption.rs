//! Encryption at rest end to end: `berth server --encryption-provider-config`
//! with aescbc, Secrets created with kubectl read back through the API while
//! the SQLite file holds only the `k8s:enc:aescbc:v1:key1:` envelope, key
//! rotation with `berth secrets-encrypt reencrypt`, and bad configurations
//! refused at startup.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{Server, stderr, stdout};

const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZSwgb3IgaXMgaXQ/IDEyMzQ="; // 32 bytes
const KEY2: &str = "YW5vdGhlciAzMi1ieXRlIGtleSBmb3IgYWVzY2JjISE="; // 32 bytes
const PLAIN: &str = "topsecret-value-1234567890";

/// Secrets under aescbc with `keys` (in order), identity after it so values
/// written before encryption was turned on still read.
fn config(keys: &[(&str, &str)]) -> String {
    let mut s = String::from(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n\
         - resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n",
    );
    for (name, secret) in keys {
        s += &format!("      - name: {name}\n        secret: {secret}\n");
    }
    s += "  - identity: {}\n";
    s
}

/// The stored value of `key`, read from the embedded store's file.
fn stored(data_dir: &Path, key: &str) -> Vec<u8> {
    let conn = rusqlite::Connection::open_with_flags(
        data_dir.join("db/state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the store file");
    conn.query_row(
        "SELECT h.value FROM kv JOIN history h ON h.rev = kv.rev WHERE kv.key = ?1",
        [key.as_bytes()],
        |r| r.get(0),
    )
    .unwrap_or_else(|e| panic!("{key} in the store: {e}"))
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn berth(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(args)
        .env("BERTH_LOG", "warn")
        .output()
        .expect("run berth")
}

fn read_back(s: &Server, name: &str) -> String {
    let b64 = s.k(&["get", "secret", name, "-o", "jsonpath={.data.password}"]);
    let out = Command::new("base64")
        .arg("-d")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().expect("stdin").write_all(b64.as_bytes())?;
            c.wait_with_output()
        })
        .expect("base64 -d");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn secrets_are_encrypted_at_rest_and_keys_rotate() {
    let dir = common::temp_dir("encryption");
    let cfg = dir.join("encryption.yaml");
    std::fs::write(&cfg, config(&[("key1", KEY1)])).unwrap();
    let cfg_arg = cfg.to_str().unwrap().to_string();
    let s = Server::start_with(dir.clone(), &["--encryption-provider-config", &cfg_arg]);

    s.k(&[
        "create",
        "secret",
        "generic",
        "s1",
        &format!("--from-literal=password={PLAIN}"),
    ]);
    s.k(&[
        "create",
        "configmap",
        "c1",
        "--from-literal=k=plain-configmap-value",
    ]);
    assert_eq!(read_back(&s, "s1"), PLAIN);

    let raw = stored(&dir, "/registry/secrets/default/s1");
    assert!(
        raw.starts_with(b"k8s:enc:aescbc:v1:key1:"),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    // Neither the value nor its base64 (as the object holds it) nor the name shows.
    let b64 = "dG9wc2VjcmV0LXZhbHVl"; // base64 of "topsecret-value"
    for plain in [PLAIN, b64, "\"password\"", "\"s1\""] {
        assert!(!contains(&raw, plain), "{plain} in the stored secret");
    }
    // IV + whole AES blocks after the prefix.
    assert_eq!((raw.len() - "k8s:enc:aescbc:v1:key1:".len()) % 16, 0);
    // ConfigMaps are not listed: stored as plain JSON.
    let cm = stored(&dir, "/registry/configmaps/default/c1");
    assert!(cm.starts_with(b"{") && contains(&cm, "plain-configmap-value"));
    // Lists and watches go through the watch cache, which holds plain values.
    let list = s.k(&["get", "secrets", "-o", "name"]);
    assert!(list.contains("secret/s1"), "{list}");

    // Rotation: the new key first, restart, rewrite every Secret.
    std::fs::write(&cfg, config(&[("key2", KEY2), ("key1", KEY1)])).unwrap();
    let s = s.restart();
    assert_eq!(read_back(&s, "s1"), PLAIN, "old key still reads");
    assert!(stored(&dir, "/registry/secrets/default/s1").starts_with(b"k8s:enc:aescbc:v1:key1:"));
    let status = |s: &Server| {
        let out = berth(&[
            "secrets-encrypt",
            "status",
            "--encryption-provider-config",
            &cfg_arg,
            "--data-dir",
            s.data_dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let before = status(&s);
    for want in [
        "Encryption Status: Enabled",
        "Active Provider: aescbc",
        "Active Key: key2",
        "k8s:enc:aescbc:v1:key1:",
    ] {
        assert!(before.contains(want), "{want:?} in\n{before}");
    }
    assert!(
        before.contains("(run `berth secrets-encrypt reencrypt`)"),
        "{before}"
    );

    let out = berth(&[
        "secrets-encrypt",
        "reencrypt",
        "--kubeconfig",
        s.kubeconfig.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("Reencrypted "), "{}", stdout(&out));

    let raw2 = stored(&dir, "/registry/secrets/default/s1");
    assert!(
        raw2.starts_with(b"k8s:enc:aescbc:v1:key2:"),
        "{}",
        String::from_utf8_lossy(&raw2)
    );
    assert!(!contains(&raw2, PLAIN));
    assert_eq!(read_back(&s, "s1"), PLAIN);
    let after = status(&s);
    assert!(!after.contains("k8s:enc:aescbc:v1:key1:"), "{after}");
    assert!(
        !after.contains("(run `berth secrets-encrypt reencrypt`)"),
        "{after}"
    );
    // An unchanged PUT of a Secret already under the current key writes nothing.
    let rv = s.k(&[
        "get",
        "secret",
        "s1",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let json = s.k(&["get", "secret", "s1", "-o", "json"]);
    let out = s.kubectl_stdin(&["replace", "-f", "-"], Some(&json));
    assert!(out.status.success(), "{}", stderr(&out));
    let rv2 = s.k(&[
        "get",
        "secret",
        "s1",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    assert_eq!(rv, rv2);

    // `berth secrets-encrypt rotate-keys` does the file's part of the next rotation.
    let out = berth(&[
        "secrets-encrypt",
        "rotate-keys",
        "--encryption-provider-config",
        &cfg_arg,
        "--key-name",
        "key3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(
        text.contains("key3") && text.contains("key2") && text.contains(KEY2),
        "{text}"
    );
    let s = s.restart();
    let out = berth(&[
        "secrets-encrypt",
        "reencrypt",
        "--kubeconfig",
        s.kubeconfig.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stored(&dir, "/registry/secrets/default/s1").starts_with(b"k8s:enc:aescbc:v1:key3:"));
    assert_eq!(read_back(&s, "s1"), PLAIN);

    // Switched to secretbox with neither the aescbc keys nor identity: the
    // Secret under key3 no longer reads (upstream's error, an internal error),
    // and nothing else is affected.
    std::fs::write(
        &cfg,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n\
         - resources: [secrets]\n  providers:\n  - secretbox:\n      keys:\n      - name: sb\n        secret: "
            .to_string()
            + KEY1
            + "\n",
    )
    .unwrap();
    let s = s.restart();
    let out = s.kubectl(&["get", "secret", "s1"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("Internal error occurred")
            && err.contains(
                "unable to transform key \"/registry/secrets/default/s1\": no matching prefix found"
            ),
        "{err}"
    );
    // The other objects are unaffected.
    assert_eq!(
        s.k(&["get", "configmap", "c1", "-o", "jsonpath={.data.k}"]),
        "plain-configmap-value"
    );
    // A new Secret is written with secretbox.
    s.k(&[
        "create",
        "secret",
        "generic",
        "s2",
        "--from-literal=password=x",
    ]);
    assert!(stored(&dir, "/registry/secrets/default/s2").starts_with(b"k8s:enc:secretbox:v1:sb:"));
}

#[test]
fn bad_configurations_are_refused_at_startup() {
    let cases = [
        (
            "short key",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - name: k\n        secret: MDEyMzQ1Njc=\n",
            "resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 8, expected one of [16 24 32]",
        ),
        (
            "kms",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - kms:\n      apiVersion: v2\n      name: p\n      endpoint: unix:///tmp/kms.sock\n",
            "KMS providers (v1 and v2) are not supported by Berth",
        ),
        ("empty", "", "is empty"),
    ];
    for (name, text, want) in cases {
        let dir = common::temp_dir("encryption-bad");
        let cfg = dir.join("encryption.yaml");
        std::fs::write(&cfg, text).unwrap();
        let out = berth(&[
            "server",
            "--data-dir",
            dir.to_str().unwrap(),
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            "0",
            "--disable-agent",
            "--disable-ingress",
            "--disable-dns",
            "--encryption-provider-config",
            cfg.to_str().unwrap(),
        ]);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!out.status.success(), "{name}: started");
        let err = stderr(&out);
        assert!(
            err.contains("--encryption-provider-config") && err.contains(want),
            "{name}: {err}"
        );
    }
}
