//! Upstream's replica_calculator_test.go cases, as tables.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::*;
use crate::podautoscaler::metrics::{RawContainerMetrics, RawPodMetrics, pod_metrics_info};

/// Upstream's `defaultTestingTolerance`.
const TOLERANCE: f64 = 0.1;

fn calc() -> ReplicaCalculator {
    // Upstream's defaultTestingCPUInitializationPeriod and
    // defaultTestingDelayOfInitialReadinessStatus.
    ReplicaCalculator {
        cpu_initialization_period: Duration::from_secs(120),
        delay_of_initial_readiness_status: Duration::from_secs(10),
    }
}

fn now() -> Timestamp {
    Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn ago(secs: i64) -> Timestamp {
    now() - SignedDuration::from_secs(secs)
}

/// When a test pod started: upstream's zero time (long ago), now ("hot"
/// CPU, still initializing) or 3 minutes ago ("cool").
#[derive(Clone, Copy, PartialEq)]
enum Start {
    Zero,
    Hot,
    Cool,
}

const T: &str = "True";
const F: &str = "False";
const RUNNING: &str = "Running";
const PENDING: &str = "Pending";
const FAILED: &str = "Failed";

/// Upstream's calcScenario: pods `test-pod-<i>` with two containers.
#[derive(Clone, Default)]
struct Scenario {
    current: i32,
    requests: Vec<&'static str>,
    /// Per pod, per container usage (cpu); a pod past the end has none.
    levels: Vec<Vec<i64>>,
    /// Overrides the name of the pod a metric is reported for.
    pod_names: Vec<&'static str>,
    readiness: Vec<&'static str>,
    start: Vec<Start>,
    phases: Vec<&'static str>,
    deleted: Vec<bool>,
    container: &'static str,
}

fn requests(n: usize, q: &'static str) -> Vec<&'static str> {
    vec![q; n]
}

/// Every container of pod i uses `per_pod[i]`.
fn levels(per_pod: &[i64]) -> Vec<Vec<i64>> {
    per_pod.iter().map(|v| vec![*v, *v]).collect()
}

fn quantity(q: &str) -> BTreeMap<String, K8sQuantity> {
    [("cpu".to_string(), K8sQuantity(q.into()))].into()
}

fn container(name: &str, request: Option<&str>) -> Container {
    Container {
        name: name.into(),
        resources: request.map(|q| ResourceRequirements {
            requests: Some(quantity(q)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Scenario {
    fn pods(&self) -> Vec<Pod> {
        let count = usize::try_from(self.current)
            .unwrap_or(0)
            .max(self.phases.len());
        (0..count)
            .map(|i| {
                let start = match self.start.get(i).copied().unwrap_or(Start::Zero) {
                    Start::Zero => Timestamp::MIN,
                    Start::Hot => now(),
                    Start::Cool => ago(180),
                };
                let request = self.requests.get(i).copied();
                Pod {
                    metadata: ObjectMeta {
                        name: Some(format!("test-pod-{i}")),
                        namespace: Some("test-namespace".into()),
                        deletion_timestamp: self
                            .deleted
                            .get(i)
                            .copied()
                            .unwrap_or(false)
                            .then(|| Time(now())),
                        ..Default::default()
                    },
                    spec: Some(PodSpec {
                        containers: vec![
                            container("container1", request),
                            container("container2", request),
                        ],
                        ..Default::default()
                    }),
                    status: Some(PodStatus {
                        phase: Some(self.phases.get(i).copied().unwrap_or(RUNNING).into()),
                        start_time: Some(Time(start)),
                        conditions: Some(vec![PodCondition {
                            type_: "Ready".into(),
                            status: self.readiness.get(i).copied().unwrap_or(T).into(),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                }
            })
            .collect()
    }

    fn raw_metrics(&self) -> Vec<RawPodMetrics> {
        self.levels
            .iter()
            .enumerate()
            .map(|(i, per_container)| RawPodMetrics {
                name: self
                    .pod_names
                    .get(i)
                    .map_or_else(|| format!("test-pod-{i}"), |n| (*n).to_string()),
                timestamp: Timestamp::MIN,
                window: Duration::from_secs(60),
                containers: per_container
                    .iter()
                    .enumerate()
                    .map(|(j, v)| RawContainerMetrics {
                        name: format!("container{}", j + 1),
                        usage: [("cpu".to_string(), *v)].into(),
                    })
                    .collect(),
            })
            .collect()
    }

    fn resource_metrics(&self) -> PodMetricsInfo {
        pod_metrics_info(&self.raw_metrics(), "cpu", self.container)
    }
}

/// Samples `test-pod-<i>` = `values[i]`, as a custom metric.
fn custom(values: &[i64]) -> PodMetricsInfo {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (
                format!("test-pod-{i}"),
                PodMetric {
                    timestamp: Timestamp::MIN,
                    window: Duration::from_secs(60),
                    value: *v,
                },
            )
        })
        .collect()
}

enum Want {
    /// (replicas, utilization, raw value)
    Ok(i32, i32, i64),
    Err(&'static str),
}

fn run_resource(name: &str, s: &Scenario, target: i32, tolerances: Tolerances, want: &Want) {
    let got = calc().resource_replicas(
        now(),
        s.current,
        target,
        "cpu",
        tolerances,
        &s.pods(),
        s.resource_metrics(),
        s.container,
    );
    match (want, got) {
        (Want::Ok(r, u, raw), Ok(got)) => assert_eq!(
            (got.replicas, got.utilization, got.raw_utilization),
            (*r, *u, *raw),
            "{name}"
        ),
        (Want::Err(msg), Err(e)) => assert!(e.to_string().contains(msg), "{name}: {e}"),
        (_, got) => panic!("{name}: unexpected {got:?}"),
    }
}

#[test]
fn resource_scale() {
    use Start::{Cool, Hot};
    let base = |current, n, per_pod: &[i64]| Scenario {
        current,
        requests: requests(n, "1.0"),
        levels: levels(per_pod),
        ..Default::default()
    };
    let cases: Vec<(&str, Scenario, i32, Want)> = vec![
        (
            "scale up",
            base(3, 3, &[300, 500, 700]),
            30,
            Want::Ok(5, 50, 1000),
        ),
        (
            "scale up: container metric",
            Scenario {
                container: "container2",
                levels: vec![vec![1000, 300], vec![1000, 500], vec![1000, 700]],
                ..base(3, 3, &[])
            },
            30,
            Want::Ok(5, 50, 500),
        ),
        (
            "scale up: unready pod scales less",
            Scenario {
                readiness: vec![F, T, T],
                ..base(3, 3, &[300, 500, 700])
            },
            30,
            Want::Ok(4, 60, 1200),
        ),
        (
            "scale up: hot-CPU container scales less",
            Scenario {
                start: vec![Hot, Cool, Cool],
                container: "container2",
                levels: vec![vec![0, 300], vec![0, 500], vec![0, 700]],
                ..base(3, 3, &[])
            },
            30,
            Want::Ok(4, 60, 600),
        ),
        (
            "scale up: hot-CPU pod scales less",
            Scenario {
                start: vec![Hot, Cool, Cool],
                ..base(3, 3, &[300, 500, 700])
            },
            30,
            Want::Ok(4, 60, 1200),
        ),
        (
            "no scale: unready pods ignored",
            Scenario {
                readiness: vec![T, F, F],
                ..base(3, 3, &[400, 500, 700])
            },
            30,
            Want::Ok(3, 40, 800),
        ),
        (
            "no scale: hot-CPU pods ignored",
            Scenario {
                readiness: vec![T, F, F],
                start: vec![Cool, Hot, Hot],
                ..base(3, 3, &[400, 500, 700])
            },
            30,
            Want::Ok(3, 40, 800),
        ),
        (
            "scale up: failed pods ignored",
            Scenario {
                readiness: vec![T, T, F, F],
                phases: vec![RUNNING, RUNNING, FAILED, FAILED],
                ..base(2, 4, &[500, 700])
            },
            30,
            Want::Ok(4, 60, 1200),
        ),
        (
            "scale up: failed pods ignored with missing container metric",
            Scenario {
                readiness: vec![T, T, F, F],
                phases: vec![RUNNING, RUNNING, FAILED, FAILED],
                container: "container2",
                levels: vec![vec![1000, 500], vec![9000, 700], vec![1000], vec![9000]],
                ..base(2, 4, &[])
            },
            30,
            Want::Ok(4, 60, 600),
        ),
        (
            "scale up: container metrics with failed pods ignored",
            Scenario {
                readiness: vec![T, T, F, F],
                phases: vec![RUNNING, RUNNING, FAILED, FAILED],
                container: "container2",
                levels: vec![vec![1000, 500], vec![9000, 700]],
                ..base(2, 4, &[])
            },
            30,
            Want::Ok(4, 60, 600),
        ),
        (
            "scale up: pods being deleted are ignored",
            Scenario {
                readiness: vec![T, T, F, F],
                phases: vec![RUNNING; 4],
                deleted: vec![false, false, true, true],
                ..base(2, 4, &[500, 700])
            },
            30,
            Want::Ok(4, 60, 1200),
        ),
        (
            "scale up: container metrics with pods being deleted ignored",
            Scenario {
                readiness: vec![T, T, F, F],
                phases: vec![RUNNING; 4],
                deleted: vec![false, false, true, true],
                container: "container1",
                ..base(2, 4, &[500, 700])
            },
            30,
            Want::Ok(4, 60, 600),
        ),
        (
            "scale down",
            base(5, 5, &[100, 300, 500, 250, 250]),
            50,
            Want::Ok(3, 28, 560),
        ),
        (
            "scale down: container metric",
            Scenario {
                container: "container2",
                levels: vec![
                    vec![1000, 100],
                    vec![1000, 300],
                    vec![1000, 500],
                    vec![1000, 250],
                    vec![1000, 250],
                ],
                ..base(5, 5, &[])
            },
            50,
            Want::Ok(3, 28, 280),
        ),
        (
            "scale down: exclude unready pods",
            Scenario {
                readiness: vec![T, T, T, F, F],
                ..base(5, 5, &[100, 300, 500, 250, 250])
            },
            50,
            Want::Ok(2, 30, 600),
        ),
        (
            "scale down: exclude unscheduled pods",
            Scenario {
                readiness: vec![T, F, F, F, F],
                phases: vec![RUNNING, PENDING, PENDING, PENDING, PENDING],
                ..base(5, 5, &[100])
            },
            50,
            Want::Ok(1, 10, 200),
        ),
        (
            "scale down: container metric excludes unscheduled pods",
            Scenario {
                readiness: vec![T, F, F, F, F],
                phases: vec![RUNNING, PENDING, PENDING, PENDING, PENDING],
                container: "container2",
                levels: vec![
                    vec![1000, 100],
                    vec![1000, 300],
                    vec![1000, 500],
                    vec![1000, 250],
                    vec![1000, 250],
                ],
                ..base(5, 5, &[])
            },
            50,
            Want::Ok(1, 10, 100),
        ),
        (
            "scale down: ignore hot-CPU pods",
            Scenario {
                start: vec![Cool, Cool, Cool, Hot, Hot],
                ..base(5, 5, &[100, 300, 500, 250, 250])
            },
            50,
            Want::Ok(2, 30, 600),
        ),
        (
            "scale down: failed pods ignored",
            Scenario {
                readiness: vec![T, T, T, T, T, F, F],
                phases: vec![RUNNING, RUNNING, RUNNING, RUNNING, RUNNING, FAILED, FAILED],
                ..base(5, 7, &[100, 300, 500, 250, 250])
            },
            50,
            Want::Ok(3, 28, 560),
        ),
        (
            "scale down: pods being deleted are ignored",
            Scenario {
                readiness: vec![T, T, T, T, T, F, F],
                phases: vec![RUNNING; 7],
                deleted: vec![false, false, false, false, false, true, true],
                ..base(5, 7, &[100, 300, 500, 250, 250])
            },
            50,
            Want::Ok(3, 28, 560),
        ),
        (
            // Upstream's regression test for kubernetes#83561.
            "scale down: still-running pods being deleted are ignored (container)",
            Scenario {
                readiness: vec![T, T, T, T, T, F, F],
                phases: vec![RUNNING; 7],
                deleted: vec![false, false, false, false, false, true, true],
                container: "container2",
                levels: vec![
                    vec![1000, 100],
                    vec![1000, 300],
                    vec![1000, 500],
                    vec![1000, 250],
                    vec![1000, 250],
                ],
                ..base(5, 7, &[])
            },
            50,
            Want::Ok(3, 28, 280),
        ),
    ];
    for (name, s, target, want) in &cases {
        run_resource(name, s, *target, Tolerances::symmetric(TOLERANCE), want);
    }
}

#[test]
fn resource_tolerance() {
    let mixed = vec!["0.9", "1.0", "1.1"];
    let s = |per_pod: &[i64]| Scenario {
        current: 3,
        requests: mixed.clone(),
        levels: levels(per_pod),
        ..Default::default()
    };
    let t = |down, up| Tolerances {
        scale_down: down,
        scale_up: up,
    };
    let cases = [
        (
            "within default tolerance",
            s(&[1010, 1030, 1020]),
            t(TOLERANCE, TOLERANCE),
            Want::Ok(3, 102, 2040),
        ),
        (
            "outside 0% tolerance",
            s(&[909, 1010, 1111]),
            t(0.0, 0.0),
            Want::Ok(4, 101, 2020),
        ),
        (
            "within 200% scale-up tolerance",
            s(&[1890, 1910, 1900]),
            t(TOLERANCE, 2.0),
            Want::Ok(3, 190, 3800),
        ),
        (
            "outside 8% scale-up tolerance (superfluous scale-down tolerance)",
            s(&[1100, 1080, 1090]),
            t(2.0, 0.08),
            Want::Ok(4, 109, 2180),
        ),
        (
            "within 36% scale-down tolerance",
            s(&[660, 640, 650]),
            t(0.36, TOLERANCE),
            Want::Ok(3, 65, 1300),
        ),
        (
            "outside 34% scale-down tolerance",
            s(&[660, 640, 650]),
            t(0.34, TOLERANCE),
            Want::Ok(2, 65, 1300),
        ),
    ];
    for (name, s, tol, want) in &cases {
        run_resource(name, s, 100, *tol, want);
    }
}

#[test]
fn resource_missing_metrics() {
    use Start::{Cool, Hot};
    let base = |current, n, per_pod: &[i64]| Scenario {
        current,
        requests: requests(n, "1.0"),
        levels: levels(per_pod),
        ..Default::default()
    };
    let cases: Vec<(&str, Scenario, i32, Want)> = vec![
        (
            "superfluous metrics counted",
            base(4, 4, &[4000, 9500, 3000, 7000, 3200, 2000]),
            100,
            Want::Ok(24, 587, 11750),
        ),
        (
            "some pods missing metrics scales down",
            base(4, 4, &[400, 95]),
            100,
            Want::Ok(3, 24, 495),
        ),
        (
            "no change: metric equal to target",
            base(2, 2, &[1000]),
            100,
            Want::Ok(2, 100, 2000),
        ),
        (
            "no change: metric above target",
            base(2, 2, &[1900]),
            100,
            Want::Ok(2, 190, 3800),
        ),
        (
            "no change: metric below target",
            base(2, 2, &[600]),
            100,
            Want::Ok(2, 60, 1200),
        ),
        (
            "no change: unready pod metric missing",
            Scenario {
                readiness: vec![F, T, T],
                ..base(3, 3, &[100, 450])
            },
            50,
            Want::Ok(3, 45, 900),
        ),
        (
            "no change: hot-CPU pod metric missing",
            Scenario {
                start: vec![Hot, Cool, Cool],
                ..base(3, 3, &[100, 450])
            },
            50,
            Want::Ok(3, 45, 900),
        ),
        (
            "scale up: unready pod metric missing",
            Scenario {
                readiness: vec![F, T, T],
                ..base(3, 3, &[100, 2000])
            },
            50,
            Want::Ok(4, 200, 4000),
        ),
        (
            "scale up: hot-CPU pod metric missing",
            Scenario {
                readiness: vec![F, T, T],
                start: vec![Hot, Cool, Cool],
                ..base(3, 3, &[100, 2000])
            },
            50,
            Want::Ok(4, 200, 4000),
        ),
        (
            "scale down: unready pod metric missing",
            Scenario {
                readiness: vec![F, T, T, T],
                ..base(4, 4, &[100, 100, 100])
            },
            50,
            Want::Ok(3, 10, 200),
        ),
        (
            "scale down: target over 100",
            Scenario {
                readiness: vec![F, T, T, T],
                requests: vec!["1.0", "1.0", "2.0", "2.0"],
                ..base(4, 0, &[200, 100, 100])
            },
            300,
            Want::Ok(2, 6, 200),
        ),
        (
            "rolling update with maxSurge: extra pod missing metric",
            Scenario {
                phases: vec![RUNNING; 3],
                ..base(2, 3, &[100, 100])
            },
            50,
            Want::Ok(2, 10, 200),
        ),
        (
            "disjoint pod and metric names",
            Scenario {
                pod_names: vec!["an-older-pod-name"],
                ..base(1, 1, &[100])
            },
            100,
            Want::Err("no metrics returned matched known pods"),
        ),
        (
            "missing CPU request on container",
            base(1, 0, &[200]),
            100,
            Want::Err("missing request for cpu in container container1 of Pod test-pod-0"),
        ),
        (
            "every pod unready",
            Scenario {
                readiness: vec![F],
                ..base(1, 1, &[200])
            },
            100,
            Want::Err("did not receive metrics for targeted pods (pods might be unready)"),
        ),
        (
            "no pods",
            base(0, 0, &[200]),
            100,
            Want::Err("no pods returned by selector"),
        ),
    ];
    for (name, s, target, want) in &cases {
        run_resource(name, s, *target, Tolerances::symmetric(TOLERANCE), want);
    }
}

/// Upstream's TestReplicaCalcComputedToleranceAlgImplementation: a target
/// just past the tolerance scales, one just inside does not.
#[test]
fn computed_tolerance() {
    let start_pods = 10;
    let total_used: i64 = 150 * 10;
    let total_requested = 2 * total_used;
    let requested_to_used = (total_requested / total_used) as f64;
    let per_pod = total_requested / 10;
    let reqs: Vec<String> = [100, -100, 10, -10, 2, -2, 1, -1, 0, 0]
        .iter()
        .map(|d| format!("{}m", per_pod + d))
        .collect();
    let reqs: Vec<&'static str> = reqs.into_iter().map(|s| &*s.leak()).collect();
    let s = Scenario {
        current: start_pods,
        requests: reqs,
        levels: levels(&[total_used / 10; 10]),
        ..Default::default()
    };
    let util = i32::try_from(total_used * 100 / total_requested).unwrap_or(0);
    for (margin, scales) in [(0.01, true), (0.004, false)] {
        let target = (1.0 / (requested_to_used * (1.0 - TOLERANCE))).abs() + margin;
        let percent = (target * 100.0) as i32;
        let used_ratio = total_used as f64 / (total_requested as f64 * target);
        let want = if scales {
            (used_ratio * f64::from(start_pods)).ceil() as i32
        } else {
            start_pods
        };
        run_resource(
            &format!("margin {margin}"),
            &s,
            percent,
            Tolerances::symmetric(TOLERANCE),
            &Want::Ok(want, util, 2 * total_used / 10),
        );
    }
}

/// (name, scenario, metric values, target, tolerances, replicas, usage)
type MetricCase = (&'static str, Scenario, Vec<i64>, i64, Tolerances, i32, i64);

#[test]
fn pod_metric() {
    use Start::{Cool, Hot};
    let d = Tolerances::symmetric(TOLERANCE);
    let one_pct = Tolerances {
        scale_down: TOLERANCE,
        scale_up: 0.01,
    };
    let s = |current| Scenario {
        current,
        ..Default::default()
    };
    let cases: Vec<MetricCase> = vec![
        (
            "scale up",
            s(3),
            vec![20000, 10000, 30000],
            15000,
            d,
            4,
            20000,
        ),
        (
            "scale up: unready hot-CPU pod scales less",
            Scenario {
                readiness: vec![T, T, F],
                start: vec![Cool, Cool, Hot],
                ..s(3)
            },
            vec![50000, 10000, 30000],
            15000,
            d,
            6,
            30000,
        ),
        (
            "scale up: unready hot-CPU pods avoid scale-down",
            Scenario {
                readiness: vec![F, T, F],
                start: vec![Hot, Cool, Hot],
                ..s(3)
            },
            vec![50000, 15000, 30000],
            15000,
            d,
            7,
            31666,
        ),
        ("scale down", s(5), vec![12000; 5], 20000, d, 3, 12000),
        (
            "within default tolerance",
            s(3),
            vec![20000, 21000, 21000],
            20000,
            d,
            3,
            20666,
        ),
        (
            "outside configurable 1% tolerance",
            s(3),
            vec![20000, 21000, 21000],
            20000,
            one_pct,
            4,
            20666,
        ),
        (
            "no change: missing metrics",
            s(5),
            vec![20000, 19000, 21000],
            20000,
            d,
            5,
            20000,
        ),
        (
            "rolling update with maxSurge: extra pod missing metric",
            Scenario {
                phases: vec![RUNNING; 3],
                ..s(2)
            },
            vec![10000, 10000],
            17000,
            d,
            2,
            10000,
        ),
    ];
    for (name, s, values, target, tol, replicas, usage) in cases {
        let got = calc()
            .plain_metric_replicas(
                now(),
                custom(&values),
                s.current,
                target,
                tol,
                &s.pods(),
                "",
            )
            .map(|r| (r.replicas, r.usage));
        assert_eq!(got, Ok((replicas, usage)), "{name}");
    }
}

#[test]
fn raw_resource_metric_scales_on_average_value() {
    // A cpu AverageValue target: the mean pod usage against the target,
    // with CPU readiness applied.
    let s = Scenario {
        current: 3,
        requests: requests(3, "1.0"),
        levels: levels(&[300, 500, 700]),
        readiness: vec![T, T, T],
        ..Default::default()
    };
    let got = calc().plain_metric_replicas(
        now(),
        s.resource_metrics(),
        3,
        500,
        Tolerances::symmetric(TOLERANCE),
        &s.pods(),
        "cpu",
    );
    assert_eq!(
        got,
        Ok(UsageReplicas {
            replicas: 6,
            usage: 1000
        })
    );
}

#[test]
fn object_metric() {
    let d = Tolerances::symmetric(TOLERANCE);
    let one_pct = Tolerances {
        scale_down: TOLERANCE,
        scale_up: 0.01,
    };
    let s = |current| Scenario {
        current,
        ..Default::default()
    };
    let cases: Vec<MetricCase> = vec![
        ("scale up", s(3), vec![20000], 15000, d, 4, 20000),
        (
            "scale up: very large metric saturates replicas to MaxInt32",
            s(3),
            vec![i64::MAX],
            1,
            d,
            i32::MAX,
            i64::MAX,
        ),
        (
            "scale up: ignores unready pods",
            Scenario {
                readiness: vec![F, T, F],
                ..s(3)
            },
            vec![50000],
            10000,
            d,
            5,
            50000,
        ),
        ("scale down", s(5), vec![12000], 20000, d, 3, 12000),
        (
            "within default tolerance",
            s(3),
            vec![20666],
            20000,
            d,
            3,
            20666,
        ),
        (
            "outside configurable 1% tolerance",
            s(3),
            vec![20666],
            20000,
            one_pct,
            4,
            20666,
        ),
        // From zero replicas the ratio alone decides.
        ("scale from zero", s(0), vec![25000], 10000, d, 3, 25000),
        ("stay at zero", s(0), vec![0], 10000, d, 0, 0),
    ];
    for (name, s, values, target, tol, replicas, usage) in cases {
        let got = object_metric_replicas(s.current, values[0], target, tol, &s.pods())
            .map(|r| (r.replicas, r.usage));
        assert_eq!(got, Ok((replicas, usage)), "{name}");
    }
    assert_eq!(
        object_metric_replicas(3, 50000, 10000, d, &[]),
        Err(CalcError::ReadyPods(Box::new(CalcError::NoPods)))
    );
    assert_eq!(
        CalcError::ReadyPods(Box::new(CalcError::NoPods)).to_string(),
        "unable to calculate ready pods: no pods returned by selector while calculating replica count"
    );
}

#[test]
fn object_per_pod_metric() {
    let d = Tolerances::symmetric(TOLERANCE);
    let one_pct = Tolerances {
        scale_down: TOLERANCE,
        scale_up: 0.01,
    };
    let cases = [
        ("scale up", 3, 20000, 5000, d, 4, 6667),
        ("scale down", 5, 6000, 2000, d, 3, 1200),
        ("within default tolerance", 4, 20166, 5000, d, 4, 5042),
        (
            "outside configurable 1% tolerance",
            4,
            20208,
            5000,
            one_pct,
            5,
            5052,
        ),
    ];
    for (name, status, usage, target, tol, replicas, avg) in cases {
        let got = object_per_pod_metric_replicas(status, usage, target, tol);
        assert_eq!((got.replicas, got.usage), (replicas, avg), "{name}");
    }
}

#[test]
fn external_metric() {
    let d = Tolerances::symmetric(TOLERANCE);
    let one_pct = Tolerances {
        scale_down: TOLERANCE,
        scale_up: 0.01,
    };
    let s = |current| Scenario {
        current,
        ..Default::default()
    };
    let cases: Vec<MetricCase> = vec![
        (
            // Would be 6 if unready pods were counted.
            "scale down: ignores unready pods (would otherwise scale up)",
            Scenario {
                readiness: vec![F, T, F],
                ..s(3)
            },
            vec![8600],
            4400,
            d,
            2,
            8600,
        ),
        ("scale down", s(5), vec![8600], 14334, d, 3, 8600),
        (
            "within default tolerance",
            s(3),
            vec![8600],
            8888,
            d,
            3,
            8600,
        ),
        (
            "outside configurable 1% tolerance",
            s(3),
            vec![8900],
            8800,
            one_pct,
            4,
            8900,
        ),
        (
            "usage overflow caps at MaxInt64",
            s(3),
            vec![i64::MAX / 2 + 1, i64::MAX / 2 + 1],
            i64::MAX,
            d,
            3,
            i64::MAX,
        ),
        (
            "sum of several values",
            s(2),
            vec![3000, 3000, 3000],
            3000,
            d,
            6,
            9000,
        ),
    ];
    for (name, s, values, target, tol, replicas, usage) in cases {
        let got = external_metric_replicas(s.current, &values, target, tol, &s.pods())
            .map(|r| (r.replicas, r.usage));
        assert_eq!(got, Ok((replicas, usage)), "{name}");
    }
}

#[test]
fn external_per_pod_metric() {
    let d = Tolerances::symmetric(TOLERANCE);
    let one_pct = Tolerances {
        scale_down: TOLERANCE,
        scale_up: 0.01,
    };
    let cases = [
        (
            "replica count overflow saturates to MaxInt32",
            1,
            vec![i64::MAX],
            1,
            d,
            i32::MAX,
            i64::MAX,
        ),
        (
            "usage overflow with huge target leaves replicas unchanged",
            1,
            vec![i64::MAX],
            i64::MAX,
            d,
            1,
            i64::MAX,
        ),
        ("scale up", 3, vec![8600], 2150, d, 4, 2867),
        ("scale down", 5, vec![8600], 2867, d, 3, 1720),
        ("within default tolerance", 3, vec![8600], 2900, d, 3, 2867),
        (
            "outside configurable 1% tolerance",
            3,
            vec![8600],
            2800,
            one_pct,
            4,
            2867,
        ),
    ];
    for (name, status, values, target, tol, replicas, usage) in cases {
        let got = external_per_pod_metric_replicas(status, &values, target, tol);
        assert_eq!((got.replicas, got.usage), (replicas, usage), "{name}");
    }
}

fn group_pod(
    name: &str,
    phase: &str,
    start: Option<Timestamp>,
    ready: Option<(&str, Timestamp)>,
) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some(phase.into()),
            start_time: start.map(Time),
            conditions: ready.map(|(status, at)| {
                vec![PodCondition {
                    type_: "Ready".into(),
                    status: status.into(),
                    last_transition_time: Some(Time(at)),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
    }
}

#[test]
fn group_pods() {
    let sample = |at: Timestamp, window: u64| PodMetric {
        timestamp: at,
        window: Duration::from_secs(window),
        value: 1,
    };
    let plain = sample(Timestamp::MIN, 0);
    let succeeded = "Succeeded";
    let deleted = {
        let mut p = group_pod("deleted", PENDING, None, None);
        p.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        p
    };
    // (name, pods, metrics, resource, ready, unready, missing, ignored)
    type Case = (
        &'static str,
        Vec<Pod>,
        Vec<(&'static str, PodMetric)>,
        &'static str,
        usize,
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    );
    let cases: Vec<Case> = vec![
        ("void", vec![], vec![], "cpu", 0, &[], &[], &[]),
        (
            "count in a ready pod - memory",
            vec![group_pod("bentham", succeeded, None, None)],
            vec![("bentham", sample(now(), 60))],
            "memory",
            1,
            &[],
            &[],
            &[],
        ),
        (
            "unready a pod without ready condition - CPU",
            vec![group_pod("lucretius", succeeded, Some(now()), None)],
            vec![("lucretius", plain)],
            "cpu",
            0,
            &["lucretius"],
            &[],
            &[],
        ),
        (
            "count in a ready pod with fresh metrics during initialization period - CPU",
            vec![group_pod(
                "bentham",
                succeeded,
                Some(ago(60)),
                Some((T, ago(30))),
            )],
            vec![("bentham", sample(now(), 30))],
            "cpu",
            1,
            &[],
            &[],
            &[],
        ),
        (
            "unready a ready pod without fresh metrics during initialization period - CPU",
            vec![group_pod(
                "bentham",
                succeeded,
                Some(ago(60)),
                Some((T, ago(30))),
            )],
            vec![("bentham", sample(now(), 60))],
            "cpu",
            0,
            &["bentham"],
            &[],
            &[],
        ),
        (
            "unready an unready pod during initialization period - CPU",
            vec![group_pod(
                "lucretius",
                succeeded,
                Some(ago(600)),
                Some((F, ago(594))),
            )],
            vec![("lucretius", plain)],
            "cpu",
            0,
            &["lucretius"],
            &[],
            &[],
        ),
        (
            "count in a ready pod without fresh metrics after initialization period - CPU",
            vec![group_pod(
                "bentham",
                succeeded,
                Some(ago(180)),
                Some((T, ago(180))),
            )],
            vec![("bentham", sample(ago(120), 60))],
            "cpu",
            1,
            &[],
            &[],
            &[],
        ),
        (
            "count in an unready pod that was ready after initialization period - CPU",
            vec![group_pod(
                "lucretius",
                succeeded,
                Some(ago(600)),
                Some((F, ago(540))),
            )],
            vec![("lucretius", plain)],
            "cpu",
            1,
            &[],
            &[],
            &[],
        ),
        (
            "unready pod that has never been ready after initialization period - CPU",
            vec![group_pod(
                "lucretius",
                succeeded,
                Some(ago(600)),
                Some((F, ago(590))),
            )],
            vec![("lucretius", plain)],
            "cpu",
            1,
            &[],
            &[],
            &[],
        ),
        (
            "a missing pod",
            vec![group_pod("epicurus", succeeded, Some(ago(180)), None)],
            vec![],
            "cpu",
            0,
            &[],
            &["epicurus"],
            &[],
        ),
        (
            "several pods",
            vec![
                group_pod("lucretius", succeeded, Some(now()), None),
                group_pod("niccolo", succeeded, Some(ago(180)), Some((T, ago(180)))),
                group_pod("epicurus", succeeded, Some(ago(180)), None),
            ],
            vec![("lucretius", plain), ("niccolo", plain)],
            "cpu",
            1,
            &["lucretius"],
            &["epicurus"],
            &[],
        ),
        (
            "pending pods are unreadied",
            vec![group_pod("unscheduled", PENDING, None, None)],
            vec![],
            "cpu",
            0,
            &["unscheduled"],
            &[],
            &[],
        ),
        (
            "ignore pods with deletion timestamps",
            vec![deleted],
            vec![("deleted", plain)],
            "cpu",
            0,
            &[],
            &[],
            &["deleted"],
        ),
        (
            "ignore pods in a failed state",
            vec![group_pod("failed", FAILED, None, None)],
            vec![("failed", plain)],
            "cpu",
            0,
            &[],
            &[],
            &["failed"],
        ),
    ];
    let set = |names: &[&str]| names.iter().map(|n| (*n).to_string()).collect();
    for (name, pods, metrics, resource, ready, unready, missing, ignored) in cases {
        let metrics: PodMetricsInfo = metrics
            .into_iter()
            .map(|(n, m)| (n.to_string(), m))
            .collect();
        let got = calc().group_pods(now(), &pods, &metrics, resource);
        let want = PodGroups {
            ready,
            unready: set(unready),
            missing: set(missing),
            ignored: set(ignored),
        };
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn calculate_requests_table() {
    let pod = |containers: Vec<Container>, init: Vec<Container>, pod_level: Option<&str>| Pod {
        metadata: ObjectMeta {
            name: Some("test-pod".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers,
            init_containers: Some(init),
            resources: pod_level.map(|q| ResourceRequirements {
                requests: Some(quantity(q)),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    };
    let c = |name: &str, q: Option<&str>| container(name, q);
    let sidecar = {
        let mut s = c("restartable-container1", Some("50m"));
        s.restart_policy = Some("Always".into());
        s
    };
    let two = || vec![c("container1", Some("100m")), c("container2", Some("50m"))];
    // (name, pods, container, requests or error)
    type Case = (
        &'static str,
        Vec<Pod>,
        &'static str,
        Result<Vec<i64>, &'static str>,
    );
    let cases: Vec<Case> = vec![
        ("void", vec![], "", Ok(vec![])),
        (
            "sum container requests",
            vec![pod(two(), vec![], None)],
            "",
            Ok(vec![150]),
        ),
        (
            "pod-level requests override container requests",
            vec![pod(two(), vec![], Some("800m"))],
            "",
            Ok(vec![800]),
        ),
        (
            "fail if a container is missing requests",
            vec![pod(
                vec![c("container1", None), c("container2", Some("50m"))],
                vec![],
                None,
            )],
            "",
            Err("missing request for cpu in container container1 of Pod test-pod"),
        ),
        (
            "pod-level requests override missing container requests",
            vec![pod(
                vec![c("container1", None), c("container2", Some("50m"))],
                vec![],
                Some("800m"),
            )],
            "",
            Ok(vec![800]),
        ),
        (
            "a named container's request only",
            vec![pod(two(), vec![], None)],
            "container1",
            Ok(vec![100]),
        ),
        (
            "a named container ignores pod-level requests",
            vec![pod(two(), vec![], Some("800m"))],
            "container1",
            Ok(vec![100]),
        ),
        (
            "restartable init containers count, others do not",
            vec![pod(
                vec![c("container1", Some("100m"))],
                vec![c("init-container1", Some("20m")), sidecar],
                None,
            )],
            "",
            Ok(vec![150]),
        ),
        (
            "a named container that does not exist",
            vec![pod(two(), vec![], None)],
            "non-existent-container",
            Err("container non-existent-container not found in Pod test-pod"),
        ),
    ];
    for (name, pods, container, want) in cases {
        let got = calculate_requests(&pods, container, "cpu")
            .map(|m| m.into_values().collect::<Vec<_>>())
            .map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_string), "{name}");
    }
}

#[test]
fn tolerances_print_as_upstream() {
    let t = Tolerances {
        scale_down: 0.1,
        scale_up: 0.05,
    };
    assert_eq!(t.to_string(), "[down:10.0%, up:5.0%]");
    assert!(t.is_within(0.9) && t.is_within(1.05) && !t.is_within(1.06) && !t.is_within(0.89));
}
