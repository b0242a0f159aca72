//! Which devices each container holds, with the plugin's Allocate answer, and
//! the checkpoint that keeps them across agent restarts (upstream's
//! `pod_devices.go` and `checkpoint/checkpoint.go`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use base64::Engine;
use prost::Message;
use serde::{Deserialize, Serialize};

use super::pb::ContainerAllocateResponse;

/// The checkpoint's file name in the device-plugins directory (upstream's).
pub const CHECKPOINT_FILE: &str = "kubelet_internal_checkpoint";

/// One container's devices of one resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub device_ids: Vec<String>,
    pub response: ContainerAllocateResponse,
}

/// (pod UID, container name) → resource → allocation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodDevices {
    entries: BTreeMap<(String, String), BTreeMap<String, Allocation>>,
}

impl PodDevices {
    pub fn insert(&mut self, pod_uid: &str, container: &str, resource: &str, a: Allocation) {
        self.entries
            .entry((pod_uid.to_string(), container.to_string()))
            .or_default()
            .insert(resource.to_string(), a);
    }

    pub fn get(&self, pod_uid: &str, container: &str, resource: &str) -> Option<&Allocation> {
        self.entries
            .get(&(pod_uid.to_string(), container.to_string()))
            .and_then(|m| m.get(resource))
    }

    /// Every resource's allocation of one container.
    pub fn container(&self, pod_uid: &str, container: &str) -> Vec<(&str, &Allocation)> {
        self.entries
            .get(&(pod_uid.to_string(), container.to_string()))
            .map(|m| m.iter().map(|(r, a)| (r.as_str(), a)).collect())
            .unwrap_or_default()
    }

    /// The devices of `resource` in use by any container.
    pub fn in_use(&self, resource: &str) -> BTreeSet<String> {
        self.entries
            .values()
            .filter_map(|m| m.get(resource))
            .flat_map(|a| a.device_ids.iter().cloned())
            .collect()
    }

    /// The devices of `resource` held by one pod.
    pub fn pod_in_use(&self, pod_uid: &str, resource: &str) -> BTreeSet<String> {
        self.entries
            .iter()
            .filter(|((uid, _), _)| uid == pod_uid)
            .filter_map(|(_, m)| m.get(resource))
            .flat_map(|a| a.device_ids.iter().cloned())
            .collect()
    }

    /// Frees a pod's devices; whether it held any.
    pub fn remove_pod(&mut self, pod_uid: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(uid, _), _| uid != pod_uid);
        before != self.entries.len()
    }

    pub fn pods(&self) -> BTreeSet<String> {
        self.entries.keys().map(|(uid, _)| uid.clone()).collect()
    }

    /// The checkpoint's JSON (upstream's field names; the response is its
    /// protobuf encoding in base64, as Go marshals `[]byte`).
    /// `numa(resource, device)` gives a device's NUMA nodes: upstream keys
    /// the devices by node (a device on two nodes under both), `-1` for none.
    pub fn to_checkpoint(
        &self,
        registered: &BTreeMap<String, Vec<String>>,
        numa: &dyn Fn(&str, &str) -> Vec<i64>,
    ) -> Checkpoint {
        let by_node = |r: &str, ids: &[String]| {
            let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for id in ids {
                let nodes = numa(r, id);
                let keys = if nodes.is_empty() { vec![-1] } else { nodes };
                for n in keys {
                    out.entry(n.to_string()).or_default().push(id.clone());
                }
            }
            out
        };
        let entries = self
            .entries
            .iter()
            .flat_map(|((uid, c), m)| {
                m.iter().map(move |(r, a)| PodDevicesEntry {
                    pod_uid: uid.clone(),
                    container_name: c.clone(),
                    resource_name: r.clone(),
                    device_ids: by_node(r, &a.device_ids),
                    alloc_resp: base64::engine::general_purpose::STANDARD
                        .encode(a.response.encode_to_vec()),
                })
            })
            .collect();
        Checkpoint {
            data: CheckpointData {
                pod_device_entries: entries,
                registered_devices: registered.clone(),
            },
        }
    }

    pub fn from_checkpoint(cp: &Checkpoint) -> Result<PodDevices, String> {
        let mut out = PodDevices::default();
        for e in &cp.data.pod_device_entries {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&e.alloc_resp)
                .map_err(|err| format!("entry {}/{}: {err}", e.pod_uid, e.container_name))?;
            let response = ContainerAllocateResponse::decode(bytes.as_slice())
                .map_err(|err| format!("entry {}/{}: {err}", e.pod_uid, e.container_name))?;
            let mut device_ids: Vec<String> = Vec::new();
            for id in e.device_ids.values().flatten() {
                if !device_ids.contains(id) {
                    device_ids.push(id.clone());
                }
            }
            out.insert(
                &e.pod_uid,
                &e.container_name,
                &e.resource_name,
                Allocation {
                    device_ids,
                    response,
                },
            );
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    #[serde(rename = "Data")]
    pub data: CheckpointData,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointData {
    #[serde(rename = "PodDeviceEntries", default)]
    pub pod_device_entries: Vec<PodDevicesEntry>,
    #[serde(rename = "RegisteredDevices", default)]
    pub registered_devices: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodDevicesEntry {
    #[serde(rename = "PodUID")]
    pub pod_uid: String,
    #[serde(rename = "ContainerName")]
    pub container_name: String,
    #[serde(rename = "ResourceName")]
    pub resource_name: String,
    #[serde(rename = "DeviceIDs")]
    pub device_ids: BTreeMap<String, Vec<String>>,
    #[serde(rename = "AllocResp")]
    pub alloc_resp: String,
}

/// Writes the checkpoint atomically (a temporary file renamed over it).
pub fn write_checkpoint(dir: &Path, cp: &Checkpoint) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{CHECKPOINT_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(cp).map_err(std::io::Error::other)?)?;
    std::fs::rename(tmp, dir.join(CHECKPOINT_FILE))
}

/// Reads the checkpoint; None when there is none yet.
pub fn read_checkpoint(dir: &Path) -> Result<Option<Checkpoint>, String> {
    let path = dir.join(CHECKPOINT_FILE);
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Picks `needed` devices for a container (upstream's `devicesToAllocate`
/// without a preference): the devices it already holds are kept; otherwise the
/// healthy ones not in use, in ID order. The error is upstream's.
pub fn pick(
    resource: &str,
    needed: usize,
    healthy: &BTreeSet<String>,
    in_use: &BTreeSet<String>,
) -> Result<Vec<String>, String> {
    let available: Vec<&String> = healthy.difference(in_use).collect();
    if available.len() < needed {
        return Err(format!(
            "requested number of devices unavailable for {resource}. Requested: {needed}, Available: {}",
            available.len()
        ));
    }
    Ok(available.into_iter().take(needed).cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pick_table() {
        // (healthy, in use, needed, expected)
        type Case<'a> = (
            &'a [&'a str],
            &'a [&'a str],
            usize,
            Result<&'a [&'a str], &'a str>,
        );
        let cases: &[Case] = &[
            (&["a", "b"], &[], 1, Ok(&["a"])),
            (&["a", "b"], &["a"], 1, Ok(&["b"])),
            (&["a", "b"], &[], 2, Ok(&["a", "b"])),
            (&["a", "b"], &[], 0, Ok(&[])),
            (
                &["a", "b"],
                &["b"],
                2,
                Err(
                    "requested number of devices unavailable for example.com/sample. Requested: 2, Available: 1",
                ),
            ),
            (
                &[],
                &[],
                1,
                Err(
                    "requested number of devices unavailable for example.com/sample. Requested: 1, Available: 0",
                ),
            ),
        ];
        for (healthy, used, needed, want) in cases {
            let got = pick("example.com/sample", *needed, &set(healthy), &set(used));
            let want = want
                .map(|ids| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map_err(str::to_string);
            assert_eq!(
                got, want,
                "healthy {healthy:?} used {used:?} needed {needed}"
            );
        }
    }

    #[test]
    fn bookkeeping_and_checkpoint_round_trip() {
        let mut pd = PodDevices::default();
        let resp = ContainerAllocateResponse {
            envs: [("SAMPLE_DEVICE".to_string(), "dev-0".to_string())].into(),
            ..Default::default()
        };
        let a = |ids: &[&str]| Allocation {
            device_ids: ids.iter().map(|s| s.to_string()).collect(),
            response: resp.clone(),
        };
        pd.insert("pod1", "c1", "example.com/sample", a(&["dev-0"]));
        pd.insert("pod1", "c2", "example.com/sample", a(&["dev-1"]));
        pd.insert("pod2", "c1", "example.com/other", a(&["x"]));
        assert_eq!(pd.in_use("example.com/sample"), set(&["dev-0", "dev-1"]));
        assert_eq!(pd.in_use("example.com/other"), set(&["x"]));

        let dir = std::env::temp_dir().join(format!("berth-dm-cp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        assert_eq!(read_checkpoint(&dir), Ok(None));
        let registered = [("example.com/sample".to_string(), vec!["dev-0".to_string()])].into();
        // dev-1 sits on both NUMA nodes, x has no topology.
        let numa = |_: &str, id: &str| match id {
            "dev-0" => vec![0],
            "dev-1" => vec![0, 1],
            _ => vec![],
        };
        write_checkpoint(&dir, &pd.to_checkpoint(&registered, &numa)).expect("write");
        let cp = read_checkpoint(&dir).expect("read").expect("present");
        assert_eq!(cp.data.registered_devices, registered);
        let keys: Vec<(String, BTreeMap<String, Vec<String>>)> = cp
            .data
            .pod_device_entries
            .iter()
            .map(|e| (e.container_name.clone(), e.device_ids.clone()))
            .collect();
        let ids = |v: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
            v.iter()
                .map(|(k, l)| (k.to_string(), l.iter().map(|s| s.to_string()).collect()))
                .collect()
        };
        assert_eq!(
            keys,
            [
                ("c1".to_string(), ids(&[("0", &["dev-0"])])),
                (
                    "c2".to_string(),
                    ids(&[("0", &["dev-1"]), ("1", &["dev-1"])])
                ),
                ("c1".to_string(), ids(&[("-1", &["x"])])),
            ]
        );
        assert_eq!(PodDevices::from_checkpoint(&cp), Ok(pd.clone()));
        let _ = std::fs::remove_dir_all(&dir);

        assert!(pd.remove_pod("pod1"));
        assert!(!pd.remove_pod("pod1"));
        assert!(pd.in_use("example.com/sample").is_empty());
        assert_eq!(pd.pods(), set(&["pod2"]));
    }
}
