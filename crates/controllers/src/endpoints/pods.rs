//! What a pod contributes to a Service's endpoints (pure), shared by the
//! Endpoints and EndpointSlice controllers (upstream's `endpointsliceutil`
//! and `podutil` helpers).

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

/// `podutil.IsPodReady`: the Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// `ShouldPodBeInEndpoints`: the pod has an IP, is not finished for good
/// (by its restart policy), and is not terminating unless `include_terminating`.
pub fn should_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    let status = pod.status.as_ref();
    let has_ip = status.is_some_and(|s| {
        s.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty())
            || s.pod_ips.as_ref().is_some_and(|ips| !ips.is_empty())
    });
    if !has_ip {
        return false;
    }
    if !include_terminating && is_terminating(pod) {
        return false;
    }
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
    match pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
    {
        "Never" => phase != "Failed" && phase != "Succeeded",
        "OnFailure" => phase != "Succeeded",
        _ => true,
    }
}

/// `podutil.FindPort`: a numeric targetPort as is; a named one is the
/// container port of that name and the Service port's protocol.
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    let proto = port.protocol.as_deref().unwrap_or("TCP");
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(n)) if *n == 0 => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            spec.containers
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .find(|cp| {
                    cp.name.as_deref() == Some(name.as_str())
                        && cp.protocol.as_deref().unwrap_or("TCP") == proto
                })
                .map(|cp| cp.container_port)
        }
    }
}

/// The service's IP family (`ipFamilies[0]`, IPv4 when unset).
pub fn service_family(svc: &Service) -> &str {
    svc.spec
        .as_ref()
        .and_then(|s| s.ip_families.as_ref())
        .and_then(|f| f.first())
        .map(String::as_str)
        .unwrap_or("IPv4")
}

fn family_of(ip: &str) -> Option<&'static str> {
    match ip.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(_) => Some("IPv4"),
        std::net::IpAddr::V6(_) => Some("IPv6"),
    }
}

/// The pod's IP of `family` (`status.podIPs`, then `status.podIP`).
pub fn pod_ip(pod: &Pod, family: &str) -> Option<String> {
    let status = pod.status.as_ref()?;
    status
        .pod_ips
        .iter()
        .flatten()
        .map(|p| p.ip.as_str())
        .chain(status.pod_ip.as_deref())
        .find(|ip| family_of(ip) == Some(family))
        .map(String::from)
}

/// A pod's hostname in the Service's DNS: only when its subdomain names the Service.
pub fn hostname(pod: &Pod, svc: &Service) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let host = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    let same_ns = pod.metadata.namespace == svc.metadata.namespace;
    (same_ns && spec.subdomain.as_deref() == svc.metadata.name.as_deref()).then(|| host.to_string())
}

pub fn target_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

pub fn node_name(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
}

/// The time of the last change behind the endpoints (upstream's
/// `TriggerTimeTracker`, simplified to state): the latest of the Service's
/// creation and each pod's creation and Ready transition.
pub fn last_change_trigger_time(svc: &Service, pods: &[&Pod]) -> Option<Timestamp> {
    let svc_time = svc.metadata.creation_timestamp.as_ref().map(|t| t.0);
    pods.iter()
        .flat_map(|p| {
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .filter(|c| c.type_ == "Ready")
                .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0));
            ready.chain(p.metadata.creation_timestamp.as_ref().map(|t| t.0))
        })
        .chain(svc_time)
        .max()
}

/// RFC 3339, fraction only when non-zero (as Go's `time.RFC3339Nano`).
pub fn format_time(t: Timestamp) -> String {
    t.to_string()
}

/// Whether `labels` satisfy a Service's equality selector.
pub fn selector_matches(
    selector: &std::collections::BTreeMap<String, String>,
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> bool {
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn which_pods_count() {
        let cases = [
            (
                json!({"status": {"podIP": "10.42.0.5", "phase": "Running"}}),
                false,
                true,
            ),
            (json!({"status": {"phase": "Running"}}), false, false),
            (
                json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}, "status": {"podIP": "10.42.0.5"}}),
                false,
                false,
            ),
            (
                json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}, "status": {"podIP": "10.42.0.5"}}),
                true,
                true,
            ),
            (
                json!({"spec": {"containers": [], "restartPolicy": "Never"}, "status": {"podIP": "10.42.0.5", "phase": "Failed"}}),
                false,
                false,
            ),
            (
                json!({"spec": {"containers": [], "restartPolicy": "OnFailure"}, "status": {"podIP": "10.42.0.5", "phase": "Failed"}}),
                false,
                true,
            ),
            (
                json!({"spec": {"containers": [], "restartPolicy": "OnFailure"}, "status": {"podIP": "10.42.0.5", "phase": "Succeeded"}}),
                false,
                false,
            ),
        ];
        for (p, include_terminating, want) in cases {
            assert_eq!(
                should_be_in_endpoints(&pod(p.clone()), include_terminating),
                want,
                "{p}"
            );
        }
    }

    #[test]
    fn ports_resolve_per_pod() {
        let p = pod(json!({"spec": {"containers": [
            {"name": "a", "ports": [{"name": "http", "containerPort": 8080}, {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]}}));
        let sp = |tp: serde_json::Value, proto: &str| -> ServicePort {
            serde_json::from_value(json!({"port": 80, "targetPort": tp, "protocol": proto}))
                .unwrap()
        };
        assert_eq!(find_port(&p, &sp(json!("http"), "TCP")), Some(8080));
        assert_eq!(find_port(&p, &sp(json!("http"), "UDP")), None);
        assert_eq!(find_port(&p, &sp(json!("dns"), "UDP")), Some(53));
        assert_eq!(find_port(&p, &sp(json!("nope"), "TCP")), None);
        assert_eq!(find_port(&p, &sp(json!(9090), "TCP")), Some(9090));
    }

    #[test]
    fn hostname_needs_matching_subdomain() {
        let svc: Service =
            serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "a"}})).unwrap();
        let p = |sub: &str| {
            pod(
                json!({"metadata": {"namespace": "a"}, "spec": {"containers": [], "hostname": "h0", "subdomain": sub}}),
            )
        };
        assert_eq!(hostname(&p("web"), &svc).as_deref(), Some("h0"));
        assert_eq!(hostname(&p("other"), &svc), None);
        let dual = pod(
            json!({"status": {"podIP": "10.42.0.5", "podIPs": [{"ip": "10.42.0.5"}, {"ip": "fd00::5"}]}}),
        );
        assert_eq!(pod_ip(&dual, "IPv6").as_deref(), Some("fd00::5"));
        assert_eq!(pod_ip(&dual, "IPv4").as_deref(), Some("10.42.0.5"));
    }
}
