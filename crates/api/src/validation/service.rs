//! Service validation (upstream's `ValidateService` / `ValidateServiceUpdate`).

use std::collections::HashSet;
use std::net::IpAddr;

use serde_json::{Value, json};

use super::meta::validate_labels;
use super::pod::{validate_port_num_or_name, validate_protocol};
use super::{
    FieldError, is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_port_num,
    opt_arr, opt_str,
};

const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const SESSION_AFFINITIES: &[&str] = &["ClientIP", "None"];
const KUBELET_PORT: i64 = 10250;
const IP_MESSAGE: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/// The cluster IPs as the strategy normalises them: `clusterIPs`, or the
/// single `clusterIP` when the list is absent.
fn cluster_ips(spec: &Value) -> Vec<String> {
    let list: Vec<String> = super::jv::arr_at(spec, &["clusterIPs"])
        .iter()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    if !list.is_empty() {
        return list;
    }
    match spec.get("clusterIP").and_then(Value::as_str) {
        Some(ip) if !ip.is_empty() => vec![ip.to_string()],
        _ => Vec::new(),
    }
}

/// Go's `%#v` of a `[]string`.
fn go_string_slice(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| super::go_quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

fn is_headless(spec: &Value) -> bool {
    cluster_ips(spec).first().is_some_and(|ip| ip == "None")
}

pub(super) fn validate_service(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = match obj.get("spec") {
        Some(s @ Value::Object(_)) => s,
        None | Some(Value::Null) => &Value::Null,
        Some(other) => {
            errs.push(FieldError::type_invalid("spec", other, "object"));
            return errs;
        }
    };
    if let Some(old) = old {
        errs.extend(validate_cluster_ip_update(
            spec,
            old.get("spec").unwrap_or(&Value::Null),
        ));
    }
    let stype = opt_str(&mut errs, spec.get("type"), "spec.type").unwrap_or("");
    let ports = opt_arr(&mut errs, spec.get("ports"), "spec.ports");
    let headless = is_headless(spec);
    let ips = cluster_ips(spec);
    if ports.is_empty() && !headless && stype != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    match stype {
        "LoadBalancer" => {
            for (i, p) in ports.iter().enumerate() {
                if p.get("port").and_then(Value::as_i64) == Some(KUBELET_PORT) {
                    errs.push(FieldError::invalid(
                        format!("spec.ports[{i}]"),
                        KUBELET_PORT,
                        format!("may not expose port {KUBELET_PORT} externally since it is used by kubelet"),
                    ));
                }
            }
            if headless {
                errs.push(FieldError::invalid(
                    "spec.clusterIPs[0]",
                    "None",
                    "may not be set to 'None' for LoadBalancer services",
                ));
            }
        }
        "NodePort" if headless => errs.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            "None",
            "may not be set to 'None' for NodePort services",
        )),
        "ExternalName" => {
            if !ips.is_empty() {
                errs.push(FieldError::forbidden(
                    "spec.clusterIPs",
                    "may not be set for ExternalName services",
                ));
            }
            if !super::jv::arr_at(spec, &["ipFamilies"]).is_empty() {
                errs.push(FieldError::forbidden(
                    "spec.ipFamilies",
                    "may not be set for ExternalName services",
                ));
            }
            if spec.get("ipFamilyPolicy").is_some_and(|v| !v.is_null()) {
                errs.push(FieldError::forbidden(
                    "spec.ipFamilyPolicy",
                    "may not be set for ExternalName services",
                ));
            }
            let name = spec
                .get("externalName")
                .and_then(Value::as_str)
                .unwrap_or("");
            let cname = name.strip_suffix('.').unwrap_or(name);
            if cname.is_empty() {
                errs.push(FieldError::required("spec.externalName", ""));
            } else {
                for m in is_dns1123_subdomain(cname) {
                    errs.push(FieldError::invalid("spec.externalName", cname, m));
                }
            }
        }
        _ => {}
    }

    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = format!("spec.ports[{i}]");
        let Some(port) = p.as_object() else {
            errs.push(FieldError::type_invalid(&pp, p, "object"));
            continue;
        };
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(format!("{pp}.name"), ""));
        } else if !name.is_empty() {
            for m in is_dns1123_label(name) {
                errs.push(FieldError::invalid(format!("{pp}.name"), name, m));
            }
            if !names.insert(name.to_string()) {
                errs.push(FieldError::duplicate(format!("{pp}.name"), name));
            }
        }
        match port.get("port") {
            Some(Value::Number(n)) => {
                let n = n.as_i64().unwrap_or(0);
                for m in is_valid_port_num(n) {
                    errs.push(FieldError::invalid(format!("{pp}.port"), n, m));
                }
            }
            Some(other) if !other.is_null() => errs.push(FieldError::type_invalid(
                format!("{pp}.port"),
                other,
                "integer",
            )),
            _ => {
                for m in is_valid_port_num(0) {
                    errs.push(FieldError::invalid(format!("{pp}.port"), 0, m));
                }
            }
        }
        validate_protocol(&mut errs, port.get("protocol"), &format!("{pp}.protocol"));
        validate_port_num_or_name(
            &mut errs,
            port.get("targetPort"),
            &format!("{pp}.targetPort"),
        );
        if let Some(ap) = port.get("appProtocol").and_then(Value::as_str) {
            for m in is_qualified_name(ap) {
                errs.push(FieldError::invalid(format!("{pp}.appProtocol"), ap, m));
            }
        }
    }

    errs.extend(validate_labels(spec.get("selector"), "spec.selector"));

    let affinity = spec
        .get("sessionAffinity")
        .and_then(Value::as_str)
        .unwrap_or("");
    match affinity {
        "" => errs.push(FieldError::required("spec.sessionAffinity", "")),
        "ClientIP" => {
            let timeout = super::jv::get(
                spec,
                &["sessionAffinityConfig", "clientIP", "timeoutSeconds"],
            );
            match timeout.and_then(Value::as_i64) {
                Some(t) if (1..=86400).contains(&t) => {}
                Some(t) => errs.push(FieldError::invalid(
                    "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                    t,
                    "must be greater than 0 and less than 86400",
                )),
                None => errs.push(FieldError::required(
                    "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                    "",
                )),
            }
        }
        "None" => {
            if spec
                .get("sessionAffinityConfig")
                .is_some_and(|v| !v.is_null())
            {
                errs.push(FieldError::forbidden(
                    "spec.sessionAffinityConfig",
                    "must not be set when session affinity is None",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            "spec.sessionAffinity",
            other,
            SESSION_AFFINITIES,
        )),
    }

    if let (Some(first), Some(ip)) = (
        super::jv::arr_at(spec, &["clusterIPs"])
            .first()
            .and_then(Value::as_str),
        spec.get("clusterIP").and_then(Value::as_str),
    ) && first != ip
    {
        errs.push(FieldError::invalid(
            "spec.clusterIPs",
            spec.get("clusterIPs").cloned().unwrap_or(Value::Null),
            "first value must match `clusterIP`",
        ));
    }
    for (i, ip) in ips.iter().enumerate() {
        if ip != "None" && ip.parse::<IpAddr>().is_err() {
            errs.push(FieldError::invalid(
                format!("spec.clusterIPs[{i}]"),
                ip.as_str(),
                IP_MESSAGE,
            ));
        }
    }
    for (i, ip) in super::jv::arr_at(spec, &["externalIPs"]).iter().enumerate() {
        let s = ip.as_str().unwrap_or("");
        if s.parse::<IpAddr>().is_err() {
            errs.push(FieldError::invalid(
                format!("spec.externalIPs[{i}]"),
                s,
                IP_MESSAGE,
            ));
        }
    }

    match stype {
        "" => errs.push(FieldError::required("spec.type", "")),
        t if SERVICE_TYPES.contains(&t) => {}
        other => errs.push(FieldError::not_supported("spec.type", other, SERVICE_TYPES)),
    }
    if stype == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                errs.push(FieldError::forbidden(
                    format!("spec.ports[{i}].nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }

    let mut node_ports = HashSet::new();
    let mut seen_ports = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("");
        let node_port = p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if node_port != 0 && !node_ports.insert((proto.to_string(), node_port)) {
            errs.push(FieldError::duplicate(
                format!("spec.ports[{i}].nodePort"),
                node_port,
            ));
        }
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !seen_ports.insert((proto.to_string(), port)) {
            errs.push(FieldError::duplicate(
                format!("spec.ports[{i}]"),
                json!({"protocol": proto, "port": port}),
            ));
        }
    }

    let externally_accessible = matches!(stype, "LoadBalancer" | "NodePort")
        || (stype == "ClusterIP" && !super::jv::arr_at(spec, &["externalIPs"]).is_empty());
    match spec.get("externalTrafficPolicy").and_then(Value::as_str) {
        None | Some("") => {
            if externally_accessible {
                errs.push(FieldError::required("spec.externalTrafficPolicy", ""));
            }
        }
        Some(p) if !externally_accessible => errs.push(FieldError::invalid(
            "spec.externalTrafficPolicy",
            p,
            "may only be set for externally-accessible services",
        )),
        Some("Cluster" | "Local") => {}
        Some(other) => errs.push(FieldError::not_supported(
            "spec.externalTrafficPolicy",
            other,
            &["Cluster", "Local"],
        )),
    }
    match spec.get("internalTrafficPolicy").and_then(Value::as_str) {
        None if matches!(stype, "NodePort" | "LoadBalancer" | "ClusterIP") => {
            errs.push(FieldError::required("spec.internalTrafficPolicy", ""));
        }
        Some(p) if !matches!(p, "Cluster" | "Local") => {
            errs.push(FieldError::not_supported(
                "spec.internalTrafficPolicy",
                p,
                &["Cluster", "Local"],
            ));
        }
        _ => {}
    }
    errs.extend(validate_type_dependent(spec, stype));
    errs
}

const LB_ONLY: &str = "may only be used when `type` is 'LoadBalancer'";

/// Fields that only some types (or families) allow, and their values.
fn validate_type_dependent(spec: &Value, stype: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let lb = stype == "LoadBalancer";
    let set = |k: &str| spec.get(k).is_some_and(|v| !v.is_null());
    let ranges = super::jv::arr_at(spec, &["loadBalancerSourceRanges"]);
    if !ranges.is_empty() && !lb {
        // Upstream's historical capitalisation of this path.
        errs.push(FieldError::forbidden(
            "spec.LoadBalancerSourceRanges",
            LB_ONLY,
        ));
    }
    for (i, r) in ranges.iter().enumerate() {
        let v = r.as_str().unwrap_or("").trim();
        let ok = v
            .split_once('/')
            .is_some_and(|(ip, bits)| ip.parse::<IpAddr>().is_ok() && bits.parse::<u8>().is_ok());
        if !ok {
            errs.push(FieldError::invalid(
                format!("spec.LoadBalancerSourceRanges[{i}]"),
                v,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ));
        }
    }
    if set("allocateLoadBalancerNodePorts") && !lb {
        errs.push(FieldError::forbidden(
            "spec.allocateLoadBalancerNodePorts",
            LB_ONLY,
        ));
    }
    if set("loadBalancerClass") && !lb {
        errs.push(FieldError::forbidden("spec.loadBalancerClass", LB_ONLY));
    }
    let local = spec.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local");
    let hc = spec
        .get("healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if hc != 0 && !(lb && local) {
        errs.push(FieldError::invalid(
            "spec.healthCheckNodePort",
            hc,
            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
        ));
    }
    if let Some(p) = spec.get("ipFamilyPolicy").and_then(Value::as_str)
        && !matches!(p, "SingleStack" | "PreferDualStack" | "RequireDualStack")
    {
        errs.push(FieldError::not_supported(
            "spec.ipFamilyPolicy",
            p,
            &["PreferDualStack", "RequireDualStack", "SingleStack"],
        ));
    }
    let mut seen = HashSet::new();
    for (i, f) in super::jv::arr_at(spec, &["ipFamilies"]).iter().enumerate() {
        let f = f.as_str().unwrap_or("");
        if !matches!(f, "IPv4" | "IPv6") {
            errs.push(FieldError::not_supported(
                format!("spec.ipFamilies[{i}]"),
                f,
                &["IPv4", "IPv6"],
            ));
        }
        if !seen.insert(f) {
            errs.push(FieldError::duplicate(format!("spec.ipFamilies[{i}]"), f));
        }
    }
    if let Some(t) = spec.get("trafficDistribution").and_then(Value::as_str)
        && t != "PreferClose"
    {
        errs.push(FieldError::not_supported(
            "spec.trafficDistribution",
            t,
            &["PreferClose"],
        ));
    }
    errs
}

/// Cluster IPs may be added or released but never changed, except on the
/// way to or from ExternalName.
fn validate_cluster_ip_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ty = |s: &Value| {
        s.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if ty(new) == "ExternalName" || ty(old) == "ExternalName" {
        return errs;
    }
    if is_headless(new) && is_headless(old) {
        return errs;
    }
    let (n, o) = (cluster_ips(new), cluster_ips(old));
    // Upstream prints the new list with Go's %#v.
    let value = |field: String, detail: &str| FieldError {
        kind: super::FieldErrorType::Invalid,
        field,
        value: None,
        detail: format!("{}: {detail}", go_string_slice(&n)),
    };
    if n.len() == o.len() {
        for (i, ip) in o.iter().enumerate() {
            if ip != &n[i] {
                errs.push(value(
                    format!("spec.clusterIPs[{i}]"),
                    "may not change once set",
                ));
            }
        }
    } else if o.len() > n.len() {
        if n.is_empty() {
            errs.push(value(
                "spec.clusterIPs[0]".into(),
                "primary clusterIP can not be unset",
            ));
        }
        if !o.is_empty() && !n.is_empty() && n[0] != o[0] {
            errs.push(value(
                "spec.clusterIPs[0]".into(),
                "may not change once set",
            ));
        }
        if n.len() == 1 && new.get("ipFamilyPolicy").and_then(Value::as_str) != Some("SingleStack")
        {
            errs.push(value("spec.clusterIPs[0]".into(), "`ipFamilyPolicy` must be set to 'SingleStack' when releasing the secondary clusterIP"));
        }
    } else if !o.is_empty() && n[0] != o[0] {
        errs.push(value(
            "spec.clusterIPs[0]".into(),
            "may not change once set",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc() -> Value {
        json!({"spec": {
            "type": "ClusterIP",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}],
            "selector": {"app": "web"},
            "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster"
        }})
    }

    fn set(mut v: Value, ptr: &str, x: Value) -> Value {
        if let Some(slot) = v.pointer_mut(ptr) {
            *slot = x;
        } else if let Some((parent, key)) = ptr.rsplit_once('/')
            && let Some(Value::Object(m)) = v.pointer_mut(parent)
        {
            m.insert(key.to_string(), x);
        }
        v
    }

    fn msgs(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn service_table() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("valid", svc(), vec![]),
            (
                "no ports",
                set(svc(), "/spec/ports", json!([])),
                vec!["spec.ports: Required value"],
            ),
            (
                "headless without ports",
                set(
                    set(svc(), "/spec/ports", json!([])),
                    "/spec/clusterIP",
                    json!("None"),
                ),
                vec![],
            ),
            (
                "port range",
                set(svc(), "/spec/ports/0/port", json!(0)),
                vec![
                    "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                ],
            ),
            (
                "protocol",
                set(svc(), "/spec/ports/0/protocol", json!("ICMP")),
                vec![
                    "spec.ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                ],
            ),
            (
                "type",
                set(svc(), "/spec/type", json!("Internal")),
                vec![
                    "spec.type: Unsupported value: \"Internal\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
                ],
            ),
            (
                "two unnamed ports",
                set(
                    svc(),
                    "/spec/ports",
                    json!([{"port": 80, "protocol": "TCP", "targetPort": 80}, {"port": 81, "protocol": "TCP", "targetPort": 81}]),
                ),
                vec![
                    "spec.ports[0].name: Required value",
                    "spec.ports[1].name: Required value",
                ],
            ),
            (
                "external name",
                json!({"spec": {"type": "ExternalName", "externalName": "Bad_Name", "sessionAffinity": "None"}}),
                vec![
                    "spec.externalName: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
            (
                "node port on cluster ip",
                set(svc(), "/spec/ports/0/nodePort", json!(30080)),
                vec![
                    "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
                ],
            ),
            (
                "bad cluster ip",
                set(svc(), "/spec/clusterIP", json!("10.0.0.300")),
                vec![
                    "spec.clusterIPs[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                ],
            ),
            (
                "node port needs external traffic policy",
                set(svc(), "/spec/type", json!("NodePort")),
                vec!["spec.externalTrafficPolicy: Required value"],
            ),
        ];
        for (name, s, want) in cases {
            assert_eq!(msgs(validate_service(&s, None)), want, "{name}");
        }
    }

    #[test]
    fn type_dependent_fields() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "source ranges on ClusterIP",
                set(
                    svc(),
                    "/spec/loadBalancerSourceRanges",
                    json!(["10.0.0.0/8", "x"]),
                ),
                vec![
                    "spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'",
                    "spec.LoadBalancerSourceRanges[1]: Invalid value: \"x\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                ],
            ),
            (
                "allocateLoadBalancerNodePorts on ClusterIP",
                set(svc(), "/spec/allocateLoadBalancerNodePorts", json!(true)),
                vec![
                    "spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'",
                ],
            ),
            (
                "loadBalancerClass on ClusterIP",
                set(svc(), "/spec/loadBalancerClass", json!("x.io/lb")),
                vec![
                    "spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'",
                ],
            ),
            (
                "health check port without Local",
                set(svc(), "/spec/healthCheckNodePort", json!(31000)),
                vec![
                    "spec.healthCheckNodePort: Invalid value: 31000: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
                ],
            ),
            (
                "ip family policy",
                set(svc(), "/spec/ipFamilyPolicy", json!("Both")),
                vec![
                    "spec.ipFamilyPolicy: Unsupported value: \"Both\": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\"",
                ],
            ),
            (
                "ip families",
                set(svc(), "/spec/ipFamilies", json!(["IPv4", "IPv4", "IPX"])),
                vec![
                    "spec.ipFamilies[1]: Duplicate value: \"IPv4\"",
                    "spec.ipFamilies[2]: Unsupported value: \"IPX\": supported values: \"IPv4\", \"IPv6\"",
                ],
            ),
            (
                "traffic distribution",
                set(svc(), "/spec/trafficDistribution", json!("Anywhere")),
                vec![
                    "spec.trafficDistribution: Unsupported value: \"Anywhere\": supported values: \"PreferClose\"",
                ],
            ),
            (
                "load balancer with health check",
                json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
                    "sessionAffinity": "None", "internalTrafficPolicy": "Cluster", "externalTrafficPolicy": "Local",
                    "healthCheckNodePort": 31000, "allocateLoadBalancerNodePorts": true, "loadBalancerClass": "x.io/lb"}}),
                vec![],
            ),
        ];
        for (name, s, want) in cases {
            assert_eq!(msgs(validate_service(&s, None)), want, "{name}");
        }
    }

    #[test]
    fn cluster_ip_is_immutable() {
        let old = set(svc(), "/spec/clusterIP", json!("10.96.0.10"));
        let new = set(svc(), "/spec/clusterIP", json!("10.96.0.11"));
        assert_eq!(
            msgs(validate_service(&new, Some(&old))),
            vec![
                "spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.11\"}: may not change once set"
            ]
        );
        assert!(validate_service(&old, Some(&old)).is_empty());
        let to_external = json!({"spec": {"type": "ExternalName", "externalName": "example.com", "sessionAffinity": "None"}});
        assert!(validate_service(&to_external, Some(&old)).is_empty());
    }
}
