//! Every write the SQLite store acknowledged survives `kill -9` of the process.
//!
//! The test re-executes its own binary running the ignored `durability_child` test,
//! which writes keys from several tasks and prints `ACK <key> <revision>` after each
//! acknowledged write; the parent kills it mid-stream, reopens the database and
//! checks every acknowledged key.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_store::{SqliteOptions, SqliteStore, Store};
use bytes::Bytes;

const CHILD_ENV: &str = "BERTH_STORE_DURABILITY_DB";

#[test]
fn acknowledged_writes_survive_kill_9() {
    let dir = common::TempDir::new("durability");
    let db = dir.path().join("store.db");
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "durability_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &db)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut acked = Vec::new();
    let started = Instant::now();
    // Kill after a good number of acknowledgements, while writes are in flight.
    while acked.len() < 400 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "child too slow: {} acks",
            acked.len()
        );
        let line = lines.next().expect("child ended early").unwrap();
        if let Some(rest) = line.strip_prefix("ACK ") {
            acked.push(parse(rest));
        }
    }
    child.0.kill().unwrap(); // SIGKILL
    child.0.wait().unwrap();
    // Acknowledgements already in the pipe count too.
    for line in lines {
        if let Some(rest) = line.unwrap().strip_prefix("ACK ") {
            acked.push(parse(rest));
        }
    }

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let s = SqliteStore::open_with(
            &db,
            SqliteOptions {
                compaction_interval: None,
                ..Default::default()
            },
        )
        .unwrap();
        for (key, rev) in &acked {
            let kv = s
                .get(key)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("acknowledged {key} lost"));
            assert_eq!(
                (kv.mod_revision, kv.value),
                (*rev, Bytes::from(key.clone()))
            );
        }
        let max = acked.iter().map(|(_, r)| *r).max().unwrap();
        assert!(s.current_revision().await.unwrap() >= max);
        // The reopened store takes writes again.
        let next = s
            .create("/after-crash", Bytes::from_static(b"x"))
            .await
            .unwrap();
        assert!(next.mod_revision > max);
    });
    eprintln!("{} acknowledged writes all survived kill -9", acked.len());
}

/// Never leave the writer running if the test fails early.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn parse(rest: &str) -> (String, i64) {
    let (key, rev) = rest.split_once(' ').unwrap();
    (key.to_owned(), rev.parse().unwrap())
}

/// The writer process (run only by the test above).
#[test]
#[ignore = "child process of acknowledged_writes_survive_kill_9"]
fn durability_child() {
    let Some(db) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let s = SqliteStore::open(std::path::Path::new(&db)).unwrap();
        let tasks = (0..8).map(|t| {
            let s = s.clone();
            tokio::spawn(async move {
                for i in 0.. {
                    let key = format!("/d/{t}/{i}");
                    let kv = s.create(&key, Bytes::from(key.clone())).await.unwrap();
                    // println! locks stdout per line: lines never interleave.
                    println!("ACK {key} {}", kv.mod_revision);
                }
            })
        });
        futures::future::join_all(tasks).await;
    });
}
