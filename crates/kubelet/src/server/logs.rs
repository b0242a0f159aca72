//! Container logs as upstream's kubelet serves them: CRI log files
//! (`<RFC3339Nano> <stdout|stderr> <F|P>[:tags] <text>`) read with tail, since,
//! timestamps, limitBytes and follow (until the container exits).

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, FixedOffset, Utc};
use tokio::io::{AsyncBufReadExt, AsyncSeekExt, BufReader};
use tokio::sync::mpsc;

/// What `GET /containerLogs/...` asks for (upstream's PodLogOptions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    /// Only the last N lines.
    pub tail: Option<u64>,
    /// Only lines at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Stop after this many bytes.
    pub limit_bytes: Option<u64>,
}

fn flag(v: Option<&str>) -> bool {
    matches!(v, Some("true" | "1" | ""))
}

impl LogOptions {
    /// From the query's parameters (`get` returns a parameter's first value),
    /// rejecting what upstream's validation rejects.
    pub fn parse<'a>(
        get: impl Fn(&str) -> Option<&'a str>,
        now: DateTime<Utc>,
    ) -> Result<Self, String> {
        let int = |k: &str| -> Result<Option<i64>, String> {
            match get(k).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v
                    .parse::<i64>()
                    .map(Some)
                    .map_err(|_| format!("{k}: Invalid value: {v:?}: must be an integer")),
            }
        };
        let tail = int("tailLines")?;
        if tail.is_some_and(|t| t < 0) {
            return Err("tailLines: Invalid value: must be greater than or equal to 0".into());
        }
        let limit = int("limitBytes")?;
        if limit.is_some_and(|l| l < 1) {
            return Err("limitBytes: Invalid value: must be greater than 0".into());
        }
        let since_seconds = int("sinceSeconds")?;
        if since_seconds.is_some_and(|s| s < 1) {
            return Err("sinceSeconds: Invalid value: must be greater than 0".into());
        }
        let since_time = match get("sinceTime").filter(|v| !v.is_empty()) {
            None => None,
            Some(v) => Some(
                DateTime::parse_from_rfc3339(v)
                    .map_err(|e| format!("sinceTime: Invalid value: {v:?}: {e}"))?
                    .with_timezone(&Utc),
            ),
        };
        if since_seconds.is_some() && since_time.is_some() {
            return Err("sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".into());
        }
        // A sinceSeconds reaching past the calendar means "from the start".
        let since = since_time.or_else(|| {
            since_seconds.map(|s| {
                chrono::TimeDelta::try_seconds(s)
                    .and_then(|d| now.checked_sub_signed(d))
                    .unwrap_or(DateTime::<Utc>::MIN_UTC)
            })
        });
        Ok(LogOptions {
            follow: flag(get("follow")),
            previous: flag(get("previous")),
            timestamps: flag(get("timestamps")),
            tail: tail.map(|t| t as u64),
            since,
            limit_bytes: limit.map(|l| l as u64),
        })
    }
}

/// One line of a CRI log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub time: DateTime<FixedOffset>,
    /// The timestamp as written.
    pub raw_time: &'a str,
    pub stderr: bool,
    /// A piece of a longer line (`P`): printed without a newline.
    pub partial: bool,
    /// The text, with its newline for full lines.
    pub text: &'a [u8],
}

/// Parses one line (with its trailing `\n`, if any) as upstream's parseCRILog.
pub fn parse_line(line: &[u8]) -> Result<Record<'_>, String> {
    let mut parts = line.splitn(4, |b| *b == b' ');
    let ts = parts.next().unwrap_or_default();
    let ts = std::str::from_utf8(ts).map_err(|_| "timestamp is not found".to_string())?;
    let time =
        DateTime::parse_from_rfc3339(ts).map_err(|e| format!("bad timestamp {ts:?}: {e}"))?;
    let stream = parts.next().ok_or("stream type is not found")?;
    let stderr = match stream {
        b"stdout" => false,
        b"stderr" => true,
        other => {
            return Err(format!(
                "unexpected stream type {:?}",
                String::from_utf8_lossy(other)
            ));
        }
    };
    let tags = parts.next().ok_or("log tag is not found")?;
    let partial = tags.split(|b| *b == b':').next() == Some(b"P");
    let mut text = parts.next().ok_or("log tag is not found")?;
    if partial && text.last() == Some(&b'\n') {
        text = &text[..text.len() - 1];
    }
    Ok(Record {
        time,
        raw_time: ts,
        stderr,
        partial,
        text,
    })
}

/// Go's RFC3339Nano: fraction without trailing zeros, `Z` for UTC.
pub fn format_time(t: &DateTime<FixedOffset>) -> String {
    let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos();
    let frac = if nanos == 0 {
        String::new()
    } else {
        format!(".{nanos:09}").trim_end_matches('0').to_string()
    };
    let off = t.offset().local_minus_utc();
    let zone = if off == 0 {
        "Z".to_string()
    } else {
        t.format("%:z").to_string()
    };
    format!("{base}{frac}{zone}")
}

/// Whether a timestamp is already in Go's RFC3339Nano form for UTC: `Z`, and
/// a fraction (if any) without trailing zeros.
fn is_go_utc(ts: &str) -> bool {
    let Some(body) = ts.strip_suffix('Z') else {
        return false;
    };
    match body.split_once('.') {
        None => true,
        Some((_, frac)) => !frac.is_empty() && !frac.ends_with('0'),
    }
}

/// Turns records into output, applying since, timestamps and limitBytes.
pub struct Writer {
    opts: LogOptions,
    written: u64,
    /// Whether the next record starts a line (the pieces of a `P`-split line
    /// after the first get no timestamp, as upstream's ReadLogs).
    at_line_start: bool,
}

impl Writer {
    pub fn new(opts: LogOptions) -> Self {
        Writer {
            opts,
            written: 0,
            at_line_start: true,
        }
    }

    /// The bytes to send for `line` (empty when filtered out); `None` once
    /// limitBytes is reached (nothing more is to be sent).
    pub fn line(&mut self, line: &[u8]) -> Option<Vec<u8>> {
        if self.done() {
            return None;
        }
        let Ok(rec) = parse_line(line) else {
            // Upstream skips lines it cannot parse (and logs them).
            return Some(Vec::new());
        };
        let prefix = self.at_line_start;
        self.at_line_start = rec.text.last().is_none_or(|b| *b == b'\n');
        if self
            .opts
            .since
            .is_some_and(|s| rec.time.with_timezone(&Utc) < s)
        {
            return Some(Vec::new());
        }
        let mut out = Vec::with_capacity(rec.text.len() + 40);
        if self.opts.timestamps && prefix {
            if is_go_utc(rec.raw_time) {
                // Already what formatting would give (runtimes written in Go):
                // formatting a million timestamps costs seconds.
                out.extend_from_slice(rec.raw_time.as_bytes());
            } else {
                out.extend_from_slice(format_time(&rec.time).as_bytes());
            }
            out.push(b' ');
        }
        out.extend_from_slice(rec.text);
        if let Some(limit) = self.opts.limit_bytes {
            let left = limit.saturating_sub(self.written) as usize;
            out.truncate(left);
        }
        self.written += out.len() as u64;
        Some(out)
    }

    pub fn done(&self) -> bool {
        self.opts.limit_bytes.is_some_and(|l| self.written >= l)
    }
}

/// Offset of the first of the last `n` lines of `data` (0 when it has fewer);
/// the reference for [`tail_start`].
pub fn tail_offset(data: &[u8], n: u64) -> usize {
    if n == 0 {
        return data.len();
    }
    let mut starts: VecDeque<usize> = VecDeque::with_capacity(n as usize + 1);
    let mut pos = 0;
    while pos < data.len() {
        starts.push_back(pos);
        if starts.len() > n as usize {
            starts.pop_front();
        }
        pos = match data[pos..].iter().position(|b| *b == b'\n') {
            Some(i) => pos + i + 1,
            None => data.len(),
        };
    }
    starts.front().copied().unwrap_or(data.len())
}

/// How long a follower waits for a write before asking whether the container
/// still runs.
const STATUS_CHECK: Duration = Duration::from_secs(1);
/// Without inotify: how often a follower looks for new lines, and how many
/// idle looks make one status check.
const POLL: Duration = Duration::from_millis(200);
const STATUS_EVERY: u32 = 5;

/// Streams the log at `path` into `tx`. With follow, keeps reading until
/// `running` says the container has stopped (then drains what is left) or the
/// receiver goes away.
pub async fn stream<F, Fut>(
    path: &Path,
    opts: LogOptions,
    tx: mpsc::Sender<Bytes>,
    running: F,
) -> std::io::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut file = tokio::fs::File::open(path).await?;
    if let Some(n) = opts.tail {
        let off = tail_start(&mut file, n).await?;
        file.seek(std::io::SeekFrom::Start(off)).await?;
    }
    let follow = opts.follow;
    // Registered before the first read, so no write after it goes unseen.
    let watch = if follow {
        super::filewatch::FileWatch::new(path).ok()
    } else {
        None
    };
    let mut writer = Writer::new(opts);
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    // Lines go out in batches (one chunk per line would cost a TLS record and
    // an HTTP chunk each), flushed whenever the reader catches up.
    let mut batch: Vec<u8> = Vec::with_capacity(BATCH);
    let mut idle = 0u32;
    let mut stopping = false;
    loop {
        let n = reader.read_until(b'\n', &mut line).await?;
        if n > 0 && line.last() == Some(&b'\n') {
            idle = 0;
            let out = writer.line(&line);
            line.clear();
            if let Some(out) = out {
                batch.extend_from_slice(&out);
            }
            if writer.done() {
                break;
            }
            if batch.len() >= BATCH && !send(&tx, &mut batch).await {
                return Ok(());
            }
            continue;
        }
        // End of what is written so far (perhaps mid-line).
        let last = !follow || stopping;
        if last && !line.is_empty() {
            // The file ends mid-line for good: upstream prints that piece too.
            if let Some(out) = writer.line(&line) {
                batch.extend_from_slice(&out);
            }
        }
        if !send(&tx, &mut batch).await || last || tx.is_closed() {
            return Ok(());
        }
        idle += 1;
        let quiet = match &watch {
            Some(w) => !w.changed(STATUS_CHECK).await,
            None => idle.is_multiple_of(STATUS_EVERY),
        };
        if quiet && !running().await {
            // One more pass for the lines written before the exit.
            stopping = true;
            continue;
        }
        if watch.is_none() {
            tokio::time::sleep(POLL).await;
        }
    }
    send(&tx, &mut batch).await;
    Ok(())
}

/// Bytes gathered before a chunk is sent.
const BATCH: usize = 32 * 1024;

/// Sends what `batch` holds (if anything); false once the receiver is gone.
async fn send(tx: &mpsc::Sender<Bytes>, batch: &mut Vec<u8>) -> bool {
    if batch.is_empty() {
        return true;
    }
    let chunk = Bytes::from(std::mem::replace(batch, Vec::with_capacity(BATCH)));
    tx.send(chunk).await.is_ok()
}

/// [`tail_offset`] on a file, reading backwards from its end in blocks (a
/// large log is never read whole for a few lines).
pub async fn tail_start(file: &mut tokio::fs::File, n: u64) -> std::io::Result<u64> {
    use tokio::io::AsyncReadExt;
    let len = file.metadata().await?.len();
    if n == 0 {
        return Ok(len);
    }
    let mut end = len;
    let mut found = 0u64;
    let mut block = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let size = (end - start) as usize;
        file.seek(std::io::SeekFrom::Start(start)).await?;
        file.read_exact(&mut block[..size]).await?;
        for i in (0..size).rev() {
            let pos = start + i as u64;
            // The last line's own terminator starts no line.
            if block[i] == b'\n' && pos + 1 < len {
                found += 1;
                if found == n {
                    return Ok(pos + 1);
                }
            }
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn parses_cri_lines() {
        let r = parse_line(b"2026-11-30T01:02:03.123456789Z stdout F hello world\n").unwrap();
        assert_eq!(
            (r.stderr, r.partial, r.text),
            (false, false, &b"hello world\n"[..])
        );
        assert_eq!(r.time.timestamp_subsec_nanos(), 123_456_789);
        let r = parse_line(b"2026-11-30T01:02:03Z stderr P:x part\n").unwrap();
        assert_eq!((r.stderr, r.partial, r.text), (true, true, &b"part"[..]));
        let r = parse_line(b"2026-11-30T01:02:03Z stdout F \n").unwrap();
        assert_eq!(r.text, b"\n");
        for bad in [
            &b"nonsense\n"[..],
            b"2026-11-30T01:02:03Z stdin F x\n",
            b"2026-11-30T01:02:03Z stdout\n",
            b"yesterday stdout F x\n",
        ] {
            assert!(parse_line(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn go_utc_timestamps_pass_through() {
        for (ts, go) in [
            ("2026-11-30T01:02:03.12Z", true),
            ("2026-11-30T01:02:03Z", true),
            ("2026-11-30T01:02:03.120Z", false),
            ("2026-11-30T01:02:03.Z", false),
            ("2026-11-30T01:02:03.5+00:00", false),
        ] {
            assert_eq!(is_go_utc(ts), go, "{ts}");
            if go {
                let t = DateTime::parse_from_rfc3339(ts).unwrap();
                assert_eq!(
                    format_time(&t),
                    ts,
                    "passing through is what formatting gives"
                );
            }
        }
    }

    #[test]
    fn go_rfc3339nano() {
        let cases = [
            ("2026-11-30T01:02:03.120000000Z", "2026-11-30T01:02:03.12Z"),
            ("2026-11-30T01:02:03Z", "2026-11-30T01:02:03Z"),
            (
                "2026-11-30T01:02:03.000000001+02:00",
                "2026-11-30T01:02:03.000000001+02:00",
            ),
            ("2026-11-30T01:02:03.5+00:00", "2026-11-30T01:02:03.5Z"),
        ];
        for (input, want) in cases {
            let t = DateTime::parse_from_rfc3339(input).unwrap();
            assert_eq!(format_time(&t), want);
        }
    }

    #[test]
    fn tail_offsets() {
        let data = b"a\nb\nc\n";
        let cases = [(0, 6), (1, 4), (2, 2), (3, 0), (10, 0)];
        for (n, want) in cases {
            assert_eq!(tail_offset(data, n), want, "tail {n}");
        }
        assert_eq!(tail_offset(b"a\nb", 1), 2, "an unfinished last line counts");
        assert_eq!(tail_offset(b"", 3), 0);
    }

    #[tokio::test]
    async fn tail_start_matches_tail_offset() {
        let dir = std::env::temp_dir().join(format!("berth-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Lines longer than a read block, and files with and without a last newline.
        let long = "x".repeat(70_000);
        let datas = [
            String::new(),
            "a\nb\nc\n".to_string(),
            "a\nb".to_string(),
            format!("{long}\nb\n{long}\n"),
            (0..20_000).map(|i| format!("{i}\n")).collect(),
        ];
        for (i, data) in datas.iter().enumerate() {
            let path = dir.join(format!("{i}.log"));
            std::fs::write(&path, data).unwrap();
            for n in [0, 1, 2, 3, 5000, 30_000] {
                let mut f = tokio::fs::File::open(&path).await.unwrap();
                let got = tail_start(&mut f, n).await.unwrap();
                assert_eq!(
                    got,
                    tail_offset(data.as_bytes(), n) as u64,
                    "data {i} tail {n}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn opts(pairs: &[(&str, &str)]) -> Result<LogOptions, String> {
        let now = Utc.with_ymd_and_hms(2026, 11, 30, 1, 0, 0).unwrap();
        LogOptions::parse(
            |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| *v),
            now,
        )
    }

    #[test]
    fn options() {
        let o = opts(&[
            ("follow", "true"),
            ("tailLines", "10"),
            ("timestamps", "true"),
            ("sinceSeconds", "60"),
        ])
        .unwrap();
        assert!(o.follow && o.timestamps && !o.previous);
        assert_eq!(o.tail, Some(10));
        assert_eq!(
            o.since,
            Some(Utc.with_ymd_and_hms(2026, 11, 30, 0, 59, 0).unwrap())
        );
        let o = opts(&[("sinceSeconds", &i64::MAX.to_string())]).unwrap();
        assert_eq!(o.since, Some(DateTime::<Utc>::MIN_UTC), "saturates");
        let o = opts(&[("sinceTime", "2026-11-30T00:00:00Z"), ("previous", "1")]).unwrap();
        assert!(o.previous);
        assert_eq!(
            o.since,
            Some(Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap())
        );
        for bad in [
            &[("tailLines", "-1")][..],
            &[("tailLines", "x")],
            &[("limitBytes", "0")],
            &[("sinceSeconds", "0")],
            &[("sinceSeconds", "5"), ("sinceTime", "2026-11-30T00:00:00Z")],
            &[("sinceTime", "noon")],
        ] {
            assert!(opts(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn writer_applies_options() {
        let lines: [&[u8]; 4] = [
            b"2026-11-30T00:00:01Z stdout F one\n",
            b"2026-11-30T00:00:02Z stdout P tw\n",
            b"2026-11-30T00:00:02.5Z stdout F o\n",
            b"2026-11-30T00:00:03Z stderr F three\n",
        ];
        let run = |o: LogOptions| {
            let mut w = Writer::new(o);
            let mut out = Vec::new();
            for l in lines {
                match w.line(l) {
                    Some(b) => out.extend(b),
                    None => break,
                }
            }
            String::from_utf8(out).unwrap()
        };
        assert_eq!(run(LogOptions::default()), "one\ntwo\nthree\n");
        let since = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 2).unwrap();
        assert_eq!(
            run(LogOptions {
                since: Some(since),
                ..Default::default()
            }),
            "two\nthree\n"
        );
        assert_eq!(
            run(LogOptions {
                timestamps: true,
                ..Default::default()
            }),
            "2026-11-30T00:00:01Z one\n2026-11-30T00:00:02Z two\n2026-11-30T00:00:03Z three\n"
        );
        assert_eq!(
            run(LogOptions {
                limit_bytes: Some(6),
                ..Default::default()
            }),
            "one\ntw"
        );
    }

    #[tokio::test]
    async fn prints_an_unfinished_last_line_without_follow() {
        let dir = std::env::temp_dir().join(format!("berth-logs-end-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("0.log");
        std::fs::write(
            &path,
            "2026-11-30T00:00:01Z stdout F a\n2026-11-30T00:00:02Z stdout F b",
        )
        .unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        stream(&path, LogOptions::default(), tx, || async { false })
            .await
            .unwrap();
        let mut out = Vec::new();
        while let Some(b) = rx.recv().await {
            out.extend_from_slice(&b);
        }
        assert_eq!(out, b"a\nb");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn follows_until_the_container_stops() {
        let dir = std::env::temp_dir().join(format!("berth-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("0.log");
        std::fs::write(
            &path,
            "2026-11-30T00:00:01Z stdout F a\n2026-11-30T00:00:01Z stdout F b\n",
        )
        .unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let r2 = running.clone();
        let p2 = path.clone();
        let task = tokio::spawn(async move {
            let o = LogOptions {
                follow: true,
                tail: Some(1),
                ..Default::default()
            };
            stream(&p2, o, tx, || {
                let r = r2.clone();
                async move { r.load(std::sync::atomic::Ordering::SeqCst) }
            })
            .await
        });
        assert_eq!(rx.recv().await.unwrap(), Bytes::from_static(b"b\n"));
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"2026-11-30T00:00:02Z stdout F c\n").unwrap();
        assert_eq!(rx.recv().await.unwrap(), Bytes::from_static(b"c\n"));
        // Written just before the exit: still delivered, then the stream ends.
        f.write_all(b"2026-11-30T00:00:03Z stdout F d\n").unwrap();
        running.store(false, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(rx.recv().await.unwrap(), Bytes::from_static(b"d\n"));
        assert!(rx.recv().await.is_none());
        task.await.unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
