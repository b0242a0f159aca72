//! Image garbage collection (upstream's `pkg/kubelet/images/image_gc_manager.go`).
//!
//! The manager remembers when it first saw each image and when a container last
//! used it. Every [`IMAGE_GC_PERIOD`] (and when the eviction manager reclaims
//! disk) it removes images no container uses, least recently used first,
//! skipping pinned images and images younger than `--minimum-image-ttl-duration`:
//! - when the image filesystem is at least `--image-gc-high-threshold` percent
//!   full, until it is back at `--image-gc-low-threshold`;
//! - with `--image-maximum-gc-age`, any image unused for longer than that, once
//!   the agent has run that long.
//!
//! Images the runtime pins (CRI `pinned`, e.g. its sandbox image) are kept, and so
//! are the images the agent builds itself: they come from no registry, so a
//! removed one could not be pulled again.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::runtime::{ContainerStatus, Filter, ImageInfo, Runtime, RuntimeError};
use crate::stats::summary::FsStats;

/// How often the agent collects images (upstream's `ImageGCPeriod`).
pub const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);

/// The image GC flags (upstream's `ImageGCPolicy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// `--image-gc-high-threshold`: disk usage (percent) that starts a collection.
    pub high_threshold_percent: i32,
    /// `--image-gc-low-threshold`: disk usage (percent) a collection frees down to.
    pub low_threshold_percent: i32,
    /// `--minimum-image-ttl-duration`: an image seen for less is never removed.
    pub min_age: Duration,
    /// `--image-maximum-gc-age`: an image unused for longer is removed (zero: off).
    pub max_age: Duration,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::from_secs(120),
            max_age: Duration::ZERO,
        }
    }
}

impl ImageGcPolicy {
    /// Upstream's checks in `NewImageGCManager`, with its messages.
    pub fn validate(&self) -> Result<(), String> {
        let (high, low) = (self.high_threshold_percent, self.low_threshold_percent);
        if !(0..=100).contains(&high) {
            return Err(format!(
                "invalid HighThresholdPercent {high}, must be in range [0-100]"
            ));
        }
        if !(0..=100).contains(&low) {
            return Err(format!(
                "invalid LowThresholdPercent {low}, must be in range [0-100]"
            ));
        }
        if low > high {
            return Err(format!(
                "LowThresholdPercent {low} can not be higher than HighThresholdPercent {high}"
            ));
        }
        Ok(())
    }

    /// Upstream stubs image GC out when the high threshold is 100 and no
    /// maximum age is set (the eviction manager's reclaim still runs).
    pub fn periodic_disabled(&self) -> bool {
        self.high_threshold_percent == 100 && self.max_age.is_zero()
    }

    /// Bytes to free so usage drops to the low threshold, when usage is at or
    /// above the high one (upstream's arithmetic, in whole percents).
    pub fn amount_to_free(&self, capacity: u64, available: u64) -> Option<u64> {
        let available = available.min(capacity);
        if capacity == 0 {
            return None;
        }
        let usage = 100 - (u128::from(available) * 100 / u128::from(capacity)) as i64;
        if usage < i64::from(self.high_threshold_percent) {
            return None;
        }
        let keep_free =
            u128::from(capacity) * (100 - self.low_threshold_percent.clamp(0, 100)) as u128 / 100;
        Some(keep_free.saturating_sub(u128::from(available)) as u64)
    }
}

/// Why a collection did not free what it had to. The texts are upstream's;
/// [`GcError::event_reason`] is the Node event it raises, where it raises one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GcError {
    #[error("invalid capacity 0 on image filesystem")]
    InvalidCapacity,
    #[error(
        "Failed to garbage collect required amount of images. Attempted to free {to_free} bytes, but only found {freed} bytes eligible to free."
    )]
    NotEnough { to_free: u64, freed: u64 },
    #[error(
        "wanted to free {to_free} bytes, but freed {freed} bytes space with errors in image deletion: {}",
        aggregate(.errors)
    )]
    Deletion {
        to_free: u64,
        freed: u64,
        errors: Vec<String>,
    },
    #[error(
        "wanted to free images older than {}, encountered errors in image deletion: {}",
        berth_api::duration::go_duration(*.max_age),
        aggregate(.errors)
    )]
    OldDeletion {
        max_age: Duration,
        errors: Vec<String>,
    },
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
    #[error("failed to get image stats: no image filesystem stats")]
    NoStats,
}

impl GcError {
    pub fn event_reason(&self) -> Option<&'static str> {
        match self {
            GcError::InvalidCapacity => Some("InvalidDiskCapacity"),
            GcError::NotEnough { .. } => Some("FreeDiskSpaceFailed"),
            _ => None,
        }
    }
}

/// Go's `errors.NewAggregate(...).Error()`: one error as itself, several in brackets.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    first_detected: Instant,
    /// None: no container has used it (it sorts before every used image).
    last_used: Option<Instant>,
    size: u64,
    pinned: bool,
}

/// One image a collection may remove, in eviction order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub id: String,
    pub size: u64,
    first_detected: Instant,
    last_used: Option<Instant>,
}

/// The image GC manager's state (upstream's `realImageGCManager` records).
#[derive(Debug)]
pub struct ImageGcManager {
    policy: ImageGcPolicy,
    /// Names of the images the agent built itself (never collected).
    local: HashSet<String>,
    records: HashMap<String, Record>,
    began: Instant,
}

/// Does this container run (or did it run) this image?
fn uses(c: &ContainerStatus, image: &ImageInfo) -> bool {
    let names = || {
        std::iter::once(&image.id)
            .chain(&image.repo_tags)
            .chain(&image.repo_digests)
    };
    names().any(|n| *n == c.image_ref || *n == c.image)
}

impl ImageGcManager {
    pub fn new(policy: ImageGcPolicy, local: &[&str], now: Instant) -> Self {
        ImageGcManager {
            policy,
            local: local.iter().map(|s| s.to_string()).collect(),
            records: HashMap::new(),
            began: now,
        }
    }

    pub fn policy(&self) -> &ImageGcPolicy {
        &self.policy
    }

    /// Upstream's `detectImages`: records images seen for the first time, marks
    /// those a container (running or not) uses as used now, forgets removed
    /// ones. Returns the ids in use.
    pub fn detect(
        &mut self,
        images: &[ImageInfo],
        containers: &[ContainerStatus],
        now: Instant,
    ) -> HashSet<String> {
        let mut in_use = HashSet::new();
        for image in images {
            let used = containers.iter().any(|c| uses(c, image));
            let pinned = image.pinned || image.repo_tags.iter().any(|t| self.local.contains(t));
            let r = self.records.entry(image.id.clone()).or_insert(Record {
                first_detected: now,
                last_used: None,
                size: image.size,
                pinned,
            });
            if used {
                r.last_used = Some(now);
                in_use.insert(image.id.clone());
            }
            r.size = image.size;
            r.pinned = pinned;
        }
        let present: HashSet<&str> = images.iter().map(|i| i.id.as_str()).collect();
        self.records.retain(|id, _| present.contains(id.as_str()));
        in_use
    }

    /// The images a collection may remove, least recently used first, then
    /// first detected (upstream's `imagesInEvictionOrder`).
    pub fn eviction_order(&self, in_use: &HashSet<String>) -> Vec<Candidate> {
        let mut out: Vec<Candidate> = self
            .records
            .iter()
            .filter(|(id, r)| !in_use.contains(*id) && !r.pinned)
            .map(|(id, r)| Candidate {
                id: id.clone(),
                size: r.size,
                first_detected: r.first_detected,
                last_used: r.last_used,
            })
            .collect();
        out.sort_by(|a, b| {
            (a.last_used, a.first_detected, &a.id).cmp(&(b.last_used, b.first_detected, &b.id))
        });
        out
    }

    /// Lists images and containers and detects; the eviction order.
    async fn candidates(
        &mut self,
        rt: &dyn Runtime,
        now: Instant,
    ) -> Result<Vec<Candidate>, GcError> {
        let images = rt.list_images().await?;
        let containers = rt.list_containers(&Filter::default()).await?;
        let in_use = self.detect(&images, &containers, now);
        Ok(self.eviction_order(&in_use))
    }

    async fn free_image(
        &mut self,
        rt: &dyn Runtime,
        c: &Candidate,
        why: &str,
    ) -> Result<(), String> {
        info!(image = %c.id, size = c.size, reason = why, "removing unused image");
        match rt.remove_image(&c.id).await {
            Ok(()) | Err(RuntimeError::NotFound(_)) => {
                self.records.remove(&c.id);
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Upstream's `freeSpace`: removes candidates until `to_free` bytes are freed;
    /// images used at or after `now` or younger than the minimum age stay.
    async fn free_space(
        &mut self,
        rt: &dyn Runtime,
        to_free: u64,
        now: Instant,
        candidates: &[Candidate],
    ) -> Result<u64, GcError> {
        let mut freed = 0u64;
        let mut errors = Vec::new();
        for c in candidates {
            let used_now = c.last_used.is_some_and(|t| t >= now);
            if used_now || now.duration_since(c.first_detected) < self.policy.min_age {
                continue;
            }
            if let Err(e) = self.free_image(rt, c, "space").await {
                errors.push(e);
                continue;
            }
            freed = freed.saturating_add(c.size);
            if freed >= to_free {
                break;
            }
        }
        if !errors.is_empty() {
            return Err(GcError::Deletion {
                to_free,
                freed,
                errors,
            });
        }
        Ok(freed)
    }

    /// Upstream's `freeOldImages`: with a maximum age, once the agent has run
    /// that long, removes the candidates unused for longer; the rest are returned.
    async fn free_old_images(
        &mut self,
        rt: &dyn Runtime,
        candidates: Vec<Candidate>,
        now: Instant,
    ) -> Result<Vec<Candidate>, GcError> {
        let max = self.policy.max_age;
        if max.is_zero() || now.duration_since(self.began) <= max {
            return Ok(candidates);
        }
        let mut left = Vec::new();
        let mut errors = Vec::new();
        for c in candidates {
            // Upstream counts a never used image's age from Go's zero time, so
            // one pulled a moment ago would go; Berth counts it from when it
            // was first seen.
            let last = c.last_used.unwrap_or(c.first_detected);
            if now.duration_since(last) > max {
                if let Err(e) = self.free_image(rt, &c, "age").await {
                    errors.push(e);
                }
            } else {
                left.push(c);
            }
        }
        if !errors.is_empty() {
            return Err(GcError::OldDeletion {
                max_age: max,
                errors,
            });
        }
        Ok(left)
    }

    /// One periodic collection (upstream's `GarbageCollect`) against the image
    /// filesystem's `fs` stats.
    pub async fn garbage_collect(
        &mut self,
        rt: &dyn Runtime,
        fs: Option<&FsStats>,
        now: Instant,
    ) -> Result<u64, GcError> {
        let candidates = self.candidates(rt, now).await?;
        let candidates = self.free_old_images(rt, candidates, now).await?;
        let fs = fs.ok_or(GcError::NoStats)?;
        let capacity = fs.capacity_bytes.unwrap_or(0);
        let available = fs.available_bytes.unwrap_or(0);
        if capacity == 0 {
            return Err(GcError::InvalidCapacity);
        }
        let Some(to_free) = self.policy.amount_to_free(capacity, available) else {
            return Ok(0);
        };
        info!(
            amount_to_free = to_free,
            high_threshold = self.policy.high_threshold_percent,
            low_threshold = self.policy.low_threshold_percent,
            "disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold"
        );
        let freed = self.free_space(rt, to_free, now, &candidates).await?;
        if freed < to_free {
            return Err(GcError::NotEnough { to_free, freed });
        }
        Ok(freed)
    }

    /// Every unused image old enough goes (upstream's `DeleteUnusedImages`, the
    /// eviction manager's reclaim of disk).
    pub async fn delete_unused(&mut self, rt: &dyn Runtime, now: Instant) -> Result<u64, GcError> {
        info!("attempting to delete unused images");
        let candidates = self.candidates(rt, now).await?;
        self.free_space(rt, u64::MAX, now, &candidates).await
    }
}

/// Logs a failed collection as upstream: the first failure in a row is
/// expected while stats warm up; a repeated one is a Node event.
pub fn log_failure(e: &GcError, failed_before: bool) {
    if failed_before {
        warn!(error = %e, "image garbage collection failed multiple times in a row");
    } else {
        warn!(error = %e, "image garbage collection failed once; stats initialization may not have completed yet");
    }
}

#[cfg(test)]
mod tests;
