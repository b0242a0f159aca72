//! The Deployment controller (upstream `pkg/controller/deployment`): owns
//! ReplicaSets named `<deployment>-<pod-template-hash>`, one per template
//! revision, and moves pods between them with the RollingUpdate or Recreate
//! strategy; rollback is just a template equal to an old ReplicaSet's.
//!
//! Like the ReplicaSet controller it LISTs ReplicaSets fresh on every sync.

pub mod progress;
pub mod rolling;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use serde_json::json;
use tracing::{info, warn};

use crate::replicaset::{controller_ref, owner_ref, owner_refs_patch, selector_matches};

pub const HASH_LABEL: &str = "pod-template-hash";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Deployment annotations not copied to its ReplicaSets (upstream's skipCopyAnnotation).
const SKIP_COPY: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("invalid int or percentage {0:?}")]
    IntOrPercent(String),
    #[error("hash collision on replica set {0}; retrying with collisionCount bumped")]
    Collision(String),
}

struct Ctx {
    client: kube::Client,
}

pub async fn run(client: kube::Client) {
    let deploys: Api<Deployment> = Api::all(client.clone());
    let rss: Api<ReplicaSet> = Api::all(client.clone());
    Controller::new(deploys, berth_runtime::reflect::informer_config())
        .owns(rss, berth_runtime::reflect::informer_config())
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|_| async {})
        .await;
}

fn error_policy(d: Arc<Deployment>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    match err {
        Error::Collision(_) => Action::requeue(Duration::from_millis(100)),
        _ => {
            warn!(deployment = ?d.metadata.name, error = %err, "deployment sync failed; retrying");
            Action::requeue(Duration::from_secs(2))
        }
    }
}

/// FNV-32a, upstream's template hasher.
fn fnv32a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// The pod-template-hash: FNV-32a over the template's JSON (upstream hashes Go's
/// `%#v` printing, which Rust cannot reproduce; JSON of the k8s-openapi type is
/// stable: fixed field order, sorted maps) plus the collision count as upstream
/// adds it, rendered with upstream's `rand.SafeEncodeString` alphabet.
pub fn pod_template_hash(t: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut data = serde_json::to_vec(&normalized(t)).unwrap_or_default();
    if let Some(c) = collision_count {
        data.extend_from_slice(&c.to_le_bytes());
    }
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    fnv32a(&data)
        .to_string()
        .bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

/// Drops empty objects, lists and nulls: Go treats an absent struct and an
/// empty one alike (`resources: {}` appears after `kubectl rollout undo`), so
/// equality and the hash must too.
fn prune(v: &mut serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !prune(x));
            m.is_empty()
        }
        serde_json::Value::Array(a) => {
            a.iter_mut().for_each(|x| {
                prune(x);
            });
            a.is_empty()
        }
        _ => false,
    }
}

fn normalized(t: &PodTemplateSpec) -> serde_json::Value {
    let mut v = serde_json::to_value(t).unwrap_or_default();
    prune(&mut v);
    v
}

fn without_hash(t: &PodTemplateSpec) -> serde_json::Value {
    let mut v = normalized(t);
    if let Some(labels) = v
        .pointer_mut("/metadata/labels")
        .and_then(|l| l.as_object_mut())
    {
        labels.remove(HASH_LABEL);
        if labels.is_empty()
            && let Some(m) = v.pointer_mut("/metadata").and_then(|m| m.as_object_mut())
        {
            m.remove("labels");
        }
    }
    v
}

/// Upstream's `EqualIgnoreHash`: templates equal but for the hash label.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    without_hash(a) == without_hash(b)
}

pub(crate) fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map_or(0, |s| s.replicas)
}

/// Available pods we may count on: never more than the spec, so pods of a
/// just-scaled-down ReplicaSet that are about to go do not count (a lagging
/// status would otherwise let a rolling step remove too many).
fn available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
        .min(replicas(rs))
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn annotation_i32(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.metadata.annotations.as_ref()?.get(key)?.parse().ok()
}

fn template(d: &Deployment) -> PodTemplateSpec {
    d.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

fn desired(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn is_rolling(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        != Some("Recreate")
}

/// (maxSurge, maxUnavailable) resolved against the desired replicas; both 0
/// for Recreate. maxUnavailable never exceeds the replicas (upstream's MaxUnavailable).
fn fenceposts(d: &Deployment) -> Result<(i32, i32), Error> {
    if !is_rolling(d) {
        return Ok((0, 0));
    }
    let ru = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.clone())
        .unwrap_or_default();
    let want = desired(d);
    let (surge, unav) =
        rolling::resolve_fenceposts(ru.max_surge.as_ref(), ru.max_unavailable.as_ref(), want)?;
    Ok((surge, if want == 0 { 0 } else { unav.min(want) }))
}

/// State of one sync: the deployment (status edited in place) and its ReplicaSets.
struct Sync {
    d: Deployment,
    api: Api<ReplicaSet>,
    new_rs: Option<ReplicaSet>,
    old: Vec<ReplicaSet>,
    surge: i32,
    unavailable: i32,
    client: kube::Client,
}

async fn reconcile(d: Arc<Deployment>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if d.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let Some(spec) = d.spec.clone() else {
        return Ok(Action::await_change());
    };
    let ns = d.metadata.namespace.clone().unwrap_or_default();
    let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let rss = claim_replica_sets(&d, &api, &spec.selector).await?;
    let (surge, unavailable) = fenceposts(&d)?;
    let mut s = Sync {
        d: (*d).clone(),
        api,
        new_rs: None,
        old: Vec::new(),
        surge,
        unavailable,
        client: ctx.client.clone(),
    };
    s.split(rss);

    if spec.paused == Some(true) || was_paused(&d) {
        s.check_paused_conditions(spec.paused == Some(true));
    }
    if spec.paused == Some(true) || s.is_scaling_event() {
        s.sync_revision(false).await?;
        s.scale().await?;
        if spec.paused == Some(true) {
            s.cleanup().await?;
        }
        s.write_status(false).await?;
        return Ok(Action::requeue(Duration::from_secs(60)));
    }
    if is_rolling(&d) {
        s.rollout_rolling().await?;
    } else {
        s.rollout_recreate().await?;
    }
    // Recheck at the progress deadline; no event marks its passing.
    let left = progress::deadline_left(&s.d, Timestamp::now());
    Ok(match left {
        Some(l) if !progress::complete(&s.d, &s.d.status.clone().unwrap_or_default()) => {
            Action::requeue(Duration::from_secs(
                u64::try_from(l.max(0)).unwrap_or(0) + 1,
            ))
        }
        _ => Action::requeue(Duration::from_secs(60)),
    })
}

fn was_paused(d: &Deployment) -> bool {
    d.status
        .as_ref()
        .and_then(|s| progress::get(s, progress::PROGRESSING))
        .is_some_and(|c| c.reason.as_deref() == Some(progress::PAUSED))
}

/// Upstream's ControllerRefManager for ReplicaSets: keep ours that match,
/// release ours that don't, adopt matching orphans.
async fn claim_replica_sets(
    d: &Deployment,
    api: &Api<ReplicaSet>,
    selector: &LabelSelector,
) -> Result<Vec<ReplicaSet>, Error> {
    let uid = d.metadata.uid.clone().unwrap_or_default();
    let mut out = Vec::new();
    for rs in api.list(&ListParams::default()).await?.items {
        let labels = rs.metadata.labels.clone().unwrap_or_default();
        let matches = selector_matches(selector, &labels);
        let name = rs.metadata.name.clone().unwrap_or_default();
        let refs = rs.metadata.owner_references.clone().unwrap_or_default();
        let patch = match controller_ref(&rs.metadata) {
            Some(r) if r.uid == uid && matches => {
                out.push(rs);
                continue;
            }
            Some(r) if r.uid == uid => owner_refs_patch(
                &rs.metadata,
                refs.into_iter().filter(|r| r.uid != uid).collect(),
            ),
            None if matches && rs.metadata.deletion_timestamp.is_none() => {
                let mut refs = refs;
                refs.push(owner_ref(d));
                owner_refs_patch(&rs.metadata, refs)
            }
            _ => continue,
        };
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(rs) => {
                if matches {
                    info!(replicaset = %name, "adopted replica set");
                    out.push(rs);
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

impl Sync {
    fn name(&self) -> String {
        self.d.metadata.name.clone().unwrap_or_default()
    }

    fn status_mut(&mut self) -> &mut DeploymentStatus {
        self.d.status.get_or_insert_with(Default::default)
    }

    /// Upstream's FindNewReplicaSet/FindOldReplicaSets: the oldest ReplicaSet
    /// whose template equals the deployment's is the new one.
    fn split(&mut self, mut rss: Vec<ReplicaSet>) {
        rss.sort_by(|a, b| {
            (
                a.metadata.creation_timestamp.as_ref().map(|t| t.0),
                &a.metadata.name,
            )
                .cmp(&(
                    b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    &b.metadata.name,
                ))
        });
        let t = template(&self.d);
        let idx = rss.iter().position(|rs| {
            rs.spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|rt| equal_ignore_hash(rt, &t))
        });
        self.new_rs = idx.map(|i| rss.remove(i));
        self.old = rss;
    }

    fn all(&self) -> Vec<&ReplicaSet> {
        self.old.iter().chain(self.new_rs.as_ref()).collect()
    }

    fn is_scaling_event(&self) -> bool {
        let want = desired(&self.d);
        self.all()
            .iter()
            .filter(|rs| replicas(rs) > 0)
            .filter_map(|rs| annotation_i32(rs, DESIRED_REPLICAS))
            .any(|d| d != want)
    }

    fn check_paused_conditions(&mut self, paused: bool) {
        if !progress::has_progress_deadline(&self.d) {
            return;
        }
        let st = self.status_mut();
        let reason = progress::get(st, progress::PROGRESSING).and_then(|c| c.reason.clone());
        if reason.as_deref() == Some(progress::TIMED_OUT) {
            return;
        }
        let paused_cond = reason.as_deref() == Some(progress::PAUSED);
        if paused && !paused_cond {
            let c = progress::condition(
                progress::PROGRESSING,
                "Unknown",
                progress::PAUSED,
                "Deployment is paused".into(),
            );
            progress::set(st, c);
        } else if !paused && paused_cond {
            let c = progress::condition(
                progress::PROGRESSING,
                "Unknown",
                progress::RESUMED,
                "Deployment is resumed".into(),
            );
            progress::set(st, c);
        }
    }

    /// Upstream's getNewReplicaSet: bring the new ReplicaSet's revision and
    /// annotations up to date, or create it when `create`.
    async fn sync_revision(&mut self, create: bool) -> Result<(), Error> {
        if let Some(rs) = self.new_rs.clone() {
            return self.update_new_rs(rs).await;
        }
        if !create {
            return Ok(());
        }
        self.create_new_rs().await
    }

    /// Existing new ReplicaSet: bump its revision past the old ones (a
    /// rollback reuses an old ReplicaSet) and refresh copied annotations.
    async fn update_new_rs(&mut self, rs: ReplicaSet) -> Result<(), Error> {
        let new_revision = self.old.iter().map(revision).max().unwrap_or(0) + 1;
        {
            let mut ann = rs.metadata.annotations.clone().unwrap_or_default();
            let cur = revision(&rs);
            let mut changed = false;
            if cur < new_revision {
                // A rollback: the old revision number moves into the history.
                if cur > 0 {
                    let hist = ann
                        .get(REVISION_HISTORY)
                        .filter(|h| !h.is_empty())
                        .map_or(cur.to_string(), |h| format!("{h},{cur}"));
                    ann.insert(REVISION_HISTORY.into(), hist);
                }
                ann.insert(REVISION.into(), new_revision.to_string());
                changed = true;
            }
            for (k, v) in self.copied_annotations() {
                if ann.get(&k) != Some(&v) {
                    ann.insert(k, v);
                    changed = true;
                }
            }
            let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
            let rs_min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds);
            if changed || min_ready.unwrap_or(0) != rs_min_ready.unwrap_or(0) {
                let patch = json!({"metadata": {"annotations": ann}, "spec": {"minReadySeconds": min_ready}});
                let name = rs.metadata.name.clone().unwrap_or_default();
                self.new_rs = Some(
                    self.api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?,
                );
            }
            let rev = self.new_rs.as_ref().map(revision).unwrap_or(new_revision);
            self.set_deployment_revision(rev).await?;
            if progress::has_progress_deadline(&self.d)
                && self
                    .d
                    .status
                    .as_ref()
                    .and_then(|s| progress::get(s, progress::PROGRESSING))
                    .is_none()
            {
                let msg = format!(
                    "Found new replica set \"{name}\"",
                    name = rs.metadata.name.clone().unwrap_or_default()
                );
                let c =
                    progress::condition(progress::PROGRESSING, "True", progress::FOUND_NEW_RS, msg);
                progress::set(self.status_mut(), c);
            }
        }
        Ok(())
    }

    async fn create_new_rs(&mut self) -> Result<(), Error> {
        let new_revision = self.old.iter().map(revision).max().unwrap_or(0) + 1;
        let want = desired(&self.d);
        let collision = self.d.status.as_ref().and_then(|s| s.collision_count);
        let mut t = template(&self.d);
        let hash = pod_template_hash(&t, collision);
        t.metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(Default::default)
            .insert(HASH_LABEL.into(), hash.clone());
        let mut selector = self
            .d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(HASH_LABEL.into(), hash.clone());
        let new_replicas = if is_rolling(&self.d) {
            let current = self
                .old
                .iter()
                .map(|rs| replicas(rs).max(status_replicas(rs)))
                .sum();
            rolling::new_rs_new_replicas(want, self.surge, current, 0)
        } else {
            want
        };
        let mut ann: BTreeMap<String, String> = self.copied_annotations().into_iter().collect();
        ann.insert(REVISION.into(), new_revision.to_string());
        let rs_name = format!("{}-{hash}", self.name());
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(rs_name.clone()),
                namespace: self.d.metadata.namespace.clone(),
                labels: t.metadata.as_ref().and_then(|m| m.labels.clone()),
                annotations: Some(ann),
                owner_references: Some(vec![owner_ref(&self.d)]),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(new_replicas),
                min_ready_seconds: self.d.spec.as_ref().and_then(|s| s.min_ready_seconds),
                selector,
                template: Some(t),
            }),
            status: None,
        };
        let created = match self.api.create(&PostParams::default(), &rs).await {
            Ok(rs) => rs,
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let existing = self.api.get(&rs_name).await?;
                let ours = controller_ref(&existing.metadata).map(|r| r.uid.clone())
                    == self.d.metadata.uid;
                let same = existing
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .is_some_and(|rt| equal_ignore_hash(rt, &template(&self.d)));
                if ours && same {
                    // Ours with this template, though the list did not show it so.
                    warn!(replicaset = %rs_name, "new replica set already exists; reusing it");
                    return Box::pin(self.update_new_rs(existing)).await;
                }
                let count = collision.unwrap_or(0).wrapping_add(1);
                self.status_mut().collision_count = Some(count);
                self.write_status(false).await?;
                return Err(Error::Collision(rs_name));
            }
            Err(e) => return Err(e.into()),
        };
        info!(deployment = %self.name(), replicaset = %rs_name, replicas = new_replicas, "created new replica set");
        self.set_deployment_revision(new_revision).await?;
        if progress::has_progress_deadline(&self.d) {
            let msg = format!("Created new replica set \"{rs_name}\"");
            let c =
                progress::condition(progress::PROGRESSING, "True", progress::NEW_RS_CREATED, msg);
            progress::set(self.status_mut(), c);
        }
        self.new_rs = Some(created);
        Ok(())
    }

    /// The deployment's own annotations a ReplicaSet carries, plus the
    /// desired/max replicas annotations proportional scaling reads.
    fn copied_annotations(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .d
            .metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| !SKIP_COPY.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let want = desired(&self.d);
        out.push((DESIRED_REPLICAS.into(), want.to_string()));
        out.push((MAX_REPLICAS.into(), (want + self.surge).to_string()));
        out
    }

    async fn set_deployment_revision(&mut self, rev: i64) -> Result<(), Error> {
        let cur = self
            .d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION))
            .cloned();
        if cur.as_deref() == Some(rev.to_string().as_str()) {
            return Ok(());
        }
        let api: Api<Deployment> = Api::namespaced(
            self.client.clone(),
            self.d.metadata.namespace.as_deref().unwrap_or_default(),
        );
        // An update, as upstream's controller writes it (its role may update
        // Deployments, not patch them); a conflict requeues.
        let mut d = self.d.clone();
        d.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(REVISION.into(), rev.to_string());
        let updated = api
            .replace(&self.name(), &PostParams::default(), &d)
            .await?;
        self.d.metadata.annotations = updated.metadata.annotations;
        self.d.metadata.resource_version = updated.metadata.resource_version;
        Ok(())
    }

    /// Sets a ReplicaSet's size (and the desired/max annotations); returns
    /// whether the size changed.
    async fn scale_rs(&mut self, name: &str, size: i32) -> Result<bool, Error> {
        let want = desired(&self.d);
        let max = want + self.surge;
        let Some(rs) = self
            .all()
            .into_iter()
            .find(|rs| rs.metadata.name.as_deref() == Some(name))
            .cloned()
        else {
            return Ok(false);
        };
        let size_changed = replicas(&rs) != size;
        let ann_changed = annotation_i32(&rs, DESIRED_REPLICAS) != Some(want)
            || annotation_i32(&rs, MAX_REPLICAS) != Some(max);
        if !size_changed && !ann_changed {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"annotations": {DESIRED_REPLICAS: want.to_string(), MAX_REPLICAS: max.to_string()}},
            "spec": {"replicas": size},
        });
        let updated = self
            .api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        if size_changed {
            info!(deployment = %self.name(), replicaset = %name, from = replicas(&rs), to = size, "scaled replica set");
        }
        if self
            .new_rs
            .as_ref()
            .is_some_and(|n| n.metadata.name.as_deref() == Some(name))
        {
            self.new_rs = Some(updated);
        } else if let Some(o) = self
            .old
            .iter_mut()
            .find(|o| o.metadata.name.as_deref() == Some(name))
        {
            *o = updated;
        }
        Ok(size_changed)
    }

    /// Upstream's `scale`: a size change with several active ReplicaSets is
    /// spread proportionally to their sizes.
    async fn scale(&mut self) -> Result<(), Error> {
        let want = desired(&self.d);
        let active: Vec<ReplicaSet> = self
            .all()
            .into_iter()
            .filter(|rs| replicas(rs) > 0)
            .cloned()
            .collect();
        let target = match active.len() {
            0 => self.new_rs.clone().or_else(|| self.old.last().cloned()),
            1 => active.first().cloned(),
            _ => None,
        };
        if let Some(rs) = target {
            let name = rs.metadata.name.clone().unwrap_or_default();
            self.scale_rs(&name, want).await?;
            return Ok(());
        }
        let saturated = self.new_rs.as_ref().is_some_and(|n| {
            replicas(n) == want
                && annotation_i32(n, DESIRED_REPLICAS) == Some(want)
                && available(n) == want
        });
        if saturated {
            for rs in self.old.clone().iter().filter(|rs| replicas(rs) > 0) {
                self.scale_rs(rs.metadata.name.as_deref().unwrap_or_default(), 0)
                    .await?;
            }
            return Ok(());
        }
        if !is_rolling(&self.d) {
            return Ok(());
        }
        let mut active = active;
        let allowed = if want > 0 { want + self.surge } else { 0 };
        let to_add = allowed - active.iter().map(replicas).sum::<i32>();
        let created = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
        // Largest first; ties: newer first when growing, older first when shrinking.
        active.sort_by(|a, b| {
            replicas(b).cmp(&replicas(a)).then_with(|| {
                if to_add > 0 {
                    created(b).cmp(&created(a))
                } else {
                    created(a).cmp(&created(b))
                }
            })
        });
        let status_replicas_d = self.d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let mut added = 0;
        let mut sizes: Vec<(String, i32)> = Vec::new();
        for rs in &active {
            let mut size = replicas(rs);
            if to_add != 0 {
                let annotated = annotation_i32(rs, MAX_REPLICAS).unwrap_or(status_replicas_d);
                let fraction =
                    rolling::replica_set_fraction(replicas(rs), want, self.surge, annotated);
                let p = rolling::proportion(replicas(rs), fraction, to_add, added);
                size += p;
                added += p;
            }
            sizes.push((rs.metadata.name.clone().unwrap_or_default(), size));
        }
        if to_add != 0
            && let Some(first) = sizes.first_mut()
        {
            first.1 = (first.1 + to_add - added).max(0);
        }
        for (name, size) in sizes {
            self.scale_rs(&name, size).await?;
        }
        Ok(())
    }

    async fn rollout_rolling(&mut self) -> Result<(), Error> {
        self.sync_revision(true).await?;
        if self.reconcile_new_rs().await? || self.reconcile_old_rss().await? {
            return self.write_status(true).await;
        }
        if progress::complete(&self.d, &self.d.status.clone().unwrap_or_default()) {
            self.cleanup().await?;
        }
        self.write_status(true).await
    }

    async fn reconcile_new_rs(&mut self) -> Result<bool, Error> {
        let want = desired(&self.d);
        let Some(new) = self.new_rs.clone() else {
            return Ok(false);
        };
        let name = new.metadata.name.clone().unwrap_or_default();
        let cur = replicas(&new);
        if cur == want {
            return Ok(false);
        }
        if cur > want {
            return self.scale_rs(&name, want).await;
        }
        // Count pods a lagging RS controller has not yet removed as well as ones
        // it has not yet created, so the surge bound holds on real pods.
        let current = self
            .all()
            .iter()
            .map(|rs| replicas(rs).max(status_replicas(rs)))
            .sum();
        let size = rolling::new_rs_new_replicas(want, self.surge, current, cur);
        self.scale_rs(&name, size).await
    }

    async fn reconcile_old_rss(&mut self) -> Result<bool, Error> {
        let old_pods: i32 = self.old.iter().map(replicas).sum();
        if old_pods == 0 {
            return Ok(false);
        }
        let all_pods: i32 = self.all().iter().map(|rs| replicas(rs)).sum();
        let want = desired(&self.d);
        let (new_replicas, new_available) = self
            .new_rs
            .as_ref()
            .map_or((0, 0), |n| (replicas(n), available(n)));
        let max_down = rolling::max_scaled_down(
            all_pods,
            want,
            self.unavailable,
            new_replicas,
            new_available,
        );
        if max_down <= 0 {
            return Ok(false);
        }
        let mut old = self.old.clone();
        old.sort_by_key(|rs| rs.metadata.creation_timestamp.as_ref().map(|t| t.0));
        // First drop old pods that are not available anyway.
        let mut cleaned = 0;
        for rs in &old {
            if cleaned >= max_down {
                break;
            }
            let unhealthy = replicas(rs) - available(rs);
            if replicas(rs) == 0 || unhealthy <= 0 {
                continue;
            }
            let n = unhealthy.min(max_down - cleaned);
            let name = rs.metadata.name.clone().unwrap_or_default();
            self.scale_rs(&name, replicas(rs) - n).await?;
            cleaned += n;
        }
        // Then available ones, as far as the availability floor allows.
        let avail: i32 = self.all().iter().map(|rs| available(rs)).sum();
        let budget = rolling::scale_down_budget(avail, want, self.unavailable);
        let mut scaled = 0;
        let mut old = self.old.clone();
        old.sort_by_key(|rs| rs.metadata.creation_timestamp.as_ref().map(|t| t.0));
        for rs in &old {
            if scaled >= budget {
                break;
            }
            if replicas(rs) == 0 {
                continue;
            }
            let n = replicas(rs).min(budget - scaled);
            let name = rs.metadata.name.clone().unwrap_or_default();
            self.scale_rs(&name, replicas(rs) - n).await?;
            scaled += n;
        }
        Ok(cleaned + scaled > 0)
    }

    /// Upstream's `rolloutRecreate`: all old pods gone before any new one.
    async fn rollout_recreate(&mut self) -> Result<(), Error> {
        self.sync_revision(false).await?;
        let mut scaled_down = false;
        for rs in self.old.clone().iter().filter(|rs| replicas(rs) > 0) {
            scaled_down |= self
                .scale_rs(rs.metadata.name.as_deref().unwrap_or_default(), 0)
                .await?;
        }
        if scaled_down || self.old_pods_running().await? {
            return self.write_status(true).await;
        }
        if self.new_rs.is_none() {
            self.sync_revision(true).await?;
        }
        if let Some(name) = self.new_rs.as_ref().and_then(|n| n.metadata.name.clone()) {
            let want = desired(&self.d);
            self.scale_rs(&name, want).await?;
        }
        if progress::complete(&self.d, &self.d.status.clone().unwrap_or_default()) {
            self.cleanup().await?;
        }
        self.write_status(true).await
    }

    /// Whether any pod of an old ReplicaSet still exists in a non-terminal phase.
    async fn old_pods_running(&self) -> Result<bool, Error> {
        let uids: Vec<String> = self
            .old
            .iter()
            .filter_map(|rs| rs.metadata.uid.clone())
            .collect();
        if uids.is_empty() {
            return Ok(false);
        }
        let pods: Api<Pod> = Api::namespaced(
            self.client.clone(),
            self.d.metadata.namespace.as_deref().unwrap_or_default(),
        );
        Ok(pods
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .any(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                controller_ref(&p.metadata).is_some_and(|r| uids.contains(&r.uid))
                    && !matches!(phase, Some("Succeeded" | "Failed"))
            }))
    }

    /// Upstream's `cleanupDeployment`: keep revisionHistoryLimit old, empty ReplicaSets.
    async fn cleanup(&mut self) -> Result<(), Error> {
        let Some(limit) = self.d.spec.as_ref().and_then(|s| s.revision_history_limit) else {
            return Ok(());
        };
        let mut cleanable: Vec<ReplicaSet> = self
            .old
            .iter()
            .filter(|rs| rs.metadata.deletion_timestamp.is_none())
            .cloned()
            .collect();
        let diff = i64::try_from(cleanable.len()).unwrap_or(0) - i64::from(limit);
        if diff <= 0 {
            return Ok(());
        }
        cleanable.sort_by_key(|rs| rs.metadata.creation_timestamp.as_ref().map(|t| t.0));
        for rs in cleanable.iter().take(usize::try_from(diff).unwrap_or(0)) {
            let observed = rs
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if status_replicas(rs) != 0
                || replicas(rs) != 0
                || rs.metadata.generation.unwrap_or(0) > observed
            {
                continue;
            }
            let name = rs.metadata.name.clone().unwrap_or_default();
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: rs.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::background()
            };
            match self.api.delete(&name, &dp).await {
                Ok(_) => {
                    info!(deployment = %self.name(), replicaset = %name, "deleted old replica set beyond revisionHistoryLimit")
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Computes and writes status; `rollout` adds the Progressing logic
    /// (syncRolloutStatus) over plain syncDeploymentStatus.
    async fn write_status(&mut self, rollout: bool) -> Result<(), Error> {
        let all = self.all();
        let mut st = progress::calculate(&self.d, &all, self.new_rs.as_ref(), self.unavailable);
        if rollout {
            progress::rollout_conditions(&self.d, self.new_rs.as_ref(), &mut st);
        }
        // Unchanged: no write, as upstream's syncDeploymentStatus (an idle
        // cluster would otherwise patch every Deployment at every resync).
        if self.d.status.as_ref() == Some(&st) {
            return Ok(());
        }
        let api: Api<Deployment> = Api::namespaced(
            self.client.clone(),
            self.d.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let stored = {
            let mut s = self.d.clone();
            s.status = Some(st.clone());
            s
        };
        let patch = json!({"status": serde_json::to_value(&st).unwrap_or_default()});
        match crate::statusupdate::update(&api, &self.d, &patch).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        self.d = stored;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpl(image: &str, extra_label: Option<(&str, &str)>) -> PodTemplateSpec {
        let mut v = json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": image}]},
        });
        if let Some((k, val)) = extra_label {
            v["metadata"]["labels"][k] = json!(val);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn hash_is_stable_and_sensitive() {
        let a = pod_template_hash(&tmpl("nginx:1", None), None);
        assert_eq!(a, pod_template_hash(&tmpl("nginx:1", None), None));
        assert_ne!(a, pod_template_hash(&tmpl("nginx:2", None), None));
        assert_ne!(a, pod_template_hash(&tmpl("nginx:1", None), Some(1)));
        assert!(
            a.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{a}"
        );
        // Pinned so an accidental change of the hashed form is noticed: the
        // ReplicaSets of existing deployments would all be replaced.
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
    }

    #[test]
    fn empty_structs_do_not_matter() {
        let mut b = tmpl("nginx:1", None);
        if let Some(c) = b.spec.as_mut().and_then(|s| s.containers.first_mut()) {
            c.resources = Some(Default::default());
        }
        assert!(equal_ignore_hash(&tmpl("nginx:1", None), &b));
        assert_eq!(
            pod_template_hash(&tmpl("nginx:1", None), None),
            pod_template_hash(&b, None)
        );
    }

    #[test]
    fn equality_ignores_hash_label() {
        let a = tmpl("nginx:1", None);
        assert!(equal_ignore_hash(
            &a,
            &tmpl("nginx:1", Some((HASH_LABEL, "abc")))
        ));
        assert!(!equal_ignore_hash(
            &a,
            &tmpl("nginx:2", Some((HASH_LABEL, "abc")))
        ));
        assert!(!equal_ignore_hash(
            &a,
            &tmpl("nginx:1", Some(("tier", "fe")))
        ));
    }
}
