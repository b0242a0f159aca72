//! NodeUnschedulable: cordoned nodes take only pods tolerating the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint.

use k8s_openapi::api::core::v1::Taint;

use crate::framework::{CycleState, Filter, NodeInfo, Plugin, PodInfo, Status};
use crate::plugins::tainttoleration::tolerates;

pub const NAME: &str = "NodeUnschedulable";
pub const ERR_REASON: &str = "node(s) were unschedulable";
pub const TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl Filter for NodeUnschedulable {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let cordoned = node
            .node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false);
        if !cordoned {
            return Status::success();
        }
        let taint = Taint {
            key: TAINT_KEY.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let tols = pod
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        if tols.iter().any(|t| tolerates(t, &taint)) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON)
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
            (false, vec![], Code::Success),
            (true, vec![], Code::UnschedulableAndUnresolvable),
            (
                true,
                vec![(TAINT_KEY, "Exists", "", "NoSchedule")],
                Code::Success,
            ),
            (
                true,
                vec![(TAINT_KEY, "Exists", "", "NoExecute")],
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (i, (cordon, tols, code)) in cases.into_iter().enumerate() {
            let mut n = node("n", &[]);
            n.spec.get_or_insert_default().unschedulable = Some(cordon);
            let p = tolerating(pod("p", &[]), &tols);
            let s = NodeUnschedulable.filter(
                &CycleState::default(),
                &PodInfo::new(p),
                &node_info(n, vec![]),
            );
            assert_eq!(s.code(), code, "case {i}");
            if code != Code::Success {
                assert_eq!(s.message(), ERR_REASON);
            }
        }
    }
}
