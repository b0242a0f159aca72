//! The static CPU policy's allocation (upstream's `cpu_assignment.go`
//! `takeByTopologyNUMAPacked`) and its hint generation
//! (`generateCPUTopologyHints`).

use std::collections::BTreeMap;

use crate::bitmask::{BitMask, iterate_bit_masks, iterate_combinations};
use crate::cpuset::CpuSet;
use crate::hint::TopologyHint;
use crate::machine::Machine;

/// Up to this many NUMA nodes every combination is a hint, as upstream;
/// above it (upstream refuses such machines) only the combinations up to one
/// node wider than the narrowest possible, plus the whole machine, so hint
/// lists stay small. Preferred hints are always all there.
pub const EXHAUSTIVE_HINT_NODES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocationError {
    #[error(
        "not enough cpus available to satisfy request: requested={requested}, available={available}"
    )]
    NotEnough { requested: usize, available: usize },
}

/// Takes `n` CPUs from `available`: whole sockets first, then whole cores,
/// then single threads, each time from the socket and core with the fewest
/// free CPUs left (packing), lowest ids first.
pub fn take_by_topology(
    m: &Machine,
    available: &CpuSet,
    n: usize,
) -> Result<CpuSet, AllocationError> {
    if n > available.len() {
        return Err(AllocationError::NotEnough {
            requested: n,
            available: available.len(),
        });
    }
    let mut free = available.clone();
    let mut out = CpuSet::new();
    let group = |key: &dyn Fn(usize) -> usize| {
        let mut all: BTreeMap<usize, CpuSet> = BTreeMap::new();
        for &c in m.cpus.keys() {
            all.entry(key(c)).or_default().insert(c);
        }
        all
    };
    let sockets = group(&|c| m.cpus[&c].socket);
    let cores = group(&|c| m.cpus[&c].core);
    // 1. Whole free sockets while the request needs at least a socket.
    for cpus in sockets.values() {
        let need = n - out.len();
        if cpus.len() <= need && cpus.is_subset(&free) {
            out = out.union(cpus);
            free = free.difference(cpus);
        }
    }
    // 2. Whole free cores, from the sockets with the fewest free CPUs.
    let socket_free = |free: &CpuSet, s: usize| sockets[&s].intersection(free).len();
    let mut core_order: Vec<(usize, &CpuSet)> = cores.iter().map(|(&k, v)| (k, v)).collect();
    core_order.sort_by_key(|(k, _)| (socket_free(&free, m.cpus[k].socket), *k));
    for (_, cpus) in &core_order {
        let need = n - out.len();
        if cpus.len() <= need && cpus.is_subset(&free) {
            out = out.union(cpus);
            free = free.difference(cpus);
        }
    }
    // 3. Single threads: partly used cores first, in the fullest sockets.
    let mut threads: Vec<usize> = free.iter().collect();
    threads.sort_by_key(|&c| {
        let i = m.cpus[&c];
        (
            socket_free(&free, i.socket),
            cores[&i.core].intersection(&free).len(),
            i.core,
            c,
        )
    });
    for c in threads {
        if out.len() == n {
            break;
        }
        out.insert(c);
    }
    Ok(out)
}

/// The CPU Manager's hints for a request of `request` exclusive CPUs: every
/// NUMA combination with enough available CPUs, preferred when as narrow as
/// the machine's capacity allows.
pub fn cpu_topology_hints(m: &Machine, available: &CpuSet, request: usize) -> Vec<TopologyHint> {
    let nodes = &m.numa.nodes;
    let fits_capacity =
        |mask: &BitMask| m.cpus.values().filter(|i| mask.is_set(i.numa_node)).count() >= request;
    let free_in = |mask: &BitMask| {
        available
            .iter()
            .filter(|c| m.cpus.get(c).is_some_and(|i| mask.is_set(i.numa_node)))
            .count()
    };
    let mut masks = Vec::new();
    if nodes.len() <= EXHAUSTIVE_HINT_NODES {
        let _ = iterate_bit_masks(nodes, |mask| masks.push(mask));
    } else {
        let min = (1..=nodes.len())
            .find(|&k| {
                let mut fits = false;
                iterate_combinations(nodes, k, &mut |mask| fits |= fits_capacity(&mask));
                fits
            })
            .unwrap_or(nodes.len());
        for k in 1..=(min + 1).min(nodes.len()) {
            iterate_combinations(nodes, k, &mut |mask| masks.push(mask));
        }
        masks.push(m.numa.default_affinity_mask());
    }
    let min_affinity = masks
        .iter()
        .filter(|mk| fits_capacity(mk))
        .map(|mk| mk.count())
        .min()
        .unwrap_or(nodes.len());
    let mut seen = std::collections::HashSet::new();
    masks
        .into_iter()
        .filter(|mk| seen.insert(*mk) && free_in(mk) >= request)
        .map(|mk| TopologyHint::new(mk, mk.count() == min_affinity))
        .collect()
}

/// `full-pcpus-only`'s refusal (upstream's `SMTAlignmentError`, the pod's
/// status reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmtAlignmentError {
    #[error(
        "SMT Alignment Error: requested {requested} cpus not multiple cpus per core = {cpus_per_core}"
    )]
    NotMultiple {
        requested: usize,
        cpus_per_core: usize,
    },
    #[error(
        "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = {available}, requested CPUs = {requested}, CPUs per core = {cpus_per_core}"
    )]
    NotEnoughPhysical {
        available: usize,
        requested: usize,
        cpus_per_core: usize,
    },
}

pub const SMT_ALIGNMENT_ERROR: &str = "SMTAlignmentError";

/// `full-pcpus-only`: whole cores only, so the request must be a multiple of
/// the threads per core and fit in the wholly free cores.
pub fn check_full_pcpus(
    m: &Machine,
    available: &CpuSet,
    request: usize,
) -> Result<(), SmtAlignmentError> {
    let per_core = m.cpus_per_core();
    if !request.is_multiple_of(per_core) {
        return Err(SmtAlignmentError::NotMultiple {
            requested: request,
            cpus_per_core: per_core,
        });
    }
    let mut cores: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
    for (&c, i) in &m.cpus {
        let e = cores.entry(i.core).or_default();
        e.0 += 1;
        e.1 += usize::from(available.contains(c));
    }
    let free_physical: usize = cores
        .values()
        .filter(|(all, free)| all == free)
        .map(|(all, _)| all)
        .sum();
    if free_physical < request {
        return Err(SmtAlignmentError::NotEnoughPhysical {
            available: free_physical,
            requested: request,
            cpus_per_core: per_core,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::FakeSysfs;

    fn machine(sockets: usize, cores: usize, threads: usize) -> Machine {
        Machine::discover(&FakeSysfs::machine(sockets, 1, cores, threads, 0)).unwrap()
    }

    #[test]
    fn allocation_order() {
        // (machine, available, request, expected)
        let seed = machine(2, 4, 1);
        let smt = machine(2, 4, 2); // socket 0: 0-3,8-11; socket 1: 4-7,12-15
        let cases: &[(&Machine, &str, usize, &str)] = &[
            (&seed, "0-7", 4, "0-3"),
            (&seed, "1-7", 4, "4-7"),
            (&seed, "1-7", 2, "1-2"),
            (&seed, "0-7", 8, "0-7"),
            (&smt, "0-15", 8, "0-3,8-11"),
            (&smt, "0-15", 2, "0,8"),
            (&smt, "1-15", 2, "1,9"),
            (&smt, "1-15", 1, "8"),
            (&smt, "1-15", 10, "1,4-7,9,12-15"),
        ];
        for (m, avail, n, want) in cases {
            let got = take_by_topology(m, &avail.parse().unwrap(), *n).unwrap();
            let want: CpuSet = want.parse().unwrap();
            assert_eq!(got, want, "{avail} take {n}");
        }
        assert_eq!(
            take_by_topology(&seed, &"0-1".parse().unwrap(), 3)
                .unwrap_err()
                .to_string(),
            "not enough cpus available to satisfy request: requested=3, available=2"
        );
    }

    #[test]
    fn hints() {
        let seed = machine(2, 4, 1);
        let h = |bits: &[usize], p: bool| TopologyHint::new(BitMask::new(bits).unwrap(), p);
        assert_eq!(
            cpu_topology_hints(&seed, &"0-7".parse().unwrap(), 2),
            vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)]
        );
        assert_eq!(
            cpu_topology_hints(&seed, &"3-7".parse().unwrap(), 4),
            vec![h(&[1], true), h(&[0, 1], false)]
        );
        assert_eq!(
            cpu_topology_hints(&seed, &"0-7".parse().unwrap(), 6),
            vec![h(&[0, 1], true)]
        );
        assert!(cpu_topology_hints(&seed, &"0-3".parse().unwrap(), 6).is_empty());
        // 16 nodes: bounded lists, the preferred single nodes all there.
        let big = Machine::discover(&FakeSysfs::machine(2, 8, 2, 1, 0)).unwrap();
        let hints = cpu_topology_hints(&big, &"0-31".parse().unwrap(), 2);
        assert_eq!(hints.iter().filter(|h| h.preferred).count(), 16);
        assert_eq!(hints.len(), 16 + 120 + 1);
    }

    #[test]
    fn full_pcpus_only() {
        let smt = machine(2, 4, 2);
        let all: CpuSet = "0-15".parse().unwrap();
        assert_eq!(check_full_pcpus(&smt, &all, 4), Ok(()));
        assert_eq!(
            check_full_pcpus(&smt, &all, 3).unwrap_err().to_string(),
            "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"
        );
        // CPU 0 taken: its core is no longer whole; 7 whole cores = 14 CPUs.
        assert_eq!(
            check_full_pcpus(&smt, &"1-15".parse().unwrap(), 16)
                .unwrap_err()
                .to_string(),
            "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 14, requested CPUs = 16, CPUs per core = 2"
        );
        // Without SMT every request is whole cores.
        assert_eq!(
            check_full_pcpus(&machine(2, 4, 1), &"0-7".parse().unwrap(), 3),
            Ok(())
        );
    }
}
