//! `metadata.managedFields` decoded into per-manager field sets and encoded back
//! (apiserver's `managedfields/internal`: manager identifiers, ordering, the cap on
//! Update managers).

use serde_json::{Map, Value, json};

use super::fieldpath::FieldSet;
use super::{APPLY, SsaError, UPDATE};

/// Who owns a set of fields: upstream's manager identifier. Apply entries are one per
/// manager (and subresource) whatever the apiVersion; Update entries one per manager,
/// apiVersion and subresource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ManagerId {
    pub manager: String,
    pub operation: String,
    /// Empty for Apply.
    pub api_version: String,
    pub subresource: String,
}

impl ManagerId {
    pub fn new(manager: &str, operation: &str, api_version: &str, subresource: &str) -> ManagerId {
        ManagerId {
            manager: manager.to_string(),
            operation: operation.to_string(),
            api_version: if operation == APPLY {
                String::new()
            } else {
                api_version.to_string()
            },
            subresource: subresource.to_string(),
        }
    }

    /// The identifier as upstream serialises it (the JSON of the entry without time,
    /// fields and, for Apply, apiVersion); conflict messages sort managers by it.
    pub fn identifier(&self) -> String {
        let mut m = Map::new();
        for (k, v) in [
            ("manager", &self.manager),
            ("operation", &self.operation),
            ("apiVersion", &self.api_version),
            ("subresource", &self.subresource),
        ] {
            if !v.is_empty() {
                m.insert(k.into(), Value::String(v.clone()));
            }
        }
        Value::Object(m).to_string()
    }

    /// How conflict messages name the manager: `"m"`, `"m" using apps/v1`,
    /// `"m" with subresource "status" using apps/v1`.
    pub fn describe(&self) -> String {
        let mut s = quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {}", quote(&self.subresource));
        }
        if self.operation == UPDATE {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// Go's `%q` for the printable strings managers are.
pub fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// One decoded entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: ManagerId,
    /// The apiVersion the fields are expressed in.
    pub api_version: String,
    pub time: Option<String>,
    pub set: FieldSet,
}

/// The decoded `managedFields` of an object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Managed {
    pub entries: Vec<Entry>,
}

impl Managed {
    pub fn get(&self, id: &ManagerId) -> Option<&Entry> {
        self.entries.iter().find(|e| &e.id == id)
    }

    pub fn get_mut(&mut self, id: &ManagerId) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|e| &e.id == id)
    }

    pub fn remove(&mut self, id: &ManagerId) -> Option<Entry> {
        let i = self.entries.iter().position(|e| &e.id == id)?;
        Some(self.entries.remove(i))
    }

    pub fn put(&mut self, entry: Entry) {
        match self.get_mut(&entry.id) {
            Some(e) => *e = entry,
            None => self.entries.push(entry),
        }
    }

    /// Decodes `metadata.managedFields` (absent or null: no managers).
    pub fn decode(obj: &Value) -> Result<Managed, SsaError> {
        let list = match obj.pointer("/metadata/managedFields") {
            None | Some(Value::Null) => return Ok(Managed::default()),
            Some(Value::Array(l)) => l,
            Some(_) => {
                return Err(SsaError::ManagedFields(
                    "managedFields must be a list".into(),
                ));
            }
        };
        let mut out = Managed::default();
        for e in list {
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let operation = s("operation");
            if operation != APPLY && operation != UPDATE {
                return Err(SsaError::ManagedFields(
                    "operation must be `Apply` or `Update`".into(),
                ));
            }
            let api_version = s("apiVersion");
            if api_version.is_empty() {
                return Err(SsaError::ManagedFields(
                    "apiVersion must not be empty".into(),
                ));
            }
            let fields_type = s("fieldsType");
            if fields_type != "FieldsV1" {
                return Err(SsaError::ManagedFields(format!(
                    "invalid fieldsType {fields_type:?}: only FieldsV1 is supported"
                )));
            }
            let set = match e.get("fieldsV1") {
                None | Some(Value::Null) => FieldSet::new(),
                Some(v) => FieldSet::from_fields_v1(v)
                    .map_err(|err| SsaError::ManagedFields(err.to_string()))?,
            };
            let id = ManagerId::new(&s("manager"), &operation, &api_version, &s("subresource"));
            let time = e.get("time").and_then(Value::as_str).map(str::to_string);
            let entry = Entry {
                id,
                api_version,
                time,
                set,
            };
            // Duplicates: upstream keeps the last one decoded.
            out.put(entry);
        }
        Ok(out)
    }

    /// Encodes into `metadata.managedFields` (removed when no entry is left), in
    /// upstream's order: Apply before Update, then by time, manager, apiVersion and
    /// subresource. Entries with empty sets are dropped.
    pub fn encode_into(&self, obj: &mut Value) {
        let mut entries: Vec<&Entry> = self.entries.iter().filter(|e| !e.set.is_empty()).collect();
        entries.sort_by(|a, b| {
            a.id.operation
                .cmp(&b.id.operation)
                .then_with(|| {
                    a.time
                        .as_deref()
                        .unwrap_or("")
                        .cmp(b.time.as_deref().unwrap_or(""))
                })
                .then_with(|| a.id.manager.cmp(&b.id.manager))
                .then_with(|| a.api_version.cmp(&b.api_version))
                .then_with(|| a.id.subresource.cmp(&b.id.subresource))
        });
        let list: Vec<Value> = entries
            .iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.id.manager));
                m.insert("operation".into(), json!(e.id.operation));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = &e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.set.to_fields_v1());
                if !e.id.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.id.subresource));
                }
                Value::Object(m)
            })
            .collect();
        let Some(obj) = obj.as_object_mut() else {
            return;
        };
        if list.is_empty() {
            if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
                meta.shift_remove("managedFields");
            }
            return;
        }
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }

    /// Merges the oldest Update entries into `ancient-changes` entries (one per
    /// apiVersion) while there are more than `max` Update managers.
    pub fn cap_update_managers(&mut self, max: usize) {
        let mut updaters: Vec<(Option<String>, String, ManagerId)> = self
            .entries
            .iter()
            .filter(|e| e.id.operation == UPDATE)
            .map(|e| (e.time.clone(), e.id.identifier(), e.id.clone()))
            .collect();
        if updaters.len() <= max {
            return;
        }
        updaters.sort();
        let mut first_per_version: Vec<(String, ManagerId)> = Vec::new();
        let mut length = updaters.len();
        for (time, _, id) in updaters {
            if length <= max {
                break;
            }
            let Some(entry) = self.get(&id).cloned() else {
                continue;
            };
            let version = entry.api_version.clone();
            let bucket = ManagerId::new(ANCIENT_CHANGES, UPDATE, &version, "");
            match first_per_version.iter().find(|(v, _)| *v == version) {
                Some((_, first)) => {
                    if self.get(&bucket).is_none()
                        && let Some(mut f) = self.remove(first)
                    {
                        f.id = bucket.clone();
                        self.put(f);
                    }
                    if let Some(b) = self.get_mut(&bucket) {
                        b.set = entry.set.union(&b.set);
                        b.time = time;
                    }
                    self.remove(&id);
                    length -= 1;
                }
                None => first_per_version.push((version, id)),
            }
        }
    }
}

/// The manager upstream gives the merged oldest Update entries.
pub const ANCIENT_CHANGES: &str = "ancient-changes";
