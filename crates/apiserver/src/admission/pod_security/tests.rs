//! PodSecurity against a real (SQLite) store and watch cache, called as the
//! chain calls it, and its pure decisions as tables.

use std::sync::Arc;

use berth_api::registry::ResourceType;
use berth_api::user::UserInfo;
use berth_podsecurity::{Exemptions, Version};
use berth_store::Store;
use serde_json::{Value, json};

use super::*;

struct TempRest {
    rest: Rest,
    dir: std::path::PathBuf,
}

impl Drop for TempRest {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn temp_rest(tag: &str) -> TempRest {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!(
        "berth-podsecurity-{tag}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let store: Arc<dyn Store> =
        Arc::new(berth_store::sqlite::SqliteStore::open(&dir.join("state.db")).unwrap());
    let cache = crate::watchcache::WatchCache::start(
        store.clone(),
        crate::watchcache::HistoryLimits::new(10_000),
    )
    .await
    .unwrap();
    let rest = Rest {
        services: Arc::new(crate::alloc::Allocator::new(
            store.clone(),
            Default::default(),
        )),
        store,
        cache,
        admission: super::super::Chain::new(&[]),
        authorizer: Arc::new(crate::authorization::Authorizer::new(vec![])),
    };
    TempRest { rest, dir }
}

fn rt(group: &str, version: &str, plural: &str) -> &'static ResourceType {
    berth_api::registry::lookup(group, version, plural).unwrap()
}

/// Stores a namespace with the given PodSecurity labels (`enforce=restricted`, …).
async fn namespace(t: &TempRest, name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (format!("{LABEL_PREFIX}{k}"), json!(v)))
        .collect();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}});
    let key = objects::key(rt("", "v1", "namespaces"), None, name);
    t.rest
        .store
        .create(&key, objects::encode(&ns).unwrap())
        .await
        .unwrap();
    ns
}

async fn put_pod(t: &TempRest, pod: &Value) {
    let key = objects::key(
        rt("", "v1", "pods"),
        objects::namespace(pod),
        objects::name(pod).unwrap(),
    );
    t.rest
        .store
        .create(&key, objects::encode(pod).unwrap())
        .await
        .unwrap();
}

/// A pod that passes restricted:latest.
fn good_pod(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "busybox", "securityContext": {
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}})
}

/// A pod as `kubectl run` makes it: fine at baseline, not at restricted.
fn bare_pod(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

const BARE_RESTRICTED: &str = r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#;

struct Call<'a> {
    op: Operation,
    rt: &'static ResourceType,
    sub: Option<&'a str>,
    ns: Option<&'a str>,
    name: &'a str,
    user: Option<&'a UserInfo>,
    old: Option<&'a Value>,
}

impl<'a> Call<'a> {
    fn create(rt: &'static ResourceType, ns: Option<&'a str>, name: &'a str) -> Self {
        Call {
            op: Operation::Create,
            rt,
            sub: None,
            ns,
            name,
            user: None,
            old: None,
        }
    }

    fn update(mut self, old: &'a Value) -> Self {
        self.op = Operation::Update;
        self.old = Some(old);
        self
    }
}

/// Runs the plugin's validate as the chain does, with the request's warnings.
async fn validate(
    p: &PodSecurity,
    t: &TempRest,
    c: Call<'_>,
    obj: &Value,
) -> (ApiResult<()>, Vec<String>) {
    let a = Attributes {
        operation: c.op,
        rt: c.rt,
        subresource: c.sub,
        namespace: c.ns,
        name: c.name,
        user: c.user,
        old: c.old,
        dry_run: false,
    };
    crate::warnings::collect(p.validate(&t.rest, &a, Some(obj))).await
}

fn plugin() -> PodSecurity {
    PodSecurity::new(Default::default())
}

#[tokio::test]
async fn enforce_refuses_bad_pods_with_upstreams_message() {
    let t = temp_rest("enforce").await;
    namespace(&t, "secure", &[("enforce", "restricted")]).await;
    let p = plugin();
    let pods = rt("", "v1", "pods");
    let (r, w) = validate(
        &p,
        &t,
        Call::create(pods, Some("secure"), "bad"),
        &bare_pod("secure", "bad"),
    )
    .await;
    let e = r.unwrap_err();
    assert_eq!((e.code, e.reason), (403, "Forbidden"));
    assert_eq!(
        e.message,
        format!(
            "pods \"bad\" is forbidden: violates PodSecurity \"restricted:latest\": {BARE_RESTRICTED}"
        )
    );
    // A refused request carries no warnings.
    assert!(w.is_empty(), "{w:?}");
    let (r, w) = validate(
        &p,
        &t,
        Call::create(pods, Some("secure"), "good"),
        &good_pod("secure", "good"),
    )
    .await;
    assert!(r.is_ok(), "{r:?}");
    assert!(w.is_empty(), "{w:?}");
    // A pinned version evaluates that version's checks.
    namespace(
        &t,
        "old",
        &[("enforce", "restricted"), ("enforce-version", "v1.18")],
    )
    .await;
    let (r, _) = validate(
        &p,
        &t,
        Call::create(pods, Some("old"), "bad"),
        &bare_pod("old", "bad"),
    )
    .await;
    assert_eq!(
        r.unwrap_err().message,
        r#"pods "bad" is forbidden: violates PodSecurity "restricted:v1.18": allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)"#
    );
    // Unlabelled namespaces are privileged.
    namespace(&t, "open", &[]).await;
    let mut privileged = bare_pod("open", "root");
    privileged["spec"]["hostNetwork"] = json!(true);
    let (r, w) = validate(
        &p,
        &t,
        Call::create(pods, Some("open"), "root"),
        &privileged,
    )
    .await;
    assert!(r.is_ok() && w.is_empty(), "{r:?} {w:?}");
}

#[tokio::test]
async fn warn_mode_adds_a_warning() {
    let t = temp_rest("warn").await;
    namespace(&t, "w", &[("enforce", "baseline"), ("warn", "restricted")]).await;
    let pods = rt("", "v1", "pods");
    let (r, w) = validate(
        &plugin(),
        &t,
        Call::create(pods, Some("w"), "p"),
        &bare_pod("w", "p"),
    )
    .await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        w,
        [format!(
            "would violate PodSecurity \"restricted:latest\": {BARE_RESTRICTED}"
        )]
    );
}

#[tokio::test]
async fn only_significant_pod_updates_are_evaluated() {
    let t = temp_rest("updates").await;
    namespace(&t, "s", &[("enforce", "restricted")]).await;
    let p = plugin();
    let pods = rt("", "v1", "pods");
    // A pod from before the namespace was labelled.
    let old = bare_pod("s", "p");
    let mut labelled = old.clone();
    labelled["metadata"]["labels"] = json!({"a": "b"});
    let (r, _) = validate(
        &p,
        &t,
        Call::create(pods, Some("s"), "p").update(&old),
        &labelled,
    )
    .await;
    assert!(r.is_ok(), "a label change is not evaluated: {r:?}");
    let mut status = old.clone();
    status["status"] = json!({"phase": "Running"});
    let mut c = Call::create(pods, Some("s"), "p").update(&old);
    c.sub = Some("status");
    let (r, _) = validate(&p, &t, c, &status).await;
    assert!(r.is_ok(), "status is not evaluated: {r:?}");
    let mut image = old.clone();
    image["spec"]["containers"][0]["image"] = json!("busybox:2");
    let (r, _) = validate(
        &p,
        &t,
        Call::create(pods, Some("s"), "p").update(&old),
        &image,
    )
    .await;
    assert_eq!(r.unwrap_err().code, 403, "an image change is");
    // An ephemeral container added through its subresource is evaluated too.
    let good = good_pod("s", "g");
    let mut debug = good.clone();
    debug["spec"]["ephemeralContainers"] = json!([{"name": "dbg", "image": "busybox"}]);
    let mut c = Call::create(pods, Some("s"), "g").update(&good);
    c.sub = Some("ephemeralcontainers");
    let (r, _) = validate(&p, &t, c, &debug).await;
    let e = r.unwrap_err();
    assert!(
        e.message
            .contains(r#"container "dbg" must set securityContext.allowPrivilegeEscalation=false"#),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn workload_templates_only_warn() {
    let t = temp_rest("templates").await;
    namespace(&t, "s", &[("enforce", "restricted")]).await;
    let p = plugin();
    let template = bare_pod("s", "");
    let want = [format!(
        "would violate PodSecurity \"restricted:latest\": {BARE_RESTRICTED}"
    )];
    let workloads = [
        (
            rt("apps", "v1", "deployments"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "s"},
                "spec": {"template": template}}),
        ),
        (
            rt("batch", "v1", "cronjobs"),
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "w", "namespace": "s"},
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}}),
        ),
        (
            rt("", "v1", "podtemplates"),
            json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "w", "namespace": "s"},
                "template": template}),
        ),
    ];
    for (rt, obj) in workloads {
        let (r, w) = validate(&p, &t, Call::create(rt, Some("s"), "w"), &obj).await;
        assert!(r.is_ok(), "{}: {r:?}", rt.kind);
        assert_eq!(w, want, "{}", rt.kind);
    }
    // Objects without pod templates are left alone.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "s"}});
    let (r, w) = validate(
        &p,
        &t,
        Call::create(rt("", "v1", "configmaps"), Some("s"), "c"),
        &cm,
    )
    .await;
    assert!(r.is_ok() && w.is_empty());
}

#[tokio::test]
async fn namespace_labels_are_validated_and_tightening_warns_about_existing_pods() {
    let t = temp_rest("namespaces").await;
    let p = plugin();
    let ns_rt = rt("", "v1", "namespaces");
    let bad = json!({"metadata": {"name": "x", "labels": {
        "pod-security.kubernetes.io/enforce": "strict"}}});
    let (r, _) = validate(&p, &t, Call::create(ns_rt, None, "x"), &bad).await;
    let e = r.unwrap_err();
    assert_eq!((e.code, e.reason), (422, "Invalid"));
    assert_eq!(
        e.message,
        r#"Namespace "x" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#
    );
    let details = e.details.unwrap();
    assert_eq!(
        details["causes"][0]["field"],
        "metadata.labels[pod-security.kubernetes.io/enforce]"
    );

    let old = namespace(&t, "apps", &[]).await;
    put_pod(&t, &bare_pod("apps", "b")).await;
    put_pod(&t, &bare_pod("apps", "a")).await;
    let mut host = bare_pod("apps", "host");
    host["spec"]["hostNetwork"] = json!(true);
    put_pod(&t, &host).await;
    put_pod(&t, &good_pod("apps", "fine")).await;
    let labels = |l: &[(&str, &str)]| {
        let mut n = old.clone();
        n["metadata"]["labels"] = l
            .iter()
            .map(|(k, v)| (format!("{LABEL_PREFIX}{k}"), json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        n
    };
    let restricted = labels(&[("enforce", "restricted")]);
    let (r, w) = validate(
        &p,
        &t,
        Call::create(ns_rt, None, "apps").update(&old),
        &restricted,
    )
    .await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        w,
        [
            r#"existing pods in namespace "apps" violate the new PodSecurity enforce level "restricted:latest""#,
            "a (and 1 other pod): allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
            "host: host namespaces, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
        ]
    );
    // Relaxing, or a label that does not change enforce, warns about nothing.
    let baseline = labels(&[("enforce", "baseline")]);
    for (from, to) in [(&restricted, &baseline), (&restricted, &restricted)] {
        let (r, w) = validate(&p, &t, Call::create(ns_rt, None, "apps").update(from), to).await;
        assert!(r.is_ok() && w.is_empty(), "{w:?}");
    }
    // A namespace that already had the bad label can still be updated.
    let (r, _) = validate(&p, &t, Call::create(ns_rt, None, "x").update(&bad), &bad).await;
    assert!(r.is_ok(), "{r:?}");
}

#[tokio::test]
async fn exemptions_skip_evaluation() {
    let t = temp_rest("exempt").await;
    namespace(&t, "s", &[("enforce", "restricted")]).await;
    namespace(&t, "kube-system", &[("enforce", "restricted")]).await;
    let p = PodSecurity::new(PodSecurityConfiguration {
        defaults: Default::default(),
        exemptions: Exemptions {
            usernames: vec!["ci-bot".into()],
            namespaces: vec!["kube-system".into()],
            runtime_classes: vec!["kata".into()],
        },
    });
    let pods = rt("", "v1", "pods");
    let bot = UserInfo {
        name: "ci-bot".into(),
        ..Default::default()
    };
    let mut by_bot = Call::create(pods, Some("s"), "p");
    by_bot.user = Some(&bot);
    let (r, _) = validate(&p, &t, by_bot, &bare_pod("s", "p")).await;
    assert!(r.is_ok(), "user: {r:?}");
    let (r, _) = validate(
        &p,
        &t,
        Call::create(pods, Some("kube-system"), "p"),
        &bare_pod("kube-system", "p"),
    )
    .await;
    assert!(r.is_ok(), "namespace: {r:?}");
    let mut kata = bare_pod("s", "p");
    kata["spec"]["runtimeClassName"] = json!("kata");
    let (r, _) = validate(&p, &t, Call::create(pods, Some("s"), "p"), &kata).await;
    assert!(r.is_ok(), "runtime class: {r:?}");
    let (r, _) = validate(
        &p,
        &t,
        Call::create(pods, Some("s"), "p"),
        &bare_pod("s", "p"),
    )
    .await;
    assert_eq!(r.unwrap_err().code, 403, "anyone else");
    // An exempt namespace that sets a policy is told it is ignored.
    let ns_rt = rt("", "v1", "namespaces");
    let ns = json!({"metadata": {"name": "kube-system", "labels": {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted"}}});
    let (r, w) = validate(&p, &t, Call::create(ns_rt, None, "kube-system"), &ns).await;
    assert!(r.is_ok());
    assert_eq!(
        w,
        [
            r#"namespace "kube-system" is exempt from Pod Security, and the policy (enforce=baseline:latest, warn=restricted:latest) will be ignored"#
        ]
    );
}

#[tokio::test]
async fn cluster_defaults_apply_to_unlabelled_namespaces() {
    let t = temp_rest("defaults").await;
    namespace(&t, "plain", &[]).await;
    namespace(&t, "opted-out", &[("enforce", "privileged")]).await;
    let mut config = PodSecurityConfiguration::default();
    config.defaults.enforce = LevelVersion::new(Level::Baseline, Version::Latest);
    let p = PodSecurity::new(config);
    let pods = rt("", "v1", "pods");
    let mut host = bare_pod("plain", "h");
    host["spec"]["hostPID"] = json!(true);
    let (r, _) = validate(&p, &t, Call::create(pods, Some("plain"), "h"), &host).await;
    assert_eq!(
        r.unwrap_err().message,
        r#"pods "h" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostPID=true)"#
    );
    host["metadata"]["namespace"] = json!("opted-out");
    let (r, _) = validate(&p, &t, Call::create(pods, Some("opted-out"), "h"), &host).await;
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn audit_level_is_evaluated_into_annotations() {
    let p = plugin();
    let policy = Policy {
        enforce: LevelVersion::new(Level::Baseline, Version::Latest),
        audit: LevelVersion::new(Level::Restricted, Version::V1(30)),
        warn: LevelVersion::PRIVILEGED,
    };
    let pod = bare_pod("ns", "p");
    let r = p.evaluate_pod(&policy, &[], &pod["metadata"], &pod["spec"], true);
    assert_eq!(r.denied, None);
    assert!(r.warnings.is_empty());
    assert_eq!(
        audit_annotations(&r),
        [
            (
                "pod-security.kubernetes.io/audit-violations".to_string(),
                format!("would violate PodSecurity \"restricted:v1.30\": {BARE_RESTRICTED}")
            ),
            (
                "pod-security.kubernetes.io/enforce-policy".to_string(),
                "baseline:latest".to_string()
            ),
        ]
    );
    // Templates are never enforced, and a bad label is reported.
    let errs = [FieldError::invalid(
        "metadata.labels[pod-security.kubernetes.io/audit]",
        "loud",
        "must be one of privileged, baseline, restricted",
    )];
    let r = p.evaluate_pod(&policy, &errs, &pod["metadata"], &pod["spec"], false);
    let got: BTreeMap<String, String> = audit_annotations(&r).into_iter().collect();
    assert_eq!(
        got.get("pod-security.kubernetes.io/error")
            .map(String::as_str),
        Some(
            r#"Failed to parse policy: metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "loud": must be one of privileged, baseline, restricted"#
        )
    );
    assert!(!got.contains_key("pod-security.kubernetes.io/enforce-policy"));
}

#[test]
fn existing_pods_are_grouped_by_reasons_one_per_controller_first() {
    let p = plugin();
    let owned = |name: &str, uid: &str| {
        let mut pod = bare_pod("ns", name);
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid, "controller": true}]);
        pod
    };
    let pods = vec![
        owned("web-2", "rs1"),
        owned("web-1", "rs1"),
        owned("web-3", "rs1"),
        bare_pod("ns", "solo"),
    ];
    let w = p.evaluate_pods_in_namespace(
        "ns",
        LevelVersion::new(Level::Restricted, Version::Latest),
        &pods,
    );
    assert_eq!(
        w,
        [
            r#"existing pods in namespace "ns" violate the new PodSecurity enforce level "restricted:latest""#,
            "solo (and 3 other pods): allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
        ]
    );
    assert!(
        p.evaluate_pods_in_namespace(
            "ns",
            LevelVersion::new(Level::Baseline, Version::Latest),
            &pods
        )
        .is_empty()
    );
}

#[test]
fn significant_pod_updates_are_containers_and_images() {
    let base = json!({"spec": {"initContainers": [{"name": "i", "image": "a"}],
        "containers": [{"name": "c", "image": "a"}],
        "ephemeralContainers": [{"name": "e", "image": "a"}]}});
    let with = |ptr: &str, v: Value| {
        let mut p = base.clone();
        *p.pointer_mut(ptr).unwrap() = v;
        p
    };
    let cases = [
        ("nothing", base.clone(), false),
        (
            "a label",
            with("/spec/containers/0/name", json!("c")),
            false,
        ),
        (
            "an image",
            with("/spec/containers/0/image", json!("b")),
            true,
        ),
        (
            "an init image",
            with("/spec/initContainers/0/image", json!("b")),
            true,
        ),
        (
            "a container more",
            with(
                "/spec/containers",
                json!([{"name": "c", "image": "a"}, {"name": "d"}]),
            ),
            true,
        ),
        (
            "an ephemeral container more",
            with(
                "/spec/ephemeralContainers",
                json!([{"name": "e", "image": "a"}, {"name": "f", "image": "a"}]),
            ),
            true,
        ),
        (
            "an ephemeral image",
            with("/spec/ephemeralContainers/0/image", json!("b")),
            true,
        ),
    ];
    for (what, new, want) in cases {
        assert_eq!(is_significant_pod_update(&new, &base), want, "{what}");
    }
}
