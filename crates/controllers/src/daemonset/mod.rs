//! The DaemonSet controller (upstream `pkg/controller/daemon`): one pod on
//! every node that should run it, pinned with a required
//! `matchFields metadata.name In [node]` term and placed by the default
//! scheduler; RollingUpdate (maxUnavailable/maxSurge) or OnDelete across
//! ControllerRevisions, whose hash labels the pods.
//!
//! It LISTs nodes and pods fresh on every sync and re-syncs every DaemonSet
//! when a node changes. Failed daemon pods are replaced with upstream's
//! per-node back-off (1 s doubling to 15 min) and a `FailedDaemonPod` event. Events: `SuccessfulCreate` ("Created pod: …"),
//! `SuccessfulDelete` ("Deleted pod: …"), `FailedCreate`.

pub mod backoff;
pub mod nodes;
pub mod rolling;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tracing::{info, warn};

use berth_runtime::events::{EventSource, EventType, Recorder};

use crate::Error;
use crate::deployment::rolling::scaled_value;
use crate::history::{self, REVISION_HASH_LABEL};
use crate::podutil;
use crate::replicaset::{owner_ref, pod_available, slow_start_batches};
use rolling::{NodePods, PodRef};

/// Upstream's `extensions.DaemonSetTemplateGenerationKey`.
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
const RESYNC: Duration = Duration::from_secs(30);

struct Ctx {
    client: kube::Client,
    events: Recorder,
    failed_backoff: std::sync::Mutex<backoff::Backoff>,
}

pub async fn run(client: kube::Client) {
    let sets: Api<DaemonSet> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    // Any node change (added, relabelled, tainted, removed) may change where
    // daemon pods belong.
    let node_changes = watcher::watcher(nodes, berth_runtime::reflect::informer_config())
        .default_backoff()
        .filter_map(|e| async move {
            match e {
                Ok(
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone,
                ) => Some(()),
                _ => None,
            }
        });
    Controller::new(sets, berth_runtime::reflect::informer_config())
        // Only daemon pods (their template-generation label), not every pod.
        .owns(
            pods,
            berth_runtime::reflect::informer_config().labels(TEMPLATE_GENERATION_LABEL),
        )
        .reconcile_all_on(node_changes)
        .run(
            reconcile,
            error_policy,
            Arc::new(Ctx {
                events: Recorder::new(client.clone(), EventSource::new("daemonset-controller", "")),
                client,
                failed_backoff: std::sync::Mutex::new(backoff::Backoff::default()),
            }),
        )
        .for_each(|_| async {})
        .await;
}

fn error_policy(ds: Arc<DaemonSet>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(daemonset = ?ds.metadata.name, error = %err, "daemonset sync failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

fn is_rolling(ds: &DaemonSet) -> bool {
    ds.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        != Some("OnDelete")
}

/// (maxSurge, maxUnavailable) against the desired node count, both rounded
/// up; never both zero (upstream's updatedDesiredNodeCounts).
fn fenceposts(ds: &DaemonSet, desired: i32) -> (i32, i32) {
    let ru = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.clone())
        .unwrap_or_default();
    let surge = scaled_value(ru.max_surge.as_ref(), desired, true).unwrap_or(0);
    let unav = match ru.max_unavailable.as_ref() {
        None => 1,
        v => scaled_value(v, desired, true).unwrap_or(1),
    };
    if surge == 0 && unav == 0 {
        (0, 1)
    } else {
        (surge, unav)
    }
}

/// Upstream's IsPodUpdated: the current hash, or the template generation.
fn is_updated(p: &Pod, hash: &str, generation: Option<i64>) -> bool {
    podutil::label(p, REVISION_HASH_LABEL) == Some(hash)
        || generation.is_some_and(|g| {
            podutil::label(p, TEMPLATE_GENERATION_LABEL) == Some(g.to_string().as_str())
        })
}

fn created(p: &Pod) -> Option<Timestamp> {
    p.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

async fn reconcile(ds: Arc<DaemonSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let Some(spec) = ds.spec.clone() else {
        return Ok(Action::await_change());
    };
    let ns = ds.metadata.namespace.clone().unwrap_or_default();
    let uid = ds.metadata.uid.clone().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let revs_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let pods = podutil::claim(&pods_api, ds.as_ref(), &spec.selector, |_| true).await?;
    if ds.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let node_list = Api::<Node>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await?
        .items;

    let status = ds.status.clone().unwrap_or_default();
    let revs = history::list_owned(&revs_api, &uid).await?;
    let r = history::ensure_update_revision(
        &revs_api,
        ds.as_ref(),
        &spec.template,
        revs,
        status.collision_count.unwrap_or(0),
    )
    .await?;
    let hash = r
        .update
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_HASH_LABEL))
        .cloned()
        .unwrap_or_default();
    let generation = ds.metadata.generation;
    let template_spec = spec.template.spec.clone().unwrap_or_default();

    // Pods by the node they are on or pinned to.
    let mut by_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for p in &pods {
        if let Some(n) = p.spec.as_ref().and_then(nodes::target_node) {
            by_node.entry(n).or_default().push(p);
        }
    }
    let eligibility: BTreeMap<String, (bool, bool)> = node_list
        .iter()
        .map(|n| {
            (
                n.metadata.name.clone().unwrap_or_default(),
                nodes::should_run(&template_spec, n),
            )
        })
        .collect();
    let surge_enabled = is_rolling(&ds) && fenceposts(&ds, 1).0 > 0;

    // Manage: create where missing, delete where not wanted, failed or excess
    // (upstream's podsShouldBeOnNode). Pods on nodes that no longer exist go.
    let mut create_on: Vec<String> = Vec::new();
    let mut delete: Vec<&Pod> = Vec::new();
    let mut retry_after: Option<Duration> = None;
    for (node, pods_here) in &by_node {
        if !eligibility.contains_key(node) {
            delete.extend(pods_here.iter().filter(|p| !podutil::is_terminating(p)));
        }
    }
    for (node, &(run, keep)) in &eligibility {
        let here: Vec<&Pod> = by_node.get(node).cloned().unwrap_or_default();
        if run && here.is_empty() {
            create_on.push(node.clone());
        } else if keep {
            let mut running: Vec<&Pod> = Vec::new();
            for p in &here {
                if podutil::is_terminating(p) {
                    continue;
                }
                if podutil::is_finished(p) {
                    let key = format!("{uid}/{node}");
                    let now = std::time::Instant::now();
                    let mut b = ctx
                        .failed_backoff
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if let Some(wait) = b.remaining(&key, now) {
                        retry_after = Some(retry_after.map_or(wait, |r: Duration| r.min(wait)));
                        continue;
                    }
                    b.next(&key, now);
                    b.gc(now);
                    ctx.events.event(
                        ds.as_ref(),
                        EventType::Warning,
                        "FailedDaemonPod",
                        format!(
                            "Found failed daemon pod {ns}/{} on node {node}, will try to kill it",
                            podutil::name(p)
                        ),
                    );
                    delete.push(p);
                } else {
                    running.push(p);
                }
            }
            running.sort_by_key(|p| created(p));
            if surge_enabled {
                // Keep the oldest pod of each revision kind.
                let (new, old): (Vec<&Pod>, Vec<&Pod>) = running
                    .iter()
                    .partition(|p| is_updated(p, &hash, generation));
                delete.extend(new.iter().skip(1));
                delete.extend(old.iter().skip(1));
            } else if running.len() > 1 {
                delete.extend(running.iter().skip(1));
            }
            // A replacement for a deleted failed pod comes once it is gone.
        } else {
            delete.extend(here.iter().filter(|p| !podutil::is_terminating(p)));
        }
    }
    let managed = !create_on.is_empty() || !delete.is_empty();
    sync_nodes(&ctx, &ds, &pods_api, &create_on, &delete, &hash).await?;

    let now = Timestamp::now();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let desired = i32::try_from(eligibility.values().filter(|(run, _)| *run).count()).unwrap_or(0);
    // The update sees this sync's view; when manage changed pods, the
    // resulting pod events bring the next sync.
    if is_rolling(&ds) && !managed {
        let (surge, unavailable) = fenceposts(&ds, desired);
        let mut views = Vec::new();
        for (node, &(run, _)) in &eligibility {
            let here: Vec<&Pod> = by_node
                .get(node)
                .into_iter()
                .flatten()
                .filter(|p| !podutil::is_terminating(p))
                .copied()
                .collect();
            let view = |p: &&Pod| PodRef {
                name: podutil::name(p),
                available: pod_available(p, min_ready, now).0,
            };
            let (new, old): (Vec<&Pod>, Vec<&Pod>) =
                here.iter().partition(|p| is_updated(p, &hash, generation));
            views.push(NodePods {
                node: node.clone(),
                should_run: run,
                ok: new.len() <= 1 && old.len() <= 1,
                new: new.first().map(view),
                old: old.first().map(view),
            });
        }
        let upd = rolling::rolling_update(&views, surge, unavailable);
        let del: Vec<&Pod> = pods
            .iter()
            .filter(|p| upd.delete.contains(&podutil::name(p)))
            .collect();
        sync_nodes(&ctx, &ds, &pods_api, &upd.create_on, &del, &hash).await?;
    }

    // Status (upstream's updateDaemonSetStatus).
    let (mut current, mut misscheduled, mut ready, mut available, mut updated) = (0, 0, 0, 0, 0);
    let mut next_check: Option<i64> = None;
    for (node, &(run, _)) in &eligibility {
        let mut here: Vec<&Pod> = by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter(|p| !podutil::is_terminating(p) && !podutil::is_finished(p))
            .copied()
            .collect();
        if !run {
            if !here.is_empty() {
                misscheduled += 1;
            }
            continue;
        }
        if here.is_empty() {
            continue;
        }
        current += 1;
        here.sort_by_key(|p| created(p));
        let p = here[0];
        if podutil::is_ready(p) {
            ready += 1;
            let (avail, left) = pod_available(p, min_ready, now);
            if avail {
                available += 1;
            }
            if let Some(l) = left {
                next_check = Some(next_check.map_or(l, |n| n.min(l)));
            }
        }
        if is_updated(p, &hash, generation) {
            updated += 1;
        }
    }
    let st = DaemonSetStatus {
        collision_count: Some(r.collision_count),
        conditions: status.conditions.clone(),
        current_number_scheduled: current,
        desired_number_scheduled: desired,
        number_available: Some(available),
        number_misscheduled: misscheduled,
        number_ready: ready,
        number_unavailable: Some(desired - available),
        observed_generation: generation,
        updated_number_scheduled: Some(updated),
    };
    if st != status {
        let api: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = json!({"status": {
            "collisionCount": st.collision_count,
            "currentNumberScheduled": st.current_number_scheduled,
            "desiredNumberScheduled": st.desired_number_scheduled,
            "numberAvailable": st.number_available,
            "numberMisscheduled": st.number_misscheduled,
            "numberReady": st.number_ready,
            "numberUnavailable": st.number_unavailable,
            "observedGeneration": st.observed_generation,
            "updatedNumberScheduled": st.updated_number_scheduled,
        }});
        match crate::statusupdate::update(&api, ds.as_ref(), &patch).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Action::await_change()),
            Err(e) => return Err(e.into()),
        }
    }

    let live_hashes: Vec<String> = pods
        .iter()
        .filter_map(|p| podutil::label(p, REVISION_HASH_LABEL).map(String::from))
        .collect();
    let live: Vec<&str> = r
        .all
        .iter()
        .filter(|rev| {
            let h = rev
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REVISION_HASH_LABEL));
            h.is_some_and(|h| *h == hash || live_hashes.contains(h))
        })
        .filter_map(|rev| rev.metadata.name.as_deref())
        .collect();
    history::truncate(
        &revs_api,
        &r.all,
        &live,
        spec.revision_history_limit.unwrap_or(10),
    )
    .await?;

    let wait = next_check
        .map(|s| Duration::from_secs(u64::try_from(s.max(1)).unwrap_or(1)))
        .into_iter()
        .chain(retry_after)
        .min();
    Ok(Action::requeue(wait.unwrap_or(RESYNC)))
}

/// Creates a pod on each node (in slow-start batches) and deletes pods.
async fn sync_nodes(
    ctx: &Ctx,
    ds: &DaemonSet,
    pods: &Api<Pod>,
    create_on: &[String],
    delete: &[&Pod],
    hash: &str,
) -> Result<(), Error> {
    let name = ds.metadata.name.clone().unwrap_or_default();
    let mut queue = create_on.iter();
    for batch in slow_start_batches(create_on.len()) {
        let nodes: Vec<&String> = queue.by_ref().take(batch).collect();
        let results = futures::future::join_all(nodes.iter().map(|n| {
            let pod = new_pod(ds, n, hash);
            async move { pods.create(&PostParams::default(), &pod).await }
        }))
        .await;
        let mut failed = None;
        for r in results {
            match r {
                Ok(p) => ctx.events.event(
                    ds,
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("Created pod: {}", podutil::name(&p)),
                ),
                Err(e) => {
                    ctx.events.event(
                        ds,
                        EventType::Warning,
                        "FailedCreate",
                        format!("Error creating: {e}"),
                    );
                    failed = Some(e);
                }
            }
        }
        if let Some(e) = failed {
            warn!(daemonset = %name, error = %e, "daemon pod creation failed; skipping remaining batches");
            return Err(e.into());
        }
    }
    if !create_on.is_empty() {
        info!(daemonset = %name, nodes = create_on.len(), "created daemon pods");
    }
    for p in delete {
        podutil::delete(pods, p).await?;
        info!(daemonset = %name, pod = %podutil::name(p), "deleted daemon pod");
        ctx.events.event(
            ds,
            EventType::Normal,
            "SuccessfulDelete",
            format!("Deleted pod: {}", podutil::name(p)),
        );
    }
    Ok(())
}

/// A daemon pod for `node`: the template with the revision labels, the
/// daemon tolerations and node pinning.
fn new_pod(ds: &DaemonSet, node: &str, hash: &str) -> Pod {
    let name = ds.metadata.name.clone().unwrap_or_default();
    let template: PodTemplateSpec = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.into(), hash.into());
    if let Some(g) = ds.metadata.generation {
        labels.insert(TEMPLATE_GENERATION_LABEL.into(), g.to_string());
    }
    let mut spec = template.spec.unwrap_or_default();
    nodes::add_daemon_tolerations(&mut spec);
    nodes::pin_to_node(&mut spec, node);
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: ds.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![owner_ref(ds)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}
