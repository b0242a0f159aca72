//! The disruption controller's decisions as plain functions (upstream's
//! `getExpectedPodCount`, `countHealthyPods`, `buildDisruptedPodMap`,
//! `updatePdbStatus`, `failSafe` and component-helpers' condition rules).

use std::collections::{BTreeMap, HashMap};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::podutil;

/// Upstream's `DeletionTimeout`: how long a pod the eviction API let go stays
/// counted as disrupted without being marked for deletion.
pub const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);

pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
pub const SUFFICIENT_PODS: &str = "SufficientPods";
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";
pub const SYNC_FAILED: &str = "SyncFailed";

/// apimachinery's `GetScaledValueFromIntOrPercent`.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    let pct = match v {
        IntOrString::Int(i) => return Ok(*i),
        IntOrString::String(s) => {
            let Some(num) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .into(),
                );
            };
            num.parse::<i64>().map_err(|_| {
                format!(
                    "invalid value for IntOrString: invalid value \"{s}\": strconv.Atoi: parsing \"{num}\": invalid syntax"
                )
            })?
        }
    };
    let scaled = pct as f64 * f64::from(total) / 100.0;
    Ok(if round_up {
        scaled.ceil()
    } else {
        scaled.floor()
    } as i32)
}

/// A pod's controller and its desired scale (`controllerAndScale`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerScale {
    pub uid: String,
    pub scale: i32,
}

/// What the PDB's pods add up to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expected {
    pub expected_count: i32,
    pub desired_healthy: i32,
    /// Pods without a controller (upstream's UnmanagedPods event).
    pub unmanaged: Vec<String>,
}

pub fn controller_of(p: &Pod) -> Option<&OwnerReference> {
    p.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
}

/// Upstream's `getExpectedScale`: the sum of the scales of the pods'
/// controllers, each counted once. `find` resolves one controller reference
/// in the pod's namespace (None: no supported controller found it).
pub fn expected_scale(
    pods: &[&Pod],
    mut find: impl FnMut(&OwnerReference, &str) -> Result<Option<ControllerScale>, String>,
) -> Result<(i32, Vec<String>), String> {
    let mut scales: HashMap<String, i32> = HashMap::new();
    let mut unmanaged = Vec::new();
    for p in pods {
        let Some(r) = controller_of(p) else {
            unmanaged.push(podutil::name(p));
            continue;
        };
        if scales.contains_key(&r.uid) {
            continue;
        }
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        match find(r, ns)? {
            Some(cs) => {
                scales.insert(cs.uid, cs.scale);
            }
            None => {
                return Err(format!(
                    "found no controllers for pod \"{}\"",
                    podutil::name(p)
                ));
            }
        }
    }
    Ok((scales.values().sum(), unmanaged))
}

/// Upstream's `getExpectedPodCount`: maxUnavailable (int or percent) and a
/// percent minAvailable count from the controllers' scale, rounded up; an
/// integer minAvailable counts the selected pods.
pub fn expected_pod_count(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    find: impl FnMut(&OwnerReference, &str) -> Result<Option<ControllerScale>, String>,
) -> Result<Expected, String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    if let Some(max) = &spec.max_unavailable {
        let (expected_count, unmanaged) = expected_scale(pods, find)?;
        let max = scaled_value(max, expected_count, true)?;
        return Ok(Expected {
            expected_count,
            desired_healthy: (expected_count - max).max(0),
            unmanaged,
        });
    }
    match &spec.min_available {
        Some(IntOrString::Int(min)) => Ok(Expected {
            expected_count: pods.len() as i32,
            desired_healthy: *min,
            unmanaged: Vec::new(),
        }),
        Some(min @ IntOrString::String(_)) => {
            let (expected_count, unmanaged) = expected_scale(pods, find)?;
            Ok(Expected {
                expected_count,
                desired_healthy: scaled_value(min, expected_count, true)?,
                unmanaged,
            })
        }
        None => Ok(Expected::default()),
    }
}

fn disruption_time(t: &Time) -> Timestamp {
    t.0
}

/// Upstream's `buildDisruptedPodMap`: the entries of `status.disruptedPods`
/// still pending — their pod exists, is not yet being deleted and the entry is
/// younger than [`DELETION_TIMEOUT`]; also the earliest time one expires
/// (a recheck) and the pods that were never deleted (a NotDeleted event).
pub fn build_disrupted_pod_map(
    pods: &[&Pod],
    pdb: &PodDisruptionBudget,
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>, Vec<String>) {
    let mut result = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let mut not_deleted = Vec::new();
    let Some(disrupted) = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else {
        return (result, recheck, not_deleted);
    };
    for p in pods {
        if podutil::is_terminating(p) {
            continue;
        }
        let name = podutil::name(p);
        let Some(t) = disrupted.get(&name) else {
            continue;
        };
        let expected_deletion = disruption_time(t) + DELETION_TIMEOUT;
        if expected_deletion < now {
            not_deleted.push(name);
        } else {
            if recheck.is_none_or(|r| expected_deletion < r) {
                recheck = Some(expected_deletion);
            }
            result.insert(name, t.clone());
        }
    }
    (result, recheck, not_deleted)
}

/// Upstream's `countHealthyPods`: Ready pods neither being deleted nor
/// recently let go by the eviction API.
pub fn count_healthy(pods: &[&Pod], disrupted: &BTreeMap<String, Time>, now: Timestamp) -> i32 {
    pods.iter()
        .filter(|p| !podutil::is_terminating(p))
        .filter(|p| {
            disrupted
                .get(&podutil::name(p))
                .is_none_or(|t| disruption_time(t) + DELETION_TIMEOUT <= now)
        })
        .filter(|p| podutil::is_ready(p))
        .count() as i32
}

/// `meta.SetStatusCondition`: replaces the condition of the same type, the
/// transition time kept unless the status changes.
pub fn set_status_condition(conditions: &mut Vec<Condition>, mut cond: Condition) {
    if let Some(old) = conditions.iter_mut().find(|c| c.type_ == cond.type_) {
        if old.status == cond.status {
            cond.last_transition_time = old.last_transition_time.clone();
        }
        *old = cond;
    } else {
        conditions.push(cond);
    }
}

/// component-helpers' `UpdateDisruptionAllowedCondition`.
pub fn update_disruption_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: Timestamp) {
    let (s, reason) = if status.disruptions_allowed > 0 {
        ("True", SUFFICIENT_PODS)
    } else {
        ("False", INSUFFICIENT_PODS)
    };
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_status_condition(
        conditions,
        Condition {
            type_: DISRUPTION_ALLOWED.into(),
            status: s.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: status.observed_generation,
            last_transition_time: Time(now),
        },
    );
}

/// component-helpers' `ConditionsAreUpToDate`.
pub fn conditions_are_up_to_date(pdb: &PodDisruptionBudget) -> bool {
    let Some(status) = &pdb.status else {
        return false;
    };
    let Some(cond) = status
        .conditions
        .as_ref()
        .and_then(|cs| cs.iter().find(|c| c.type_ == DISRUPTION_ALLOWED))
    else {
        return false;
    };
    if status.observed_generation != pdb.metadata.generation {
        return false;
    }
    if status.disruptions_allowed > 0 {
        cond.status == "True" && cond.reason == SUFFICIENT_PODS
    } else {
        cond.status == "False" && cond.reason == INSUFFICIENT_PODS
    }
}

/// Upstream's `updatePdbStatus`: the status to write, or None when the
/// stored one is already it. No disruption is allowed while no pods are
/// expected (the budget's first pods must not be evictable before a sync).
pub fn desired_status(
    pdb: &PodDisruptionBudget,
    current_healthy: i32,
    expected: &Expected,
    disrupted: BTreeMap<String, Time>,
    now: Timestamp,
) -> Option<PodDisruptionBudgetStatus> {
    let desired_healthy = expected.desired_healthy;
    let expected_count = expected.expected_count;
    let mut allowed = current_healthy - desired_healthy;
    if expected_count <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let old = pdb.status.clone().unwrap_or_default();
    let old_disrupted = old.disrupted_pods.clone().unwrap_or_default();
    if old.current_healthy == current_healthy
        && old.desired_healthy == desired_healthy
        && old.expected_pods == expected_count
        && old.disruptions_allowed == allowed
        && old_disrupted == disrupted
        && old.observed_generation == pdb.metadata.generation
        && conditions_are_up_to_date(pdb)
    {
        return None;
    }
    let mut status = PodDisruptionBudgetStatus {
        current_healthy,
        desired_healthy,
        expected_pods: expected_count,
        disruptions_allowed: allowed,
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: pdb.metadata.generation,
        conditions: old.conditions,
    };
    update_disruption_allowed_condition(&mut status, now);
    Some(status)
}

/// Upstream's `failSafe`: when the budget cannot be computed, no disruption
/// is allowed and the condition says why.
pub fn fail_safe(
    pdb: &PodDisruptionBudget,
    err: &str,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_status_condition(
        conditions,
        Condition {
            type_: DISRUPTION_ALLOWED.into(),
            status: "False".into(),
            reason: SYNC_FAILED.into(),
            message: err.into(),
            observed_generation: status.observed_generation,
            last_transition_time: Time(now),
        },
    );
    status
}

/// Upstream's `stalePodDisruptionTimeout`: how long a pod may carry a
/// `DisruptionTarget` condition without being deleted before it is reset.
pub const STALE_POD_DISRUPTION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);

/// Upstream's `nonTerminatingPodHasStaleDisruptionCondition`: for a pod that
/// is not being deleted, not terminal, and carries a True `DisruptionTarget`
/// condition not set by the kubelet, how long until it is stale (zero: now).
pub fn stale_disruption_wait(p: &Pod, now: Timestamp) -> Option<std::time::Duration> {
    if podutil::is_terminating(p) || podutil::is_finished(p) {
        return None;
    }
    let cond = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "DisruptionTarget")?;
    if cond.status != "True" || cond.reason.as_deref() == Some("TerminationByKubelet") {
        return None;
    }
    let since = cond.last_transition_time.as_ref().map_or(now, |t| t.0);
    let left = STALE_POD_DISRUPTION_TIMEOUT - now.duration_since(since);
    Some(std::time::Duration::try_from(left).unwrap_or(std::time::Duration::ZERO))
}

/// The `pods/<n>/status` strategic merge patch that resets a stale
/// `DisruptionTarget` condition (upstream's UpdatePodCondition with only the
/// type and status False: reason and message go).
pub fn reset_disruption_target_patch(now: Timestamp) -> serde_json::Value {
    // metav1.Time: whole seconds.
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
    serde_json::json!({"status": {"conditions": [{
        "type": "DisruptionTarget", "status": "False", "reason": null, "message": null,
        "lastTransitionTime": now.to_string()}]}})
}

/// A label selector as Go's `%v` prints a `*metav1.LabelSelector` (the
/// UnmanagedPods event).
pub fn go_selector(
    sel: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> String {
    let Some(sel) = sel else {
        return "nil".into();
    };
    let labels: String = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}: {v},"))
        .collect();
    let exprs: String = sel
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                e.key,
                e.operator,
                e.values.clone().unwrap_or_default().join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
}

#[cfg(test)]
mod tests;
