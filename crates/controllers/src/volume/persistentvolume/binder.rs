//! The binder's decisions (upstream's `syncClaim`, `syncUnboundClaim`,
//! `syncBoundClaim`, `syncVolume`, `bind`, `unbindVolume`,
//! `assignDefaultStorageClass`, `provisionClaim` for external provisioners):
//! pure functions from the cached objects to a [`Plan`] — the objects as they
//! should be written, the events to emit — that the loop in `mod.rs` carries out.

use std::collections::{BTreeMap, BTreeSet};

use berth_api::quantity::Quantity;
use berth_api::storage::{
    self, ANN_BETA_STORAGE_CLASS, ANN_BETA_STORAGE_PROVISIONER, ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED, ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
};
use berth_runtime::events::EventType;
use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus,
    PersistentVolumeStatus,
};
use k8s_openapi::api::storage::v1::StorageClass;

use super::reclaim;

pub const CLAIM_PENDING: &str = "Pending";
pub const CLAIM_BOUND: &str = "Bound";
pub const CLAIM_LOST: &str = "Lost";
pub const VOLUME_AVAILABLE: &str = "Available";
pub const VOLUME_BOUND: &str = "Bound";
pub const VOLUME_RELEASED: &str = "Released";
pub const VOLUME_FAILED: &str = "Failed";

/// Which of the two objects an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    Claim,
    Volume,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub on: On,
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
}

impl Event {
    pub fn new(on: On, type_: EventType, reason: &'static str, message: impl Into<String>) -> Self {
        Event {
            on,
            type_,
            reason,
            message: message.into(),
        }
    }
}

/// What one sync wants done. `volume`/`claim` are the objects as they should
/// be after the sync (None: leave it alone); the loop writes the volume
/// first (metadata and spec, then status) and the claim second, upstream's
/// order in `bind`, and emits `events` once the writes succeeded.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    pub volume: Option<PersistentVolume>,
    pub claim: Option<PersistentVolumeClaim>,
    pub events: Vec<Event>,
    /// Sync the volume's claim soon (upstream's `claimQueue.Add` in syncVolume).
    pub enqueue_claim: bool,
    /// The sync failed; the resync tries again (upstream returns the error).
    pub error: Option<String>,
}

impl Plan {
    fn event(mut self, e: Event) -> Self {
        self.events.push(e);
        self
    }
    fn error(mut self, e: impl Into<String>) -> Self {
        self.error = Some(e.into());
        self
    }
}

/// The storage classes the controller knows.
#[derive(Debug, Default, Clone, Copy)]
pub struct Classes<'a> {
    pub all: &'a [&'a StorageClass],
}

impl<'a> Classes<'a> {
    pub fn get(&self, name: &str) -> Option<&'a StorageClass> {
        self.all
            .iter()
            .copied()
            .find(|c| c.metadata.name.as_deref() == Some(name))
    }

    /// Upstream's `util.GetDefaultClass`: among several defaults the newest
    /// wins (then the name, for a stable choice).
    pub fn default_class(&self) -> Option<&'a StorageClass> {
        self.all
            .iter()
            .copied()
            .filter(|c| storage::is_default_class(c))
            .max_by(|a, b| {
                let created = |c: &StorageClass| c.metadata.creation_timestamp.clone().map(|t| t.0);
                created(a)
                    .cmp(&created(b))
                    .then_with(|| b.metadata.name.cmp(&a.metadata.name))
            })
    }
}

/// Everything a claim's sync reads besides the claim.
#[derive(Debug, Clone, Copy)]
pub struct ClaimWorld<'a> {
    pub volumes: &'a [&'a PersistentVolume],
    pub classes: Classes<'a>,
    /// Names of the claim's non-terminated pods that are not scheduled yet
    /// (upstream's `findNonScheduledPodsByPVC`), sorted.
    pub unscheduled_pods: &'a [String],
}

fn ann<'a>(a: &'a Option<BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    a.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

fn set_ann(a: &mut Option<BTreeMap<String, String>>, key: &str, value: &str) {
    a.get_or_insert_with(BTreeMap::new)
        .insert(key.to_string(), value.to_string());
}

fn claim_key(c: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default()
    )
}

fn claim_ref_key(r: &ObjectReference) -> String {
    format!(
        "{}/{}",
        r.namespace.as_deref().unwrap_or_default(),
        r.name.as_deref().unwrap_or_default()
    )
}

fn volume_name_of(c: &PersistentVolumeClaim) -> &str {
    c.spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

fn claim_phase(c: &PersistentVolumeClaim) -> &str {
    c.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

pub fn volume_phase(v: &PersistentVolume) -> &str {
    v.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

fn claim_ref(v: &PersistentVolume) -> Option<&ObjectReference> {
    v.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
}

fn claim_ref_uid(r: &ObjectReference) -> &str {
    r.uid.as_deref().unwrap_or_default()
}

/// Go's `%q` of a string, as upstream's messages quote names.
fn q(s: &str) -> String {
    format!("{s:?}")
}

/// Upstream's `IsDelayBindingMode`: the claim's class binds on first
/// consumer. A missing class is not delayed (provisioning reports it).
pub fn is_delay_binding(claim: &PersistentVolumeClaim, classes: Classes) -> Result<bool, String> {
    let name = storage::claim_class(claim);
    if name.is_empty() {
        return Ok(false);
    }
    let Some(class) = classes.get(&name) else {
        return Ok(false);
    };
    match class.volume_binding_mode.as_deref() {
        None => Err(format!(
            "VolumeBindingMode not set for StorageClass {}",
            q(&name)
        )),
        Some(mode) => Ok(mode == "WaitForFirstConsumer"),
    }
}

/// The claim names a class, in the beta annotation or `storageClassName`
/// (upstream's `PersistentVolumeClaimHasClass`): `""` is a class ("none").
fn claim_has_class(claim: &PersistentVolumeClaim) -> bool {
    ann(&claim.metadata.annotations, ANN_BETA_STORAGE_CLASS).is_some()
        || claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_ref())
            .is_some()
}

/// Upstream's `checkVolumeSatisfyClaim` for a claim that names its volume.
pub fn check_volume_satisfy_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Result<(), String> {
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    if volume.metadata.deletion_timestamp.is_some() {
        return Err(format!("the volume is marked for deletion {}", q(name)));
    }
    let requested = storage::claim_request(claim).unwrap_or_else(Quantity::zero);
    let capacity = storage::volume_capacity(volume).unwrap_or_else(Quantity::zero);
    if capacity < requested {
        return Err("requested PV is too small".into());
    }
    if storage::volume_class(volume) != storage::claim_class(claim) {
        return Err("storageClassName does not match".into());
    }
    if storage::volume_mode_mismatch(claim, volume) {
        return Err("incompatible volumeMode".into());
    }
    if !storage::check_access_modes(claim, volume) {
        return Err("incompatible accessMode".into());
    }
    Ok(())
}

/// Upstream's `updateClaimStatus`: the phase, and the volume's access modes
/// and capacity (the capacity only as the claim becomes Bound: a later
/// difference may mean a filesystem resize and is kept).
pub fn claim_with_status(
    claim: &PersistentVolumeClaim,
    phase: &str,
    volume: Option<&PersistentVolume>,
) -> Result<PersistentVolumeClaim, String> {
    let mut c = claim.clone();
    let status = c
        .status
        .get_or_insert_with(PersistentVolumeClaimStatus::default);
    let entering = status.phase.as_deref() != Some(phase);
    status.phase = Some(phase.to_string());
    match volume {
        None => {
            status.access_modes = None;
            status.capacity = None;
        }
        Some(v) => {
            status.access_modes = v.spec.as_ref().and_then(|s| s.access_modes.clone());
            if entering {
                let Some(cap) = storage::volume_capacity(v) else {
                    return Err(format!(
                        "PersistentVolume {} is without a storage capacity",
                        q(v.metadata.name.as_deref().unwrap_or_default())
                    ));
                };
                let current = status
                    .capacity
                    .as_ref()
                    .and_then(|c| c.get("storage"))
                    .and_then(|q| Quantity::parse(&q.0).ok());
                if current.as_ref() != Some(&cap) {
                    status.capacity = v.spec.as_ref().and_then(|s| s.capacity.clone());
                }
            }
        }
    }
    Ok(c)
}

/// Upstream's `updateVolumePhase`: a new phase replaces the message; the
/// same phase leaves the volume alone.
pub fn volume_with_phase(
    volume: &PersistentVolume,
    phase: &str,
    message: &str,
) -> PersistentVolume {
    let mut v = volume.clone();
    if volume_phase(volume) == phase {
        return v;
    }
    let status = v.status.get_or_insert_with(PersistentVolumeStatus::default);
    status.phase = Some(phase.to_string());
    status.message = (!message.is_empty()).then(|| message.to_string());
    v
}

/// The claim's status changes to `phase` with an event, both only when the
/// phase changes (upstream's `updateClaimStatusWithEvent`).
fn claim_phase_with_event(
    claim: &PersistentVolumeClaim,
    phase: &str,
    reason: &'static str,
    message: &str,
) -> Plan {
    if claim_phase(claim) == phase {
        return Plan::default();
    }
    match claim_with_status(claim, phase, None) {
        Ok(c) => Plan {
            claim: Some(c),
            ..Plan::default()
        }
        .event(Event::new(On::Claim, EventType::Warning, reason, message)),
        Err(e) => Plan::default().error(e),
    }
}

fn pending(claim: &PersistentVolumeClaim) -> Plan {
    match claim_with_status(claim, CLAIM_PENDING, None) {
        Ok(c) => Plan {
            claim: Some(c),
            ..Plan::default()
        },
        Err(e) => Plan::default().error(e),
    }
}

/// The reference a volume's `claimRef` holds (upstream's `GetReference`).
pub fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        name: claim.metadata.name.clone(),
        namespace: claim.metadata.namespace.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Upstream's `GetBindVolumeToClaim`: the volume's claimRef names the claim
/// with its uid, and `bound-by-controller` is set when the controller chose
/// the volume (it was not pre-bound to the claim).
pub fn volume_bound_to_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> PersistentVolume {
    let mut v = volume.clone();
    let pre_bound = storage::is_bound_to_claim(volume, claim);
    let same = claim_ref(volume).is_some_and(|r| {
        r.name == claim.metadata.name
            && r.namespace.as_deref().unwrap_or_default()
                == claim.metadata.namespace.as_deref().unwrap_or_default()
            && r.uid.as_deref().unwrap_or_default()
                == claim.metadata.uid.as_deref().unwrap_or_default()
    });
    if !same {
        v.spec.get_or_insert_with(Default::default).claim_ref = Some(claim_reference(claim));
    }
    if !pre_bound && ann(&v.metadata.annotations, ANN_BOUND_BY_CONTROLLER).is_none() {
        set_ann(&mut v.metadata.annotations, ANN_BOUND_BY_CONTROLLER, "yes");
    }
    v
}

/// Upstream's `bindClaimToVolume`: `spec.volumeName` (with
/// `bound-by-controller` when the controller set it) and `bind-completed`.
pub fn claim_bound_to_volume(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
) -> PersistentVolumeClaim {
    let mut c = claim.clone();
    let name = volume.metadata.name.clone().unwrap_or_default();
    if volume_name_of(claim) != name {
        c.spec.get_or_insert_with(Default::default).volume_name = Some(name);
        if ann(&c.metadata.annotations, ANN_BOUND_BY_CONTROLLER).is_none() {
            set_ann(&mut c.metadata.annotations, ANN_BOUND_BY_CONTROLLER, "yes");
        }
    }
    if ann(&c.metadata.annotations, ANN_BIND_COMPLETED).is_none() {
        set_ann(&mut c.metadata.annotations, ANN_BIND_COMPLETED, "yes");
    }
    c
}

/// Upstream's `bind`: volume claimRef, volume Bound, claim volumeName and
/// annotations, claim Bound with the volume's capacity and access modes.
pub fn bind(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Plan {
    let v = volume_with_phase(&volume_bound_to_claim(volume, claim), VOLUME_BOUND, "");
    let c = claim_bound_to_volume(claim, &v);
    match claim_with_status(&c, CLAIM_BOUND, Some(&v)) {
        Ok(c) => Plan {
            volume: Some(v),
            claim: Some(c),
            ..Plan::default()
        },
        // Upstream has saved the volume by then; the next sync finishes.
        Err(e) => Plan {
            volume: Some(v),
            claim: Some(c),
            ..Plan::default()
        }
        .error(e),
    }
}

/// Upstream's `syncClaim`.
pub fn sync_claim(claim: &PersistentVolumeClaim, world: &ClaimWorld) -> Plan {
    if ann(&claim.metadata.annotations, ANN_BIND_COMPLETED).is_none() {
        sync_unbound_claim(claim, world)
    } else {
        sync_bound_claim(claim, world)
    }
}

fn find_volume<'a>(world: &ClaimWorld<'a>, name: &str) -> Option<&'a PersistentVolume> {
    world
        .volumes
        .iter()
        .copied()
        .find(|v| v.metadata.name.as_deref() == Some(name))
}

fn sync_unbound_claim(claim: &PersistentVolumeClaim, world: &ClaimWorld) -> Plan {
    let wanted = volume_name_of(claim);
    if wanted.is_empty() {
        let delay = match is_delay_binding(claim, world.classes) {
            Ok(d) => d,
            Err(e) => return Plan::default().error(e),
        };
        let found = match storage::find_matching_volume(
            claim,
            world.volumes,
            None,
            &BTreeSet::new(),
            delay,
        ) {
            Ok(v) => v,
            Err(e) => {
                return Plan::default().error(format!(
                    "error finding PV for claim {}: {e}",
                    q(&claim_key(claim))
                ));
            }
        };
        if let Some(volume) = found {
            return bind(volume, claim);
        }
        // RetroactiveDefaultStorageClass: a claim without any class gets
        // today's default, and the next sync provisions with it.
        if !claim_has_class(claim)
            && let Some(default) = world.classes.default_class()
        {
            let mut c = claim.clone();
            c.spec
                .get_or_insert_with(Default::default)
                .storage_class_name = default.metadata.name.clone();
            return Plan {
                claim: Some(c),
                ..Plan::default()
            };
        }
        let selected = ann(&claim.metadata.annotations, ANN_SELECTED_NODE).is_some();
        let plan = pending(claim);
        if delay && !selected {
            return plan.event(wait_for_consumer_event(world.unscheduled_pods));
        }
        if !storage::claim_class(claim).is_empty() {
            // Upstream returns here without touching the status: the claim
            // stays Pending until the provisioner's volume is bound.
            return provision_claim(claim, world.classes);
        }
        return plan.event(Event::new(
            On::Claim,
            EventType::Normal,
            "FailedBinding",
            "no persistent volumes available for this claim and no storage class is set",
        ));
    }
    let Some(volume) = find_volume(world, wanted) else {
        // Asked for a volume that does not exist (yet): retried.
        return pending(claim);
    };
    let volume_name = volume.metadata.name.as_deref().unwrap_or_default();
    if claim_ref(volume).is_none() {
        return match check_volume_satisfy_claim(volume, claim) {
            Err(e) => pending(claim).event(Event::new(
                On::Claim,
                EventType::Warning,
                "VolumeMismatch",
                format!("Cannot bind to requested volume {}: {e}", q(volume_name)),
            )),
            Ok(()) => bind(volume, claim),
        };
    }
    if storage::is_bound_to_claim(volume, claim) {
        return bind(volume, claim);
    }
    let taken = Event::new(
        On::Claim,
        EventType::Warning,
        "FailedBinding",
        format!(
            "volume {} already bound to a different claim.",
            q(volume_name)
        ),
    );
    if ann(&claim.metadata.annotations, ANN_BOUND_BY_CONTROLLER).is_none() {
        return pending(claim).event(taken);
    }
    // Someone removed bind-completed from a claim the controller bound.
    Plan::default().event(taken).error(format!(
        "invalid binding of claim {} to volume {}: volume already claimed by {}",
        q(&claim_key(claim)),
        q(wanted),
        q(&claim_ref(volume).map(claim_ref_key).unwrap_or_default())
    ))
}

/// Upstream's `emitEventForUnboundDelayBindingClaim`.
pub fn wait_for_consumer_event(unscheduled_pods: &[String]) -> Event {
    let (reason, message) = match unscheduled_pods {
        [] => (
            "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding".to_string(),
        ),
        [one] => (
            "WaitForPodScheduled",
            format!("waiting for pod {one} to be scheduled"),
        ),
        many => (
            "WaitForPodScheduled",
            format!("waiting for pods {} to be scheduled", many.join(",")),
        ),
    };
    Event::new(On::Claim, EventType::Normal, reason, message)
}

/// Upstream's `provisionClaim` where every provisioner Berth knows is
/// external (the local-path provisioner and CSI drivers run outside this
/// controller): the claim is annotated with the provisioner to act on, and
/// an `ExternalProvisioning` event says who is awaited. A `kubernetes.io/`
/// name is an in-tree plugin, and Berth has none.
pub fn provision_claim(claim: &PersistentVolumeClaim, classes: Classes) -> Plan {
    let name = storage::claim_class(claim);
    let Some(class) = classes.get(&name) else {
        return Plan::default().event(Event::new(
            On::Claim,
            EventType::Warning,
            "ProvisioningFailed",
            format!("storageclass.storage.k8s.io {} not found", q(&name)),
        ));
    };
    let provisioner = class.provisioner.as_str();
    if provisioner.starts_with("kubernetes.io/") {
        return Plan::default().event(Event::new(
            On::Claim,
            EventType::Warning,
            "ProvisioningFailed",
            format!("no volume plugin matched name: {provisioner}"),
        ));
    }
    let mut plan = Plan::default();
    if ann(&claim.metadata.annotations, ANN_STORAGE_PROVISIONER) != Some(provisioner) {
        let mut c = claim.clone();
        set_ann(
            &mut c.metadata.annotations,
            ANN_STORAGE_PROVISIONER,
            provisioner,
        );
        set_ann(
            &mut c.metadata.annotations,
            ANN_BETA_STORAGE_PROVISIONER,
            provisioner,
        );
        plan.claim = Some(c);
    }
    plan.event(Event::new(
        On::Claim,
        EventType::Normal,
        "ExternalProvisioning",
        format!(
            "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
        ),
    ))
}

fn sync_bound_claim(claim: &PersistentVolumeClaim, world: &ClaimWorld) -> Plan {
    let wanted = volume_name_of(claim);
    if wanted.is_empty() {
        return claim_phase_with_event(
            claim,
            CLAIM_LOST,
            "ClaimLost",
            "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
        );
    }
    let Some(volume) = find_volume(world, wanted) else {
        return claim_phase_with_event(
            claim,
            CLAIM_LOST,
            "ClaimLost",
            "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
        );
    };
    match claim_ref(volume) {
        // Unbound meanwhile, or the volume's write has not reached the cache.
        None => bind(volume, claim),
        Some(r) if claim_ref_uid(r) == claim.metadata.uid.as_deref().unwrap_or_default() => {
            bind(volume, claim)
        }
        Some(_) => claim_phase_with_event(
            claim,
            CLAIM_LOST,
            "ClaimMisbound",
            "Two claims are bound to the same volume, this one is bound incorrectly",
        ),
    }
}

/// Upstream's `syncVolume`. `claim` is the claim the volume's claimRef names
/// as found (in the cache, else by a live read), None when it is gone.
pub fn sync_volume(volume: &PersistentVolume, claim: Option<&PersistentVolumeClaim>) -> Plan {
    let Some(r) = claim_ref(volume) else {
        return phase_only(volume, VOLUME_AVAILABLE);
    };
    if claim_ref_uid(r).is_empty() {
        // Pre-bound to a claim that has not bound yet: the claim's sync binds.
        return phase_only(volume, VOLUME_AVAILABLE);
    }
    // A claim of the same name with another uid: the bound one was deleted.
    let claim = claim.filter(|c| c.metadata.uid.as_deref() == Some(claim_ref_uid(r)));
    let Some(claim) = claim else {
        return release(volume);
    };
    let volume_name = volume.metadata.name.as_deref().unwrap_or_default();
    let bound_to = volume_name_of(claim);
    if bound_to.is_empty() {
        if storage::volume_mode_mismatch(claim, volume) {
            return Plan::default()
                .event(Event::new(
                    On::Volume,
                    EventType::Warning,
                    "VolumeMismatch",
                    format!(
                        "Cannot bind PersistentVolume to requested PersistentVolumeClaim {} due to incompatible volumeMode.",
                        q(claim.metadata.name.as_deref().unwrap_or_default())
                    ),
                ))
                .event(Event::new(
                    On::Claim,
                    EventType::Warning,
                    "VolumeMismatch",
                    format!(
                        "Cannot bind PersistentVolume {} to requested PersistentVolumeClaim due to incompatible volumeMode.",
                        q(volume_name)
                    ),
                ));
        }
        // Bound (e.g. by a provisioner) to a claim still Pending: its sync
        // completes the bind, soon.
        return Plan {
            enqueue_claim: true,
            ..Plan::default()
        };
    }
    if bound_to == volume_name {
        return phase_only(volume, VOLUME_BOUND);
    }
    // The claim is bound to another volume.
    let provisioned = ann(&volume.metadata.annotations, ANN_DYNAMICALLY_PROVISIONED).is_some();
    if provisioned && reclaim::policy(volume) == "Delete" {
        return release(volume);
    }
    unbind_volume(volume)
}

fn phase_only(volume: &PersistentVolume, phase: &str) -> Plan {
    Plan {
        volume: Some(volume_with_phase(volume, phase, "")),
        ..Plan::default()
    }
}

/// The claim is gone: Released (a Failed volume keeps its phase so the user
/// sees what went wrong) and the reclaim policy runs.
fn release(volume: &PersistentVolume) -> Plan {
    let released = match volume_phase(volume) {
        VOLUME_RELEASED | VOLUME_FAILED => volume.clone(),
        _ => volume_with_phase(volume, VOLUME_RELEASED, ""),
    };
    let outcome = reclaim::reclaim(&released);
    let mut plan = Plan {
        volume: Some(match &outcome.fail {
            Some((_, message)) => volume_with_phase(&released, VOLUME_FAILED, message),
            None => released.clone(),
        }),
        ..Plan::default()
    };
    // Upstream's updateVolumePhaseWithEvent: the event only with the change.
    if let Some((reason, message)) = outcome.fail
        && volume_phase(&released) != VOLUME_FAILED
    {
        plan.events
            .push(Event::new(On::Volume, EventType::Warning, reason, message));
    }
    plan
}

/// Upstream's `unbindVolume`: a volume the controller bound loses its
/// claimRef; one a user pre-bound keeps it without the uid. Available again.
pub fn unbind_volume(volume: &PersistentVolume) -> Plan {
    let mut v = volume.clone();
    if ann(&volume.metadata.annotations, ANN_BOUND_BY_CONTROLLER).is_some() {
        if let Some(s) = v.spec.as_mut() {
            s.claim_ref = None;
        }
        if let Some(a) = v.metadata.annotations.as_mut() {
            a.remove(ANN_BOUND_BY_CONTROLLER);
            if a.is_empty() {
                v.metadata.annotations = None;
            }
        }
    } else if let Some(r) = v.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
        r.uid = None;
    }
    phase_only(&v, VOLUME_AVAILABLE)
}
