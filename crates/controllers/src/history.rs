//! ControllerRevision history for StatefulSets and DaemonSets (upstream
//! `pkg/controller/history`): each distinct pod template is kept as a
//! ControllerRevision named `<owner>-<hash>` whose `data` is the strategic
//! patch `{"spec":{"template":{…,"$patch":"replace"}}}` and whose `revision`
//! numbers the order templates were (re)applied in.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::Error;
use crate::replicaset::{controller_ref, owner_ref};

/// Upstream's `ControllerRevisionHashLabelKey` (also `apps.DefaultDaemonSetUniqueLabelKey`).
pub const REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// FNV-32a, upstream's revision hasher.
fn fnv32a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Drops nulls and empty objects/lists so absent and empty fields compare and
/// hash alike (Go's omitempty makes them indistinguishable on the wire).
fn prune(v: &mut Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => {
            m.retain(|_, x| !prune(x));
            m.is_empty()
        }
        Value::Array(a) => {
            a.iter_mut().for_each(|x| {
                prune(x);
            });
            a.is_empty()
        }
        _ => false,
    }
}

/// The revision data for a template: upstream's `getPatch`.
pub fn template_patch(t: &PodTemplateSpec) -> Value {
    let mut tv = serde_json::to_value(t).unwrap_or_default();
    prune(&mut tv);
    if !tv.is_object() {
        tv = json!({});
    }
    tv["$patch"] = json!("replace");
    json!({"spec": {"template": tv}})
}

/// The template a revision records (inverse of [`template_patch`]).
pub fn template_of(rev: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = rev.data.as_ref()?.0.pointer("/spec/template")?.clone();
    t.as_object_mut()?.remove("$patch");
    serde_json::from_value(t).ok()
}

fn normalized(data: &Value) -> Value {
    let mut v = data.clone();
    prune(&mut v);
    v
}

/// Upstream's `HashControllerRevision`: FNV-32a of the data, plus the
/// collision count when set, rendered with `rand.SafeEncodeString`'s alphabet.
pub fn hash(data: &Value, collision_count: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(&normalized(data)).unwrap_or_default();
    if let Some(c) = collision_count {
        bytes.extend_from_slice(c.to_string().as_bytes());
    }
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    fnv32a(&bytes)
        .to_string()
        .bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

/// Upstream's `EqualRevision`: same data (ignoring empty fields).
pub fn equal_data(rev: &ControllerRevision, data: &Value) -> bool {
    rev.data
        .as_ref()
        .is_some_and(|d| normalized(&d.0) == normalized(data))
}

/// Orders revisions by revision number, then creation time, then name
/// (upstream's `SortControllerRevisions`).
pub fn sort(revs: &mut [ControllerRevision]) {
    revs.sort_by(|a, b| {
        (
            a.revision,
            a.metadata.creation_timestamp.as_ref().map(|t| t.0),
            &a.metadata.name,
        )
            .cmp(&(
                b.revision,
                b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                &b.metadata.name,
            ))
    });
}

/// The revisions controlled by the owner with `uid`.
pub async fn list_owned(
    api: &Api<ControllerRevision>,
    uid: &str,
) -> Result<Vec<ControllerRevision>, Error> {
    let mut revs: Vec<ControllerRevision> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|r| controller_ref(&r.metadata).is_some_and(|o| o.uid == uid))
        .collect();
    sort(&mut revs);
    Ok(revs)
}

/// The outcome of [`ensure_update_revision`].
pub struct Revisions {
    /// Every owned revision, sorted, including the update revision.
    pub all: Vec<ControllerRevision>,
    pub update: ControllerRevision,
    /// The collision count after any hash collision was resolved.
    pub collision_count: i32,
}

/// Upstream's getStatefulSetRevisions/constructHistory core: the revision for
/// the owner's current template is the newest one if equal, an older equal one
/// renumbered to the next revision (a rollback), or a newly created one.
pub async fn ensure_update_revision<K: Resource<DynamicType = ()>>(
    api: &Api<ControllerRevision>,
    owner: &K,
    template: &PodTemplateSpec,
    mut revs: Vec<ControllerRevision>,
    collision_count: i32,
) -> Result<Revisions, Error> {
    let data = template_patch(template);
    let next = revs.last().map_or(1, |r| r.revision + 1);
    let equal: Vec<usize> = revs
        .iter()
        .enumerate()
        .filter(|(_, r)| equal_data(r, &data))
        .map(|(i, _)| i)
        .collect();
    let update_idx = match equal.last() {
        Some(&i) if i + 1 == revs.len() => i,
        Some(&i) => {
            let name = revs[i].metadata.name.clone().unwrap_or_default();
            let patch = json!({"revision": next});
            let updated = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            revs[i] = updated;
            sort(&mut revs);
            revs.iter()
                .position(|r| r.metadata.name.as_deref() == Some(&name))
                .unwrap_or(0)
        }
        None => {
            let (created, collisions) =
                create_revision(api, owner, template, &data, next, collision_count).await?;
            revs.push(created);
            sort(&mut revs);
            let idx = revs.len() - 1;
            return Ok(Revisions {
                update: revs[idx].clone(),
                all: revs,
                collision_count: collisions,
            });
        }
    };
    Ok(Revisions {
        update: revs[update_idx].clone(),
        all: revs,
        collision_count,
    })
}

/// Creates `<owner>-<hash>`; a same-named revision with other data is a hash
/// collision: bump the collision count and try the next name.
async fn create_revision<K: Resource<DynamicType = ()>>(
    api: &Api<ControllerRevision>,
    owner: &K,
    template: &PodTemplateSpec,
    data: &Value,
    revision: i64,
    mut collision_count: i32,
) -> Result<(ControllerRevision, i32), Error> {
    let owner_name = owner.meta().name.clone().unwrap_or_default();
    let owner_uid = owner.meta().uid.clone().unwrap_or_default();
    // Bounded: each collision needs an existing revision with that exact name.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let h = hash(data, (collision_count > 0).then_some(collision_count));
        let mut labels = template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(REVISION_HASH_LABEL.into(), h.clone());
        let name = format!("{owner_name}-{h}");
        let cr = ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: owner.meta().namespace.clone(),
                labels: Some(labels),
                owner_references: Some(vec![owner_ref(owner)]),
                ..ObjectMeta::default()
            },
            data: Some(RawExtension(data.clone())),
            revision,
        };
        match api.create(&PostParams::default(), &cr).await {
            Ok(c) => return Ok((c, collision_count)),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let existing = api.get(&name).await?;
                let ours = controller_ref(&existing.metadata).is_some_and(|o| o.uid == owner_uid);
                if ours && equal_data(&existing, data) {
                    return Ok((existing, collision_count));
                }
                if attempts >= 100 {
                    return Err(kube::Error::Api(e).into());
                }
                collision_count += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Deletes the oldest revisions that are not live (not current, update, or
/// used by a pod) beyond `limit` (upstream's truncateHistory).
pub async fn truncate(
    api: &Api<ControllerRevision>,
    revs: &[ControllerRevision],
    live: &[&str],
    limit: i32,
) -> Result<(), Error> {
    let dead: Vec<&ControllerRevision> = revs
        .iter()
        .filter(|r| !live.contains(&r.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    let excess = dead
        .len()
        .saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
    for r in dead.into_iter().take(excess) {
        let name = r.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn tmpl(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    fn rev(name: &str, n: i64, t: &PodTemplateSpec) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some(RawExtension(template_patch(t))),
            revision: n,
        }
    }

    #[test]
    fn patch_round_trips_and_marks_replace() {
        let t = tmpl("nginx:1");
        let p = template_patch(&t);
        assert_eq!(p["spec"]["template"]["$patch"], "replace");
        assert_eq!(template_of(&rev("a", 1, &t)), Some(t));
    }

    #[test]
    fn hash_depends_on_data_and_collisions() {
        let a = template_patch(&tmpl("nginx:1"));
        let b = template_patch(&tmpl("nginx:2"));
        assert_eq!(hash(&a, None), hash(&a.clone(), None));
        assert_ne!(hash(&a, None), hash(&b, None));
        assert_ne!(hash(&a, None), hash(&a, Some(1)));
        assert!(hash(&a, None).chars().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn equality_ignores_empty_fields() {
        let t = tmpl("nginx:1");
        let mut with_empty = template_patch(&t);
        with_empty["spec"]["template"]["spec"]["volumes"] = json!([]);
        with_empty["spec"]["template"]["metadata"]["annotations"] = json!({});
        assert!(equal_data(&rev("a", 1, &t), &with_empty));
        assert!(!equal_data(
            &rev("a", 1, &t),
            &template_patch(&tmpl("nginx:2"))
        ));
    }

    #[test]
    fn sorts_by_revision_number() {
        let t = tmpl("x");
        let mut revs = vec![rev("c", 3, &t), rev("a", 1, &t), rev("b", 2, &t)];
        sort(&mut revs);
        let names: Vec<_> = revs
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
    }
}
