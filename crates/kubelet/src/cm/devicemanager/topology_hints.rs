//! The device manager's NUMA hints (upstream's `topology_hints.go`
//! `generateDeviceTopologyHints`), as a pure function over the devices'
//! affinities, for the Topology Manager's merge.

use std::collections::{BTreeMap, BTreeSet};

use berth_topology::TopologyHint;
use berth_topology::bitmask::{BitMask, iterate_bit_masks};

/// Hints for `request` devices of one resource: every NUMA mask holding enough
/// available devices (and every device the container already holds), preferred
/// when its size is the smallest that could ever hold `request` healthy devices.
/// `affinity` maps each healthy device to its NUMA nodes (empty: no topology).
/// None when no device reports a topology: no preference, as upstream.
pub fn device_hints(
    numa_nodes: &[usize],
    affinity: &BTreeMap<String, Vec<usize>>,
    available: &BTreeSet<String>,
    reusable: &BTreeSet<String>,
    request: usize,
) -> Option<Vec<TopologyHint>> {
    if affinity.values().all(Vec::is_empty) {
        return None;
    }
    let in_mask = |id: &String, mask: &BitMask| {
        affinity
            .get(id)
            .is_some_and(|nodes| nodes.iter().any(|n| mask.is_set(*n)))
    };
    let mut min_size = numa_nodes.len();
    let mut hints = Vec::new();
    let r = iterate_bit_masks(numa_nodes, |mask| {
        let healthy = affinity.keys().filter(|id| in_mask(id, &mask)).count();
        if mask.count() < min_size && healthy >= request {
            min_size = mask.count();
        }
        if !reusable.iter().all(|id| in_mask(id, &mask)) {
            return;
        }
        let matching = available
            .iter()
            .chain(reusable.iter())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|id| in_mask(id, &mask))
            .count();
        if matching >= request {
            hints.push(TopologyHint {
                affinity: Some(mask),
                preferred: false,
            });
        }
    });
    if r.is_err() {
        // More NUMA nodes than a mask holds: no preference rather than a refusal.
        return None;
    }
    for h in &mut hints {
        h.preferred = h.affinity.as_ref().is_some_and(|m| m.count() == min_size);
    }
    Some(hints)
}

/// Upstream's `filterByAffinity` order for `needed` devices of a container
/// admitted on the NUMA nodes of `mask`: devices on those nodes first (by
/// node, then id), then devices without a topology, then the rest. An error
/// (upstream's message) when fewer than `needed` are available.
pub fn pick_aligned(
    resource: &str,
    needed: usize,
    mask: &BitMask,
    affinity: &BTreeMap<String, Vec<usize>>,
    available: &BTreeSet<String>,
) -> Result<Vec<String>, String> {
    if available.len() < needed {
        return Err(format!(
            "requested number of devices unavailable for {resource}. Requested: {needed}, Available: {}",
            available.len()
        ));
    }
    let mut ranked: Vec<(u8, usize, &String)> = available
        .iter()
        .map(|id| {
            let nodes = affinity.get(id).map(Vec::as_slice).unwrap_or_default();
            match nodes.iter().copied().filter(|n| mask.is_set(*n)).min() {
                Some(n) => (0, n, id),
                None if nodes.is_empty() => (1, 0, id),
                None => (2, 0, id),
            }
        })
        .collect();
    ranked.sort();
    Ok(ranked
        .into_iter()
        .take(needed)
        .map(|(_, _, id)| id.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masks(h: &Option<Vec<TopologyHint>>) -> Option<Vec<(Vec<usize>, bool)>> {
        h.as_ref().map(|v| {
            v.iter()
                .map(|t| {
                    (
                        t.affinity
                            .as_ref()
                            .map(|m| m.bits().collect())
                            .unwrap_or_default(),
                        t.preferred,
                    )
                })
                .collect()
        })
    }

    #[test]
    fn device_hints_table() {
        // The seed's machine: 2 NUMA nodes, 2 GPUs on each.
        let aff: BTreeMap<String, Vec<usize>> = [
            ("g0", vec![0]),
            ("g1", vec![0]),
            ("g2", vec![1]),
            ("g3", vec![1]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        type Want = Option<Vec<(Vec<usize>, bool)>>;
        type Case<'a> = (&'a str, BTreeSet<String>, BTreeSet<String>, usize, Want);
        let cases: Vec<Case> = vec![
            (
                "1 GPU, all free: each node preferred, both not",
                ids(&["g0", "g1", "g2", "g3"]),
                ids(&[]),
                1,
                Some(vec![(vec![0], true), (vec![1], true), (vec![0, 1], false)]),
            ),
            (
                "2 GPUs, node 0 half used: only node 1 or both",
                ids(&["g1", "g2", "g3"]),
                ids(&[]),
                2,
                Some(vec![(vec![1], true), (vec![0, 1], false)]),
            ),
            (
                "3 GPUs: only both nodes, preferred (the narrowest possible)",
                ids(&["g0", "g1", "g2", "g3"]),
                ids(&[]),
                3,
                Some(vec![(vec![0, 1], true)]),
            ),
            (
                "2 GPUs, one free on each node: both, not preferred",
                ids(&["g0", "g2"]),
                ids(&[]),
                2,
                Some(vec![(vec![0, 1], false)]),
            ),
            (
                "already holds g2: masks must include node 1",
                ids(&["g0", "g1"]),
                ids(&["g2"]),
                1,
                Some(vec![(vec![1], true), (vec![0, 1], false)]),
            ),
            (
                "5 GPUs: no mask can hold them",
                ids(&["g0", "g1", "g2", "g3"]),
                ids(&[]),
                5,
                Some(vec![]),
            ),
        ];
        for (what, available, reusable, request, want) in cases {
            let got = device_hints(&[0, 1], &aff, &available, &reusable, request);
            assert_eq!(masks(&got), want, "{what}");
        }
        let mask = |n: &[usize]| BitMask::new(n).unwrap();
        type PickCase<'a> = (
            &'a str,
            &'a [usize],
            &'a [&'a str],
            usize,
            Result<Vec<&'a str>, String>,
        );
        let picks: Vec<PickCase> = vec![
            (
                "node 1's devices first",
                &[1],
                &["g0", "g1", "g2", "g3"],
                2,
                Ok(vec!["g2", "g3"]),
            ),
            (
                "then the others",
                &[1],
                &["g0", "g1", "g3"],
                2,
                Ok(vec!["g3", "g0"]),
            ),
            (
                "both nodes: by node",
                &[0, 1],
                &["g3", "g1"],
                2,
                Ok(vec!["g1", "g3"]),
            ),
            (
                "too few",
                &[0],
                &["g0"],
                2,
                Err(
                    "requested number of devices unavailable for r. Requested: 2, Available: 1"
                        .into(),
                ),
            ),
        ];
        for (what, nodes, available, needed, want) in picks {
            let got = pick_aligned("r", needed, &mask(nodes), &aff, &ids(available));
            let want = want.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(got, want, "{what}");
        }
        // A device without a topology comes after the aligned ones, before the rest.
        let mut mixed = aff.clone();
        mixed.insert("x".into(), vec![]);
        assert_eq!(
            pick_aligned("r", 3, &mask(&[1]), &mixed, &ids(&["g0", "g2", "x"])).unwrap(),
            vec!["g2", "x", "g0"]
        );
        // No device reports a NUMA node: no preference.
        let flat: BTreeMap<String, Vec<usize>> = [("d".to_string(), vec![])].into();
        assert_eq!(
            device_hints(&[0, 1], &flat, &ids(&["d"]), &ids(&[]), 1),
            None
        );
    }
}
