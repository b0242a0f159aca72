//! Exec probes: the command runs in the container through the runtime's
//! ExecSync with the probe's timeout. Exit 0 is success, any other exit code
//! a failure with the command's output; running past the timeout is a
//! failure (upstream since 1.20, `ExecProbeTimeout`) with the message
//! `command "<cmd>" timed out`.

use std::sync::Arc;
use std::time::Duration;

use super::{MAX_OUTPUT, Outcome};
use crate::runtime::{Runtime, RuntimeError};

/// Output of a command run to completion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

/// Why a command did not run to completion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    #[error("timed out")]
    Timeout,
    #[error("{0}")]
    Other(String),
}

/// Runs a command in a container and waits for it (what the node agent
/// provides over its runtime's ExecSync).
#[async_trait::async_trait]
pub trait ExecInContainer: Send + Sync + 'static {
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, ExecError>;
}

/// [`ExecInContainer`] over the node agent's [`Runtime`]. Container ids may
/// be given as the API shows them (`containerd://<id>`).
#[derive(Clone)]
pub struct RuntimeExec(pub Arc<dyn Runtime>);

/// `containerd://abc` → `abc`.
pub fn strip_runtime_prefix(id: &str) -> &str {
    id.split_once("://").map_or(id, |(_, rest)| rest)
}

#[async_trait::async_trait]
impl ExecInContainer for RuntimeExec {
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, ExecError> {
        match self
            .0
            .exec_sync(strip_runtime_prefix(container_id), cmd, timeout)
            .await
        {
            Ok(r) => Ok(ExecOutput {
                stdout: r.stdout,
                stderr: r.stderr,
                exit_code: r.exit_code,
            }),
            Err(RuntimeError::Timeout(_)) => Err(ExecError::Timeout),
            Err(e) => Err(ExecError::Other(e.to_string())),
        }
    }
}

/// Runs an exec probe: (outcome, output, error). An error other than a
/// timeout means the probe could not run (upstream: Unknown, retried).
pub async fn probe(
    exec: &dyn ExecInContainer,
    container_id: &str,
    cmd: &[String],
    timeout: Duration,
) -> (Outcome, String, Option<String>) {
    match exec.exec_sync(container_id, cmd, timeout).await {
        Ok(out) => {
            // stdout then stderr, as the kubelet appends them, limited.
            let mut data = out.stdout;
            data.extend_from_slice(&out.stderr);
            data.truncate(MAX_OUTPUT);
            let text = String::from_utf8_lossy(&data).into_owned();
            if out.exit_code == 0 {
                (Outcome::Success, text, None)
            } else {
                (Outcome::Failure, text, None)
            }
        }
        Err(ExecError::Timeout) => (
            Outcome::Failure,
            format!("command {:?} timed out", cmd.join(" ")),
            None,
        ),
        Err(ExecError::Other(e)) => (Outcome::Unknown, String::new(), Some(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::fake::FakeRuntime;

    struct Scripted(Result<ExecOutput, ExecError>);

    #[async_trait::async_trait]
    impl ExecInContainer for Scripted {
        async fn exec_sync(
            &self,
            _: &str,
            _: &[String],
            _: Duration,
        ) -> Result<ExecOutput, ExecError> {
            self.0.clone()
        }
    }

    fn out(stdout: &str, stderr: &str, code: i32) -> Result<ExecOutput, ExecError> {
        Ok(ExecOutput {
            stdout: stdout.into(),
            stderr: stderr.into(),
            exit_code: code,
        })
    }

    #[tokio::test]
    async fn outcomes() {
        let cmd: Vec<String> = vec!["sh".into(), "-c".into(), "sleep 10".into()];
        let cases = [
            (out("ok\n", "", 0), (Outcome::Success, "ok\n", None)),
            (out("", "", 1), (Outcome::Failure, "", None)),
            (out("out ", "err", 2), (Outcome::Failure, "out err", None)),
            (
                Err(ExecError::Timeout),
                (
                    Outcome::Failure,
                    r#"command "sh -c sleep 10" timed out"#,
                    None,
                ),
            ),
            (
                Err(ExecError::Other("container not running".into())),
                (Outcome::Unknown, "", Some("container not running")),
            ),
        ];
        for (answer, (o, text, err)) in cases {
            let got = probe(
                &Scripted(answer.clone()),
                "c1",
                &cmd,
                Duration::from_secs(1),
            )
            .await;
            assert_eq!(
                got,
                (o, text.to_string(), err.map(String::from)),
                "{answer:?}"
            );
        }
    }

    #[tokio::test]
    async fn output_is_limited() {
        let big = "x".repeat(MAX_OUTPUT + 100);
        let (_, text, _) = probe(
            &Scripted(out(&big, "tail", 1)),
            "c",
            &[],
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(text.len(), MAX_OUTPUT);
    }

    #[tokio::test]
    async fn adapter_over_the_runtime() {
        use crate::runtime::{ContainerConfig, ExecResult, SandboxConfig};
        let rt = Arc::new(FakeRuntime::new());
        rt.add_image("busybox:latest");
        let sb = rt.run_sandbox(&SandboxConfig::default()).await.unwrap();
        let cfg = ContainerConfig {
            name: "app".into(),
            image: "busybox:latest".into(),
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
                    stdout: b"fine".to_vec(),
                    stderr: vec![],
                    exit_code: 0,
                }),
                Ok(ExecResult {
                    stdout: vec![],
                    stderr: b"no file".to_vec(),
                    exit_code: 1,
                }),
                Err(RuntimeError::Timeout(Duration::from_secs(1))),
            ],
        );
        let exec = RuntimeExec(rt.clone());
        let api_id = format!("containerd://{id}");
        let cmd: Vec<String> = vec!["test".into(), "-f".into(), "/tmp/healthy".into()];
        let t = Duration::from_secs(1);
        assert_eq!(
            probe(&exec, &api_id, &cmd, t).await,
            (Outcome::Success, "fine".into(), None)
        );
        assert_eq!(
            probe(&exec, &api_id, &cmd, t).await,
            (Outcome::Failure, "no file".into(), None)
        );
        assert_eq!(
            probe(&exec, &api_id, &cmd, t).await,
            (
                Outcome::Failure,
                r#"command "test -f /tmp/healthy" timed out"#.into(),
                None
            )
        );
        assert!(
            rt.calls()
                .contains(&format!("exec_sync {id} test -f /tmp/healthy"))
        );
        // A container the runtime does not know: the probe errored, not failed.
        let (o, _, err) = probe(&exec, "containerd://nope", &cmd, t).await;
        assert_eq!(o, Outcome::Unknown);
        assert!(err.is_some());
        assert_eq!(strip_runtime_prefix("abc"), "abc");
    }
}
