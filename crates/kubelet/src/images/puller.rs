//! The image puller (upstream's `images.imageManager.EnsureImageExists`):
//! honours the container's pull policy, records upstream's Pulling / Pulled /
//! Failed / BackOff events, and keeps failed pulls in the crash-loop back-off
//! (ErrImagePull, then ImagePullBackOff). Its answer is the image reference
//! to create the container from, or the waiting reason and message the pod
//! status shows.

use std::sync::Mutex;
use std::time::Instant;

use berth_runtime::events::{EventType, Recorder};
use chrono::Utc;
use k8s_openapi::api::core::v1::{Container, ObjectReference};

use crate::backoff::{self, Backoff};
use crate::runtime::{Runtime, RuntimeError};

/// A container's waiting reason and message.
pub type Waiting = (String, String);

/// The image pull policy, with upstream's default when the API left it unset.
pub fn pull_policy(c: &Container) -> &str {
    if let Some(p) = c.image_pull_policy.as_deref() {
        return p;
    }
    let image = c.image.as_deref().unwrap_or("");
    let last = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') || (last.contains(':') && !last.ends_with(":latest")) {
        "IfNotPresent"
    } else {
        "Always"
    }
}

/// What the puller works with: the runtime, the pod's event recorder and the
/// agent's back-off (shared with crash loops, keyed per pod and image).
pub struct Puller<'a> {
    pub runtime: &'a dyn Runtime,
    pub recorder: &'a Recorder,
    pub backoff: &'a Mutex<Backoff>,
}

impl Puller<'_> {
    fn backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.backoff.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `c`'s image present per its pull policy. `previous` is the
    /// container's waiting state from the last try (an ImagePullBackOff keeps
    /// the pull error it backs off from in its message, as upstream).
    pub async fn ensure_image(
        &self,
        pod_uid: &str,
        cref: &ObjectReference,
        c: &Container,
        previous: Option<&Waiting>,
    ) -> Result<String, Waiting> {
        let image = c.image.clone().unwrap_or_default();
        let rec = self.recorder;
        let present = self.runtime.image_status(&image).await.ok().flatten();
        let policy = pull_policy(c);
        if policy == "Never" {
            return match present {
                Some(i) => Ok(i.id),
                None => {
                    let msg = format!(
                        "Container image {image:?} is not present with pull policy of Never"
                    );
                    rec.event(cref, EventType::Warning, "ErrImageNeverPull", msg.clone());
                    Err(("ErrImageNeverPull".into(), msg))
                }
            };
        }
        if policy == "IfNotPresent"
            && let Some(i) = present
        {
            rec.event(
                cref,
                EventType::Normal,
                "Pulled",
                format!("Container image {image:?} already present on machine"),
            );
            return Ok(i.id);
        }
        let key = backoff::image_key(pod_uid, &image);
        if self.backoff().is_in_backoff_since_update(&key, Utc::now()) {
            let prev = previous
                .filter(|(r, _)| r == backoff::ERR_IMAGE_PULL || r == backoff::IMAGE_PULL_BACK_OFF)
                .map(|(_, m)| m.clone());
            let msg = backoff::image_backoff_message(&image, None);
            rec.event(
                cref,
                EventType::Normal,
                backoff::EVENT_BACK_OFF,
                msg.clone(),
            );
            let waiting_msg = match prev {
                Some(p) if !p.starts_with("Back-off pulling image") => {
                    backoff::image_backoff_message(&image, Some(&p))
                }
                Some(p) => p,
                None => msg,
            };
            return Err((backoff::IMAGE_PULL_BACK_OFF.into(), waiting_msg));
        }
        rec.event(
            cref,
            EventType::Normal,
            "Pulling",
            format!("Pulling image {image:?}"),
        );
        let started = Instant::now();
        match self.runtime.pull_image(&image).await {
            Ok(r) => {
                let took = backoff::go_duration(started.elapsed());
                rec.event(
                    cref,
                    EventType::Normal,
                    "Pulled",
                    format!(
                        "Successfully pulled image {image:?} in {took} ({took} including waiting)"
                    ),
                );
                Ok(r)
            }
            // No registry is reachable from these machines: an image that is
            // present locally is used when a re-pull (policy Always) cannot reach one.
            Err(RuntimeError::ImagePull(_)) if present.is_some() => {
                Ok(present.map(|i| i.id).unwrap_or_default())
            }
            Err(e) => {
                let err = e.to_string();
                rec.event(
                    cref,
                    EventType::Warning,
                    "Failed",
                    format!("Failed to pull image {image:?}: {err}"),
                );
                rec.event(cref, EventType::Warning, "Failed", "Error: ErrImagePull");
                let now = Utc::now();
                self.backoff().next(&key, now, now);
                Err((backoff::ERR_IMAGE_PULL.into(), err))
            }
        }
    }
}

#[cfg(test)]
mod tests;
