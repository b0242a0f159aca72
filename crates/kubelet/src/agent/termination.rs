//! Termination messages (`terminationMessagePath`,
//! `terminationMessagePolicy`), as upstream's kubelet keeps them: every
//! container instance gets an empty node file bind-mounted at its
//! `terminationMessagePath` (`/dev/termination-log` by default); once the
//! container has exited, what it wrote there (the last 4096 bytes) is the
//! message of its `terminated` state. With `FallbackToLogsOnError`, a failed
//! container that wrote nothing gets the tail of its log instead (the last 80
//! lines, at most 2048 bytes).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Container;

use crate::server::logs::{LogOptions, Writer, tail_offset};

/// Upstream's MaxContainerTerminationMessageLength.
pub const MAX_MESSAGE: u64 = 4096;
/// Upstream's MaxContainerTerminationMessageLogLines / LogLength.
pub const MAX_LOG_LINES: u64 = 80;
pub const MAX_LOG_BYTES: usize = 2048;

/// The node file of one container instance.
pub fn host_path(pod_dir: &Path, container: &str, attempt: u32) -> PathBuf {
    pod_dir
        .join("containers")
        .join(container)
        .join(format!("termination-log-{attempt}"))
}

/// The path inside the container; empty means none is mounted.
pub fn container_path(c: &Container) -> &str {
    c.termination_message_path.as_deref().unwrap_or("")
}

/// Creates the empty, world-writable file before the container (any user the
/// container runs as may write its message).
pub fn prepare(file: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(file, b"")?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o666))
}

/// What an exited container's message is, given its exit and files.
pub struct Exited<'a> {
    pub container: &'a Container,
    pub exit_code: i32,
    /// The runtime's reason (`ContainerCannotRun` never falls back to logs).
    pub reason: &'a str,
    pub message_file: &'a Path,
    pub log_file: &'a Path,
}

/// The termination message, or None when there is none.
pub fn message(e: &Exited) -> Option<String> {
    let fallback = e.container.termination_message_policy.as_deref()
        == Some("FallbackToLogsOnError")
        && e.exit_code != 0
        && e.reason != "ContainerCannotRun";
    let from_file = if container_path(e.container).is_empty() {
        None
    } else {
        match read_last(e.message_file, MAX_MESSAGE) {
            Ok(data) => Some(data),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => {
                return Some(format!(
                    "Error on reading termination log {}: {err}",
                    e.message_file.display()
                ));
            }
        }
    };
    let text = match from_file {
        Some(data) if !data.is_empty() => String::from_utf8_lossy(&data).into_owned(),
        _ if fallback => log_tail(e.log_file),
        _ => String::new(),
    };
    (!text.is_empty()).then_some(text)
}

/// The last `max` bytes of a file.
fn read_last(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(max)))?;
    let mut data = Vec::new();
    f.take(max).read_to_end(&mut data)?;
    Ok(data)
}

/// The last 80 lines of a CRI log file as the log endpoint prints them, cut
/// to their last 2048 bytes.
fn log_tail(path: &Path) -> String {
    let Ok(data) = std::fs::read(path) else {
        return String::new();
    };
    let start = tail_offset(&data, MAX_LOG_LINES);
    let mut w = Writer::new(LogOptions::default());
    let mut out = Vec::new();
    for line in data[start..].split_inclusive(|b| *b == b'\n') {
        out.extend(w.line(line).unwrap_or_default());
    }
    let cut = out.len().saturating_sub(MAX_LOG_BYTES);
    String::from_utf8_lossy(&out[cut..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;
    use serde_json::json;

    fn container(policy: &str, path: &str) -> Container {
        serde_json::from_value(json!({
            "name": "c", "terminationMessagePath": path, "terminationMessagePolicy": policy
        }))
        .unwrap()
    }

    #[test]
    fn messages_from_the_file_or_the_log_tail() {
        let dir = TempDir::new("termination");
        let written = dir.path().join("written");
        let empty = dir.path().join("empty");
        let long = dir.path().join("long");
        let log = dir.path().join("0.log");
        std::fs::write(&written, "bye\n").unwrap();
        std::fs::write(&empty, "").unwrap();
        std::fs::write(&long, "x".repeat(5000) + "END").unwrap();
        let mut lines = String::new();
        for i in 0..100 {
            lines.push_str(&format!(
                "2026-12-02T00:00:00Z stderr F line {i} {}\n",
                "x".repeat(40)
            ));
        }
        std::fs::write(&log, lines).unwrap();
        let missing = dir.path().join("missing");
        let file = "File";
        let logs = "FallbackToLogsOnError";
        let tail = {
            let all: String = (20..100)
                .map(|i| format!("line {i} {}\n", "x".repeat(40)))
                .collect();
            all[all.len() - MAX_LOG_BYTES..].to_string()
        };
        type Case<'a> = (&'a str, &'a str, i32, &'a str, &'a Path, Option<String>);
        let cases: Vec<Case> = vec![
            (
                file,
                "/dev/termination-log",
                0,
                "Completed",
                &written,
                Some("bye\n".into()),
            ),
            (file, "/dev/termination-log", 1, "Error", &empty, None),
            (
                logs,
                "/dev/termination-log",
                1,
                "Error",
                &written,
                Some("bye\n".into()),
            ),
            (
                logs,
                "/dev/termination-log",
                1,
                "Error",
                &empty,
                Some(tail.clone()),
            ),
            (logs, "/dev/termination-log", 0, "Completed", &empty, None),
            (
                logs,
                "/dev/termination-log",
                1,
                "ContainerCannotRun",
                &empty,
                None,
            ),
            (logs, "", 2, "Error", &missing, Some(tail.clone())),
            (
                logs,
                "/dev/termination-log",
                2,
                "Error",
                &missing,
                Some(tail),
            ),
            (file, "/dev/termination-log", 0, "Completed", &missing, None),
        ];
        for (policy, path, exit_code, reason, f, want) in cases {
            let c = container(policy, path);
            let got = message(&Exited {
                container: &c,
                exit_code,
                reason,
                message_file: f,
                log_file: &log,
            });
            assert_eq!(
                got, want,
                "{policy} {path:?} exit {exit_code} {reason} {f:?}"
            );
        }
        let c = container(file, "/dev/termination-log");
        let got = message(&Exited {
            container: &c,
            exit_code: 0,
            reason: "Completed",
            message_file: &long,
            log_file: &log,
        })
        .unwrap();
        assert_eq!(got.len(), MAX_MESSAGE as usize, "the last 4096 bytes");
        assert!(got.ends_with("END"));
    }

    #[test]
    fn the_file_is_writable_by_anyone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("termination-prepare");
        let f = host_path(dir.path(), "c", 3);
        prepare(&f).unwrap();
        assert!(f.ends_with("containers/c/termination-log-3"));
        let mode = std::fs::metadata(&f).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o666);
    }
}
