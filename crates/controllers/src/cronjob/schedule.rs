//! Cron schedules as upstream parses them (robfig/cron v3 `ParseStandard`):
//! five fields — minute, hour, day of month, month, day of week — each a
//! comma list of `*`, `?`, `N`, `N-M`, with an optional `/step`, month and
//! weekday names, plus the `@yearly`/`@annually`/`@monthly`/`@weekly`/
//! `@daily`/`@midnight`/`@hourly` macros. When both day fields are
//! restricted a day matches either (cron's OR rule).
//!
//! Times are computed in a time zone's civil time, as upstream does with
//! `spec.timeZone`.

use k8s_openapi::jiff::civil::{Date, DateTime, Time};
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{Timestamp, ToSpan, Zoned};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("expected exactly 5 fields, found {0}: {1}")]
    FieldCount(usize, String),
    #[error("unrecognized descriptor: {0}")]
    Descriptor(String),
    #[error("failed to parse int from {0}")]
    Int(String),
    #[error("beginning of range ({0}) below minimum ({1}): {2}")]
    BelowMin(u32, u32, String),
    #[error("end of range ({0}) above maximum ({1}): {2}")]
    AboveMax(u32, u32, String),
    #[error("beginning of range ({0}) beyond end of range ({1}): {2}")]
    Backwards(u32, u32, String),
    #[error("step of range should be a positive number: {0}")]
    Step(String),
    #[error("too many slashes: {0}")]
    Slashes(String),
}

/// A parsed schedule: one bit per allowed value of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    /// The day fields were `*` or `?` (robfig's star bit).
    dom_star: bool,
    dow_star: bool,
}

const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// What the first name stands for (1 for months, 0 for days).
    name_base: u32,
}

fn value(s: &str, b: &Bounds) -> Result<u32, ParseError> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = b.names.iter().position(|n| *n == lower) {
        return Ok(u32::try_from(i).unwrap_or(0) + b.name_base);
    }
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(ParseError::Int(s.into()));
    }
    s.parse().map_err(|_| ParseError::Int(s.into()))
}

/// One field: the allowed values' bits, and whether it was a star.
fn field(expr: &str, b: &Bounds) -> Result<(u64, bool), ParseError> {
    let mut bits = 0u64;
    let mut star = false;
    for part in expr.split(',') {
        let mut pieces = part.split('/');
        let range = pieces.next().unwrap_or_default();
        let step = pieces.next();
        if pieces.next().is_some() {
            return Err(ParseError::Slashes(part.into()));
        }
        let mut part_star = false;
        let (start, mut end) = if range == "*" || range == "?" {
            part_star = true;
            (b.min, b.max)
        } else if let Some((a, z)) = range.split_once('-') {
            (value(a, b)?, value(z, b)?)
        } else {
            let v = value(range, b)?;
            (v, v)
        };
        let step = match step {
            None => 1,
            Some(s) => {
                // `N/step` runs from N to the maximum.
                if !range.contains('-') && range != "*" && range != "?" {
                    end = b.max;
                }
                match s.parse::<u32>() {
                    Ok(0) | Err(_) => return Err(ParseError::Step(part.into())),
                    Ok(n) => n,
                }
            }
        };
        if start < b.min {
            return Err(ParseError::BelowMin(start, b.min, part.into()));
        }
        if end > b.max {
            return Err(ParseError::AboveMax(end, b.max, part.into()));
        }
        if start > end {
            return Err(ParseError::Backwards(start, end, part.into()));
        }
        let mut v = start;
        while v <= end {
            bits |= 1 << v;
            v += step;
        }
        // robfig drops the star bit for stepped stars (`*/5`).
        star |= part_star && step == 1;
    }
    Ok((bits, star))
}

impl Schedule {
    pub fn parse(spec: &str) -> Result<Schedule, ParseError> {
        let spec = spec.trim();
        let expanded = match spec {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            s if s.starts_with('@') => return Err(ParseError::Descriptor(s.into())),
            s => s,
        };
        let f: Vec<&str> = expanded.split_whitespace().collect();
        if f.len() != 5 {
            return Err(ParseError::FieldCount(f.len(), spec.into()));
        }
        let b = |min, max, names, name_base| Bounds {
            min,
            max,
            names,
            name_base,
        };
        let (minute, _) = field(f[0], &b(0, 59, &[], 0))?;
        let (hour, _) = field(f[1], &b(0, 23, &[], 0))?;
        let (dom, dom_star) = field(f[2], &b(1, 31, &[], 0))?;
        let (month, _) = field(f[3], &b(1, 12, MONTHS, 1))?;
        let (dow, dow_star) = field(f[4], &b(0, 6, DAYS, 0))?;
        Ok(Schedule {
            minute,
            hour,
            dom,
            month,
            dow,
            dom_star,
            dow_star,
        })
    }

    fn day_matches(&self, d: Date) -> bool {
        let dom = self.dom & (1 << d.day()) != 0;
        let dow = self.dow & (1 << d.weekday().to_sunday_zero_offset()) != 0;
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first scheduled time strictly after `t`, in `tz`'s civil time;
    /// `None` when nothing matches within five years (e.g. `0 0 30 2 *`).
    pub fn next(&self, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let start = t.to_zoned(tz.clone()).datetime();
        // The next whole minute.
        let mut dt = start
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?
            .checked_add(1.minute())
            .ok()?;
        let limit = start.year() + 5;
        while dt.year() <= limit {
            if self.month & (1 << dt.month()) == 0 {
                let first = dt.date().first_of_month().checked_add(1.month()).ok()?;
                dt = DateTime::from_parts(first, Time::midnight());
                continue;
            }
            if !self.day_matches(dt.date()) {
                dt = DateTime::from_parts(dt.date().tomorrow().ok()?, Time::midnight());
                continue;
            }
            if self.hour & (1 << dt.hour()) == 0 {
                dt = dt
                    .with()
                    .minute(0)
                    .build()
                    .ok()?
                    .checked_add(1.hour())
                    .ok()?;
                continue;
            }
            if self.minute & (1 << dt.minute()) == 0 {
                dt = dt.checked_add(1.minute()).ok()?;
                continue;
            }
            let z: Zoned = dt.to_zoned(tz.clone()).ok()?;
            let ts = z.timestamp();
            // A civil time repeated or skipped by a DST change can map to or
            // before `t`; look further.
            if ts > t {
                return Some(ts);
            }
            dt = dt.checked_add(1.minute()).ok()?;
        }
        None
    }
}

/// Upstream's mostRecentScheduleTime: the latest scheduled time in
/// (`earliest`, `now`] and how many were missed in between (capped).
pub fn most_recent(
    s: &Schedule,
    earliest: Timestamp,
    now: Timestamp,
    tz: &TimeZone,
) -> (Option<Timestamp>, usize) {
    let mut last = None;
    let mut count = 0;
    let mut t = earliest;
    while let Some(n) = s.next(t, tz) {
        if n > now || count > 100_000 {
            break;
        }
        last = Some(n);
        count += 1;
        t = n;
    }
    (last, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn next_times() {
        // (schedule, after, expected next)
        let cases = [
            ("* * * * *", "2026-03-01T10:15:30Z", "2026-03-01T10:16:00Z"),
            ("* * * * *", "2026-03-01T10:15:00Z", "2026-03-01T10:16:00Z"),
            (
                "*/15 * * * *",
                "2026-03-01T10:16:00Z",
                "2026-03-01T10:30:00Z",
            ),
            ("0 * * * *", "2026-03-01T10:16:00Z", "2026-03-01T11:00:00Z"),
            ("@hourly", "2026-03-01T23:59:00Z", "2026-03-02T00:00:00Z"),
            ("@daily", "2026-03-01T10:00:00Z", "2026-03-02T00:00:00Z"),
            ("@midnight", "2026-12-31T10:00:00Z", "2027-01-01T00:00:00Z"),
            ("@weekly", "2026-03-04T10:00:00Z", "2026-03-08T00:00:00Z"), // a Sunday
            ("@monthly", "2026-03-04T10:00:00Z", "2026-04-01T00:00:00Z"),
            ("@yearly", "2026-03-04T10:00:00Z", "2027-01-01T00:00:00Z"),
            ("@annually", "2026-03-04T10:00:00Z", "2027-01-01T00:00:00Z"),
            (
                "30 9 * * mon-fri",
                "2026-03-06T10:00:00Z",
                "2026-03-09T09:30:00Z",
            ), // Fri → Mon
            (
                "0 0 29 feb *",
                "2026-03-01T00:00:00Z",
                "2028-02-29T00:00:00Z",
            ),
            (
                "5 4 * jun,DEC ?",
                "2026-07-01T00:00:00Z",
                "2026-12-01T04:05:00Z",
            ),
            (
                "10-20/5 * * * *",
                "2026-03-01T10:12:00Z",
                "2026-03-01T10:15:00Z",
            ),
            (
                "10/20 * * * *",
                "2026-03-01T10:31:00Z",
                "2026-03-01T10:50:00Z",
            ),
            // Both day fields restricted: the 13th OR a Friday.
            ("0 0 13 * 5", "2026-03-01T00:00:00Z", "2026-03-06T00:00:00Z"),
            ("0 0 13 * 5", "2026-03-10T00:00:00Z", "2026-03-13T00:00:00Z"),
            // A starred day field: AND (every day matching both).
            ("0 0 * * 1", "2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"),
        ];
        for (spec, after, want) in cases {
            let s = Schedule::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(
                s.next(ts(after), &TimeZone::UTC),
                Some(ts(want)),
                "{spec} after {after}"
            );
        }
    }

    #[test]
    fn never_matching_schedule() {
        let s = Schedule::parse("0 0 30 2 *").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.next(ts("2026-01-01T00:00:00Z"), &TimeZone::UTC), None);
    }

    #[test]
    fn parse_errors() {
        let cases = [
            ("* * * *", "expected exactly 5 fields, found 4: * * * *"),
            (
                "* * * * * *",
                "expected exactly 5 fields, found 6: * * * * * *",
            ),
            ("@every 5m", "unrecognized descriptor: @every 5m"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1/2/3 * * * *", "too many slashes: 1/2/3"),
            ("x * * * *", "failed to parse int from x"),
            ("* * * foo *", "failed to parse int from foo"),
        ];
        for (spec, want) in cases {
            match Schedule::parse(spec) {
                Ok(_) => panic!("{spec} parsed"),
                Err(e) => assert_eq!(e.to_string(), want, "{spec}"),
            }
        }
    }

    #[test]
    fn time_zones_shift_the_schedule() {
        if !std::path::Path::new("/usr/share/zoneinfo/America/New_York").exists() {
            // No system zoneinfo on this machine: nothing to compare against.
            return;
        }
        let tz = TimeZone::get("America/New_York").unwrap_or_else(|e| panic!("{e}"));
        let s = Schedule::parse("0 9 * * *").unwrap_or_else(|e| panic!("{e}"));
        // 09:00 EST is 14:00 UTC in winter, 13:00 UTC (EDT) in summer.
        assert_eq!(
            s.next(ts("2026-01-10T00:00:00Z"), &tz),
            Some(ts("2026-01-10T14:00:00Z"))
        );
        assert_eq!(
            s.next(ts("2026-07-10T00:00:00Z"), &tz),
            Some(ts("2026-07-10T13:00:00Z"))
        );
    }

    #[test]
    fn most_recent_and_missed() {
        let s = Schedule::parse("*/10 * * * *").unwrap_or_else(|e| panic!("{e}"));
        let cases = [
            ("2026-03-01T10:00:00Z", "2026-03-01T10:05:00Z", None, 0),
            (
                "2026-03-01T10:00:00Z",
                "2026-03-01T10:10:00Z",
                Some("2026-03-01T10:10:00Z"),
                1,
            ),
            (
                "2026-03-01T10:00:00Z",
                "2026-03-01T10:45:00Z",
                Some("2026-03-01T10:40:00Z"),
                4,
            ),
        ];
        for (earliest, now, want, missed) in cases {
            let (got, n) = most_recent(&s, ts(earliest), ts(now), &TimeZone::UTC);
            assert_eq!(got, want.map(ts), "{earliest} {now}");
            assert_eq!(n, missed);
        }
    }
}
