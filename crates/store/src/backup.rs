//! Backups of the embedded SQLite store (`berth store backup|restore`).
//!
//! A backup is SQLite's `VACUUM INTO` run on a reader connection: one read
//! transaction, so the copy is a consistent snapshot of every committed write
//! (the WAL included) even while the server keeps writing, and the writer is
//! never blocked. The copy is written beside its destination and renamed into
//! place, so a failed backup never leaves a half file under the name asked for.
//!
//! A restore checks the file first (an SQLite database that passes
//! `quick_check` and holds the store's tables and meta row), refuses to
//! replace an existing store unless forced, and refuses while a server holds
//! the store's lock file (the writer's `<db>.lock`). The revision counter
//! comes back with the data, so new writes get higher resourceVersions than
//! every restored object.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

/// Why a backup or restore failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(
        "no embedded store at {0} (is this a server's data dir, and does it use the embedded SQLite store rather than etcd?)"
    )]
    NoStore(PathBuf),
    #[error("{0} does not exist")]
    NotFound(PathBuf),
    #[error("{0} already exists; choose another file name")]
    DestinationExists(PathBuf),
    #[error("{path} is not a Berth store backup: {reason}")]
    NotABackup { path: PathBuf, reason: String },
    #[error(
        "a store already exists at {0}; restore into a fresh data dir, or pass --force to replace it"
    )]
    StoreExists(PathBuf),
    #[error("the store at {0} is in use by a running server; stop it first")]
    InUse(PathBuf),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("sqlite: {what}: {source}")]
    Sqlite {
        what: &'static str,
        source: rusqlite::Error,
    },
}

type Result<T> = std::result::Result<T, BackupError>;

fn sql(what: &'static str) -> impl FnOnce(rusqlite::Error) -> BackupError {
    move |source| BackupError::Sqlite { what, source }
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BackupError {
    let path = path.to_path_buf();
    move |source| BackupError::Io { what, path, source }
}

/// What a backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupInfo {
    /// The store's revision when the copy was taken.
    pub revision: i64,
    /// Live keys.
    pub keys: i64,
    /// The file's size in bytes.
    pub bytes: u64,
}

/// The lock file the store's writer holds (see `SqliteStore::open_with`).
pub fn lock_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Whether a running store holds `db` (its writer's lock is taken).
pub fn in_use(db: &Path) -> bool {
    let Ok(f) = std::fs::File::open(lock_path(db)) else {
        return false;
    };
    match f.try_lock() {
        Ok(()) => {
            let _ = f.unlock();
            false
        }
        Err(_) => true,
    }
}

/// Copies the store at `db` to `dest` (which must not exist), online.
pub fn backup(db: &Path, dest: &Path) -> Result<BackupInfo> {
    if !db.is_file() {
        return Err(BackupError::NoStore(db.to_path_buf()));
    }
    if dest.exists() {
        return Err(BackupError::DestinationExists(dest.to_path_buf()));
    }
    // Read-write: a read-only open cannot recover the WAL index. VACUUM INTO
    // only reads the source (query_only would refuse it all the same).
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql("open the store"))?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(sql("busy_timeout"))?;
    check_schema(&conn).map_err(|reason| BackupError::NotABackup {
        path: db.to_path_buf(),
        reason,
    })?;
    let tmp = temp_beside(dest);
    let _ = std::fs::remove_file(&tmp);
    let target = tmp.to_string_lossy().into_owned();
    if let Err(source) = conn.execute("VACUUM INTO ?1", [&target]) {
        let _ = std::fs::remove_file(&tmp);
        return Err(BackupError::Sqlite {
            what: "VACUUM INTO",
            source,
        });
    }
    drop(conn);
    sync_file(&tmp)?;
    std::fs::rename(&tmp, dest).map_err(io("rename into", dest))?;
    inspect(dest)
}

/// Checks that `file` is a Berth store backup; what it holds.
pub fn inspect(file: &Path) -> Result<BackupInfo> {
    let meta = std::fs::metadata(file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => BackupError::NotFound(file.to_path_buf()),
        _ => BackupError::Io {
            what: "read",
            path: file.to_path_buf(),
            source: e,
        },
    })?;
    let not = |reason: String| BackupError::NotABackup {
        path: file.to_path_buf(),
        reason,
    };
    if !meta.is_file() {
        return Err(not("not a regular file".into()));
    }
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| not(e.to_string()))?;
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| not(e.to_string()))?;
    if check != "ok" {
        return Err(not(format!("integrity check failed: {check}")));
    }
    check_schema(&conn).map_err(not)?;
    let (revision, keys) = conn
        .query_row(
            "SELECT (SELECT current_rev FROM meta WHERE id = 0), (SELECT count(*) FROM kv)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| not(e.to_string()))?;
    Ok(BackupInfo {
        revision,
        keys,
        bytes: meta.len(),
    })
}

/// The store's tables and its meta row, as `sqlite.rs` lays them out.
fn check_schema(conn: &Connection) -> std::result::Result<(), String> {
    for table in ["meta", "history", "kv"] {
        let found: Option<String> = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| e.to_string())?;
        if found.is_none() {
            return Err(format!("no {table} table"));
        }
    }
    let rev: Option<i64> = conn
        .query_row("SELECT current_rev FROM meta WHERE id = 0", [], |r| {
            r.get(0)
        })
        .optional()
        .map_err(|e| e.to_string())?;
    if rev.is_none() {
        return Err("no revision in its meta table".into());
    }
    Ok(())
}

/// Puts the backup `file` in place as the store at `db`.
pub fn restore(file: &Path, db: &Path, force: bool) -> Result<BackupInfo> {
    let info = inspect(file)?;
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    // Held while the files change, so a server starting meanwhile waits out
    // (its open fails) rather than read half a restore.
    let lock_file = lock_path(db);
    let lock = std::fs::File::create(&lock_file).map_err(io("create", &lock_file))?;
    if lock.try_lock().is_err() {
        return Err(BackupError::InUse(db.to_path_buf()));
    }
    if db.exists() && !force {
        return Err(BackupError::StoreExists(db.to_path_buf()));
    }
    let tmp = temp_beside(db);
    std::fs::copy(file, &tmp).map_err(io("copy to", &tmp))?;
    sync_file(&tmp)?;
    // The old store's WAL would be replayed over the restored file.
    for suffix in ["-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        match std::fs::remove_file(PathBuf::from(&p)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("remove", Path::new(&p))(e)),
        }
    }
    std::fs::rename(&tmp, db).map_err(io("rename into", db))?;
    drop(lock);
    Ok(info)
}

fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

fn sync_file(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io("sync", path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SqliteStore, Store};

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "berth-backup-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    async fn put(s: &SqliteStore, key: &str, value: &str) -> i64 {
        s.create(key, bytes::Bytes::from(value.to_string()))
            .await
            .unwrap()
            .mod_revision
    }

    #[tokio::test]
    async fn online_backup_restores_every_key_revision_and_the_counter() {
        let dir = tmp("roundtrip");
        let db = dir.join("src/state.db");
        let store = SqliteStore::open(&db).unwrap();
        let mut revs = Vec::new();
        for i in 0..50 {
            revs.push(put(&store, &format!("/registry/configmaps/default/c{i}"), "v").await);
        }
        store
            .delete("/registry/configmaps/default/c0", None)
            .await
            .unwrap();
        // Taken while the store is open and has more writes on the way.
        let file = dir.join("backup.db");
        let info = backup(&db, &file).unwrap();
        assert_eq!(info.keys, 49);
        let at_backup = store.current_revision().await.unwrap();
        assert_eq!(info.revision, at_backup);
        put(&store, "/registry/configmaps/default/after", "v").await;
        drop(store);

        let restored_db = dir.join("dst/state.db");
        let info2 = restore(&file, &restored_db, false).unwrap();
        assert_eq!(info2.revision, info.revision);
        let restored = SqliteStore::open(&restored_db).unwrap();
        let got = restored
            .range(crate::RangeRequest {
                prefix: "/registry/configmaps/".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(got.kvs.len(), 49);
        for kv in &got.kvs {
            let i: usize = kv.key.rsplit('c').next().unwrap().parse().unwrap();
            assert_eq!(kv.mod_revision, revs[i], "{}", kv.key);
        }
        assert!(!got.kvs.iter().any(|kv| kv.key.ends_with("/after")));
        let next = put(&restored, "/registry/configmaps/default/new", "v").await;
        assert!(next > at_backup, "{next} after {at_backup}");
        drop(restored);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn refusals_with_clear_errors() {
        let dir = tmp("refusals");
        let db = dir.join("src/state.db");
        let store = SqliteStore::open(&db).unwrap();
        put(&store, "/registry/a", "1").await;
        let file = dir.join("b.db");
        backup(&db, &file).unwrap();

        let cases: Vec<(&str, BackupError)> = vec![
            (
                "backup onto an existing file",
                backup(&db, &file).unwrap_err(),
            ),
            (
                "backup of a dir without a store",
                backup(&dir.join("none/state.db"), &dir.join("x.db")).unwrap_err(),
            ),
            (
                "restore over a running store",
                restore(&file, &db, true).unwrap_err(),
            ),
            (
                "restore of a missing file",
                restore(&dir.join("missing.db"), &dir.join("d1/state.db"), false).unwrap_err(),
            ),
        ];
        let garbage = dir.join("garbage.db");
        std::fs::write(&garbage, b"this is not sqlite at all, not even close....").unwrap();
        let other = dir.join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t (x);")
            .unwrap();
        let mut cases = cases;
        cases.push((
            "restore of garbage",
            restore(&garbage, &dir.join("d2/state.db"), false).unwrap_err(),
        ));
        cases.push((
            "restore of another database",
            restore(&other, &dir.join("d3/state.db"), false).unwrap_err(),
        ));
        let want = [
            "already exists; choose another file name",
            "no embedded store at",
            "in use by a running server",
            "missing.db does not exist",
            "is not a Berth store backup: file is not a database",
            "is not a Berth store backup: no meta table",
        ];
        for ((what, err), want) in cases.iter().zip(want) {
            assert!(err.to_string().contains(want), "{what}: {err}");
        }
        assert!(!dir.join("d2/state.db").exists() && !dir.join("d3/state.db").exists());
        drop(store);

        // Stopped: an existing store is kept unless forced.
        let err = restore(&file, &db, false).unwrap_err();
        assert!(
            err.to_string().contains("pass --force to replace it"),
            "{err}"
        );
        restore(&file, &db, true).unwrap();
        assert!(!in_use(&db));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
