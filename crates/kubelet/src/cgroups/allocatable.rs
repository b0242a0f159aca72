//! Node allocatable enforcement (upstream's `node_container_manager_linux.go`):
//! with `pods` in `--enforce-node-allocatable` the root cgroup (upstream's
//! `kubepods`, Berth's `berth`) is limited to capacity − kube-reserved −
//! system-reserved (the hard eviction threshold is *not* subtracted here: the
//! eviction manager acts before the cgroup limit); without it the root still
//! gets the capacity's cpu shares. `kube-reserved` / `system-reserved` (and
//! their `-compressible` forms, cpu only) enforce the reservations on the named,
//! existing cgroups. Validation messages are upstream's.

use berth_api::quantity::{Format, Quantity};

use super::manager::{ResourceConfig, milli_cpu_to_shares};
use crate::node::Resources;

pub const PODS: &str = "pods";
pub const KUBE_RESERVED: &str = "kube-reserved";
pub const SYSTEM_RESERVED: &str = "system-reserved";
pub const KUBE_RESERVED_COMPRESSIBLE: &str = "kube-reserved-compressible";
pub const SYSTEM_RESERVED_COMPRESSIBLE: &str = "system-reserved-compressible";
pub const NONE: &str = "none";

/// The node allocatable flags.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeAllocatableConfig {
    /// `--enforce-node-allocatable` (default `pods`).
    pub enforce: Vec<String>,
    pub kube_reserved: Resources,
    pub system_reserved: Resources,
    /// `--kube-reserved-cgroup` / `--system-reserved-cgroup`: existing cgroups,
    /// named relative to the cgroup Berth was started in (as its root is).
    pub kube_reserved_cgroup: String,
    pub system_reserved_cgroup: String,
}

impl Default for NodeAllocatableConfig {
    fn default() -> Self {
        NodeAllocatableConfig {
            enforce: vec![PODS.into()],
            kube_reserved: Resources::new(),
            system_reserved: Resources::new(),
            kube_reserved_cgroup: String::new(),
            system_reserved_cgroup: String::new(),
        }
    }
}

impl NodeAllocatableConfig {
    pub fn enforces(&self, key: &str) -> bool {
        self.enforce.iter().any(|k| k == key)
    }

    /// Upstream's kubelet configuration validation of these flags.
    pub fn validate(&self, cgroups_per_qos: bool) -> Result<(), String> {
        let mut errs = Vec::new();
        let real: Vec<&String> = self.enforce.iter().filter(|k| *k != NONE).collect();
        if !cgroups_per_qos && !real.is_empty() {
            errs.push("invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) is not supported unless cgroupsPerQOS (--cgroups-per-qos) feature is turned on".to_string());
        }
        for k in &self.enforce {
            match k.as_str() {
                PODS => {}
                SYSTEM_RESERVED | SYSTEM_RESERVED_COMPRESSIBLE => {
                    if self.system_reserved_cgroup.is_empty() {
                        errs.push(format!("invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when {k:?} contained in enforceNodeAllocatable (--enforce-node-allocatable)"));
                    }
                }
                KUBE_RESERVED | KUBE_RESERVED_COMPRESSIBLE => {
                    if self.kube_reserved_cgroup.is_empty() {
                        errs.push(format!("invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when {k:?} contained in enforceNodeAllocatable (--enforce-node-allocatable)"));
                    }
                }
                NONE => {
                    if self.enforce.len() > 1 {
                        errs.push(format!("invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements when {NONE:?} is specified"));
                    }
                }
                other => errs.push(format!(
                    "invalid configuration: option {other:?} specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are {PODS:?}, {SYSTEM_RESERVED:?}, {KUBE_RESERVED:?}, {SYSTEM_RESERVED_COMPRESSIBLE:?}, {KUBE_RESERVED_COMPRESSIBLE:?} or {NONE:?}"
                )),
            }
        }
        for (a, b) in [
            (SYSTEM_RESERVED, SYSTEM_RESERVED_COMPRESSIBLE),
            (KUBE_RESERVED, KUBE_RESERVED_COMPRESSIBLE),
        ] {
            if self.enforces(a) && self.enforces(b) {
                errs.push(format!("invalid configuration: both {a:?} and {b:?} cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)"));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join(", "))
        }
    }
}

/// Capacity as the container manager sees it: the node's, plus `pid` (the
/// kernel's pid_max, upstream's `pidlimit.PIDs`) when known.
pub fn internal_capacity(capacity: &Resources, pid_max: Option<i64>) -> Resources {
    let mut c = capacity.clone();
    if let Some(p) = pid_max {
        c.entry("pid".into())
            .or_insert_with(|| Quantity::from_value(p, Format::DecimalSI));
    }
    c
}

/// `/proc/sys/kernel/pid_max`.
pub fn read_pid_max() -> Option<i64> {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// capacity − kube-reserved − system-reserved, never below zero (upstream's
/// `getNodeAllocatableAbsoluteImpl`).
pub fn node_allocatable_absolute(capacity: &Resources, cfg: &NodeAllocatableConfig) -> Resources {
    let mut out = Resources::new();
    for (k, cap) in capacity {
        let mut v = cap.clone();
        for r in [&cfg.kube_reserved, &cfg.system_reserved] {
            if let Some(q) = r.get(k) {
                v.sub(q);
            }
        }
        if v.sign() < 0 {
            v = Quantity::zero();
        }
        out.insert(k.clone(), v);
    }
    out
}

/// A resource list as cgroup limits (upstream's `getCgroupConfig`): memory in
/// bytes, cpu as shares, `pid` as pids.max, `hugepages-<size>` as hugetlb
/// limits; `compressible_only` keeps the cpu shares alone.
pub fn cgroup_config(rl: &Resources, compressible_only: bool) -> ResourceConfig {
    let mut rc = ResourceConfig {
        cpu_shares: rl.get("cpu").map(|q| milli_cpu_to_shares(q.milli_value())),
        ..Default::default()
    };
    if compressible_only {
        return rc;
    }
    rc.memory = rl.get("memory").map(Quantity::value);
    rc.pids_limit = rl.get("pid").map(Quantity::value);
    for (k, q) in rl {
        if let Some(size) = k.strip_prefix("hugepages-")
            && let Ok(s) = Quantity::parse(size)
        {
            rc.hugepage_limit.insert(s.value().max(0) as u64, q.value());
        }
    }
    rc
}

/// The root cgroup's limits: allocatable (without eviction thresholds) when
/// `pods` is enforced, else the capacity (cpu shares must be set either way:
/// a fresh cgroup's default shares would starve the pods).
pub fn root_config(internal_capacity: &Resources, cfg: &NodeAllocatableConfig) -> ResourceConfig {
    if cfg.enforces(PODS) {
        cgroup_config(&node_allocatable_absolute(internal_capacity, cfg), false)
    } else {
        cgroup_config(internal_capacity, false)
    }
}

/// The reserved cgroups to enforce: (cgroup, limits) for each listed key.
pub fn reserved_configs(cfg: &NodeAllocatableConfig) -> Vec<(String, ResourceConfig)> {
    let mut out = Vec::new();
    for (key, compressible, cgroup, rl) in [
        (
            SYSTEM_RESERVED,
            false,
            &cfg.system_reserved_cgroup,
            &cfg.system_reserved,
        ),
        (
            SYSTEM_RESERVED_COMPRESSIBLE,
            true,
            &cfg.system_reserved_cgroup,
            &cfg.system_reserved,
        ),
        (
            KUBE_RESERVED,
            false,
            &cfg.kube_reserved_cgroup,
            &cfg.kube_reserved,
        ),
        (
            KUBE_RESERVED_COMPRESSIBLE,
            true,
            &cfg.kube_reserved_cgroup,
            &cfg.kube_reserved,
        ),
    ] {
        if cfg.enforces(key) {
            out.push((cgroup.clone(), cgroup_config(rl, compressible)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::parse_resources;

    fn cfg(enforce: &str, kube: &str, system: &str, kc: &str, sc: &str) -> NodeAllocatableConfig {
        NodeAllocatableConfig {
            enforce: enforce
                .split(',')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            kube_reserved: parse_resources(kube).unwrap(),
            system_reserved: parse_resources(system).unwrap(),
            kube_reserved_cgroup: kc.into(),
            system_reserved_cgroup: sc.into(),
        }
    }

    #[test]
    fn root_cgroup_is_capacity_minus_reservations() {
        let cap = internal_capacity(
            &parse_resources("cpu=4,memory=8Gi,pods=110,hugepages-2Mi=0").unwrap(),
            Some(4_194_304),
        );
        // (enforce, kube-reserved, system-reserved) → (shares, memory, pids)
        let cases = [
            ("pods", "", "", (4096, 8i64 << 30, 4_194_304)),
            (
                "pods",
                "cpu=500m,memory=1Gi",
                "cpu=250m,memory=512Mi,pid=1000",
                (3328, (8i64 << 30) - (1536 << 20), 4_193_304),
            ),
            // Not enforced: the capacity.
            ("", "cpu=1,memory=1Gi", "", (4096, 8 << 30, 4_194_304)),
            // Reservations above capacity floor at zero (shares at the minimum).
            ("pods", "cpu=8,memory=16Gi", "", (2, 0, 4_194_304)),
        ];
        for (enforce, kube, system, (shares, mem, pids)) in cases {
            let c = cfg(enforce, kube, system, "", "");
            let rc = root_config(&cap, &c);
            assert_eq!(
                (rc.cpu_shares, rc.memory, rc.pids_limit),
                (Some(shares), Some(mem), Some(pids)),
                "{enforce} {kube} {system}"
            );
            assert_eq!(rc.hugepage_limit.get(&(2 << 20)), Some(&0));
        }
    }

    #[test]
    fn reserved_cgroups_are_enforced_only_when_listed() {
        let c = cfg(
            "pods,kube-reserved,system-reserved-compressible",
            "cpu=500m,memory=1Gi",
            "cpu=1,memory=2Gi",
            "kube.slice",
            "system.slice",
        );
        let r = reserved_configs(&c);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].0, "system.slice");
        assert_eq!((r[0].1.cpu_shares, r[0].1.memory), (Some(1024), None));
        assert_eq!(r[1].0, "kube.slice");
        assert_eq!(
            (r[1].1.cpu_shares, r[1].1.memory),
            (Some(512), Some(1 << 30))
        );
        assert!(reserved_configs(&cfg("pods", "cpu=1", "", "k", "")).is_empty());
    }

    #[test]
    fn validation_as_upstream() {
        let ok = [
            cfg("pods", "", "", "", ""),
            cfg("", "", "", "", ""),
            cfg("none", "", "", "", ""),
            cfg("pods,kube-reserved,system-reserved", "", "", "k", "s"),
        ];
        for c in ok {
            assert_eq!(c.validate(true), Ok(()), "{:?}", c.enforce);
        }
        let bad = [
            (
                cfg("pods,kube-reserved", "", "", "", ""),
                true,
                "invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when \"kube-reserved\" contained in enforceNodeAllocatable (--enforce-node-allocatable)",
            ),
            (
                cfg("system-reserved", "", "", "", ""),
                true,
                "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified when \"system-reserved\" contained in enforceNodeAllocatable (--enforce-node-allocatable)",
            ),
            (
                cfg("none,pods", "", "", "", ""),
                true,
                "may not contain additional enforcements when \"none\" is specified",
            ),
            (
                cfg("pod", "", "", "", ""),
                true,
                "option \"pod\" specified for enforceNodeAllocatable",
            ),
            (
                cfg("pods", "", "", "", ""),
                false,
                "is not supported unless cgroupsPerQOS (--cgroups-per-qos) feature is turned on",
            ),
            (
                cfg("kube-reserved,kube-reserved-compressible", "", "", "k", ""),
                true,
                "both \"kube-reserved\" and \"kube-reserved-compressible\" cannot be specified together",
            ),
        ];
        for (c, per_qos, want) in bad {
            let e = c.validate(per_qos).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
        assert_eq!(cfg("none", "", "", "", "").validate(false), Ok(()));
    }
}
