//! A kube-rs `#[derive(CustomResource)]` type against a real `berth server`: its CRD
//! is applied, objects are created, listed, watched and server-side applied, and a
//! kube-runtime `Controller` reconciles them, writing status through the status
//! subresource — what an operator written with kube-rs does.

mod common;

use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::wait::{await_condition, conditions};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A made-up operator's resource: nested types, an enum, an optional list.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "berth.example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wg",
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
pub struct WidgetSpec {
    size: i32,
    color: Color,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    parts: Vec<Part>,
}

#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema, PartialEq)]
pub enum Color {
    Red,
    Blue,
}

#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
pub struct Part {
    name: String,
    #[serde(default)]
    count: Option<u32>,
    details: Option<Details>,
}

#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
pub struct Details {
    vendor: String,
    tags: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct WidgetStatus {
    phase: String,
    observed_size: i32,
}

async fn client(s: &common::Server) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kc = Kubeconfig::read_from(&s.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(w: Arc<Widget>, api: Arc<Api<Widget>>) -> Result<Action, ReconcileError> {
    let status = json!({"status": {"phase": "Ready", "observed_size": w.spec.size}});
    api.patch_status(
        &w.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await?;
    Ok(Action::await_change())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_derived_crd_and_controller() {
    let s = tokio::task::spawn_blocking(|| common::Server::start("crd-kube-rs"))
        .await
        .unwrap();
    let client = client(&s).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Widget::crd();
    let name = crd.metadata.name.clone().unwrap();
    crds.patch(
        &name,
        &PatchParams::apply("crd-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        await_condition(crds.clone(), &name, conditions::is_crd_established()),
    )
    .await
    .expect("CRD established in time")
    .unwrap();

    let widgets: Api<Widget> = Api::namespaced(client.clone(), "default");
    let list = widgets.list(&ListParams::default()).await.unwrap();
    assert!(list.items.is_empty());
    let rv = list.metadata.resource_version.clone().unwrap();
    let mut events = widgets
        .watch(&WatchParams::default().timeout(20), &rv)
        .await
        .unwrap()
        .boxed();

    // Create, then server-side apply a change from another manager.
    let w = Widget::new(
        "w1",
        WidgetSpec {
            size: 3,
            color: Color::Red,
            parts: vec![Part {
                name: "bolt".into(),
                count: Some(4),
                details: Some(Details {
                    vendor: "acme".into(),
                    tags: Some([("grade".to_string(), "a".to_string())].into()),
                }),
            }],
        },
    );
    let created = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(
        created.spec.parts[0].details.as_ref().unwrap().vendor,
        "acme"
    );
    assert_eq!(created.metadata.generation, Some(1));
    let applied = widgets
        .patch(
            "w1",
            &PatchParams::apply("sizer"),
            &Patch::Apply(json!({
                "apiVersion": "berth.example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w1"},
                "spec": {"size": 5, "color": "Red"},
            })),
        )
        .await;
    // `size` is owned by the creating manager: a conflict, as upstream.
    let err = applied.expect_err("conflict");
    assert!(format!("{err}").contains("conflict"), "{err}");
    let applied = widgets
        .patch(
            "w1",
            &PatchParams::apply("sizer").force(),
            &Patch::Apply(json!({
                "apiVersion": "berth.example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w1"},
                "spec": {"size": 5, "color": "Red"},
            })),
        )
        .await
        .unwrap();
    assert_eq!(applied.spec.size, 5);
    assert_eq!(applied.metadata.generation, Some(2));
    let managers: Vec<String> = applied
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(managers.contains(&"sizer".to_string()), "{managers:?}");

    // The schema refuses what the Rust type would never send.
    let bad = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "Green"}})),
        )
        .await
        .expect_err("enum enforced");
    assert!(
        format!("{bad}").contains("Unsupported value: \"Green\""),
        "{bad}"
    );

    let mut seen = Vec::new();
    while let Some(ev) = events.try_next().await.unwrap() {
        match ev {
            WatchEvent::Added(o) => seen.push(format!("ADDED {}", o.spec.size)),
            WatchEvent::Modified(o) => {
                seen.push(format!("MODIFIED {}", o.spec.size));
                break;
            }
            _ => {}
        }
    }
    assert_eq!(seen, ["ADDED 3", "MODIFIED 5"]);

    // A kube-runtime Controller writes status through /status.
    for i in 2..=4 {
        let w = Widget::new(
            &format!("w{i}"),
            WidgetSpec {
                size: i,
                color: Color::Blue,
                parts: vec![],
            },
        );
        widgets.create(&PostParams::default(), &w).await.unwrap();
    }
    let api = Arc::new(widgets.clone());
    let controller = tokio::spawn(
        Controller::new(widgets.clone(), Default::default())
            .run(
                reconcile,
                |_, _: &ReconcileError, _| Action::requeue(Duration::from_secs(1)),
                api,
            )
            .for_each(|_| async {}),
    );
    let done = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let list = widgets.list(&ListParams::default()).await.unwrap();
            let ready = list
                .items
                .iter()
                .filter(|w| {
                    w.status
                        .as_ref()
                        .is_some_and(|s| s.phase == "Ready" && s.observed_size == w.spec.size)
                })
                .count();
            if ready == 4 {
                return list;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("every Widget reconciled");
    controller.abort();
    // Status writes moved neither spec nor generation.
    let w1 = done.items.iter().find(|w| w.name_any() == "w1").unwrap();
    assert_eq!(w1.metadata.generation, Some(2));

    // kubectl sees the printer columns kube-rs declared.
    let table = tokio::task::block_in_place(|| s.k(&["get", "wg"]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SIZE", "PHASE"]);
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["w1", "5", "Ready"]),
        "{table}"
    );
}
