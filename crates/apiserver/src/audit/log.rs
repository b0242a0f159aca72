//! The log backend (`--audit-log-path`): one JSON event a line, written by
//! one thread fed through a bounded channel, to standard output (`-`) or to a
//! file rotated as upstream's lumberjack rotates it (`--audit-log-maxsize`,
//! `--audit-log-maxbackup`, `--audit-log-maxage`; backups named
//! `<name>-<UTC 2006-01-02T15-04-05.000><ext>`).
//!
//! When the channel is full (the disk slower than the requests) a request
//! waits for room before it goes on: upstream's default `blocking` mode for
//! the log backend, where no event is dropped. The channel holds
//! [`BUFFER_EVENTS`] events (upstream's batch buffer size), so bursts do not
//! wait on the disk.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDateTime, Utc};
use tokio::sync::mpsc;

use super::event::{Pending, micro_time};

/// Events queued for the writer before requests wait.
pub const BUFFER_EVENTS: usize = 10_000;

/// Bytes of events gathered before a write to the file.
const WRITE_BUFFER: usize = 64 * 1024;

/// lumberjack's backup timestamp (Go's `2006-01-02T15-04-05.000`).
const BACKUP_TIME_FORMAT: &str = "%Y-%m-%dT%H-%M-%S%.3f";

/// When and how a log file is rotated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate before a write would pass this size; 0 never rotates
    /// (upstream's `--audit-log-maxsize 0`).
    pub max_size_bytes: u64,
    /// Remove backups older than this many days (0: keep).
    pub max_age_days: u32,
    /// Keep at most this many backups (0: all).
    pub max_backups: u32,
}

type Clock = Box<dyn Fn() -> DateTime<Utc> + Send>;

/// An audit log file (lumberjack's `Logger`).
pub struct LogFile {
    path: PathBuf,
    rotation: Rotation,
    file: Option<BufWriter<File>>,
    size: u64,
    clock: Clock,
}

impl LogFile {
    /// Makes sure the file can be written (upstream's `ensureLogFile`: the
    /// directory 0700 and the file 0600, created when missing).
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<LogFile> {
        Self::open_with_clock(path, rotation, Box::new(Utc::now))
    }

    pub fn open_with_clock(path: &Path, rotation: Rotation, clock: Clock) -> io::Result<LogFile> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        Ok(LogFile {
            path: path.to_path_buf(),
            rotation,
            file: None,
            size: 0,
            clock,
        })
    }

    /// Writes one line, rotating first when it would not fit.
    pub fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let len = line.len() as u64;
        let max = self.rotation.max_size_bytes;
        if max > 0 && len > max {
            return Err(io::Error::other(format!(
                "write length {len} exceeds maximum file size {max}"
            )));
        }
        if self.file.is_none() {
            self.open_existing_or_new(len)?;
        }
        if max > 0 && self.size + len > max {
            self.rotate()?;
        }
        let Some(f) = self.file.as_mut() else {
            return Err(io::Error::other("audit log file is not open"));
        };
        f.write_all(line)?;
        self.size += len;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }

    fn open_existing_or_new(&mut self, len: u64) -> io::Result<()> {
        self.mill();
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return self.open_new(),
            Err(e) => return Err(e),
        };
        let max = self.rotation.max_size_bytes;
        if max > 0 && meta.len() + len >= max {
            return self.rotate();
        }
        match OpenOptions::new().append(true).open(&self.path) {
            Ok(f) => {
                self.file = Some(BufWriter::with_capacity(WRITE_BUFFER, f));
                self.size = meta.len();
                Ok(())
            }
            Err(_) => self.open_new(),
        }
    }

    /// Renames the current file to its backup name and starts a new one
    /// with the same mode (lumberjack's `openNew`).
    fn open_new(&mut self) -> io::Result<()> {
        let mut mode = 0o600;
        if let Ok(meta) = std::fs::metadata(&self.path) {
            mode = meta.permissions().mode() & 0o7777;
            std::fs::rename(&self.path, self.backup_name())?;
        }
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(mode)
            .open(&self.path)?;
        self.file = Some(BufWriter::with_capacity(WRITE_BUFFER, f));
        self.size = 0;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        if let Some(mut f) = self.file.take() {
            f.flush()?;
        }
        self.open_new()?;
        self.mill();
        Ok(())
    }

    fn prefix_and_ext(&self) -> (String, String) {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Go's filepath.Ext: from the last dot of the base name.
        let (stem, ext) = match name.rfind('.') {
            Some(i) => (name[..i].to_string(), name[i..].to_string()),
            None => (name.clone(), String::new()),
        };
        (format!("{stem}-"), ext)
    }

    fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    fn backup_name(&self) -> PathBuf {
        let (prefix, ext) = self.prefix_and_ext();
        let stamp = (self.clock)().format(BACKUP_TIME_FORMAT);
        self.dir().join(format!("{prefix}{stamp}{ext}"))
    }

    /// The backups, newest first (lumberjack's `oldLogFiles`).
    pub fn backups(&self) -> io::Result<Vec<(DateTime<Utc>, PathBuf)>> {
        let (prefix, ext) = self.prefix_and_ext();
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.dir())? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(stamp) = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(&ext))
            else {
                continue;
            };
            if let Ok(t) = NaiveDateTime::parse_from_str(stamp, BACKUP_TIME_FORMAT) {
                out.push((t.and_utc(), entry.path()));
            }
        }
        out.sort_by_key(|b| std::cmp::Reverse(b.0));
        Ok(out)
    }

    /// Removes backups past `max_backups` and older than `max_age_days`
    /// (lumberjack's `millRunOnce`, here on the writer thread).
    fn mill(&self) {
        let r = self.rotation;
        if r.max_backups == 0 && r.max_age_days == 0 {
            return;
        }
        let mut files = match self.backups() {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "listing audit log backups");
                return;
            }
        };
        let mut remove = Vec::new();
        if r.max_backups > 0 && files.len() > r.max_backups as usize {
            remove.extend(files.split_off(r.max_backups as usize));
        }
        if r.max_age_days > 0 {
            let cutoff = (self.clock)() - chrono::Duration::days(i64::from(r.max_age_days));
            remove.extend(files.into_iter().filter(|(t, _)| *t < cutoff));
        }
        for (_, path) in remove {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "removing an old audit log");
            }
        }
    }
}

/// Where events go.
pub enum Output {
    /// Standard output, written a batch at a time.
    Stdout(BufWriter<io::Stdout>),
    File(LogFile),
    /// Handed to a channel (tests and benchmarks of the request path).
    Channel(std::sync::mpsc::Sender<super::event::Event>),
}

impl Output {
    pub fn stdout() -> Output {
        Output::Stdout(BufWriter::with_capacity(WRITE_BUFFER, io::stdout()))
    }

    fn write(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            Output::Stdout(w) => w.write_all(line),
            Output::File(f) => f.write_line(line),
            Output::Channel(_) => Ok(()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Stdout(w) => w.flush(),
            Output::File(f) => f.flush(),
            Output::Channel(_) => Ok(()),
        }
    }
}

/// The request side of the backend.
#[derive(Clone)]
pub struct Sink {
    tx: mpsc::Sender<Box<Pending>>,
}

impl Sink {
    /// Queues an event, waiting while the queue is full (blocking mode).
    pub async fn send(&self, p: Pending) {
        // Closed only once the writer is gone (shutdown): nothing to do then.
        let _ = self.tx.send(Box::new(p)).await;
    }

    /// Queues an event from code that cannot wait (a body being dropped):
    /// when the queue is full a task waits for room instead.
    pub fn send_now(&self, p: Pending) {
        match self.tx.try_send(Box::new(p)) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(p)) => {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    let tx = self.tx.clone();
                    rt.spawn(async move {
                        let _ = tx.send(p).await;
                    });
                }
            }
        }
    }
}

/// Starts the writer thread; it ends when every [`Sink`] is gone.
pub fn spawn(mut out: Output, buffer: usize) -> Sink {
    let (tx, mut rx) = mpsc::channel::<Box<Pending>>(buffer.max(1));
    let spawned = std::thread::Builder::new()
        .name("audit-log".into())
        .spawn(move || {
            let mut line = Vec::with_capacity(4096);
            while let Some(first) = rx.blocking_recv() {
                write_event(&mut out, &mut line, *first);
                // Whatever follows within a millisecond joins this write: one
                // flush (and one wake-up of this thread) per batch, not per event.
                loop {
                    while let Ok(p) = rx.try_recv() {
                        write_event(&mut out, &mut line, *p);
                    }
                    std::thread::sleep(BATCH_WAIT);
                    if rx.is_empty() {
                        break;
                    }
                }
                if let Err(e) = out.flush() {
                    tracing::error!(error = %e, "Error in audit plugin 'log': flushing");
                }
            }
            let _ = out.flush();
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "starting the audit log writer: no audit events will be written");
    }
    Sink { tx }
}

/// How long the writer waits for more events before it flushes.
const BATCH_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

fn write_event(out: &mut Output, line: &mut Vec<u8>, p: Pending) {
    let ev = p.complete();
    if let Output::Channel(tx) = out {
        let _ = tx.send(ev);
        return;
    }
    line.clear();
    if let Err(e) = serde_json::to_writer(&mut *line, &ev) {
        tracing::error!(error = %e, audit_id = %ev.audit_id, "Error in audit plugin 'log': encoding an event");
        return;
    }
    line.push(b'\n');
    if let Err(e) = out.write(line) {
        tracing::error!(
            error = %e,
            audit_id = %ev.audit_id,
            stage = ?ev.stage,
            at = %micro_time(&ev.stage_timestamp),
            "Error in audit plugin 'log' affecting 1 audit events"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "berth-audit-{tag}-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    /// A clock the test moves.
    fn clock(start: &str) -> (Arc<Mutex<DateTime<Utc>>>, Clock) {
        let t = Arc::new(Mutex::new(
            DateTime::parse_from_rfc3339(start)
                .expect("time")
                .with_timezone(&Utc),
        ));
        let c = t.clone();
        (t, Box::new(move || *c.lock().expect("clock")))
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn open_creates_the_file_and_directory_private() {
        let d = temp_dir("open");
        let path = d.join("logs/audit.log");
        LogFile::open(
            &path,
            Rotation {
                max_size_bytes: 0,
                max_age_days: 0,
                max_backups: 0,
            },
        )
        .expect("open");
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&d.join("logs")), 0o700);
        std::fs::remove_dir_all(&d).ok();
    }

    /// lumberjack's rotation, one write at a time: (what is written, the files
    /// after it). Lines are 10 bytes against a 25-byte limit.
    #[test]
    fn rotation_names_and_sizes() {
        let d = temp_dir("rotate");
        let path = d.join("audit.log");
        let (now, clk) = clock("2026-12-02T19:04:40.123Z");
        let mut f = LogFile::open_with_clock(
            &path,
            Rotation {
                max_size_bytes: 25,
                max_age_days: 0,
                max_backups: 0,
            },
            clk,
        )
        .expect("open");
        let line = b"012345678\n";
        let steps: [(&str, &[&str]); 4] = [
            ("2026-12-02T19:04:40.123Z", &["audit.log"]),
            ("2026-12-02T19:04:41.000Z", &["audit.log"]),
            // 30 > 25: the full file becomes a backup named by the time of rotation.
            (
                "2026-12-02T19:04:42.500Z",
                &["audit-2026-12-02T19-04-42.500.log", "audit.log"],
            ),
            (
                "2026-12-02T19:04:43.000Z",
                &["audit-2026-12-02T19-04-42.500.log", "audit.log"],
            ),
        ];
        for (t, want) in steps {
            *now.lock().expect("clock") = DateTime::parse_from_rfc3339(t)
                .expect("t")
                .with_timezone(&Utc);
            f.write_line(line).expect("write");
            f.flush().expect("flush");
            assert_eq!(names(&d), want, "after the write at {t}");
        }
        let backup = std::fs::read(d.join("audit-2026-12-02T19-04-42.500.log")).expect("backup");
        assert_eq!(backup.len(), 20);
        assert_eq!(std::fs::read(&path).expect("current").len(), 20);
        // A line over the limit is refused with lumberjack's message.
        let err = f.write_line(&[b'x'; 26]).expect_err("too long");
        assert_eq!(
            err.to_string(),
            "write length 26 exceeds maximum file size 25"
        );
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn reopening_appends_or_rotates_a_full_file() {
        let d = temp_dir("reopen");
        let path = d.join("audit.json.log");
        std::fs::write(&path, b"0123456789").expect("seed");
        let rot = Rotation {
            max_size_bytes: 25,
            max_age_days: 0,
            max_backups: 0,
        };
        let (_, clk) = clock("2026-01-01T00:00:00Z");
        let mut f = LogFile::open_with_clock(&path, rot, clk).expect("open");
        f.write_line(b"abcde\n").expect("append");
        f.flush().expect("flush");
        assert_eq!(std::fs::read(&path).expect("read"), b"0123456789abcde\n");
        drop(f);
        // 16 + 10 >= 25 on open: rotated first. The extension is the last dot's.
        let (_, clk) = clock("2026-01-01T00:00:01Z");
        let mut f = LogFile::open_with_clock(&path, rot, clk).expect("open");
        f.write_line(b"012345678\n").expect("write");
        f.flush().expect("flush");
        assert_eq!(
            names(&d),
            ["audit.json-2026-01-01T00-00-01.000.log", "audit.json.log"]
        );
        std::fs::remove_dir_all(&d).ok();
    }

    /// maxbackup and maxage, as lumberjack applies them after a rotation:
    /// (max_backups, max_age_days, the backups left of five, one a day).
    #[test]
    fn old_backups_are_removed() {
        let cases: [(u32, u32, &[&str]); 4] = [
            (0, 0, &["01", "02", "03", "04", "05", "10"]),
            (2, 0, &["05", "10"]),
            (0, 7, &["04", "05", "10"]),
            (3, 6, &["05", "10"]),
        ];
        for (max_backups, max_age_days, want) in cases {
            let d = temp_dir("mill");
            let path = d.join("audit.log");
            for day in 1..=5 {
                std::fs::write(
                    d.join(format!("audit-2026-03-0{day}T00-00-00.000.log")),
                    b"x",
                )
                .expect("backup");
            }
            // Not backups: other names are left alone.
            std::fs::write(d.join("audit-notatime.log"), b"x").expect("other");
            std::fs::write(&path, b"0123456789").expect("current");
            let (_, clk) = clock("2026-03-10T12:00:00Z");
            let mut f = LogFile::open_with_clock(
                &path,
                Rotation {
                    max_size_bytes: 15,
                    max_age_days,
                    max_backups,
                },
                clk,
            )
            .expect("open");
            f.write_line(b"0123456789\n").expect("write");
            let left: Vec<String> = names(&d)
                .into_iter()
                .filter_map(|n| n.strip_prefix("audit-2026-03-").map(|r| r[..2].to_string()))
                .collect();
            assert_eq!(left, want, "maxbackup {max_backups} maxage {max_age_days}");
            assert!(names(&d).contains(&"audit-notatime.log".to_string()));
            std::fs::remove_dir_all(&d).ok();
        }
    }

    #[test]
    fn size_zero_never_rotates() {
        let d = temp_dir("norotate");
        let path = d.join("audit.log");
        let mut f = LogFile::open(
            &path,
            Rotation {
                max_size_bytes: 0,
                max_age_days: 1,
                max_backups: 1,
            },
        )
        .expect("open");
        for _ in 0..1000 {
            f.write_line(b"0123456789\n").expect("write");
        }
        f.flush().expect("flush");
        assert_eq!(names(&d), ["audit.log"]);
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 11_000);
        std::fs::remove_dir_all(&d).ok();
    }
}
