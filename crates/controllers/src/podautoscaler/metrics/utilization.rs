//! Upstream's `utilization.go`: the ratio of observed to target usage.

use std::collections::BTreeMap;

use super::PodMetricsInfo;

/// What [`resource_utilization_ratio`] found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResourceUtilization {
    /// Current utilization over the target (1.0 = on target).
    pub ratio: f64,
    /// Current utilization, in percent of the requests.
    pub utilization: i32,
    /// The mean raw value over the pods that have a request.
    pub raw_average: i64,
}

/// Upstream's GetResourceUtilizationRatio: metrics of pods without a known
/// request are extraneous and skipped. `None` when no metric matched a
/// request ("no metrics returned matched known pods").
pub fn resource_utilization_ratio(
    metrics: &PodMetricsInfo,
    requests: &BTreeMap<String, i64>,
    target_utilization: i32,
) -> Option<ResourceUtilization> {
    // i128 so that sums of milli-values and the ×100 never overflow.
    let mut metrics_total: i128 = 0;
    let mut requests_total: i128 = 0;
    let mut entries: i128 = 0;
    for (pod, metric) in metrics {
        let Some(request) = requests.get(pod) else {
            continue;
        };
        metrics_total += i128::from(metric.value);
        requests_total += i128::from(*request);
        entries += 1;
    }
    if requests_total == 0 {
        return None;
    }
    let utilization = clamp_i32(metrics_total * 100 / requests_total);
    Some(ResourceUtilization {
        ratio: f64::from(utilization) / f64::from(target_utilization),
        utilization,
        raw_average: clamp_i64(metrics_total / entries),
    })
}

/// Upstream's GetMetricUsageRatio: the mean value over the target, and the
/// mean value (integer division, as upstream). `metrics` must not be empty.
pub fn metric_usage_ratio(metrics: &PodMetricsInfo, target_usage: i64) -> (f64, i64) {
    let total: i128 = metrics.values().map(|m| i128::from(m.value)).sum();
    let count = i128::try_from(metrics.len()).unwrap_or(i128::MAX).max(1);
    let usage = clamp_i64(total / count);
    (usage as f64 / target_usage as f64, usage)
}

fn clamp_i32(v: i128) -> i32 {
    v.clamp(i128::from(i32::MIN), i128::from(i32::MAX)) as i32
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::jiff::Timestamp;

    use super::super::PodMetric;
    use super::*;

    fn metrics(values: &[(&str, i64)]) -> PodMetricsInfo {
        values
            .iter()
            .map(|(n, v)| {
                (
                    (*n).to_string(),
                    PodMetric {
                        timestamp: Timestamp::UNIX_EPOCH,
                        window: Duration::from_secs(60),
                        value: *v,
                    },
                )
            })
            .collect()
    }

    type Samples = &'static [(&'static str, i64)];
    /// (ratio, utilization, raw average)
    type Found = Option<(f64, i32, i64)>;

    #[test]
    fn resource_ratio_table() {
        let requests: BTreeMap<String, i64> =
            [("a".to_string(), 1000), ("b".to_string(), 1000)].into();
        // (metrics, target, ratio, utilization, raw average)
        let cases: &[(Samples, i32, Found)] = &[
            (&[("a", 500), ("b", 700)], 30, Some((2.0, 60, 600))),
            // A metric without a request is extraneous.
            (&[("a", 500), ("x", 9000)], 50, Some((1.0, 50, 500))),
            // Truncation of the percentage, as upstream's integer division.
            (&[("a", 1), ("b", 0)], 100, Some((0.0, 0, 0))),
            (&[("x", 100)], 100, None),
        ];
        for (m, target, want) in cases {
            let got = resource_utilization_ratio(&metrics(m), &requests, *target)
                .map(|u| (u.ratio, u.utilization, u.raw_average));
            assert_eq!(got, *want, "{m:?}");
        }
    }

    #[test]
    fn metric_ratio_table() {
        let cases: &[(Samples, i64, f64, i64)] = &[
            (
                &[("a", 20000), ("b", 10000), ("c", 30000)],
                15000,
                20000.0 / 15000.0,
                20000,
            ),
            (
                &[("a", 20000), ("b", 21000), ("c", 21000)],
                20000,
                20666.0 / 20000.0,
                20666,
            ),
        ];
        for (m, target, ratio, usage) in cases {
            assert_eq!(metric_usage_ratio(&metrics(m), *target), (*ratio, *usage));
        }
    }
}
