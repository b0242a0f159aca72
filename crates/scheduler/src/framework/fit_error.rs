//! Why no node fits (upstream `framework.FitError` and `Diagnosis`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use super::status::Status;
use super::types::PodInfo;

/// Preemption's outcome: the node the preemptor is nominated to and the
/// pods to evict there.
#[derive(Clone, Debug)]
pub struct Nomination {
    pub node: String,
    pub victims: Vec<Arc<PodInfo>>,
}

/// What the filters said about each rejected node.
#[derive(Clone, Debug, Default)]
pub struct Diagnosis {
    pub node_to_status: HashMap<String, Status>,
    /// Set when a PreFilter rejected the pod for all nodes.
    pub pre_filter_msg: String,
    /// The PostFilter (preemption) message, already prefixed by its plugin.
    pub post_filter_msg: String,
}

#[derive(Clone, Debug, Default)]
pub struct FitError {
    pub num_all_nodes: usize,
    pub diagnosis: Diagnosis,
    pub nomination: Option<Nomination>,
}

impl FitError {
    /// `"<count> <reason>"` per distinct reason, sorted as strings the way
    /// upstream's `sort.Strings` does (so `10 …` sorts before `2 …`).
    pub fn reason_histogram(node_to_status: &HashMap<String, Status>) -> Vec<String> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for status in node_to_status.values() {
            for r in status.reasons() {
                *counts.entry(r.as_str()).or_insert(0) += 1;
            }
        }
        let mut out: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
        out.sort();
        out
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        if !self.diagnosis.pre_filter_msg.is_empty() {
            write!(f, " {}.", self.diagnosis.pre_filter_msg)?;
        } else {
            let reasons = Self::reason_histogram(&self.diagnosis.node_to_status);
            if !reasons.is_empty() {
                write!(f, " {}.", reasons.join(", "))?;
            }
        }
        if !self.diagnosis.post_filter_msg.is_empty() {
            write!(f, " {}.", self.diagnosis.post_filter_msg)?;
        }
        Ok(())
    }
}

impl std::error::Error for FitError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn statuses(list: &[(&str, &[&str])]) -> HashMap<String, Status> {
        list.iter()
            .map(|(n, rs)| {
                (
                    n.to_string(),
                    Status::new(
                        super::super::status::Code::Unschedulable,
                        rs.iter().map(|r| r.to_string()).collect(),
                    ),
                )
            })
            .collect()
    }

    #[test]
    fn messages_match_upstream() {
        let taint = "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }";
        let cases: Vec<(HashMap<String, Status>, &str, &str, &str)> = vec![
            (
                statuses(&[
                    ("a", &["Insufficient cpu"]),
                    ("b", &["Insufficient cpu"]),
                    ("c", &["Insufficient cpu"]),
                ]),
                "",
                "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
                "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod..",
            ),
            (
                statuses(&[
                    ("a", &[taint]),
                    ("b", &["Insufficient cpu"]),
                    ("c", &["Insufficient cpu"]),
                ]),
                "",
                "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
                "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling..",
            ),
            (
                statuses(&[
                    ("a", &["Insufficient cpu", "Insufficient memory"]),
                    ("b", &["Too many pods"]),
                ]),
                "",
                "",
                "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods.",
            ),
            (HashMap::new(), "", "", "0/0 nodes are available:"),
            (
                statuses(&[("a", &["x"])]),
                "node(s) didn't match Pod's node affinity/selector",
                "",
                "0/1 nodes are available: node(s) didn't match Pod's node affinity/selector.",
            ),
        ];
        for (i, (nts, pre, post, want)) in cases.into_iter().enumerate() {
            let e = FitError {
                num_all_nodes: if i == 3 { 0 } else { nts.len().max(1) },
                diagnosis: Diagnosis {
                    node_to_status: nts,
                    pre_filter_msg: pre.into(),
                    post_filter_msg: post.into(),
                },
                nomination: None,
            };
            assert_eq!(e.to_string(), want, "case {i}");
        }
    }

    #[test]
    fn counts_sort_as_strings() {
        let mut m = HashMap::new();
        for i in 0..10 {
            m.insert(format!("a{i}"), Status::unschedulable("Insufficient cpu"));
        }
        m.insert("b".into(), Status::unschedulable("Too many pods"));
        m.insert("c".into(), Status::unschedulable("Too many pods"));
        assert_eq!(
            FitError::reason_histogram(&m),
            vec![
                "10 Insufficient cpu".to_string(),
                "2 Too many pods".to_string()
            ]
        );
    }
}
