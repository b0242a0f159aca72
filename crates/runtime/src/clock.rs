//! Time as a boundary (design invariant 2): components read "now" through
//! [`Clock`] so time-dependent logic runs under a [`FakeClock`] in tests.

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// A source of the current wall-clock time (upstream's `clock.PassiveClock`).
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct FakeClock {
    now: Mutex<Timestamp>,
}

impl FakeClock {
    pub fn new(start: Timestamp) -> Self {
        FakeClock {
            now: Mutex::new(start),
        }
    }

    /// Sets the current time (it may move backwards, as a real clock can).
    pub fn set(&self, t: Timestamp) {
        *self.lock() = t;
    }

    /// Moves the clock forward by `d`, saturating at the end of representable time.
    pub fn step(&self, d: Duration) {
        let mut now = self.lock();
        let nanos = now
            .as_nanosecond()
            .saturating_add(i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
        *now = Timestamp::from_nanosecond(nanos).unwrap_or(Timestamp::MAX);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Timestamp> {
        // A panic while holding this lock cannot leave a Timestamp half-written.
        self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for FakeClock {
    /// Starts at a fixed, recent instant so tests are reproducible.
    fn default() -> Self {
        // 2026-01-01T00:00:00Z
        FakeClock::new(Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH))
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_moves_only_when_told() {
        let c = FakeClock::default();
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        c.step(Duration::from_millis(1500));
        assert_eq!(c.now().as_millisecond() - t0.as_millisecond(), 1500);
        c.set(t0);
        assert_eq!(c.now(), t0);
        c.step(Duration::MAX);
        assert_eq!(c.now(), Timestamp::MAX);
    }

    #[test]
    fn real_clock_is_recent() {
        // After 2024-01-01.
        assert!(RealClock.now().as_second() > 1_704_067_200);
    }
}
