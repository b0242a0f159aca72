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
