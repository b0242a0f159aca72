//! Writes a payload into a volume directory atomically, in upstream's
//! `AtomicWriter` layout, so a container never sees a half-updated volume:
//!
//! ```text
//! <dir>/..2026_11_29_22_50_00.1234/   the files (a new directory per update)
//! <dir>/..data -> ..2026_11_29_22_50_00.1234
//! <dir>/<key>  -> ..data/<key>         one link per top-level entry
//! ```
//!
//! An update writes a new timestamped directory, swaps `..data` by renaming
//! a fresh symlink over it, adds links for new entries, removes links of
//! entries gone and the old directory. An unchanged payload writes nothing.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::Utc;

use super::{Payload, VolumeError};

pub const DATA_DIR: &str = "..data";
const DATA_DIR_TMP: &str = "..data_tmp";
const MAX_PATH: usize = 4096;
const MAX_FILE_NAME: usize = 255;

/// Upstream's `validatePath`.
pub fn validate_path(p: &str) -> Result<(), VolumeError> {
    if p.is_empty() {
        return Err(VolumeError::Path(format!("must not be empty: {p:?}")));
    }
    if p.starts_with('/') {
        return Err(VolumeError::Path(format!("must be relative path: {p}")));
    }
    if p.len() > MAX_PATH {
        return Err(VolumeError::Path(format!(
            "must be less than or equal to {MAX_PATH} characters"
        )));
    }
    let items: Vec<&str> = p.split('/').collect();
    for item in &items {
        if *item == ".." {
            return Err(VolumeError::Path(format!("must not contain '..': {p}")));
        }
        if item.len() > MAX_FILE_NAME {
            return Err(VolumeError::Path(format!(
                "filenames must be less than or equal to {MAX_FILE_NAME} characters"
            )));
        }
    }
    if items[0].starts_with("..") && items[0].len() > 2 {
        return Err(VolumeError::Path(format!("must not start with '..': {p}")));
    }
    Ok(())
}

fn io(context: String) -> impl Fn(std::io::Error) -> VolumeError {
    move |e| VolumeError::Io {
        context: context.clone(),
        message: e.to_string(),
    }
}

/// Whether `ts_dir` already holds exactly `payload` (same files, bytes, modes).
fn unchanged(ts_dir: &Path, payload: &Payload) -> bool {
    let mut found = BTreeSet::new();
    if !collect_files(ts_dir, ts_dir, &mut found) || found.len() != payload.len() {
        return false;
    }
    payload.iter().all(|(p, f)| {
        let full = ts_dir.join(p);
        let same_data = std::fs::read(&full).is_ok_and(|d| d == f.data);
        let same_mode =
            std::fs::metadata(&full).is_ok_and(|m| m.permissions().mode() & 0o7777 == f.mode);
        found.contains(p) && same_data && same_mode
    })
}

fn collect_files(root: &Path, dir: &Path, out: &mut BTreeSet<String>) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            if !collect_files(root, &path, out) {
                return false;
            }
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
    true
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The top-level names the payload makes visible.
fn top_level(payload: &Payload) -> BTreeSet<String> {
    payload
        .keys()
        .map(|p| p.split('/').next().unwrap_or(p).to_string())
        .collect()
}

/// Writes `payload` into `dir` (created if missing). True when anything changed.
pub fn write(dir: &Path, payload: &Payload) -> Result<bool, VolumeError> {
    for p in payload.keys() {
        validate_path(p)?;
    }
    std::fs::create_dir_all(dir).map_err(io(format!("mkdir {}", dir.display())))?;
    let data_link = dir.join(DATA_DIR);
    let old_ts = std::fs::read_link(&data_link).ok();
    let old_visible: BTreeSet<String> = match &old_ts {
        Some(ts) => {
            let mut files = BTreeSet::new();
            collect_files(&dir.join(ts), &dir.join(ts), &mut files);
            files
                .iter()
                .map(|p| p.split('/').next().unwrap_or(p).to_string())
                .collect()
        }
        None => BTreeSet::new(),
    };
    if let Some(ts) = &old_ts
        && unchanged(&dir.join(ts), payload)
    {
        return Ok(false);
    }

    // 1. The new files in a fresh timestamped directory.
    let ts_name = format!(
        "{}{}{}",
        Utc::now().format("..%Y_%m_%d_%H_%M_%S."),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let ts_dir = dir.join(&ts_name);
    std::fs::create_dir(&ts_dir).map_err(io(format!("mkdir {}", ts_dir.display())))?;
    std::fs::set_permissions(&ts_dir, std::fs::Permissions::from_mode(0o755))
        .map_err(io(format!("chmod {}", ts_dir.display())))?;
    for (p, f) in payload {
        let full = ts_dir.join(p);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(io(format!("mkdir {}", parent.display())))?;
        }
        std::fs::write(&full, &f.data).map_err(io(format!("write {}", full.display())))?;
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(f.mode))
            .map_err(io(format!("chmod {}", full.display())))?;
    }

    // 2. Swap ..data atomically.
    let tmp_link = dir.join(DATA_DIR_TMP);
    let _ = std::fs::remove_file(&tmp_link);
    std::os::unix::fs::symlink(&ts_name, &tmp_link)
        .map_err(io(format!("symlink {}", tmp_link.display())))?;
    std::fs::rename(&tmp_link, &data_link)
        .map_err(io(format!("rename {}", data_link.display())))?;

    // 3. Links for the entries, then drop those gone.
    let visible = top_level(payload);
    for name in &visible {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA_DIR).join(name), &link)
                .map_err(io(format!("symlink {}", link.display())))?;
        }
    }
    for gone in old_visible.difference(&visible) {
        let _ = std::fs::remove_file(dir.join(gone));
    }

    // 4. The old files.
    if let Some(ts) = old_ts {
        let old = dir.join(ts);
        std::fs::remove_dir_all(&old).map_err(io(format!("remove {}", old.display())))?;
    }
    Ok(true)
}
