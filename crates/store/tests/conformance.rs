//! The conformance suite against both backends: SQLite in a temp dir, and a real etcd
//! that this test starts (`/usr/bin/etcd`, Debian's etcd-server). Without etcd the
//! etcd test fails, unless `BERTH_SKIP_ETCD=1`.

mod common;

use std::sync::Arc;

use berth_store::conformance::{self, StoreRef};
use berth_store::etcd_process::EtcdProcess;
use berth_store::{EtcdStore, SqliteOptions, SqliteStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_conformance() {
    let dir = common::TempDir::new("sqlite-conformance");
    let base = dir.path().to_path_buf();
    conformance::run_all(|name| {
        let path = base.join(name).join("store.db");
        async move {
            let options = SqliteOptions {
                compaction_interval: None,
                // A tiny broadcast buffer: watchers lag all the time, so every watch case
                // also exercises catching up from history.
                watch_buffer: 4,
                ..SqliteOptions::default()
            };
            Arc::new(SqliteStore::open_with(&path, options).expect("open sqlite store")) as StoreRef
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_conformance_default_options() {
    let dir = common::TempDir::new("sqlite-conformance-default");
    let base = dir.path().to_path_buf();
    conformance::run_all(|name| {
        let path = base.join(name).join("store.db");
        async move { Arc::new(SqliteStore::open(&path).expect("open sqlite store")) as StoreRef }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_conformance() {
    if std::env::var("BERTH_SKIP_ETCD").as_deref() == Ok("1") {
        eprintln!("BERTH_SKIP_ETCD=1: etcd conformance skipped");
        return;
    }
    assert!(
        EtcdProcess::binary().is_some(),
        "etcd conformance needs an etcd binary: install Debian's etcd-server (/usr/bin/etcd), \
         set BERTH_ETCD_BIN, or set BERTH_SKIP_ETCD=1 to skip"
    );
    let etcd = EtcdProcess::start().await.expect("start etcd");
    let endpoints = etcd.endpoints();
    conformance::run_all(|name| {
        let endpoints = endpoints.clone();
        async move {
            let prefix = format!("/conformance/{name}");
            Arc::new(
                EtcdStore::connect(&endpoints, Some(&prefix))
                    .await
                    .expect("connect to etcd"),
            ) as StoreRef
        }
    })
    .await;
    drop(etcd);
}
