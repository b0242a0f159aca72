//! The CPU Manager's state and its checkpoint (upstream's `cpumanager/state`):
//! the shared pool (`defaultCpuSet`) and each container's exclusive CPUs,
//! written to `<data-dir>/agent/cpu_manager_state` with upstream's field
//! names after every change. The checksum is Berth's own (FNV-1a over the
//! checkpoint written with checksum 0): it catches torn or edited files, as
//! upstream's does, without claiming to match Go's hashing.

use std::collections::BTreeMap;
use std::path::Path;

use berth_topology::cpuset::CpuSet;
use serde::{Deserialize, Serialize};

/// Exclusive CPUs by pod uid, then container name.
pub type Assignments = BTreeMap<String, BTreeMap<String, CpuSet>>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// The shared pool: every CPU not assigned exclusively (reserved CPUs included).
    pub default_set: CpuSet,
    pub assignments: Assignments,
}

impl State {
    pub fn assigned(&self, pod: &str, container: &str) -> Option<&CpuSet> {
        self.assignments.get(pod)?.get(container)
    }

    /// Every CPU some container holds.
    pub fn all_assigned(&self) -> CpuSet {
        self.assignments
            .values()
            .flat_map(|c| c.values())
            .fold(CpuSet::new(), |acc, s| acc.union(s))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Checkpoint {
    policy_name: String,
    default_cpu_set: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    entries: BTreeMap<String, BTreeMap<String, String>>,
    checksum: u64,
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    u64::from(h)
}

fn checksum(c: &Checkpoint) -> u64 {
    let unsummed = Checkpoint {
        policy_name: c.policy_name.clone(),
        default_cpu_set: c.default_cpu_set.clone(),
        entries: c.entries.clone(),
        checksum: 0,
    };
    fnv1a(&serde_json::to_vec(&unsummed).unwrap_or_default())
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("checkpoint {0} is corrupted")]
    Corrupt(String),
}

/// The checkpoint's text for `policy` and `state`.
pub fn encode(policy: &str, state: &State) -> String {
    let mut c = Checkpoint {
        policy_name: policy.to_string(),
        default_cpu_set: state.default_set.to_string(),
        entries: state
            .assignments
            .iter()
            .map(|(pod, cs)| {
                let cs = cs.iter().map(|(c, s)| (c.clone(), s.to_string())).collect();
                (pod.clone(), cs)
            })
            .collect(),
        checksum: 0,
    };
    c.checksum = checksum(&c);
    serde_json::to_string(&c).unwrap_or_default()
}

/// The policy name and state a checkpoint holds.
pub fn decode(path: &str, text: &str) -> Result<(String, State), CheckpointError> {
    let corrupt = || CheckpointError::Corrupt(path.to_string());
    let c: Checkpoint = serde_json::from_str(text).map_err(|_| corrupt())?;
    if checksum(&c) != c.checksum {
        return Err(corrupt());
    }
    let set = |s: &str| s.parse::<CpuSet>().map_err(|_| corrupt());
    let mut state = State {
        default_set: set(&c.default_cpu_set)?,
        assignments: Assignments::new(),
    };
    for (pod, cs) in &c.entries {
        for (name, s) in cs {
            state
                .assignments
                .entry(pod.clone())
                .or_default()
                .insert(name.clone(), set(s)?);
        }
    }
    Ok((c.policy_name, state))
}

/// Reads the checkpoint at `path`; None when there is none yet.
pub fn read(path: &Path) -> Result<Option<(String, State)>, CheckpointError> {
    match std::fs::read_to_string(path) {
        Ok(text) => decode(&path.display().to_string(), &text).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CheckpointError::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// Writes the checkpoint atomically (a temp file renamed over it).
pub fn write(path: &Path, policy: &str, state: &State) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, encode(policy, state))?;
    std::fs::rename(&tmp, path)
}
