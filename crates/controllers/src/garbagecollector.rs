//! The garbage collector (upstream's `pkg/controller/garbagecollector`): deletes
//! dependents whose owners are gone, and carries out the `foregroundDeletion` and
//! `orphan` finalizers the API server records for `propagationPolicy`.
//!
//! It watches every listable resource (found by discovery) and keeps an
//! owner→dependents graph of object metadata keyed by uid. After a burst of
//! events it re-plans the objects those events touched (and everything on a
//! periodic resync): the decisions are pure functions
//! ([`decide_dependent`], [`decide_owner`]) and the plan is carried out through
//! the API with uid preconditions, so a stale graph never deletes the wrong object.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams, Preconditions};
use kube::discovery::{Scope, verbs};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::Error;

/// The finalizer that makes an owner wait for its blocking dependents.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer that makes the collector strip the owner's references from its dependents.
pub const ORPHAN: &str = "orphan";

/// How often discovery is re-run to pick up new resources (CRDs).
const REDISCOVERY: Duration = Duration::from_secs(30);
/// A full re-plan even without events, so failed actions are retried.
const RESYNC: Duration = Duration::from_secs(10);

/// A resource type as owner references name it: API group and kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TypeKey {
    pub group: String,
    pub kind: String,
}

impl TypeKey {
    pub fn new(group: &str, kind: &str) -> Self {
        TypeKey {
            group: group.to_string(),
            kind: kind.to_string(),
        }
    }

    /// The type an owner reference points to (`apps/v1` → group `apps`, `v1` → core).
    pub fn of_ref(r: &OwnerReference) -> Self {
        let group = r.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        TypeKey::new(group, &r.kind)
    }
}

/// One object in the graph: just what garbage collection needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub uid: String,
    pub ty: TypeKey,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
    pub owners: Vec<OwnerReference>,
    pub finalizers: Vec<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl Node {
    fn from_object(ty: &TypeKey, obj: &DynamicObject) -> Option<Node> {
        let m = &obj.metadata;
        Some(Node {
            uid: m.uid.clone()?,
            ty: ty.clone(),
            namespace: m.namespace.clone(),
            name: m.name.clone()?,
            owners: m.owner_references.clone().unwrap_or_default(),
            finalizers: m.finalizers.clone().unwrap_or_default(),
            deleting: m.deletion_timestamp.is_some(),
        })
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().any(|x| x == f)
    }
}

/// What an owner reference resolves to (upstream's solid / dangling /
/// waitingForDependentsDeletion classification).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerState {
    /// The owner exists and is not being deleted in the foreground.
    Solid,
    /// The owner exists, is being deleted and carries `foregroundDeletion`.
    Waiting,
    /// No object of that type, namespace and name has that uid.
    Dangling,
    /// A cluster-scoped dependent naming a namespaced owner: upstream never
    /// collects such a dependent, so it counts as held.
    Unresolvable,
}

impl OwnerState {
    fn of_owner(owner: &Node) -> Self {
        if owner.deleting && owner.has_finalizer(FOREGROUND) {
            OwnerState::Waiting
        } else {
            OwnerState::Solid
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Background,
    Foreground,
    Orphan,
}

/// What to do with a dependent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DependentAction {
    /// Remove the references to these owner uids (the dependent has another live owner).
    RemoveRefs(Vec<String>),
    /// Set `blockOwnerDeletion: false` on the references to these uids (so the
    /// waiting owners are not blocked by this dependent's own foreground
    /// deletion), then delete the dependent with the policy.
    Delete {
        unblock: Vec<String>,
        policy: Policy,
    },
}

/// What to do with an owner under deletion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnerAction {
    /// Remove the owner's reference from these dependents (uids), then the `orphan` finalizer.
    Orphan(Vec<String>),
    /// Remove this finalizer: its work is done.
    RemoveFinalizer(&'static str),
    /// Foreground deletion still waits for these blocking dependents (uids).
    Wait(Vec<String>),
}

/// Resolves an owner reference against the graph alone. `None`: the owner is not
/// in the graph (or not where the dependent says), so only a live read can tell.
/// `namespaced` says whether a type is namespaced (`None`: unknown type).
pub fn resolve_in_graph(
    graph: &HashMap<String, Node>,
    dependent: &Node,
    r: &OwnerReference,
    namespaced: impl Fn(&TypeKey) -> Option<bool>,
) -> Option<OwnerState> {
    let owner_namespaced = namespaced(&TypeKey::of_ref(r))?;
    if owner_namespaced && dependent.namespace.is_none() {
        return Some(OwnerState::Unresolvable);
    }
    let owner = graph.get(&r.uid)?;
    // A namespaced owner must live in the dependent's namespace; if it is elsewhere,
    // the reference is verified (and found absent) by a live read.
    if owner.name != r.name || (owner_namespaced && owner.namespace != dependent.namespace) {
        return None;
    }
    Some(OwnerState::of_owner(owner))
}

/// Decides a dependent's fate from the states of its owner references (same
/// order as `dep.owners`), as upstream's attemptToDeleteItem.
pub fn decide_dependent(
    dep: &Node,
    states: &[OwnerState],
    has_dependents: bool,
) -> Option<DependentAction> {
    if dep.deleting || dep.owners.is_empty() || states.len() != dep.owners.len() {
        return None;
    }
    let uids_where = |f: &dyn Fn(OwnerState, &OwnerReference) -> bool| -> Vec<String> {
        dep.owners
            .iter()
            .zip(states)
            .filter(|(r, s)| f(**s, r))
            .map(|(r, _)| r.uid.clone())
            .collect()
    };
    let solid = states
        .iter()
        .any(|s| matches!(s, OwnerState::Solid | OwnerState::Unresolvable));
    if solid {
        // Another owner keeps it: drop only the references to dead or
        // foreground-deleting owners, so those are not held up by it.
        let gone = uids_where(&|s, _| matches!(s, OwnerState::Dangling | OwnerState::Waiting));
        return (!gone.is_empty()).then_some(DependentAction::RemoveRefs(gone));
    }
    let waiting_any = states.contains(&OwnerState::Waiting);
    if waiting_any && has_dependents {
        // Delete it in the foreground so its own dependents go first, without
        // making the waiting owner wait on that whole subtree twice.
        let unblock =
            uids_where(&|s, r| s == OwnerState::Waiting && r.block_owner_deletion == Some(true));
        return Some(DependentAction::Delete {
            unblock,
            policy: Policy::Foreground,
        });
    }
    let policy = if dep.has_finalizer(ORPHAN) {
        Policy::Orphan
    } else if dep.has_finalizer(FOREGROUND) {
        Policy::Foreground
    } else {
        Policy::Background
    };
    Some(DependentAction::Delete {
        unblock: Vec::new(),
        policy,
    })
}

/// Decides what an owner under deletion still needs (orphan first, then foreground).
pub fn decide_owner(owner: &Node, dependents: &[&Node]) -> Option<OwnerAction> {
    if !owner.deleting {
        return None;
    }
    if owner.has_finalizer(ORPHAN) {
        let refs: Vec<String> = dependents
            .iter()
            .filter(|d| d.owners.iter().any(|r| r.uid == owner.uid))
            .map(|d| d.uid.clone())
            .collect();
        return Some(if refs.is_empty() {
            OwnerAction::RemoveFinalizer(ORPHAN)
        } else {
            OwnerAction::Orphan(refs)
        });
    }
    if owner.has_finalizer(FOREGROUND) {
        let blocking: Vec<String> = dependents
            .iter()
            .filter(|d| {
                d.owners
                    .iter()
                    .any(|r| r.uid == owner.uid && r.block_owner_deletion == Some(true))
            })
            .map(|d| d.uid.clone())
            .collect();
        return Some(if blocking.is_empty() {
            OwnerAction::RemoveFinalizer(FOREGROUND)
        } else {
            OwnerAction::Wait(blocking)
        });
    }
    None
}

/// The objects by uid, with the owner→dependents index kept up to date.
#[derive(Default)]
pub struct Graph {
    pub nodes: HashMap<String, Node>,
    /// owner uid → uids of the objects that reference it.
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    /// Inserts or replaces a node; returns the uids whose decisions may have
    /// changed (the node, its old and new owners, and its dependents).
    pub fn upsert(&mut self, n: Node) -> Vec<String> {
        let mut touched = self.remove(&n.uid);
        for r in &n.owners {
            self.dependents
                .entry(r.uid.clone())
                .or_default()
                .insert(n.uid.clone());
            touched.push(r.uid.clone());
        }
        touched.push(n.uid.clone());
        self.nodes.insert(n.uid.clone(), n);
        touched
    }

    /// Removes a node; returns its owners' and dependents' uids.
    pub fn remove(&mut self, uid: &str) -> Vec<String> {
        let mut touched: Vec<String> = self.dependents_of(uid).cloned().collect();
        if let Some(old) = self.nodes.remove(uid) {
            for r in &old.owners {
                if let Some(set) = self.dependents.get_mut(&r.uid) {
                    set.remove(uid);
                    if set.is_empty() {
                        self.dependents.remove(&r.uid);
                    }
                }
                touched.push(r.uid.clone());
            }
        }
        touched
    }

    pub fn dependents_of(&self, uid: &str) -> impl Iterator<Item = &String> {
        self.dependents.get(uid).into_iter().flatten()
    }

    pub fn has_dependents(&self, uid: &str) -> bool {
        self.dependents_of(uid).any(|d| self.nodes.contains_key(d))
    }
}

/// A watched resource type.
#[derive(Clone)]
struct Resource {
    ar: ApiResource,
    namespaced: bool,
}

enum Msg {
    Event(TypeKey, watcher::Event<DynamicObject>),
}

struct Gc {
    client: kube::Client,
    types: HashMap<TypeKey, Resource>,
    graph: Graph,
    /// Uids whose decisions must be re-made on the next pass.
    dirty: HashSet<String>,
    /// Uids seen during a resource's current initial list (to drop vanished ones at InitDone).
    relisting: HashMap<TypeKey, HashSet<String>>,
    /// Resource types whose initial list has completed.
    synced: HashSet<TypeKey>,
    /// Owner uids verified absent; uids are never reused, so this stays true.
    absent: HashSet<String>,
    tx: mpsc::UnboundedSender<Msg>,
}

/// Runs the garbage collector until the process ends.
pub async fn run(client: kube::Client) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut gc = Gc {
        client,
        types: HashMap::new(),
        graph: Graph::default(),
        dirty: HashSet::new(),
        relisting: HashMap::new(),
        synced: HashSet::new(),
        absent: HashSet::new(),
        tx,
    };
    let mut rediscover = tokio::time::interval(REDISCOVERY);
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        tokio::select! {
            _ = rediscover.tick() => {
                if let Err(e) = gc.discover().await {
                    warn!(error = %e, "garbage collector discovery failed");
                }
            }
            // Everything again now and then: retries failed actions.
            _ = resync.tick() => gc.dirty.extend(gc.graph.nodes.keys().cloned()),
            msg = rx.recv() => {
                let Some(msg) = msg else { return };
                gc.apply(msg);
                // Take the whole burst before planning once.
                while let Ok(m) = rx.try_recv() {
                    gc.apply(m);
                }
            }
        }
        if !gc.dirty.is_empty() && gc.is_synced() {
            gc.pass().await;
        }
    }
}

impl Gc {
    fn is_synced(&self) -> bool {
        !self.types.is_empty() && self.types.keys().all(|t| self.synced.contains(t))
    }

    /// Starts a watcher for every listable, watchable resource not yet watched.
    async fn discover(&mut self) -> Result<(), Error> {
        let found = crate::discovery::run(&self.client)
            .await
            .map_err(|e| Error::Discovery(e.to_string()))?;
        if !found.failed.is_empty() {
            warn!(groups = ?found.failed, "garbage collector: some API groups did not answer discovery");
        }
        let discovery = found.discovery;
        for group in discovery.groups() {
            for (ar, caps) in group.recommended_resources() {
                if !caps.supports_operation(verbs::LIST) || !caps.supports_operation(verbs::WATCH) {
                    continue;
                }
                // Upstream's default ignoredResources: events are never owners worth tracking.
                if ar.plural == "events" && (ar.group.is_empty() || ar.group == "events.k8s.io") {
                    continue;
                }
                let ty = TypeKey::new(&ar.group, &ar.kind);
                if self.types.contains_key(&ty) {
                    continue;
                }
                let res = Resource {
                    ar: ar.clone(),
                    namespaced: caps.scope == Scope::Namespaced,
                };
                self.types.insert(ty.clone(), res);
                let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
                let tx = self.tx.clone();
                debug!(resource = %ar.plural, group = %ar.group, "garbage collector watching");
                tokio::spawn(async move {
                    let mut stream = watcher(api, berth_runtime::reflect::informer_config())
                        .default_backoff()
                        .boxed();
                    while let Some(ev) = stream.next().await {
                        match ev {
                            Ok(ev) => {
                                if tx.send(Msg::Event(ty.clone(), ev)).is_err() {
                                    return;
                                }
                            }
                            Err(e) => debug!(error = %e, "garbage collector watch error"),
                        }
                    }
                });
            }
        }
        Ok(())
    }

    fn apply(&mut self, msg: Msg) {
        let Msg::Event(ty, ev) = msg;
        match ev {
            watcher::Event::Init => {
                self.relisting.insert(ty, HashSet::new());
            }
            watcher::Event::InitApply(obj) => {
                if let Some(n) = Node::from_object(&ty, &obj) {
                    self.relisting.entry(ty).or_default().insert(n.uid.clone());
                    let touched = self.graph.upsert(n);
                    self.dirty.extend(touched);
                }
            }
            watcher::Event::InitDone => {
                let seen = self.relisting.remove(&ty).unwrap_or_default();
                let vanished: Vec<String> = self
                    .graph
                    .nodes
                    .values()
                    .filter(|n| n.ty == ty && !seen.contains(&n.uid))
                    .map(|n| n.uid.clone())
                    .collect();
                for uid in vanished {
                    let touched = self.graph.remove(&uid);
                    self.dirty.extend(touched);
                }
                self.synced.insert(ty);
            }
            watcher::Event::Apply(obj) => {
                if let Some(n) = Node::from_object(&ty, &obj) {
                    let touched = self.graph.upsert(n);
                    self.dirty.extend(touched);
                }
            }
            watcher::Event::Delete(obj) => {
                if let Some(uid) = &obj.metadata.uid {
                    let touched = self.graph.remove(uid);
                    self.dirty.extend(touched);
                }
            }
        }
    }

    /// One planning pass over the dirty nodes; failures are logged and retried
    /// on the next resync.
    async fn pass(&mut self) {
        let nodes: Vec<Node> = std::mem::take(&mut self.dirty)
            .iter()
            .filter_map(|uid| self.graph.nodes.get(uid).cloned())
            .collect();
        // Owners under deletion first: orphaning must strip references before the
        // dependents could be judged against a vanished owner.
        for owner in nodes.iter().filter(|n| n.deleting) {
            let deps: Vec<Node> = self
                .graph
                .dependents_of(&owner.uid)
                .filter_map(|d| self.graph.nodes.get(d).cloned())
                .collect();
            let deps: Vec<&Node> = deps.iter().collect();
            if let Some(action) = decide_owner(owner, &deps)
                && let Err(e) = self.do_owner(owner, &deps, action).await
            {
                warn!(error = %e, owner = %owner.name, "garbage collector owner action failed");
            }
        }
        for dep in nodes.iter().filter(|n| !n.owners.is_empty() && !n.deleting) {
            let mut states = Vec::with_capacity(dep.owners.len());
            for r in &dep.owners {
                match self.resolve(dep, r).await {
                    Ok(Some(s)) => states.push(s),
                    Ok(None) => break,
                    Err(e) => {
                        debug!(error = %e, "garbage collector owner lookup failed");
                        break;
                    }
                }
            }
            let Some(action) = decide_dependent(dep, &states, self.graph.has_dependents(&dep.uid))
            else {
                continue;
            };
            if let Err(e) = self.do_dependent(dep, action).await {
                warn!(error = %e, dependent = %dep.name, "garbage collector dependent action failed");
            }
        }
    }

    /// Resolves an owner reference: from the graph, else by a live read by
    /// type, namespace and name compared by uid. `None`: unknown type.
    async fn resolve(
        &mut self,
        dep: &Node,
        r: &OwnerReference,
    ) -> Result<Option<OwnerState>, Error> {
        if self.absent.contains(&r.uid) {
            return Ok(Some(OwnerState::Dangling));
        }
        let types = &self.types;
        if let Some(s) = resolve_in_graph(&self.graph.nodes, dep, r, |t| {
            types.get(t).map(|res| res.namespaced)
        }) {
            return Ok(Some(s));
        }
        let Some(res) = self.types.get(&TypeKey::of_ref(r)) else {
            return Ok(None);
        };
        let api = self.api(res, dep.namespace.as_deref());
        let live = api.get_opt(&r.name).await?;
        match live
            .as_ref()
            .and_then(|o| Node::from_object(&TypeKey::of_ref(r), o))
        {
            Some(owner) if owner.uid == r.uid => Ok(Some(OwnerState::of_owner(&owner))),
            _ => {
                if self.absent.len() > 100_000 {
                    self.absent.clear();
                }
                self.absent.insert(r.uid.clone());
                Ok(Some(OwnerState::Dangling))
            }
        }
    }

    fn api(&self, res: &Resource, ns: Option<&str>) -> Api<DynamicObject> {
        match (res.namespaced, ns) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &res.ar),
            _ => Api::all_with(self.client.clone(), &res.ar),
        }
    }

    fn api_for(&self, n: &Node) -> Option<Api<DynamicObject>> {
        self.types
            .get(&n.ty)
            .map(|res| self.api(res, n.namespace.as_deref()))
    }

    async fn do_dependent(&self, dep: &Node, action: DependentAction) -> Result<(), Error> {
        let Some(api) = self.api_for(dep) else {
            return Ok(());
        };
        match action {
            DependentAction::RemoveRefs(uids) => {
                info!(dependent = %dep.name, owners = ?uids, "removing dangling owner references");
                self.update_meta(&api, dep, |m| {
                    if let Some(refs) = m.owner_references.as_mut() {
                        refs.retain(|r| !uids.contains(&r.uid));
                    }
                })
                .await
            }
            DependentAction::Delete { unblock, policy } => {
                if !unblock.is_empty() {
                    self.update_meta(&api, dep, |m| {
                        for r in m.owner_references.iter_mut().flatten() {
                            if unblock.contains(&r.uid) {
                                r.block_owner_deletion = Some(false);
                            }
                        }
                    })
                    .await?;
                }
                info!(kind = %dep.ty.kind, namespace = ?dep.namespace, name = %dep.name, ?policy, "garbage collecting");
                let dp = match policy {
                    Policy::Background => DeleteParams::background(),
                    Policy::Foreground => DeleteParams::foreground(),
                    Policy::Orphan => DeleteParams::orphan(),
                }
                .preconditions(Preconditions {
                    uid: Some(dep.uid.clone()),
                    resource_version: None,
                });
                match api.delete(&dep.name, &dp).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    async fn do_owner(
        &self,
        owner: &Node,
        deps: &[&Node],
        action: OwnerAction,
    ) -> Result<(), Error> {
        let Some(api) = self.api_for(owner) else {
            return Ok(());
        };
        match action {
            OwnerAction::Wait(_) => Ok(()),
            OwnerAction::RemoveFinalizer(f) => {
                info!(kind = %owner.ty.kind, name = %owner.name, finalizer = f, "removing finalizer");
                self.update_meta(&api, owner, |m| {
                    if let Some(fs) = m.finalizers.as_mut() {
                        fs.retain(|x| x != f);
                    }
                })
                .await
            }
            OwnerAction::Orphan(uids) => {
                for dep in deps.iter().filter(|d| uids.contains(&d.uid)) {
                    let Some(dapi) = self.api_for(dep) else {
                        continue;
                    };
                    info!(dependent = %dep.name, owner = %owner.name, "orphaning dependent");
                    self.update_meta(&dapi, dep, |m| {
                        if let Some(refs) = m.owner_references.as_mut() {
                            refs.retain(|r| r.uid != owner.uid);
                        }
                    })
                    .await?;
                }
                // Dependents changed through the API; the finalizer goes on the next
                // pass, once the graph shows no reference left.
                Ok(())
            }
        }
    }

    /// Read-modify-write of an object's metadata, guarded by its uid and
    /// resourceVersion (a conflict is retried on the next pass).
    async fn update_meta(
        &self,
        api: &Api<DynamicObject>,
        n: &Node,
        f: impl Fn(&mut kube::api::ObjectMeta),
    ) -> Result<(), Error> {
        let Some(mut obj) = api.get_opt(&n.name).await? else {
            return Ok(());
        };
        if obj.metadata.uid.as_deref() != Some(n.uid.as_str()) {
            return Ok(());
        }
        f(&mut obj.metadata);
        if obj
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(Vec::is_empty)
        {
            obj.metadata.owner_references = None;
        }
        if obj.metadata.finalizers.as_ref().is_some_and(Vec::is_empty) {
            obj.metadata.finalizers = None;
        }
        match api.replace(&n.name, &PostParams::default(), &obj).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oref(uid: &str, kind: &str, name: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: if kind == "Deployment" {
                "apps/v1"
            } else {
                "v1"
            }
            .into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            block_owner_deletion: block.then_some(true),
            controller: None,
        }
    }

    fn node(uid: &str, kind: &str, ns: Option<&str>, owners: Vec<OwnerReference>) -> Node {
        let group = if kind == "Deployment" { "apps" } else { "" };
        Node {
            uid: uid.into(),
            ty: TypeKey::new(group, kind),
            namespace: ns.map(String::from),
            name: uid.into(),
            owners,
            finalizers: vec![],
            deleting: false,
        }
    }

    fn deleting(mut n: Node, finalizers: &[&str]) -> Node {
        n.deleting = true;
        n.finalizers = finalizers.iter().map(|s| s.to_string()).collect();
        n
    }

    use OwnerState::*;

    #[test]
    fn dependent_decisions() {
        let one = node(
            "d",
            "ConfigMap",
            Some("ns"),
            vec![oref("o1", "ConfigMap", "o1", false)],
        );
        let two = node(
            "d",
            "ConfigMap",
            Some("ns"),
            vec![
                oref("o1", "ConfigMap", "o1", true),
                oref("o2", "ConfigMap", "o2", false),
            ],
        );
        let bg = Some(DependentAction::Delete {
            unblock: vec![],
            policy: Policy::Background,
        });
        let mut with_orphan = one.clone();
        with_orphan.finalizers = vec![ORPHAN.into()];
        // (case, dependent, owner states, has dependents of its own, expected)
        type Case<'a> = (
            &'a str,
            &'a Node,
            Vec<OwnerState>,
            bool,
            Option<DependentAction>,
        );
        let cases: Vec<Case> = vec![
            ("owner alive", &one, vec![Solid], false, None),
            ("owner gone", &one, vec![Dangling], false, bg.clone()),
            (
                "owner foreground-deleting",
                &one,
                vec![Waiting],
                false,
                bg.clone(),
            ),
            (
                "foreground owner, dependent has its own dependents",
                &two,
                vec![Waiting, Dangling],
                true,
                Some(DependentAction::Delete {
                    unblock: vec!["o1".into()],
                    policy: Policy::Foreground,
                }),
            ),
            (
                "one owner gone, another alive: drop the dead reference",
                &two,
                vec![Dangling, Solid],
                false,
                Some(DependentAction::RemoveRefs(vec!["o1".into()])),
            ),
            (
                "waiting owner and live owner: drop the waiting reference",
                &two,
                vec![Waiting, Solid],
                false,
                Some(DependentAction::RemoveRefs(vec!["o1".into()])),
            ),
            ("both alive", &two, vec![Solid, Solid], false, None),
            (
                "both gone",
                &two,
                vec![Dangling, Dangling],
                false,
                bg.clone(),
            ),
            (
                "unresolvable counts as held",
                &one,
                vec![Unresolvable],
                false,
                None,
            ),
            (
                "dependent's own orphan finalizer kept",
                &with_orphan,
                vec![Dangling],
                false,
                Some(DependentAction::Delete {
                    unblock: vec![],
                    policy: Policy::Orphan,
                }),
            ),
            ("unresolved owner: wait", &two, vec![Dangling], false, None),
        ];
        for (name, dep, states, has_deps, want) in cases {
            assert_eq!(decide_dependent(dep, &states, has_deps), want, "{name}");
        }
        let gone = deleting(one.clone(), &[]);
        assert_eq!(
            decide_dependent(&gone, &[Dangling], false),
            None,
            "already deleting"
        );
    }

    #[test]
    fn owner_decisions() {
        let owner = node("o", "ConfigMap", Some("ns"), vec![]);
        let blocking = node(
            "b",
            "Secret",
            Some("ns"),
            vec![oref("o", "ConfigMap", "o", true)],
        );
        let plain = node(
            "p",
            "ConfigMap",
            Some("ns"),
            vec![oref("o", "ConfigMap", "o", false)],
        );
        let other = node(
            "x",
            "ConfigMap",
            Some("ns"),
            vec![oref("z", "ConfigMap", "z", true)],
        );
        let fg = deleting(owner.clone(), &[FOREGROUND]);
        let orph = deleting(owner.clone(), &[ORPHAN]);
        let both = deleting(owner.clone(), &[ORPHAN, FOREGROUND]);
        let plain_del = deleting(owner.clone(), &["example.com/x"]);
        let cases: Vec<(&str, &Node, Vec<&Node>, Option<OwnerAction>)> = vec![
            ("not deleting", &owner, vec![&blocking], None),
            (
                "foreground waits for blocking dependents",
                &fg,
                vec![&blocking, &plain],
                Some(OwnerAction::Wait(vec!["b".into()])),
            ),
            (
                "foreground with only non-blocking dependents finishes",
                &fg,
                vec![&plain, &other],
                Some(OwnerAction::RemoveFinalizer(FOREGROUND)),
            ),
            (
                "foreground without dependents finishes",
                &fg,
                vec![],
                Some(OwnerAction::RemoveFinalizer(FOREGROUND)),
            ),
            (
                "orphan strips references",
                &orph,
                vec![&blocking, &plain, &other],
                Some(OwnerAction::Orphan(vec!["b".into(), "p".into()])),
            ),
            (
                "orphan done",
                &orph,
                vec![&other],
                Some(OwnerAction::RemoveFinalizer(ORPHAN)),
            ),
            (
                "orphan before foreground",
                &both,
                vec![],
                Some(OwnerAction::RemoveFinalizer(ORPHAN)),
            ),
            (
                "other finalizers are not ours",
                &plain_del,
                vec![&plain],
                None,
            ),
        ];
        for (name, o, deps, want) in cases {
            assert_eq!(decide_owner(o, &deps), want, "{name}");
        }
    }

    #[test]
    fn graph_resolution() {
        let mut graph = HashMap::new();
        let cm = node("o1", "ConfigMap", Some("ns"), vec![]);
        let other_ns = node("o2", "ConfigMap", Some("elsewhere"), vec![]);
        let ns_owner = node("n1", "Namespace", None, vec![]);
        let fg = deleting(node("o3", "ConfigMap", Some("ns"), vec![]), &[FOREGROUND]);
        for n in [cm, other_ns, ns_owner, fg] {
            graph.insert(n.uid.clone(), n);
        }
        let scope = |t: &TypeKey| match t.kind.as_str() {
            "ConfigMap" | "Secret" => Some(true),
            "Namespace" => Some(false),
            _ => None,
        };
        let dep = node("d", "Secret", Some("ns"), vec![]);
        let cluster_dep = node("c", "Namespace", None, vec![]);
        let cases: Vec<(&str, &Node, OwnerReference, Option<OwnerState>)> = vec![
            (
                "same namespace",
                &dep,
                oref("o1", "ConfigMap", "o1", false),
                Some(Solid),
            ),
            (
                "foreground owner",
                &dep,
                oref("o3", "ConfigMap", "o3", false),
                Some(Waiting),
            ),
            (
                "cross-namespace: verify live",
                &dep,
                oref("o2", "ConfigMap", "o2", false),
                None,
            ),
            (
                "not in graph: verify live",
                &dep,
                oref("zz", "ConfigMap", "zz", false),
                None,
            ),
            (
                "name mismatch: verify live",
                &dep,
                oref("o1", "ConfigMap", "other", false),
                None,
            ),
            (
                "cluster-scoped owner",
                &dep,
                oref("n1", "Namespace", "n1", false),
                Some(Solid),
            ),
            (
                "cluster-scoped dependent, namespaced owner",
                &cluster_dep,
                oref("o1", "ConfigMap", "o1", false),
                Some(Unresolvable),
            ),
            (
                "unknown kind",
                &dep,
                oref("o1", "Widget", "o1", false),
                None,
            ),
        ];
        for (name, d, r, want) in cases {
            assert_eq!(resolve_in_graph(&graph, d, &r, scope), want, "{name}");
        }
    }

    #[test]
    fn type_of_ref() {
        assert_eq!(
            TypeKey::of_ref(&oref("u", "Deployment", "d", false)),
            TypeKey::new("apps", "Deployment")
        );
        assert_eq!(
            TypeKey::of_ref(&oref("u", "ConfigMap", "d", false)),
            TypeKey::new("", "ConfigMap")
        );
    }

    #[test]
    fn index_of_dependents() {
        let mut graph = Graph::default();
        let a = node(
            "a",
            "ConfigMap",
            Some("ns"),
            vec![oref("o", "ConfigMap", "o", false)],
        );
        let b = node(
            "b",
            "Secret",
            Some("ns"),
            vec![
                oref("o", "ConfigMap", "o", false),
                oref("p", "ConfigMap", "p", false),
            ],
        );
        let sorted = |g: &Graph, uid: &str| {
            let mut v: Vec<String> = g.dependents_of(uid).cloned().collect();
            v.sort();
            v
        };
        graph.upsert(a.clone());
        let mut touched = graph.upsert(b.clone());
        touched.sort();
        assert_eq!(touched, vec!["b", "o", "p"]);
        assert_eq!(sorted(&graph, "o"), vec!["a", "b"]);
        assert_eq!(sorted(&graph, "p"), vec!["b"]);
        assert!(graph.has_dependents("o") && !graph.has_dependents("a"));
        // Re-pointing b drops it from p's dependents; p is still touched.
        let mut b2 = b.clone();
        b2.owners.truncate(1);
        let mut touched = graph.upsert(b2);
        touched.sort();
        touched.dedup();
        assert_eq!(touched, vec!["b", "o", "p"]);
        assert!(sorted(&graph, "p").is_empty());
        // An owner's deletion touches its dependents.
        graph.upsert(node("o", "ConfigMap", Some("ns"), vec![]));
        let mut touched = graph.remove("o");
        touched.sort();
        assert_eq!(touched, vec!["a", "b"]);
        // Removing a dependent touches its owner.
        assert_eq!(graph.remove("a"), vec!["o".to_string()]);
        assert_eq!(sorted(&graph, "o"), vec!["b"]);
    }
}
