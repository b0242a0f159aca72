//! NUMA topology for the node agent's resource managers, in upstream's
//! `pkg/kubelet/cm/topologymanager` and `pkg/kubelet/cm/cpumanager` shape:
//!
//! - [`bitmask`]: NUMA affinity masks (up to [`bitmask::MAX_BITS`] nodes);
//! - [`hint`] and [`provider`]: `TopologyHint` and the `HintProvider` seam the
//!   CPU, memory and device managers implement;
//! - [`merge`] and [`policy`]: upstream's hint merging and its four policies;
//! - [`machine`]: the machine's CPUs, NUMA nodes and PCI devices from sysfs,
//!   behind the [`machine::Sysfs`] trait (a fake tree for tests);
//! - [`cpuset`] and [`cpu_assignment`]: Linux cpulists and the static CPU
//!   policy's allocation and hints;
//! - [`numa_fit`]: the cells' free exclusive resources a node publishes and
//!   the `single-numa-node` fit the scheduler and the simulator share.
//!
//! Pure logic over plain data: no async, no I/O except the sysfs reader.
#![forbid(unsafe_code)]

pub mod bitmask;
pub mod cpu_assignment;
pub mod cpuset;
pub mod hint;
pub mod machine;
pub mod merge;
pub mod numa_fit;
pub mod policy;
pub mod provider;
pub mod scope;

pub use bitmask::BitMask;
pub use cpuset::CpuSet;
pub use hint::TopologyHint;
pub use merge::NumaInfo;
pub use policy::{Policy, PolicyError, PolicyOptions, new_policy};
pub use provider::{
    AdmissionError, ContainerResources, HintMap, HintProvider, PodResources, QosClass,
};
pub use scope::{Scope, TopologyManager};
