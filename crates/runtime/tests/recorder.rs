//! The event recorder against a real Berth API server started in-process.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, ensure};
use berth_runtime::events::{EventSource, EventType, Recorder, RecorderOptions};
use berth_runtime::{Clock, FakeClock};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

struct Server {
    client: kube::Client,
    _api: berth_apiserver::LocalApiServer,
}

async fn start_server() -> Result<Server> {
    let api = berth_apiserver::LocalApiServer::start("runtime").await?;
    let client =
        kube::Client::try_from(kube::Config::new(format!("http://{}", api.http).parse()?))?;
    Ok(Server { client, _api: api })
}

async fn config_map(client: &kube::Client, name: &str) -> Result<ConfigMap> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Ok(cms.create(&PostParams::default(), &cm).await?)
}

/// Events in `ns` about the object named `name`, by event name.
async fn events_about(client: &kube::Client, ns: &str, name: &str) -> Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let mut list: Vec<Event> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .collect();
    list.sort_by_key(|e| e.metadata.name.clone());
    Ok(list)
}

fn recorder(client: &kube::Client, clock: &Arc<FakeClock>) -> Recorder {
    Recorder::with_options(
        client.clone(),
        EventSource::new("berth-test-controller", "node-a"),
        RecorderOptions {
            clock: clock.clone(),
            retry_interval: Duration::from_millis(50),
            ..Default::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_events_are_counted_on_the_server() -> Result<()> {
    let s = start_server().await?;
    // Whole seconds, so the server's second-precision timestamps compare exactly.
    let start = Timestamp::from_second(Timestamp::now().as_second())?;
    let clock = Arc::new(FakeClock::new(start));
    let r = recorder(&s.client, &clock);
    let cm = config_map(&s.client, "app-config").await?;

    r.event(&cm, EventType::Normal, "Synced", "config synced to 3 nodes");
    r.flush().await;
    let evs = events_about(&s.client, "default", "app-config").await?;
    ensure!(evs.len() == 1, "expected one Event, got {evs:#?}");
    let first = &evs[0];
    let first_name = first.metadata.name.clone().unwrap_or_default();
    assert!(first_name.starts_with("app-config."), "{first_name}");
    assert_eq!(first.count, Some(1));
    // What `kubectl get events` / `describe` show.
    assert_eq!(first.type_.as_deref(), Some("Normal"));
    assert_eq!(first.reason.as_deref(), Some("Synced"));
    assert_eq!(first.message.as_deref(), Some("config synced to 3 nodes"));
    let source = first.source.clone().unwrap_or_default();
    assert_eq!(source.component.as_deref(), Some("berth-test-controller"));
    assert_eq!(source.host.as_deref(), Some("node-a"));
    assert_eq!(
        first.reporting_component.as_deref(),
        Some("berth-test-controller")
    );
    assert_eq!(first.reporting_instance.as_deref(), Some("node-a"));
    assert_eq!(first.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(first.involved_object.uid, cm.metadata.uid);
    assert_eq!(first.first_timestamp.as_ref().map(|t| t.0), Some(start));
    assert_eq!(first.last_timestamp.as_ref().map(|t| t.0), Some(start));

    for _ in 0..3 {
        clock.step(Duration::from_secs(1));
        r.event(&cm, EventType::Normal, "Synced", "config synced to 3 nodes");
    }
    r.flush().await;
    let evs = events_about(&s.client, "default", "app-config").await?;
    ensure!(evs.len() == 1, "repeats must not create Events: {evs:#?}");
    let ev = &evs[0];
    assert_eq!(ev.metadata.name.as_deref(), Some(first_name.as_str()));
    assert_eq!(ev.count, Some(4));
    assert_eq!(ev.first_timestamp.as_ref().map(|t| t.0), Some(start));
    let last = ev.last_timestamp.as_ref().map(|t| t.0);
    assert_eq!(last, Some(clock.now()));
    assert!(last > Some(start));

    // The Event is deleted (as TTL expiry does): the next repeat re-creates it.
    let events: Api<Event> = Api::namespaced(s.client.clone(), "default");
    events.delete(&first_name, &DeleteParams::default()).await?;
    clock.step(Duration::from_secs(1));
    r.event(&cm, EventType::Normal, "Synced", "config synced to 3 nodes");
    r.flush().await;
    let evs = events_about(&s.client, "default", "app-config").await?;
    ensure!(evs.len() == 1, "expected the Event re-created: {evs:#?}");
    assert_eq!(evs[0].metadata.name.as_deref(), Some(first_name.as_str()));
    assert_eq!(evs[0].count, Some(5));
    assert_eq!(r.dropped_events(), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn similar_events_are_aggregated_on_the_server() -> Result<()> {
    let s = start_server().await?;
    let clock = Arc::new(FakeClock::new(Timestamp::now()));
    let r = recorder(&s.client, &clock);
    let cm = config_map(&s.client, "flaky").await?;

    for i in 0..12 {
        r.eventf(
            &cm,
            EventType::Warning,
            "SyncFailed",
            format_args!("node-{i} refused the update"),
        );
        clock.step(Duration::from_secs(1));
    }
    r.flush().await;

    let evs = events_about(&s.client, "default", "flaky").await?;
    let (aggregated, single): (Vec<&Event>, Vec<&Event>) = evs.iter().partition(|e| {
        e.message
            .as_deref()
            .unwrap_or_default()
            .starts_with("(combined from similar events): ")
    });
    // Nine distinct messages pass; the tenth and later fold into one Event.
    ensure!(single.len() == 9, "individual events: {single:#?}");
    ensure!(aggregated.len() == 1, "aggregated events: {aggregated:#?}");
    let agg = aggregated[0];
    assert_eq!(agg.count, Some(3));
    assert_eq!(
        agg.message.as_deref(),
        Some("(combined from similar events): node-11 refused the update")
    );
    assert_eq!(agg.type_.as_deref(), Some("Warning"));
    assert_eq!(agg.reason.as_deref(), Some("SyncFailed"));
    assert_eq!(
        agg.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("berth-test-controller")
    );
    assert!(single.iter().all(|e| e.count == Some(1)));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_objects_report_into_default() -> Result<()> {
    let s = start_server().await?;
    let r = Recorder::new(s.client.clone(), EventSource::new("berth-test", ""));
    let namespaces: Api<Namespace> = Api::all(s.client.clone());
    let ns = namespaces.get("kube-public").await?;
    r.event(&ns, EventType::Normal, "Checked", "namespace looks fine");
    r.flush().await;
    let evs = events_about(&s.client, "default", "kube-public").await?;
    ensure!(evs.len() == 1, "{evs:#?}");
    assert_eq!(evs[0].involved_object.kind.as_deref(), Some("Namespace"));
    assert_eq!(evs[0].involved_object.namespace, None);
    assert_eq!(evs[0].reporting_instance, None);
    Ok(())
}
