//! HPA status conditions (upstream's setCondition / setConditionInList).

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub const ABLE_TO_SCALE: &str = "AbleToScale";
pub const SCALING_ACTIVE: &str = "ScalingActive";
pub const SCALING_LIMITED: &str = "ScalingLimited";

/// Sets (or adds) the condition of `type_`; its transition time moves only
/// when the status changes.
pub fn set_condition(
    conditions: &mut Vec<HorizontalPodAutoscalerCondition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    now: Timestamp,
) {
    let status = if status { "True" } else { "False" };
    let idx = match conditions.iter().position(|c| c.type_ == type_) {
        Some(i) => i,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: type_.to_string(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let Some(c) = conditions.get_mut(idx) else {
        return;
    };
    if c.status != status {
        // Whole seconds: what the API stores, so re-reading compares equal.
        c.last_transition_time = Some(Time(truncate(now)));
    }
    c.status = status.to_string();
    c.reason = Some(reason.to_string());
    c.message = Some(message.into());
}

/// `now` to the second, as metav1.Time serializes.
pub fn truncate(now: Timestamp) -> Timestamp {
    Timestamp::from_second(now.as_second()).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::SignedDuration;

    use super::*;

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let t0 = Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH);
        let t1 = t0 + SignedDuration::from_secs(15);
        let t2 = t1 + SignedDuration::from_secs(15);
        let mut cs = Vec::new();
        set_condition(&mut cs, ABLE_TO_SCALE, true, "SucceededGetScale", "a", t0);
        set_condition(&mut cs, SCALING_ACTIVE, false, "ScalingDisabled", "b", t0);
        set_condition(&mut cs, ABLE_TO_SCALE, true, "ReadyForNewScale", "c", t1);
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[0].reason.as_deref(), Some("ReadyForNewScale"));
        assert_eq!(cs[0].last_transition_time, Some(Time(t0)));
        set_condition(&mut cs, ABLE_TO_SCALE, false, "FailedGetScale", "d", t2);
        assert_eq!(cs[0].last_transition_time, Some(Time(t2)));
        assert_eq!(
            (cs[0].status.as_str(), cs[0].message.as_deref()),
            ("False", Some("d"))
        );
    }
}
