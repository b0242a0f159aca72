use std::time::{Duration, Instant};

use super::*;
use crate::runtime::fake::FakeRuntime;
use crate::runtime::{ContainerConfig, SandboxConfig};

fn policy(high: i32, low: i32) -> ImageGcPolicy {
    ImageGcPolicy {
        high_threshold_percent: high,
        low_threshold_percent: low,
        ..Default::default()
    }
}

fn fs(capacity: u64, available: u64) -> FsStats {
    FsStats {
        capacity_bytes: Some(capacity),
        available_bytes: Some(available),
        ..Default::default()
    }
}

const MIN: Duration = Duration::from_secs(60);

#[test]
fn policy_validation_has_upstreams_messages() {
    let rows: &[(i32, i32, Result<(), &str>)] = &[
        (85, 80, Ok(())),
        (100, 100, Ok(())),
        (0, 0, Ok(())),
        (
            101,
            80,
            Err("invalid HighThresholdPercent 101, must be in range [0-100]"),
        ),
        (
            85,
            -1,
            Err("invalid LowThresholdPercent -1, must be in range [0-100]"),
        ),
        (
            80,
            85,
            Err("LowThresholdPercent 85 can not be higher than HighThresholdPercent 80"),
        ),
    ];
    for (high, low, want) in rows {
        let got = policy(*high, *low).validate();
        assert_eq!(got, want.map_err(str::to_string), "high {high} low {low}");
    }
    assert!(policy(100, 80).periodic_disabled());
    let aged = ImageGcPolicy {
        max_age: MIN,
        ..policy(100, 80)
    };
    assert!(!aged.periodic_disabled());
    assert!(!ImageGcPolicy::default().periodic_disabled());
}

#[test]
fn amount_to_free_follows_upstreams_arithmetic() {
    // (capacity, available, high, low, bytes to free)
    let rows: &[(u64, u64, i32, i32, Option<u64>)] = &[
        (1000, 100, 85, 80, Some(100)), // 90 % used: free down to 80 %
        (1000, 150, 85, 80, Some(50)),  // exactly 85 %: collects
        (1000, 159, 85, 80, Some(41)),  // 84.1 % rounds up to 85 (Go's integer division)
        (1000, 160, 85, 80, None),      // 84 %
        (1000, 2000, 85, 80, None),     // available above capacity is capacity
        (0, 0, 85, 80, None),           // no capacity: nothing to compute
        (1000, 0, 100, 100, Some(0)),   // full disk at 100/100: nothing to reach
        (1000, 900, 0, 0, Some(100)),   // 0/0: everything unused goes
    ];
    for (cap, avail, high, low, want) in rows {
        assert_eq!(
            policy(*high, *low).amount_to_free(*cap, *avail),
            *want,
            "capacity {cap} available {avail} high {high} low {low}"
        );
    }
}

/// A fake runtime with images and one sandbox whose containers use `used`.
async fn runtime(images: &[(&str, u64, bool)], used: &[&str]) -> FakeRuntime {
    let rt = FakeRuntime::new();
    for (name, size, pinned) in images {
        rt.add_image_sized(name, *size, *pinned);
    }
    let sb = rt.run_sandbox(&SandboxConfig::default()).await.unwrap();
    for (i, image) in used.iter().enumerate() {
        let cfg = ContainerConfig {
            name: format!("c{i}"),
            image: image.to_string(),
            ..Default::default()
        };
        rt.create_container(&sb, &cfg, &SandboxConfig::default())
            .await
            .unwrap();
    }
    rt
}

fn removed(rt: &FakeRuntime) -> Vec<String> {
    rt.calls()
        .into_iter()
        .filter_map(|c| c.strip_prefix("remove_image ").map(str::to_string))
        .collect()
}

#[tokio::test]
async fn over_the_high_threshold_least_recently_used_images_go_first() {
    let images = [
        ("old", 100, false),
        ("new", 100, false),
        ("used", 500, false),
        ("pause", 50, true), // pinned by the runtime
        ("berth.local/own:1", 70, false),
    ];
    let rt = runtime(&images, &["used"]).await;
    let t0 = Instant::now();
    let mut gc = ImageGcManager::new(ImageGcPolicy::default(), &["berth.local/own:1"], t0);
    // Not over the threshold: nothing goes, but every image is recorded.
    assert_eq!(
        gc.garbage_collect(&rt, Some(&fs(1000, 500)), t0).await,
        Ok(0)
    );
    assert!(removed(&rt).is_empty());
    // "new" is used later than "old" (a container that has gone since).
    let sb = rt.run_sandbox(&SandboxConfig::default()).await.unwrap();
    let cfg = ContainerConfig {
        name: "later".into(),
        image: "new".into(),
        ..Default::default()
    };
    let id = rt
        .create_container(&sb, &cfg, &SandboxConfig::default())
        .await
        .unwrap();
    gc.garbage_collect(&rt, Some(&fs(1000, 500)), t0 + MIN)
        .await
        .unwrap();
    rt.remove_container(&id).await.unwrap();

    // Younger than the 2 minute minimum age: nothing is eligible yet.
    let early = gc
        .garbage_collect(&rt, Some(&fs(1000, 100)), t0 + MIN)
        .await;
    assert_eq!(
        early.unwrap_err().to_string(),
        "Failed to garbage collect required amount of images. Attempted to free 100 bytes, but only found 0 bytes eligible to free."
    );
    // 90 % used: 100 bytes to free, the least recently used image is enough.
    let t = t0 + 3 * MIN;
    assert_eq!(
        gc.garbage_collect(&rt, Some(&fs(1000, 100)), t).await,
        Ok(100)
    );
    assert_eq!(removed(&rt), ["sha256:old"]);
    // 95 % used: 150 to free; only "new" is left to go, so the collection fails
    // with upstream's message and its Node event.
    let err = gc
        .garbage_collect(&rt, Some(&fs(1000, 50)), t)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        GcError::NotEnough {
            to_free: 150,
            freed: 100
        }
    );
    assert_eq!(err.event_reason(), Some("FreeDiskSpaceFailed"));
    assert_eq!(removed(&rt), ["sha256:old", "sha256:new"]);
    let mut left = rt.images();
    left.sort();
    assert_eq!(left, ["berth.local/own:1", "pause", "used"]);
}

#[tokio::test]
async fn bad_capacity_and_missing_stats_are_errors() {
    let rt = runtime(&[("a", 10, false)], &[]).await;
    let t0 = Instant::now();
    let mut gc = ImageGcManager::new(ImageGcPolicy::default(), &[], t0);
    let err = gc
        .garbage_collect(&rt, Some(&fs(0, 0)), t0)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "invalid capacity 0 on image filesystem");
    assert_eq!(err.event_reason(), Some("InvalidDiskCapacity"));
    let err = gc.garbage_collect(&rt, None, t0).await.unwrap_err();
    assert_eq!(err.event_reason(), None);
    assert!(removed(&rt).is_empty());
}

#[tokio::test]
async fn delete_unused_frees_every_eligible_image() {
    let images = [("a", 10, false), ("b", 20, false), ("c", 30, false)];
    let rt = runtime(&images, &["c"]).await;
    let t0 = Instant::now();
    let policy = ImageGcPolicy {
        min_age: Duration::ZERO,
        ..Default::default()
    };
    let mut gc = ImageGcManager::new(policy, &[], t0);
    assert_eq!(gc.delete_unused(&rt, t0 + MIN).await, Ok(30));
    assert_eq!(rt.images(), ["c"]);
}

#[tokio::test]
async fn images_unused_past_the_maximum_age_go_once_the_agent_ran_that_long() {
    let rt = runtime(&[("stale", 10, false), ("fresh", 10, false)], &[]).await;
    let t0 = Instant::now();
    let policy = ImageGcPolicy {
        max_age: 10 * MIN,
        ..Default::default()
    };
    let mut gc = ImageGcManager::new(policy, &[], t0);
    // "stale" is first seen now, "fresh" only later.
    rt.remove_image("fresh").await.unwrap();
    gc.garbage_collect(&rt, Some(&fs(1000, 900)), t0)
        .await
        .unwrap();
    rt.add_image_sized("fresh", 10, false);
    gc.garbage_collect(&rt, Some(&fs(1000, 900)), t0 + 5 * MIN)
        .await
        .unwrap();
    // The agent has not run for the maximum age yet.
    gc.garbage_collect(&rt, Some(&fs(1000, 900)), t0 + 10 * MIN)
        .await
        .unwrap();
    assert_eq!(rt.images().len(), 2);
    gc.garbage_collect(&rt, Some(&fs(1000, 900)), t0 + 11 * MIN)
        .await
        .unwrap();
    assert_eq!(rt.images(), ["fresh"]);
}

#[test]
fn aggregated_errors_print_as_go() {
    let e = GcError::Deletion {
        to_free: 10,
        freed: 0,
        errors: vec!["a".into(), "b".into()],
    };
    assert_eq!(
        e.to_string(),
        "wanted to free 10 bytes, but freed 0 bytes space with errors in image deletion: [a, b]"
    );
    let e = GcError::OldDeletion {
        max_age: Duration::from_secs(120),
        errors: vec!["a".into()],
    };
    assert_eq!(
        e.to_string(),
        "wanted to free images older than 2m0s, encountered errors in image deletion: a"
    );
}
