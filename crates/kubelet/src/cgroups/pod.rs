//! Pod-level cgroups (upstream's `pod_container_manager_linux.go` and
//! `ResourceConfigForPod` in `helpers_linux.go`): `pod<uid>` under its QoS
//! cgroup (Guaranteed pods directly under the root), cpu shares from the pod's
//! CPU requests, a CFS quota and a memory limit when every container sets that
//! limit, `pids.max` from `--pod-max-pids`, and `spec.overhead` added to the
//! requests and to the declared limits.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::manager::{
    CPU_PERIOD_US, CgroupName, MIN_SHARES, ResourceConfig, milli_cpu_to_quota, milli_cpu_to_shares,
};
use super::{Qos, quantity_milli, quantity_value};

/// The pod's cgroup below Berth's root (`berth/burstable/pod<uid>`; upstream's
/// cgroupfs names keep the uid's dashes).
pub fn pod_cgroup_name(root: &CgroupName, qos: Qos, uid: &str) -> CgroupName {
    let pod = format!("pod{uid}");
    match qos {
        Qos::Guaranteed => root.child(pod),
        Qos::Burstable => root.child("burstable").child(pod),
        Qos::BestEffort => root.child("besteffort").child(pod),
    }
}

/// A pod's cgroup limits (upstream's `ResourceConfigForPod`): cpu.shares from
/// the summed CPU requests, a CFS quota and a memory limit only when every
/// container sets that limit. Init containers count as the larger of their
/// own and the regular containers' sum, as upstream's pod requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodLimits {
    pub cpu_shares: i64,
    pub cpu_quota: Option<i64>,
    pub memory: Option<i64>,
}

/// [`pod_limits_with_overhead`] without overhead.
pub fn pod_limits(init: &[Container], containers: &[Container], qos: Qos) -> PodLimits {
    pod_limits_with_overhead(init, containers, qos, Overhead::default())
}

/// A pod's `spec.overhead` (RuntimeClass overhead): CPU in milli-cores and memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overhead {
    pub cpu_milli: i64,
    pub memory: i64,
}

impl Overhead {
    pub fn of(spec: &PodSpec) -> Overhead {
        let get = |r: &str| {
            spec.overhead
                .as_ref()
                .and_then(|o| o.get(r))
                .and_then(|q| berth_api::quantity::Quantity::parse(&q.0).ok())
        };
        Overhead {
            cpu_milli: get("cpu").map_or(0, |q| q.milli_value()),
            memory: get("memory").map_or(0, |q| q.value()),
        }
    }
}

/// Upstream's pod requests and limits: overhead is added to the requests, and
/// to a limit only when the pod has that limit (every container declares it).
pub fn pod_limits_with_overhead(
    init: &[Container],
    containers: &[Container],
    qos: Qos,
    overhead: Overhead,
) -> PodLimits {
    if qos == Qos::BestEffort {
        return PodLimits {
            cpu_shares: MIN_SHARES as i64,
            cpu_quota: None,
            memory: None,
        };
    }
    let requested = pod_cpu_request_milli(init, containers) + overhead.cpu_milli;
    let sidecars = init
        .iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let regular: Vec<&Container> = containers.iter().chain(sidecars).collect();
    let sum = |f: &dyn Fn(&Container) -> Option<i64>| -> Option<i64> {
        regular.iter().map(|c| f(c)).sum::<Option<i64>>()
    };
    let init_max = |f: &dyn Fn(&Container) -> Option<i64>, total: Option<i64>| -> Option<i64> {
        init.iter()
            .filter(|c| c.restart_policy.as_deref() != Some("Always"))
            .try_fold(total?, |m, c| Some(m.max(f(c)?)))
    };
    let cpu_lim = |c: &Container| quantity_milli(c, "limits", "cpu");
    let mem_lim = |c: &Container| quantity_value(c, "limits", "memory");
    PodLimits {
        cpu_shares: milli_cpu_to_shares(requested) as i64,
        cpu_quota: init_max(&cpu_lim, sum(&cpu_lim))
            .map(|m| milli_cpu_to_quota(m + overhead.cpu_milli, CPU_PERIOD_US)),
        memory: init_max(&mem_lim, sum(&mem_lim)).map(|m| m + overhead.memory),
    }
}

/// The pod's CPU request in milli-cores without overhead (a container's limit
/// stands for a missing request; init containers as the larger of their own and
/// the containers' sum).
pub fn pod_cpu_request_milli(init: &[Container], containers: &[Container]) -> i64 {
    let cpu_req = |c: &Container| {
        quantity_milli(c, "requests", "cpu")
            .or_else(|| quantity_milli(c, "limits", "cpu"))
            .unwrap_or(0)
    };
    let sidecars = init
        .iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let total: i64 = containers.iter().chain(sidecars).map(cpu_req).sum();
    init.iter()
        .filter(|c| c.restart_policy.as_deref() != Some("Always"))
        .map(cpu_req)
        .fold(total, i64::max)
}

/// Settings of the pod cgroups (kubelet flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCgroupConfig {
    /// `--pod-max-pids`: -1 (the default) leaves pids.max unlimited.
    pub pod_pids_limit: i64,
    /// `--cpu-cfs-quota` (true by default): without it no CFS quota is written.
    pub enforce_cpu_limits: bool,
}

impl Default for PodCgroupConfig {
    fn default() -> Self {
        PodCgroupConfig {
            pod_pids_limit: -1,
            enforce_cpu_limits: true,
        }
    }
}

/// The huge page size (bytes) a resource name such as `hugepages-2Mi` stands for.
pub fn hugepage_size(resource: &str) -> Option<u64> {
    let size = resource.strip_prefix("hugepages-")?;
    let q = berth_api::quantity::Quantity::parse(size).ok()?;
    u64::try_from(q.value()).ok().filter(|s| *s > 0)
}

/// Upstream's `HugePageLimits` of the pod's requests: bytes per page size, the
/// regular containers (and sidecars) summed, an init container counting when
/// it asks for more. A container that gives only a limit requests it (huge
/// pages cannot be overcommitted: validation makes both equal).
pub fn pod_hugepage_requests(init: &[Container], containers: &[Container]) -> BTreeMap<u64, i64> {
    let of = |c: &Container| -> BTreeMap<u64, i64> {
        let mut out = BTreeMap::new();
        let Some(r) = c.resources.as_ref() else {
            return out;
        };
        for list in [r.limits.as_ref(), r.requests.as_ref()]
            .into_iter()
            .flatten()
        {
            for (k, v) in list {
                if let (Some(size), Ok(q)) =
                    (hugepage_size(k), berth_api::quantity::Quantity::parse(&v.0))
                {
                    // Requests are read last: they win over limits.
                    out.insert(size, q.value());
                }
            }
        }
        out
    };
    let mut total: BTreeMap<u64, i64> = BTreeMap::new();
    let sidecars = init
        .iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    for c in containers.iter().chain(sidecars) {
        for (size, v) in of(c) {
            *total.entry(size).or_default() += v;
        }
    }
    for c in init
        .iter()
        .filter(|c| c.restart_policy.as_deref() != Some("Always"))
    {
        for (size, v) in of(c) {
            let t = total.entry(size).or_default();
            *t = (*t).max(v);
        }
    }
    total
}

/// The pod cgroup's [`ResourceConfig`] (upstream's `ResourceConfigForPod` plus the
/// pod container manager's pids limit). `hugepage_sizes` are the node's page
/// sizes: a size the pod does not request is limited to 0, as upstream's
/// cgroup manager writes every size it does not name.
pub fn resource_config_for_pod(
    spec: &PodSpec,
    qos: Qos,
    cfg: PodCgroupConfig,
    hugepage_sizes: &[u64],
) -> ResourceConfig {
    let l = pod_limits_with_overhead(
        spec.init_containers.as_deref().unwrap_or_default(),
        &spec.containers,
        qos,
        Overhead::of(spec),
    );
    let quota = l
        .cpu_quota
        .map(|q| if cfg.enforce_cpu_limits { q } else { -1 });
    ResourceConfig {
        cpu_shares: Some(l.cpu_shares as u64),
        cpu_quota: quota,
        cpu_period: quota.map(|_| CPU_PERIOD_US),
        memory: l.memory,
        pids_limit: (cfg.pod_pids_limit > 0).then_some(cfg.pod_pids_limit),
        hugepage_limit: {
            let mut h = pod_hugepage_requests(
                spec.init_containers.as_deref().unwrap_or_default(),
                &spec.containers,
            );
            for size in hugepage_sizes {
                h.entry(*size).or_insert(0);
            }
            h
        },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use std::collections::BTreeMap;

    /// A container named `c` with these requests and limits (shared by the
    /// cgroups module's tests).
    pub(crate) fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        let m = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| {
                kv.iter()
                    .map(|(k, v)| (k.to_string(), Q(v.to_string())))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: m(requests),
                limits: m(limits),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn spec(cs: Vec<Container>, overhead: &[(&str, &str)]) -> PodSpec {
        PodSpec {
            containers: cs,
            overhead: (!overhead.is_empty()).then(|| {
                overhead
                    .iter()
                    .map(|(k, v)| (k.to_string(), Q(v.to_string())))
                    .collect()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn pod_limits_sum_containers_and_need_every_limit() {
        let g = container(
            &[("cpu", "500m"), ("memory", "64Mi")],
            &[("cpu", "500m"), ("memory", "64Mi")],
        );
        let b = container(&[("cpu", "250m")], &[("memory", "32Mi")]);
        let be = container(&[], &[]);
        let mut big_init = container(&[("cpu", "2")], &[("cpu", "2"), ("memory", "1Gi")]);
        big_init.name = "init".into();
        let cases = [
            (
                vec![],
                vec![g.clone(), g.clone()],
                Qos::Guaranteed,
                (1024, Some(100_000), Some(128 << 20)),
            ),
            (
                vec![],
                vec![g.clone(), b.clone()],
                Qos::Burstable,
                (768, None, Some(96 << 20)),
            ),
            (
                vec![],
                vec![b.clone(), be.clone()],
                Qos::Burstable,
                (256, None, None),
            ),
            (vec![], vec![be.clone()], Qos::BestEffort, (2, None, None)),
            // An init container larger than the containers' sum sets the pod's size.
            (
                vec![big_init],
                vec![g.clone()],
                Qos::Guaranteed,
                (2048, Some(200_000), Some(1 << 30)),
            ),
        ];
        for (init, cs, qos, (shares, quota, mem)) in cases {
            let l = pod_limits(&init, &cs, qos);
            assert_eq!(
                (l.cpu_shares, l.cpu_quota, l.memory),
                (shares, quota, mem),
                "{qos:?}"
            );
        }
    }

    #[test]
    fn resource_config_adds_overhead_and_pids() {
        let g = container(
            &[("cpu", "500m"), ("memory", "64Mi")],
            &[("cpu", "500m"), ("memory", "64Mi")],
        );
        let b = container(&[("cpu", "250m")], &[("memory", "32Mi")]);
        let be = container(&[], &[]);
        let def = PodCgroupConfig::default();
        let pids = PodCgroupConfig {
            pod_pids_limit: 1024,
            ..def
        };
        let no_cfs = PodCgroupConfig {
            enforce_cpu_limits: false,
            ..def
        };
        // (spec, qos, config) → (shares, quota, period, memory, pids)
        let cases = [
            (
                spec(vec![g.clone()], &[]),
                Qos::Guaranteed,
                def,
                (512, Some(50_000), Some(100_000), Some(64 << 20), None),
            ),
            // Overhead counts in the request and in both declared limits.
            (
                spec(vec![g.clone()], &[("cpu", "250m"), ("memory", "16Mi")]),
                Qos::Guaranteed,
                pids,
                (768, Some(75_000), Some(100_000), Some(80 << 20), Some(1024)),
            ),
            // Burstable: no CPU limit declared, so overhead reaches only the
            // request and the memory limit.
            (
                spec(vec![b.clone()], &[("cpu", "100m"), ("memory", "8Mi")]),
                Qos::Burstable,
                def,
                (358, None, None, Some(40 << 20), None),
            ),
            (
                spec(vec![be.clone()], &[]),
                Qos::BestEffort,
                pids,
                (2, None, None, None, Some(1024)),
            ),
            // --cpu-cfs-quota=false: quota unlimited.
            (
                spec(vec![g.clone()], &[]),
                Qos::Guaranteed,
                no_cfs,
                (512, Some(-1), Some(100_000), Some(64 << 20), None),
            ),
        ];
        for (s, qos, cfg, (shares, quota, period, mem, pids)) in cases {
            let rc = resource_config_for_pod(&s, qos, cfg, &[]);
            assert!(rc.hugepage_limit.is_empty());
            assert_eq!(
                (
                    rc.cpu_shares,
                    rc.cpu_quota,
                    rc.cpu_period,
                    rc.memory,
                    rc.pids_limit
                ),
                (Some(shares), quota, period, mem, pids),
                "{qos:?} {:?}",
                s.overhead
            );
        }
    }

    #[test]
    fn hugepage_limits_come_from_requests_and_other_sizes_get_zero() {
        const MB2: u64 = 2 << 20;
        const GB1: u64 = 1 << 30;
        let huge = |req: &[(&str, &str)], lim: &[(&str, &str)]| container(req, lim);
        let app = huge(
            &[("memory", "64Mi"), ("hugepages-2Mi", "8Mi")],
            &[("memory", "64Mi"), ("hugepages-2Mi", "8Mi")],
        );
        let limit_only = huge(&[], &[("memory", "64Mi"), ("hugepages-1Gi", "1Gi")]);
        let mut init_big = huge(&[("hugepages-2Mi", "32Mi")], &[("hugepages-2Mi", "32Mi")]);
        init_big.name = "init".into();
        let mut sidecar = huge(&[("hugepages-2Mi", "4Mi")], &[("hugepages-2Mi", "4Mi")]);
        sidecar.restart_policy = Some("Always".into());
        // (init containers, containers, node sizes, limits by size)
        type Row = (Vec<Container>, Vec<Container>, Vec<u64>, Vec<(u64, i64)>);
        let rows: Vec<Row> = vec![
            (
                vec![],
                vec![app.clone()],
                vec![MB2, GB1],
                vec![(MB2, 8 << 20), (GB1, 0)],
            ),
            (
                vec![],
                vec![app.clone(), app.clone()],
                vec![MB2],
                vec![(MB2, 16 << 20)],
            ),
            (
                vec![],
                vec![limit_only],
                vec![MB2, GB1],
                vec![(MB2, 0), (GB1, 1 << 30)],
            ),
            // A larger init container's request wins; a sidecar adds to the rest.
            (
                vec![init_big.clone()],
                vec![app.clone()],
                vec![MB2],
                vec![(MB2, 32 << 20)],
            ),
            (
                vec![init_big, sidecar],
                vec![app.clone(), app.clone(), app.clone(), app],
                vec![MB2],
                vec![(MB2, 36 << 20)],
            ),
            // No huge pages on the node or in the pod: nothing written.
            (vec![], vec![container(&[], &[])], vec![], vec![]),
        ];
        for (init, containers, sizes, want) in rows {
            let s = PodSpec {
                init_containers: Some(init),
                containers,
                ..Default::default()
            };
            let rc =
                resource_config_for_pod(&s, Qos::Burstable, PodCgroupConfig::default(), &sizes);
            assert_eq!(rc.hugepage_limit, want.into_iter().collect(), "{sizes:?}");
        }
        assert_eq!(hugepage_size("hugepages-2Mi"), Some(MB2));
        assert_eq!(hugepage_size("hugepages-1Gi"), Some(GB1));
        assert_eq!(hugepage_size("hugepages-x"), None);
        assert_eq!(hugepage_size("memory"), None);
    }

    #[test]
    fn pod_cgroups_nest_by_qos() {
        let root = CgroupName::parse("berth");
        assert_eq!(
            pod_cgroup_name(&root, Qos::Guaranteed, "u-1").to_cgroupfs(),
            "berth/podu-1"
        );
        assert_eq!(
            pod_cgroup_name(&root, Qos::Burstable, "u-1").to_cgroupfs(),
            "berth/burstable/podu-1"
        );
        assert_eq!(
            pod_cgroup_name(&root, Qos::BestEffort, "u-1").to_cgroupfs(),
            "berth/besteffort/podu-1"
        );
        for q in [Qos::Guaranteed, Qos::Burstable, Qos::BestEffort] {
            assert_eq!(
                pod_cgroup_name(&root, q, "u").to_cgroupfs(),
                super::super::pod_cgroup_parent(q, "u")
            );
        }
    }
}
