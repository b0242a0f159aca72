//! Wakes a `kubectl logs -f` follower when its log file is written (inotify),
//! as upstream's kubelet waits on fsnotify instead of polling the file.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

pub struct FileWatch {
    fd: AsyncFd<OwnedFd>,
}

impl FileWatch {
    /// Watches `path` for writes. Events between this call and the next
    /// [`FileWatch::changed`] are kept, so a write racing the reader's last
    /// read is never missed.
    pub fn new(path: &Path) -> io::Result<Self> {
        let path = CString::new(path.as_os_str().as_bytes())?;
        // SAFETY: plain syscalls; the descriptor is owned right after.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mask =
            libc::IN_MODIFY | libc::IN_CLOSE_WRITE | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF;
        // SAFETY: `path` is NUL-terminated and outlives the call.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the AsyncFd owns `fd`, which stays open until it is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
        Ok(FileWatch { fd })
    }

    /// Waits until the file changed since the last call, or `timeout` passed;
    /// true when it changed.
    pub async fn changed(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.next_event())
            .await
            .is_ok_and(|r| r.is_ok())
    }

    async fn next_event(&self) -> io::Result<()> {
        let mut buf = [0u8; 4096];
        loop {
            let mut ready = self.fd.readable().await?;
            // Drains every queued event: one wake-up per burst of writes.
            let read = ready.try_io(|fd| {
                // SAFETY: reads into a buffer of the given length.
                let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            if let Ok(r) = read {
                return r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[tokio::test]
    async fn wakes_on_writes_made_before_and_while_waiting() {
        let dir = std::env::temp_dir().join(format!("berth-filewatch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("0.log");
        let mut f = std::fs::File::create(&path).unwrap();
        let w = FileWatch::new(&path).unwrap();
        // Nothing written yet: the wait times out.
        assert!(!w.changed(Duration::from_millis(50)).await);
        // A write before the wait is kept for it.
        f.write_all(b"a\n").unwrap();
        assert!(w.changed(Duration::from_secs(5)).await);
        // Drained: quiet again.
        assert!(!w.changed(Duration::from_millis(50)).await);
        // A write while waiting wakes it well before the timeout.
        let p = path.clone();
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(b"b\n").unwrap();
        });
        let started = std::time::Instant::now();
        assert!(w.changed(Duration::from_secs(10)).await);
        assert!(started.elapsed() < Duration::from_secs(5));
        writer.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_file_is_an_error() {
        assert!(FileWatch::new(Path::new("/nonexistent/berth/0.log")).is_err());
    }
}
