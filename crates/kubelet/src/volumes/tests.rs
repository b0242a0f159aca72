use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use berth_api::quantity::Quantity;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Volume};
use serde_json::json;

use super::*;
use crate::envvars::EnvSources;
use crate::testutil::TempDir;

fn cm() -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": "conf"},
        "data": {"app.properties": "a=1\n", "mode": "prod"},
        "binaryData": {"logo.bin": "AAEC"}}))
    .unwrap()
}

fn secret() -> Secret {
    serde_json::from_value(json!({"metadata": {"name": "creds"}, "data": {"password": "czNjcjN0", "user": "YWRtaW4="}}))
        .unwrap()
}

fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"}, "annotations": {"b": "2", "a": "1"}},
        "spec": {"containers": [{"name": "app", "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "250m"}}}]}
    }))
    .unwrap()
}

fn files(p: &Payload) -> Vec<(String, String, u32)> {
    p.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                String::from_utf8_lossy(&v.data).into_owned(),
                v.mode,
            )
        })
        .collect()
}

fn f(path: &str, data: &str, mode: u32) -> (String, String, u32) {
    (path.into(), data.into(), mode)
}

fn items(v: serde_json::Value) -> Vec<k8s_openapi::api::core::v1::KeyToPath> {
    serde_json::from_value(v).unwrap()
}

#[test]
fn config_map_and_secret_payloads() {
    let c = cm();
    assert_eq!(
        files(&config_map_payload("conf", None, Some(&c), None, false).unwrap()),
        [
            f("app.properties", "a=1\n", 0o644),
            f("logo.bin", "\u{0}\u{1}\u{2}", 0o644),
            f("mode", "prod", 0o644)
        ]
    );
    let it = items(
        json!([{"key": "mode", "path": "cfg/mode.txt", "mode": 0o400}, {"key": "app.properties", "path": "app"}]),
    );
    assert_eq!(
        files(&config_map_payload("conf", Some(&it), Some(&c), Some(0o440), false).unwrap()),
        [f("app", "a=1\n", 0o440), f("cfg/mode.txt", "prod", 0o400)]
    );
    let missing = items(json!([{"key": "nope", "path": "x"}]));
    assert_eq!(
        config_map_payload("conf", Some(&missing), Some(&c), None, false)
            .unwrap_err()
            .to_string(),
        "configmap references non-existent config key: nope"
    );
    assert!(
        config_map_payload("conf", Some(&missing), Some(&c), None, true)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        config_map_payload("x", None, None, None, false)
            .unwrap_err()
            .to_string(),
        r#"configmap "x" not found"#
    );
    assert!(
        config_map_payload("x", None, None, None, true)
            .unwrap()
            .is_empty()
    );

    let s = secret();
    assert_eq!(
        files(&secret_payload("creds", None, Some(&s), Some(0o400), false).unwrap()),
        [f("password", "s3cr3t", 0o400), f("user", "admin", 0o400)]
    );
    assert_eq!(
        secret_payload("x", None, None, None, false)
            .unwrap_err()
            .to_string(),
        r#"secret "x" not found"#
    );
    let missing = items(json!([{"key": "token", "path": "t"}]));
    assert_eq!(
        secret_payload("creds", Some(&missing), Some(&s), None, false)
            .unwrap_err()
            .to_string(),
        "secret references non-existent secret key: token"
    );
}

fn env_sources<'a>(
    cms: &'a BTreeMap<String, ConfigMap>,
    secrets: &'a BTreeMap<String, Secret>,
    alloc: &'a BTreeMap<String, Quantity>,
    svc: &'a BTreeMap<String, String>,
) -> EnvSources<'a> {
    EnvSources {
        config_maps: cms,
        secrets,
        pod_ips: &[],
        host_ips: &[],
        node_allocatable: alloc,
        service_env: svc,
    }
}

#[test]
fn downward_api_and_projected() {
    let cms = BTreeMap::from([(
        "kube-root-ca.crt".to_string(),
        serde_json::from_value::<ConfigMap>(
            json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "PEM"}}),
        )
        .unwrap(),
    )]);
    let secrets = BTreeMap::from([("creds".to_string(), secret())]);
    let alloc = BTreeMap::from([("cpu".to_string(), Quantity::parse("2").unwrap())]);
    let svc = BTreeMap::new();
    let env = env_sources(&cms, &secrets, &alloc, &svc);
    let d: Vec<k8s_openapi::api::core::v1::DownwardAPIVolumeFile> = serde_json::from_value(json!([
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        {"path": "./meta/name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o600},
        {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory", "divisor": "1Mi"}},
        {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu"}}
    ])).unwrap();
    assert_eq!(
        files(&downward_api_payload(&d, &pod(), None, &env).unwrap()),
        [
            f("annotations", "a=\"1\"\nb=\"2\"", 0o644),
            f("app", "web", 0o644),
            f("cpu", "2", 0o644),
            f("labels", "app=\"web\"", 0o644),
            f("mem", "64", 0o644),
            f("meta/name", "web", 0o600),
        ]
    );
    // The volume gives pod metadata only; two bad items are both reported.
    let bad: Vec<k8s_openapi::api::core::v1::DownwardAPIVolumeFile> =
        serde_json::from_value(json!([
            {"path": "node", "fieldRef": {"fieldPath": "spec.nodeName"}},
            {"path": "x", "resourceFieldRef": {"containerName": "nope", "resource": "limits.cpu"}}
        ]))
        .unwrap();
    assert_eq!(
        downward_api_payload(&bad, &pod(), None, &env)
            .unwrap_err()
            .to_string(),
        "[unsupported fieldPath: spec.nodeName, container nope not found]"
    );

    // kube-api-access, as the ServiceAccount admission plugin writes it.
    let v: Volume = serde_json::from_value(json!({"name": "kube-api-access-abcde", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        {"secret": {"name": "creds", "items": [{"key": "user", "path": "u"}]}}
    ]}})).unwrap();
    let tokens = ServiceAccountTokens::from([(
        TokenSource {
            audience: None,
            expiration_seconds: 3607,
        },
        Ok("eyJtoken".to_string()),
    )]);
    let src = ProjectedSources {
        config_maps: &cms,
        secrets: &secrets,
        env: &env,
        service_account_tokens: &tokens,
    };
    assert_eq!(
        files(&volume_payload(&v, &pod(), &src).unwrap().unwrap()),
        [
            f("ca.crt", "PEM", 0o644),
            f("namespace", "shop", 0o644),
            f("token", "eyJtoken", 0o644),
            f("u", "admin", 0o644)
        ]
    );
    let src = ProjectedSources {
        config_maps: &BTreeMap::new(),
        secrets: &secrets,
        env: &env,
        service_account_tokens: &tokens,
    };
    assert_eq!(
        volume_payload(&v, &pod(), &src)
            .unwrap()
            .unwrap_err()
            .to_string(),
        r#"configmap "kube-root-ca.crt" not found"#
    );
    let empty: Volume = serde_json::from_value(json!({"name": "scratch", "emptyDir": {}})).unwrap();
    assert!(volume_payload(&empty, &pod(), &src).is_none());
    let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [], "volumes": [
        {"name": "a", "configMap": {"name": "c1"}}, {"name": "b", "secret": {"secretName": "s1"}}, v]}})).unwrap();
    assert_eq!(
        referenced_objects(&p),
        (
            vec!["c1".to_string(), "kube-root-ca.crt".to_string()],
            vec!["creds".to_string(), "s1".to_string()]
        )
    );
    assert_eq!(
        volume_dir(std::path::Path::new("/pods/u1"), &empty),
        Some(PathBuf::from(
            "/pods/u1/volumes/kubernetes.io~empty-dir/scratch"
        ))
    );
}

#[test]
fn token_source_requests() {
    // (projection, the request it makes)
    let cases = [
        (json!({"path": "t"}), None, 3600),
        (json!({"path": "t", "expirationSeconds": 3607}), None, 3607),
        (json!({"path": "t", "audience": ""}), None, 3600),
        (
            json!({"path": "t", "audience": "vault", "expirationSeconds": 7200}),
            Some("vault"),
            7200,
        ),
        // Under upstream's 10-minute minimum: raised to it.
        (json!({"path": "t", "expirationSeconds": 60}), None, 600),
    ];
    for (projection, audience, expiration_seconds) in cases {
        let p: k8s_openapi::api::core::v1::ServiceAccountTokenProjection =
            serde_json::from_value(projection.clone()).unwrap();
        assert_eq!(
            TokenSource::of(&p),
            TokenSource {
                audience: audience.map(String::from),
                expiration_seconds
            },
            "{projection}"
        );
    }
}

#[test]
fn several_service_account_tokens() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
        "spec": {"containers": [], "volumes": [
            {"name": "kube-api-access-abcde", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}},
            {"name": "vault", "projected": {"sources": [
                {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 600, "path": "vault-token"}},
                {"serviceAccountToken": {"audience": "sts", "path": "sts/token"}},
                {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 600, "path": "again"}}]}}
        ]}
    }))
    .unwrap();
    let src = |aud: Option<&str>, exp: i64| TokenSource {
        audience: aud.map(String::from),
        expiration_seconds: exp,
    };
    // Deduplicated and sorted: one request per (audience, lifetime).
    assert_eq!(
        token_sources(&p),
        [
            src(None, 3607),
            src(Some("sts"), 3600),
            src(Some("vault"), 600)
        ]
    );
    let volumes = p.spec.clone().unwrap().volumes.unwrap();
    let (cms, secrets, alloc, svc) = (
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::new(),
        BTreeMap::new(),
    );
    let env = env_sources(&cms, &secrets, &alloc, &svc);
    let ok = |t: &str| Ok(t.to_string());
    let fail = "failed to fetch token: serviceaccounts \"default\" not found";
    // (tokens the agent has, volume, files or error)
    type Want = Result<Vec<(String, String, u32)>, String>;
    let cases: Vec<(ServiceAccountTokens, usize, Want)> = vec![
        (
            ServiceAccountTokens::from([(src(None, 3607), ok("api"))]),
            0,
            Ok(vec![f("token", "api", 0o644)]),
        ),
        (
            ServiceAccountTokens::from([
                (src(Some("vault"), 600), ok("v")),
                (src(Some("sts"), 3600), ok("s")),
            ]),
            1,
            Ok(vec![
                f("again", "v", 0o644),
                f("sts/token", "s", 0o644),
                f("vault-token", "v", 0o644),
            ]),
        ),
        // The TokenRequest failed: upstream's message, as the FailedMount event shows it.
        (
            ServiceAccountTokens::from([(src(None, 3607), Err(fail.to_string()))]),
            0,
            Err(fail.to_string()),
        ),
        // One source failed, the others did not: its error alone.
        (
            ServiceAccountTokens::from([
                (src(Some("vault"), 600), ok("v")),
                (src(Some("sts"), 3600), Err(fail.to_string())),
            ]),
            1,
            Err(fail.to_string()),
        ),
        (
            ServiceAccountTokens::new(),
            0,
            Err("failed to fetch token: no token was requested for this source".into()),
        ),
    ];
    for (tokens, volume, want) in cases {
        let s = ProjectedSources {
            config_maps: &cms,
            secrets: &secrets,
            env: &env,
            service_account_tokens: &tokens,
        };
        let got = volume_payload(&volumes[volume], &p, &s)
            .unwrap()
            .map(|p| files(&p))
            .map_err(|e| e.to_string());
        assert_eq!(got, want, "{tokens:?} {volume}");
    }
}

#[test]
fn path_validation() {
    let cases = [
        ("ok", None),
        ("a/b/c", None),
        ("..", Some("invalid path: must not contain '..': ..")),
        (
            "..a/b",
            Some("invalid path: must not start with '..': ..a/b"),
        ),
        ("", Some(r#"invalid path: must not be empty: """#)),
        (
            "/etc/passwd",
            Some("invalid path: must be relative path: /etc/passwd"),
        ),
        (
            "a/../b",
            Some("invalid path: must not contain '..': a/../b"),
        ),
        (
            "..data",
            Some("invalid path: must not start with '..': ..data"),
        ),
    ];
    for (p, want) in cases {
        assert_eq!(
            writer::validate_path(p)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            want,
            "{p:?}"
        );
    }
}

fn read(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn atomic_writer_layout_and_updates() {
    let tmp = TempDir::new("writer");
    let dir = tmp.path().join("vol");
    let payload = |entries: &[(&str, &str, u32)]| -> Payload {
        entries
            .iter()
            .map(|(p, d, m)| {
                (
                    p.to_string(),
                    FileProjection {
                        data: d.as_bytes().to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    };
    assert!(
        writer::write(
            &dir,
            &payload(&[
                ("mode", "prod", 0o644),
                ("cfg/app.properties", "a=1", 0o400)
            ])
        )
        .unwrap()
    );
    let data = std::fs::read_link(dir.join("..data")).unwrap();
    let ts = data.to_string_lossy().into_owned();
    assert!(ts.starts_with(".."), "{ts}");
    assert_eq!(
        std::fs::read_link(dir.join("mode")).unwrap(),
        PathBuf::from("..data/mode")
    );
    assert_eq!(
        std::fs::read_link(dir.join("cfg")).unwrap(),
        PathBuf::from("..data/cfg")
    );
    assert_eq!(read(&dir.join("mode")), "prod");
    assert_eq!(read(&dir.join("cfg/app.properties")), "a=1");
    let mode = |p: &str| std::fs::metadata(dir.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode("mode"), mode("cfg/app.properties")), (0o644, 0o400));

    // Same payload: nothing written, same directory.
    assert!(
        !writer::write(
            &dir,
            &payload(&[
                ("mode", "prod", 0o644),
                ("cfg/app.properties", "a=1", 0o400)
            ])
        )
        .unwrap()
    );
    assert_eq!(std::fs::read_link(dir.join("..data")).unwrap(), data);

    // An update: new directory, old one gone, removed key's link gone.
    assert!(
        writer::write(
            &dir,
            &payload(&[("mode", "dev", 0o644), ("extra", "x", 0o644)])
        )
        .unwrap()
    );
    let data2 = std::fs::read_link(dir.join("..data")).unwrap();
    assert_ne!(data2, data);
    assert!(!tmp.path().join("vol").join(&ts).exists());
    assert_eq!(read(&dir.join("mode")), "dev");
    assert_eq!(read(&dir.join("extra")), "x");
    assert!(std::fs::symlink_metadata(dir.join("cfg")).is_err());
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "{names:?}"); // ..<ts>, ..data, extra, mode
    assert!(names.contains(&"..data".to_string()) && names.contains(&"extra".to_string()));

    // A bad path writes nothing.
    assert!(writer::write(&dir, &payload(&[("../escape", "x", 0o644)])).is_err());
    assert_eq!(std::fs::read_link(dir.join("..data")).unwrap(), data2);
}

#[test]
fn empty_dir_and_host_path() {
    let tmp = TempDir::new("host");
    let plan = empty_dir(tmp.path(), "scratch", &Default::default()).unwrap();
    assert_eq!(
        plan.path,
        tmp.path().join("volumes/kubernetes.io~empty-dir/scratch")
    );
    assert_eq!(plan.tmpfs_size, None);
    host::create_empty_dir(&plan).unwrap();
    assert_eq!(
        std::fs::metadata(&plan.path).unwrap().permissions().mode() & 0o777,
        0o777
    );
    let mem = serde_json::from_value(json!({"medium": "Memory", "sizeLimit": "64Mi"})).unwrap();
    assert_eq!(
        empty_dir(tmp.path(), "m", &mem).unwrap().tmpfs_size,
        Some(64 << 20)
    );

    let hp = |path: &std::path::Path, ty: &str| -> Result<PathBuf, VolumeError> {
        host_path(&serde_json::from_value(json!({"path": path, "type": ty})).unwrap())
    };
    let d = tmp.path().join("made/dir");
    assert_eq!(hp(&d, "DirectoryOrCreate").unwrap(), d);
    assert!(d.is_dir());
    assert_eq!(
        std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let file = tmp.path().join("f.txt");
    hp(&file, "FileOrCreate").unwrap();
    assert!(file.is_file());
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o644
    );
    let nope = tmp.path().join("nope");
    let cases = [
        (d.clone(), "Directory", None),
        (file.clone(), "File", None),
        (nope.clone(), "", None),
        (
            file.clone(),
            "Directory",
            Some(format!(
                "hostPath type check failed: {} is not a directory",
                file.display()
            )),
        ),
        (
            d.clone(),
            "File",
            Some(format!(
                "hostPath type check failed: {} is not a file",
                d.display()
            )),
        ),
        (
            d.clone(),
            "FileOrCreate",
            Some(format!(
                "hostPath type check failed: {} is not a file",
                d.display()
            )),
        ),
        (
            nope.clone(),
            "Directory",
            Some(format!(
                "hostPath type check failed: {} is not a directory",
                nope.display()
            )),
        ),
        (
            file.clone(),
            "Socket",
            Some(format!(
                "hostPath type check failed: {} is not a socket file",
                file.display()
            )),
        ),
        (
            file.clone(),
            "CharDevice",
            Some(format!(
                "hostPath type check failed: {} is not a character device",
                file.display()
            )),
        ),
        (
            file.clone(),
            "BlockDevice",
            Some(format!(
                "hostPath type check failed: {} is not a block device",
                file.display()
            )),
        ),
        (
            file.clone(),
            "Weird",
            Some("Weird is an invalid volume type".to_string()),
        ),
    ];
    for (path, ty, want) in cases {
        assert_eq!(
            hp(&path, ty).err().map(|e| e.to_string()),
            want,
            "{ty} {}",
            path.display()
        );
    }
}
