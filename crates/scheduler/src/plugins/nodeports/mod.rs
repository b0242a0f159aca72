//! NodePorts: a pod's host ports must be free on the node (Filter).
//! A port conflicts when protocol and number match and either side binds
//! 0.0.0.0 or both bind the same IP (upstream `HostPortInfo.CheckConflict`).

use crate::framework::types::{DEFAULT_BIND_ALL_HOST_IP, HostPort};
use crate::framework::{
    Code, CycleState, Filter, NodeInfo, Plugin, PodInfo, PreFilter, Snapshot, Status,
};

pub const NAME: &str = "NodePorts";
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

pub struct NodePorts;

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }
}

fn conflicts(want: &HostPort, used: &HostPort) -> bool {
    want.port == used.port
        && want.protocol == used.protocol
        && (want.ip == used.ip
            || want.ip == DEFAULT_BIND_ALL_HOST_IP
            || used.ip == DEFAULT_BIND_ALL_HOST_IP)
}

/// Whether all of `wanted` are free among `used`.
pub fn fits_ports(wanted: &[HostPort], used: &[HostPort]) -> bool {
    !wanted.iter().any(|w| used.iter().any(|u| conflicts(w, u)))
}

impl PreFilter for NodePorts {
    fn pre_filter(&self, _: &mut CycleState, pod: &PodInfo, _: &Snapshot) -> Status {
        if pod.host_ports.is_empty() {
            Status::new(Code::Skip, Vec::new())
        } else {
            Status::success()
        }
    }
}

impl Filter for NodePorts {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if fits_ports(&pod.host_ports, &node.used_ports) {
            Status::success()
        } else {
            Status::unschedulable(ERR_REASON)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::*;
    use k8s_openapi::api::core::v1::ContainerPort;

    fn with_ports(
        mut p: k8s_openapi::api::core::v1::Pod,
        ports: &[(&str, &str, i32)],
    ) -> k8s_openapi::api::core::v1::Pod {
        let spec = p.spec.get_or_insert_default();
        spec.containers[0].ports = Some(
            ports
                .iter()
                .map(|(ip, proto, port)| ContainerPort {
                    container_port: 8080,
                    host_ip: (!ip.is_empty()).then(|| ip.to_string()),
                    protocol: (!proto.is_empty()).then(|| proto.to_string()),
                    host_port: Some(*port),
                    ..Default::default()
                })
                .collect(),
        );
        p
    }

    #[test]
    fn host_port_conflicts() {
        type Ports<'a> = &'a [(&'a str, &'a str, i32)];
        let cases: Vec<(&str, Ports, Ports, bool)> = vec![
            ("nothing used", &[("", "", 8080)], &[], true),
            (
                "same port, default ip",
                &[("", "", 8080)],
                &[("", "", 8080)],
                false,
            ),
            ("other port", &[("", "", 8080)], &[("", "", 8081)], true),
            (
                "other protocol",
                &[("", "UDP", 8080)],
                &[("", "TCP", 8080)],
                true,
            ),
            (
                "specific ips differ",
                &[("127.0.0.1", "", 8080)],
                &[("127.0.0.2", "", 8080)],
                true,
            ),
            (
                "same specific ip",
                &[("127.0.0.1", "", 8080)],
                &[("127.0.0.1", "", 8080)],
                false,
            ),
            (
                "wildcard used",
                &[("127.0.0.1", "", 8080)],
                &[("0.0.0.0", "", 8080)],
                false,
            ),
            (
                "wildcard wanted",
                &[("0.0.0.0", "", 8080)],
                &[("10.0.0.1", "", 8080)],
                false,
            ),
            (
                "one of two conflicts",
                &[("", "", 1), ("", "", 2)],
                &[("", "", 2)],
                false,
            ),
        ];
        for (name, want, used, fits) in cases {
            let incoming = PodInfo::new(with_ports(pod("in", &[&[]]), want));
            let existing = if used.is_empty() {
                vec![]
            } else {
                vec![with_ports(pod("old", &[&[]]), used)]
            };
            let ni = node_info(node("n", &[]), existing);
            let s = NodePorts.filter(&CycleState::default(), &incoming, &ni);
            assert_eq!(s.is_success(), fits, "{name}: {s}");
            if !fits {
                assert_eq!(s.code(), Code::Unschedulable, "{name}");
                assert_eq!(s.message(), ERR_REASON, "{name}");
            }
        }
    }

    #[test]
    fn skips_pods_without_host_ports_and_frees_ports_on_removal() {
        let snap = Snapshot::default();
        let plain = PodInfo::new(pod("p", &[&[]]));
        assert_eq!(
            NodePorts
                .pre_filter(&mut CycleState::default(), &plain, &snap)
                .code(),
            Code::Skip
        );
        let user = with_ports(pod("old", &[&[]]), &[("", "", 80)]);
        let mut ni = node_info(node("n", &[]), vec![user]);
        let incoming = PodInfo::new(with_ports(pod("in", &[&[]]), &[("", "", 80)]));
        assert!(
            !NodePorts
                .filter(&CycleState::default(), &incoming, &ni)
                .is_success()
        );
        assert!(ni.remove_pod("default/old"));
        assert!(
            NodePorts
                .filter(&CycleState::default(), &incoming, &ni)
                .is_success()
        );
    }
}
