//! The backend-independent conformance suite (feature `conformance`): every
//! [`Store`] implementation must pass [`run_all`].
//!
//! Each case gets a fresh, empty store from the caller's factory. Cases run one after
//! another: several assert exact revision arithmetic, which a backend shared with
//! concurrent writers (one etcd) would break. Keys are distinct per case anyway.

use std::collections::BTreeSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;

use crate::{Event, KeyValue, RangeRequest, Revision, Store, StoreError, WatchStream};

pub type StoreRef = Arc<dyn Store>;

/// One named case.
pub struct Case {
    pub name: &'static str,
    pub run: fn(StoreRef) -> BoxFuture<'static, ()>,
}

macro_rules! case {
    ($f:ident) => {
        Case {
            name: stringify!($f),
            run: |s| Box::pin($f(s)),
        }
    };
}

/// Every case, in the order [`run_all`] runs them.
pub fn cases() -> Vec<Case> {
    vec![
        case!(revisions_and_versions),
        case!(write_errors),
        case!(range_prefix_and_paging),
        case!(range_at_past_revisions),
        case!(compaction),
        case!(delete_guarded_and_unguarded),
        case!(watch_replays_history),
        case!(live_watch_with_prev),
        case!(watch_after_compaction),
        case!(slow_watcher_gets_everything),
        case!(concurrent_increments),
    ]
}

/// Runs every case, each on a store from `make(case_name)`; panics listing the
/// failed cases (after running all of them).
pub async fn run_all<F, Fut>(mut make: F)
where
    F: FnMut(&'static str) -> Fut,
    Fut: Future<Output = StoreRef>,
{
    let mut failed = Vec::new();
    for case in cases() {
        let store = make(case.name).await;
        let started = Instant::now();
        match AssertUnwindSafe((case.run)(store)).catch_unwind().await {
            Ok(()) => eprintln!("conformance {}: ok ({:.2?})", case.name, started.elapsed()),
            Err(_) => {
                eprintln!("conformance {}: FAILED", case.name);
                failed.push(case.name);
            }
        }
    }
    assert!(failed.is_empty(), "conformance cases failed: {failed:?}");
}

const WAIT: Duration = Duration::from_secs(30);

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn rev(s: &StoreRef) -> Revision {
    s.current_revision().await.expect("current_revision")
}

/// The next event, which must arrive within [`WAIT`] and be `Ok`.
async fn next_event(w: &mut WatchStream) -> Event {
    match tokio::time::timeout(WAIT, w.next()).await {
        Ok(Some(Ok(ev))) => ev,
        Ok(Some(Err(e))) => panic!("watch error: {e}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch event within {WAIT:?}"),
    }
}

fn keys(kvs: &[KeyValue]) -> Vec<&str> {
    kvs.iter().map(|kv| kv.key.as_str()).collect()
}

fn range(prefix: &str) -> RangeRequest {
    RangeRequest {
        prefix: prefix.into(),
        ..Default::default()
    }
}

/// Each write bumps the revision by one; create/mod revision and version follow.
async fn revisions_and_versions(s: StoreRef) {
    let r0 = rev(&s).await;
    let a = s.create("/rv/a", b("1")).await.unwrap();
    assert_eq!(a.key, "/rv/a");
    assert_eq!(a.value, b("1"));
    assert_eq!(
        (a.create_revision, a.mod_revision, a.version),
        (r0 + 1, r0 + 1, 1)
    );
    assert_eq!(rev(&s).await, r0 + 1);

    let a2 = s.update("/rv/a", b("2"), a.mod_revision).await.unwrap();
    assert_eq!(
        (a2.create_revision, a2.mod_revision, a2.version),
        (r0 + 1, r0 + 2, 2)
    );
    assert_eq!(a2.value, b("2"));

    let other = s.create("/rv/b", b("x")).await.unwrap();
    assert_eq!(other.mod_revision, r0 + 3);

    let a3 = s.update("/rv/a", b("3"), a2.mod_revision).await.unwrap();
    assert_eq!(
        (a3.create_revision, a3.mod_revision, a3.version),
        (r0 + 1, r0 + 4, 3)
    );
    assert_eq!(s.get("/rv/a").await.unwrap(), Some(a3.clone()));
    assert_eq!(rev(&s).await, r0 + 4);

    let (prev, at) = s.delete("/rv/a", None).await.unwrap();
    assert_eq!(prev, a3);
    assert_eq!(at, r0 + 5);
    assert_eq!(s.get("/rv/a").await.unwrap(), None);

    // Re-created: a new life, version starts again.
    let a4 = s.create("/rv/a", b("4")).await.unwrap();
    assert_eq!(
        (a4.create_revision, a4.mod_revision, a4.version),
        (r0 + 6, r0 + 6, 1)
    );
    assert_eq!(s.get("/rv/a").await.unwrap(), Some(a4));
    assert_eq!(rev(&s).await, r0 + 6);
}

/// AlreadyExists / NotFound / Conflict, and failed writes don't bump the revision.
async fn write_errors(s: StoreRef) {
    let a = s.create("/e/a", b("1")).await.unwrap();
    let r = rev(&s).await;

    match s.create("/e/a", b("2")).await {
        Err(StoreError::AlreadyExists(k)) => assert_eq!(k, "/e/a"),
        other => panic!("create existing: {other:?}"),
    }
    match s.update("/e/missing", b("x"), 5).await {
        Err(StoreError::NotFound(k)) => assert_eq!(k, "/e/missing"),
        other => panic!("update missing: {other:?}"),
    }
    // Expected revision 0 must not create an absent key.
    assert!(matches!(
        s.update("/e/missing", b("x"), 0).await,
        Err(StoreError::NotFound(_))
    ));
    match s.update("/e/a", b("x"), a.mod_revision - 1).await {
        Err(StoreError::Conflict {
            key,
            expected,
            actual,
        }) => {
            assert_eq!(
                (key.as_str(), expected, actual),
                ("/e/a", a.mod_revision - 1, a.mod_revision)
            );
        }
        other => panic!("update stale: {other:?}"),
    }
    assert!(matches!(
        s.delete("/e/missing", None).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        s.delete("/e/missing", Some(3)).await,
        Err(StoreError::NotFound(_))
    ));
    match s.delete("/e/a", Some(a.mod_revision + 100)).await {
        Err(StoreError::Conflict { actual, .. }) => assert_eq!(actual, a.mod_revision),
        other => panic!("delete stale: {other:?}"),
    }
    assert_eq!(rev(&s).await, r, "failed writes must not bump the revision");
    assert_eq!(s.get("/e/a").await.unwrap(), Some(a.clone()));

    // Two writers with the same base: the second loses.
    let a2 = s.update("/e/a", b("2"), a.mod_revision).await.unwrap();
    match s.update("/e/a", b("3"), a.mod_revision).await {
        Err(StoreError::Conflict { actual, .. }) => assert_eq!(actual, a2.mod_revision),
        other => panic!("lost update: {other:?}"),
    }
    assert_eq!(
        s.get("/e/a").await.unwrap().map(|kv| kv.value),
        Some(b("2"))
    );
}

/// Prefix ranges (and their isolation), paging with start_after + limit, more, count.
async fn range_prefix_and_paging(s: StoreRef) {
    let mut made = Vec::new();
    for i in [3, 1, 5, 2, 4] {
        made.push(
            s.create(&format!("/r/a/{i}"), b(&format!("v{i}")))
                .await
                .unwrap(),
        );
    }
    made.sort_by(|x, y| x.key.cmp(&y.key));
    // Neighbours that a sloppy prefix match would include.
    for k in ["/r/a", "/r/ab/x", "/r/b/1", "/q/a/1"] {
        s.create(k, b("n")).await.unwrap();
    }
    let current = rev(&s).await;

    let all = s.range(range("/r/a/")).await.unwrap();
    assert_eq!(all.kvs, made);
    assert_eq!((all.count, all.more, all.revision), (5, false, current));

    let page = s
        .range(RangeRequest {
            limit: 2,
            ..range("/r/a/")
        })
        .await
        .unwrap();
    assert_eq!(keys(&page.kvs), ["/r/a/1", "/r/a/2"]);
    assert_eq!((page.count, page.more), (5, true));

    let page = s
        .range(RangeRequest {
            limit: 2,
            start_after: Some("/r/a/2".into()),
            ..range("/r/a/")
        })
        .await
        .unwrap();
    assert_eq!(keys(&page.kvs), ["/r/a/3", "/r/a/4"]);
    assert_eq!((page.count, page.more), (3, true));

    let page = s
        .range(RangeRequest {
            limit: 2,
            start_after: Some("/r/a/4".into()),
            ..range("/r/a/")
        })
        .await
        .unwrap();
    assert_eq!(keys(&page.kvs), ["/r/a/5"]);
    assert_eq!((page.count, page.more), (1, false));

    let page = s
        .range(RangeRequest {
            start_after: Some("/r/a/5".into()),
            ..range("/r/a/")
        })
        .await
        .unwrap();
    assert!(page.kvs.is_empty());
    assert_eq!((page.count, page.more), (0, false));

    let wider = s.range(range("/r/")).await.unwrap();
    assert_eq!(
        keys(&wider.kvs),
        [
            "/r/a", "/r/a/1", "/r/a/2", "/r/a/3", "/r/a/4", "/r/a/5", "/r/ab/x", "/r/b/1"
        ]
    );

    // Paging a consistent snapshot while writes go on: later pages read at the first
    // page's revision.
    let first = s
        .range(RangeRequest {
            limit: 2,
            ..range("/r/a/")
        })
        .await
        .unwrap();
    s.create("/r/a/0", b("late")).await.unwrap();
    s.delete("/r/a/5", None).await.unwrap();
    let mut seen = keys(&first.kvs)
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    let mut after = first.kvs.last().map(|kv| kv.key.clone());
    loop {
        let page = s
            .range(RangeRequest {
                limit: 2,
                start_after: after.clone(),
                revision: first.revision,
                ..range("/r/a/")
            })
            .await
            .unwrap();
        assert_eq!(page.revision, first.revision);
        seen.extend(page.kvs.iter().map(|kv| kv.key.clone()));
        after = page.kvs.last().map(|kv| kv.key.clone());
        if !page.more {
            break;
        }
    }
    assert_eq!(seen, ["/r/a/1", "/r/a/2", "/r/a/3", "/r/a/4", "/r/a/5"]);
    let now = s.range(range("/r/a/")).await.unwrap();
    assert_eq!(
        keys(&now.kvs),
        ["/r/a/0", "/r/a/1", "/r/a/2", "/r/a/3", "/r/a/4"]
    );
}

/// Reads at past revisions see the state as it was; a future revision is an error.
async fn range_at_past_revisions(s: StoreRef) {
    let x1 = s.create("/p/x", b("1")).await.unwrap();
    let x2 = s.update("/p/x", b("2"), x1.mod_revision).await.unwrap();
    let y = s.create("/p/y", b("y")).await.unwrap();
    let (_, r4) = s.delete("/p/x", None).await.unwrap();
    let z = s.create("/p/z", b("z")).await.unwrap();

    let at = |revision: Revision| {
        let s = s.clone();
        async move {
            s.range(RangeRequest {
                revision,
                ..range("/p/")
            })
            .await
            .unwrap()
        }
    };
    let r = at(x1.mod_revision).await;
    assert_eq!((r.kvs, r.revision), (vec![x1.clone()], x1.mod_revision));
    assert_eq!(at(x2.mod_revision).await.kvs, vec![x2.clone()]);
    assert_eq!(at(y.mod_revision).await.kvs, vec![x2.clone(), y.clone()]);
    assert_eq!(at(r4).await.kvs, vec![y.clone()]);
    assert_eq!(at(z.mod_revision).await.kvs, vec![y.clone(), z.clone()]);

    let paged = s
        .range(RangeRequest {
            revision: y.mod_revision,
            limit: 1,
            ..range("/p/")
        })
        .await
        .unwrap();
    assert_eq!((paged.kvs, paged.more, paged.count), (vec![x2], true, 2));

    let latest = s.range(range("/p/")).await.unwrap();
    assert_eq!(
        (latest.kvs, latest.revision),
        (vec![y, z.clone()], z.mod_revision)
    );

    let future = rev(&s).await + 1;
    match s
        .range(RangeRequest {
            revision: future,
            ..range("/p/")
        })
        .await
    {
        Err(StoreError::FutureRevision(r)) => assert_eq!(r, future),
        other => panic!("future revision: {other:?}"),
    }
}

/// Compaction forgets old revisions but keeps the state at (and after) it.
async fn compaction(s: StoreRef) {
    let a1 = s.create("/c/a", b("1")).await.unwrap();
    let a2 = s.update("/c/a", b("2"), a1.mod_revision).await.unwrap();
    s.create("/c/b", b("b")).await.unwrap();
    let (_, r4) = s.delete("/c/b", None).await.unwrap();
    let a3 = s.update("/c/a", b("3"), a2.mod_revision).await.unwrap();
    let d = s.create("/c/d", b("d")).await.unwrap();

    s.compact(r4).await.unwrap();
    assert_eq!(s.compacted_revision().await.unwrap(), r4);

    match s
        .range(RangeRequest {
            revision: r4 - 1,
            ..range("/c/")
        })
        .await
    {
        Err(StoreError::Compacted {
            requested,
            compacted,
        }) => assert_eq!((requested, compacted), (r4 - 1, r4)),
        other => panic!("range below compaction: {other:?}"),
    }
    let at = s
        .range(RangeRequest {
            revision: r4,
            ..range("/c/")
        })
        .await
        .unwrap();
    assert_eq!(
        at.kvs,
        vec![a2],
        "state at the compacted revision stays readable"
    );
    let at = s
        .range(RangeRequest {
            revision: a3.mod_revision,
            ..range("/c/")
        })
        .await
        .unwrap();
    assert_eq!(at.kvs, vec![a3.clone()]);
    assert_eq!(
        s.range(range("/c/")).await.unwrap().kvs,
        vec![a3.clone(), d]
    );
    assert_eq!(s.get("/c/a").await.unwrap(), Some(a3));

    assert!(matches!(
        s.compact(r4).await,
        Err(StoreError::Compacted { .. })
    ));
    assert!(matches!(
        s.compact(r4 - 2).await,
        Err(StoreError::Compacted { .. })
    ));
    let future = rev(&s).await + 1;
    assert!(matches!(s.compact(future).await, Err(StoreError::FutureRevision(r)) if r == future));
    assert_eq!(s.compacted_revision().await.unwrap(), r4);

    // Writes go on after compaction.
    let e = s.create("/c/e", b("e")).await.unwrap();
    assert_eq!(e.mod_revision, future);
}

async fn delete_guarded_and_unguarded(s: StoreRef) {
    let a = s.create("/d/a", b("1")).await.unwrap();
    let a2 = s.update("/d/a", b("2"), a.mod_revision).await.unwrap();
    match s.delete("/d/a", Some(a.mod_revision)).await {
        Err(StoreError::Conflict { actual, .. }) => assert_eq!(actual, a2.mod_revision),
        other => panic!("stale guarded delete: {other:?}"),
    }
    assert_eq!(s.get("/d/a").await.unwrap(), Some(a2.clone()));
    let (prev, at) = s.delete("/d/a", Some(a2.mod_revision)).await.unwrap();
    assert_eq!((prev, at), (a2.clone(), a2.mod_revision + 1));

    let bb = s.create("/d/b", b("b")).await.unwrap();
    let (prev, at) = s.delete("/d/b", None).await.unwrap();
    assert_eq!((prev, at), (bb.clone(), bb.mod_revision + 1));
    assert!(matches!(
        s.delete("/d/b", None).await,
        Err(StoreError::NotFound(_))
    ));
    let left = s.range(range("/d/")).await.unwrap();
    assert_eq!((left.kvs.len(), left.count, left.more), (0, 0, false));
}

/// A watch from a past revision replays history in order, then goes on live.
async fn watch_replays_history(s: StoreRef) {
    let r0 = rev(&s).await;
    let a1 = s.create("/w/a", b("1")).await.unwrap();
    let a2 = s.update("/w/a", b("2"), a1.mod_revision).await.unwrap();
    let b1 = s.create("/w/b", b("b1")).await.unwrap();
    let (_, del) = s.delete("/w/a", None).await.unwrap();
    s.create("/x/other", b("o")).await.unwrap();
    s.create("/w", b("not under /w/")).await.unwrap();
    let b2 = s.update("/w/b", b("b2"), b1.mod_revision).await.unwrap();

    let expected = vec![
        Event::Put {
            kv: a1.clone(),
            prev: None,
        },
        Event::Put {
            kv: a2.clone(),
            prev: Some(a1),
        },
        Event::Put {
            kv: b1.clone(),
            prev: None,
        },
        Event::Delete {
            prev: a2.clone(),
            revision: del,
        },
        Event::Put {
            kv: b2.clone(),
            prev: Some(b1.clone()),
        },
    ];
    let mut w = s.watch("/w/", r0).await.unwrap();
    for want in &expected {
        assert_eq!(&next_event(&mut w).await, want);
    }
    // Then live, without duplicates or foreign keys.
    let c = s.create("/w/c", b("c")).await.unwrap();
    assert_eq!(
        next_event(&mut w).await,
        Event::Put {
            kv: c.clone(),
            prev: None
        }
    );

    // From the middle: everything strictly after `a2`.
    let mut w = s.watch("/w/", a2.mod_revision).await.unwrap();
    for want in expected[2..]
        .iter()
        .chain([&Event::Put { kv: c, prev: None }])
    {
        assert_eq!(&next_event(&mut w).await, want);
    }
}

/// A live watch sees puts and deletes with their previous values, only under its prefix.
async fn live_watch_with_prev(s: StoreRef) {
    let pre = s.create("/lw/pre", b("pre")).await.unwrap();
    let r = rev(&s).await;
    let mut w = s.watch("/lw/", r).await.unwrap();
    let mut everything = s.watch("", r).await.unwrap();

    let foreign = s.create("/lwx/1", b("x")).await.unwrap();
    let a1 = s.create("/lw/a", b("1")).await.unwrap();
    let a2 = s.update("/lw/a", b("2"), a1.mod_revision).await.unwrap();
    let (_, del) = s.delete("/lw/a", Some(a2.mod_revision)).await.unwrap();
    let (_, del_pre) = s.delete("/lw/pre", None).await.unwrap();

    let expected = [
        Event::Put {
            kv: a1.clone(),
            prev: None,
        },
        Event::Put {
            kv: a2.clone(),
            prev: Some(a1.clone()),
        },
        Event::Delete {
            prev: a2.clone(),
            revision: del,
        },
        Event::Delete {
            prev: pre,
            revision: del_pre,
        },
    ];
    for want in &expected {
        assert_eq!(&next_event(&mut w).await, want);
    }
    // The empty prefix watches everything, the foreign key first.
    assert_eq!(
        next_event(&mut everything).await,
        Event::Put {
            kv: foreign,
            prev: None
        }
    );
    for want in &expected {
        assert_eq!(&next_event(&mut everything).await, want);
    }

    // From a revision not reached yet: only what comes after it.
    let now = rev(&s).await;
    let mut future = s.watch("/lw/", now + 1).await.unwrap();
    // Polled (so it is live) before the writes.
    let early = tokio::time::timeout(Duration::from_millis(200), future.next()).await;
    assert!(early.is_err(), "event before any write: {early:?}");
    let f1 = s.create("/lw/f1", b("1")).await.unwrap();
    assert_eq!(f1.mod_revision, now + 1);
    let f2 = s.create("/lw/f2", b("2")).await.unwrap();
    assert_eq!(
        next_event(&mut future).await,
        Event::Put { kv: f2, prev: None }
    );
}

/// Watching from before the compacted revision fails with Compacted; from it, works.
async fn watch_after_compaction(s: StoreRef) {
    let mut kv = s.create("/wc/a", b("0")).await.unwrap();
    let mut revs = vec![kv.clone()];
    for i in 1..=4 {
        kv = s
            .update("/wc/a", b(&i.to_string()), kv.mod_revision)
            .await
            .unwrap();
        revs.push(kv.clone());
    }
    let compact_at = revs[2].mod_revision;
    s.compact(compact_at).await.unwrap();

    let mut w = s.watch("/wc/", compact_at - 1).await.unwrap();
    match tokio::time::timeout(WAIT, w.next()).await {
        Ok(Some(Err(StoreError::Compacted { compacted, .. }))) => assert_eq!(compacted, compact_at),
        other => panic!("watch below compaction: {other:?}"),
    }
    match tokio::time::timeout(WAIT, w.next()).await {
        Ok(None) => {}
        other => panic!("stream must end after Compacted: {other:?}"),
    }

    let mut w = s.watch("/wc/", compact_at).await.unwrap();
    assert_eq!(
        next_event(&mut w).await,
        Event::Put {
            kv: revs[3].clone(),
            prev: Some(revs[2].clone())
        }
    );
    assert_eq!(
        next_event(&mut w).await,
        Event::Put {
            kv: revs[4].clone(),
            prev: Some(revs[3].clone())
        }
    );
}

/// A watcher that does not poll while 10,000 writes happen neither blocks them nor
/// loses any: afterwards it gets every event, in order.
async fn slow_watcher_gets_everything(s: StoreRef) {
    const WRITERS: usize = 16;
    const PER_WRITER: usize = 625;
    let r = rev(&s).await;
    let mut w = s.watch("/slow/", r).await.unwrap();
    // Get the watcher live (past any initial catch-up) before it stops polling.
    let first = s.create("/slow/first", b("v")).await.unwrap();
    assert_eq!(
        next_event(&mut w).await,
        Event::Put {
            kv: first.clone(),
            prev: None
        }
    );

    let started = Instant::now();
    let writers = (0..WRITERS).map(|t| {
        let s = s.clone();
        tokio::spawn(async move {
            let mut done = Vec::with_capacity(PER_WRITER);
            for i in 0..PER_WRITER {
                let kv = s
                    .create(&format!("/slow/{t:02}/{i:04}"), b("v"))
                    .await
                    .unwrap();
                done.push((kv.mod_revision, kv.key));
            }
            done
        })
    });
    // If a writer waited for the unpolled watcher this would time out.
    let results =
        tokio::time::timeout(Duration::from_secs(300), futures::future::join_all(writers))
            .await
            .expect("writers blocked while a watcher was not polling");
    let mut written = BTreeSet::new();
    for r in results {
        written.extend(r.expect("writer task"));
    }
    assert_eq!(written.len(), WRITERS * PER_WRITER);
    eprintln!(
        "  {} writes in {:.2?} with an idle watcher",
        written.len(),
        started.elapsed()
    );

    let mut last = first.mod_revision;
    let mut got = BTreeSet::new();
    for _ in 0..WRITERS * PER_WRITER {
        match next_event(&mut w).await {
            Event::Put { kv, prev: None } => {
                assert!(
                    kv.mod_revision > last,
                    "out of order: {} after {last}",
                    kv.mod_revision
                );
                last = kv.mod_revision;
                got.insert((kv.mod_revision, kv.key));
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(got, written);
    // Nothing more, and the watch is still live.
    let after = s.create("/slow/after", b("v")).await.unwrap();
    assert_eq!(
        next_event(&mut w).await,
        Event::Put {
            kv: after,
            prev: None
        }
    );
}

/// 16 tasks doing guarded read-modify-write increments on one key lose none.
async fn concurrent_increments(s: StoreRef) {
    const TASKS: usize = 16;
    const EACH: usize = 20;
    let start = s.create("/cnt", b("0")).await.unwrap();
    let tasks = (0..TASKS).map(|_| {
        let s = s.clone();
        tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..EACH {
                loop {
                    let cur = s.get("/cnt").await.unwrap().expect("counter exists");
                    let n: u64 = std::str::from_utf8(&cur.value).unwrap().parse().unwrap();
                    match s
                        .update("/cnt", b(&(n + 1).to_string()), cur.mod_revision)
                        .await
                    {
                        Ok(_) => break,
                        Err(StoreError::Conflict { .. }) => conflicts += 1,
                        Err(e) => panic!("increment: {e}"),
                    }
                }
            }
            conflicts
        })
    });
    let results = tokio::time::timeout(Duration::from_secs(300), futures::future::join_all(tasks))
        .await
        .expect("increments timed out");
    let conflicts: usize = results.into_iter().map(|r| r.expect("task")).sum();
    let end = s.get("/cnt").await.unwrap().unwrap();
    assert_eq!(
        std::str::from_utf8(&end.value).unwrap(),
        (TASKS * EACH).to_string()
    );
    assert_eq!(end.version, (TASKS * EACH) as i64 + 1);
    assert_eq!(end.create_revision, start.create_revision);
    eprintln!(
        "  {} increments, {conflicts} conflicts retried",
        TASKS * EACH
    );
}
