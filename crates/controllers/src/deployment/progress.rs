//! Deployment status and conditions (upstream `progress.go`, `sync.go`
//! calculateStatus and the condition helpers of `util/deployment_util.go`).

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";

pub fn condition(type_: &str, status: &str, reason: &str, message: String) -> DeploymentCondition {
    let now = Some(Time(Timestamp::now()));
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: now.clone(),
        last_transition_time: now,
    }
}

pub fn get<'a>(st: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    st.conditions.iter().flatten().find(|c| c.type_ == type_)
}

/// Upstream's `SetDeploymentCondition`: same status and reason is no change;
/// same status keeps the transition time.
pub fn set(st: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = get(st, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove(st, &c.type_);
    st.conditions.get_or_insert_with(Vec::new).push(c);
}

pub fn remove(st: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = st.conditions.as_mut() {
        cs.retain(|c| c.type_ != type_);
    }
}

pub fn has_progress_deadline(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .is_some_and(|s| s != i32::MAX)
}

fn rs_sum(rss: &[&ReplicaSet], f: impl Fn(&ReplicaSet) -> i32) -> i32 {
    rss.iter().map(|rs| f(rs)).sum()
}

/// Upstream's `calculateStatus`, Available condition included.
pub fn calculate(
    d: &Deployment,
    all: &[&ReplicaSet],
    new_rs: Option<&ReplicaSet>,
    max_unavailable: i32,
) -> DeploymentStatus {
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = |rs: &ReplicaSet| rs.status.clone().unwrap_or_default();
    let available = rs_sum(all, |rs| st(rs).available_replicas.unwrap_or(0));
    let total = rs_sum(all, |rs| {
        rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
    });
    let old = d.status.clone().unwrap_or_default();
    let mut out = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(rs_sum(all, |rs| st(rs).replicas)),
        updated_replicas: Some(new_rs.map_or(0, |rs| st(rs).replicas)),
        ready_replicas: Some(rs_sum(all, |rs| st(rs).ready_replicas.unwrap_or(0))),
        available_replicas: Some(available),
        unavailable_replicas: Some((total - available).max(0)),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        terminating_replicas: None,
    };
    if available >= desired - max_unavailable {
        let msg = "Deployment has minimum availability.".to_string();
        set(&mut out, condition(AVAILABLE, "True", MIN_AVAILABLE, msg));
    } else {
        let msg = "Deployment does not have minimum availability.".to_string();
        set(
            &mut out,
            condition(AVAILABLE, "False", MIN_UNAVAILABLE, msg),
        );
    }
    out
}

/// Upstream's `DeploymentComplete`.
pub fn complete(d: &Deployment, st: &DeploymentStatus) -> bool {
    let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    st.updated_replicas.unwrap_or(0) == desired
        && st.replicas.unwrap_or(0) == desired
        && st.available_replicas.unwrap_or(0) == desired
        && st.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// Upstream's `DeploymentProgressing`: any step forward since the last status.
pub fn progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let g = |o: Option<i32>| o.unwrap_or(0);
    let old_old = g(old.replicas) - g(old.updated_replicas);
    let new_old = g(new.replicas) - g(new.updated_replicas);
    g(new.updated_replicas) > g(old.updated_replicas)
        || new_old < old_old
        || g(new.ready_replicas) > g(old.ready_replicas)
        || g(new.available_replicas) > g(old.available_replicas)
}

/// Seconds left before the deadline (negative once passed), measured from the
/// Progressing condition's last update; None when there is nothing to time.
pub fn deadline_left(d: &Deployment, now: Timestamp) -> Option<i64> {
    let secs = d.spec.as_ref()?.progress_deadline_seconds?;
    let st = d.status.as_ref()?;
    let c = get(st, PROGRESSING)?;
    if c.reason.as_deref() == Some(NEW_RS_AVAILABLE) || c.reason.as_deref() == Some(TIMED_OUT) {
        return None;
    }
    let from = c.last_update_time.as_ref()?.0;
    Some(i64::from(secs) - now.duration_since(from).as_secs())
}

/// Upstream's `DeploymentTimedOut`.
pub fn timed_out(d: &Deployment, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(c) = d.status.as_ref().and_then(|s| get(s, PROGRESSING)) else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => deadline_left(d, now).is_some_and(|l| l < 0),
    }
}

/// Upstream's `syncRolloutStatus` condition logic: the Progressing condition
/// for the status `new` computed for `d`.
pub fn rollout_conditions(d: &Deployment, new_rs: Option<&ReplicaSet>, new: &mut DeploymentStatus) {
    let name = d.metadata.name.clone().unwrap_or_default();
    if !has_progress_deadline(d) {
        remove(new, PROGRESSING);
        return;
    }
    let cur = d.status.as_ref().and_then(|s| get(s, PROGRESSING)).cloned();
    let already_complete = new.replicas == new.updated_replicas
        && cur.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    if already_complete {
        return;
    }
    let subject = |what: &str| match new_rs {
        Some(rs) => format!(
            "ReplicaSet \"{}\" {what}",
            rs.metadata.name.clone().unwrap_or_default()
        ),
        None => format!("Deployment \"{name}\" {what}"),
    };
    if complete(d, new) {
        let msg = subject("has successfully progressed.");
        set(new, condition(PROGRESSING, "True", NEW_RS_AVAILABLE, msg));
    } else if progressing(d, new) {
        let mut c = condition(PROGRESSING, "True", RS_UPDATED, subject("is progressing."));
        if let Some(cur) = &cur
            && cur.status == "True"
        {
            c.last_transition_time = cur.last_transition_time.clone();
        }
        // Always replaced: lastUpdateTime is what the deadline is measured from.
        remove(new, PROGRESSING);
        new.conditions.get_or_insert_with(Vec::new).push(c);
    } else if timed_out(d, Timestamp::now()) {
        let msg = subject("has timed out progressing.");
        set(new, condition(PROGRESSING, "False", TIMED_OUT, msg));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_keeps_transition_time() {
        let mut st = DeploymentStatus::default();
        let mut c = condition(PROGRESSING, "True", NEW_RS_CREATED, "a".into());
        c.last_transition_time = Timestamp::from_second(5).ok().map(Time);
        set(&mut st, c);
        set(
            &mut st,
            condition(PROGRESSING, "True", RS_UPDATED, "b".into()),
        );
        let got = get(&st, PROGRESSING)
            .cloned()
            .unwrap_or_else(|| condition("", "", "", String::new()));
        assert_eq!(got.reason.as_deref(), Some(RS_UPDATED));
        assert_eq!(
            got.last_transition_time,
            Timestamp::from_second(5).ok().map(Time)
        );
        set(
            &mut st,
            condition(PROGRESSING, "False", TIMED_OUT, "c".into()),
        );
        let got = get(&st, PROGRESSING)
            .cloned()
            .unwrap_or_else(|| condition("", "", "", String::new()));
        assert_ne!(
            got.last_transition_time,
            Timestamp::from_second(5).ok().map(Time)
        );
        assert_eq!(st.conditions.as_ref().map(Vec::len), Some(1));
    }
}
