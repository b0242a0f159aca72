//! Helpers for unit tests across the crate.

use std::path::{Path, PathBuf};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "berth-{tag}-{}-{}",
            std::process::id(),
            chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `files` (relative path, contents), making directories.
    pub fn write(&self, files: &[(&str, &str)]) {
        for (rel, text) in files {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use berth_runtime::events::{EventSink, EventSource, Recorder, RecorderOptions};
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, PersistentVolume, PersistentVolumeClaim, Secret,
};
use serde_json::Value;

use crate::objects::ObjectSource;
use crate::status::manager::{StatusWriter, WriteError};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Events a [`Recorder`] wrote, in order (aggregated repeats are not re-added).
#[derive(Clone, Default)]
pub struct RecordedEvents(Arc<Mutex<Vec<Event>>>);

impl RecordedEvents {
    /// `(reason, message)` of every event so far.
    pub fn reasons(&self) -> Vec<(String, String)> {
        lock(&self.0)
            .iter()
            .map(|e| {
                (
                    e.reason.clone().unwrap_or_default(),
                    e.message.clone().unwrap_or_default(),
                )
            })
            .collect()
    }
}

impl EventSink for RecordedEvents {
    async fn create(&self, event: &Event) -> Result<Event, berth_runtime::error::Error> {
        lock(&self.0).push(event.clone());
        Ok(event.clone())
    }

    async fn patch(&self, event: &Event, _: &Value) -> Result<Event, berth_runtime::error::Error> {
        Ok(event.clone())
    }
}

/// A recorder writing into memory, and what it wrote.
pub fn recorder() -> (Recorder, RecordedEvents) {
    let events = RecordedEvents::default();
    let rec = Recorder::with_sink(
        events.clone(),
        EventSource::new("kubelet", "node-1"),
        RecorderOptions::default(),
    );
    (rec, events)
}

/// ConfigMaps, Secrets, claims and volumes served from memory.
#[derive(Default)]
pub struct FakeObjects {
    pub config_maps: Mutex<BTreeMap<(String, String), ConfigMap>>,
    pub secrets: Mutex<BTreeMap<(String, String), Secret>>,
    pub claims: Mutex<BTreeMap<(String, String), PersistentVolumeClaim>>,
    pub volumes: Mutex<BTreeMap<String, PersistentVolume>>,
}

fn key(ns: &str, name: &str) -> (String, String) {
    (ns.to_string(), name.to_string())
}

#[async_trait::async_trait]
impl ObjectSource for FakeObjects {
    async fn config_map(&self, ns: &str, name: &str) -> Result<Option<ConfigMap>, String> {
        Ok(lock(&self.config_maps).get(&key(ns, name)).cloned())
    }
    async fn secret(&self, ns: &str, name: &str) -> Result<Option<Secret>, String> {
        Ok(lock(&self.secrets).get(&key(ns, name)).cloned())
    }
    async fn claim(&self, ns: &str, name: &str) -> Result<Option<PersistentVolumeClaim>, String> {
        Ok(lock(&self.claims).get(&key(ns, name)).cloned())
    }
    async fn volume(&self, name: &str) -> Result<Option<PersistentVolume>, String> {
        Ok(lock(&self.volumes).get(name).cloned())
    }
}

/// Records the status manager's writes; scripted failures answer the next ones.
#[derive(Default)]
pub struct RecordingWriter {
    patches: Mutex<Vec<(String, String, Value)>>,
    deletes: Mutex<Vec<(String, String, String)>>,
    failures: Mutex<VecDeque<WriteError>>,
}

impl RecordingWriter {
    /// Every status patch tried: namespace, name, status.
    pub fn patches(&self) -> Vec<(String, String, Value)> {
        lock(&self.patches).clone()
    }
    /// The last status sent.
    pub fn last_status(&self) -> Option<Value> {
        lock(&self.patches).last().map(|(_, _, v)| v.clone())
    }
    /// Every deletion confirmed: namespace, name, uid.
    pub fn deletes(&self) -> Vec<(String, String, String)> {
        lock(&self.deletes).clone()
    }
    pub fn fail_next(&self, e: WriteError) {
        lock(&self.failures).push_back(e);
    }
}

#[async_trait::async_trait]
impl StatusWriter for RecordingWriter {
    async fn patch_status(&self, ns: &str, name: &str, status: &Value) -> Result<(), WriteError> {
        lock(&self.patches).push((ns.into(), name.into(), status.clone()));
        lock(&self.failures).pop_front().map_or(Ok(()), Err)
    }
    async fn delete(&self, ns: &str, name: &str, uid: &str) -> Result<(), WriteError> {
        lock(&self.deletes).push((ns.into(), name.into(), uid.into()));
        lock(&self.failures).pop_front().map_or(Ok(()), Err)
    }
}
