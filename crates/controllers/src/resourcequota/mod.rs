//! The resource quota controller (upstream's `pkg/controller/resourcequota`):
//! every ResourceQuota's `status.hard` follows `spec.hard` and `status.used`
//! is recomputed from the namespace's objects with the evaluators admission
//! uses (`berth_api::quota`). A full resync runs every `sync_period`
//! (upstream's `--resource-quota-sync-period`, 5 min); a namespace is synced
//! at once when one of its quotas is created or its spec changes, and when a
//! counted object goes away or stops counting (upstream's replenishment
//! controllers: a deleted pod, a pod that finished, a service or claim whose
//! usage changed, a deleted object of a counted kind), so freed usage is
//! available again within moments.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_api::quota::{self, Evaluator, ResourceList};
use futures::{Stream, StreamExt};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind, PartialObjectMeta};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::Error;

/// Upstream's `--resource-quota-sync-period` default.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(300);

/// How long a burst of changes is gathered before its namespaces are synced.
const BATCH_DELAY: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct Config {
    /// The period of the full recalculation (`--resource-quota-sync-period`).
    pub sync_period: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sync_period: DEFAULT_SYNC_PERIOD,
        }
    }
}

/// Kinds whose deletion frees an object count (`count/<resource>` and the
/// legacy names); pods, services and claims are watched for their usage.
const COUNTED: &[(&str, &str, &str, &str)] = &[
    ("", "v1", "ConfigMap", "configmaps"),
    ("", "v1", "Secret", "secrets"),
    ("", "v1", "ReplicationController", "replicationcontrollers"),
    ("apps", "v1", "Deployment", "deployments"),
    ("apps", "v1", "ReplicaSet", "replicasets"),
    ("apps", "v1", "StatefulSet", "statefulsets"),
    ("apps", "v1", "DaemonSet", "daemonsets"),
    ("batch", "v1", "Job", "jobs"),
    ("batch", "v1", "CronJob", "cronjobs"),
];

fn api_resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The built-in resource of `group`/`plural`, from the registry.
fn builtin(group: &str, plural: &str) -> Option<ApiResource> {
    berth_api::registry::RESOURCES
        .iter()
        .find(|r| r.group == group && r.plural == plural)
        .map(|r| api_resource(r.group, r.version, r.kind, r.plural))
}

/// Namespaces that hold quotas (from the quota watch): changes elsewhere
/// wake nothing.
type QuotaNamespaces = Arc<Mutex<HashMap<String, HashSet<String>>>>;

fn has_quotas(namespaces: &QuotaNamespaces, ns: &str) -> bool {
    namespaces
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(ns)
        .is_some_and(|s| !s.is_empty())
}

fn key_of(o: &DynamicObject) -> (String, String) {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// Whether a quota needs recomputing on its own (upstream's add/update
/// handlers): its status does not reflect its spec yet, or the spec changed.
pub fn needs_sync(quota: &Value, previous_spec: Option<&Value>) -> bool {
    let hard = quota::parse_list(quota.pointer("/spec/hard"));
    let status_hard = quota::parse_list(quota.pointer("/status/hard"));
    let used = quota::parse_list(quota.pointer("/status/used"));
    let spec = quota.get("spec");
    !quota::equals(&hard, &status_hard)
        || hard.keys().any(|k| !used.contains_key(k))
        || previous_spec.is_some_and(|p| Some(p) != spec)
}

/// The `status` a quota should have, or None when it already has it
/// (upstream's `syncResourceQuota`): `hard` = `spec.hard`; `used` = the old
/// usage with every recomputed resource replaced, masked to `hard`.
pub fn desired_status(quota: &Value, computed: &ResourceList) -> Option<Value> {
    let hard = quota::parse_list(quota.pointer("/spec/hard"));
    let old_hard = quota::parse_list(quota.pointer("/status/hard"));
    let old_used = quota::parse_list(quota.pointer("/status/used"));
    let mut used = old_used.clone();
    for (k, v) in computed {
        used.insert(k.clone(), v.clone());
    }
    let used = quota::mask(&used, hard.keys().map(String::as_str));
    let unchanged = quota::equals(&hard, &old_hard) && quota::equals(&used, &old_used);
    (!unchanged)
        .then(|| json!({"hard": quota::list_to_json(&hard), "used": quota::list_to_json(&used)}))
}

/// Runs the controller until the process ends.
pub async fn run(client: kube::Client, config: Config) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let namespaces: QuotaNamespaces = Arc::default();
    let quotas = watch_quotas(client.clone(), tx.clone(), namespaces.clone());
    let pods = watch_usage(
        client.clone(),
        api_resource("", "v1", "Pod", "pods"),
        Evaluator::Pod,
        tx.clone(),
        namespaces.clone(),
    );
    let services = watch_usage(
        client.clone(),
        api_resource("", "v1", "Service", "services"),
        Evaluator::Service,
        tx.clone(),
        namespaces.clone(),
    );
    let claims = watch_usage(
        client.clone(),
        api_resource("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
        Evaluator::PersistentVolumeClaim,
        tx.clone(),
        namespaces.clone(),
    );
    let counted = futures::future::join_all(COUNTED.iter().map(|(g, v, k, p)| {
        watch_deletions(
            client.clone(),
            api_resource(g, v, k, p),
            tx.clone(),
            namespaces.clone(),
        )
    }));
    let worker = async {
        let mut resync = tokio::time::interval(config.sync_period);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut todo = BTreeSet::new();
            tokio::select! {
                _ = resync.tick() => {
                    match all_quota_namespaces(&client).await {
                        Ok(all) => todo.extend(all),
                        Err(e) => warn!(error = %e, "listing resource quotas for the resync failed"),
                    }
                }
                Some(ns) = rx.recv() => {
                    todo.insert(ns);
                    tokio::time::sleep(BATCH_DELAY).await;
                    while let Ok(ns) = rx.try_recv() {
                        todo.insert(ns);
                    }
                }
            }
            for ns in todo {
                if let Err(e) = sync_namespace(&client, &ns).await {
                    warn!(namespace = %ns, error = %e, "resource quota sync failed; retrying");
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        let _ = tx.send(ns);
                    });
                }
            }
        }
    };
    tokio::join!(quotas, pods, services, claims, counted, worker);
}

async fn for_each_event<S>(stream: S, mut f: impl FnMut(watcher::Event<DynamicObject>))
where
    S: Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(ev) => f(ev),
            Err(e) => {
                debug!(error = %e, "resource quota watch error (retried)");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

async fn watch_quotas(
    client: kube::Client,
    tx: mpsc::UnboundedSender<String>,
    namespaces: QuotaNamespaces,
) {
    let ar = api_resource("", "v1", "ResourceQuota", "resourcequotas");
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let mut specs: HashMap<(String, String), Value> = HashMap::new();
    let stream = watcher(api, berth_runtime::reflect::informer_config());
    for_each_event(stream, |ev| match ev {
        watcher::Event::Apply(q) | watcher::Event::InitApply(q) => {
            let key = key_of(&q);
            let v = serde_json::to_value(&q).unwrap_or_default();
            let spec = v.get("spec").cloned().unwrap_or(Value::Null);
            let previous = specs.insert(key.clone(), spec);
            namespaces
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key.0.clone())
                .or_default()
                .insert(key.1.clone());
            if needs_sync(&v, previous.as_ref()) {
                let _ = tx.send(key.0);
            }
        }
        watcher::Event::Delete(q) => {
            let key = key_of(&q);
            specs.remove(&key);
            if let Some(s) = namespaces
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(&key.0)
            {
                s.remove(&key.1);
            }
            // The other quotas may count resourcequotas.
            let _ = tx.send(key.0);
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
    })
    .await;
}

/// Pods, services and claims: a deletion, or a change of the object's usage
/// (a pod that finished, a service changing type), syncs its namespace.
async fn watch_usage(
    client: kube::Client,
    ar: ApiResource,
    evaluator: Evaluator,
    tx: mpsc::UnboundedSender<String>,
    namespaces: QuotaNamespaces,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let mut usage: HashMap<(String, String), ResourceList> = HashMap::new();
    let stream = watcher(api, berth_runtime::reflect::informer_config());
    for_each_event(stream, |ev| match ev {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
            let key = key_of(&o);
            let v = serde_json::to_value(&o).unwrap_or_default();
            let now = evaluator.usage(&v, chrono::Utc::now());
            let changed = usage
                .insert(key.clone(), now.clone())
                .is_some_and(|old| !quota::equals(&old, &now));
            if changed && has_quotas(&namespaces, &key.0) {
                let _ = tx.send(key.0);
            }
        }
        watcher::Event::Delete(o) => {
            let key = key_of(&o);
            usage.remove(&key);
            if has_quotas(&namespaces, &key.0) {
                let _ = tx.send(key.0);
            }
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
    })
    .await;
}

/// Other counted kinds: only deletions free anything.
async fn watch_deletions(
    client: kube::Client,
    ar: ApiResource,
    tx: mpsc::UnboundedSender<String>,
    namespaces: QuotaNamespaces,
) {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &ar);
    let stream = watcher(api, berth_runtime::reflect::informer_config());
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Delete(o)) => {
                let ns = o.metadata.namespace.clone().unwrap_or_default();
                if has_quotas(&namespaces, &ns) {
                    let _ = tx.send(ns);
                }
            }
            Ok(_) => {}
            Err(e) => {
                debug!(error = %e, "resource quota watch error (retried)");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

async fn all_quota_namespaces(client: &kube::Client) -> Result<BTreeSet<String>, Error> {
    let ar = api_resource("", "v1", "ResourceQuota", "resourcequotas");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let list = api.list_metadata(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|q| q.metadata.namespace)
        .collect())
}

/// The objects an evaluator counts in `ns` (object counts need only how many).
async fn objects_for(client: &kube::Client, ns: &str, e: &Evaluator) -> Result<Vec<Value>, Error> {
    let (group, plural) = match e {
        Evaluator::Pod => ("".to_string(), "pods".to_string()),
        Evaluator::Service => ("".to_string(), "services".to_string()),
        Evaluator::PersistentVolumeClaim => ("".to_string(), "persistentvolumeclaims".to_string()),
        Evaluator::ObjectCount { count_name, .. } => {
            match Evaluator::counted_resource(count_name) {
                Some(gr) => gr,
                None => return Ok(Vec::new()),
            }
        }
    };
    let ar = match builtin(&group, &plural) {
        Some(ar) => ar,
        // A custom resource: found through discovery; unknown ones count nothing.
        None => match kube::discovery::group(client, &group).await {
            Ok(g) => match g
                .recommended_resources()
                .into_iter()
                .find(|(ar, _)| ar.plural == plural)
            {
                Some((ar, _)) => ar,
                None => return Ok(Vec::new()),
            },
            Err(_) => return Ok(Vec::new()),
        },
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    if matches!(e, Evaluator::ObjectCount { .. }) {
        let n = api.list_metadata(&ListParams::default()).await?.items.len();
        return Ok(vec![json!({}); n]);
    }
    let list = api.list(&ListParams::default()).await?;
    list.items
        .iter()
        .map(|o| serde_json::to_value(o).map_err(|e| Error::Kube(kube::Error::SerdeError(e))))
        .collect()
}

/// Recomputes every quota of `ns` and writes the statuses that changed.
async fn sync_namespace(client: &kube::Client, ns: &str) -> Result<(), Error> {
    let ar = api_resource("", "v1", "ResourceQuota", "resourcequotas");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let quotas = api.list(&ListParams::default()).await?;
    let now = chrono::Utc::now();
    let mut listed: Vec<(Evaluator, Vec<Value>)> = Vec::new();
    for q in quotas.items {
        let mut v =
            serde_json::to_value(&q).map_err(|e| Error::Kube(kube::Error::SerdeError(e)))?;
        let hard = quota::parse_list(v.pointer("/spec/hard"));
        let evaluators = quota::evaluators_for(&hard);
        for e in &evaluators {
            if !listed.iter().any(|(l, _)| l == e) {
                listed.push((e.clone(), objects_for(client, ns, e).await?));
            }
        }
        let computed = quota::calculate_usage(
            &v,
            &hard,
            &evaluators,
            |e| {
                listed
                    .iter()
                    .find(|(l, _)| l == e)
                    .map(|(_, objs)| objs.clone())
                    .unwrap_or_default()
            },
            now,
        );
        let Some(status) = desired_status(&v, &computed) else {
            continue;
        };
        v["status"] = status;
        let obj: DynamicObject =
            serde_json::from_value(v).map_err(|e| Error::Kube(kube::Error::SerdeError(e)))?;
        let name = obj.metadata.name.clone().unwrap_or_default();
        api.replace_status(&name, &PostParams::default(), &obj)
            .await?;
        debug!(namespace = %ns, quota = %name, "resource quota status updated");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_sync_cases() {
        let q = |spec: Value, status: Value| json!({"spec": spec, "status": status});
        let hard = json!({"hard": {"pods": "2"}});
        let cases = [
            // Never computed.
            (q(hard.clone(), json!({})), None, true),
            (q(hard.clone(), json!({"hard": {"pods": "2"}})), None, true),
            (
                q(
                    hard.clone(),
                    json!({"hard": {"pods": "1"}, "used": {"pods": "0"}}),
                ),
                None,
                true,
            ),
            (
                q(
                    hard.clone(),
                    json!({"hard": {"pods": "2"}, "used": {"pods": "0"}}),
                ),
                None,
                false,
            ),
            // The spec changed (e.g. scopes).
            (
                q(
                    hard.clone(),
                    json!({"hard": {"pods": "2"}, "used": {"pods": "0"}}),
                ),
                Some(json!({"hard": {"pods": "2"}, "scopes": ["BestEffort"]})),
                true,
            ),
        ];
        for (quota, prev, want) in cases {
            assert_eq!(needs_sync(&quota, prev.as_ref()), want, "{quota}");
        }
    }

    #[test]
    fn desired_status_cases() {
        let list = |v: Value| quota::parse_list(Some(&v));
        let quota = json!({"spec": {"hard": {"pods": "2", "example.com/widgets": "1"}},
            "status": {"hard": {"pods": "1"}, "used": {"pods": "1", "services": "3"}}});
        // hard follows spec; dropped resources leave used; unknown ones get no usage.
        assert_eq!(
            desired_status(&quota, &list(json!({"pods": "0"}))),
            Some(json!({"hard": {"example.com/widgets": "1", "pods": "2"}, "used": {"pods": "0"}}))
        );
        let settled = json!({"spec": {"hard": {"pods": "2"}},
            "status": {"hard": {"pods": "2"}, "used": {"pods": "1"}}});
        assert_eq!(desired_status(&settled, &list(json!({"pods": "1"}))), None);
        assert_eq!(
            desired_status(&settled, &list(json!({"pods": "0"}))),
            Some(json!({"hard": {"pods": "2"}, "used": {"pods": "0"}}))
        );
    }
}
