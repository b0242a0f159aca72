//! Service environment variables (pure): upstream kubelet's
//! `getServiceEnvVarMap` and `envvars.FromServices`.
//!
//! For every Service with a cluster IP in the pod's namespace (when
//! `enableServiceLinks`, the default) and always for `kubernetes` in
//! `default`, a container gets `{SVC}_SERVICE_HOST`, `{SVC}_SERVICE_PORT`,
//! `{SVC}_SERVICE_PORT_{NAME}` per named port, and the Docker-link variables
//! `{SVC}_PORT`, `{SVC}_PORT_{port}_{PROTO}` and its `_PROTO`, `_PORT`,
//! `_ADDR`. Names are upper-cased with `-` → `_`. Headless Services and
//! Services without a cluster IP give nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};

/// Services whose variables every pod gets, from `default` (upstream's `masterServices`).
const MASTER_SERVICES: &[&str] = &["kubernetes"];

/// `makeEnvVariableName`: upper case, `-` → `_`.
pub fn env_name(service: &str) -> String {
    service.replace('-', "_").to_uppercase()
}

fn cluster_ip(svc: &Service) -> Option<&str> {
    svc.spec
        .as_ref()?
        .cluster_ip
        .as_deref()
        .filter(|ip| !ip.is_empty() && *ip != "None")
}

/// `net.JoinHostPort`: IPv6 addresses in brackets.
fn join_host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The variables of one Service (`FromServices` for one entry).
pub fn service_vars(svc: &Service, out: &mut BTreeMap<String, String>) {
    let Some(ip) = cluster_ip(svc) else { return };
    let prefix = env_name(svc.metadata.name.as_deref().unwrap_or_default());
    out.insert(format!("{prefix}_SERVICE_HOST"), ip.to_string());
    let ports = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    let Some(first) = ports.first() else { return };
    let port_var = format!("{prefix}_SERVICE_PORT");
    out.insert(port_var.clone(), first.port.to_string());
    for p in ports {
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            out.insert(format!("{port_var}_{}", env_name(name)), p.port.to_string());
        }
    }
    for (i, p) in ports.iter().enumerate() {
        let proto = p
            .protocol
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("TCP");
        let url = format!("{}://{}", proto.to_lowercase(), join_host_port(ip, p.port));
        if i == 0 {
            out.insert(format!("{prefix}_PORT"), url.clone());
        }
        let pp = format!("{prefix}_PORT_{}_{}", p.port, proto.to_uppercase());
        out.insert(format!("{pp}_PROTO"), proto.to_lowercase());
        out.insert(format!("{pp}_PORT"), p.port.to_string());
        out.insert(format!("{pp}_ADDR"), ip.to_string());
        out.insert(pp, url);
    }
}

/// The service variables of a pod in `namespace` given every Service the
/// node knows (any namespace): upstream's `getServiceEnvVarMap`. A Service of
/// the pod's own namespace wins over a master Service of the same name.
pub fn service_env(
    namespace: &str,
    enable_service_links: bool,
    services: &[Service],
) -> BTreeMap<String, String> {
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for svc in services.iter().filter(|s| cluster_ip(s).is_some()) {
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
        if ns == namespace && enable_service_links {
            chosen.insert(name, svc);
        } else if ns == "default" && MASTER_SERVICES.contains(&name) {
            chosen.entry(name).or_insert(svc);
        }
    }
    let mut out = BTreeMap::new();
    for svc in chosen.values() {
        service_vars(svc, &mut out);
    }
    out
}

/// [`service_env`] for a pod (its namespace and `enableServiceLinks`, default true).
pub fn pod_service_env(pod: &Pod, services: &[Service]) -> BTreeMap<String, String> {
    let enable = pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    service_env(
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        enable,
        services,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(ns: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": ports}}))
        .unwrap()
    }

    fn kubernetes() -> Service {
        svc(
            "default",
            "kubernetes",
            "10.43.0.1",
            json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]),
        )
    }

    fn pairs(m: &BTreeMap<String, String>) -> Vec<(&str, &str)> {
        m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    #[test]
    fn kubernetes_service_as_every_pod_sees_it() {
        let env = service_env("other", false, &[kubernetes()]);
        assert_eq!(
            pairs(&env),
            vec![
                ("KUBERNETES_PORT", "tcp://10.43.0.1:443"),
                ("KUBERNETES_PORT_443_TCP", "tcp://10.43.0.1:443"),
                ("KUBERNETES_PORT_443_TCP_ADDR", "10.43.0.1"),
                ("KUBERNETES_PORT_443_TCP_PORT", "443"),
                ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
                ("KUBERNETES_SERVICE_HOST", "10.43.0.1"),
                ("KUBERNETES_SERVICE_PORT", "443"),
                ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ]
        );
    }

    #[test]
    fn upstream_documented_redis_example() {
        // The "redis-primary" example from the Kubernetes docs (Service discovery:
        // environment variables), unnamed port 6379.
        let s = svc(
            "app",
            "redis-primary",
            "10.0.0.11",
            json!([{"port": 6379, "protocol": "TCP"}]),
        );
        let mut env = BTreeMap::new();
        service_vars(&s, &mut env);
        assert_eq!(
            pairs(&env),
            vec![
                ("REDIS_PRIMARY_PORT", "tcp://10.0.0.11:6379"),
                ("REDIS_PRIMARY_PORT_6379_TCP", "tcp://10.0.0.11:6379"),
                ("REDIS_PRIMARY_PORT_6379_TCP_ADDR", "10.0.0.11"),
                ("REDIS_PRIMARY_PORT_6379_TCP_PORT", "6379"),
                ("REDIS_PRIMARY_PORT_6379_TCP_PROTO", "tcp"),
                ("REDIS_PRIMARY_SERVICE_HOST", "10.0.0.11"),
                ("REDIS_PRIMARY_SERVICE_PORT", "6379"),
            ]
        );
    }

    #[test]
    fn which_services_a_pod_gets() {
        let services = vec![
            kubernetes(),
            svc(
                "app",
                "web",
                "10.43.5.5",
                json!([{"name": "http", "port": 80}, {"name": "dns-udp", "port": 53, "protocol": "UDP"}]),
            ),
            svc("app", "headless", "None", json!([{"port": 80}])),
            svc("app", "pending", "", json!([{"port": 80}])),
            svc("elsewhere", "db", "10.43.6.6", json!([{"port": 5432}])),
            svc("fd", "v6", "fd00::10", json!([{"port": 8080}])),
        ];
        let cases: Vec<(&str, bool, Vec<&str>, Vec<&str>)> = vec![
            (
                "app",
                true,
                vec![
                    "WEB_SERVICE_HOST",
                    "WEB_SERVICE_PORT_HTTP",
                    "WEB_SERVICE_PORT_DNS_UDP",
                    "WEB_PORT_53_UDP_PROTO",
                    "KUBERNETES_SERVICE_HOST",
                ],
                vec![
                    "HEADLESS_SERVICE_HOST",
                    "PENDING_SERVICE_HOST",
                    "DB_SERVICE_HOST",
                ],
            ),
            (
                "app",
                false,
                vec!["KUBERNETES_SERVICE_HOST"],
                vec!["WEB_SERVICE_HOST"],
            ),
            (
                "elsewhere",
                true,
                vec!["DB_SERVICE_HOST"],
                vec!["WEB_SERVICE_HOST"],
            ),
        ];
        for (ns, links, present, absent) in cases {
            let env = service_env(ns, links, &services);
            for k in present {
                assert!(env.contains_key(k), "{ns} {links}: {k} missing");
            }
            for k in absent {
                assert!(!env.contains_key(k), "{ns} {links}: {k} present");
            }
        }
        let env = service_env("app", true, &services);
        assert_eq!(env["WEB_PORT_53_UDP"], "udp://10.43.5.5:53");
        assert_eq!(env["WEB_SERVICE_PORT"], "80");
        let v6 = service_env("fd", true, &services);
        assert_eq!(v6["V6_PORT"], "tcp://[fd00::10]:8080");
    }

    #[test]
    fn own_namespace_kubernetes_service_wins() {
        let mine = svc("app", "kubernetes", "10.43.9.9", json!([{"port": 80}]));
        let env = service_env("app", true, &[kubernetes(), mine.clone()]);
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.43.9.9");
        let env = service_env("app", true, &[mine, kubernetes()]);
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.43.9.9");
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"namespace": "app"}, "spec": {"containers": [], "enableServiceLinks": false}}),
        )
        .unwrap();
        assert_eq!(
            pod_service_env(&pod, &[kubernetes()])["KUBERNETES_SERVICE_PORT"],
            "443"
        );
    }
}
