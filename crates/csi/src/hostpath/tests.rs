//! The driver's RPCs over the fake kernel: validation codes, idempotency, records,
//! cleanup after failures, and fault injection.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tonic::{Code, Request};

use super::controller::ControllerService;
use super::identity::IdentityService;
use super::node::NodeService;
use super::state::{GIB, MIB};
use super::*;
use crate::v1::controller_server::Controller;
use crate::v1::identity_server::Identity;
use crate::v1::node_server::Node;
use crate::v1::volume_capability::access_mode::Mode;
use crate::v1::volume_capability::{AccessMode, AccessType as Cap, BlockVolume, MountVolume};
use crate::v1::*;

struct Env {
    dir: PathBuf,
    driver: Arc<Driver>,
    fake: Arc<FakeMounter>,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Env {
    fn new(tweak: impl FnOnce(&mut Config)) -> Env {
        let dir = std::env::temp_dir().join(format!("berth-csi-unit-{}", uuid::Uuid::new_v4()));
        let mut config = Config::new("unix:///unused.sock", "node-a", dir.join("state"));
        config.capacity = 10 * GIB;
        config.max_volume_size = 4 * GIB;
        tweak(&mut config);
        let fake = Arc::new(FakeMounter::default());
        let driver = Driver::new(config, fake.clone()).expect("driver");
        Env { dir, driver, fake }
    }

    /// A second driver on the same state directory, as after a restart.
    fn restart(&self) -> Arc<Driver> {
        Driver::new(self.driver.config.clone(), self.fake.clone()).expect("driver")
    }

    fn controller(&self) -> ControllerService {
        ControllerService(self.driver.clone())
    }
    fn node(&self) -> NodeService {
        NodeService(self.driver.clone())
    }
    fn path(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }

    async fn create(&self, name: &str, bytes: i64) -> Result<crate::v1::Volume, tonic::Status> {
        self.controller()
            .create_volume(Request::new(create_req(name, bytes, mount_cap())))
            .await
            .map(|r| r.into_inner().volume.expect("volume"))
    }

    /// Create → attach → stage → publish, returning the volume id and paths.
    async fn up(&self, name: &str) -> (String, PathBuf, PathBuf) {
        let id = self.create(name, GIB).await.expect("create").volume_id;
        self.controller()
            .controller_publish_volume(Request::new(publish_req(&id, "node-a", false)))
            .await
            .expect("attach");
        let staging = self.path(&format!("stage-{name}"));
        let target = self.path(&format!("pods/{name}/mount"));
        self.node()
            .node_stage_volume(Request::new(stage_req(&id, &staging, mount_cap())))
            .await
            .expect("stage");
        self.node()
            .node_publish_volume(Request::new(node_publish_req(
                &id,
                &staging,
                &target,
                false,
                mount_cap(),
            )))
            .await
            .expect("publish");
        (id, staging, target)
    }
}

fn cap(access: Cap, mode: Mode) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(access),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    }
}
fn mount_cap() -> VolumeCapability {
    cap(Cap::Mount(MountVolume::default()), Mode::SingleNodeWriter)
}
fn block_cap() -> VolumeCapability {
    cap(Cap::Block(BlockVolume {}), Mode::SingleNodeWriter)
}

fn create_req(name: &str, bytes: i64, c: VolumeCapability) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![c],
        parameters: [("k".to_string(), "v".to_string())].into(),
        ..Default::default()
    }
}
fn publish_req(id: &str, node: &str, ro: bool) -> ControllerPublishVolumeRequest {
    ControllerPublishVolumeRequest {
        volume_id: id.into(),
        node_id: node.into(),
        volume_capability: Some(mount_cap()),
        readonly: ro,
        ..Default::default()
    }
}
fn stage_req(id: &str, staging: &Path, c: VolumeCapability) -> NodeStageVolumeRequest {
    NodeStageVolumeRequest {
        volume_id: id.into(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(c),
        ..Default::default()
    }
}
fn node_publish_req(
    id: &str,
    staging: &Path,
    target: &Path,
    ro: bool,
    c: VolumeCapability,
) -> NodePublishVolumeRequest {
    NodePublishVolumeRequest {
        volume_id: id.into(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(c),
        readonly: ro,
        ..Default::default()
    }
}

fn code<T>(r: Result<T, tonic::Status>) -> Code {
    match r {
        Ok(_) => Code::Ok,
        Err(s) => s.code(),
    }
}

#[tokio::test]
async fn identity_answers() {
    let env = Env::new(|_| {});
    let id = IdentityService(env.driver.clone());
    let info = id
        .get_plugin_info(Request::new(GetPluginInfoRequest {}))
        .await
        .expect("info")
        .into_inner();
    assert_eq!(info.name, DEFAULT_DRIVER_NAME);
    assert!(!info.vendor_version.is_empty());
    let caps = id
        .get_plugin_capabilities(Request::new(GetPluginCapabilitiesRequest {}))
        .await
        .expect("caps")
        .into_inner()
        .capabilities;
    assert_eq!(caps, identity::plugin_capabilities());
    assert_eq!(caps.len(), 3);
    let probe = id
        .probe(Request::new(ProbeRequest {}))
        .await
        .expect("probe");
    assert_eq!(probe.into_inner().ready, Some(true));
}

#[tokio::test]
async fn create_volume_validation_codes() {
    let env = Env::new(|_| {});
    let multi = cap(
        Cap::Mount(MountVolume::default()),
        Mode::MultiNodeMultiWriter,
    );
    let xfs = cap(
        Cap::Mount(MountVolume {
            fs_type: "xfs".into(),
            ..Default::default()
        }),
        Mode::SingleNodeWriter,
    );
    let no_mode = VolumeCapability {
        access_type: Some(Cap::Mount(MountVolume::default())),
        access_mode: None,
    };
    let mut both = create_req("both", GIB, mount_cap());
    both.volume_capabilities.push(block_cap());
    let mut no_caps = create_req("nocaps", GIB, mount_cap());
    no_caps.volume_capabilities.clear();
    let mut clone = create_req("clone", GIB, mount_cap());
    clone.volume_content_source = Some(VolumeContentSource::default());
    let mut elsewhere = create_req("elsewhere", GIB, mount_cap());
    elsewhere.accessibility_requirements = Some(TopologyRequirement {
        requisite: vec![Topology {
            segments: [(TOPOLOGY_KEY.to_string(), "node-b".to_string())].into(),
        }],
        preferred: vec![],
    });
    let mut here = create_req("here", GIB, mount_cap());
    here.accessibility_requirements = Some(TopologyRequirement {
        requisite: vec![env.driver.topology()],
        preferred: vec![],
    });
    let mut inverted = create_req("inverted", 2 * GIB, mount_cap());
    inverted.capacity_range = Some(CapacityRange {
        required_bytes: 2 * GIB,
        limit_bytes: GIB,
    });
    let cases: Vec<(&str, CreateVolumeRequest, Code)> = vec![
        (
            "no name",
            create_req("", GIB, mount_cap()),
            Code::InvalidArgument,
        ),
        ("no capabilities", no_caps, Code::InvalidArgument),
        (
            "multi-node mode",
            create_req("m", GIB, multi),
            Code::InvalidArgument,
        ),
        ("xfs", create_req("x", GIB, xfs), Code::InvalidArgument),
        (
            "no access mode",
            create_req("n", GIB, no_mode),
            Code::InvalidArgument,
        ),
        ("block and mount", both, Code::InvalidArgument),
        ("content source", clone, Code::InvalidArgument),
        (
            "over max volume size",
            create_req("big", 5 * GIB, mount_cap()),
            Code::OutOfRange,
        ),
        ("required over limit", inverted, Code::OutOfRange),
        (
            "another node's topology",
            elsewhere,
            Code::ResourceExhausted,
        ),
        ("this node's topology", here, Code::Ok),
    ];
    for (what, req, want) in cases {
        let got = code(env.controller().create_volume(Request::new(req)).await);
        assert_eq!(got, want, "{what}");
    }
    // Only the accepted one left an image behind.
    assert_eq!(env.driver.state.lock().await.volumes.len(), 1);
}

#[tokio::test]
async fn create_volume_is_idempotent_by_name_and_checks_capacity() {
    let env = Env::new(|_| {});
    let v = env.create("pvc-1", GIB + 1).await.expect("create");
    assert_eq!(v.capacity_bytes, GIB + MIB, "rounded up to whole MiB");
    assert_eq!(v.volume_context.get("k").map(String::as_str), Some("v"));
    assert_eq!(v.accessible_topology, vec![env.driver.topology()]);
    let image = env.driver.image_path(&v.volume_id);
    assert_eq!(env.fake.image_size(&image), Some((GIB + MIB) as u64));
    assert!(env.fake.is_formatted(&image));

    let again = env
        .create("pvc-1", GIB)
        .await
        .expect("same name, fitting size");
    assert_eq!(again.volume_id, v.volume_id);
    let e = env
        .create("pvc-1", 2 * GIB)
        .await
        .expect_err("different size");
    assert_eq!(e.code(), Code::AlreadyExists);
    assert!(e.message().contains("different size"), "{}", e.message());
    let e = env
        .controller()
        .create_volume(Request::new(create_req("pvc-1", GIB, block_cap())))
        .await
        .expect_err("different access type");
    assert_eq!(e.code(), Code::AlreadyExists);

    // 10Gi in all: 1Gi+1Mi used, so 4Gi fits twice and a third does not.
    env.create("pvc-2", 4 * GIB).await.expect("fits");
    env.create("pvc-3", 4 * GIB).await.expect("fits");
    let e = env
        .create("pvc-4", 4 * GIB)
        .await
        .expect_err("over capacity");
    assert_eq!(e.code(), Code::ResourceExhausted, "{}", e.message());

    let cap = env
        .controller()
        .get_capacity(Request::new(GetCapacityRequest::default()))
        .await
        .expect("capacity")
        .into_inner();
    assert_eq!(cap.available_capacity, 10 * GIB - (GIB + MIB) - 8 * GIB);
    assert_eq!(cap.maximum_volume_size, Some(cap.available_capacity));
    let other = env
        .controller()
        .get_capacity(Request::new(GetCapacityRequest {
            accessible_topology: Some(Topology {
                segments: [(TOPOLOGY_KEY.to_string(), "node-b".to_string())].into(),
            }),
            ..Default::default()
        }))
        .await
        .expect("capacity")
        .into_inner();
    assert_eq!(other.available_capacity, 0);
}

#[tokio::test]
async fn failed_format_leaves_no_image() {
    let env = Env::new(|_| {});
    env.fake.fail_next("mkfs");
    let e = env.create("pvc-1", GIB).await.expect_err("mkfs fails");
    assert_eq!(e.code(), Code::Internal);
    assert!(env.driver.state.lock().await.volumes.is_empty());
    assert!(
        env.fake.log().iter().any(|l| l.starts_with("remove ")),
        "{:?}",
        env.fake.log()
    );
    // The retry with the same name succeeds.
    env.create("pvc-1", GIB).await.expect("retry");
}

#[tokio::test]
async fn full_lifecycle_over_the_fake() {
    let env = Env::new(|_| {});
    let (id, staging, target) = env.up("pvc-1").await;
    let image = env.driver.image_path(&id);
    let mounts = env.fake.mounts();
    let device = env.fake.loops()[&image].clone();
    assert_eq!(mounts[&staging].source, device);
    assert_eq!(mounts[&target].source, staging);
    assert!(!mounts[&target].readonly);

    // Repeats succeed and change nothing.
    let log_len = env.fake.log().len();
    env.node()
        .node_stage_volume(Request::new(stage_req(&id, &staging, mount_cap())))
        .await
        .expect("stage again");
    env.node()
        .node_publish_volume(Request::new(node_publish_req(
            &id,
            &staging,
            &target,
            false,
            mount_cap(),
        )))
        .await
        .expect("publish again");
    assert_eq!(env.fake.log().len(), log_len, "{:?}", env.fake.log());
    // The same target read-only is incompatible.
    let e = env
        .node()
        .node_publish_volume(Request::new(node_publish_req(
            &id,
            &staging,
            &target,
            true,
            mount_cap(),
        )))
        .await
        .expect_err("ro mismatch");
    assert_eq!(e.code(), Code::AlreadyExists);

    let stats = env
        .node()
        .node_get_volume_stats(Request::new(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            ..Default::default()
        }))
        .await
        .expect("stats")
        .into_inner();
    assert_eq!(stats.usage.len(), 2);
    assert_eq!(stats.usage[0].total, GIB);
    assert_eq!(stats.usage[0].unit, volume_usage::Unit::Bytes as i32);
    assert_eq!(stats.usage[1].unit, volume_usage::Unit::Inodes as i32);

    // Online expansion: controller grows the image, node refreshes and resizes.
    let r = env
        .controller()
        .controller_expand_volume(Request::new(ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            ..Default::default()
        }))
        .await
        .expect("controller expand")
        .into_inner();
    assert_eq!(r.capacity_bytes, 2 * GIB);
    assert!(r.node_expansion_required);
    assert_eq!(env.fake.image_size(&image), Some(2 * GIB as u64));
    assert_eq!(env.fake.fs_size(&device), Some(GIB as u64));
    let r = env
        .node()
        .node_expand_volume(Request::new(NodeExpandVolumeRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            capacity_range: Some(CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            ..Default::default()
        }))
        .await
        .expect("node expand")
        .into_inner();
    assert_eq!(r.capacity_bytes, 2 * GIB);
    assert_eq!(env.fake.fs_size(&device), Some(2 * GIB as u64));
    assert!(
        env.fake
            .log()
            .iter()
            .any(|l| l.starts_with("resize-online "))
    );

    // In use: delete and unstage refuse.
    let e = env
        .controller()
        .delete_volume(Request::new(DeleteVolumeRequest {
            volume_id: id.clone(),
            ..Default::default()
        }))
        .await
        .expect_err("in use");
    assert_eq!(e.code(), Code::FailedPrecondition);
    let e = env
        .node()
        .node_unstage_volume(Request::new(NodeUnstageVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
        }))
        .await
        .expect_err("still published");
    assert_eq!(e.code(), Code::FailedPrecondition);

    // Tear down, each step twice (idempotent).
    for _ in 0..2 {
        env.node()
            .node_unpublish_volume(Request::new(NodeUnpublishVolumeRequest {
                volume_id: id.clone(),
                target_path: target.display().to_string(),
            }))
            .await
            .expect("unpublish");
    }
    for _ in 0..2 {
        env.node()
            .node_unstage_volume(Request::new(NodeUnstageVolumeRequest {
                volume_id: id.clone(),
                staging_target_path: staging.display().to_string(),
            }))
            .await
            .expect("unstage");
    }
    for _ in 0..2 {
        env.controller()
            .controller_unpublish_volume(Request::new(ControllerUnpublishVolumeRequest {
                volume_id: id.clone(),
                node_id: "node-a".into(),
                ..Default::default()
            }))
            .await
            .expect("detach");
    }
    assert!(env.fake.mounts().is_empty());
    assert!(env.fake.loops().is_empty());
    for _ in 0..2 {
        env.controller()
            .delete_volume(Request::new(DeleteVolumeRequest {
                volume_id: id.clone(),
                ..Default::default()
            }))
            .await
            .expect("delete");
    }
    assert_eq!(env.fake.image_size(&image), None);
    assert!(env.driver.state.lock().await.volumes.is_empty());
}

#[tokio::test]
async fn offline_expansion_grows_the_filesystem_at_stage() {
    let env = Env::new(|_| {});
    let (id, staging, target) = env.up("pvc-1").await;
    let image = env.driver.image_path(&id);
    env.node()
        .node_unpublish_volume(Request::new(NodeUnpublishVolumeRequest {
            volume_id: id.clone(),
            target_path: target.display().to_string(),
        }))
        .await
        .expect("unpublish");
    env.node()
        .node_unstage_volume(Request::new(NodeUnstageVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
        }))
        .await
        .expect("unstage");
    env.controller()
        .controller_expand_volume(Request::new(ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: 3 * GIB,
                limit_bytes: 0,
            }),
            ..Default::default()
        }))
        .await
        .expect("expand");
    env.node()
        .node_stage_volume(Request::new(stage_req(&id, &staging, mount_cap())))
        .await
        .expect("stage");
    let device = env.fake.loops()[&image].clone();
    assert_eq!(env.fake.fs_size(&device), Some(3 * GIB as u64));
    let log = env.fake.log();
    let resize = log.iter().position(|l| l.starts_with("resize-offline "));
    let mount = log.iter().rposition(|l| l.starts_with("mount "));
    assert!(
        resize.is_some() && resize < mount,
        "resize before mount: {log:?}"
    );
}

#[tokio::test]
async fn block_volumes_publish_the_loop_device() {
    let env = Env::new(|c| c.attach_required = false);
    let v = env
        .controller()
        .create_volume(Request::new(create_req("raw", GIB, block_cap())))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume");
    let image = env.driver.image_path(&v.volume_id);
    assert!(
        !env.fake.is_formatted(&image),
        "block volumes are not formatted"
    );
    let staging = env.path("stage-raw");
    let target = env.path("pods/raw/dev");
    // A block volume cannot be staged as a filesystem.
    let e = env
        .node()
        .node_stage_volume(Request::new(stage_req(&v.volume_id, &staging, mount_cap())))
        .await
        .expect_err("mount access of a block volume");
    assert_eq!(e.code(), Code::InvalidArgument);
    env.node()
        .node_stage_volume(Request::new(stage_req(&v.volume_id, &staging, block_cap())))
        .await
        .expect("stage");
    env.node()
        .node_publish_volume(Request::new(node_publish_req(
            &v.volume_id,
            &staging,
            &target,
            true,
            block_cap(),
        )))
        .await
        .expect("publish");
    let device = env.fake.loops()[&image].clone();
    let mounts = env.fake.mounts();
    assert_eq!(mounts.len(), 1, "nothing is mounted at the staging path");
    assert_eq!(mounts[&target].source, device);
    assert!(mounts[&target].readonly);
    assert!(target.is_file(), "the target is a file for the device node");
    let stats = env
        .node()
        .node_get_volume_stats(Request::new(NodeGetVolumeStatsRequest {
            volume_id: v.volume_id.clone(),
            volume_path: target.display().to_string(),
            ..Default::default()
        }))
        .await
        .expect("stats")
        .into_inner();
    assert_eq!(stats.usage.len(), 1);
    assert_eq!(stats.usage[0].total, GIB);
    env.node()
        .node_unpublish_volume(Request::new(NodeUnpublishVolumeRequest {
            volume_id: v.volume_id.clone(),
            target_path: target.display().to_string(),
        }))
        .await
        .expect("unpublish");
    assert!(!target.exists(), "the target file is removed");
}

#[tokio::test]
async fn attach_rules() {
    let env = Env::new(|c| c.max_volumes_per_node = 1);
    let id = env.create("pvc-1", GIB).await.expect("create").volume_id;
    let id2 = env.create("pvc-2", GIB).await.expect("create").volume_id;
    let staging = env.path("stage");
    // Staging before ControllerPublishVolume is refused when attachment is required.
    let e = env
        .node()
        .node_stage_volume(Request::new(stage_req(&id, &staging, mount_cap())))
        .await
        .expect_err("not attached");
    assert_eq!(e.code(), Code::FailedPrecondition);

    let mut no_cap = publish_req(&id, "node-a", false);
    no_cap.volume_capability = None;
    let cases: Vec<(&str, ControllerPublishVolumeRequest, Code)> = vec![
        (
            "no volume id",
            publish_req("", "node-a", false),
            Code::InvalidArgument,
        ),
        (
            "no node id",
            publish_req(&id, "", false),
            Code::InvalidArgument,
        ),
        ("no capability", no_cap, Code::InvalidArgument),
        (
            "unknown volume",
            publish_req("nope", "node-a", false),
            Code::NotFound,
        ),
        (
            "another node",
            publish_req(&id, "node-b", false),
            Code::NotFound,
        ),
        ("attach", publish_req(&id, "node-a", false), Code::Ok),
        ("again", publish_req(&id, "node-a", false), Code::Ok),
        (
            "readonly differs",
            publish_req(&id, "node-a", true),
            Code::AlreadyExists,
        ),
        (
            "over the node's limit",
            publish_req(&id2, "node-a", false),
            Code::ResourceExhausted,
        ),
    ];
    for (what, req, want) in cases {
        let got = env
            .controller()
            .controller_publish_volume(Request::new(req))
            .await;
        assert_eq!(code(got), want, "{what}");
    }
    let ctx = env
        .controller()
        .controller_publish_volume(Request::new(publish_req(&id, "node-a", false)))
        .await
        .expect("attach")
        .into_inner()
        .publish_context;
    assert_eq!(ctx.get("node").map(String::as_str), Some("node-a"));

    let listed = env
        .controller()
        .list_volumes(Request::new(ListVolumesRequest::default()))
        .await
        .expect("list")
        .into_inner();
    let published: Vec<Vec<String>> = listed
        .entries
        .iter()
        .map(|e| e.status.clone().unwrap_or_default().published_node_ids)
        .collect();
    assert_eq!(
        published
            .iter()
            .filter(|p| p == &&vec!["node-a".to_string()])
            .count(),
        1
    );

    let info = env
        .node()
        .node_get_info(Request::new(NodeGetInfoRequest {}))
        .await
        .expect("info")
        .into_inner();
    assert_eq!(info.node_id, "node-a");
    assert_eq!(info.max_volumes_per_node, 1);
    assert_eq!(info.accessible_topology, Some(env.driver.topology()));
}

#[tokio::test]
async fn attach_disabled_is_unimplemented_and_unadvertised() {
    let env = Env::new(|c| c.attach_required = false);
    let id = env.create("pvc-1", GIB).await.expect("create").volume_id;
    let got = env
        .controller()
        .controller_publish_volume(Request::new(publish_req(&id, "node-a", false)))
        .await;
    assert_eq!(code(got), Code::Unimplemented);
    let caps = env
        .controller()
        .controller_get_capabilities(Request::new(ControllerGetCapabilitiesRequest {}))
        .await
        .expect("caps")
        .into_inner()
        .capabilities;
    assert_eq!(caps, controller::controller_capabilities(false));
    assert_eq!(caps.len(), 5);
    assert_eq!(controller::controller_capabilities(true).len(), 6);
}

#[tokio::test]
async fn node_rpcs_validate_their_arguments() {
    let env = Env::new(|_| {});
    let id = env.create("pvc-1", GIB).await.expect("create").volume_id;
    let staging = env.path("s");
    let target = env.path("t");
    let n = env.node();
    let mut no_cap = stage_req(&id, &staging, mount_cap());
    no_cap.volume_capability = None;
    let cases: Vec<(&str, Code, Code)> = vec![
        (
            "stage without id",
            code(
                n.node_stage_volume(Request::new(stage_req("", &staging, mount_cap())))
                    .await,
            ),
            Code::InvalidArgument,
        ),
        (
            "stage without path",
            code(
                n.node_stage_volume(Request::new(stage_req(&id, Path::new(""), mount_cap())))
                    .await,
            ),
            Code::InvalidArgument,
        ),
        (
            "stage without capability",
            code(n.node_stage_volume(Request::new(no_cap)).await),
            Code::InvalidArgument,
        ),
        (
            "stage unknown volume",
            code(
                n.node_stage_volume(Request::new(stage_req("x", &staging, mount_cap())))
                    .await,
            ),
            Code::NotFound,
        ),
        (
            "publish unstaged",
            code(
                n.node_publish_volume(Request::new(node_publish_req(
                    &id,
                    &staging,
                    &target,
                    false,
                    mount_cap(),
                )))
                .await,
            ),
            Code::FailedPrecondition,
        ),
        (
            "publish without target",
            code(
                n.node_publish_volume(Request::new(node_publish_req(
                    &id,
                    &staging,
                    Path::new(""),
                    false,
                    mount_cap(),
                )))
                .await,
            ),
            Code::InvalidArgument,
        ),
        (
            "unpublish unknown volume",
            code(
                n.node_unpublish_volume(Request::new(NodeUnpublishVolumeRequest {
                    volume_id: "x".into(),
                    target_path: target.display().to_string(),
                }))
                .await,
            ),
            Code::NotFound,
        ),
        (
            "stats without path",
            code(
                n.node_get_volume_stats(Request::new(NodeGetVolumeStatsRequest {
                    volume_id: id.clone(),
                    ..Default::default()
                }))
                .await,
            ),
            Code::InvalidArgument,
        ),
        (
            "stats of a missing path",
            code(
                n.node_get_volume_stats(Request::new(NodeGetVolumeStatsRequest {
                    volume_id: id.clone(),
                    volume_path: env.path("nowhere").display().to_string(),
                    ..Default::default()
                }))
                .await,
            ),
            Code::NotFound,
        ),
        (
            "expand beyond the volume",
            code(
                n.node_expand_volume(Request::new(NodeExpandVolumeRequest {
                    volume_id: id.clone(),
                    volume_path: target.display().to_string(),
                    capacity_range: Some(CapacityRange {
                        required_bytes: 2 * GIB,
                        limit_bytes: 0,
                    }),
                    ..Default::default()
                }))
                .await,
            ),
            Code::OutOfRange,
        ),
        (
            "controller expand without range",
            code(
                env.controller()
                    .controller_expand_volume(Request::new(ControllerExpandVolumeRequest {
                        volume_id: id.clone(),
                        ..Default::default()
                    }))
                    .await,
            ),
            Code::InvalidArgument,
        ),
        (
            "controller expand unknown volume",
            code(
                env.controller()
                    .controller_expand_volume(Request::new(ControllerExpandVolumeRequest {
                        volume_id: "x".into(),
                        capacity_range: Some(CapacityRange {
                            required_bytes: GIB,
                            limit_bytes: 0,
                        }),
                        ..Default::default()
                    }))
                    .await,
            ),
            Code::NotFound,
        ),
    ];
    for (what, got, want) in cases {
        assert_eq!(got, want, "{what}");
    }
}

#[tokio::test]
async fn validate_volume_capabilities() {
    let env = Env::new(|_| {});
    let id = env.create("pvc-1", GIB).await.expect("create").volume_id;
    let ro = cap(
        Cap::Mount(MountVolume::default()),
        Mode::SingleNodeReaderOnly,
    );
    let multi = cap(
        Cap::Mount(MountVolume::default()),
        Mode::MultiNodeReaderOnly,
    );
    let cases: Vec<(&str, Vec<VolumeCapability>, bool)> = vec![
        ("mount rw", vec![mount_cap()], true),
        ("mount rw and ro", vec![mount_cap(), ro], true),
        ("block of a mount volume", vec![block_cap()], false),
        ("multi-node", vec![multi], false),
    ];
    for (what, caps, confirmed) in cases {
        let r = env
            .controller()
            .validate_volume_capabilities(Request::new(ValidateVolumeCapabilitiesRequest {
                volume_id: id.clone(),
                volume_capabilities: caps.clone(),
                ..Default::default()
            }))
            .await
            .expect("validate")
            .into_inner();
        assert_eq!(r.confirmed.is_some(), confirmed, "{what}: {}", r.message);
        assert_eq!(r.message.is_empty(), confirmed, "{what}");
        if let Some(c) = r.confirmed {
            assert_eq!(c.volume_capabilities, caps);
        }
    }
    let got = env
        .controller()
        .validate_volume_capabilities(Request::new(ValidateVolumeCapabilitiesRequest {
            volume_id: "x".into(),
            volume_capabilities: vec![mount_cap()],
            ..Default::default()
        }))
        .await;
    assert_eq!(code(got), Code::NotFound);
}

#[tokio::test]
async fn list_volumes_pages() {
    let env = Env::new(|_| {});
    for i in 0..5 {
        env.create(&format!("pvc-{i}"), 16 * MIB)
            .await
            .expect("create");
    }
    let mut token = String::new();
    let mut seen = Vec::new();
    loop {
        let r = env
            .controller()
            .list_volumes(Request::new(ListVolumesRequest {
                max_entries: 2,
                starting_token: token.clone(),
            }))
            .await
            .expect("list")
            .into_inner();
        assert!(r.entries.len() <= 2);
        seen.extend(
            r.entries
                .into_iter()
                .filter_map(|e| e.volume)
                .map(|v| v.volume_id),
        );
        if r.next_token.is_empty() {
            break;
        }
        token = r.next_token;
    }
    let mut want: Vec<String> = env
        .driver
        .state
        .lock()
        .await
        .volumes
        .keys()
        .cloned()
        .collect();
    want.sort();
    assert_eq!(seen, want);
    let bad = env
        .controller()
        .list_volumes(Request::new(ListVolumesRequest {
            max_entries: 0,
            starting_token: "99".into(),
        }))
        .await;
    assert_eq!(code(bad), Code::Aborted);
}

#[test]
fn pages() {
    type Page = Option<(std::ops::Range<usize>, &'static str)>;
    let cases: &[(usize, &str, usize, Page)] = &[
        (5, "", 0, Some((0..5, ""))),
        (5, "", 2, Some((0..2, "2"))),
        (5, "2", 2, Some((2..4, "4"))),
        (5, "4", 2, Some((4..5, ""))),
        (5, "5", 2, Some((5..5, ""))),
        (5, "6", 2, None),
        (5, "x", 2, None),
        (0, "", 3, Some((0..0, ""))),
    ];
    for (len, token, max, want) in cases {
        let got = controller::page(*len, token, *max).ok();
        let want = want.clone().map(|(r, t)| (r, t.to_string()));
        assert_eq!(got, want, "{len} {token:?} {max}");
    }
}

#[tokio::test]
async fn state_survives_a_restart() {
    let env = Env::new(|_| {});
    let (id, staging, target) = env.up("pvc-1").await;
    let restarted = env.restart();
    let st = restarted.state.lock().await;
    let v = &st.volumes[&id];
    assert_eq!(v.name, "pvc-1");
    assert_eq!(v.staged.as_ref().map(|s| s.path.clone()), Some(staging));
    assert_eq!(v.published.get(&target), Some(&false));
    assert_eq!(v.attached.get("node-a"), Some(&false));
}

#[tokio::test]
async fn injected_failures_count_down() {
    let env = Env::new(|c| {
        c.fail = vec![
            parse_fault("CreateVolume:2").expect("fault"),
            parse_fault("Probe").expect("fault"),
        ]
    });
    for _ in 0..2 {
        let e = env.create("pvc-1", GIB).await.expect_err("injected");
        assert_eq!(e.code(), Code::Internal);
        assert_eq!(e.message(), "injected failure");
    }
    env.create("pvc-1", GIB).await.expect("third call works");
    let id = IdentityService(env.driver.clone());
    for _ in 0..3 {
        let got = id.probe(Request::new(ProbeRequest {})).await;
        assert_eq!(code(got), Code::Internal, "no count: every call fails");
    }
}

#[test]
fn fault_flags() {
    let cases = [
        ("CreateVolume", Ok(("CreateVolume", None))),
        ("NodeStageVolume:3", Ok(("NodeStageVolume", Some(3)))),
        ("NodeStageVolume:0", Ok(("NodeStageVolume", Some(0)))),
        ("CreateVolumes", Err(())),
        ("CreateVolume:x", Err(())),
        ("CreateVolume:-1", Err(())),
    ];
    for (s, want) in cases {
        let got = parse_fault(s).map(|f| f.count).map_err(drop);
        assert_eq!(got, want.map(|(_, c)| c), "{s}");
        if let Ok((rpc, _)) = want {
            assert_eq!(parse_fault(s).map(|f| f.rpc).as_deref(), Ok(rpc));
        }
    }
}
