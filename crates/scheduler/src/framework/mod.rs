//! The scheduling framework: pod and node views, statuses, extension points,
//! and a Framework that runs one profile's plugins.

pub mod affinity;
pub mod fit_error;
pub mod interface;
pub mod runtime;
pub mod snapshot;
pub mod status;
pub mod storage;
pub mod types;

pub use fit_error::{Diagnosis, FitError, Nomination};
pub use interface::*;
pub use runtime::{
    Framework, NodePluginScores, ScheduleError, ScheduleResult, SearchState, WeightedScore,
    explain, num_feasible_nodes_to_find,
};
pub use snapshot::Snapshot;
pub use status::{Code, Status};
pub use storage::{SharedStorage, StorageSnapshot};
pub use types::{NodeInfo, PodInfo, Resource, pod_requests};
