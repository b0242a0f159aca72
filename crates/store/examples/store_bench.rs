//! Store benchmark: durable puts/s (sequential and 16 concurrent writers) and watch
//! fan-out, for Berth's SQLite and etcd backends, next to raw baselines (etcd puts
//! without Berth's txn layer, one-transaction-per-put SQLite and redb).
//!
//! ```text
//! cargo run --release -p berth-store --example store_bench
//! ```
//! Sizes: `BENCH_SEQ` (sequential puts, default 500), `BENCH_PAR` (puts by 16
//! writers, default 8000), `BENCH_WATCHERS` (default 100), `BENCH_EVENTS` (events
//! per fan-out, default 1024), `BENCH_VALUE` (value bytes, default 1024). Starts its
//! own etcd (`/usr/bin/etcd`); `BERTH_SKIP_ETCD=1` leaves the etcd rows out.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_store::etcd_process::EtcdProcess;
use berth_store::{EtcdStore, SqliteOptions, SqliteStore, Store};
use bytes::Bytes;
use futures::StreamExt;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

const WRITERS: usize = 16;

struct Params {
    seq: usize,
    par: usize,
    watchers: usize,
    events: usize,
    value: Bytes,
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Default)]
struct Row {
    name: &'static str,
    seq: Option<f64>,
    par: Option<f64>,
    fanout: Option<(Duration, Duration)>,
    note: String,
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

/// Runs `n` puts from `writers` concurrent tasks; `put(writer, i)` does one.
async fn put_loop<F, Fut>(n: usize, writers: usize, put: F) -> Res<f64>
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Res<()>> + Send,
{
    let put = Arc::new(put);
    let per = n / writers;
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let put = put.clone();
            tokio::spawn(async move {
                for i in 0..per {
                    put(w, i).await?;
                }
                Res::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    Ok(rate(per * writers, t0.elapsed()))
}

async fn store_puts(store: Arc<dyn Store>, p: &Params, row: &mut Row) -> Res<()> {
    let (s, v) = (store.clone(), p.value.clone());
    row.seq = Some(
        put_loop(p.seq, 1, move |_, i| {
            let (s, v) = (s.clone(), v.clone());
            async move { Ok(s.create(&format!("/seq/{i}"), v).await.map(drop)?) }
        })
        .await?,
    );
    let (s, v) = (store.clone(), p.value.clone());
    row.par = Some(
        put_loop(p.par, WRITERS, move |w, i| {
            let (s, v) = (s.clone(), v.clone());
            async move { Ok(s.create(&format!("/par/{w}/{i}"), v).await.map(drop)?) }
        })
        .await?,
    );
    Ok(())
}

/// Time from the first write until all watchers received all events, and how much
/// of it came after the last write was acknowledged.
async fn fanout(store: Arc<dyn Store>, p: &Params) -> Res<(Duration, Duration)> {
    let from = store.current_revision().await?;
    let mut receivers = Vec::with_capacity(p.watchers);
    // What `put_loop` will write: a whole number per writer.
    let events = p.events / WRITERS * WRITERS;
    for _ in 0..p.watchers {
        let mut w = store.watch("/fan/", from).await?;
        receivers.push(tokio::spawn(async move {
            for _ in 0..events {
                match w.next().await {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(Box::new(e) as Box<dyn Error + Send + Sync>),
                    None => return Err("watch ended".into()),
                }
            }
            Ok(Instant::now())
        }));
    }
    let t0 = Instant::now();
    let (s, v) = (store.clone(), p.value.clone());
    put_loop(events, WRITERS, move |w, i| {
        let (s, v) = (s.clone(), v.clone());
        async move { Ok(s.create(&format!("/fan/{w}/{i}"), v).await.map(drop)?) }
    })
    .await?;
    let writes_done = Instant::now();
    let mut last = writes_done;
    for r in receivers {
        // A watcher that never gets all events is a store bug: fail, don't hang.
        let done = tokio::time::timeout(Duration::from_secs(300), r)
            .await
            .map_err(|_| "a watcher did not receive every event within 300 s")???;
        last = last.max(done);
    }
    Ok((last - t0, last - writes_done))
}

fn raw_sqlite(path: &Path, p: &Params, writers: usize, n: usize) -> Res<f64> {
    let open = || -> Res<rusqlite::Connection> {
        let c = rusqlite::Connection::open(path)?;
        c.busy_timeout(Duration::from_secs(60))?;
        c.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))?;
        c.execute_batch("PRAGMA synchronous=FULL; CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB)")?;
        Ok(c)
    };
    drop(open()?);
    let per = n / writers;
    let t0 = Instant::now();
    std::thread::scope(|scope| -> Res<()> {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let value = p.value.clone();
                scope.spawn(move || -> Res<()> {
                    let c = open()?;
                    for i in 0..per {
                        // Autocommit: one durable transaction per put.
                        c.execute(
                            "INSERT INTO kv (key, value) VALUES (?1, ?2)",
                            rusqlite::params![format!("/{writers}/{w}/{i}"), &value[..]],
                        )?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "raw sqlite writer panicked")??;
        }
        Ok(())
    })?;
    Ok(rate(per * writers, t0.elapsed()))
}

fn raw_redb(db: &Arc<redb::Database>, p: &Params, writers: usize, n: usize) -> Res<f64> {
    const TABLE: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("kv");
    let per = n / writers;
    let t0 = Instant::now();
    std::thread::scope(|scope| -> Res<()> {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let (db, value) = (db.clone(), p.value.clone());
                scope.spawn(move || -> Res<()> {
                    for i in 0..per {
                        // One durable (Durability::Immediate, the default) commit per put.
                        let tx = db.begin_write()?;
                        {
                            let mut t = tx.open_table(TABLE)?;
                            t.insert(format!("/{writers}/{w}/{i}").as_str(), &value[..])?;
                        }
                        tx.commit()?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "redb writer panicked")??;
        }
        Ok(())
    })?;
    Ok(rate(per * writers, t0.elapsed()))
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::main]
async fn main() -> Res<()> {
    let p = Params {
        seq: env("BENCH_SEQ", 500),
        par: env("BENCH_PAR", 8000),
        watchers: env("BENCH_WATCHERS", 100),
        events: env("BENCH_EVENTS", 1024),
        value: Bytes::from(vec![b'x'; env("BENCH_VALUE", 1024)]),
    };
    let dir =
        TempDir(std::env::temp_dir().join(format!("berth-store-bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0)?;
    let skip_etcd = std::env::var("BERTH_SKIP_ETCD").as_deref() == Ok("1");
    let mut rows = Vec::new();

    eprintln!("berth sqlite …");
    let sqlite = Arc::new(SqliteStore::open_with(
        &dir.0.join("berth.db"),
        SqliteOptions {
            compaction_interval: None,
            ..SqliteOptions::default()
        },
    )?);
    let mut row = Row {
        name: "berth sqlite (group commit)",
        ..Row::default()
    };
    store_puts(sqlite.clone(), &p, &mut row).await?;
    let before = sqlite.stats();
    row.fanout = Some(fanout(sqlite.clone(), &p).await?);
    let after = sqlite.stats();
    row.note = format!(
        "{:.1} writes/commit at 16-way",
        (after.writes - before.writes) as f64 / (after.commits - before.commits).max(1) as f64
    );
    rows.push(row);
    drop(sqlite);

    let etcd = if skip_etcd {
        None
    } else {
        Some(EtcdProcess::start().await?)
    };
    if let Some(etcd) = &etcd {
        eprintln!("berth etcd …");
        let store = Arc::new(EtcdStore::connect(&etcd.endpoints(), Some("/berth")).await?);
        let mut row = Row {
            name: "berth etcd (txn)",
            ..Row::default()
        };
        store_puts(store.clone(), &p, &mut row).await?;
        row.fanout = Some(fanout(store, &p).await?);
        rows.push(row);

        eprintln!("raw etcd …");
        let client = etcd_client::Client::connect(etcd.endpoints(), None).await?;
        let mut row = Row {
            name: "raw etcd put",
            note: "no txn, no checks".into(),
            ..Row::default()
        };
        for (writers, n, slot) in [(1, p.seq, &mut row.seq), (WRITERS, p.par, &mut row.par)] {
            let kv = client.kv_client();
            let v = p.value.clone();
            *slot = Some(
                put_loop(n, writers, move |w, i| {
                    let (mut kv, v) = (kv.clone(), v.clone());
                    async move {
                        Ok(kv
                            .put(format!("/raw/{writers}/{w}/{i}"), v.to_vec(), None)
                            .await
                            .map(drop)?)
                    }
                })
                .await?,
            );
        }
        rows.push(row);
    }

    eprintln!("raw sqlite …");
    let path = dir.0.join("raw.sqlite");
    let mut row = Row {
        name: "raw sqlite (1 txn/put)",
        note: "WAL, synchronous=FULL".into(),
        ..Row::default()
    };
    let (pp, path2) = (
        Params {
            value: p.value.clone(),
            ..p
        },
        path.clone(),
    );
    let (seq, par) = tokio::task::spawn_blocking(move || -> Res<(f64, f64)> {
        Ok((
            raw_sqlite(&path2, &pp, 1, pp.seq)?,
            raw_sqlite(&path2, &pp, WRITERS, pp.par.min(2000))?,
        ))
    })
    .await??;
    (row.seq, row.par) = (Some(seq), Some(par));
    rows.push(row);

    eprintln!("raw redb …");
    let db = Arc::new(redb::Database::create(dir.0.join("raw.redb"))?);
    let mut row = Row {
        name: "raw redb (1 txn/put)",
        note: "Durability::Immediate".into(),
        ..Row::default()
    };
    let params = Params {
        value: p.value.clone(),
        seq: p.seq,
        par: p.par,
        watchers: 0,
        events: 0,
    };
    let (seq, par) = tokio::task::spawn_blocking(move || -> Res<(f64, f64)> {
        Ok((
            raw_redb(&db, &params, 1, params.seq)?,
            raw_redb(&db, &params, WRITERS, params.par.min(2000))?,
        ))
    })
    .await??;
    (row.seq, row.par) = (Some(seq), Some(par));
    rows.push(row);
    drop(etcd);

    println!();
    println!(
        "puts: {} sequential, {} by {WRITERS} writers (raw sqlite/redb 16-way: {}); value {} B; \
         fan-out: {} watchers x {} events written by {WRITERS} writers",
        p.seq,
        p.par,
        p.par.min(2000),
        p.value.len(),
        p.watchers,
        p.events / WRITERS * WRITERS
    );
    println!();
    println!(
        "| backend | seq puts/s | 16-way puts/s | fan-out all received | after last ack | note |"
    );
    println!("|---|---|---|---|---|---|");
    let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for r in rows {
        let (fan, tail) = r
            .fanout
            .map_or(("-".to_string(), "-".to_string()), |(total, tail)| {
                (
                    format!("{:.3} s", total.as_secs_f64()),
                    format!("{:.3} s", tail.as_secs_f64()),
                )
            });
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.name,
            num(r.seq),
            num(r.par),
            fan,
            tail,
            r.note
        );
    }
    Ok(())
}
