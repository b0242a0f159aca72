//! What metrics-server's manifest installs, applied by Berth at start (as k3s
//! applies its bundled metrics-server manifest): the `system:metrics-server`
//! and `system:aggregated-metrics-reader` ClusterRoles (the latter aggregated
//! into view, edit and admin), the scraper's binding, the selector-less
//! Service `kube-system/metrics-server` with Endpoints at this server's
//! metrics listener (mirrored into an EndpointSlice by the mirroring
//! controller), and the APIService `v1beta1.metrics.k8s.io` pointing at it.

use std::net::SocketAddr;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

/// The user the scraper's client certificate names.
pub const SCRAPER_USER: &str = "system:metrics-server";
const FIELD_MANAGER: &str = "berth-metrics-server";
const SERVICE_PORT: u16 = 443;

/// The objects, with the plural each is served under.
pub fn objects(addr: SocketAddr) -> Vec<(&'static str, Value)> {
    let labels = json!({"k8s-app": "metrics-server"});
    vec![
        (
            "clusterroles",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "system:aggregated-metrics-reader", "labels": {
                    "k8s-app": "metrics-server",
                    "rbac.authorization.k8s.io/aggregate-to-admin": "true",
                    "rbac.authorization.k8s.io/aggregate-to-edit": "true",
                    "rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                "rules": [{"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]}]
            }),
        ),
        (
            "clusterroles",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "system:metrics-server", "labels": labels},
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
                    {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]}
                ]
            }),
        ),
        (
            "clusterrolebindings",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "system:metrics-server", "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:metrics-server"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": SCRAPER_USER}]
            }),
        ),
        (
            "services",
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "metrics-server", "namespace": "kube-system", "labels": labels},
                "spec": {"ports": [{"name": "https", "port": SERVICE_PORT, "protocol": "TCP", "targetPort": addr.port()}]}
            }),
        ),
        (
            "endpoints",
            json!({
                "apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": "metrics-server", "namespace": "kube-system", "labels": labels},
                "subsets": [{"addresses": [{"ip": addr.ip().to_string()}],
                             "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}]}]
            }),
        ),
        (
            "apiservices",
            json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": "v1beta1.metrics.k8s.io", "labels": labels},
                "spec": {
                    "service": {"name": "metrics-server", "namespace": "kube-system", "port": SERVICE_PORT},
                    "group": "metrics.k8s.io", "version": "v1beta1",
                    "insecureSkipTLSVerify": true,
                    "groupPriorityMinimum": 100, "versionPriority": 100
                }
            }),
        ),
    ]
}

/// Server-side applies every object (forcing: Berth owns them).
pub async fn apply(client: &kube::Client, addr: SocketAddr) -> Result<(), kube::Error> {
    for (plural, obj) in objects(addr) {
        let api_version = obj["apiVersion"].as_str().unwrap_or("v1");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, obj["kind"].as_str().unwrap_or(""));
        let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&obj),
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_leads_to_the_listener() {
        let objs = objects("192.0.2.7:4443".parse().unwrap());
        let find = |kind: &str| {
            objs.iter()
                .find(|(_, o)| o["kind"] == kind)
                .unwrap()
                .1
                .clone()
        };
        let svc = find("Service");
        assert!(
            svc["spec"].get("selector").is_none(),
            "selector-less: its endpoints are Berth's"
        );
        let ep = find("Endpoints");
        assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "192.0.2.7");
        assert_eq!(
            ep["subsets"][0]["ports"][0],
            json!({"name": "https", "port": 4443, "protocol": "TCP"})
        );
        let apisvc = find("APIService");
        assert_eq!(
            apisvc["spec"]["service"],
            json!({"name": "metrics-server", "namespace": "kube-system", "port": 443})
        );
    }
}
