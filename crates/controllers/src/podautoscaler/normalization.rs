//! Upstream's normalization of a metric-driven recommendation
//! (`horizontal.go`): stabilization over recent recommendations, the
//! min/max clamps, the default scale-up rate (max(2×current, 4)) and, with
//! `spec.behavior`, the scaling policies over the history of scale events.
//! Pure functions of the per-HPA [`History`] and an explicit `now`.

use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HPAScalingRules;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Upstream's `scaleUpLimitFactor` and `scaleUpLimitMinimum`.
pub const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
pub const SCALE_UP_LIMIT_MINIMUM: f64 = 4.0;

/// A recommendation before stabilization, when it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampedRecommendation {
    pub recommendation: i32,
    pub timestamp: Timestamp,
}

/// A rescale: how many replicas were added (or removed), when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampedScaleEvent {
    /// Always non-negative; the direction is the list it is in.
    pub replica_change: i32,
    pub timestamp: Timestamp,
    /// Older than every policy period: free to be reused.
    pub outdated: bool,
}

/// What upstream keeps in memory per HPA.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    pub recommendations: Vec<TimestampedRecommendation>,
    pub scale_up_events: Vec<TimestampedScaleEvent>,
    pub scale_down_events: Vec<TimestampedScaleEvent>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectPolicy {
    Max,
    Min,
    Disabled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyType {
    Pods,
    Percent,
    /// Refused by validation; contributes as upstream's loop does (the
    /// previous proposal again).
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalingPolicy {
    pub type_: PolicyType,
    pub value: i32,
    pub period_seconds: i32,
}

/// One direction of `spec.behavior` with upstream's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalingRules {
    pub stabilization_window_seconds: i32,
    pub select_policy: SelectPolicy,
    pub policies: Vec<ScalingPolicy>,
}

fn policy(type_: PolicyType, value: i32, period_seconds: i32) -> ScalingPolicy {
    ScalingPolicy {
        type_,
        value,
        period_seconds,
    }
}

impl ScalingRules {
    /// Upstream's GenerateHPAScaleUpRules: no stabilization, and at most
    /// 4 pods or 100% per 15 s, whichever is more.
    pub fn scale_up(given: Option<&HPAScalingRules>) -> Self {
        Self::filled(
            given,
            0,
            vec![
                policy(PolicyType::Pods, 4, 15),
                policy(PolicyType::Percent, 100, 15),
            ],
        )
    }

    /// Upstream's GenerateHPAScaleDownRules plus
    /// maybeInitScaleDownStabilizationWindow: the controller's downscale
    /// stabilization unless set, and up to 100% per 15 s.
    pub fn scale_down(given: Option<&HPAScalingRules>, default_window: Duration) -> Self {
        let window = i32::try_from(default_window.as_secs()).unwrap_or(i32::MAX);
        Self::filled(given, window, vec![policy(PolicyType::Percent, 100, 15)])
    }

    fn filled(given: Option<&HPAScalingRules>, window: i32, policies: Vec<ScalingPolicy>) -> Self {
        let mut rules = ScalingRules {
            stabilization_window_seconds: window,
            select_policy: SelectPolicy::Max,
            policies,
        };
        let Some(given) = given else {
            return rules;
        };
        if let Some(w) = given.stabilization_window_seconds {
            rules.stabilization_window_seconds = w;
        }
        if let Some(p) = &given.select_policy {
            rules.select_policy = match p.as_str() {
                "Min" => SelectPolicy::Min,
                "Disabled" => SelectPolicy::Disabled,
                // Upstream's "otherwise the highest change".
                _ => SelectPolicy::Max,
            };
        }
        if let Some(ps) = &given.policies {
            rules.policies = ps
                .iter()
                .map(|p| ScalingPolicy {
                    type_: match p.type_.as_str() {
                        "Pods" => PolicyType::Pods,
                        "Percent" => PolicyType::Percent,
                        _ => PolicyType::Unknown,
                    },
                    value: p.value,
                    period_seconds: p.period_seconds,
                })
                .collect();
        }
        rules
    }

    /// Upstream's getLongestPolicyPeriod.
    pub fn longest_policy_period(&self) -> i32 {
        self.policies
            .iter()
            .map(|p| p.period_seconds)
            .fold(0, i32::max)
    }
}

/// Upstream's NormalizationArg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizationArg {
    pub scale_up: ScalingRules,
    pub scale_down: ScalingRules,
    pub min_replicas: i32,
    pub max_replicas: i32,
    pub current_replicas: i32,
    pub desired_replicas: i32,
}

/// A normalized count and the condition reason and message explaining it.
pub type Normalized = (i32, &'static str, &'static str);

pub const DESIRED_WITHIN_RANGE: (&str, &str) = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
pub const TOO_FEW_REPLICAS: (&str, &str) = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);
pub const TOO_MANY_REPLICAS: (&str, &str) = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
pub const SCALE_UP_LIMIT: (&str, &str) = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
pub const SCALE_DOWN_LIMIT: (&str, &str) = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);
pub const SCALE_UP_STABILIZED: (&str, &str) = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
pub const SCALE_DOWN_STABILIZED: (&str, &str) = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);

fn minus(t: Timestamp, d: Duration) -> Timestamp {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    t.saturating_sub(d).unwrap_or(Timestamp::MIN)
}

fn seconds(s: i32) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// Upstream's recordInitialRecommendation: the first sync remembers the
/// current count, so a new HPA does not scale down at once.
pub fn record_initial_recommendation(history: &mut History, current_replicas: i32, now: Timestamp) {
    if history.recommendations.is_empty() {
        history.recommendations.push(TimestampedRecommendation {
            recommendation: current_replicas,
            timestamp: now,
        });
    }
}

/// Replaces a recommendation older than `cutoff` (the last one found) with
/// `desired`, or appends it.
fn record(
    recs: &mut Vec<TimestampedRecommendation>,
    old: Option<usize>,
    desired: i32,
    now: Timestamp,
) {
    let new = TimestampedRecommendation {
        recommendation: desired,
        timestamp: now,
    };
    match old.and_then(|i| recs.get_mut(i)) {
        Some(slot) => *slot = new,
        None => recs.push(new),
    }
}

/// Upstream's stabilizeRecommendation (no behavior): the highest
/// recommendation within the downscale stabilization window.
pub fn stabilize_recommendation(
    recs: &mut Vec<TimestampedRecommendation>,
    now: Timestamp,
    window: Duration,
    prenormalized: i32,
) -> i32 {
    let cutoff = minus(now, window);
    let mut max = prenormalized;
    let mut old = None;
    for (i, rec) in recs.iter().enumerate() {
        if rec.timestamp < cutoff {
            old = Some(i);
        } else if rec.recommendation > max {
            max = rec.recommendation;
        }
    }
    record(recs, old, prenormalized, now);
    max
}

/// Upstream's calculateScaleUpLimit.
pub fn calculate_scale_up_limit(current_replicas: i32) -> i32 {
    (SCALE_UP_LIMIT_FACTOR * f64::from(current_replicas)).max(SCALE_UP_LIMIT_MINIMUM) as i32
}

/// Upstream's convertDesiredReplicasWithRules (no behavior).
pub fn convert_desired_replicas_with_rules(
    current_replicas: i32,
    desired_replicas: i32,
    min_replicas: i32,
    max_replicas: i32,
) -> Normalized {
    let scale_up_limit = calculate_scale_up_limit(current_replicas);
    // A bogus usage report must not multiply the replicas (kubernetes#32304).
    let (maximum, limit) = if max_replicas > scale_up_limit {
        (scale_up_limit, SCALE_UP_LIMIT)
    } else {
        (max_replicas, TOO_MANY_REPLICAS)
    };
    if desired_replicas < min_replicas {
        return (min_replicas, TOO_FEW_REPLICAS.0, TOO_FEW_REPLICAS.1);
    }
    if desired_replicas > maximum {
        return (maximum, limit.0, limit.1);
    }
    (
        desired_replicas,
        DESIRED_WITHIN_RANGE.0,
        DESIRED_WITHIN_RANGE.1,
    )
}

/// Upstream's stabilizeRecommendationWithBehaviors: the current count moved
/// no further than the lowest recommendation of the scale-up window and
/// the highest of the scale-down window.
pub fn stabilize_recommendation_with_behaviors(
    recs: &mut Vec<TimestampedRecommendation>,
    now: Timestamp,
    args: &NormalizationArg,
) -> Normalized {
    let up_cutoff = minus(now, seconds(args.scale_up.stabilization_window_seconds));
    let down_cutoff = minus(now, seconds(args.scale_down.stabilization_window_seconds));
    let mut up = args.desired_replicas;
    let mut down = args.desired_replicas;
    let mut old = None;
    for (i, rec) in recs.iter().enumerate() {
        if rec.timestamp > up_cutoff {
            up = up.min(rec.recommendation);
        }
        if rec.timestamp > down_cutoff {
            down = down.max(rec.recommendation);
        }
        if rec.timestamp < up_cutoff && rec.timestamp < down_cutoff {
            old = Some(i);
        }
    }
    let mut recommendation = args.current_replicas;
    if recommendation < up {
        recommendation = up;
    }
    if recommendation > down {
        recommendation = down;
    }
    record(recs, old, args.desired_replicas, now);
    let (reason, message) = if args.desired_replicas >= args.current_replicas {
        SCALE_UP_STABILIZED
    } else {
        SCALE_DOWN_STABILIZED
    };
    (recommendation, reason, message)
}

/// Upstream's getReplicasChangePerPeriod: the replicas changed by events
/// within the last `period_seconds`.
pub fn replicas_change_per_period(
    period_seconds: i32,
    events: &[TimestampedScaleEvent],
    now: Timestamp,
) -> i32 {
    let cutoff = minus(now, seconds(period_seconds));
    events
        .iter()
        .filter(|e| e.timestamp > cutoff)
        .fold(0i32, |sum, e| sum.saturating_add(e.replica_change))
}

/// The replicas a policy's period started from: what was added since is
/// taken back, what was removed is given back.
fn period_start(current: i32, period: i32, history: &History, now: Timestamp) -> i32 {
    let added = replicas_change_per_period(period, &history.scale_up_events, now);
    let deleted = replicas_change_per_period(period, &history.scale_down_events, now);
    current.saturating_sub(added).saturating_add(deleted)
}

/// Upstream's calculateScaleUpLimitWithScalingRules.
pub fn calculate_scale_up_limit_with_scaling_rules(
    current_replicas: i32,
    history: &History,
    rules: &ScalingRules,
    now: Timestamp,
) -> i32 {
    let (mut result, select): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return current_replicas,
        // For scaling up, the least change is the lowest limit.
        SelectPolicy::Min => (i32::MAX, i32::min),
        SelectPolicy::Max => (i32::MIN, i32::max),
    };
    let mut proposed = 0i32;
    for p in &rules.policies {
        let start = period_start(current_replicas, p.period_seconds, history, now);
        match p.type_ {
            PolicyType::Pods => proposed = start.saturating_add(p.value),
            // Rounded up, or a small percentage would never add a pod.
            PolicyType::Percent => {
                proposed = (f64::from(start) * (1.0 + f64::from(p.value) / 100.0)).ceil() as i32;
            }
            PolicyType::Unknown => {}
        }
        result = select(result, proposed);
    }
    result
}

/// Upstream's calculateScaleDownLimitWithBehaviors.
pub fn calculate_scale_down_limit_with_behaviors(
    current_replicas: i32,
    history: &History,
    rules: &ScalingRules,
    now: Timestamp,
) -> i32 {
    let (mut result, select): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return current_replicas,
        // For scaling down, the least change is the highest limit.
        SelectPolicy::Min => (i32::MIN, i32::max),
        SelectPolicy::Max => (i32::MAX, i32::min),
    };
    let mut proposed = 0i32;
    for p in &rules.policies {
        let start = period_start(current_replicas, p.period_seconds, history, now);
        match p.type_ {
            PolicyType::Pods => proposed = start.saturating_sub(p.value),
            PolicyType::Percent => {
                proposed = (f64::from(start) * (1.0 - f64::from(p.value) / 100.0)) as i32;
            }
            PolicyType::Unknown => {}
        }
        result = select(result, proposed);
    }
    result
}

/// Upstream's convertDesiredReplicasWithBehaviorRate: the stabilized count
/// within the rate the policies allow and the min/max bounds.
pub fn convert_desired_replicas_with_behavior_rate(
    history: &History,
    args: &NormalizationArg,
    now: Timestamp,
) -> Normalized {
    if args.desired_replicas > args.current_replicas {
        // Until old events age out, never below the current count.
        let limit = calculate_scale_up_limit_with_scaling_rules(
            args.current_replicas,
            history,
            &args.scale_up,
            now,
        )
        .max(args.current_replicas);
        let (maximum, why) = if args.max_replicas > limit {
            (limit, SCALE_UP_LIMIT)
        } else {
            (args.max_replicas, TOO_MANY_REPLICAS)
        };
        if args.desired_replicas > maximum {
            return (maximum, why.0, why.1);
        }
    } else if args.desired_replicas < args.current_replicas {
        let limit = calculate_scale_down_limit_with_behaviors(
            args.current_replicas,
            history,
            &args.scale_down,
            now,
        )
        .min(args.current_replicas);
        let (minimum, why) = if args.min_replicas < limit {
            (limit, SCALE_DOWN_LIMIT)
        } else {
            (args.min_replicas, TOO_FEW_REPLICAS)
        };
        if args.desired_replicas < minimum {
            return (minimum, why.0, why.1);
        }
    }
    (
        args.desired_replicas,
        DESIRED_WITHIN_RANGE.0,
        DESIRED_WITHIN_RANGE.1,
    )
}

/// Upstream's markScaleEventsOutdated.
fn mark_outdated(events: &mut [TimestampedScaleEvent], longest_period: i32, now: Timestamp) {
    let cutoff = minus(now, seconds(longest_period));
    for e in events.iter_mut().filter(|e| e.timestamp < cutoff) {
        e.outdated = true;
    }
}

/// Upstream's storeScaleEvent: with a behavior, records the rescale in its
/// direction, reusing (the last) outdated slot.
pub fn store_scale_event(
    history: &mut History,
    behavior: Option<(&ScalingRules, &ScalingRules)>,
    prev_replicas: i32,
    new_replicas: i32,
    now: Timestamp,
) {
    // Without a behavior no policy ever reads them.
    let Some((up, down)) = behavior else {
        return;
    };
    let (events, rules, change) = if new_replicas > prev_replicas {
        (
            &mut history.scale_up_events,
            up,
            new_replicas - prev_replicas,
        )
    } else {
        (
            &mut history.scale_down_events,
            down,
            prev_replicas - new_replicas,
        )
    };
    mark_outdated(events, rules.longest_policy_period(), now);
    let event = TimestampedScaleEvent {
        replica_change: change,
        timestamp: now,
        outdated: false,
    };
    match events.iter().rposition(|e| e.outdated) {
        Some(i) => events[i] = event,
        None => events.push(event),
    }
}

#[cfg(test)]
#[path = "normalization_tests.rs"]
mod tests;
