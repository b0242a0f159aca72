//! Hint merging (upstream's `topologymanager/policy.go` HintMerger).
//!
//! Upstream walks the cross product of every provider's hints and folds each
//! permutation into a best hint. Berth computes the same result without the
//! full cross product, so merging stays fast at any NUMA node count:
//!
//! 1. A merged hint is preferred only when every provider offers the same
//!    preferred mask (or has no preference). So the preferred candidates are the
//!    intersection of the providers' preferred masks — a set intersection, not a
//!    product — and if there is one, the fittest of them is upstream's result.
//! 2. Otherwise every candidate is non-preferred, and upstream's fold picks,
//!    whatever the order it meets them in: the fittest candidate whose width is
//!    the widest of the providers' narrowest hints (`best_non_preferred`), else
//!    the widest below it, else the fittest overall. The candidates are the
//!    distinct ANDs of one hint per provider, built provider by provider with
//!    duplicates dropped (the sets stay as small as the distinct masks).
//!
//! "Fittest" is upstream's comparison: narrowest (fewest nodes, then lowest
//! ids), or with `prefer-closest-numa-nodes` the smallest average distance
//! among equally wide masks.

use std::collections::{BTreeMap, HashSet};

use crate::bitmask::BitMask;
use crate::hint::TopologyHint;
use crate::provider::HintMap;

/// The machine's NUMA nodes and their distances (upstream's `NUMAInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaInfo {
    pub nodes: Vec<usize>,
    /// `distances[&i][j]`: the distance from node `i` to node `j` (sysfs
    /// `node<i>/distance`, indexed by node id).
    pub distances: BTreeMap<usize, Vec<u64>>,
}

impl NumaInfo {
    /// Nodes `0..n` with the usual local 10 / remote 20 distances.
    pub fn uniform(n: usize) -> Self {
        let nodes: Vec<usize> = (0..n).collect();
        let distances = nodes
            .iter()
            .map(|&i| {
                (
                    i,
                    nodes
                        .iter()
                        .map(|&j| if i == j { 10 } else { 20 })
                        .collect(),
                )
            })
            .collect();
        NumaInfo { nodes, distances }
    }

    /// All nodes (upstream's `DefaultAffinityMask`).
    pub fn default_affinity_mask(&self) -> BitMask {
        let mut m = BitMask::empty();
        for &n in &self.nodes {
            // Node ids come from a validated machine topology.
            let _ = m.add(n);
        }
        m
    }

    /// The narrower mask, `a` when they are equal (upstream's `Narrowest`).
    pub fn narrowest(&self, a: BitMask, b: BitMask) -> BitMask {
        if b.is_narrower_than(&a) { b } else { a }
    }

    /// The mask with the smaller average distance between its nodes among
    /// equally wide ones, else the narrower (upstream's `Closest`).
    pub fn closest(&self, a: BitMask, b: BitMask) -> BitMask {
        if a.count() != b.count() {
            return self.narrowest(a, b);
        }
        let (da, db) = (self.average_distance(&a), self.average_distance(&b));
        if da == db {
            return if b.is_less_than(&a) { b } else { a };
        }
        if db < da { b } else { a }
    }

    /// Upstream's `CalculateAverageFor`: the mean of all pairwise distances,
    /// each node with itself included.
    pub fn average_distance(&self, m: &BitMask) -> f64 {
        let bits: Vec<usize> = m.bits().collect();
        if bits.is_empty() {
            return 0.0;
        }
        let mut sum = 0.0;
        for &i in &bits {
            for &j in &bits {
                let d = self
                    .distances
                    .get(&i)
                    .and_then(|row| row.get(j))
                    .copied()
                    .unwrap_or(if i == j { 10 } else { 20 });
                sum += d as f64;
            }
        }
        sum / (bits.len() * bits.len()) as f64
    }
}

/// Turns every provider's per-resource hints into one list per resource
/// (upstream's `filterProvidersHints`): a provider without hints, or a
/// resource without a preference, becomes a single preferred "any" hint; a
/// resource no placement satisfies becomes a single non-preferred "any" hint.
pub fn filter_providers_hints(providers: &[HintMap]) -> Vec<Vec<TopologyHint>> {
    let mut out = Vec::new();
    for hints in providers {
        if hints.is_empty() {
            out.push(vec![TopologyHint::any()]);
            continue;
        }
        for resource_hints in hints.values() {
            match resource_hints {
                None => out.push(vec![TopologyHint::any()]),
                Some(h) if h.is_empty() => out.push(vec![TopologyHint {
                    affinity: None,
                    preferred: false,
                }]),
                Some(h) => out.push(h.clone()),
            }
        }
    }
    out
}

/// The narrowest hint with an affinity in a list (upstream's `narrowestHint`).
fn narrowest_hint(hints: &[TopologyHint]) -> Option<BitMask> {
    let mut best: Option<BitMask> = None;
    for m in hints.iter().filter_map(|h| h.affinity) {
        best = match best {
            Some(b) if !m.is_narrower_than(&b) => Some(b),
            _ => Some(m),
        };
    }
    best
}

/// The widest of the providers' narrowest hints (upstream's
/// `maxOfMinAffinityCounts`): the width a non-preferred result aims at.
pub fn max_of_min_affinity_counts(hints: &[Vec<TopologyHint>]) -> usize {
    hints
        .iter()
        .filter_map(|h| narrowest_hint(h))
        .map(|m| m.count())
        .max()
        .unwrap_or(0)
}

/// How candidate masks are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    Narrowest,
    Closest,
}

/// Upstream's `HintMerger`.
pub struct HintMerger<'a> {
    pub numa: &'a NumaInfo,
    pub hints: &'a [Vec<TopologyHint>],
    pub fit: Fit,
}

impl HintMerger<'_> {
    fn fitter(&self, current: BitMask, candidate: BitMask) -> BitMask {
        if current == candidate {
            return current;
        }
        match self.fit {
            Fit::Narrowest => self.numa.narrowest(current, candidate),
            Fit::Closest => self.numa.closest(current, candidate),
        }
    }

    fn fittest(&self, masks: impl Iterator<Item = BitMask>) -> Option<BitMask> {
        masks.fold(None, |best, m| Some(best.map_or(m, |b| self.fitter(b, m))))
    }

    /// The best merged hint, as upstream's `Merge` over the cross product.
    pub fn merge(&self) -> TopologyHint {
        let default = self.numa.default_affinity_mask();
        if let Some(best) = self.best_preferred(default) {
            return TopologyHint::new(best, true);
        }
        // The last provider's ANDs go straight into the selection: the
        // widest step needs no set of its own.
        let target = max_of_min_affinity_counts(self.hints);
        let mut pick = Selection {
            merger: self,
            target,
            at_target: None,
            below: None,
            any: None,
        };
        let (last, rest) = match self.hints.split_last() {
            Some(split) => split,
            None => return TopologyHint::new(default, false),
        };
        let partial = self.non_preferred_candidates(default, rest);
        let last: HashSet<Option<BitMask>> = last.iter().map(|h| h.affinity).collect();
        for s in &partial {
            for m in &last {
                let merged = match m {
                    Some(m) => s.and(m),
                    None => *s,
                };
                if !merged.is_empty() {
                    pick.offer(merged);
                }
            }
        }
        TopologyHint::new(pick.best().unwrap_or(default), false)
    }

    /// The fittest mask every provider prefers (a provider with a preferred
    /// "any" hint accepts every mask), ANDed with the default affinity.
    fn best_preferred(&self, default: BitMask) -> Option<BitMask> {
        let mut common: Option<HashSet<BitMask>> = None;
        let mut all_any = true;
        for list in self.hints {
            let any = list.iter().any(|h| h.affinity.is_none() && h.preferred);
            let preferred: HashSet<BitMask> = list
                .iter()
                .filter(|h| h.preferred)
                .filter_map(|h| h.affinity)
                .collect();
            // A provider with a preferred "any" hint accepts every mask the
            // others agree on.
            if !any {
                all_any = false;
                common = Some(match common {
                    None => preferred,
                    Some(c) => c.intersection(&preferred).copied().collect(),
                });
            }
        }
        let mut candidates: Vec<BitMask> = match common {
            Some(c) => c
                .into_iter()
                .map(|m| m.and(&default))
                .filter(|m| !m.is_empty())
                .collect(),
            None => Vec::new(),
        };
        if all_any {
            candidates.push(default);
        }
        // Deterministic whatever the hash order: the comparison is a total order.
        candidates.sort_by(|a, b| a.cmp_value(b));
        self.fittest(candidates.into_iter())
    }

    /// The distinct non-empty ANDs of one hint per provider of `hints`.
    fn non_preferred_candidates(
        &self,
        default: BitMask,
        hints: &[Vec<TopologyHint>],
    ) -> HashSet<BitMask> {
        let mut set: HashSet<BitMask> = HashSet::from([default]);
        for list in hints {
            let mut next = HashSet::with_capacity(set.len().max(list.len()));
            let masks: HashSet<Option<BitMask>> = list.iter().map(|h| h.affinity).collect();
            for s in &set {
                for m in &masks {
                    let merged = match m {
                        Some(m) => s.and(m),
                        None => *s,
                    };
                    if !merged.is_empty() {
                        next.insert(merged);
                    }
                }
            }
            set = next;
            if set.is_empty() {
                break;
            }
        }
        set
    }
}

/// Upstream's fold over non-preferred candidates, whatever their order: the
/// fittest at the target width, else the fittest of the widest below it, else
/// the fittest of all.
struct Selection<'a, 'b> {
    merger: &'a HintMerger<'b>,
    target: usize,
    at_target: Option<BitMask>,
    below: Option<BitMask>,
    any: Option<BitMask>,
}

impl Selection<'_, '_> {
    fn offer(&mut self, m: BitMask) {
        let fit = |cur: Option<BitMask>| Some(cur.map_or(m, |c| self.merger.fitter(c, m)));
        let c = m.count();
        if c == self.target {
            self.at_target = fit(self.at_target);
        } else if c < self.target {
            self.below = match self.below {
                Some(b) if b.count() > c => Some(b),
                Some(b) if b.count() < c => Some(m),
                other => fit(other),
            };
        }
        self.any = fit(self.any);
    }

    fn best(&self) -> Option<BitMask> {
        self.at_target.or(self.below).or(self.any)
    }
}
