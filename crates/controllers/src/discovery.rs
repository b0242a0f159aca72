//! API discovery that survives a failing group: a remote APIService whose
//! server is down answers 503 for its group-version, and kube-rs's `Discovery`
//! then fails as a whole. Upstream's controllers (garbage collector, namespace
//! deletion) go on with the groups that answered and remember which did not.

use kube::discovery::Discovery;

/// Every group that answered, and the names of those that did not.
pub struct Discovered {
    pub discovery: Discovery,
    pub failed: Vec<String>,
}

/// Runs discovery; when a group fails, finds which ones and leaves them out.
pub async fn run(client: &kube::Client) -> Result<Discovered, kube::Error> {
    match Discovery::new(client.clone()).run().await {
        Ok(discovery) => {
            return Ok(Discovered {
                discovery,
                failed: Vec::new(),
            });
        }
        Err(e) => tracing::debug!(error = %e, "discovery failed; finding the failing groups"),
    }
    let mut failed = Vec::new();
    for g in client.list_api_groups().await?.groups {
        if kube::discovery::group(client, &g.name).await.is_err() {
            failed.push(g.name);
        }
    }
    let skip: Vec<&str> = failed.iter().map(String::as_str).collect();
    let discovery = Discovery::new(client.clone()).exclude(&skip).run().await?;
    Ok(Discovered { discovery, failed })
}
