//! Upstream's horizontal_test.go normalization and behavior cases, as tables.

use k8s_openapi::api::autoscaling::v2::{HPAScalingPolicy, HPAScalingRules};

use super::*;

fn now() -> Timestamp {
    Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn ago(secs: i64) -> Timestamp {
    now() - SignedDuration::from_secs(secs)
}

fn rec(recommendation: i32, secs_ago: i64) -> TimestampedRecommendation {
    TimestampedRecommendation {
        recommendation,
        timestamp: ago(secs_ago),
    }
}

fn event(replica_change: i32, secs_ago: i64) -> TimestampedScaleEvent {
    TimestampedScaleEvent {
        replica_change,
        timestamp: ago(secs_ago),
        outdated: false,
    }
}

/// Upstream's generateScalingRules: a Max select policy with a Pods and/or
/// a Percent policy (a zero value leaves it out).
fn rules(
    pods: i32,
    pods_period: i32,
    percent: i32,
    percent_period: i32,
    window: i32,
) -> HPAScalingRules {
    let mut policies = Vec::new();
    if pods != 0 {
        policies.push(HPAScalingPolicy {
            type_: "Pods".into(),
            value: pods,
            period_seconds: pods_period,
        });
    }
    if percent != 0 {
        policies.push(HPAScalingPolicy {
            type_: "Percent".into(),
            value: percent,
            period_seconds: percent_period,
        });
    }
    HPAScalingRules {
        stabilization_window_seconds: Some(window),
        select_policy: Some("Max".into()),
        policies: (!policies.is_empty()).then_some(policies),
        tolerance: None,
    }
}

/// Upstream's generateEventsUniformDistribution: events spread evenly over
/// the last `period` seconds, each in the middle of its segment.
fn uniform(changes: &[i32], period: i64) -> Vec<TimestampedScaleEvent> {
    let segment = period as f64 / changes.len() as f64;
    changes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let boundary = (period as f64 - segment * (i + 1) as f64 + segment / 2.0) as i64;
            event(*c, boundary)
        })
        .collect()
}

#[test]
fn convert_desired_replicas_with_rules_table() {
    let cases = [
        (
            "prenormalized desired replicas within range",
            5,
            7,
            3,
            8,
            7,
            "DesiredWithinRange",
        ),
        (
            "prenormalized desired replicas < minReplicas",
            3,
            1,
            2,
            8,
            2,
            "TooFewReplicas",
        ),
        (
            "prenormalized desired zeroed replicas within range",
            1,
            0,
            0,
            10,
            0,
            "DesiredWithinRange",
        ),
        (
            "maxReplicas is the limit because maxReplicas < scaleUpLimit",
            20,
            1000,
            1,
            10,
            10,
            "TooManyReplicas",
        ),
        (
            "scaleUpLimit is the limit because scaleUpLimit < maxReplicas",
            3,
            1000,
            1,
            2000,
            calculate_scale_up_limit(3),
            "ScaleUpLimit",
        ),
    ];
    for (name, current, desired, min, max, want, reason) in cases {
        let (got, got_reason, _) = convert_desired_replicas_with_rules(current, desired, min, max);
        assert_eq!((got, got_reason), (want, reason), "{name}");
    }
    assert_eq!(calculate_scale_up_limit(1), 4);
    assert_eq!(calculate_scale_up_limit(3), 6);
}

#[test]
fn condition_messages_are_upstreams() {
    let cases = [
        (
            convert_desired_replicas_with_rules(3, 1, 2, 8),
            "the desired replica count is less than the minimum replica count",
        ),
        (
            convert_desired_replicas_with_rules(20, 1000, 1, 10),
            "the desired replica count is more than the maximum replica count",
        ),
        (
            convert_desired_replicas_with_rules(3, 1000, 1, 2000),
            "the desired replica count is increasing faster than the maximum scale rate",
        ),
        (
            convert_desired_replicas_with_rules(5, 7, 3, 8),
            "the desired count is within the acceptable range",
        ),
    ];
    for ((_, _, message), want) in cases {
        assert_eq!(message, want);
    }
}

#[test]
fn scale_limits_with_min_select_policy() {
    let mut r = rules(2, 60, 50, 60, 300);
    r.select_policy = Some("Min".into());
    let history = History::default();
    let up = ScalingRules::scale_up(Some(&r));
    assert_eq!(
        calculate_scale_up_limit_with_scaling_rules(1, &history, &up, now()),
        2
    );
    let down = ScalingRules::scale_down(Some(&r), Duration::from_secs(300));
    assert_eq!(
        calculate_scale_down_limit_with_behaviors(5, &history, &down, now()),
        3
    );
    r.select_policy = Some("Disabled".into());
    let disabled = ScalingRules::scale_up(Some(&r));
    assert_eq!(
        calculate_scale_up_limit_with_scaling_rules(7, &history, &disabled, now()),
        7
    );
}

#[test]
fn defaults_fill_missing_rules() {
    let up = ScalingRules::scale_up(None);
    assert_eq!(up.stabilization_window_seconds, 0);
    assert_eq!(up.select_policy, SelectPolicy::Max);
    assert_eq!(
        up.policies,
        vec![
            policy(PolicyType::Pods, 4, 15),
            policy(PolicyType::Percent, 100, 15)
        ]
    );
    let down = ScalingRules::scale_down(
        Some(&HPAScalingRules {
            select_policy: Some("Min".into()),
            ..Default::default()
        }),
        Duration::from_secs(300),
    );
    assert_eq!(down.stabilization_window_seconds, 300);
    assert_eq!(down.select_policy, SelectPolicy::Min);
    assert_eq!(down.policies, vec![policy(PolicyType::Percent, 100, 15)]);
}

#[test]
fn scaling_with_rules() {
    struct Case {
        name: &'static str,
        up_events: Vec<TimestampedScaleEvent>,
        down_events: Vec<TimestampedScaleEvent>,
        min: i32,
        max: i32,
        up: Option<HPAScalingRules>,
        down: Option<HPAScalingRules>,
        current: i32,
        desired: i32,
        want: i32,
        reason: &'static str,
    }
    let case = |name, min, max, current, desired, want, reason| Case {
        name,
        up_events: vec![],
        down_events: vec![],
        min,
        max,
        up: None,
        down: None,
        current,
        desired,
        want,
        reason,
    };
    let with_up = |c: Case, r: HPAScalingRules| Case { up: Some(r), ..c };
    let with_down = |c: Case, r: HPAScalingRules| Case { down: Some(r), ..c };
    let up_ev = |c: Case, e: Vec<TimestampedScaleEvent>| Case { up_events: e, ..c };
    let down_ev = |c: Case, e: Vec<TimestampedScaleEvent>| Case {
        down_events: e,
        ..c
    };
    let cases = vec![
        case(
            "prenormalized desired replicas within range",
            3,
            8,
            5,
            7,
            7,
            "DesiredWithinRange",
        ),
        case(
            "prenormalized desired replicas < minReplicas",
            2,
            8,
            3,
            1,
            2,
            "TooFewReplicas",
        ),
        case(
            "within range when minReplicas is 0",
            0,
            10,
            1,
            0,
            0,
            "DesiredWithinRange",
        ),
        case(
            "maxReplicas is the limit because maxReplicas < scaleUpLimit",
            1,
            10,
            20,
            1000,
            10,
            "TooManyReplicas",
        ),
        case(
            "desired replica count is more than the maximum replica count",
            100,
            150,
            100,
            1000,
            150,
            "TooManyReplicas",
        ),
        with_up(
            case(
                "scaleUpLimit < maxReplicas with user policies",
                1,
                2000,
                3,
                1000,
                4,
                "ScaleUpLimit",
            ),
            rules(0, 0, 1, 60, 0),
        ),
        with_down(
            case(
                "scaleDownLimit > minReplicas with user defined policies",
                3,
                2000,
                1000,
                3,
                980,
                "ScaleDownLimit",
            ),
            rules(20, 60, 0, 0, 0),
        ),
        case(
            "scaleUp with default behavior",
            1,
            1000,
            10,
            50,
            20,
            "ScaleUpLimit",
        ),
        with_up(
            case(
                "scaleUp with pods policy larger than percent policy",
                1,
                1000,
                10,
                500,
                110,
                "ScaleUpLimit",
            ),
            rules(100, 60, 100, 60, 0),
        ),
        with_up(
            case(
                "scaleUp with percent policy larger than pods policy",
                1,
                1000,
                10,
                500,
                20,
                "ScaleUpLimit",
            ),
            rules(2, 60, 100, 60, 0),
        ),
        with_up(
            case(
                "scaleUp with spec MaxReplicas limitation with large pod policy",
                1,
                1000,
                10,
                50,
                50,
                "DesiredWithinRange",
            ),
            rules(100, 60, 0, 0, 0),
        ),
        with_up(
            case(
                "scaleUp with spec MaxReplicas limitation with large percent policy",
                1,
                1000,
                10,
                50,
                50,
                "DesiredWithinRange",
            ),
            rules(10000, 60, 0, 0, 0),
        ),
        with_up(
            case(
                "scaleUp with pod policy limitation",
                1,
                1000,
                10,
                50,
                40,
                "ScaleUpLimit",
            ),
            rules(30, 60, 0, 0, 0),
        ),
        with_up(
            case(
                "scaleUp with percent policy limitation",
                1,
                1000,
                10,
                50,
                30,
                "ScaleUpLimit",
            ),
            rules(0, 0, 200, 60, 0),
        ),
        with_down(
            case(
                "scaleDown with percent policy larger than pod policy",
                1,
                1000,
                100,
                2,
                80,
                "ScaleDownLimit",
            ),
            rules(20, 60, 1, 60, 300),
        ),
        with_down(
            case(
                "scaleDown with pod policy larger than percent policy",
                1,
                1000,
                100,
                2,
                98,
                "ScaleDownLimit",
            ),
            rules(2, 60, 1, 60, 300),
        ),
        with_down(
            case(
                "scaleDown with spec MinReplicas=nil limitation with large pod policy",
                1,
                1000,
                10,
                0,
                1,
                "TooFewReplicas",
            ),
            rules(100, 60, 0, 0, 300),
        ),
        with_down(
            case(
                "scaleDown with spec MinReplicas limitation with large percent policy",
                5,
                1000,
                10,
                2,
                5,
                "TooFewReplicas",
            ),
            rules(0, 0, 100, 60, 300),
        ),
        with_down(
            case(
                "scaleDown with pod policy limitation",
                1,
                1000,
                10,
                2,
                5,
                "ScaleDownLimit",
            ),
            rules(5, 60, 0, 0, 300),
        ),
        with_down(
            case(
                "scaleDown with percent policy limitation",
                1,
                1000,
                10,
                5,
                5,
                "DesiredWithinRange",
            ),
            rules(0, 0, 50, 60, 300),
        ),
        up_ev(
            with_up(
                // 200 < 100 - 15 + 300
                case(
                    "scaleUp with spec MaxReplicas limitation with large pod policy and events",
                    1,
                    200,
                    100,
                    500,
                    200,
                    "TooManyReplicas",
                ),
                rules(300, 60, 0, 0, 0),
            ),
            uniform(&[1, 5, 9], 120),
        ),
        up_ev(
            with_up(
                case(
                    "scaleUp with spec MaxReplicas limitation with large percent policy and events",
                    1,
                    200,
                    100,
                    500,
                    200,
                    "TooManyReplicas",
                ),
                rules(0, 0, 10000, 60, 0),
            ),
            uniform(&[1, 5, 9], 120),
        ),
        up_ev(
            with_up(
                // 120 s ago there were 100 - 15 replicas and 5 may be added.
                case(
                    "scaleUp with currentReplicas limitation with a lot of recent scale up events",
                    1,
                    1000,
                    100,
                    500,
                    100,
                    "ScaleUpLimit",
                ),
                rules(5, 120, 0, 0, 0),
            ),
            uniform(&[1, 5, 9], 120),
        ),
        up_ev(
            with_up(
                case(
                    "scaleUp with pod policy and previous scale up events",
                    1,
                    1000,
                    100,
                    500,
                    235,
                    "ScaleUpLimit",
                ),
                rules(150, 120, 0, 0, 0),
            ),
            uniform(&[1, 5, 9], 120),
        ),
        up_ev(
            with_up(
                case(
                    "scaleUp with percent policy and previous scale up events",
                    1,
                    1000,
                    100,
                    500,
                    255,
                    "ScaleUpLimit",
                ),
                rules(0, 0, 200, 120, 0),
            ),
            uniform(&[1, 5, 9], 120),
        ),
        down_ev(
            case(
                "scaleDown with default policy and previous events",
                1,
                1000,
                10,
                5,
                5,
                "DesiredWithinRange",
            ),
            uniform(&[1, 5, 9], 120),
        ),
        down_ev(
            with_down(
                case(
                    "scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
                    1,
                    1000,
                    100,
                    0,
                    1,
                    "TooFewReplicas",
                ),
                rules(115, 120, 0, 0, 300),
            ),
            uniform(&[1, 5, 9], 120),
        ),
        down_ev(
            with_down(
                case(
                    "scaleDown with spec MinReplicas limitation with large pod policy and previous events",
                    5,
                    1000,
                    100,
                    0,
                    5,
                    "TooFewReplicas",
                ),
                rules(130, 120, 0, 0, 300),
            ),
            uniform(&[1, 5, 9], 120),
        ),
        down_ev(
            with_down(
                // 100% removal always reaches 0: MinReplicas limits.
                case(
                    "scaleDown with spec MinReplicas limitation with large percent policy and previous events",
                    5,
                    1000,
                    100,
                    2,
                    5,
                    "TooFewReplicas",
                ),
                rules(0, 0, 100, 120, 300),
            ),
            uniform(&[1, 5, 9], 120),
        ),
        down_ev(
            with_down(
                // 100 + 15 - 5 is above the current count: keep 100.
                case(
                    "scaleDown with pod policy limitation and previous events",
                    1,
                    1000,
                    100,
                    2,
                    100,
                    "ScaleDownLimit",
                ),
                rules(5, 120, 0, 0, 300),
            ),
            uniform(&[1, 5, 9], 120),
        ),
        down_ev(
            with_down(
                // (100 + 12) - 50%
                case(
                    "scaleDown with percent policy limitation and previous events",
                    1,
                    1000,
                    100,
                    0,
                    56,
                    "ScaleDownLimit",
                ),
                rules(0, 0, 50, 120, 300),
            ),
            uniform(&[2, 4, 6], 120),
        ),
        down_ev(
            with_down(
                // (100 + 30) - 10% = 117 is above 100: keep 100.
                case(
                    "scaleDown with previous events preventing further scale down",
                    1,
                    1000,
                    100,
                    0,
                    100,
                    "ScaleDownLimit",
                ),
                rules(0, 0, 10, 120, 300),
            ),
            uniform(&[10, 10, 10], 120),
        ),
        down_ev(
            with_down(
                // (10 + 30) - 1000% is below 0 and below 5: 5.
                case(
                    "scaleDown with previous events still allowing more scale down",
                    1,
                    1000,
                    10,
                    5,
                    5,
                    "DesiredWithinRange",
                ),
                rules(0, 0, 1000, 120, 300),
            ),
            uniform(&[10, 10, 10], 120),
        ),
        up_ev(
            with_up(
                case(
                    "check 'outdated' flag for events for one behavior for up",
                    1,
                    1000,
                    100,
                    200,
                    200,
                    "DesiredWithinRange",
                ),
                rules(1000, 60, 0, 0, 0),
            ),
            uniform(&[8, 12, 9, 11], 120),
        ),
        up_ev(
            with_up(
                case(
                    "events not marked 'outdated' for two different policies for up",
                    1,
                    1000,
                    100,
                    200,
                    200,
                    "DesiredWithinRange",
                ),
                rules(1000, 120, 100, 60, 0),
            ),
            uniform(&[8, 12, 9, 11], 120),
        ),
        up_ev(
            with_up(
                case(
                    "events marked 'outdated' for two different policies for up",
                    1,
                    1000,
                    100,
                    200,
                    200,
                    "DesiredWithinRange",
                ),
                rules(1000, 30, 100, 60, 0),
            ),
            uniform(&[8, 12, 9, 11], 120),
        ),
        down_ev(
            with_down(
                case(
                    "check 'outdated' flag for events for one behavior for down",
                    1,
                    1000,
                    100,
                    5,
                    5,
                    "DesiredWithinRange",
                ),
                rules(1000, 60, 0, 0, 300),
            ),
            uniform(&[8, 12, 9, 11], 120),
        ),
        down_ev(
            with_down(
                case(
                    "events not marked 'outdated' for two different policies for down",
                    1,
                    1000,
                    100,
                    5,
                    5,
                    "DesiredWithinRange",
                ),
                rules(1000, 120, 100, 60, 300),
            ),
            uniform(&[8, 12, 9, 11], 120),
        ),
        down_ev(
            with_down(
                case(
                    "events marked 'outdated' for two different policies for down",
                    1,
                    1000,
                    100,
                    5,
                    5,
                    "DesiredWithinRange",
                ),
                rules(1000, 30, 100, 60, 300),
            ),
            uniform(&[8, 12, 9, 11], 120),
        ),
    ];
    for c in cases {
        let history = History {
            recommendations: vec![],
            scale_up_events: c.up_events,
            scale_down_events: c.down_events,
        };
        let args = NormalizationArg {
            scale_up: ScalingRules::scale_up(c.up.as_ref()),
            scale_down: ScalingRules::scale_down(c.down.as_ref(), Duration::from_secs(300)),
            min_replicas: c.min,
            max_replicas: c.max,
            current_replicas: c.current,
            desired_replicas: c.desired,
        };
        let (got, reason, _) = convert_desired_replicas_with_behavior_rate(&history, &args, now());
        assert_eq!((got, reason), (c.want, c.reason), "{}", c.name);
    }
}

#[test]
fn store_scale_events() {
    // (name, previous events, rules, replicas changed in the last 60 s,
    //  events after storing a change of 5 as (change, outdated))
    type Case = (
        &'static str,
        Vec<TimestampedScaleEvent>,
        Option<HPAScalingRules>,
        i32,
        Vec<(i32, bool)>,
    );
    let cases: Vec<Case> = vec![
        (
            "empty entries with default behavior",
            vec![],
            None,
            0,
            vec![],
        ),
        (
            "empty entries with two-policy-behavior",
            vec![],
            Some(rules(10, 60, 100, 60, 0)),
            0,
            vec![(5, false)],
        ),
        (
            "one outdated entry to be kept untouched without behavior",
            vec![event(7, 61)],
            None,
            0,
            vec![(7, false)],
        ),
        (
            "one outdated entry to be replaced with behavior",
            vec![event(7, 61)],
            Some(rules(10, 60, 100, 60, 0)),
            0,
            vec![(5, false)],
        ),
        (
            "one actual entry to be not touched with behavior",
            vec![event(7, 58)],
            Some(rules(10, 60, 100, 60, 0)),
            7,
            vec![(7, false), (5, false)],
        ),
        (
            "two entries, one of them to be replaced",
            vec![event(7, 61), event(6, 59)],
            Some(rules(10, 60, 0, 0, 0)),
            6,
            vec![(5, false), (6, false)],
        ),
        (
            "replace one entry, use policies with different periods",
            vec![event(8, 29), event(6, 59), event(7, 61), event(9, 61)],
            Some(rules(10, 60, 100, 30, 0)),
            14,
            vec![(8, false), (6, false), (7, true), (5, false)],
        ),
        (
            "two entries, both actual",
            vec![event(7, 58), event(6, 59)],
            Some(rules(10, 120, 100, 30, 0)),
            13,
            vec![(7, false), (6, false), (5, false)],
        ),
    ];
    for (name, prev, r, change, want) in cases {
        let resolved = r.as_ref().map(|r| {
            (
                ScalingRules::scale_up(Some(r)),
                ScalingRules::scale_down(Some(r), Duration::from_secs(300)),
            )
        });
        let behavior = resolved.as_ref().map(|(u, d)| (u, d));
        for up in [true, false] {
            let mut history = History::default();
            let events = if up {
                &mut history.scale_up_events
            } else {
                &mut history.scale_down_events
            };
            *events = prev.clone();
            assert_eq!(
                replicas_change_per_period(60, events, now()),
                change,
                "{name}"
            );
            let new = if up { 15 } else { 5 };
            store_scale_event(&mut history, behavior, 10, new, now());
            let events = if up {
                &history.scale_up_events
            } else {
                &history.scale_down_events
            };
            let got: Vec<(i32, bool)> = events
                .iter()
                .map(|e| (e.replica_change, e.outdated))
                .collect();
            assert_eq!(got, want, "{name} (up: {up})");
        }
    }
}

#[test]
fn stabilize_recommendation_table() {
    // (name, recommendations, prenormalized, stabilized, log length)
    let cases = [
        ("empty log", vec![], 5, 5, 1),
        ("stabilize", vec![rec(4, 120), rec(5, 60)], 3, 5, 3),
        ("no stabilize", vec![rec(1, 120), rec(2, 60)], 3, 3, 3),
        (
            "no stabilize - old recommendations",
            vec![rec(10, 600), rec(9, 540)],
            3,
            3,
            2,
        ),
        (
            "stabilize - old recommendations",
            vec![rec(10, 600), rec(4, 60), rec(5, 120), rec(9, 540)],
            3,
            5,
            4,
        ),
    ];
    for (name, mut recs, desired, want, len) in cases {
        let got = stabilize_recommendation(&mut recs, now(), Duration::from_secs(300), desired);
        assert_eq!((got, recs.len()), (want, len), "{name}");
    }
}

#[test]
fn stabilize_recommendation_with_behaviors_table() {
    // (name, recommendations, current, desired, up window, down window,
    //  stabilized, stored recommendations)
    type Case = (
        &'static str,
        Vec<TimestampedRecommendation>,
        i32,
        i32,
        i32,
        i32,
        i32,
        Vec<i32>,
    );
    let cases: Vec<Case> = vec![
        (
            "empty recommendations for scaling down",
            vec![],
            100,
            5,
            0,
            0,
            5,
            vec![5],
        ),
        (
            "simple scale down stabilization",
            vec![rec(4, 120), rec(5, 60)],
            100,
            3,
            0,
            180,
            5,
            vec![4, 5, 3],
        ),
        (
            "simple scale up stabilization",
            vec![rec(4, 120), rec(5, 60)],
            1,
            7,
            300,
            0,
            4,
            vec![4, 5, 7],
        ),
        (
            "no scale down stabilization",
            vec![rec(1, 120), rec(2, 60)],
            100,
            3,
            300,
            0,
            3,
            vec![1, 2, 3],
        ),
        (
            "no scale up stabilization",
            vec![rec(4, 120), rec(5, 60)],
            1,
            3,
            0,
            300,
            3,
            vec![4, 5, 3],
        ),
        (
            "no scale down stabilization, reuse recommendation element",
            vec![rec(10, 600), rec(9, 540)],
            100,
            3,
            0,
            0,
            3,
            vec![10, 3],
        ),
        (
            "no scale up stabilization, reuse recommendation element",
            vec![rec(10, 600), rec(9, 540)],
            1,
            100,
            0,
            0,
            100,
            vec![10, 100],
        ),
        (
            "scale down stabilization, reuse one of obsolete recommendation element",
            vec![rec(10, 600), rec(4, 60), rec(5, 120), rec(9, 540)],
            100,
            3,
            0,
            180,
            5,
            vec![10, 4, 5, 3],
        ),
        (
            // Only the first is older than both the 300 s up window and
            // the default 300 s down window.
            "scale up stabilization, reuse one of obsolete recommendation element",
            vec![rec(10, 6000), rec(6, 60), rec(5, 120), rec(9, 180)],
            1,
            100,
            300,
            0,
            5,
            vec![100, 6, 5, 9],
        ),
    ];
    for (name, mut recs, current, desired, up_window, down_window, want, stored) in cases {
        let window = |w| ScalingRules {
            stabilization_window_seconds: w,
            select_policy: SelectPolicy::Max,
            policies: vec![],
        };
        let args = NormalizationArg {
            scale_up: window(up_window),
            scale_down: window(down_window),
            min_replicas: 1,
            max_replicas: 1000,
            current_replicas: current,
            desired_replicas: desired,
        };
        let (got, _, _) = stabilize_recommendation_with_behaviors(&mut recs, now(), &args);
        let got_stored: Vec<i32> = recs.iter().map(|r| r.recommendation).collect();
        assert_eq!((got, got_stored), (want, stored), "{name}");
    }
}

#[test]
fn stabilization_reasons() {
    let args = |current, desired| NormalizationArg {
        scale_up: ScalingRules::scale_up(None),
        scale_down: ScalingRules::scale_down(None, Duration::from_secs(300)),
        min_replicas: 1,
        max_replicas: 10,
        current_replicas: current,
        desired_replicas: desired,
    };
    let mut recs = vec![rec(8, 60)];
    let (got, reason, message) =
        stabilize_recommendation_with_behaviors(&mut recs, now(), &args(8, 2));
    assert_eq!((got, reason), (8, "ScaleDownStabilized"));
    assert_eq!(
        message,
        "recent recommendations were higher than current one, applying the highest recent recommendation"
    );
    let (_, reason, _) = stabilize_recommendation_with_behaviors(&mut recs, now(), &args(2, 8));
    assert_eq!(reason, "ScaleUpStabilized");
}

#[test]
fn initial_recommendation_is_recorded_once() {
    let mut h = History::default();
    record_initial_recommendation(&mut h, 3, now());
    record_initial_recommendation(&mut h, 5, now());
    assert_eq!(h.recommendations, vec![rec(3, 0)]);
}
