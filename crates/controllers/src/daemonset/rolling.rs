//! The DaemonSet rolling update as a pure function (upstream's `rollingUpdate`
//! in `daemon/update.go`): without surge, delete old pods while fewer than
//! maxUnavailable nodes are unavailable; with surge, start new pods beside
//! available old ones (at most maxSurge at once) and delete the old pod once
//! the new one is available.

/// One pod as the update sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub name: String,
    pub available: bool,
}

/// A node's daemon pods, split by template revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePods {
    pub node: String,
    pub should_run: bool,
    pub new: Option<PodRef>,
    pub old: Option<PodRef>,
    /// False when the node has more than one pod of a kind (the manage step
    /// cleans that up first).
    pub ok: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Update {
    pub delete: Vec<String>,
    pub create_on: Vec<String>,
}

/// `nodes` must be in a stable order (by name).
pub fn rolling_update(nodes: &[NodePods], max_surge: i32, max_unavailable: i32) -> Update {
    let mut out = Update::default();
    if max_surge == 0 {
        let mut unavailable = 0;
        let mut replace_now = Vec::new();
        let mut candidates = Vec::new();
        for n in nodes {
            if !n.ok {
                unavailable += 1;
                continue;
            }
            match (&n.new, &n.old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !new.available {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !old.available {
                        replace_now.push(old.name.clone());
                    } else if unavailable < max_unavailable {
                        candidates.push(old.name.clone());
                    }
                }
            }
        }
        let room = usize::try_from((max_unavailable - unavailable).max(0)).unwrap_or(0);
        out.delete = replace_now;
        out.delete.extend(candidates.into_iter().take(room));
        return out;
    }
    let mut surging = 0;
    let mut replace_now = Vec::new();
    let mut candidates = Vec::new();
    for n in nodes {
        if !n.ok {
            surging += 1;
            continue;
        }
        if !n.should_run {
            if let Some(old) = &n.old {
                out.delete.push(old.name.clone());
            }
            continue;
        }
        match (&n.new, &n.old) {
            (_, None) => {}
            (None, Some(old)) => {
                if !old.available {
                    replace_now.push(n.node.clone());
                } else if surging < max_surge {
                    candidates.push(n.node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if new.available {
                    out.delete.push(old.name.clone());
                } else {
                    surging += 1;
                }
            }
        }
    }
    let room = usize::try_from((max_surge - surging).max(0)).unwrap_or(0);
    out.create_on = replace_now;
    out.create_on.extend(candidates.into_iter().take(room));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, available: bool) -> Option<PodRef> {
        Some(PodRef {
            name: name.into(),
            available,
        })
    }

    fn node(n: &str, new: Option<PodRef>, old: Option<PodRef>) -> NodePods {
        NodePods {
            node: n.into(),
            should_run: true,
            new,
            old,
            ok: true,
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn max_unavailable_bounds_deletions() {
        let all_old = vec![
            node("a", None, pod("a-old", true)),
            node("b", None, pod("b-old", true)),
            node("c", None, pod("c-old", true)),
        ];
        let cases: Vec<(&str, Vec<NodePods>, i32, Update)> = vec![
            (
                "one at a time",
                all_old.clone(),
                1,
                Update {
                    delete: names(&["a-old"]),
                    ..Default::default()
                },
            ),
            (
                "two at a time",
                all_old.clone(),
                2,
                Update {
                    delete: names(&["a-old", "b-old"]),
                    ..Default::default()
                },
            ),
            (
                "a node being replaced uses the budget",
                vec![
                    node("a", pod("a-new", false), None),
                    node("b", None, pod("b-old", true)),
                ],
                1,
                Update::default(),
            ),
            (
                "an empty node counts as unavailable",
                vec![node("a", None, None), node("b", None, pod("b-old", true))],
                1,
                Update::default(),
            ),
            (
                "an unavailable old pod is replaced regardless",
                vec![
                    node("a", pod("a-new", false), None),
                    node("b", None, pod("b-old", false)),
                ],
                1,
                Update {
                    delete: names(&["b-old"]),
                    ..Default::default()
                },
            ),
            (
                "done",
                vec![node("a", pod("a-new", true), None)],
                1,
                Update::default(),
            ),
        ];
        for (what, nodes, mu, want) in cases {
            assert_eq!(rolling_update(&nodes, 0, mu), want, "{what}");
        }
    }

    #[test]
    fn surge() {
        let cases: Vec<(&str, Vec<NodePods>, i32, Update)> = vec![
            (
                "surges onto one node",
                vec![
                    node("a", None, pod("a-old", true)),
                    node("b", None, pod("b-old", true)),
                ],
                1,
                Update {
                    create_on: names(&["a"]),
                    ..Default::default()
                },
            ),
            (
                "waits while the surge pod starts",
                vec![
                    node("a", pod("a-new", false), pod("a-old", true)),
                    node("b", None, pod("b-old", true)),
                ],
                1,
                Update::default(),
            ),
            (
                "deletes the old pod once the new one is available",
                vec![
                    node("a", pod("a-new", true), pod("a-old", true)),
                    node("b", None, pod("b-old", true)),
                ],
                1,
                Update {
                    delete: names(&["a-old"]),
                    create_on: names(&["b"]),
                },
            ),
            (
                "an unavailable old pod gets its replacement at once",
                vec![
                    node("a", pod("a-new", false), pod("a-old", true)),
                    node("b", None, pod("b-old", false)),
                ],
                1,
                Update {
                    create_on: names(&["b"]),
                    ..Default::default()
                },
            ),
        ];
        for (what, nodes, ms, want) in cases {
            assert_eq!(rolling_update(&nodes, ms, 0), want, "{what}");
        }
    }
}
