//! NodeName: a pod with `spec.nodeName` fits only that node.

use crate::framework::{CycleState, Filter, NodeInfo, Plugin, PodInfo, Status};

pub const NAME: &str = "NodeName";
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl Filter for NodeName {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match pod.pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            Some(want) if !want.is_empty() && want != node.name() => {
                Status::unresolvable(ERR_REASON)
            }
            _ => Status::success(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::plugins::testing::*;

    #[test]
    fn table() {
        let cases = [
            (None, Code::Success),
            (Some("n1"), Code::Success),
            (Some("n2"), Code::UnschedulableAndUnresolvable),
        ];
        for (want_node, code) in cases {
            let mut p = pod("p", &[]);
            p.spec.get_or_insert_default().node_name = want_node.map(Into::into);
            let s = NodeName.filter(
                &CycleState::default(),
                &PodInfo::new(p),
                &node_info(node("n1", &[]), vec![]),
            );
            assert_eq!(s.code(), code, "{want_node:?}");
            if code != Code::Success {
                assert_eq!(s.message(), ERR_REASON);
            }
        }
    }
}
