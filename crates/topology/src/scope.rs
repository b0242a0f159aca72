//! The Topology Manager's scopes (upstream's `scope_container.go`,
//! `scope_pod.go`): which hints are merged together, and the admission that
//! calls every provider's `allocate` with the merged hint.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::hint::TopologyHint;
use crate::policy::{POLICY_NONE, Policy};
use crate::provider::{AdmissionError, HintProvider, PodResources};

pub const SCOPE_CONTAINER: &str = "container";
pub const SCOPE_POD: &str = "pod";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// Each container aligned on its own (upstream's default).
    #[default]
    Container,
    /// All the pod's containers on one common set of NUMA nodes.
    Pod,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope: \"{0}\"")]
pub struct UnknownScope(pub String);

impl std::str::FromStr for Scope {
    type Err = UnknownScope;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            SCOPE_CONTAINER => Ok(Scope::Container),
            SCOPE_POD => Ok(Scope::Pod),
            other => Err(UnknownScope(other.to_string())),
        }
    }
}

impl Scope {
    pub fn name(&self) -> &'static str {
        match self {
            Scope::Container => SCOPE_CONTAINER,
            Scope::Pod => SCOPE_POD,
        }
    }
}

/// The Topology Manager: a policy, a scope and the hint providers.
pub struct TopologyManager {
    pub policy: Box<dyn Policy>,
    pub scope: Scope,
    pub providers: Vec<Arc<dyn HintProvider>>,
}

/// The hint each container was admitted with (upstream's store,
/// `GetAffinity`), keyed by container name.
pub type Affinities = BTreeMap<String, TopologyHint>;

impl TopologyManager {
    /// Admits the pod: merges hints per its scope, rejects with
    /// `TopologyAffinityError` when the policy says so, then allocates every
    /// container (init containers first) through every provider. A provider's
    /// error rejects the pod with that error's reason.
    pub fn admit(&self, pod: &PodResources) -> Result<Affinities, AdmissionError> {
        let mut out = Affinities::new();
        if self.policy.name() == POLICY_NONE {
            // Upstream's admitPolicyNone: no hints, allocation as it comes.
            for c in pod.all_containers() {
                let hint = TopologyHint::default();
                self.allocate(pod, c, &hint)?;
                out.insert(c.name.clone(), hint);
            }
            return Ok(out);
        }
        match self.scope {
            Scope::Container => {
                for c in pod.all_containers() {
                    let hints: Vec<_> = self
                        .providers
                        .iter()
                        .map(|p| p.get_topology_hints(pod, c))
                        .collect();
                    let (hint, admit) = self.policy.merge(&hints);
                    if !admit {
                        return Err(AdmissionError::topology_affinity());
                    }
                    self.allocate(pod, c, &hint)?;
                    out.insert(c.name.clone(), hint);
                }
            }
            Scope::Pod => {
                let hints: Vec<_> = self
                    .providers
                    .iter()
                    .map(|p| p.get_pod_topology_hints(pod))
                    .collect();
                let (hint, admit) = self.policy.merge(&hints);
                if !admit {
                    return Err(AdmissionError::topology_affinity());
                }
                for c in pod.all_containers() {
                    self.allocate(pod, c, &hint)?;
                    out.insert(c.name.clone(), hint);
                }
            }
        }
        Ok(out)
    }

    fn allocate(
        &self,
        pod: &PodResources,
        c: &crate::provider::ContainerResources,
        hint: &TopologyHint,
    ) -> Result<(), AdmissionError> {
        for p in &self.providers {
            p.allocate(pod, c, hint)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::bitmask::BitMask;
    use crate::merge::NumaInfo;
    use crate::policy::{PolicyOptions, new_policy};
    use crate::provider::{ContainerResources, HintMap, QosClass};

    /// A provider whose resource `res` fits on `nodes` (one node each), and
    /// records what it was asked to allocate.
    struct Fake {
        res: &'static str,
        nodes: Vec<usize>,
        fail: Option<AdmissionError>,
        allocated: Mutex<Vec<(String, TopologyHint)>>,
    }

    impl Fake {
        fn new(res: &'static str, nodes: &[usize]) -> Arc<Self> {
            Arc::new(Fake {
                res,
                nodes: nodes.to_vec(),
                fail: None,
                allocated: Mutex::new(Vec::new()),
            })
        }
        fn hints(&self) -> HintMap {
            let hints = self
                .nodes
                .iter()
                .map(|&n| TopologyHint::new(BitMask::new(&[n]).unwrap(), true))
                .collect();
            HintMap::from([(self.res.to_string(), Some(hints))])
        }
    }

    impl HintProvider for Fake {
        fn get_topology_hints(&self, _pod: &PodResources, c: &ContainerResources) -> HintMap {
            if c.requests.contains_key(self.res) {
                self.hints()
            } else {
                HintMap::new()
            }
        }
        fn get_pod_topology_hints(&self, _pod: &PodResources) -> HintMap {
            self.hints()
        }
        fn allocate(
            &self,
            _pod: &PodResources,
            c: &ContainerResources,
            hint: &TopologyHint,
        ) -> Result<(), AdmissionError> {
            if let Some(e) = &self.fail {
                return Err(e.clone());
            }
            self.allocated.lock().unwrap().push((c.name.clone(), *hint));
            Ok(())
        }
    }

    fn pod() -> PodResources {
        let c = |name: &str, res: &str| ContainerResources {
            name: name.to_string(),
            requests: [(res.to_string(), 1000)].into(),
            limits: [(res.to_string(), 1000)].into(),
            sidecar: false,
        };
        PodResources {
            uid: "u1".into(),
            namespace: "default".into(),
            name: "p".into(),
            qos: QosClass::Guaranteed,
            init_containers: vec![],
            containers: vec![c("a", "cpu"), c("b", "gpu")],
        }
    }

    fn manager(policy: &str, scope: Scope, providers: Vec<Arc<Fake>>) -> TopologyManager {
        TopologyManager {
            policy: new_policy(policy, NumaInfo::uniform(2), PolicyOptions::default()).unwrap(),
            scope,
            providers: providers
                .into_iter()
                .map(|p| p as Arc<dyn HintProvider>)
                .collect(),
        }
    }

    fn single(n: usize) -> TopologyHint {
        TopologyHint::new(BitMask::new(&[n]).unwrap(), true)
    }

    #[test]
    fn container_scope_aligns_each_container_alone() {
        // CPUs only on node 0, the device only on node 1: each container alone fits.
        let (cpu, gpu) = (Fake::new("cpu", &[0]), Fake::new("gpu", &[1]));
        let m = manager(
            "single-numa-node",
            Scope::Container,
            vec![cpu.clone(), gpu.clone()],
        );
        let got = m.admit(&pod()).unwrap();
        assert_eq!(got["a"], single(0));
        assert_eq!(got["b"], single(1));
        assert_eq!(
            cpu.allocated.lock().unwrap().len(),
            2,
            "every provider allocates every container"
        );
    }

    #[test]
    fn pod_scope_needs_one_placement_for_the_pod() {
        let (cpu, gpu) = (Fake::new("cpu", &[0]), Fake::new("gpu", &[1]));
        for policy in ["single-numa-node", "restricted"] {
            let m = manager(policy, Scope::Pod, vec![cpu.clone(), gpu.clone()]);
            let err = m.admit(&pod()).unwrap_err();
            assert_eq!(err, AdmissionError::topology_affinity(), "{policy}");
            assert_eq!(err.reason, "TopologyAffinityError");
            assert_eq!(
                err.message,
                "Resources cannot be allocated with Topology locality"
            );
        }
        assert!(
            cpu.allocated.lock().unwrap().is_empty(),
            "nothing allocated for a rejected pod"
        );
        // best-effort admits, spread over both nodes.
        let m = manager("best-effort", Scope::Pod, vec![cpu.clone(), gpu]);
        let got = m.admit(&pod()).unwrap();
        assert_eq!(
            got["a"],
            TopologyHint::new(BitMask::new(&[0, 1]).unwrap(), false)
        );
        // A common node: the whole pod lands there.
        let m = manager(
            "single-numa-node",
            Scope::Pod,
            vec![Fake::new("cpu", &[0, 1]), Fake::new("gpu", &[1])],
        );
        let got = m.admit(&pod()).unwrap();
        assert_eq!((got["a"], got["b"]), (single(1), single(1)));
    }

    #[test]
    fn allocation_errors_reject_with_their_reason() {
        let failing = Arc::new(Fake {
            res: "cpu",
            nodes: vec![0],
            fail: Some(AdmissionError::unexpected("no CPUs left")),
            allocated: Mutex::new(Vec::new()),
        });
        for policy in ["none", "best-effort"] {
            let m = manager(policy, Scope::Container, vec![failing.clone()]);
            let err = m.admit(&pod()).unwrap_err();
            assert_eq!(err.reason, "UnexpectedAdmissionError", "{policy}");
            assert_eq!(
                err.message,
                "Allocate failed due to no CPUs left, which is unexpected"
            );
        }
        // none: no hints asked for, allocation with the empty hint.
        let cpu = Fake::new("cpu", &[1]);
        let m = manager("none", Scope::Container, vec![cpu.clone()]);
        m.admit(&pod()).unwrap();
        assert_eq!(
            cpu.allocated.lock().unwrap()[0],
            ("a".to_string(), TopologyHint::default())
        );
    }

    #[test]
    fn scope_names() {
        assert_eq!("pod".parse::<Scope>().unwrap(), Scope::Pod);
        assert_eq!("container".parse::<Scope>().unwrap().name(), "container");
        assert_eq!(
            "node".parse::<Scope>().unwrap_err().to_string(),
            "unknown scope: \"node\""
        );
    }
}
