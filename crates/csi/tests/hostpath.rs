//! The hostpath driver on the real kernel, driven through the client API as the node
//! agent and controllers will drive it: registration, then a volume's whole life
//! (create, attach, stage, publish, write, stats, expand, tear down), checking that
//! no mount, loop device or image is left. Needs root, loop devices, util-linux and
//! e2fsprogs (scripts/install-deps); a missing tool fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use berth_csi::client::{CsiConnection, CsiError};
use berth_csi::hostpath::{self, Config};
use berth_csi::v1::volume_capability::access_mode::Mode;
use berth_csi::v1::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use berth_csi::v1::*;
use tonic::Code;

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// Removes everything the test made even when it fails half-way: mounts under the
/// directory (deepest first), loop devices backing its images, the directory.
struct Cleanup {
    dir: PathBuf,
}

fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut v: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|p| p.starts_with(dir))
        .collect();
    v.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    v
}

fn loops_of(image: &Path) -> Vec<String> {
    let out = Command::new("losetup")
        .arg("-j")
        .arg(image)
        .output()
        .expect("losetup runs (util-linux is required)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(':').next())
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect()
}

fn images(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join("state/volumes"))
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for m in mounts_under(&self.dir) {
            let _ = Command::new("umount").arg("-l").arg(&m).status();
        }
        for img in images(&self.dir) {
            for dev in loops_of(&img) {
                let _ = Command::new("losetup").arg("-d").arg(dev).status();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A driver task and its stop switch.
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), hostpath::HostpathError>>,
}

async fn start(config: Config) -> (Running, CsiConnection) {
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let endpoint = config.endpoint.clone();
    let task = tokio::spawn(hostpath::serve(config, async {
        let _ = rx.await;
    }));
    let csi = CsiConnection::connect(&endpoint)
        .expect("endpoint")
        .with_timeout(Duration::from_secs(120));
    for _ in 0..100 {
        if csi.identity().probe().await == Ok(true) {
            return (Running { stop, task }, csi);
        }
        assert!(!task.is_finished(), "driver exited early");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("driver did not answer Probe");
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("driver task")
            .expect("driver served cleanly");
    }
}

fn mount_cap() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

fn block_cap() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Block(BlockVolume {})),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

/// `df` as a pod would see it: the filesystem's size in bytes.
fn df_size(path: &Path) -> i64 {
    let out = Command::new("df")
        .args(["-B1", "--output=size"])
        .arg(path)
        .output()
        .expect("df runs");
    assert!(out.status.success(), "df {}: {:?}", path.display(), out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .expect("df size")
}

async fn stats_total(csi: &CsiConnection, id: &str, path: &Path) -> i64 {
    let r = csi
        .node()
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.into(),
            volume_path: path.display().to_string(),
            ..Default::default()
        })
        .await
        .expect("stats");
    let bytes = r
        .usage
        .iter()
        .find(|u| u.unit == volume_usage::Unit::Bytes as i32)
        .expect("bytes usage");
    let inodes = r
        .usage
        .iter()
        .find(|u| u.unit == volume_usage::Unit::Inodes as i32)
        .expect("inode usage");
    assert!(bytes.used > 0 && bytes.available > 0 && bytes.used + bytes.available <= bytes.total);
    assert!(inodes.total > 0 && inodes.used > 0 && inodes.used + inodes.available == inodes.total);
    bytes.total
}

/// ext4 keeps a few percent for its metadata and journal.
fn assert_about(total: i64, size: i64, what: &str) {
    assert!(
        total > size * 9 / 10 && total <= size,
        "{what}: {total} bytes is not about {size}"
    );
}

/// CAP_SYS_RESOURCE (bit 24) is what the kernel asks of an online ext4 resize.
fn can_resize_online() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

async fn unpublish(csi: &CsiConnection, id: &str, target: &Path) {
    csi.node()
        .node_unpublish_volume(NodeUnpublishVolumeRequest {
            volume_id: id.into(),
            target_path: target.display().to_string(),
        })
        .await
        .expect("unpublish");
}

async fn unstage(csi: &CsiConnection, id: &str, staging: &Path) {
    csi.node()
        .node_unstage_volume(NodeUnstageVolumeRequest {
            volume_id: id.into(),
            staging_target_path: staging.display().to_string(),
        })
        .await
        .expect("unstage");
}

async fn stage(csi: &CsiConnection, id: &str, staging: &Path, cap: VolumeCapability) {
    csi.node()
        .node_stage_volume(NodeStageVolumeRequest {
            volume_id: id.into(),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(cap),
            ..Default::default()
        })
        .await
        .expect("stage");
}

async fn publish(
    csi: &CsiConnection,
    id: &str,
    staging: &Path,
    target: &Path,
    cap: VolumeCapability,
) {
    csi.node()
        .node_publish_volume(NodePublishVolumeRequest {
            volume_id: id.into(),
            staging_target_path: staging.display().to_string(),
            target_path: target.display().to_string(),
            volume_capability: Some(cap),
            ..Default::default()
        })
        .await
        .expect("publish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_lifecycle_on_the_real_kernel() {
    let dir = std::env::temp_dir().join(format!("berth-csi-it-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cleanup = Cleanup { dir: dir.clone() };
    let socket = dir.join("csi.sock");
    let registry = dir.join("registry");
    let mut config = Config::new(
        format!("unix://{}", socket.display()),
        "node-it",
        dir.join("state"),
    );
    config.registry_dir = Some(registry.clone());
    config.capacity = 8 * GIB;
    let (running, csi) = start(config.clone()).await;

    // Registration, as kubelet's plugin watcher does it.
    let found = berth_csi::registration::discover(&registry)
        .await
        .expect("discover");
    assert!(found.failed.is_empty(), "{:?}", found.failed);
    assert_eq!(found.registered.len(), 1);
    assert_eq!(found.registered[0].name, hostpath::DEFAULT_DRIVER_NAME);
    assert_eq!(found.registered[0].endpoint, socket.display().to_string());
    assert_eq!(found.registered[0].version, "1.0.0");

    let info = csi.identity().get_plugin_info().await.expect("info");
    assert_eq!(info.name, hostpath::DEFAULT_DRIVER_NAME);
    let node = csi.node().get_info().await.expect("node info");
    assert_eq!(node.node_id, "node-it");

    // Create a 1Gi filesystem volume and bring it to a "pod".
    let vol = csi
        .controller()
        .create_volume(CreateVolumeRequest {
            name: "pvc-it".into(),
            capacity_range: Some(CapacityRange {
                required_bytes: GIB,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![mount_cap()],
            ..Default::default()
        })
        .await
        .expect("create")
        .volume
        .expect("volume");
    let id = vol.volume_id.clone();
    assert_eq!(vol.capacity_bytes, GIB);
    let image = dir.join("state/volumes").join(format!("{id}.img"));
    let meta = std::fs::metadata(&image).expect("image exists");
    assert_eq!(meta.len(), GIB as u64);
    {
        use std::os::unix::fs::MetadataExt;
        assert!(
            meta.blocks() * 512 < 200 * MIB as u64,
            "the image is sparse"
        );
    }
    csi.controller()
        .controller_publish_volume(ControllerPublishVolumeRequest {
            volume_id: id.clone(),
            node_id: "node-it".into(),
            volume_capability: Some(mount_cap()),
            ..Default::default()
        })
        .await
        .expect("attach");
    let staging = dir.join("plugins/staging/pvc-it");
    let target = dir.join("pods/p1/volumes/pvc-it/mount");
    stage(&csi, &id, &staging, mount_cap()).await;
    assert_eq!(loops_of(&image).len(), 1, "one loop device backs the image");
    publish(&csi, &id, &staging, &target, mount_cap()).await;
    assert_eq!(
        mounts_under(&dir).len(),
        2,
        "staging and target are mounted"
    );

    std::fs::write(target.join("hello.txt"), b"hello from a pod").expect("write");
    assert_eq!(
        std::fs::read(staging.join("hello.txt")).expect("read through staging"),
        b"hello from a pod"
    );
    assert_about(stats_total(&csi, &id, &target).await, GIB, "stats at 1Gi");
    assert_about(df_size(&target), GIB, "df at 1Gi");

    // A restarted driver knows its volume.
    running.stop().await;
    let (running, csi) = start(config.clone()).await;
    let listed = csi
        .controller()
        .list_volumes(ListVolumesRequest::default())
        .await
        .expect("list");
    assert_eq!(listed.entries.len(), 1);
    assert_eq!(
        listed.entries[0]
            .status
            .clone()
            .unwrap_or_default()
            .published_node_ids,
        vec!["node-it".to_string()]
    );

    // Expand to 2Gi.
    let r = csi
        .controller()
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .expect("controller expand");
    assert_eq!(r.capacity_bytes, 2 * GIB);
    assert!(r.node_expansion_required);
    assert_eq!(
        std::fs::metadata(&image).expect("image").len(),
        2 * GIB as u64
    );
    let node_expand = csi
        .node()
        .node_expand_volume(NodeExpandVolumeRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            capacity_range: Some(CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(mount_cap()),
        })
        .await;
    if can_resize_online() {
        assert_eq!(node_expand.expect("online expand").capacity_bytes, 2 * GIB);
    } else {
        // Without CAP_SYS_RESOURCE (an unprivileged container) the kernel refuses
        // the online resize; the driver must say so, and the offline path
        // (unstage, stage again: resize before mount) must still grow it.
        match node_expand {
            Err(CsiError::Rpc { code, message, .. }) => {
                assert_eq!(code, Code::Internal);
                assert!(message.contains("resize2fs"), "{message}");
            }
            other => panic!("online resize without CAP_SYS_RESOURCE: {other:?}"),
        }
        eprintln!("no CAP_SYS_RESOURCE: expanding offline (unstage, stage)");
        unpublish(&csi, &id, &target).await;
        unstage(&csi, &id, &staging).await;
        stage(&csi, &id, &staging, mount_cap()).await;
        publish(&csi, &id, &staging, &target, mount_cap()).await;
    }
    assert_about(
        stats_total(&csi, &id, &target).await,
        2 * GIB,
        "stats at 2Gi",
    );
    assert_about(df_size(&target), 2 * GIB, "df at 2Gi");
    assert_eq!(
        std::fs::read(target.join("hello.txt")).expect("data survives expansion"),
        b"hello from a pod"
    );

    // Tear down; every step is repeated to show it is idempotent.
    for _ in 0..2 {
        unpublish(&csi, &id, &target).await;
    }
    assert!(!target.exists(), "the target path is removed");
    for _ in 0..2 {
        unstage(&csi, &id, &staging).await;
    }
    let e = csi
        .controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("still attached");
    assert_eq!(e.code(), Some(Code::FailedPrecondition));
    csi.controller()
        .controller_unpublish_volume(ControllerUnpublishVolumeRequest {
            volume_id: id.clone(),
            node_id: "node-it".into(),
            ..Default::default()
        })
        .await
        .expect("detach");
    for _ in 0..2 {
        csi.controller()
            .delete_volume(DeleteVolumeRequest {
                volume_id: id.clone(),
                ..Default::default()
            })
            .await
            .expect("delete");
    }
    assert_eq!(
        mounts_under(&dir),
        Vec::<PathBuf>::new(),
        "no mount is left"
    );
    assert!(loops_of(&image).is_empty(), "no loop device is left");
    assert!(!image.exists(), "the image is removed");

    // A raw block volume: the loop device itself appears at the target.
    let raw = csi
        .controller()
        .create_volume(CreateVolumeRequest {
            name: "pvc-raw".into(),
            capacity_range: Some(CapacityRange {
                required_bytes: 64 * MIB,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![block_cap()],
            ..Default::default()
        })
        .await
        .expect("create block")
        .volume
        .expect("volume");
    let raw_image = dir
        .join("state/volumes")
        .join(format!("{}.img", raw.volume_id));
    csi.controller()
        .controller_publish_volume(ControllerPublishVolumeRequest {
            volume_id: raw.volume_id.clone(),
            node_id: "node-it".into(),
            volume_capability: Some(block_cap()),
            ..Default::default()
        })
        .await
        .expect("attach block");
    let raw_staging = dir.join("plugins/staging/pvc-raw");
    let raw_target = dir.join("pods/p2/volumeDevices/pvc-raw");
    stage(&csi, &raw.volume_id, &raw_staging, block_cap()).await;
    publish(&csi, &raw.volume_id, &raw_staging, &raw_target, block_cap()).await;
    {
        use std::io::{Read, Seek, SeekFrom, Write};
        use std::os::unix::fs::FileTypeExt;
        let ft = std::fs::metadata(&raw_target).expect("target").file_type();
        assert!(ft.is_block_device(), "the target is the loop device");
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&raw_target)
            .expect("open device");
        f.seek(SeekFrom::Start(4096)).expect("seek");
        f.write_all(b"raw bytes").expect("write device");
        f.sync_all().expect("sync");
        let mut back = [0u8; 9];
        f.seek(SeekFrom::Start(4096)).expect("seek");
        f.read_exact(&mut back).expect("read device");
        assert_eq!(&back, b"raw bytes");
    }
    unpublish(&csi, &raw.volume_id, &raw_target).await;
    unstage(&csi, &raw.volume_id, &raw_staging).await;
    csi.controller()
        .controller_unpublish_volume(ControllerUnpublishVolumeRequest {
            volume_id: raw.volume_id.clone(),
            node_id: "node-it".into(),
            ..Default::default()
        })
        .await
        .expect("detach block");
    csi.controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: raw.volume_id.clone(),
            ..Default::default()
        })
        .await
        .expect("delete block");
    assert_eq!(
        mounts_under(&dir),
        Vec::<PathBuf>::new(),
        "no mount is left"
    );
    assert!(loops_of(&raw_image).is_empty(), "no loop device is left");
    assert!(!raw_image.exists(), "the block image is removed");

    running.stop().await;
    assert!(!socket.exists(), "the driver removes its socket");
    assert!(
        !registry
            .join(format!("{}-reg.sock", hostpath::DEFAULT_DRIVER_NAME))
            .exists(),
        "and its registration socket"
    );
    drop(cleanup);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_failures_reach_the_client() {
    let dir = std::env::temp_dir().join(format!("berth-csi-it-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let _cleanup = Cleanup { dir: dir.clone() };
    let mut config = Config::new(
        format!("unix://{}", dir.join("csi.sock").display()),
        "node-it",
        dir.join("state"),
    );
    config.fail = vec![hostpath::parse_fault("CreateVolume:1").expect("fault")];
    let (running, csi) = start(config).await;
    let req = CreateVolumeRequest {
        name: "pvc-fail".into(),
        capacity_range: Some(CapacityRange {
            required_bytes: 16 * MIB,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![mount_cap()],
        ..Default::default()
    };
    let e = csi
        .controller()
        .create_volume(req.clone())
        .await
        .expect_err("injected");
    assert_eq!(e.code(), Some(Code::Internal));
    assert!(e.is_final());
    assert_eq!(
        e.to_string(),
        "rpc error: code = Internal desc = injected failure"
    );
    let v = csi
        .controller()
        .create_volume(req)
        .await
        .expect("second call")
        .volume
        .expect("volume");
    csi.controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: v.volume_id,
            ..Default::default()
        })
        .await
        .expect("delete");
    running.stop().await;
}
