//! The scheduler against a real Berth API server started in-process.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use berth_scheduler::SchedulerConfig;
use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements,
    ServiceAccount, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

struct Server {
    client: kube::Client,
    _api: berth_apiserver::LocalApiServer,
}

async fn start_server() -> Result<Server> {
    let api = berth_apiserver::LocalApiServer::start("scheduler").await?;
    let client =
        kube::Client::try_from(kube::Config::new(format!("http://{}", api.http).parse()?))?;
    // No controllers run here: make the `default` ServiceAccount the
    // ServiceAccount admission plugin looks for, as its controller would.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("default".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts.create(&PostParams::default(), &sa).await?;
    Ok(Server { client, _api: api })
}

fn qmap(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

async fn create_node(
    client: &kube::Client,
    name: &str,
    labels: &[(&str, &str)],
    taints: Vec<Taint>,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: (!taints.is_empty()).then_some(taints.clone()),
            ..Default::default()
        }),
        status: None,
    };
    nodes.create(&PostParams::default(), &node).await?;
    let res = qmap(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "110")]);
    let status = NodeStatus {
        capacity: Some(res.clone()),
        allocatable: Some(res),
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await?;
    // The node is Ready: lift the `not-ready` taint TaintNodesByCondition put on
    // it at creation, as the node lifecycle controller would.
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": { "taints": taints } })),
        )
        .await?;
    Ok(())
}

fn pod(name: &str, cpu: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("busybox".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(qmap(&[("cpu", cpu)])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn wait_bound(client: &kube::Client, name: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for _ in 0..100 {
        let p = pods.get(name).await?;
        if let Some(n) = p.spec.and_then(|s| s.node_name) {
            return Ok(n);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("pod {name} was not bound")
}

async fn wait_condition_message(client: &kube::Client, name: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for _ in 0..100 {
        let p = pods.get(name).await?;
        let cond = p
            .status
            .and_then(|s| s.conditions)
            .and_then(|cs| cs.into_iter().find(|c| c.type_ == "PodScheduled"));
        if let Some(c) = cond {
            assert_eq!(c.status, "False");
            assert_eq!(c.reason.as_deref(), Some("Unschedulable"));
            return Ok(c.message.unwrap_or_default());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("pod {name} got no PodScheduled condition")
}

async fn three_nodes(client: &kube::Client) -> Result<()> {
    for (i, n) in ["node-a", "node-b", "node-c"].into_iter().enumerate() {
        let zone = format!("z{i}");
        create_node(client, n, &[("zone", zone.as_str())], vec![]).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spreads_reports_and_honours_constraints() -> Result<()> {
    let s = start_server().await?;
    three_nodes(&s.client).await?;
    tokio::spawn(berth_scheduler::run(
        s.client.clone(),
        SchedulerConfig::default(),
    ));
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), "default");

    let mut placed = Vec::new();
    for i in 0..3 {
        let name = format!("web-{i}");
        pods.create(&PostParams::default(), &pod(&name, "500m"))
            .await?;
        placed.push(wait_bound(&s.client, &name).await?);
    }
    placed.sort();
    assert_eq!(
        placed,
        vec!["node-a", "node-b", "node-c"],
        "LeastAllocated spreads"
    );
    let why = pods
        .get("web-0")
        .await?
        .metadata
        .annotations
        .unwrap_or_default();
    assert!(
        why.contains_key(berth_scheduler::scheduler::CANDIDATES_ANNOTATION),
        "{why:?}"
    );

    pods.create(&PostParams::default(), &pod("huge", "8"))
        .await?;
    assert_eq!(
        wait_condition_message(&s.client, "huge").await?,
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
    );
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(s.client.clone(), "default");
    let mut found = false;
    for _ in 0..50 {
        let list = events.list(&Default::default()).await?;
        found = list.items.iter().any(|e| {
            e.involved_object.name.as_deref() == Some("huge")
                && e.reason.as_deref() == Some("FailedScheduling")
                && e.type_.as_deref() == Some("Warning")
        }) && list.items.iter().any(|e| {
            e.reason.as_deref() == Some("Scheduled")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("Successfully assigned default/web-"))
        });
        if found {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(found, "FailedScheduling and Scheduled events");

    // A tainted node is avoided unless tolerated.
    let taint = Taint {
        key: "dedicated".into(),
        value: Some("gpu".into()),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    create_node(&s.client, "node-t", &[("zone", "t")], vec![taint]).await?;
    let mut p = pod("sel-t", "100m");
    if let Some(sp) = p.spec.as_mut() {
        sp.node_selector = Some([("zone".to_string(), "t".to_string())].into());
    }
    pods.create(&PostParams::default(), &p).await?;
    let msg = wait_condition_message(&s.client, "sel-t").await?;
    assert!(msg.starts_with("0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 3 node(s) didn't match Pod's node affinity/selector."), "{msg}");
    let mut p = pod("tol-t", "100m");
    if let Some(sp) = p.spec.as_mut() {
        sp.node_selector = Some([("zone".to_string(), "t".to_string())].into());
        sp.tolerations = Some(vec![Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }]);
    }
    pods.create(&PostParams::default(), &p).await?;
    assert_eq!(wait_bound(&s.client, "tol-t").await?, "node-t");
    // The nodeSelector is honoured for untainted nodes too.
    let mut p = pod("sel-b", "100m");
    if let Some(sp) = p.spec.as_mut() {
        sp.node_selector = Some([("zone".to_string(), "z1".to_string())].into());
    }
    pods.create(&PostParams::default(), &p).await?;
    assert_eq!(wait_bound(&s.client, "sel-b").await?, "node-b");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn most_allocated_packs() -> Result<()> {
    let s = start_server().await?;
    three_nodes(&s.client).await?;
    let config = SchedulerConfig::from_yaml(
        r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    plugins:
      score:
        disabled:
          - name: NodeResourcesBalancedAllocation
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
"#,
    )?;
    tokio::spawn(berth_scheduler::run(s.client.clone(), config));
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), "default");
    let mut placed = Vec::new();
    for i in 0..3 {
        let name = format!("pack-{i}");
        pods.create(&PostParams::default(), &pod(&name, "500m"))
            .await?;
        placed.push(wait_bound(&s.client, &name).await?);
    }
    assert!(placed.iter().all(|n| n == &placed[0]), "packed: {placed:?}");
    Ok(())
}

/// VolumeBinding end to end against the API: a WaitForFirstConsumer claim
/// takes the node of the one static volume that fits it; PreBind writes the
/// volume's claimRef and waits until the claim is bound (the test plays the
/// PV controller), then the pod is bound. A claim no volume fits says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_wait_for_first_consumer_claims() -> Result<()> {
    use k8s_openapi::api::core::v1::{
        PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Volume,
    };
    use k8s_openapi::api::storage::v1::StorageClass;
    use serde_json::json;

    let s = start_server().await?;
    three_nodes(&s.client).await?;
    let classes: Api<StorageClass> = Api::all(s.client.clone());
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "local"},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }))?,
        )
        .await?;
    let volumes: Api<PersistentVolume> = Api::all(s.client.clone());
    volumes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "pv-z1"},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "local",
                    "local": {"path": "/mnt/disk"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{
                        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]
                    }]}},
                },
            }))?,
        )
        .await?;
    // No PV controller runs here: make the volume Available as it would.
    volumes
        .patch_status(
            "pv-z1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Available"}})),
        )
        .await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(s.client.clone(), "default");
    for name in ["data", "nothing-fits"] {
        claims
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "local",
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }))?,
            )
            .await?;
    }
    let config = SchedulerConfig::from_yaml(
        r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    pluginConfig:
      - name: VolumeBinding
        args:
          bindTimeoutSeconds: 30
"#,
    )?;
    tokio::spawn(berth_scheduler::run(s.client.clone(), config));
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), "default");
    let with_claim = |name: &str, claim: &str| {
        let mut p = pod(name, "100m");
        if let Some(sp) = p.spec.as_mut() {
            sp.volumes = Some(vec![Volume {
                name: "data".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }]);
        }
        p
    };
    pods.create(&PostParams::default(), &with_claim("db", "data"))
        .await?;

    // PreBind's write: the volume names the claim, bound by the controller.
    let claim_uid = claims.get("data").await?.metadata.uid;
    let mut written = None;
    for _ in 0..100 {
        let pv = volumes.get("pv-z1").await?;
        if pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .is_some()
        {
            written = Some(pv);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Some(pv) = written else {
        bail!(
            "the scheduler did not pre-bind the volume: {:?}\n{}\n{}",
            pods.get("db").await?.status,
            serde_json::to_string(&volumes.get("pv-z1").await?)?,
            serde_json::to_string(&claims.get("data").await?)?
        );
    };
    let r = pv.spec.and_then(|s| s.claim_ref).unwrap_or_default();
    assert_eq!(
        (r.name.as_deref(), r.namespace.as_deref(), r.uid),
        (Some("data"), Some("default"), claim_uid)
    );
    assert_eq!(
        pv.metadata
            .annotations
            .unwrap_or_default()
            .get("pv.kubernetes.io/bound-by-controller")
            .map(String::as_str),
        Some("yes")
    );
    // Not bound while the claim is not.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        pods.get("db")
            .await?
            .spec
            .and_then(|s| s.node_name)
            .is_none()
    );

    // The PV controller's part.
    claims
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {"volumeName": "pv-z1"},
            })),
        )
        .await?;
    claims
        .patch_status(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await?;
    assert_eq!(wait_bound(&s.client, "db").await?, "node-b");

    pods.create(
        &PostParams::default(),
        &with_claim("lonely", "nothing-fits"),
    )
    .await?;
    assert_eq!(
        wait_condition_message(&s.client, "lonely").await?,
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
    );
    Ok(())
}
