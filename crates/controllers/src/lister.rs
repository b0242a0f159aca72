//! Reading one object as upstream's controllers do: from what the shared
//! informers list, not with a GET. Their `system:controller:*` roles often
//! hold no `get` (the root CA publisher may only create and update
//! ConfigMaps), and a controller's lists go out with the controller-manager's
//! credentials (see `clientbuilder`), so a list narrowed to the one name is
//! what such a controller may read.

use kube::Api;
use kube::api::ListParams;

/// The object `name` of `api`, if any, read through a list.
pub async fn get<K>(api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let lp = ListParams::default().fields(&format!("metadata.name={name}"));
    Ok(api.list(&lp).await?.items.into_iter().next())
}
