//! Victim selection on one node and the choice between candidate nodes
//! (upstream `SelectVictimsOnNode`, `filterPodsWithPDBViolation`,
//! `pickOneNodeForPreemption`).

use std::cmp::Ordering;
use std::sync::Arc;

use berth_api::selector::LabelSelector;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;

use crate::framework::{CycleState, FilterHandle, NodeInfo, PodInfo, Status};

use super::NO_VICTIMS;

/// A node where preemption would make the pod fit.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub node: String,
    /// Highest priority first.
    pub victims: Vec<Arc<PodInfo>>,
    pub num_pdb_violations: usize,
}

fn start_time(p: &PodInfo) -> Option<Timestamp> {
    p.pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0)
}

/// Upstream's `MoreImportantPod`: higher priority, then the one started earlier.
fn more_important(a: &PodInfo, b: &PodInfo) -> Ordering {
    b.priority().cmp(&a.priority()).then_with(|| {
        let now = Timestamp::now();
        start_time(a)
            .unwrap_or(now)
            .cmp(&start_time(b).unwrap_or(now))
    })
}

/// Splits victims into those whose eviction would exceed a PDB's
/// `disruptionsAllowed` and the rest, keeping their order.
pub fn filter_pods_with_pdb_violation(
    pods: Vec<Arc<PodInfo>>,
    pdbs: &[PodDisruptionBudget],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i32> = pdbs
        .iter()
        .map(|p| {
            p.status
                .as_ref()
                .map(|s| s.disruptions_allowed)
                .unwrap_or(0)
        })
        .collect();
    let selectors: Vec<Option<LabelSelector>> = pdbs
        .iter()
        .map(|p| {
            let sel = p.spec.as_ref()?.selector.as_ref()?;
            let sel = LabelSelector::from_meta(&serde_json::to_value(sel).ok()?).ok()?;
            // A PDB with an empty selector matches nothing.
            (!sel.is_empty()).then_some(sel)
        })
        .collect();
    let (mut violating, mut ok) = (Vec::new(), Vec::new());
    for pi in pods {
        let mut violated = false;
        if !pi.labels().is_empty() {
            for (i, pdb) in pdbs.iter().enumerate() {
                if pdb.metadata.namespace.as_deref() != Some(pi.namespace()) {
                    continue;
                }
                let Some(sel) = &selectors[i] else { continue };
                if !sel.matches(pi.labels()) {
                    continue;
                }
                let name = pi.pod.metadata.name.as_deref().unwrap_or_default();
                let disrupted = pdb
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.as_ref())
                    .is_some_and(|d| d.contains_key(name));
                if disrupted {
                    continue;
                }
                allowed[i] -= 1;
                if allowed[i] < 0 {
                    violated = true;
                }
            }
        }
        if violated {
            violating.push(pi);
        } else {
            ok.push(pi);
        }
    }
    (violating, ok)
}

/// Removes every lower-priority pod; if the pod then fits, adds back as
/// many as possible (PDB-violating ones first, higher priority first).
pub fn select_victims_on_node(
    state: &CycleState,
    pod: &PodInfo,
    node: &NodeInfo,
    pdbs: &[PodDisruptionBudget],
    handle: &dyn FilterHandle,
) -> Result<Candidate, Status> {
    // The dry run changes its own copies of the node and the cycle state.
    let mut state = state.clone();
    let mut trial = node.clone();
    let mut potential: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| p.priority() < pod.priority())
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(Status::unresolvable(NO_VICTIMS));
    }
    for v in &potential {
        trial.remove_pod(&v.key());
        handle.remove_pod(&mut state, pod, v, &trial);
    }
    let s = handle.run_filter(&state, pod, &trial);
    if !s.is_success() {
        return Err(s);
    }
    potential.sort_by(|a, b| more_important(a, b));
    let (violating, non_violating) = filter_pods_with_pdb_violation(potential, pdbs);
    let mixed = !violating.is_empty() && !non_violating.is_empty();
    let mut victims = Vec::new();
    let mut num_pdb_violations = 0;
    for (pi, is_violating) in violating
        .into_iter()
        .map(|p| (p, true))
        .chain(non_violating.into_iter().map(|p| (p, false)))
    {
        trial.add_pod_arc(pi.clone());
        handle.add_pod(&mut state, pod, &pi, &trial);
        if !handle.run_filter(&state, pod, &trial).is_success() {
            trial.remove_pod(&pi.key());
            handle.remove_pod(&mut state, pod, &pi, &trial);
            victims.push(pi);
            if is_violating {
                num_pdb_violations += 1;
            }
        }
    }
    if mixed {
        victims.sort_by(|a, b| more_important(a, b));
    }
    Ok(Candidate {
        node: node.name().to_string(),
        victims,
        num_pdb_violations,
    })
}

/// Upstream's criteria, in order: fewest PDB violations, lowest highest
/// victim priority, lowest priority sum, fewest victims, latest start of the
/// highest-priority victims, then the first.
pub fn pick_one_node(mut candidates: Vec<Candidate>) -> Option<Candidate> {
    if candidates.is_empty() {
        return None;
    }
    // A node needing no victims wins outright.
    if let Some(i) = candidates.iter().position(|c| c.victims.is_empty()) {
        return Some(candidates.swap_remove(i));
    }
    let highest = |c: &Candidate| c.victims.first().map(|v| v.priority()).unwrap_or(i32::MIN);
    let sum = |c: &Candidate| -> i64 {
        c.victims
            .iter()
            .map(|v| i64::from(v.priority()) + i64::from(i32::MAX) + 1)
            .sum()
    };
    let earliest_of_highest = |c: &Candidate| -> Timestamp {
        let top = highest(c);
        c.victims
            .iter()
            .filter(|v| v.priority() == top)
            .filter_map(|v| start_time(v))
            .min()
            .unwrap_or_else(Timestamp::now)
    };
    let mut best = 0;
    for i in 1..candidates.len() {
        let (a, b) = (&candidates[i], &candidates[best]);
        let better = a
            .num_pdb_violations
            .cmp(&b.num_pdb_violations)
            .then_with(|| highest(a).cmp(&highest(b)))
            .then_with(|| sum(a).cmp(&sum(b)))
            .then_with(|| a.victims.len().cmp(&b.victims.len()))
            .then_with(|| earliest_of_highest(b).cmp(&earliest_of_highest(a)));
        if better == Ordering::Less {
            best = i;
        }
    }
    Some(candidates.swap_remove(best))
}
