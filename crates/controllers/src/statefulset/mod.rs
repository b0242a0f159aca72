//! The StatefulSet controller (upstream `pkg/controller/statefulset`): pods
//! with stable names `<set>-<ordinal>`, created in order (OrderedReady) or all
//! at once (Parallel), a PersistentVolumeClaim per volumeClaimTemplate and
//! ordinal, and rolling updates from the highest ordinal down to the
//! partition, tracked through ControllerRevisions.
//!
//! Like the ReplicaSet controller it LISTs pods fresh on every sync. Events
//! use upstream's reasons and messages (`SuccessfulCreate`, `SuccessfulDelete`,
//! `FailedCreate`).

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use serde_json::json;
use tracing::{info, warn};

use berth_runtime::events::{EventSource, EventType, Recorder};

use crate::Error;
use crate::history::{self, REVISION_HASH_LABEL};
use crate::podutil;
use crate::replicaset::{owner_ref, pod_available};
use plan::{PodState, Spec, Step};

pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
const RESYNC: Duration = Duration::from_secs(30);

struct Ctx {
    client: kube::Client,
    events: Recorder,
}

pub async fn run(client: kube::Client) {
    let sets: Api<StatefulSet> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let events = Recorder::new(
        client.clone(),
        EventSource::new("statefulset-controller", ""),
    );
    Controller::new(sets, berth_runtime::reflect::informer_config())
        // Only StatefulSet pods: a watch of every pod would cost each pod
        // event a decode here (orphans to adopt are found by the resync).
        .owns(
            pods,
            berth_runtime::reflect::informer_config().labels(POD_NAME_LABEL),
        )
        .run(reconcile, error_policy, Arc::new(Ctx { client, events }))
        .for_each(|_| async {})
        .await;
}

fn error_policy(s: Arc<StatefulSet>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(statefulset = ?s.metadata.name, error = %err, "statefulset sync failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

fn is_rolling(s: &StatefulSet) -> bool {
    s.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        != Some("OnDelete")
}

fn partition(s: &StatefulSet) -> Option<i32> {
    s.spec
        .as_ref()?
        .update_strategy
        .as_ref()?
        .rolling_update
        .as_ref()?
        .partition
}

fn start_ordinal(s: &StatefulSet) -> i32 {
    s.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

/// `<template>-<set>-<ordinal>`, upstream's getPersistentVolumeClaimName.
pub fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{set}-{ordinal}")
}

async fn reconcile(set: Arc<StatefulSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let name = set.metadata.name.clone().unwrap_or_default();
    // currentRevision and currentReplicas carry over from the stored status:
    // read it fresh, not from the watch cache, which may lag our last write.
    let Some(set) = Api::<StatefulSet>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&name)
        .await?
    else {
        return Ok(Action::await_change());
    };
    let set = Arc::new(set);
    let Some(spec) = set.spec.clone() else {
        return Ok(Action::await_change());
    };
    let uid = set.metadata.uid.clone().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let revs_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let pods = podutil::claim(&pods_api, set.as_ref(), &spec.selector, |p| {
        plan::parse_ordinal(&name, &podutil::name(p)).is_some()
    })
    .await?;
    if set.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }

    let status = set.status.clone().unwrap_or_default();
    let revs = history::list_owned(&revs_api, &uid).await?;
    let r = history::ensure_update_revision(
        &revs_api,
        set.as_ref(),
        &spec.template,
        revs,
        status.collision_count.unwrap_or(0),
    )
    .await?;
    let update_name = r.update.metadata.name.clone().unwrap_or_default();
    let current = status
        .current_revision
        .as_deref()
        .and_then(|c| r.all.iter().find(|x| x.metadata.name.as_deref() == Some(c)))
        .cloned()
        .unwrap_or_else(|| r.update.clone());
    let current_name = current.metadata.name.clone().unwrap_or_default();
    let current_template = history::template_of(&current).unwrap_or_else(|| spec.template.clone());

    let now = Timestamp::now();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let states: Vec<PodState> = pods
        .iter()
        .filter_map(|p| {
            let pname = podutil::name(p);
            Some(PodState {
                ordinal: plan::parse_ordinal(&name, &pname)?,
                name: pname,
                revision: podutil::label(p, REVISION_HASH_LABEL)
                    .unwrap_or_default()
                    .to_string(),
                finished: podutil::is_finished(p),
                running_ready: podutil::is_running_ready(p),
                available: podutil::is_running_ready(p) && pod_available(p, min_ready, now).0,
                terminating: podutil::is_terminating(p),
            })
        })
        .collect();
    let start = start_ordinal(&set);
    let plan_spec = Spec {
        start,
        replicas: spec.replicas.unwrap_or(1),
        ordered: spec.pod_management_policy.as_deref() != Some("Parallel"),
        rolling: is_rolling(&set),
        partition: partition(&set).unwrap_or(0),
    };
    let steps = plan::plan(plan_spec, &states, &update_name);
    for step in steps {
        match step {
            Step::Create(o) => {
                let on_current = plan::revision_for(
                    o,
                    start,
                    plan_spec.rolling,
                    partition(&set),
                    status.current_replicas.unwrap_or(0),
                );
                let (tmpl, rev) = if on_current {
                    (&current_template, &current_name)
                } else {
                    (&spec.template, &update_name)
                };
                create_claims(&ctx, &set, o).await?;
                let pod = new_pod(&set, tmpl, o, rev);
                let pname = format!("{name}-{o}");
                match pods_api.create(&PostParams::default(), &pod).await {
                    Ok(_) => {
                        info!(statefulset = %name, ordinal = o, "created pod");
                        ctx.events.event(
                            set.as_ref(),
                            EventType::Normal,
                            "SuccessfulCreate",
                            format!("create Pod {pname} in StatefulSet {name} successful"),
                        );
                    }
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => {
                        ctx.events.event(
                            set.as_ref(),
                            EventType::Warning,
                            "FailedCreate",
                            format!("create Pod {pname} in StatefulSet {name} failed error: {e}"),
                        );
                        return Err(e.into());
                    }
                }
            }
            Step::Delete(pname) => {
                if let Some(p) = pods.iter().find(|p| podutil::name(p) == pname) {
                    let condemned = plan::parse_ordinal(&name, &pname)
                        .is_some_and(|o| o < start || o >= start + plan_spec.replicas);
                    if condemned {
                        release_claims_on_scale_down(&ctx, &set, p).await?;
                    }
                    podutil::delete(&pods_api, p).await?;
                    info!(statefulset = %name, pod = %pname, "deleted pod");
                    ctx.events.event(
                        set.as_ref(),
                        EventType::Normal,
                        "SuccessfulDelete",
                        format!("delete Pod {pname} in StatefulSet {name} successful"),
                    );
                }
            }
        }
    }

    // Status from the pods seen at the start of the sync (upstream's computeReplicaStatus).
    let mut st = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        collision_count: Some(r.collision_count),
        current_revision: Some(current_name.clone()),
        update_revision: Some(update_name.clone()),
        conditions: status.conditions.clone(),
        ..Default::default()
    };
    let (mut replicas, mut ready, mut available, mut cur, mut upd) = (0, 0, 0, 0, 0);
    let mut next_check: Option<i64> = None;
    for p in &pods {
        if podutil::phase(p).is_empty() {
            continue;
        }
        replicas += 1;
        if podutil::is_running_ready(p) {
            ready += 1;
            let (avail, left) = pod_available(p, min_ready, now);
            if avail {
                available += 1;
            }
            if let Some(l) = left {
                next_check = Some(next_check.map_or(l, |n| n.min(l)));
            }
        }
        if !podutil::is_terminating(p) {
            let rev = podutil::label(p, REVISION_HASH_LABEL).unwrap_or_default();
            if rev == current_name {
                cur += 1;
            }
            if rev == update_name {
                upd += 1;
            }
        }
    }
    st.replicas = replicas;
    st.ready_replicas = Some(ready);
    st.available_replicas = Some(available);
    st.current_replicas = Some(cur);
    st.updated_replicas = Some(upd);
    // Upstream's completeRollingUpdate: once every pod runs the update
    // revision and is ready, it becomes the current revision.
    if plan_spec.rolling && upd == replicas && ready == replicas {
        st.current_replicas = Some(upd);
        st.current_revision = Some(update_name.clone());
    }
    if st != status {
        let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = json!({"status": {
            "observedGeneration": st.observed_generation,
            "replicas": st.replicas,
            "readyReplicas": st.ready_replicas,
            "availableReplicas": st.available_replicas,
            "currentReplicas": st.current_replicas,
            "updatedReplicas": st.updated_replicas,
            "currentRevision": st.current_revision,
            "updateRevision": st.update_revision,
            "collisionCount": st.collision_count,
        }});
        match crate::statusupdate::update(&sets, set.as_ref(), &patch).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Action::await_change()),
            Err(e) => return Err(e.into()),
        }
    }

    let mut live: Vec<&str> = pods
        .iter()
        .filter_map(|p| podutil::label(p, REVISION_HASH_LABEL))
        .collect();
    let final_current = st.current_revision.clone().unwrap_or_default();
    live.push(&final_current);
    live.push(&update_name);
    history::truncate(
        &revs_api,
        &r.all,
        &live,
        spec.revision_history_limit.unwrap_or(10),
    )
    .await?;

    Ok(match next_check {
        Some(s) => Action::requeue(Duration::from_secs(u64::try_from(s.max(1)).unwrap_or(1))),
        None => Action::requeue(RESYNC),
    })
}

/// Upstream's newStatefulSetPod: identity (name, labels, hostname,
/// subdomain), storage (claims replace same-named volumes) and revision.
fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, ordinal: i32, revision: &str) -> Pod {
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let pod_name = format!("{set_name}-{ordinal}");
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), pod_name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_HASH_LABEL.into(), revision.into());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(pod_name.clone());
    if let Some(svc) = set.spec.as_ref().and_then(|s| s.service_name.clone())
        && !svc.is_empty()
    {
        spec.subdomain = Some(svc);
    }
    let claims = set
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.clone())
        .unwrap_or_default();
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    for c in &claims {
        let tname = c.metadata.name.clone().unwrap_or_default();
        volumes.retain(|v| v.name != tname);
        volumes.push(Volume {
            name: tname.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&tname, &set_name, ordinal),
                read_only: None,
            }),
            ..Volume::default()
        });
    }
    if volumes.is_empty() {
        spec.volumes = None;
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: tmeta.annotations,
            finalizers: tmeta.finalizers,
            owner_references: Some(vec![owner_ref(set)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// With `whenScaled: Delete`, a pod removed by a scale-down hands its claims
/// to the garbage collector: each claim gets the pod as its only owner, so it
/// goes once the pod is gone (upstream's updateClaimOwnerRefForSetAndPod).
async fn release_claims_on_scale_down(
    ctx: &Ctx,
    set: &StatefulSet,
    pod: &Pod,
) -> Result<(), Error> {
    let Some(spec) = set.spec.as_ref() else {
        return Ok(());
    };
    let when_scaled = spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_scaled.as_deref());
    if when_scaled != Some("Delete") {
        return Ok(());
    }
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let Some(ordinal) = plan::parse_ordinal(&set_name, &podutil::name(pod)) else {
        return Ok(());
    };
    let api: Api<PersistentVolumeClaim> = Api::namespaced(
        ctx.client.clone(),
        set.metadata.namespace.as_deref().unwrap_or("default"),
    );
    for t in spec.volume_claim_templates.iter().flatten() {
        let cname = claim_name(
            t.metadata.name.as_deref().unwrap_or_default(),
            &set_name,
            ordinal,
        );
        let Some(claim) = api.get_opt(&cname).await? else {
            continue;
        };
        let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
        let set_uid = set.metadata.uid.clone().unwrap_or_default();
        let refs = claim.metadata.owner_references.clone().unwrap_or_default();
        if refs.iter().any(|r| r.uid == pod_uid) && !refs.iter().any(|r| r.uid == set_uid) {
            continue;
        }
        // The set's reference goes: the garbage collector keeps a dependent
        // while any owner lives, so the pod must be its only owner.
        let mut refs: Vec<OwnerReference> = refs
            .into_iter()
            .filter(|r| r.uid != set_uid && r.uid != pod_uid)
            .collect();
        refs.push(OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: podutil::name(pod),
            uid: pod_uid,
            controller: None,
            block_owner_deletion: None,
        });
        // An update of the claim read (guarded by its resourceVersion), as
        // upstream's controller writes it: its role may update claims, not
        // patch them.
        let mut claim = claim;
        claim.metadata.owner_references = Some(refs);
        match api.replace(&cname, &PostParams::default(), &claim).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Creates the ordinal's missing claims (upstream's createPersistentVolumeClaims).
/// With `whenDeleted: Delete` a claim is owned by the set, so it goes with it;
/// the default `Retain` leaves claims for the next pod of that ordinal.
async fn create_claims(ctx: &Ctx, set: &StatefulSet, ordinal: i32) -> Result<(), Error> {
    let Some(spec) = set.spec.as_ref() else {
        return Ok(());
    };
    let templates = spec.volume_claim_templates.clone().unwrap_or_default();
    if templates.is_empty() {
        return Ok(());
    }
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(
        ctx.client.clone(),
        set.metadata.namespace.as_deref().unwrap_or("default"),
    );
    let delete_with_set = spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_deleted.as_deref())
        == Some("Delete");
    for t in templates {
        let tname = t.metadata.name.clone().unwrap_or_default();
        let cname = claim_name(&tname, &set_name, ordinal);
        if api.get_opt(&cname).await?.is_some() {
            continue;
        }
        let mut labels = t.metadata.labels.clone().unwrap_or_default();
        labels.extend(spec.selector.match_labels.clone().unwrap_or_default());
        // A plain reference (not controller, not blocking), as upstream's setOwnerRef.
        let owners = delete_with_set.then(|| {
            vec![OwnerReference {
                controller: None,
                block_owner_deletion: None,
                ..owner_ref(set)
            }]
        });
        let pvc = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(cname.clone()),
                namespace: set.metadata.namespace.clone(),
                labels: Some(labels),
                annotations: t.metadata.annotations.clone(),
                owner_references: owners,
                ..ObjectMeta::default()
            },
            spec: t.spec.clone(),
            status: None,
        };
        match api.create(&PostParams::default(), &pvc).await {
            Ok(_) => {
                info!(claim = %cname, "created persistent volume claim");
                ctx.events.event(
                    set,
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!(
                        "create Claim {cname} Pod {set_name}-{ordinal} in StatefulSet {set_name} success"
                    ),
                );
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetSpec;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    #[test]
    fn pod_identity_and_storage() {
        let tmpl = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ..Default::default()
                }],
                volumes: Some(vec![Volume {
                    name: "www".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        let set = StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                service_name: Some("nginx".into()),
                template: tmpl.clone(),
                volume_claim_templates: Some(vec![PersistentVolumeClaim {
                    metadata: ObjectMeta {
                        name: Some("www".into()),
                        ..Default::default()
                    },
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        };
        let p = new_pod(&set, &tmpl, 2, "web-abc");
        assert_eq!(p.metadata.name.as_deref(), Some("web-2"));
        let labels = p.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(POD_NAME_LABEL).map(String::as_str),
            Some("web-2")
        );
        assert_eq!(labels.get(POD_INDEX_LABEL).map(String::as_str), Some("2"));
        assert_eq!(
            labels.get(REVISION_HASH_LABEL).map(String::as_str),
            Some("web-abc")
        );
        assert_eq!(labels.get("app").map(String::as_str), Some("web"));
        let spec = p.spec.unwrap_or_default();
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let vols = spec.volumes.unwrap_or_default();
        assert_eq!(vols.len(), 1, "template volume replaced by the claim");
        assert_eq!(
            vols[0]
                .persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("www-web-2")
        );
        let owner = &p.metadata.owner_references.unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("StatefulSet", Some(true))
        );
    }
}
