//! What a Service write means for its allocated fields (pure): upstream's
//! `normalizeClusterIPs`, `patchAllocatedValues`, `dropTypeDependentFields`
//! and `initIPFamilyFields` (single-stack clusters), and which cluster IPs and
//! node ports a write needs and frees.

use std::collections::BTreeSet;

use berth_api::validation::{FieldError, FieldErrorType};
use serde_json::{Map, Value, json};

fn spec(svc: &Value) -> &Value {
    svc.get("spec").unwrap_or(&Value::Null)
}

fn spec_mut(svc: &mut Value) -> Option<&mut Map<String, Value>> {
    let obj = svc.as_object_mut()?;
    let spec = obj.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    spec.as_object_mut()
}

fn str_at<'a>(spec: &'a Value, key: &str) -> &'a str {
    spec.get(key).and_then(Value::as_str).unwrap_or("")
}

fn svc_type(svc: &Value) -> &str {
    str_at(spec(svc), "type")
}

/// Every type but ExternalName has cluster IPs (`None` counts as a value).
pub fn needs_cluster_ip(svc: &Value) -> bool {
    svc_type(svc) != "ExternalName"
}

/// NodePort and LoadBalancer Services may hold node ports (upstream's `needsNodePort`).
pub fn needs_node_ports(svc: &Value) -> bool {
    matches!(svc_type(svc), "NodePort" | "LoadBalancer")
}

/// Whether unset node ports are allocated: NodePort, and LoadBalancer unless
/// `allocateLoadBalancerNodePorts: false` (upstream's `shouldAllocateNodePorts`).
pub fn should_allocate_node_ports(svc: &Value) -> bool {
    match svc_type(svc) {
        "NodePort" => true,
        "LoadBalancer" => spec(svc)
            .get("allocateLoadBalancerNodePorts")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        _ => false,
    }
}

/// `(index, port, nodePort)` of every port; nodePort 0 when unset.
pub fn ports_of(svc: &Value) -> Vec<(usize, i64, i64)> {
    spec(svc)
        .get("ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let n = |k: &str| p.get(k).and_then(Value::as_i64).unwrap_or(0);
                    (i, n("port"), n("nodePort"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// LoadBalancer with `externalTrafficPolicy: Local` gets a health-check port.
pub fn needs_health_check_port(svc: &Value) -> bool {
    svc_type(svc) == "LoadBalancer" && str_at(spec(svc), "externalTrafficPolicy") == "Local"
}

fn externally_accessible(svc: &Value) -> bool {
    match svc_type(svc) {
        "LoadBalancer" | "NodePort" => true,
        "ClusterIP" => spec(svc)
            .get("externalIPs")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty()),
        _ => false,
    }
}

/// `spec.clusterIPs` as strings.
pub fn cluster_ips(svc: &Value) -> Vec<String> {
    spec(svc)
        .get("clusterIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The cluster IPs that hold an allocation (not `None`, not empty).
pub fn allocated_ips(svc: &Value) -> Vec<String> {
    if !needs_cluster_ip(svc) {
        return Vec::new();
    }
    cluster_ips(svc)
        .into_iter()
        .filter(|ip| !ip.is_empty() && ip != "None")
        .collect()
}

/// `(index, nodePort)` of every port; 0 when unset.
pub fn port_node_ports(svc: &Value) -> Vec<(usize, i64)> {
    spec(svc)
        .get("ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .enumerate()
                .map(|(i, p)| (i, p.get("nodePort").and_then(Value::as_i64).unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

fn health_check_port(svc: &Value) -> i64 {
    spec(svc)
        .get("healthCheckNodePort")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Every node port the Service holds (ports and health check), deduplicated:
/// one port number serves TCP and UDP of the same Service.
pub fn allocated_node_ports(svc: &Value) -> BTreeSet<i64> {
    let mut out = BTreeSet::new();
    if needs_node_ports(svc) {
        out.extend(
            port_node_ports(svc)
                .into_iter()
                .map(|(_, p)| p)
                .filter(|p| *p != 0),
        );
    }
    if needs_health_check_port(svc) && health_check_port(svc) != 0 {
        out.insert(health_check_port(svc));
    }
    out
}

/// `clusterIP` and `clusterIPs` kept in step (upstream's `normalizeClusterIPs`).
pub fn normalize_cluster_ips(new: &mut Value, old: Option<&Value>) {
    let new_ip = str_at(spec(new), "clusterIP").to_string();
    let new_ips = cluster_ips(new);
    let Some(spec) = spec_mut(new) else { return };
    let Some(old) = old else {
        if !new_ip.is_empty() && new_ips.is_empty() {
            spec.insert("clusterIPs".into(), json!([new_ip]));
        }
        return;
    };
    let old_ip = str_at(self::spec(old), "clusterIP");
    let old_ips = cluster_ips(old);
    // An older client that knows only `clusterIP` and left it as it was.
    if !old_ips.is_empty() && new_ips.is_empty() && old_ip == new_ip {
        spec.insert("clusterIPs".into(), json!(old_ips));
    }
    let cur_ips: Vec<String> = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let same_ips = old_ips == cur_ips;
    if old_ip != new_ip && same_ips {
        if !old_ip.is_empty() && new_ip.is_empty() {
            spec.remove("clusterIPs");
        } else {
            spec.insert("clusterIPs".into(), json!([new_ip]));
        }
    }
}

/// Values the server allocated and the client left out of an update are kept
/// (upstream's `patchAllocatedValues`), so a PUT without them is idempotent.
pub fn patch_allocated_values(new: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && needs_cluster_ip(new) {
        let old_spec = spec(old).clone();
        if let Some(s) = spec_mut(new) {
            if str_at(&Value::Object(s.clone()), "clusterIP").is_empty() {
                for k in ["clusterIP", "clusterIPs"] {
                    if let Some(v) = old_spec.get(k) {
                        s.insert(k.into(), v.clone());
                    }
                }
            }
            for k in ["ipFamilies", "ipFamilyPolicy"] {
                let unset = s
                    .get(k)
                    .is_none_or(|v| v.is_null() || v.as_array().is_some_and(Vec::is_empty));
                if unset && let Some(v) = old_spec.get(k) {
                    s.insert(k.into(), v.clone());
                }
            }
        }
    }
    if needs_node_ports(old) && needs_node_ports(new) {
        let old_by_name: std::collections::HashMap<String, i64> = spec(old)
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    str_at(p, "name").to_string(),
                    p.get("nodePort").and_then(Value::as_i64).unwrap_or(0),
                )
            })
            .collect();
        let in_both: BTreeSet<i64> = port_node_ports(old)
            .into_iter()
            .map(|(_, p)| p)
            .filter(|p| port_node_ports(new).iter().any(|(_, q)| q == p))
            .collect();
        if let Some(Value::Array(ports)) = spec_mut(new).and_then(|s| s.get_mut("ports")) {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                    continue;
                }
                let name = p.get("name").and_then(Value::as_str).unwrap_or("");
                if let Some(&old_port) = old_by_name.get(name)
                    && old_port != 0
                    && !in_both.contains(&old_port)
                {
                    p.insert("nodePort".into(), json!(old_port));
                }
            }
        }
    }
    if needs_health_check_port(old) && needs_health_check_port(new) && health_check_port(new) == 0 {
        let hc = health_check_port(old);
        if hc != 0
            && let Some(s) = spec_mut(new)
        {
            s.insert("healthCheckNodePort".into(), json!(hc));
        }
    }
}

/// Fields that no longer apply after a type change, and that the client did
/// not change, are cleared (upstream's `dropTypeDependentFields`); freed IPs
/// and ports are released after the write.
pub fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
    let same = |k: &str, new: &Value| spec(old).get(k) == spec(new).get(k);
    let old_needs_ip = needs_cluster_ip(old);
    let clear_ips = old_needs_ip && !needs_cluster_ip(new);
    let same_ips = same("clusterIP", new) && cluster_ips(old) == cluster_ips(new);
    let same_fam = same("ipFamilies", new);
    let same_pol = same("ipFamilyPolicy", new);
    let clear_node_ports = needs_node_ports(old)
        && !needs_node_ports(new)
        && port_node_ports(old)
            .iter()
            .map(|(_, p)| p)
            .eq(port_node_ports(new).iter().map(|(_, p)| p));
    let clear_hc = needs_health_check_port(old)
        && !needs_health_check_port(new)
        && health_check_port(old) == health_check_port(new);
    let lb_to_other = svc_type(old) == "LoadBalancer" && svc_type(new) != "LoadBalancer";
    let same_alloc_lb = same("allocateLoadBalancerNodePorts", new);
    let same_lb_class = same("loadBalancerClass", new);
    let clear_etp = externally_accessible(old)
        && !externally_accessible(new)
        && same("externalTrafficPolicy", new);
    let not_lb = svc_type(new) != "LoadBalancer";
    let Some(s) = spec_mut(new) else { return };
    if clear_ips {
        if same_ips {
            s.remove("clusterIP");
            s.remove("clusterIPs");
        }
        if same_fam {
            s.remove("ipFamilies");
        }
        if same_pol {
            s.remove("ipFamilyPolicy");
        }
    }
    if clear_node_ports && let Some(Value::Array(ports)) = s.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.remove("nodePort");
        }
    }
    if clear_hc {
        s.remove("healthCheckNodePort");
    }
    if lb_to_other {
        if same_alloc_lb {
            s.remove("allocateLoadBalancerNodePorts");
        }
        if same_lb_class {
            s.remove("loadBalancerClass");
        }
    }
    if clear_etp {
        s.remove("externalTrafficPolicy");
    }
    if not_lb && let Some(st) = new.get_mut("status").and_then(Value::as_object_mut) {
        st.insert("loadBalancer".into(), json!({}));
    }
}

fn family_of(ip: &str) -> Option<&'static str> {
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => Some("IPv4"),
        Ok(std::net::IpAddr::V6(_)) => Some("IPv6"),
        Err(_) => None,
    }
}

/// Upstream's `initIPFamilyFields` for a single-stack cluster of `family`:
/// `ipFamilyPolicy` (SingleStack; RequireDualStack for headless Services
/// without a selector, which also list both families), `ipFamilies` (from
/// the cluster IPs or the cluster's family), and errors for what a
/// single-stack cluster cannot do, in upstream's words.
pub fn init_ip_family_fields(svc: &mut Value, family: &'static str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !needs_cluster_ip(svc) {
        return errs;
    }
    let ips = cluster_ips(svc);
    let headless =
        str_at(spec(svc), "clusterIP") == "None" || ips.first().is_some_and(|ip| ip == "None");
    let has_selector = spec(svc)
        .get("selector")
        .and_then(Value::as_object)
        .is_some_and(|m| !m.is_empty());
    let mut families: Vec<String> = spec(svc)
        .get("ipFamilies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    let policy = match str_at(spec(svc), "ipFamilyPolicy") {
        "" if headless && !has_selector => "RequireDualStack".to_string(),
        "" => "SingleStack".to_string(),
        p => p.to_string(),
    };
    let policy_err = |detail: &str| {
        FieldError::invalid("spec.ipFamilyPolicy", policy.as_str(), detail.to_string())
    };
    if policy == "SingleStack" {
        if ips.len() == 2 {
            errs.push(policy_err(
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            ));
        }
        if families.len() == 2 {
            errs.push(policy_err(
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            ));
        }
    }
    // Families inferred from the cluster IPs given.
    for (i, ip) in ips.iter().enumerate() {
        if ip == "None" {
            break;
        }
        let Some(fam) = family_of(ip) else { continue };
        if i >= families.len() {
            if fam == family {
                families.push(fam.to_string());
            } else {
                errs.push(FieldError {
                    kind: FieldErrorType::Invalid,
                    field: format!("spec.clusterIPs[{i}]"),
                    value: None,
                    detail: format!(
                        "{}: {fam} is not configured on this cluster",
                        go_string_slice(&ips)
                    ),
                });
            }
        }
    }
    if !errs.is_empty() {
        return errs;
    }
    if headless && !has_selector {
        // Allowed to name both families even on a single-stack cluster.
        if families.is_empty() {
            families.push(family.to_string());
        }
        if families.len() < 2 && policy != "SingleStack" {
            let alt = if families[0] == "IPv4" {
                "IPv6"
            } else {
                "IPv4"
            };
            families.push(alt.to_string());
        }
    } else {
        if policy == "RequireDualStack" {
            errs.push(policy_err(
                "this cluster is not configured for dual-stack services",
            ));
        }
        for (i, f) in families.iter().enumerate() {
            if f != family {
                errs.push(FieldError::invalid(
                    format!("spec.ipFamilies[{i}]"),
                    f.as_str(),
                    "not configured on this cluster",
                ));
            }
        }
        if !errs.is_empty() {
            return errs;
        }
        if families.is_empty() {
            families.push(family.to_string());
        }
    }
    if let Some(s) = spec_mut(svc) {
        s.insert("ipFamilyPolicy".into(), json!(policy));
        s.insert("ipFamilies".into(), json!(families));
    }
    errs
}

/// Go's `%#v` of a `[]string`, as upstream's field errors print cluster IPs.
pub fn go_string_slice(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| berth_api::validation::go_quote(s))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn ip_family_defaults() {
        let cases = [
            (
                json!({"type": "ClusterIP", "selector": {"a": "b"}}),
                "SingleStack",
                json!(["IPv4"]),
            ),
            (
                json!({"type": "ClusterIP", "clusterIP": "10.43.0.9", "clusterIPs": ["10.43.0.9"]}),
                "SingleStack",
                json!(["IPv4"]),
            ),
            (
                json!({"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"], "selector": {"a": "b"}}),
                "SingleStack",
                json!(["IPv4"]),
            ),
            // Headless without a selector: both families, even single-stack.
            (
                json!({"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}),
                "RequireDualStack",
                json!(["IPv4", "IPv6"]),
            ),
            (
                json!({"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"], "ipFamilyPolicy": "SingleStack"}),
                "SingleStack",
                json!(["IPv4"]),
            ),
        ];
        for (spec, policy, families) in cases {
            let mut s = svc(spec.clone());
            assert!(init_ip_family_fields(&mut s, "IPv4").is_empty(), "{spec}");
            assert_eq!(s["spec"]["ipFamilyPolicy"], policy, "{spec}");
            assert_eq!(s["spec"]["ipFamilies"], families, "{spec}");
        }
        let mut ext = svc(json!({"type": "ExternalName", "externalName": "x.example"}));
        assert!(init_ip_family_fields(&mut ext, "IPv4").is_empty());
        assert!(ext["spec"].get("ipFamilies").is_none());
    }

    #[test]
    fn ip_family_errors() {
        let cases = [
            (
                json!({"type": "ClusterIP", "ipFamilyPolicy": "RequireDualStack"}),
                "spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services",
            ),
            (
                json!({"type": "ClusterIP", "ipFamilies": ["IPv6"]}),
                "spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster",
            ),
            (
                json!({"type": "ClusterIP", "clusterIP": "10.43.0.5", "clusterIPs": ["10.43.0.5", "fd00::5"]}),
                "spec.ipFamilyPolicy: Invalid value: \"SingleStack\": must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified; \
                 spec.clusterIPs[1]: Invalid value: []string{\"10.43.0.5\", \"fd00::5\"}: IPv6 is not configured on this cluster",
            ),
            (
                json!({"type": "ClusterIP", "clusterIP": "10.43.0.5", "clusterIPs": ["10.43.0.5", "fd00::5"], "ipFamilyPolicy": "PreferDualStack"}),
                "spec.clusterIPs[1]: Invalid value: []string{\"10.43.0.5\", \"fd00::5\"}: IPv6 is not configured on this cluster",
            ),
            (
                json!({"type": "ClusterIP", "clusterIP": "fd00::5", "clusterIPs": ["fd00::5"]}),
                "spec.clusterIPs[0]: Invalid value: []string{\"fd00::5\"}: IPv6 is not configured on this cluster",
            ),
        ];
        for (spec, want) in cases {
            let mut s = svc(spec);
            let errs: Vec<String> = init_ip_family_fields(&mut s, "IPv4")
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(errs.join("; "), want);
        }
    }

    #[test]
    fn normalize_on_create_and_update() {
        let mut s = svc(json!({"clusterIP": "10.43.0.9"}));
        normalize_cluster_ips(&mut s, None);
        assert_eq!(s["spec"]["clusterIPs"], json!(["10.43.0.9"]));
        // An old client that drops clusterIPs but keeps clusterIP.
        let old = svc(json!({"clusterIP": "10.43.0.9", "clusterIPs": ["10.43.0.9"]}));
        let mut s = svc(json!({"clusterIP": "10.43.0.9"}));
        normalize_cluster_ips(&mut s, Some(&old));
        assert_eq!(s["spec"]["clusterIPs"], json!(["10.43.0.9"]));
        // Changing clusterIP alone follows into clusterIPs (validation then refuses it).
        let mut s = svc(json!({"clusterIP": "10.43.0.8", "clusterIPs": ["10.43.0.9"]}));
        normalize_cluster_ips(&mut s, Some(&old));
        assert_eq!(s["spec"]["clusterIPs"], json!(["10.43.0.8"]));
    }

    #[test]
    fn put_without_allocated_values_keeps_them() {
        let old = svc(
            json!({"type": "NodePort", "clusterIP": "10.43.3.3", "clusterIPs": ["10.43.3.3"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "a", "port": 80, "nodePort": 30100}, {"name": "b", "port": 81, "nodePort": 30101}]}),
        );
        let mut new = svc(json!({"type": "NodePort",
            "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30100}]}));
        patch_allocated_values(&mut new, &old);
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.43.3.3"]));
        assert_eq!(new["spec"]["ipFamilyPolicy"], "SingleStack");
        // Port a's old node port is now used by b, so a gets a new one later.
        assert!(new["spec"]["ports"][0].get("nodePort").is_none());
        assert_eq!(new["spec"]["ports"][1]["nodePort"], 30100);
    }

    #[test]
    fn type_change_drops_what_no_longer_applies() {
        let old = svc(
            json!({"type": "NodePort", "clusterIP": "10.43.3.3", "clusterIPs": ["10.43.3.3"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "externalTrafficPolicy": "Cluster",
            "ports": [{"port": 80, "nodePort": 30100}]}),
        );
        let mut to_cip = old.clone();
        to_cip["spec"]["type"] = json!("ClusterIP");
        drop_type_dependent_fields(&mut to_cip, &old);
        assert!(to_cip["spec"]["ports"][0].get("nodePort").is_none());
        assert!(to_cip["spec"].get("externalTrafficPolicy").is_none());
        assert_eq!(to_cip["spec"]["clusterIP"], "10.43.3.3");
        assert!(allocated_node_ports(&to_cip).is_empty());

        let mut to_ext = old.clone();
        to_ext["spec"]["type"] = json!("ExternalName");
        to_ext["spec"]["externalName"] = json!("x.example");
        drop_type_dependent_fields(&mut to_ext, &old);
        for k in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            assert!(to_ext["spec"].get(k).is_none(), "{k}");
        }
        assert!(allocated_ips(&to_ext).is_empty());
        assert_eq!(allocated_ips(&old), vec!["10.43.3.3".to_string()]);
    }

    #[test]
    fn node_ports_of_a_service() {
        let s = svc(json!({"type": "NodePort", "ports": [
            {"port": 53, "protocol": "TCP", "nodePort": 30053},
            {"port": 53, "protocol": "UDP", "nodePort": 30053},
            {"port": 80}]}));
        assert_eq!(
            allocated_node_ports(&s).into_iter().collect::<Vec<_>>(),
            vec![30053]
        );
        let lb = svc(
            json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
            "externalTrafficPolicy": "Local", "healthCheckNodePort": 31000, "ports": [{"port": 80, "nodePort": 30001}]}),
        );
        // Without node port allocation a LoadBalancer still holds what it asked for.
        assert_eq!(
            allocated_node_ports(&lb).into_iter().collect::<Vec<_>>(),
            vec![30001, 31000]
        );
        assert!(!should_allocate_node_ports(&lb));
        assert_eq!(
            go_string_slice(&["10.43.0.5".to_string()]),
            "[]string{\"10.43.0.5\"}"
        );
    }
}
