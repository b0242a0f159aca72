//! Go's `time.Duration` text, which upstream prints wherever a duration is
//! shown (`metav1.Duration` fields such as a PodMetrics `window`, event messages).

use std::time::Duration;

/// A duration as Go's `time.Duration.String` prints it: `10s`, `1m20s`,
/// `5m0s`, `1.5s`, `500ms`, `0s`.
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (unit, div) = if nanos < 1_000 {
            ("ns", 1u128)
        } else if nanos < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", fraction(nanos, div));
    }
    let total_secs = nanos / 1_000_000_000;
    let sub = nanos % 1_000_000_000;
    let hours = total_secs / 3600;
    let minutes = (total_secs % 3600) / 60;
    let secs = total_secs % 60;
    let secs_part = fraction(secs * 1_000_000_000 + sub, 1_000_000_000);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h{minutes}m"));
    } else if minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&secs_part);
    out.push('s');
    out
}

/// Go's `time.ParseDuration` as upstream's flags take it: `90s`, `1m30s`,
/// `1.5h`, `500ms`, `0`. None for anything else (a sign, a missing unit, a
/// value past what a `Duration` holds).
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[u..];
    }
    Duration::try_from_secs_f64(total).ok()
}

/// `value / div` with the fraction's trailing zeros dropped.
fn fraction(value: u128, div: u128) -> String {
    let whole = value / div;
    let rem = value % div;
    if rem == 0 {
        return whole.to_string();
    }
    let width = div.to_string().len() - 1;
    let frac = format!("{rem:0width$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go() {
        let ms = |n: u64| Some(Duration::from_millis(n));
        for (text, want) in [
            ("0", Some(Duration::ZERO)),
            ("50s", ms(50_000)),
            ("1m0s", ms(60_000)),
            ("1m30s", ms(90_000)),
            ("500ms", ms(500)),
            ("1.5h", ms(5_400_000)),
            ("", None),
            ("5", None),
            ("-5s", None),
            ("5d", None),
            ("99999999999999999999999999h", None),
        ] {
            assert_eq!(parse_go_duration(text), want, "{text:?}");
        }
    }

    #[test]
    fn go_duration_formats_as_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(80), "1m20s"),
            (Duration::from_secs(160), "2m40s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_micros(1500), "1.5ms"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want, "{d:?}");
        }
    }
}
