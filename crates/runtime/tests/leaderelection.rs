//! Leader election against a real Berth API server started in-process, with
//! short timings: one holder at a time, take-over after expiry, release, and
//! the component stopped when leadership is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Result;
use berth_runtime::leaderelection::{self, Config, LeaderElector};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};

async fn client(api: &berth_apiserver::LocalApiServer) -> Result<kube::Client> {
    Ok(kube::Client::try_from(kube::Config::new(
        format!("http://{}", api.http).parse()?,
    ))?)
}

fn short(identity: &str) -> Config {
    let mut c = Config::new("test-component", identity);
    c.lease_duration = Duration::from_secs(2);
    c.renew_deadline = Duration::from_millis(1500);
    c.retry_period = Duration::from_millis(200);
    c
}

async fn lease(client: &kube::Client) -> Result<Lease> {
    let api: Api<Lease> = Api::namespaced(client.clone(), leaderelection::NAMESPACE);
    Ok(api.get("test-component").await?)
}

#[tokio::test]
async fn one_holder_then_take_over_after_expiry_and_release() -> Result<()> {
    let api = berth_apiserver::LocalApiServer::start("leader").await?;
    let client = client(&api).await?;
    let mut a = LeaderElector::new(client.clone(), short("host_a"));
    let mut b = LeaderElector::new(client.clone(), short("host_b"));
    assert!(a.try_acquire_or_renew().await?);
    assert!(!b.try_acquire_or_renew().await?);
    let l = lease(&client).await?.spec.unwrap();
    assert_eq!(l.holder_identity.as_deref(), Some("host_a"));
    assert_eq!(l.lease_duration_seconds, Some(2));
    assert_eq!(l.lease_transitions, Some(0));
    let acquired = l.acquire_time.clone();
    // A renews: acquireTime kept, renewTime moves.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(a.try_acquire_or_renew().await?);
    let l2 = lease(&client).await?.spec.unwrap();
    assert_eq!(l2.acquire_time, acquired);
    assert_ne!(l2.renew_time, l.renew_time);
    // A stops renewing: B must wait out the duration as B observed it.
    assert!(!b.try_acquire_or_renew().await?);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert!(b.try_acquire_or_renew().await?);
    let l3 = lease(&client).await?.spec.unwrap();
    assert_eq!(l3.holder_identity.as_deref(), Some("host_b"));
    assert_eq!(l3.lease_transitions, Some(1));
    // B releases: A takes over at once.
    b.release().await;
    assert!(a.try_acquire_or_renew().await?);
    assert_eq!(
        lease(&client).await?.spec.unwrap().lease_transitions,
        Some(2)
    );
    Ok(())
}

#[tokio::test]
async fn a_component_runs_only_while_leading_and_stops_on_loss() -> Result<()> {
    let api = berth_apiserver::LocalApiServer::start("leader-run").await?;
    let client = client(&api).await?;
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let runner = tokio::spawn(leaderelection::run(
        client.clone(),
        short("host_a"),
        move || {
            let t = t.clone();
            async move {
                // A sub-task, as components spawn informers: it must stop too.
                tokio::spawn(async move {
                    loop {
                        t.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                });
                std::future::pending::<()>().await
            }
        },
    ));
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(ticks.load(Ordering::SeqCst) > 0, "component never started");
    // Another holder steals the Lease (as after a partition): the component stops.
    let leases: Api<Lease> = Api::namespaced(client.clone(), leaderelection::NAMESPACE);
    let steal =
        serde_json::json!({"spec": {"holderIdentity": "host_b", "leaseDurationSeconds": 30}});
    leases
        .patch(
            "test-component",
            &PatchParams::default(),
            &Patch::Merge(&steal),
        )
        .await?;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let stopped_at = ticks.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        ticks.load(Ordering::SeqCst),
        stopped_at,
        "component still running after losing the lease"
    );
    assert_eq!(
        lease(&client)
            .await?
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("host_b")
    );
    runner.abort();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_leading_runner_stops_its_component_without_panicking() -> Result<()> {
    let api = berth_apiserver::LocalApiServer::start("leader-drop").await?;
    let client = client(&api).await?;
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let runner = tokio::spawn(leaderelection::run(client, short("host_a"), move || {
        let t = t.clone();
        async move {
            loop {
                t.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(ticks.load(Ordering::SeqCst) > 0, "component never started");
    // As at process shutdown: the task holding the term's runtime is dropped.
    runner.abort();
    let err = runner.await.expect_err("aborted");
    assert!(err.is_cancelled(), "dropping the runner panicked: {err}");
    let stopped_at = ticks.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ticks.load(Ordering::SeqCst), stopped_at);
    Ok(())
}

#[tokio::test]
async fn stopping_releases_the_lease_for_an_immediate_successor() -> Result<()> {
    let api = berth_apiserver::LocalApiServer::start("leader-stop").await?;
    let client = client(&api).await?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut cfg = short("host_a");
    // A long lease: a successor could only take it at once if it was released.
    cfg.lease_duration = Duration::from_secs(60);
    let runner = tokio::spawn(leaderelection::run_until(
        client.clone(),
        cfg,
        || async { std::future::pending::<()>().await },
        async {
            let _ = stop_rx.await;
        },
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        lease(&client)
            .await?
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("host_a")
    );
    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(5), runner).await??;
    let mut b = LeaderElector::new(client.clone(), short("host_b"));
    assert!(
        b.try_acquire_or_renew().await?,
        "the lease was not released"
    );
    Ok(())
}
