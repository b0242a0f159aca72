//! What one StatefulSet sync should do, as a pure function of its pods
//! (upstream's `updateStatefulSet` in `stateful_set_control.go`): fill
//! missing ordinals in order, remove condemned ordinals from the highest,
//! then roll pods to the update revision from the highest ordinal down to
//! the partition.

/// The parts of a pod the plan looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodState {
    pub ordinal: i32,
    pub name: String,
    pub revision: String,
    /// Succeeded or Failed: replaced by a fresh pod.
    pub finished: bool,
    pub running_ready: bool,
    /// Ready for at least minReadySeconds.
    pub available: bool,
    pub terminating: bool,
}

impl PodState {
    fn healthy(&self) -> bool {
        self.running_ready && !self.terminating
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Create(i32),
    Delete(String),
}

#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub start: i32,
    pub replicas: i32,
    /// OrderedReady (one pod at a time, each waiting for the previous).
    pub ordered: bool,
    /// RollingUpdate (vs OnDelete).
    pub rolling: bool,
    pub partition: i32,
}

/// The steps of one sync, in order. Ordered sets stop at the first step or
/// the first pod they must wait for.
pub fn plan(spec: Spec, pods: &[PodState], update_revision: &str) -> Vec<Step> {
    let end = spec.start + spec.replicas.max(0);
    let in_range = |o: i32| o >= spec.start && o < end;
    let mut condemned: Vec<&PodState> = pods.iter().filter(|p| !in_range(p.ordinal)).collect();
    condemned.sort_by_key(|p| p.ordinal);
    let slot = |o: i32| pods.iter().find(|p| p.ordinal == o);
    let first_unhealthy = (spec.start..end)
        .filter_map(slot)
        .chain(condemned.iter().copied())
        .find(|p| !p.healthy())
        .map(|p| p.name.clone());

    let mut steps = Vec::new();
    for o in spec.start..end {
        match slot(o) {
            None => {
                steps.push(Step::Create(o));
                if spec.ordered {
                    return steps;
                }
            }
            Some(p) if p.finished => {
                // Replaced on the sync after the old pod is gone.
                if !p.terminating {
                    steps.push(Step::Delete(p.name.clone()));
                }
                if spec.ordered {
                    return steps;
                }
            }
            Some(p) => {
                if spec.ordered && (p.terminating || !p.running_ready || !p.available) {
                    return steps;
                }
            }
        }
    }
    for p in condemned.iter().rev() {
        if p.terminating {
            if spec.ordered {
                return steps;
            }
            continue;
        }
        if spec.ordered && !p.running_ready && first_unhealthy.as_deref() != Some(&p.name) {
            return steps;
        }
        steps.push(Step::Delete(p.name.clone()));
        if spec.ordered {
            return steps;
        }
    }
    if !spec.rolling {
        return steps;
    }
    let update_min = (spec.start + spec.partition.max(0)).min(end);
    for o in (update_min..end).rev() {
        let Some(p) = slot(o) else {
            return steps;
        };
        if p.revision != update_revision && !p.terminating {
            steps.push(Step::Delete(p.name.clone()));
            return steps;
        }
        if !p.healthy() {
            return steps;
        }
    }
    steps
}

/// The revision a new pod at `ordinal` gets (upstream's
/// `newVersionedStatefulSetPod`): ordinals below the partition (or, without a
/// partition, below the current replica count) stay on the current revision.
pub fn revision_for(
    ordinal: i32,
    start: i32,
    rolling: bool,
    partition: Option<i32>,
    current_replicas: i32,
) -> bool {
    if !rolling {
        return false;
    }
    match partition {
        Some(p) => ordinal < start + p,
        None => ordinal < start + current_replicas,
    }
}

/// The ordinal in a pod name `<set>-<ordinal>`.
pub fn parse_ordinal(set: &str, pod: &str) -> Option<i32> {
    let digits = pod.strip_prefix(set)?.strip_prefix('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(o: i32, rev: &str, ready: bool) -> PodState {
        PodState {
            ordinal: o,
            name: format!("web-{o}"),
            revision: rev.into(),
            finished: false,
            running_ready: ready,
            available: ready,
            terminating: false,
        }
    }

    fn spec(replicas: i32, ordered: bool) -> Spec {
        Spec {
            start: 0,
            replicas,
            ordered,
            rolling: true,
            partition: 0,
        }
    }

    fn del(o: i32) -> Step {
        Step::Delete(format!("web-{o}"))
    }

    #[test]
    fn ordered_and_parallel_plans() {
        let r = "rev2";
        let cases: Vec<(&str, Spec, Vec<PodState>, Vec<Step>)> = vec![
            (
                "empty ordered creates web-0 only",
                spec(3, true),
                vec![],
                vec![Step::Create(0)],
            ),
            (
                "waits for web-0 to be ready",
                spec(3, true),
                vec![pod(0, r, false)],
                vec![],
            ),
            (
                "web-0 ready: creates web-1",
                spec(3, true),
                vec![pod(0, r, true)],
                vec![Step::Create(1)],
            ),
            (
                "ready but not yet available waits",
                spec(3, true),
                vec![PodState {
                    available: false,
                    ..pod(0, r, true)
                }],
                vec![],
            ),
            (
                "parallel creates all",
                spec(3, false),
                vec![],
                vec![Step::Create(0), Step::Create(1), Step::Create(2)],
            ),
            (
                "scale down removes highest first, one at a time",
                spec(1, true),
                vec![pod(0, r, true), pod(1, r, true), pod(2, r, true)],
                vec![del(2)],
            ),
            (
                "scale down waits for a terminating pod",
                spec(1, true),
                vec![
                    pod(0, r, true),
                    pod(1, r, true),
                    PodState {
                        terminating: true,
                        ..pod(2, r, true)
                    },
                ],
                vec![],
            ),
            (
                "parallel scale down removes all condemned",
                spec(1, false),
                vec![pod(0, r, true), pod(1, r, true), pod(2, r, true)],
                vec![del(2), del(1)],
            ),
            (
                "failed pod is deleted to be recreated",
                spec(2, true),
                vec![
                    PodState {
                        finished: true,
                        ..pod(0, r, false)
                    },
                    pod(1, r, true),
                ],
                vec![del(0)],
            ),
            (
                "rolling update starts at the highest ordinal",
                spec(3, true),
                vec![
                    pod(0, "rev1", true),
                    pod(1, "rev1", true),
                    pod(2, "rev1", true),
                ],
                vec![del(2)],
            ),
            (
                "rolling update waits for the updated pod to be healthy",
                spec(3, true),
                vec![pod(0, "rev1", true), pod(1, "rev1", true), pod(2, r, false)],
                vec![],
            ),
            (
                "rolling update continues below an updated healthy pod",
                spec(3, true),
                vec![pod(0, "rev1", true), pod(1, "rev1", true), pod(2, r, true)],
                vec![del(1)],
            ),
            (
                "partition keeps lower ordinals",
                Spec {
                    partition: 2,
                    ..spec(3, true)
                },
                vec![pod(0, "rev1", true), pod(1, "rev1", true), pod(2, r, true)],
                vec![],
            ),
            (
                "on delete never deletes for an update",
                Spec {
                    rolling: false,
                    ..spec(3, true)
                },
                vec![
                    pod(0, "rev1", true),
                    pod(1, "rev1", true),
                    pod(2, "rev1", true),
                ],
                vec![],
            ),
            (
                "start ordinal shifts the range",
                Spec {
                    start: 5,
                    ..spec(2, true)
                },
                vec![],
                vec![Step::Create(5)],
            ),
        ];
        for (what, s, pods, want) in cases {
            assert_eq!(plan(s, &pods, r), want, "{what}");
        }
    }

    #[test]
    fn new_pod_revision() {
        // (ordinal, rolling, partition, current replicas) → current revision?
        let cases = [
            (0, true, Some(2), 0, true),
            (2, true, Some(2), 0, false),
            (1, true, None, 2, true),
            (2, true, None, 2, false),
            (0, false, None, 3, false),
        ];
        for (o, rolling, part, cur, want) in cases {
            assert_eq!(revision_for(o, 0, rolling, part, cur), want, "{o} {part:?}");
        }
    }

    #[test]
    fn ordinals() {
        let cases = [
            ("web-0", Some(0)),
            ("web-12", Some(12)),
            ("web-", None),
            ("web-x", None),
            ("web-+1", None),
            ("webb-1", None),
            ("web-1-2", None),
            ("other-1", None),
        ];
        for (name, want) in cases {
            assert_eq!(parse_ordinal("web", name), want, "{name}");
        }
    }
}
