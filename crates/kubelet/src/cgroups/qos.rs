//! QoS cgroups (upstream's `qos_container_manager_linux.go`): `burstable` and
//! `besteffort` under the root, BestEffort at the minimum cpu shares (2) and
//! Burstable at the shares of the summed CPU requests of its pods (overhead
//! included), updated as pods come and go. Upstream's memory reservation on the
//! QoS cgroups (`--qos-reserved`, the QOSReserved gate) is off by default, and
//! so it is here: no memory limit is written at this level.

use super::Qos;
use super::manager::{CgroupName, MIN_SHARES, ResourceConfig, milli_cpu_to_shares};

/// The QoS cgroup of `qos` (None for Guaranteed: those pods sit in the root).
pub fn qos_cgroup_name(root: &CgroupName, qos: Qos) -> Option<CgroupName> {
    match qos {
        Qos::Guaranteed => None,
        Qos::Burstable => Some(root.child("burstable")),
        Qos::BestEffort => Some(root.child("besteffort")),
    }
}

/// The BestEffort cgroup's limits.
pub fn besteffort_config() -> ResourceConfig {
    ResourceConfig {
        cpu_shares: Some(MIN_SHARES),
        ..Default::default()
    }
}

/// The Burstable cgroup's limits from its pods' CPU requests in milli-cores
/// (upstream's `setCPUCgroupConfig`).
pub fn burstable_config(pod_cpu_requests_milli: impl IntoIterator<Item = i64>) -> ResourceConfig {
    let total: i64 = pod_cpu_requests_milli.into_iter().sum();
    ResourceConfig {
        cpu_shares: Some(milli_cpu_to_shares(total)),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_levels_follow_upstream() {
        let root = CgroupName::parse("berth");
        assert_eq!(qos_cgroup_name(&root, Qos::Guaranteed), None);
        assert_eq!(
            qos_cgroup_name(&root, Qos::Burstable)
                .unwrap()
                .to_cgroupfs(),
            "berth/burstable"
        );
        assert_eq!(
            qos_cgroup_name(&root, Qos::BestEffort)
                .unwrap()
                .to_cgroupfs(),
            "berth/besteffort"
        );
        assert_eq!(besteffort_config().cpu_shares, Some(2));
        assert_eq!(besteffort_config().memory, None);
        // (burstable pods' requests) → shares
        for (reqs, shares) in [
            (vec![], 2),
            (vec![0, 0], 2),
            (vec![250], 256),
            (vec![250, 750], 1024),
            (vec![100_000, 200_000], 262_144),
        ] {
            let rc = burstable_config(reqs.clone());
            assert_eq!(rc.cpu_shares, Some(shares), "{reqs:?}");
            assert_eq!(rc.memory, None);
        }
    }
}
