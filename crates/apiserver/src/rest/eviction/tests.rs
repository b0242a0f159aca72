//! The eviction subresource against a real (SQLite) store, and its pure
//! decisions as tables.

use std::sync::Arc;

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
    temp_rest_with(tag, &[]).await
}

async fn temp_rest_with(tag: &str, plugins: &[&str]) -> TempRest {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!(
        "berth-eviction-{tag}-{}-{nanos}",
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
        admission: admission::Chain::new(plugins),
        authorizer: Arc::new(crate::authorization::Authorizer::new(vec![])),
    };
    TempRest { rest, dir }
}

fn rt(group: &str, version: &str, plural: &str) -> &'static ResourceType {
    berth_api::registry::lookup(group, version, plural).unwrap()
}

fn pods_rt() -> &'static ResourceType {
    rt("", "v1", "pods")
}

fn pdb_rt() -> &'static ResourceType {
    rt("policy", "v1", "poddisruptionbudgets")
}

/// A Running pod on node `n1` labelled `app=web`, Ready or not.
fn pod(name: &str, ready: bool) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    })
}

fn pdb(name: &str, allowed: i64, current: i64, desired: i64) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"minAvailable": desired, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"observedGeneration": 1, "disruptionsAllowed": allowed,
            "currentHealthy": current, "desiredHealthy": desired, "expectedPods": current},
    })
}

async fn put(t: &TempRest, rt: &ResourceType, obj: &Value) {
    let key = objects::key(rt, Some("default"), objects::name(obj).unwrap());
    t.rest
        .store
        .create(&key, objects::encode(obj).unwrap())
        .await
        .unwrap();
}

async fn get(t: &TempRest, rt: &ResourceType, name: &str) -> Option<Value> {
    let key = objects::key(rt, Some("default"), name);
    t.rest
        .store
        .get(&key)
        .await
        .unwrap()
        .map(|kv| objects::decode(&kv).unwrap())
}

fn eviction_path(name: &str) -> ResourcePath {
    ResourcePath {
        rt: pods_rt(),
        namespace: Some("default".into()),
        name: Some(name.into()),
        subresource: Some("eviction".into()),
        legacy_watch: false,
    }
}

fn eviction(name: &str, delete_options: Value) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"}, "deleteOptions": delete_options})
}

async fn evict(t: &TempRest, name: &str, body: Value, query: Option<&str>) -> ApiResult<Reply> {
    t.rest
        .evict(&eviction_path(name), body, &Query::parse(query))
        .await
}

fn disruption_target(pod: &Value) -> Option<Value> {
    pod.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .cloned()
}

#[tokio::test]
async fn missing_pod_is_not_found() {
    let t = temp_rest("missing").await;
    let e = evict(&t, "nope", eviction("nope", json!({})), None)
        .await
        .err()
        .unwrap();
    assert_eq!((e.code, e.reason), (404, "NotFound"));
    assert_eq!(e.message, "pods \"nope\" not found");
}

#[tokio::test]
async fn name_mismatch_is_bad_request() {
    let t = temp_rest("mismatch").await;
    put(&t, pods_rt(), &pod("p", true)).await;
    let e = evict(&t, "p", eviction("other", json!({})), None)
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        "name in URL does not match name in Eviction object"
    );
    let mut wrong_ns = eviction("p", json!({}));
    wrong_ns["metadata"]["namespace"] = json!("elsewhere");
    let e = evict(&t, "p", wrong_ns, None).await.err().unwrap();
    assert_eq!(e.code, 400);
    assert!(get(&t, pods_rt(), "p").await.is_some());
}

#[tokio::test]
async fn pod_without_budget_is_deleted_with_the_condition() {
    let t = temp_rest("nobudget").await;
    put(&t, pods_rt(), &pod("p", true)).await;
    let r = evict(&t, "p", eviction("p", json!({})), None)
        .await
        .unwrap();
    assert_eq!(r.code, 201);
    assert_eq!(r.body["status"], "Success");
    let p = get(&t, pods_rt(), "p").await.unwrap();
    assert!(objects::is_deleting(&p), "graceful delete: {p}");
    assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30);
    let c = disruption_target(&p).unwrap();
    assert_eq!(c["status"], "True");
    assert_eq!(c["reason"], "EvictionByEvictionAPI");
    assert_eq!(c["message"], "Eviction API: evicting");
    // gracePeriodSeconds 0 from the delete options: gone at once.
    put(&t, pods_rt(), &pod("q", true)).await;
    let r = evict(
        &t,
        "q",
        eviction("q", json!({"gracePeriodSeconds": 0})),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.code, 201);
    assert!(get(&t, pods_rt(), "q").await.is_none());
}

#[tokio::test]
async fn budget_is_spent_and_the_pod_recorded() {
    let t = temp_rest("spend").await;
    put(&t, pods_rt(), &pod("p", true)).await;
    put(&t, pdb_rt(), &pdb("budget", 1, 3, 2)).await;
    let r = evict(&t, "p", eviction("p", json!({})), None)
        .await
        .unwrap();
    assert_eq!(r.code, 201);
    let b = get(&t, pdb_rt(), "budget").await.unwrap();
    assert_eq!(b["status"]["disruptionsAllowed"], 0);
    assert!(b["status"]["disruptedPods"]["p"].is_string(), "{b}");
    let conds = b["status"]["conditions"].as_array().unwrap();
    assert_eq!(conds[0]["type"], "DisruptionAllowed");
    assert_eq!(conds[0]["status"], "False");
    assert_eq!(conds[0]["reason"], "InsufficientPods");
    assert!(objects::is_deleting(
        &get(&t, pods_rt(), "p").await.unwrap()
    ));
    // The budget is spent: the next pod gets upstream's 429.
    put(&t, pods_rt(), &pod("p2", true)).await;
    let e = evict(&t, "p2", eviction("p2", json!({})), None)
        .await
        .err()
        .unwrap();
    assert_eq!((e.code, e.reason), (429, "TooManyRequests"));
    assert_eq!(e.message, VIOLATES_BUDGET);
    let d = e.details.unwrap();
    assert_eq!(d["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        d["causes"][0]["message"],
        "The disruption budget budget needs 2 healthy pods and has 3 currently"
    );
    assert!(d.get("retryAfterSeconds").is_none());
    let p2 = get(&t, pods_rt(), "p2").await.unwrap();
    assert!(!objects::is_deleting(&p2));
    assert!(disruption_target(&p2).is_none());
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let t = temp_rest("dryrun").await;
    put(&t, pods_rt(), &pod("p", true)).await;
    put(&t, pdb_rt(), &pdb("budget", 1, 3, 2)).await;
    let before = get(&t, pdb_rt(), "budget").await.unwrap();
    for (body, query) in [
        (eviction("p", json!({"dryRun": ["All"]})), None),
        (eviction("p", json!({})), Some("dryRun=All")),
    ] {
        let r = evict(&t, "p", body, query).await.unwrap();
        assert_eq!(r.code, 201);
    }
    assert_eq!(get(&t, pdb_rt(), "budget").await.unwrap(), before);
    let p = get(&t, pods_rt(), "p").await.unwrap();
    assert!(!objects::is_deleting(&p));
    assert!(disruption_target(&p).is_none());
    // A dry run still answers what the real one would.
    put(&t, pods_rt(), &pod("q", true)).await;
    put(&t, pdb_rt(), &{
        let mut b = pdb("budget2", 0, 1, 1);
        b["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
        b
    })
    .await;
    let mut other = pod("r", true);
    other["metadata"]["labels"] = json!({"app": "other"});
    put(&t, pods_rt(), &other).await;
    let e = evict(&t, "r", eviction("r", json!({"dryRun": ["All"]})), None)
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, 429);
    // Request and body must agree.
    let e = evict(
        &t,
        "q",
        eviction("q", json!({"dryRun": ["Other"]})),
        Some("dryRun=All"),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(e.code, 500);
    assert!(
        e.message.contains("Non-matching dry-run options"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn two_budgets_are_refused() {
    let t = temp_rest("two").await;
    put(&t, pods_rt(), &pod("p", true)).await;
    put(&t, pdb_rt(), &pdb("a", 1, 3, 2)).await;
    put(&t, pdb_rt(), &pdb("b", 1, 3, 2)).await;
    let r = evict(&t, "p", eviction("p", json!({})), None)
        .await
        .unwrap();
    assert_eq!(r.code, 500);
    assert_eq!(r.body["status"], "Failure");
    assert_eq!(
        r.body["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    assert!(!objects::is_deleting(
        &get(&t, pods_rt(), "p").await.unwrap()
    ));
}

#[tokio::test]
async fn budget_not_yet_observed_is_too_many_requests() {
    let t = temp_rest("observed").await;
    put(&t, pods_rt(), &pod("p", true)).await;
    let mut b = pdb("budget", 1, 3, 2);
    b["metadata"]["generation"] = json!(2);
    put(&t, pdb_rt(), &b).await;
    let e = evict(&t, "p", eviction("p", json!({})), None)
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, 429);
    let d = e.details.unwrap();
    assert_eq!(
        d["causes"][0]["message"],
        "The disruption budget budget is still being processed by the server."
    );
    assert_eq!(d["retryAfterSeconds"], 10);
}

#[tokio::test]
async fn unhealthy_pods_follow_the_policy() {
    let t = temp_rest("unhealthy").await;
    // IfHealthyBudget with the budget unmet: the unready pod is protected.
    put(&t, pods_rt(), &pod("p", false)).await;
    put(&t, pdb_rt(), &pdb("budget", 0, 1, 2)).await;
    let e = evict(&t, "p", eviction("p", json!({})), None)
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, 429);
    // AlwaysAllow: it goes, and the budget is not spent.
    let mut b = get(&t, pdb_rt(), "budget").await.unwrap();
    b["spec"]["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
    let key = objects::key(pdb_rt(), Some("default"), "budget");
    let kv = t.rest.store.get(&key).await.unwrap().unwrap();
    t.rest
        .store
        .update(&key, objects::encode(&b).unwrap(), kv.mod_revision)
        .await
        .unwrap();
    let r = evict(&t, "p", eviction("p", json!({})), None)
        .await
        .unwrap();
    assert_eq!(r.code, 201);
    assert!(objects::is_deleting(
        &get(&t, pods_rt(), "p").await.unwrap()
    ));
    let after = get(&t, pdb_rt(), "budget").await.unwrap();
    assert_eq!(after["status"]["disruptionsAllowed"], 0);
    assert!(after["status"].get("disruptedPods").is_none());
}

#[tokio::test]
async fn terminal_pods_ignore_budgets() {
    let t = temp_rest("terminal").await;
    let mut p = pod("p", false);
    p["status"]["phase"] = json!("Failed");
    put(&t, pods_rt(), &p).await;
    put(&t, pdb_rt(), &pdb("budget", 0, 0, 2)).await;
    let r = evict(&t, "p", eviction("p", json!({})), None)
        .await
        .unwrap();
    assert_eq!(r.code, 201);
    // A terminal pod has nothing left to stop: it goes at once.
    assert!(get(&t, pods_rt(), "p").await.is_none());
}

#[tokio::test]
async fn v1beta1_bodies_and_preconditions() {
    let t = temp_rest("v1beta1").await;
    put(&t, pods_rt(), &pod("p", true)).await;
    let mut body = eviction("p", json!({"gracePeriodSeconds": 0}));
    body["apiVersion"] = json!("policy/v1beta1");
    let r = evict(&t, "p", body, None).await.unwrap();
    assert_eq!(r.code, 201);
    assert!(get(&t, pods_rt(), "p").await.is_none());
    let mut body = eviction("p", json!({}));
    body["apiVersion"] = json!("apps/v1");
    assert_eq!(evict(&t, "p", body, None).await.err().unwrap().code, 400);
    // A UID precondition that does not hold: 409, the pod stays.
    put(&t, pods_rt(), &pod("q", true)).await;
    let e = evict(
        &t,
        "q",
        eviction("q", json!({"preconditions": {"uid": "someone-else"}})),
        None,
    )
    .await
    .err()
    .unwrap();
    assert_eq!(e.code, 409);
    assert!(
        e.message.contains(
            "the UID in the precondition (someone-else) does not match the UID in record (uid-q)"
        ),
        "{}",
        e.message
    );
    assert!(!objects::is_deleting(
        &get(&t, pods_rt(), "q").await.unwrap()
    ));
}

#[tokio::test]
async fn nodes_evict_only_their_own_pods() {
    let t = temp_rest_with("node", &["NodeRestriction"]).await;
    put(&t, pods_rt(), &pod("p", true)).await;
    let node = |name: &str| berth_api::user::UserInfo {
        name: format!("system:node:{name}"),
        groups: vec!["system:nodes".into()],
        ..Default::default()
    };
    let as_node = |name: &str| {
        let mut q = Query::parse(None);
        q.user = Some(node(name));
        q
    };
    let e = t
        .rest
        .evict(
            &eviction_path("p"),
            eviction("p", json!({})),
            &as_node("n2"),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, 403);
    assert_eq!(
        e.message,
        "pods \"p\" is forbidden: node n2 can only evict pods with spec.nodeName set to itself"
    );
    let e = t
        .rest
        .evict(
            &eviction_path("gone"),
            eviction("gone", json!({})),
            &as_node("n1"),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, 404);
    let r = t
        .rest
        .evict(
            &eviction_path("p"),
            eviction("p", json!({})),
            &as_node("n1"),
        )
        .await
        .unwrap();
    assert_eq!(r.code, 201);
}

#[test]
fn pods_that_skip_the_budget() {
    let cases = [
        ("Running", false, false, true),
        ("Succeeded", false, true, false),
        ("Failed", false, true, false),
        ("Pending", false, true, true),
        ("Running", true, true, false),
    ];
    for (phase, deleting, ignore, enforce) in cases {
        let mut p = pod("p", true);
        p["status"]["phase"] = json!(phase);
        if deleting {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        assert_eq!(can_ignore_pdb(&p), ignore, "{phase} deleting={deleting}");
        assert_eq!(
            should_enforce_resource_version(&p),
            enforce,
            "{phase} deleting={deleting}"
        );
    }
}

#[test]
fn unhealthy_pod_decisions() {
    let cases = [
        (None, 2, 2, Unhealthy::DeleteAtVersion),
        (None, 3, 2, Unhealthy::DeleteAtVersion),
        (None, 1, 2, Unhealthy::CheckBudget),
        (None, 0, 0, Unhealthy::CheckBudget),
        (Some("IfHealthyBudget"), 1, 2, Unhealthy::CheckBudget),
        (Some("AlwaysAllow"), 0, 2, Unhealthy::DeleteAtVersion),
    ];
    for (policy, current, desired, want) in cases {
        let mut b = pdb("b", 0, current, desired);
        if let Some(p) = policy {
            b["spec"]["unhealthyPodEvictionPolicy"] = json!(p);
        }
        assert_eq!(
            unhealthy_decision(&b),
            want,
            "{policy:?} {current}/{desired}"
        );
    }
}

#[test]
fn check_and_decrement_table() {
    let now = "2026-01-01T00:00:00Z";
    // (allowed, generation, observed, disrupted, expected code or remaining)
    type Case = (i64, i64, i64, usize, Result<i64, u16>);
    let cases: [Case; 6] = [
        (2, 1, 1, 0, Ok(1)),
        (1, 1, 1, 0, Ok(0)),
        (0, 1, 1, 0, Err(429)),
        (1, 2, 1, 0, Err(429)),
        (-1, 1, 1, 0, Err(403)),
        (1, 1, 1, MAX_DISRUPTED_POD_SIZE + 1, Err(403)),
    ];
    for (allowed, generation, observed, disrupted, want) in cases {
        let mut b = pdb("b", allowed, 3, 2);
        b["metadata"]["generation"] = json!(generation);
        b["status"]["observedGeneration"] = json!(observed);
        if disrupted > 0 {
            let m: serde_json::Map<String, Value> = (0..disrupted)
                .map(|i| (format!("p{i}"), json!(now)))
                .collect();
            b["status"]["disruptedPods"] = Value::Object(m);
        }
        let got = check_and_decrement(b, "victim", now, false)
            .map(|b| {
                assert_eq!(b["status"]["disruptedPods"]["victim"], now);
                b["status"]["disruptionsAllowed"].as_i64().unwrap()
            })
            .map_err(|e| e.code);
        assert_eq!(got, want, "allowed={allowed} gen={generation}/{observed}");
    }
    let dry = check_and_decrement(pdb("b", 1, 3, 2), "victim", now, true).unwrap();
    assert!(dry["status"].get("disruptedPods").is_none());
}

#[test]
fn disruption_allowed_condition_keeps_its_transition_time() {
    let mut b = pdb("b", 0, 1, 2);
    update_disruption_allowed_condition(&mut b, "t1");
    update_disruption_allowed_condition(&mut b, "t2");
    let c = &b["status"]["conditions"][0];
    assert_eq!(
        (&c["status"], &c["reason"], &c["lastTransitionTime"]),
        (&json!("False"), &json!("InsufficientPods"), &json!("t1"))
    );
    b["status"]["disruptionsAllowed"] = json!(1);
    update_disruption_allowed_condition(&mut b, "t3");
    let c = &b["status"]["conditions"][0];
    assert_eq!(
        (&c["status"], &c["reason"], &c["lastTransitionTime"]),
        (&json!("True"), &json!("SufficientPods"), &json!("t3"))
    );
    assert_eq!(b["status"]["conditions"].as_array().unwrap().len(), 1);
}
