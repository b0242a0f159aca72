//! The ReplicaSet controller (upstream `pkg/controller/replicaset`): keeps
//! `spec.replicas` live pods that match the selector and are controlled by the
//! ReplicaSet, adopting matching orphans and releasing pods that stop matching.
//!
//! Unlike upstream it reads pods with a fresh LIST on every sync instead of an
//! informer cache; kube-runtime never runs two syncs of one object at once, so
//! upstream's "expectations" (guarding against a stale cache) are not needed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use serde_json::json;
use tracing::{debug, info, warn};

use crate::Error;

/// Upstream's `SlowStartInitialBatchSize`.
const SLOW_START_INITIAL_BATCH: usize = 1;
/// Upstream's `BurstReplicas`: most pods created or deleted in one sync.
const BURST_REPLICAS: usize = 500;
/// Periodic resync so orphans created without an event for us get adopted.
const RESYNC: Duration = Duration::from_secs(30);

struct Ctx {
    client: kube::Client,
}

pub async fn run(client: kube::Client) {
    let rs: Api<ReplicaSet> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    Controller::new(rs, berth_runtime::reflect::informer_config())
        .owns(pods, berth_runtime::reflect::informer_config())
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|_| async {})
        .await;
}

fn error_policy(rs: Arc<ReplicaSet>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(replicaset = ?rs.metadata.name, error = %err, "replicaset sync failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

/// Whether `labels` satisfy `sel` (`metav1.LabelSelectorAsSelector`): an empty
/// selector matches everything.
pub(crate) fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    if let Some(ml) = &sel.match_labels
        && ml.iter().any(|(k, v)| labels.get(k) != Some(v))
    {
        return false;
    }
    sel.match_expressions.iter().flatten().all(|e| {
        let vals = e.values.as_deref().unwrap_or_default();
        let got = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => got.is_some_and(|g| vals.contains(g)),
            "NotIn" => got.is_none_or(|g| !vals.contains(g)),
            "Exists" => got.is_some(),
            "DoesNotExist" => got.is_none(),
            _ => false,
        }
    })
}

pub(crate) fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// The ownerReference a controller puts on what it creates or adopts.
pub(crate) fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Merge patch that sets `refs` as the object's ownerReferences, guarded by its uid.
pub(crate) fn owner_refs_patch(meta: &ObjectMeta, refs: Vec<OwnerReference>) -> serde_json::Value {
    json!({"metadata": {"ownerReferences": refs, "uid": meta.uid}})
}

fn is_active(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// When the pod's Ready condition last became True, if it is True.
fn ready_since(p: &Pod) -> Option<Option<Timestamp>> {
    p.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}

/// Available = Ready for at least `min_ready` seconds (`podutil.IsPodAvailable`).
/// Returns (available, seconds until it becomes available if merely ready).
pub(crate) fn pod_available(p: &Pod, min_ready: i32, now: Timestamp) -> (bool, Option<i64>) {
    match ready_since(p) {
        None => (false, None),
        Some(_) if min_ready <= 0 => (true, None),
        Some(None) => (false, Some(i64::from(min_ready))),
        Some(Some(t)) => {
            let left = i64::from(min_ready) - now.duration_since(t).as_secs();
            if left <= 0 {
                (true, None)
            } else {
                (false, Some(left))
            }
        }
    }
}

/// What upstream's `ActivePodsWithRanks` compares when choosing pods to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletionRank {
    pub assigned: bool,
    /// 0 Pending, 1 Unknown, 2 Running (upstream's podPhaseToOrdinal).
    pub phase: u8,
    pub ready: bool,
    /// Pods of the same owner on the same node: more colocated ones go first.
    pub colocated: usize,
    pub ready_since: Option<Timestamp>,
    pub restarts: i32,
    pub created: Option<Timestamp>,
}

/// Orders `a` before `b` when `a` should be deleted first.
pub fn deletion_cmp(a: &DeletionRank, b: &DeletionRank) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    // Unassigned < assigned; Pending < Unknown < Running; not ready < ready.
    a.assigned
        .cmp(&b.assigned)
        .then(a.phase.cmp(&b.phase))
        .then(a.ready.cmp(&b.ready))
        .then(b.colocated.cmp(&a.colocated))
        .then_with(|| {
            // Ready for less time first.
            if a.ready && b.ready {
                match (a.ready_since, b.ready_since) {
                    (Some(x), Some(y)) => y.cmp(&x),
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (None, None) => Ordering::Equal,
                }
            } else {
                Ordering::Equal
            }
        })
        .then(b.restarts.cmp(&a.restarts))
        // Newer first; pods without a timestamp count as newest.
        .then_with(|| match (a.created, b.created) {
            (Some(x), Some(y)) => y.cmp(&x),
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
}

fn rank(p: &Pod, all: &[Pod]) -> DeletionRank {
    let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
    let phase = match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") => 0,
        Some("Running") => 2,
        _ => 1,
    };
    let since = ready_since(p);
    DeletionRank {
        assigned: node.is_some(),
        phase,
        ready: since.is_some(),
        colocated: node.as_ref().map_or(0, |n| {
            all.iter()
                .filter(|o| o.spec.as_ref().and_then(|s| s.node_name.as_ref()) == Some(n))
                .count()
        }),
        ready_since: since.flatten(),
        restarts: p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum()),
        created: p.metadata.creation_timestamp.as_ref().map(|t| t.0),
    }
}

/// Batch sizes for creating `n` pods with upstream's slow start (1, 2, 4 …):
/// a failing batch stops the rest, so a broken template costs one pod, not `n`.
pub fn slow_start_batches(n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let (mut left, mut batch) = (n, SLOW_START_INITIAL_BATCH.min(n));
    while left > 0 {
        out.push(batch);
        left -= batch;
        batch = (batch * 2).min(left);
    }
    out
}

async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let name = rs.metadata.name.clone().unwrap_or_default();
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let Some(spec) = rs.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let deleting = rs.metadata.deletion_timestamp.is_some();

    // Claim pods (upstream's PodControllerRefManager): keep ours that match,
    // release ours that don't, adopt matching orphans.
    let mut owned = Vec::new();
    for pod in pods_api.list(&ListParams::default()).await?.items {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let matches = selector_matches(&spec.selector, &labels);
        match controller_ref(&pod.metadata) {
            Some(r) if r.uid == uid => {
                if matches {
                    owned.push(pod);
                } else if !deleting {
                    release(&pods_api, &pod, &uid).await?;
                }
            }
            Some(_) => {}
            None => {
                if matches && !deleting && pod.metadata.deletion_timestamp.is_none() {
                    let mut refs = pod.metadata.owner_references.clone().unwrap_or_default();
                    refs.push(owner_ref(rs.as_ref()));
                    let patch = owner_refs_patch(&pod.metadata, refs);
                    let pname = pod.metadata.name.clone().unwrap_or_default();
                    match pods_api
                        .patch(&pname, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        Ok(p) => {
                            info!(replicaset = %name, pod = %pname, "adopted pod");
                            owned.push(p);
                        }
                        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
    }
    let active: Vec<Pod> = owned.iter().filter(|p| is_active(p)).cloned().collect();

    if !deleting {
        manage_replicas(&ctx, &rs, &active, &pods_api).await?;
    }

    // Status reflects the pods seen at the start of the sync, as upstream's
    // calculateStatus does; our creates/deletes trigger the next sync.
    let now = Timestamp::now();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let (mut ready, mut available, mut fully, mut next) = (0, 0, 0, None::<i64>);
    for p in &active {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        if template_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
        {
            fully += 1;
        }
        if ready_since(p).is_some() {
            ready += 1;
        }
        let (avail, left) = pod_available(p, min_ready, now);
        if avail {
            available += 1;
        }
        if let Some(l) = left {
            next = Some(next.map_or(l, |n| n.min(l)));
        }
    }
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let old = rs.status.clone().unwrap_or_default();
    let new = ReplicaSetStatus {
        replicas: count(active.len()),
        fully_labeled_replicas: Some(count(fully)),
        ready_replicas: Some(count(ready)),
        available_replicas: Some(count(available)),
        observed_generation: rs.metadata.generation,
        conditions: old.conditions.clone(),
        terminating_replicas: None,
    };
    let old_cmp = ReplicaSetStatus {
        terminating_replicas: None,
        ..old
    };
    if new != old_cmp {
        let rs_api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = json!({"status": {
            "replicas": new.replicas,
            "fullyLabeledReplicas": new.fully_labeled_replicas,
            "readyReplicas": new.ready_replicas,
            "availableReplicas": new.available_replicas,
            "observedGeneration": new.observed_generation,
        }});
        match crate::statusupdate::update(&rs_api, rs.as_ref(), &patch).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Action::await_change()),
            Err(e) => return Err(e.into()),
        }
    }
    // Recheck when a ready pod crosses minReadySeconds (no event marks that).
    Ok(match next {
        Some(s) => Action::requeue(Duration::from_secs(u64::try_from(s.max(1)).unwrap_or(1))),
        None => Action::requeue(RESYNC),
    })
}

async fn release(pods: &Api<Pod>, pod: &Pod, uid: &str) -> Result<(), Error> {
    let refs: Vec<OwnerReference> = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.uid != uid)
        .cloned()
        .collect();
    let patch = owner_refs_patch(&pod.metadata, refs);
    let pname = pod.metadata.name.clone().unwrap_or_default();
    match pods
        .patch(&pname, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            info!(pod = %pname, "released pod that no longer matches its replicaset");
            Ok(())
        }
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn manage_replicas(
    ctx: &Ctx,
    rs: &ReplicaSet,
    active: &[Pod],
    pods: &Api<Pod>,
) -> Result<(), Error> {
    let name = rs.metadata.name.clone().unwrap_or_default();
    let want = usize::try_from(rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)).unwrap_or(0);
    let have = active.len();
    if have < want {
        let n = (want - have).min(BURST_REPLICAS);
        let pod = pod_from_template(rs);
        let mut created = 0;
        for batch in slow_start_batches(n) {
            let results = futures::future::join_all(
                (0..batch).map(|_| async { pods.create(&PostParams::default(), &pod).await }),
            )
            .await;
            let mut failed = None;
            for r in results {
                match r {
                    Ok(_) => created += 1,
                    Err(e) => failed = Some(e),
                }
            }
            if let Some(e) = failed {
                warn!(replicaset = %name, created, error = %e, "pod creation failed; skipping remaining batches");
                return Err(e.into());
            }
        }
        debug!(replicaset = %name, created, "created pods");
    } else if have > want {
        let n = (have - want).min(BURST_REPLICAS);
        let mut ranked: Vec<(DeletionRank, &Pod)> =
            active.iter().map(|p| (rank(p, active), p)).collect();
        ranked.sort_by(|a, b| deletion_cmp(&a.0, &b.0));
        let results = futures::future::join_all(ranked.iter().take(n).map(|(_, p)| {
            let pname = p.metadata.name.clone().unwrap_or_default();
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: p.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            async move { pods.delete(&pname, &dp).await }
        }))
        .await;
        for r in results {
            match r {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        debug!(replicaset = %name, deleted = n, "deleted surplus pods");
    }
    let _ = ctx;
    Ok(())
}

fn pod_from_template(rs: &ReplicaSet) -> Pod {
    let name = rs.metadata.name.clone().unwrap_or_default();
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: rs.metadata.namespace.clone(),
            labels: tmeta.labels,
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![owner_ref(rs)]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn slow_start() {
        assert_eq!(slow_start_batches(0), Vec::<usize>::new());
        assert_eq!(slow_start_batches(1), vec![1]);
        assert_eq!(slow_start_batches(3), vec![1, 2]);
        assert_eq!(slow_start_batches(10), vec![1, 2, 4, 3]);
        assert_eq!(slow_start_batches(15), vec![1, 2, 4, 8]);
    }

    #[test]
    fn selectors() {
        let l = |kv: &[(&str, &str)]| {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let sel = LabelSelector {
            match_labels: Some(l(&[("app", "web")])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: Some(vec!["fe".into(), "be".into()]),
            }]),
        };
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[("app", "web"), ("tier", "fe")], true),
            (&[("app", "web"), ("tier", "db")], false),
            (&[("app", "web")], false),
            (&[("app", "db"), ("tier", "fe")], false),
        ];
        for (labels, want) in cases {
            assert_eq!(selector_matches(&sel, &l(labels)), *want, "{labels:?}");
        }
        assert!(selector_matches(&LabelSelector::default(), &l(&[])));
    }

    fn base() -> DeletionRank {
        DeletionRank {
            assigned: true,
            phase: 2,
            ready: true,
            colocated: 1,
            ready_since: Timestamp::from_second(100).ok(),
            restarts: 0,
            created: Timestamp::from_second(50).ok(),
        }
    }

    #[test]
    fn deletion_ranking() {
        use std::cmp::Ordering::*;
        let b = base();
        // (candidate, expected ordering of candidate vs base)
        let cases: Vec<(&str, DeletionRank, std::cmp::Ordering)> = vec![
            (
                "unassigned first",
                DeletionRank {
                    assigned: false,
                    ..base()
                },
                Less,
            ),
            ("pending first", DeletionRank { phase: 0, ..base() }, Less),
            (
                "unknown before running",
                DeletionRank { phase: 1, ..base() },
                Less,
            ),
            (
                "not ready first",
                DeletionRank {
                    ready: false,
                    ready_since: None,
                    ..base()
                },
                Less,
            ),
            (
                "more colocated first",
                DeletionRank {
                    colocated: 3,
                    ..base()
                },
                Less,
            ),
            (
                "ready more recently first",
                DeletionRank {
                    ready_since: Timestamp::from_second(200).ok(),
                    ..base()
                },
                Less,
            ),
            (
                "ready longer last",
                DeletionRank {
                    ready_since: Timestamp::from_second(10).ok(),
                    ..base()
                },
                Greater,
            ),
            (
                "more restarts first",
                DeletionRank {
                    restarts: 4,
                    ..base()
                },
                Less,
            ),
            (
                "newer first",
                DeletionRank {
                    created: Timestamp::from_second(60).ok(),
                    ..base()
                },
                Less,
            ),
            (
                "older last",
                DeletionRank {
                    created: Timestamp::from_second(10).ok(),
                    ..base()
                },
                Greater,
            ),
            ("equal", base(), Equal),
            // Phase outranks age: an old pending pod goes before a new running one.
            (
                "phase over age",
                DeletionRank {
                    phase: 0,
                    created: Timestamp::from_second(1).ok(),
                    ..base()
                },
                Less,
            ),
        ];
        for (what, c, want) in cases {
            assert_eq!(deletion_cmp(&c, &b), want, "{what}");
        }
    }

    #[test]
    fn availability() {
        let now = Timestamp::from_second(1000).ok().unwrap_or_default();
        let pod = |ready_at: Option<i64>| Pod {
            status: Some(k8s_openapi::api::core::v1::PodStatus {
                conditions: ready_at.map(|t| {
                    vec![k8s_openapi::api::core::v1::PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Timestamp::from_second(t)
                            .ok()
                            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Pod::default()
        };
        assert_eq!(pod_available(&pod(None), 0, now), (false, None));
        assert_eq!(pod_available(&pod(Some(999)), 0, now), (true, None));
        assert_eq!(pod_available(&pod(Some(990)), 5, now), (true, None));
        assert_eq!(pod_available(&pod(Some(998)), 5, now), (false, Some(3)));
    }
}
