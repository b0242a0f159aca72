//! What the hostpath driver knows about its volumes, kept in `<state-dir>/state.json`
//! so a restarted driver still knows its volumes, attachments and mounts (upstream's
//! hostpath driver keeps the same in its `state.json`). Pure data plus atomic
//! load/save; the RPCs change it under the driver's lock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How a volume is consumed: a filesystem (ext4 on the image) or the raw loop device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AccessType {
    Mount,
    Block,
}

/// A volume on this node's disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub id: String,
    /// The CO's name for it (CreateVolume's idempotency key).
    pub name: String,
    pub capacity_bytes: i64,
    pub access_type: AccessType,
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// The size the filesystem was last formatted or grown to (mount volumes): when
    /// the image is bigger, the node still has to grow the filesystem.
    #[serde(default)]
    pub fs_bytes: i64,
    /// ControllerPublishVolume's record: node id → published read-only.
    #[serde(default)]
    pub attached: BTreeMap<String, bool>,
    /// NodeStageVolume's record.
    #[serde(default)]
    pub staged: Option<Staged>,
    /// NodePublishVolume's record: target path → read-only.
    #[serde(default)]
    pub published: BTreeMap<PathBuf, bool>,
}

/// Where a volume is staged on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Staged {
    pub path: PathBuf,
    pub device: PathBuf,
}

impl Volume {
    /// Whether anything still uses the volume (DeleteVolume refuses then).
    pub fn in_use(&self) -> bool {
        !self.attached.is_empty() || self.staged.is_some() || !self.published.is_empty()
    }
}

/// All volumes, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    #[serde(default)]
    pub volumes: BTreeMap<String, Volume>,
}

/// The state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("state file {}: {source}", path.display())]
    Decode {
        path: PathBuf,
        source: serde_json::Error,
    },
}

impl State {
    /// Loads the state file; a missing file is an empty state (first start).
    pub fn load(path: &Path) -> Result<State, StateError> {
        match std::fs::read(path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|source| StateError::Decode {
                path: path.to_path_buf(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(source) => Err(StateError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Writes the state file atomically (temp file, fsync, rename), so a crash
    /// leaves the old or the new state, never half of one.
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        use std::io::Write;
        let io = |source| StateError::Io {
            path: path.to_path_buf(),
            source,
        };
        let body = serde_json::to_vec_pretty(self).map_err(|source| StateError::Decode {
            path: path.to_path_buf(),
            source,
        })?;
        let tmp = path.with_extension("json.tmp");
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&body).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    pub fn by_name(&self, name: &str) -> Option<&Volume> {
        self.volumes.values().find(|v| v.name == name)
    }

    /// Bytes promised to volumes (their full sizes: images are sparse, but each
    /// may fill up).
    pub fn allocated(&self) -> i64 {
        self.volumes.values().map(|v| v.capacity_bytes).sum()
    }

    /// Volumes staged or published on this node (the driver is the node's only
    /// instance, so every staged volume counts against max_volumes_per_node).
    pub fn node_volumes(&self) -> BTreeSet<&str> {
        self.volumes
            .values()
            .filter(|v| v.staged.is_some() || !v.published.is_empty())
            .map(|v| v.id.as_str())
            .collect()
    }
}

pub const MIB: i64 = 1 << 20;
pub const GIB: i64 = 1 << 30;

/// The size given to a volume whose request names no capacity (upstream's hostpath
/// driver's default is 1 GiB too).
pub const DEFAULT_VOLUME_BYTES: i64 = GIB;

/// The smallest ext4 volume: mkfs.ext4 needs room for a journal.
pub const MIN_VOLUME_BYTES: i64 = 16 * MIB;

/// Why a capacity range cannot be satisfied (`OUT_OF_RANGE`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapacityError {
    #[error("capacity range may not be negative (required {required}, limit {limit})")]
    Negative { required: i64, limit: i64 },
    #[error("required bytes {required} exceed limit bytes {limit}")]
    Inverted { required: i64, limit: i64 },
    #[error(
        "no volume size fits the capacity range (required {required}, limit {limit}): sizes are whole MiB of at least {MIN_VOLUME_BYTES} bytes"
    )]
    NoFit { required: i64, limit: i64 },
    #[error("requested capacity {size} exceeds maximum allowed {max}")]
    TooLarge { size: i64, max: i64 },
}

/// The size a volume gets for a capacity range: `required_bytes` (or the default)
/// rounded up to whole MiB (loop devices and ext4 want aligned sizes) and at least
/// [`MIN_VOLUME_BYTES`], within `limit_bytes` when it is set. 0 means unset, as the
/// spec says.
pub fn volume_size(required: i64, limit: i64, max: i64) -> Result<i64, CapacityError> {
    if required < 0 || limit < 0 {
        return Err(CapacityError::Negative { required, limit });
    }
    if limit > 0 && required > limit {
        return Err(CapacityError::Inverted { required, limit });
    }
    let wanted = match (required, limit) {
        (0, 0) => DEFAULT_VOLUME_BYTES,
        (0, l) => DEFAULT_VOLUME_BYTES.min(l),
        (r, _) => r,
    };
    let size = round_up(wanted, MIB).max(MIN_VOLUME_BYTES);
    if limit > 0 && size > limit {
        return Err(CapacityError::NoFit { required, limit });
    }
    if size > max {
        return Err(CapacityError::TooLarge { size, max });
    }
    Ok(size)
}

fn round_up(v: i64, unit: i64) -> i64 {
    // i64::div_ceil is unstable; sizes here are never negative.
    ((v as u64).div_ceil(unit as u64) as i64).saturating_mul(unit)
}

/// Whether an existing volume of `size` satisfies a capacity range.
pub fn fits(size: i64, required: i64, limit: i64) -> bool {
    size >= required && (limit == 0 || size <= limit)
}

/// Parses a byte size with an optional binary suffix (`512`, `10Mi`, `1Gi`, `2Ti`),
/// for the driver's flags.
pub fn parse_bytes(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let (num, mult) = [
        ("Ki", 1i64 << 10),
        ("Mi", MIB),
        ("Gi", GIB),
        ("Ti", 1i64 << 40),
    ]
    .iter()
    .find_map(|(suf, m)| s.strip_suffix(suf).map(|n| (n, *m)))
    .unwrap_or((s, 1));
    let n: i64 = num
        .parse()
        .map_err(|_| format!("invalid size {s:?} (want e.g. 1073741824, 512Mi, 1Gi)"))?;
    n.checked_mul(mult)
        .filter(|v| *v >= 0)
        .ok_or_else(|| format!("size {s:?} out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_sizes() {
        let max = 10 * GIB;
        let cases: &[(i64, i64, Result<i64, CapacityError>)] = &[
            (0, 0, Ok(GIB)),
            (GIB, 0, Ok(GIB)),
            (GIB, GIB, Ok(GIB)),
            (GIB + 1, 0, Ok(GIB + MIB)),
            (1, 0, Ok(MIB * 16)),
            (0, 100 * MIB, Ok(100 * MIB)),
            (
                0,
                8 * MIB,
                Err(CapacityError::NoFit {
                    required: 0,
                    limit: 8 * MIB,
                }),
            ),
            (
                GIB + 1,
                GIB + 2,
                Err(CapacityError::NoFit {
                    required: GIB + 1,
                    limit: GIB + 2,
                }),
            ),
            (
                2 * GIB,
                GIB,
                Err(CapacityError::Inverted {
                    required: 2 * GIB,
                    limit: GIB,
                }),
            ),
            (
                -1,
                0,
                Err(CapacityError::Negative {
                    required: -1,
                    limit: 0,
                }),
            ),
            (
                11 * GIB,
                0,
                Err(CapacityError::TooLarge {
                    size: 11 * GIB,
                    max,
                }),
            ),
        ];
        for (req, lim, want) in cases {
            assert_eq!(
                &volume_size(*req, *lim, max),
                want,
                "required {req} limit {lim}"
            );
        }
    }

    #[test]
    fn fits_ranges() {
        let cases = [
            (GIB, GIB, 0, true),
            (GIB, GIB, GIB, true),
            (GIB, 2 * GIB, 0, false),
            (2 * GIB, GIB, GIB + 1, false),
            (2 * GIB, 0, 0, true),
        ];
        for (size, req, lim, want) in cases {
            assert_eq!(fits(size, req, lim), want, "{size} in [{req}, {lim}]");
        }
    }

    #[test]
    fn byte_sizes() {
        let cases = [
            ("1024", Ok(1024)),
            ("1Gi", Ok(GIB)),
            ("512Mi", Ok(512 * MIB)),
            ("2Ti", Ok(2i64 << 40)),
            ("x", Err(())),
            ("-1Gi", Err(())),
            ("99999999999Ti", Err(())),
        ];
        for (s, want) in cases {
            assert_eq!(parse_bytes(s).map_err(drop), want, "{s}");
        }
    }

    #[test]
    fn state_round_trips_and_missing_file_is_empty() {
        let dir = std::env::temp_dir().join(format!("berth-csi-state-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("state.json");
        assert_eq!(State::load(&path).expect("load"), State::default());
        let mut s = State::default();
        s.volumes.insert(
            "v1".into(),
            Volume {
                id: "v1".into(),
                name: "pvc-1".into(),
                capacity_bytes: GIB,
                access_type: AccessType::Mount,
                parameters: BTreeMap::new(),
                fs_bytes: GIB,
                attached: [("node-a".to_string(), false)].into(),
                staged: Some(Staged {
                    path: "/stage".into(),
                    device: "/dev/loop3".into(),
                }),
                published: [(PathBuf::from("/pods/x"), true)].into(),
            },
        );
        s.save(&path).expect("save");
        assert_eq!(State::load(&path).expect("reload"), s);
        assert!(s.volumes["v1"].in_use());
        assert_eq!(s.allocated(), GIB);
        std::fs::write(&path, b"{not json").expect("write");
        assert!(matches!(State::load(&path), Err(StateError::Decode { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
