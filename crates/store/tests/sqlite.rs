//! SQLite-backend behaviour beyond the shared conformance suite: persistence across
//! reopen, group commit, periodic and physical compaction, lagging watchers.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_store::{Event, RangeRequest, SqliteOptions, SqliteStore, Store, StoreError};
use bytes::Bytes;
use futures::StreamExt;

fn no_compaction() -> SqliteOptions {
    SqliteOptions {
        compaction_interval: None,
        ..SqliteOptions::default()
    }
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// (history rows, compacted_rev, compact_progress) read straight from the file.
fn raw_counts(path: &Path) -> (i64, i64, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let rows = conn
        .query_row("SELECT COUNT(*) FROM history", [], |r| r.get(0))
        .unwrap();
    let (compacted, progress) = conn
        .query_row(
            "SELECT compacted_rev, compact_progress FROM meta",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    (rows, compacted, progress)
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_keeps_data_revisions_and_history() {
    let dir = common::TempDir::new("sqlite-reopen");
    // A nested path: open creates the directories.
    let path = dir.path().join("a/b/store.db");
    let (a2, r_mid, current) = {
        let s = SqliteStore::open_with(&path, no_compaction()).unwrap();
        assert_eq!(
            s.current_revision().await.unwrap(),
            1,
            "a fresh store is at revision 1"
        );
        let a1 = s.create("/k/a", b("1")).await.unwrap();
        assert_eq!(a1.mod_revision, 2);
        let a2 = s.update("/k/a", b("2"), a1.mod_revision).await.unwrap();
        let r_mid = s.create("/k/b", b("b")).await.unwrap().mod_revision;
        s.delete("/k/b", None).await.unwrap();
        s.compact(a2.mod_revision).await.unwrap();
        (a2, r_mid, s.current_revision().await.unwrap())
    };
    let s = SqliteStore::open_with(&path, no_compaction()).unwrap();
    assert_eq!(s.current_revision().await.unwrap(), current);
    assert_eq!(s.compacted_revision().await.unwrap(), a2.mod_revision);
    assert_eq!(s.get("/k/a").await.unwrap(), Some(a2.clone()));
    let past = s
        .range(RangeRequest {
            prefix: "/k/".into(),
            revision: r_mid,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(past.kvs.len(), 2);
    // Revisions continue where they were.
    let c = s.create("/k/c", b("c")).await.unwrap();
    assert_eq!(c.mod_revision, current + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_open_of_the_same_file_is_refused_until_the_first_closes() {
    let dir = common::TempDir::new("sqlite-lock");
    let path = dir.path().join("s.db");
    let first = SqliteStore::open_with(&path, no_compaction()).unwrap();
    match SqliteStore::open_with(&path, no_compaction()) {
        Err(StoreError::Backend(msg)) => assert!(msg.contains("in use"), "{msg}"),
        Ok(_) => panic!("second open succeeded"),
        Err(e) => panic!("{e}"),
    }
    first.create("/a", b("1")).await.unwrap();
    drop(first);
    let again = SqliteStore::open_with(&path, no_compaction()).unwrap();
    assert!(again.get("/a").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_share_commits() {
    let dir = common::TempDir::new("sqlite-group-commit");
    let s = SqliteStore::open_with(&dir.path().join("s.db"), no_compaction()).unwrap();
    for i in 0..20 {
        s.create(&format!("/seq/{i}"), b("v")).await.unwrap();
    }
    let seq = s.stats();
    assert_eq!(
        (seq.commits, seq.writes),
        (20, 20),
        "sequential writes commit one by one"
    );

    let tasks = (0..16).map(|t| {
        let s = s.clone();
        tokio::spawn(async move {
            for i in 0..50 {
                s.create(&format!("/par/{t}/{i}"), b("v")).await.unwrap();
            }
        })
    });
    for r in futures::future::join_all(tasks).await {
        r.unwrap();
    }
    let all = s.stats();
    let (commits, writes) = (all.commits - seq.commits, all.writes - seq.writes);
    assert_eq!(writes, 800);
    assert!(
        commits * 4 <= writes,
        "16 writers should share commits: {writes} writes in {commits} commits"
    );
    // Batched writes still get one revision each.
    assert_eq!(s.current_revision().await.unwrap(), 1 + 20 + 800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_ops_in_a_batch_do_not_affect_the_others() {
    let dir = common::TempDir::new("sqlite-batch-errors");
    let s = SqliteStore::open_with(&dir.path().join("s.db"), no_compaction()).unwrap();
    // Half of these race to create the same keys: exactly one create per key wins.
    let tasks = (0..32).map(|t| {
        let s = s.clone();
        tokio::spawn(async move {
            s.create(&format!("/dup/{}", t % 16), b(&t.to_string()))
                .await
        })
    });
    let results = futures::future::join_all(tasks).await;
    let ok = results.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
    let exists = results
        .iter()
        .filter(|r| matches!(r, Ok(Err(StoreError::AlreadyExists(_)))))
        .count();
    assert_eq!((ok, exists), (16, 16));
    let mut revs: Vec<i64> = results
        .iter()
        .filter_map(|r| r.as_ref().ok()?.as_ref().ok())
        .map(|kv| kv.mod_revision)
        .collect();
    revs.sort();
    assert_eq!(
        revs,
        (2..18).collect::<Vec<_>>(),
        "successful writes get consecutive revisions"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_compaction_keeps_recent_revisions_and_deletes_old_rows() {
    let dir = common::TempDir::new("sqlite-periodic");
    let path = dir.path().join("s.db");
    let options = SqliteOptions {
        compaction_interval: Some(Duration::from_millis(50)),
        retention: Duration::ZERO,
        min_retained_revisions: 5,
        ..SqliteOptions::default()
    };
    let s = SqliteStore::open_with(&path, options).unwrap();
    let mut kv = s.create("/k", b("0")).await.unwrap(); // revision 2
    for i in 1..50 {
        kv = s
            .update("/k", b(&i.to_string()), kv.mod_revision)
            .await
            .unwrap();
    }
    s.create("/gone", b("x")).await.unwrap();
    s.delete("/gone", None).await.unwrap();
    let current = s.current_revision().await.unwrap();
    assert_eq!(current, 53);
    let target = current - 5;
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.compacted_revision().await.unwrap() != target {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for periodic compaction"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_for("physical compaction", || {
        let (_, compacted, progress) = raw_counts(&path);
        compacted == target && progress == target
    })
    .await;
    // Below the target only /k's value at it stays (its row at 47); from 48 on, all
    // rows (the /k updates 48..51, /gone's create and tombstone).
    let (rows, _, _) = raw_counts(&path);
    assert_eq!(rows, 1 + 6);
    let at = s
        .range(RangeRequest {
            prefix: "/".into(),
            revision: target,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        at.kvs.iter().map(|kv| kv.value.clone()).collect::<Vec<_>>(),
        [b("46")]
    );
    assert!(matches!(
        s.range(RangeRequest {
            prefix: "/".into(),
            revision: target - 1,
            ..Default::default()
        })
        .await,
        Err(StoreError::Compacted { .. })
    ));
    // A watch from the compacted revision still gets every later event with its prev.
    let mut w = s.watch("/", target).await.unwrap();
    match w.next().await {
        Some(Ok(Event::Put {
            kv,
            prev: Some(prev),
        })) => {
            assert_eq!((kv.mod_revision, prev.mod_revision), (target + 1, target));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_retention_keeps_young_history() {
    let dir = common::TempDir::new("sqlite-retention");
    let options = SqliteOptions {
        compaction_interval: Some(Duration::from_millis(20)),
        retention: Duration::from_secs(3600),
        min_retained_revisions: 0,
        ..SqliteOptions::default()
    };
    let s = SqliteStore::open_with(&dir.path().join("s.db"), options).unwrap();
    let mut kv = s.create("/k", b("0")).await.unwrap();
    for i in 1..20 {
        kv = s
            .update("/k", b(&i.to_string()), kv.mod_revision)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        s.compacted_revision().await.unwrap(),
        0,
        "history younger than the retention stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_watcher_whose_history_is_compacted_gets_compacted() {
    let dir = common::TempDir::new("sqlite-lag-compacted");
    let options = SqliteOptions {
        watch_buffer: 2,
        ..no_compaction()
    };
    let s = SqliteStore::open_with(&dir.path().join("s.db"), options).unwrap();
    let mut w = s
        .watch("/k", s.current_revision().await.unwrap())
        .await
        .unwrap();
    let first = s.create("/k", b("0")).await.unwrap();
    assert!(matches!(w.next().await, Some(Ok(Event::Put { .. }))));
    // The watcher stops polling; its buffer overflows, then the history goes.
    let mut kv = first;
    for i in 1..100 {
        kv = s
            .update("/k", b(&i.to_string()), kv.mod_revision)
            .await
            .unwrap();
    }
    s.compact(kv.mod_revision).await.unwrap();
    let mut last = kv.mod_revision - 99;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), w.next())
            .await
            .unwrap()
        {
            Some(Ok(ev)) => {
                // Whatever was still buffered comes first, without gaps.
                assert_eq!(ev.revision(), last + 1);
                last += 1;
            }
            Some(Err(StoreError::Compacted {
                requested,
                compacted,
            })) => {
                assert_eq!((requested, compacted), (last, kv.mod_revision));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(w.next().await.is_none(), "the stream ends after Compacted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_ends_when_the_store_is_dropped() {
    let dir = common::TempDir::new("sqlite-drop");
    let s = SqliteStore::open_with(&dir.path().join("s.db"), no_compaction()).unwrap();
    let mut w = s.watch("/", 0).await.unwrap();
    let a = s.create("/a", b("1")).await.unwrap();
    drop(s);
    assert_eq!(
        w.next().await.unwrap().unwrap(),
        Event::Put { kv: a, prev: None }
    );
    let end = tokio::time::timeout(Duration::from_secs(10), w.next())
        .await
        .unwrap();
    assert!(end.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_proceed_while_writes_are_pending() {
    let dir = common::TempDir::new("sqlite-reads");
    let s = Arc::new(SqliteStore::open_with(&dir.path().join("s.db"), no_compaction()).unwrap());
    s.create("/r", b("v")).await.unwrap();
    // Keep the writer saturated while reading.
    let writers: Vec<_> = (0..8)
        .map(|t| {
            let s = s.clone();
            tokio::spawn(async move {
                for i in 0..100 {
                    s.create(&format!("/w/{t}/{i}"), b("v")).await.unwrap();
                }
            })
        })
        .collect();
    let mut reads = 0;
    while !writers.iter().all(|w| w.is_finished()) {
        let got = s.get("/r").await.unwrap();
        assert_eq!(got.map(|kv| kv.value), Some(b("v")));
        let page = s
            .range(RangeRequest {
                prefix: "/w/".into(),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(page.kvs.len() <= 10);
        reads += 1;
    }
    for w in writers {
        w.await.unwrap();
    }
    assert!(reads > 0);
}
