//! Container lifecycle hooks (postStart, preStop): exec in the container,
//! httpGet against the pod (the prober's HTTP client), or sleep.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};

use crate::prober::{Outcome, http, resolve_container_port};
use crate::runtime::{Runtime, RuntimeError};

/// Runs `handler` for container `c` (runtime id `id`), at most `timeout`.
/// `Err` carries upstream's failure message.
pub async fn run(
    rt: &dyn Runtime,
    pod: &Pod,
    c: &Container,
    id: &str,
    pod_ip: &str,
    handler: &LifecycleHandler,
    timeout: Duration,
) -> Result<(), String> {
    let (name, ns, uid) = super::podspec::meta(pod);
    if let Some(e) = &handler.exec {
        let cmd = e.command.clone().unwrap_or_default();
        return match rt.exec_sync(id, &cmd, timeout).await {
            Ok(r) if r.exit_code == 0 => Ok(()),
            Ok(r) => Err(format!(
                "Exec lifecycle hook ({cmd:?}) for Container {:?} in Pod \"{name}_{ns}({uid})\" failed - error: command '{}' exited with {}: {}, message: {:?}",
                c.name,
                cmd.join(" "),
                r.exit_code,
                String::from_utf8_lossy(&r.stderr),
                String::from_utf8_lossy(&r.stdout),
            )),
            Err(RuntimeError::Timeout(_)) => Err(format!(
                "Exec lifecycle hook ({cmd:?}) for Container {:?} in Pod \"{name}_{ns}({uid})\" failed - error: command timed out, message: \"\"",
                c.name
            )),
            Err(e) => Err(format!(
                "Exec lifecycle hook ({cmd:?}) for Container {:?} in Pod \"{name}_{ns}({uid})\" failed - error: {e}, message: \"\"",
                c.name
            )),
        };
    }
    if let Some(h) = &handler.http_get {
        let port = resolve_container_port(&h.port, c)?;
        let target = http::HttpTarget::from_action(h, pod_ip, port)?;
        let (outcome, out) = http::probe(&target, timeout).await;
        return match outcome {
            Outcome::Success | Outcome::Warning => Ok(()),
            _ => Err(format!(
                "HTTP lifecycle hook ({}) for Container {:?} in Pod \"{name}_{ns}({uid})\" failed - error: {out}",
                h.path.clone().unwrap_or_default(),
                c.name
            )),
        };
    }
    if let Some(s) = &handler.sleep {
        let d = Duration::from_secs(s.seconds.max(0) as u64).min(timeout);
        tokio::time::sleep(d).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::FakeRuntime;
    use crate::runtime::{ContainerConfig, ExecResult, SandboxConfig};
    use k8s_openapi::api::core::v1::{ExecAction, SleepAction};

    #[tokio::test]
    async fn exec_hook_failure_is_worded_as_upstream() {
        let rt = FakeRuntime::new();
        rt.add_image("i");
        let sb = rt.run_sandbox(&SandboxConfig::default()).await.unwrap();
        let cfg = ContainerConfig {
            name: "app".into(),
            image: "i".into(),
            ..Default::default()
        };
        let id = rt
            .create_container(&sb, &cfg, &SandboxConfig::default())
            .await
            .unwrap();
        rt.start_container(&id).await.unwrap();
        rt.script_exec(
            "app",
            vec![
                Ok(ExecResult {
                    exit_code: 0,
                    ..Default::default()
                }),
                Ok(ExecResult {
                    exit_code: 2,
                    ..Default::default()
                }),
            ],
        );
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"}
        }))
        .unwrap();
        let c = Container {
            name: "app".into(),
            ..Default::default()
        };
        let h = LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec!["false".into()]),
            }),
            ..Default::default()
        };
        let t = Duration::from_secs(1);
        assert!(run(&rt, &pod, &c, &id, "", &h, t).await.is_ok());
        let err = run(&rt, &pod, &c, &id, "", &h, t).await.unwrap_err();
        assert!(
            err.starts_with("Exec lifecycle hook ([\"false\"]) for Container \"app\" in Pod \"p_ns(u)\" failed - error: command 'false' exited with 2"),
            "{err}"
        );
        let sleep = LifecycleHandler {
            sleep: Some(SleepAction { seconds: 5 }),
            ..Default::default()
        };
        let started = std::time::Instant::now();
        assert!(
            run(&rt, &pod, &c, &id, "", &sleep, Duration::from_millis(50))
                .await
                .is_ok()
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
