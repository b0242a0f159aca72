//! [`MetricsClient`] over the aggregated metrics APIs, as upstream's REST
//! metrics client: `metrics.k8s.io/v1beta1` PodMetrics, the preferred
//! version of `custom.metrics.k8s.io` (Pods and Object metrics) and
//! `external.metrics.k8s.io/v1beta1`. Errors keep upstream's wording, so an
//! HPA whose metrics backend is missing reads as it does upstream
//! (`... the server could not find the requested resource (get pods.metrics.k8s.io)`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::autoscaling::v2::CrossVersionObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::core::GroupVersionKind;
use serde_json::Value;

use berth_api::quantity::Quantity;
use berth_api::selector::LabelSelector;

use super::{
    MetricsApi, MetricsClient, MetricsError, PodMetric, PodMetricsInfo, RawContainerMetrics,
    RawPodMetrics, pod_metrics_info,
};
use crate::nodelifecycle::parse_duration;

/// The custom metrics group upstream looks up before each query.
const CUSTOM_METRICS_GROUP: &str = "custom.metrics.k8s.io";
/// Upstream's `metricServerDefaultMetricWindow`, for samples without `windowSeconds`.
const DEFAULT_METRIC_WINDOW: Duration = Duration::from_secs(60);
/// How long the custom metrics version found through discovery is trusted
/// (upstream invalidates it once per sync period).
const DISCOVERY_TTL: Duration = Duration::from_secs(15);

/// Reads metrics through the API server (and so through API aggregation).
pub struct KubeMetricsClient {
    client: kube::Client,
    /// The preferred custom metrics version (`None`: the group is not
    /// served) and when it was looked up.
    custom_version: Mutex<Option<(Instant, Option<String>)>>,
}

impl KubeMetricsClient {
    pub fn new(client: kube::Client) -> Self {
        KubeMetricsClient {
            client,
            custom_version: Mutex::new(None),
        }
    }

    /// GETs `path` with `query`; failures are worded by [`api_error_text`]
    /// for `resource` (and `name`).
    async fn get_json(
        &self,
        path: &str,
        query: &[(&str, String)],
        resource: &str,
        name: &str,
    ) -> Result<Value, String> {
        let mut uri = path.to_string();
        let mut sep = '?';
        for (k, v) in query.iter().filter(|(_, v)| !v.is_empty()) {
            uri.push(sep);
            uri.push_str(k);
            uri.push('=');
            uri.push_str(&query_escape(v));
            sep = '&';
        }
        // kube builds the request (method, headers); only its target differs.
        let mut req = kube::core::Request::new(path)
            .list(&ListParams::default())
            .map_err(|e| e.to_string())?;
        *req.uri_mut() = uri.parse().map_err(|e| format!("{uri}: {e}"))?;
        self.client
            .request::<Value>(req)
            .await
            .map_err(|e| api_error_text(&e, resource, name))
    }

    /// Upstream's AvailableAPIsGetter: the group's preferred version, from
    /// discovery, cached for [`DISCOVERY_TTL`].
    async fn custom_metrics_version(&self) -> Result<String, String> {
        if let Some((at, version)) = lock(&self.custom_version).clone()
            && at.elapsed() < DISCOVERY_TTL
        {
            return version.ok_or_else(no_custom_metrics_api);
        }
        let groups = self
            .client
            .list_api_groups()
            .await
            .map_err(|e| api_error_text(&e, "", ""))?;
        let version = groups
            .groups
            .iter()
            .find(|g| g.name == CUSTOM_METRICS_GROUP)
            .and_then(|g| {
                g.preferred_version
                    .as_ref()
                    .map(|v| v.version.clone())
                    .or_else(|| g.versions.first().map(|v| v.version.clone()))
            });
        *lock(&self.custom_version) = Some((Instant::now(), version.clone()));
        version.ok_or_else(no_custom_metrics_api)
    }

    /// Upstream's qualResourceForKind: `deployments.apps`, `pods`.
    async fn qualified_resource(
        &self,
        object: &CrossVersionObjectReference,
    ) -> Result<String, String> {
        let api_version = object.api_version.as_deref().unwrap_or_default();
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gk = if group.is_empty() {
            object.kind.clone()
        } else {
            format!("{}.{group}", object.kind)
        };
        let gvk = GroupVersionKind::gvk(group, version, &object.kind);
        match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok((ar, _)) if ar.group.is_empty() => Ok(ar.plural),
            Ok((ar, _)) => Ok(format!("{}.{}", ar.plural, ar.group)),
            Err(e) => Err(format!(
                "unable to map kind {gk} to resource: {}",
                api_error_text(&e, "", "")
            )),
        }
    }
}

fn no_custom_metrics_api() -> String {
    format!("no custom metrics API ({CUSTOM_METRICS_GROUP}) registered")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded value is a plain cache entry; a panic cannot corrupt it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn fetch(api: MetricsApi, message: String) -> MetricsError {
    MetricsError::Fetch { api, message }
}

impl MetricsClient for KubeMetricsClient {
    async fn get_resource_metric(
        &self,
        resource: &str,
        namespace: &str,
        selector: &LabelSelector,
        container: &str,
    ) -> Result<(PodMetricsInfo, Timestamp), MetricsError> {
        let path = format!("/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods");
        let list = self
            .get_json(
                &path,
                &[("labelSelector", selector_query(selector))],
                "pods.metrics.k8s.io",
                "",
            )
            .await
            .map_err(|m| fetch(MetricsApi::Resource, m))?;
        let items = parse_pod_metrics(&list);
        let Some(first) = items.first() else {
            return Err(MetricsError::NoMetrics {
                api: MetricsApi::Resource,
            });
        };
        let timestamp = first.timestamp;
        Ok((pod_metrics_info(&items, resource, container), timestamp))
    }

    async fn get_raw_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &LabelSelector,
        metric_selector: &LabelSelector,
    ) -> Result<(PodMetricsInfo, Timestamp), MetricsError> {
        let version = self
            .custom_metrics_version()
            .await
            .map_err(|m| fetch(MetricsApi::Custom, m))?;
        let path = format!(
            "/apis/{CUSTOM_METRICS_GROUP}/{version}/namespaces/{namespace}/pods/*/{metric_name}"
        );
        let list = self
            .get_json(
                &path,
                &[
                    ("labelSelector", selector_query(selector)),
                    ("metricLabelSelector", selector_query(metric_selector)),
                ],
                "pods.custom.metrics.k8s.io",
                "*",
            )
            .await
            .map_err(|m| fetch(MetricsApi::Custom, m))?;
        let values = parse_metric_values(&list);
        let Some(first) = values.first() else {
            return Err(MetricsError::NoMetrics {
                api: MetricsApi::Custom,
            });
        };
        let timestamp = first.timestamp;
        let res = values
            .into_iter()
            .map(|v| {
                (
                    v.object_name,
                    PodMetric {
                        timestamp: v.timestamp,
                        window: v.window,
                        value: v.value,
                    },
                )
            })
            .collect();
        Ok((res, timestamp))
    }

    async fn get_object_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        object: &CrossVersionObjectReference,
        metric_selector: &LabelSelector,
    ) -> Result<(i64, Timestamp), MetricsError> {
        let version = self
            .custom_metrics_version()
            .await
            .map_err(|m| fetch(MetricsApi::Custom, m))?;
        let is_namespace = object.kind == "Namespace"
            && !object
                .api_version
                .as_deref()
                .unwrap_or_default()
                .contains('/');
        // A Namespace's metrics live under `metrics`; CrossVersionObjectReference
        // never escapes the HPA's namespace, so its name is ignored as upstream.
        let (path, resource) = if is_namespace {
            (
                format!(
                    "/apis/{CUSTOM_METRICS_GROUP}/{version}/namespaces/{namespace}/metrics/{metric_name}"
                ),
                "metrics.custom.metrics.k8s.io".to_string(),
            )
        } else {
            let qualified = self
                .qualified_resource(object)
                .await
                .map_err(|m| fetch(MetricsApi::Custom, m))?;
            (
                format!(
                    "/apis/{CUSTOM_METRICS_GROUP}/{version}/namespaces/{namespace}/{qualified}/{}/{metric_name}",
                    object.name
                ),
                format!("{qualified}.custom.metrics.k8s.io"),
            )
        };
        let list = self
            .get_json(
                &path,
                &[("metricLabelSelector", selector_query(metric_selector))],
                &resource,
                &object.name,
            )
            .await
            .map_err(|m| fetch(MetricsApi::Custom, m))?;
        let values = parse_metric_values(&list);
        match values.as_slice() {
            [one] => Ok((one.value, one.timestamp)),
            other => Err(fetch(
                MetricsApi::Custom,
                format!(
                    "the custom metrics API server returned {} results when we asked for exactly one",
                    other.len()
                ),
            )),
        }
    }

    async fn get_external_metric(
        &self,
        metric_name: &str,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<(Vec<i64>, Timestamp), MetricsError> {
        let path =
            format!("/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric_name}");
        let list = self
            .get_json(
                &path,
                &[("labelSelector", selector_query(selector))],
                &format!("{metric_name}.external.metrics.k8s.io"),
                "",
            )
            .await
            .map_err(|m| fetch(MetricsApi::External, m))?;
        let items = items(&list);
        let Some(first) = items.first() else {
            return Err(MetricsError::NoMetrics {
                api: MetricsApi::External,
            });
        };
        let timestamp = timestamp_of(first.get("timestamp"));
        let values = items.iter().map(|m| milli_of(m.get("value"))).collect();
        Ok((values, timestamp))
    }
}

/// A selector as a query value; "nothing" (a missing metric selector) sends
/// no restriction, as upstream's `labels.Nothing().String()` is empty.
fn selector_query(s: &LabelSelector) -> String {
    if s.matches_nothing() {
        String::new()
    } else {
        s.to_string()
    }
}

/// The text client-go gives a failed request: the server's message, or for
/// the statuses it words itself (an unserved group's 404, an unavailable
/// APIService's 503) its generic message and `(get <resource> [<name>])`.
pub fn api_error_text(err: &kube::Error, resource: &str, name: &str) -> String {
    let kube::Error::Api(status) = err else {
        return err.to_string();
    };
    let generic = match status.code {
        404 => "the server could not find the requested resource",
        503 => "the server is currently unable to handle the request",
        _ => return status.message.clone(),
    };
    // A 404 naming a specific object ("x not found") is already precise.
    if status.code == 404 && !status.message.is_empty() && status.message != generic {
        return status.message.clone();
    }
    match (resource.is_empty(), name.is_empty()) {
        (true, _) => generic.to_string(),
        (false, true) => format!("{generic} (get {resource})"),
        (false, false) => format!("{generic} (get {resource} {name})"),
    }
}

/// Percent-encodes a query value (everything but RFC 3986's unreserved).
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn items(list: &Value) -> &[Value] {
    list.get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Go's zero time when absent, the earliest instant.
fn timestamp_of(v: Option<&Value>) -> Timestamp {
    v.and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(Timestamp::MIN)
}

fn milli_of(v: Option<&Value>) -> i64 {
    quantity_milli(v).unwrap_or(0)
}

fn quantity_milli(v: Option<&Value>) -> Option<i64> {
    let q = match v? {
        Value::String(s) => Quantity::parse(s).ok()?,
        other => Quantity::from_json(other).ok()?,
    };
    Some(q.milli_value())
}

/// Decodes a PodMetricsList (`metrics.k8s.io/v1beta1`).
pub fn parse_pod_metrics(list: &Value) -> Vec<RawPodMetrics> {
    items(list)
        .iter()
        .map(|m| RawPodMetrics {
            name: m
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            timestamp: timestamp_of(m.get("timestamp")),
            window: m
                .get("window")
                .and_then(Value::as_str)
                .and_then(|w| parse_duration(w).ok())
                .unwrap_or_default(),
            containers: m
                .get("containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| RawContainerMetrics {
                    name: c
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    usage: c
                        .get("usage")
                        .and_then(Value::as_object)
                        .into_iter()
                        .flatten()
                        .filter_map(|(r, q)| Some((r.clone(), quantity_milli(Some(q))?)))
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// One custom metrics MetricValue (v1beta1 and v1beta2 share these fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricValue {
    pub object_name: String,
    pub timestamp: Timestamp,
    pub window: Duration,
    pub value: i64,
}

/// Decodes a custom metrics MetricValueList.
pub fn parse_metric_values(list: &Value) -> Vec<MetricValue> {
    items(list)
        .iter()
        .map(|m| MetricValue {
            object_name: m
                .pointer("/describedObject/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            timestamp: timestamp_of(m.get("timestamp")),
            window: m
                .get("windowSeconds")
                .and_then(Value::as_u64)
                .map_or(DEFAULT_METRIC_WINDOW, Duration::from_secs),
            value: milli_of(m.get("value")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pod_metrics_list_is_decoded_in_milli_units() {
        let list = json!({"kind": "PodMetricsList", "items": [{
            "metadata": {"name": "web-1", "namespace": "default"},
            "timestamp": "2026-01-01T00:00:00Z",
            "window": "30s",
            "containers": [
                {"name": "app", "usage": {"cpu": "250m", "memory": "100Mi"}},
                {"name": "sidecar", "usage": {"cpu": "1", "memory": "1Ki"}}
            ]
        }]});
        let items = parse_pod_metrics(&list);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].name, "web-1");
        assert_eq!(items[0].window, Duration::from_secs(30));
        assert_eq!(items[0].timestamp.as_second(), 1_767_225_600);
        let cpu = pod_metrics_info(&items, "cpu", "");
        assert_eq!(cpu["web-1"].value, 1250);
        let mem = pod_metrics_info(&items, "memory", "app");
        assert_eq!(mem["web-1"].value, 100 * 1024 * 1024 * 1000);
    }

    #[test]
    fn metric_values_default_their_window() {
        let list = json!({"items": [
            {"describedObject": {"kind": "Pod", "name": "a"}, "metric": {"name": "qps"},
             "timestamp": "2026-01-01T00:00:00Z", "value": "1500m"},
            {"describedObject": {"kind": "Pod", "name": "b"}, "metric": {"name": "qps"},
             "timestamp": "2026-01-01T00:00:00Z", "windowSeconds": 30, "value": "2"}
        ]});
        let values = parse_metric_values(&list);
        assert_eq!(
            values
                .iter()
                .map(|v| (v.object_name.as_str(), v.window.as_secs(), v.value))
                .collect::<Vec<_>>(),
            vec![("a", 60, 1500), ("b", 30, 2000)]
        );
    }

    fn api_err(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn request_errors_read_as_client_gos() {
        let cases = [
            (
                api_err(404, "the server could not find the requested resource"),
                "pods.metrics.k8s.io",
                "",
                "the server could not find the requested resource (get pods.metrics.k8s.io)",
            ),
            (
                api_err(404, ""),
                "pods.custom.metrics.k8s.io",
                "*",
                "the server could not find the requested resource (get pods.custom.metrics.k8s.io *)",
            ),
            (
                api_err(503, "service unavailable"),
                "pods.metrics.k8s.io",
                "",
                "the server is currently unable to handle the request (get pods.metrics.k8s.io)",
            ),
            (
                api_err(404, "deployments.apps \"web\" not found"),
                "deployments.apps",
                "web",
                "deployments.apps \"web\" not found",
            ),
            (api_err(403, "forbidden: nope"), "x", "", "forbidden: nope"),
        ];
        for (err, resource, name, want) in cases {
            assert_eq!(api_error_text(&err, resource, name), want);
        }
    }

    #[test]
    fn query_values_are_escaped() {
        assert_eq!(
            query_escape("app=web,tier in (a,b)"),
            "app%3Dweb%2Ctier%20in%20%28a%2Cb%29"
        );
        assert_eq!(query_escape("a.b-c_d~"), "a.b-c_d~");
    }
}
