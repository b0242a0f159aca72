//! Every policy × scope on the seed's machine (2 sockets, one NUMA node
//! each, 4 CPUs per node, CPU 0 reserved: node 0 has 3 free CPUs, node 1 has 4)
//! with the CPU Manager as the hint provider.

use berth_topology::machine::{FakeSysfs, Machine};
use serde_json::json;

use super::*;
use crate::cm::cpumanager::{CpuManagerConfig, CpuSet};
use crate::testutil::TempDir;

fn manager(policy: &str, scope: Scope, dir: &TempDir) -> Manager {
    let machine = Machine::discover(&FakeSysfs::machine(2, 1, 4, 1, 0)).unwrap();
    let numa = machine.numa.clone();
    let cpus = CpuManager::new(
        CpuManagerConfig {
            policy: "static".into(),
            reserved_cpus: Some("0".parse().unwrap()),
            ..Default::default()
        },
        machine,
        dir.path(),
    )
    .unwrap();
    let cfg = TopologyManagerConfig {
        policy: policy.into(),
        scope,
        options: Default::default(),
    };
    Manager::new(cfg, numa, Arc::new(cpus), None).unwrap()
}

fn pod(containers: &[(&str, &str)]) -> Pod {
    let list: Vec<serde_json::Value> = containers
        .iter()
        .map(|(name, cpu)| {
            let r = json!({"cpu": cpu, "memory": "64Mi"});
            json!({"name": name, "resources": {"requests": r, "limits": r}})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "p"},
        "spec": {"containers": list},
    }))
    .unwrap()
}

/// The NUMA nodes of a CPU set on this machine (CPUs 0-3 on node 0, 4-7 on node 1).
fn nodes(set: &CpuSet) -> Vec<usize> {
    let mut n: Vec<usize> = set.iter().map(|c| c / 4).collect();
    n.dedup();
    n
}

#[test]
fn every_policy_and_scope_on_the_seeds_machine() {
    use Scope::{Container as C, Pod as P};
    // (policy, scope, containers' CPUs, admitted, NUMA nodes per container)
    type Case = (
        &'static str,
        Scope,
        &'static [(&'static str, &'static str)],
        bool,
        &'static [&'static [usize]],
    );
    let cases: [Case; 12] = [
        // 4 CPUs fit node 1 alone: every policy puts them there.
        ("none", C, &[("a", "4")], true, &[&[0, 1]]),
        ("best-effort", C, &[("a", "4")], true, &[&[1]]),
        ("restricted", C, &[("a", "4")], true, &[&[1]]),
        ("single-numa-node", C, &[("a", "4")], true, &[&[1]]),
        // 5 CPUs need both nodes: preferred (as narrow as possible) but not single-node.
        ("best-effort", C, &[("a", "5")], true, &[&[0, 1]]),
        ("restricted", C, &[("a", "5")], true, &[&[0, 1]]),
        ("single-numa-node", C, &[("a", "5")], false, &[]),
        // Two containers of 2: container scope places each on its own best node,
        // pod scope keeps them together.
        (
            "single-numa-node",
            C,
            &[("a", "2"), ("b", "2")],
            true,
            &[&[0], &[1]],
        ),
        (
            "single-numa-node",
            P,
            &[("a", "2"), ("b", "2")],
            true,
            &[&[1], &[1]],
        ),
        // 3 + 3 fit no single node together, but each fits one alone. Under
        // restricted the pod's hint spans both nodes, and each container is
        // packed onto the node with the fewest free CPUs that holds it.
        ("single-numa-node", P, &[("a", "3"), ("b", "3")], false, &[]),
        (
            "single-numa-node",
            C,
            &[("a", "3"), ("b", "3")],
            true,
            &[&[0], &[1]],
        ),
        (
            "restricted",
            P,
            &[("a", "3"), ("b", "3")],
            true,
            &[&[0], &[1]],
        ),
    ];
    for (policy, scope, containers, admitted, want) in cases {
        let dir = TempDir::new("topology");
        let m = manager(policy, scope, &dir);
        let case = format!("{policy} {} {containers:?}", scope.name());
        let got = m.admit(&pod(containers), Qos::Guaranteed);
        assert_eq!(got.is_none(), admitted, "{case}: {got:?}");
        if !admitted {
            let (reason, msg) = got.unwrap();
            assert_eq!(reason, "TopologyAffinityError", "{case}");
            assert_eq!(
                msg, "Resources cannot be allocated with Topology locality",
                "{case}"
            );
            // Nothing stays allocated for a rejected pod.
            assert!(m.cpus.state().assignments.is_empty(), "{case}");
            assert_eq!(m.cpus.state().default_set.to_string(), "0-7", "{case}");
            continue;
        }
        for ((name, _), want) in containers.iter().zip(want) {
            let set = m.cpus.container_cpuset("p", name).unwrap();
            if policy == "none" {
                // No alignment: packed by topology only (a whole free socket first).
                continue;
            }
            assert_eq!(nodes(&set), *want, "{case}: {name} got {set}");
        }
    }
}

#[test]
fn pods_without_exclusive_cpus_are_admitted_by_every_policy() {
    for policy in ["none", "best-effort", "restricted", "single-numa-node"] {
        let dir = TempDir::new("topology");
        let m = manager(policy, Scope::Container, &dir);
        assert_eq!(
            m.admit(&pod(&[("a", "500m")]), Qos::Guaranteed),
            None,
            "{policy}"
        );
        assert_eq!(
            m.admit(&pod(&[("a", "2")]), Qos::Burstable),
            None,
            "{policy}"
        );
        assert!(m.cpus.state().assignments.is_empty(), "{policy}");
    }
}
