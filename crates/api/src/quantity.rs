//! `resource.Quantity`: parsing, exact arithmetic and upstream's canonical form.
//!
//! A quantity is held as an exact integer number of nano-units (`i128`), which
//! covers every value upstream can represent at its nano precision up to about
//! ±1.7e29; larger inputs are rejected with the numeric error. Parsing rounds
//! up (away from zero) to the nano, as upstream does.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

/// The regular expression upstream reports when a quantity is malformed.
pub const QUANTITY_REGEX: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// Upstream caps binary-SI values at the largest int64.
const MAX_BINARY_NANOS: i128 = (i64::MAX as i128) * NANOS_PER_UNIT;

/// How a quantity is written back out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `1e3`, `5e-1`.
    DecimalExponent,
    /// `Ki`, `Mi`, … (powers of 1024).
    BinarySI,
    /// `m`, `k`, `M`, … (powers of 1000).
    DecimalSI,
}

/// Upstream's three parse errors, with their exact messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantities must match the regular expression '{}'", QUANTITY_REGEX)]
    FormatWrong,
    #[error("unable to parse quantity's numeric value")]
    Numeric,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// An exact resource quantity.
///
/// Equality, ordering and hashing look at the value only (`1000m == 1`).
#[derive(Clone, Debug)]
pub struct Quantity {
    nanos: i128,
    format: Format,
    /// The input string, kept when upstream would serialise it unchanged.
    cached: Option<String>,
}

impl Quantity {
    /// Zero, in decimal-SI format.
    pub fn zero() -> Self {
        Self::from_nanos(0, Format::DecimalSI)
    }

    /// A quantity of `nanos` billionths of a unit.
    pub fn from_nanos(nanos: i128, format: Format) -> Self {
        Quantity {
            nanos,
            format,
            cached: None,
        }
    }

    /// A whole number of units (upstream's `NewQuantity`).
    pub fn from_value(value: i64, format: Format) -> Self {
        Self::from_nanos(value as i128 * NANOS_PER_UNIT, format)
    }

    /// A number of thousandths (upstream's `NewMilliQuantity`).
    pub fn from_milli(milli: i64, format: Format) -> Self {
        Self::from_nanos(milli as i128 * 1_000_000, format)
    }

    /// Parses a quantity string (upstream's `ParseQuantity`).
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        if s == "0" {
            return Ok(Quantity {
                nanos: 0,
                format: Format::DecimalSI,
                cached: Some("0".into()),
            });
        }
        let parts = split_quantity(s)?;
        let (base, exponent, mut format) =
            interpret_suffix(parts.suffix).ok_or(QuantityError::Suffix)?;
        let mut magnitude = magnitude_nanos(parts.num, parts.denom, base, exponent)?;
        if format == Format::BinarySI {
            magnitude = magnitude.min(MAX_BINARY_NANOS);
            if magnitude > 0 && magnitude < NANOS_PER_UNIT {
                // Fractions of a unit read better as decimal.
                format = Format::DecimalSI;
            }
        }
        let nanos = if parts.positive {
            magnitude
        } else {
            -magnitude
        };
        let cached = keeps_input(&parts, base, exponent).then(|| s.to_string());
        Ok(Quantity {
            nanos,
            format,
            cached,
        })
    }

    /// Reads a quantity from its JSON form: a string, or a bare number (which
    /// upstream's decoder also accepts).
    pub fn from_json(value: &Value) -> Result<Self, QuantityError> {
        match value {
            Value::String(s) => Self::parse(s.trim()),
            Value::Number(n) => Self::parse(&n.to_string()),
            _ => Err(QuantityError::FormatWrong),
        }
    }

    /// The exact value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i32 {
        self.nanos.signum() as i32
    }

    /// The value in units, rounded away from zero (upstream's `Value()`),
    /// saturating at the `i64` range.
    pub fn value(&self) -> i64 {
        self.scaled_value(0)
    }

    /// The value in thousandths, rounded away from zero (`MilliValue()`).
    pub fn milli_value(&self) -> i64 {
        self.scaled_value(-3)
    }

    /// The value in units of `10^scale`, rounded away from zero
    /// (`ScaledValue`), saturating at the `i64` range.
    pub fn scaled_value(&self, scale: i32) -> i64 {
        let v = match scale_unit(scale) {
            Some(unit) => div_away(self.nanos, unit),
            // Scales below a nano multiply; overflow saturates.
            None => {
                let factor = 10i128.checked_pow((-9 - scale).max(0) as u32);
                match factor.and_then(|f| self.nanos.checked_mul(f)) {
                    Some(v) => v,
                    None if self.nanos < 0 => i128::MIN,
                    None => i128::MAX,
                }
            }
        };
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// Rounds up (away from zero) to a multiple of `10^scale` (`RoundUp`);
    /// returns whether the value was already exact.
    pub fn round_up(&mut self, scale: i32) -> bool {
        let Some(unit) = scale_unit(scale) else {
            return true;
        };
        if self.nanos % unit == 0 {
            return true;
        }
        self.nanos = div_away(self.nanos, unit).saturating_mul(unit);
        self.cached = None;
        false
    }

    /// Adds `other` in place; a zero receiver takes the other's format.
    pub fn add(&mut self, other: &Quantity) {
        if self.nanos == 0 {
            self.format = other.format;
        }
        self.nanos = self.nanos.saturating_add(other.nanos);
        self.cached = None;
    }

    /// Subtracts `other` in place; a zero receiver takes the other's format.
    pub fn sub(&mut self, other: &Quantity) {
        if self.nanos == 0 {
            self.format = other.format;
        }
        self.nanos = self.nanos.saturating_sub(other.nanos);
        self.cached = None;
    }

    /// The canonical string, ignoring how the value was originally written.
    pub fn canonical(&self) -> String {
        if self.nanos == 0 {
            return "0".into();
        }
        let mut format = self.format;
        if format == Format::BinarySI {
            let small = self.nanos.abs() < 1024 * NANOS_PER_UNIT;
            if small || self.nanos % NANOS_PER_UNIT != 0 {
                format = Format::DecimalSI;
            }
        }
        match format {
            Format::BinarySI => {
                let mut units = self.nanos / NANOS_PER_UNIT;
                let mut power = 0;
                while power < 6 && units % 1024 == 0 {
                    units /= 1024;
                    power += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
                format!("{units}{suffix}")
            }
            Format::DecimalSI | Format::DecimalExponent => {
                let (mut mantissa, mut exponent) = (self.nanos, -9i32);
                while mantissa % 10 == 0 {
                    mantissa /= 10;
                    exponent += 1;
                }
                // Exponents are shown in steps of three.
                match exponent % 3 {
                    1 | -2 => {
                        mantissa *= 10;
                        exponent -= 1;
                    }
                    2 | -1 => {
                        mantissa *= 100;
                        exponent -= 2;
                    }
                    _ => {}
                }
                if format == Format::DecimalExponent {
                    if exponent == 0 {
                        return mantissa.to_string();
                    }
                    return format!("{mantissa}e{exponent}");
                }
                if exponent > 18 {
                    // Beyond exa there is no SI suffix: keep counting in E.
                    mantissa *= 10i128.pow((exponent - 18) as u32);
                    exponent = 18;
                }
                let suffix = match exponent {
                    -9 => "n",
                    -6 => "u",
                    -3 => "m",
                    3 => "k",
                    6 => "M",
                    9 => "G",
                    12 => "T",
                    15 => "P",
                    18 => "E",
                    _ => "",
                };
                format!("{mantissa}{suffix}")
            }
        }
    }

    /// An approximate floating-point value, for display and ratios only.
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / NANOS_PER_UNIT as f64
    }
}

impl Default for Quantity {
    fn default() -> Self {
        Self::zero()
    }
}

impl fmt::Display for Quantity {
    /// Upstream's `String()`: the input when it was already canonical,
    /// otherwise the canonical form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cached {
            Some(s) => f.write_str(s),
            None => f.write_str(&self.canonical()),
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl std::hash::Hash for Quantity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(deserializer)?;
        Quantity::from_json(&v).map_err(serde::de::Error::custom)
    }
}

/// The size of one unit of `10^scale` in nanos, when that is at least a nano.
fn scale_unit(scale: i32) -> Option<i128> {
    if scale < -9 {
        return None;
    }
    // Scales beyond i128 make every value round to one unit.
    Some(10i128.checked_pow((scale + 9) as u32).unwrap_or(i128::MAX))
}

/// Integer division rounding away from zero.
fn div_away(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d != 0 { q + n.signum() } else { q }
}

/// The pieces of a quantity string as upstream's scanner splits them.
struct Parts<'a> {
    positive: bool,
    /// Integer digits without leading zeros, "0" when there are none.
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Mirrors upstream's `parseQuantityString`, including its leniencies
/// (`.`, `+`, `1.` are accepted).
fn split_quantity(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == num_start {
        "0"
    } else {
        &s[num_start..pos]
    };
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// Base, exponent and format for a suffix, as upstream's suffixer.
fn interpret_suffix(suffix: &str) -> Option<(u32, i32, Format)> {
    let dec = |e| Some((10, e, Format::DecimalSI));
    let bin = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            if rest.is_empty() {
                return None;
            }
            // Upstream parses an int64 and truncates it to int32.
            let e: i64 = rest.parse().ok()?;
            Some((10, e as i32, Format::DecimalExponent))
        }
    }
}

/// `|num.denom| × base^exponent` in nanos, rounded up.
fn magnitude_nanos(
    num: &str,
    denom: &str,
    base: u32,
    exponent: i32,
) -> Result<i128, QuantityError> {
    // More integer digits than i128 holds can only overflow.
    const MAX_DIGITS: usize = 39;
    // Bounds the exact binary-fraction work below.
    const MAX_BINARY_FRACTION: usize = 4096;
    let digits = format!("{num}{denom}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(0);
    }
    let frac = denom.len() as i64;
    if base == 10 {
        let p = exponent as i64 + 9 - frac;
        if p >= 0 {
            if p > 40 || digits.len() > MAX_DIGITS {
                return Err(QuantityError::Numeric);
            }
            let mut big = BigUint::from_decimal(digits);
            for _ in 0..p {
                big.mul_small(10);
            }
            return big.to_i128().ok_or(QuantityError::Numeric);
        }
        // Drop the digits below a nano; any non-zero one rounds up.
        let drop = usize::try_from(-p).unwrap_or(usize::MAX);
        if drop >= digits.len() {
            return Ok(1);
        }
        let (keep, rest) = digits.split_at(digits.len() - drop);
        if keep.len() > MAX_DIGITS {
            return Err(QuantityError::Numeric);
        }
        let round = rest.bytes().any(|c| c != b'0');
        let kept = BigUint::from_decimal(keep)
            .to_i128()
            .ok_or(QuantityError::Numeric)?;
        return Ok(kept + round as i128);
    }
    // Binary suffixes: exponent is 10..=60.
    if num.len() > MAX_DIGITS || denom.len() > MAX_BINARY_FRACTION {
        return Err(QuantityError::Numeric);
    }
    let mut big = BigUint::from_decimal(digits);
    for _ in 0..exponent {
        big.mul_small(2);
    }
    let p = 9 - frac;
    if p >= 0 {
        for _ in 0..p {
            big.mul_small(10);
        }
        return big.to_i128().ok_or(QuantityError::Numeric);
    }
    let mut round = false;
    for _ in 0..(-p) {
        round |= big.div_small(10) != 0;
        if big.is_zero() {
            // A non-zero value below one nano.
            return Ok(1);
        }
    }
    let v = big.to_i128().ok_or(QuantityError::Numeric)?;
    Ok(v + round as i128)
}

/// Whether upstream keeps the input string as the serialised form (its
/// fast path, when the input is already canonical).
fn keeps_input(parts: &Parts<'_>, base: u32, exponent: i32) -> bool {
    let shifted = format!("{}{}", parts.num, parts.denom);
    if base == 10 {
        let precision = 18 - shifted.len() as i64;
        let scale = exponent as i64 - parts.denom.len() as i64;
        precision >= 0
            && scale >= -9
            && scale % 3 == 0
            && !shifted.ends_with("000")
            && !shifted.starts_with('0')
    } else {
        if !parts.denom.is_empty() {
            return false;
        }
        let precision = 15 - parts.num.len() as i64 - (exponent as i64 * 3 / 10) - 1;
        let Ok(value) = parts.num.parse::<i64>() else {
            return false;
        };
        precision >= 0
            && value.checked_mul(1i64 << exponent).is_some()
            && exponent % 10 == 0
            && value & 0x07 != 0
    }
}

/// Just enough arbitrary precision to parse long inputs exactly.
struct BigUint {
    /// Little-endian base 2^32 limbs.
    limbs: Vec<u32>,
}

impl BigUint {
    fn from_decimal(digits: &str) -> Self {
        let mut n = BigUint { limbs: Vec::new() };
        for c in digits.bytes() {
            n.mul_small(10);
            n.add_small((c - b'0') as u32);
        }
        n
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for limb in &mut self.limbs {
            let v = *limb as u64 * m as u64 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
    }

    fn add_small(&mut self, a: u32) {
        let mut carry = a as u64;
        for limb in &mut self.limbs {
            if carry == 0 {
                return;
            }
            let v = *limb as u64 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
    }

    /// Divides in place, returning the remainder.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.limbs.iter_mut().rev() {
            let cur = (rem << 32) | *limb as u64;
            *limb = (cur / d as u64) as u32;
            rem = cur % d as u64;
        }
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
        rem as u32
    }

    fn is_zero(&self) -> bool {
        self.limbs.iter().all(|&l| l == 0)
    }

    fn to_i128(&self) -> Option<i128> {
        let mut v: u128 = 0;
        for (i, &limb) in self.limbs.iter().enumerate() {
            if limb == 0 {
                continue;
            }
            if i >= 4 {
                return None;
            }
            v |= (limb as u128) << (32 * i);
        }
        i128::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_to_exact_nanos() {
        let cases: &[(&str, i128)] = &[
            ("0", 0),
            ("1", 1_000_000_000),
            ("100m", 100_000_000),
            ("1.5", 1_500_000_000),
            ("2Gi", 2 * (1 << 30) * 1_000_000_000),
            ("500M", 500_000_000 * 1_000_000_000),
            ("1e3", 1_000 * 1_000_000_000),
            ("12E", 12_000_000_000_000_000_000 * 1_000_000_000),
            ("0.1Ki", 102_400_000_000),
            ("1n", 1),
            ("1u", 1_000),
            ("-1.5Gi", -1_610_612_736_000_000_000),
            ("+3", 3_000_000_000),
            ("007", 7_000_000_000),
            (".5", 500_000_000),
            ("1.", 1_000_000_000),
            ("1e-3", 1_000_000),
            ("1E+3", 1_000_000_000_000),
            ("5e0", 5_000_000_000),
            // Below a nano rounds up (away from zero).
            ("0.0000000001", 1),
            ("-0.0000000001", -1),
            ("1.0000000001", 1_000_000_001),
            ("0.5n", 1),
            // From upstream's TestQuantityParse.
            ("3.001n", 4),
            ("1.1E-9", 2),
            ("0.00000012345", 124),
            ("0.00000000050", 1),
            ("100.035Ki", 102_435_840_000_000),
            ("0.05Gi", 53_687_091_200_000_000),
            ("0.000000000001Ki", 2),
            ("1.G", 1_000_000_000 * 1_000_000_000),
            ("10.035M", 10_035_000 * 1_000_000_000),
            ("1.3E+6", 1_300_000 * 1_000_000_000),
            ("9223372036854775807Ki", i64::MAX as i128 * 1_000_000_000),
            // Upstream's scanner accepts these oddities.
            (".", 0),
            ("+", 0),
            ("-0", 0),
        ];
        for (s, nanos) in cases {
            assert_eq!(q(s).nanos(), *nanos, "{s}");
        }
    }

    #[test]
    fn rejects_invalid_input_with_upstream_messages() {
        let regex = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
        let cases: &[(&str, &str)] = &[
            ("", regex),
            ("abc", regex),
            ("1Gix", regex),
            ("1 Gi", regex),
            ("1..2", regex),
            ("1K", "unable to parse quantity's suffix"),
            ("1e", "unable to parse quantity's suffix"),
            ("1Ki5", "unable to parse quantity's suffix"),
            ("1mm", "unable to parse quantity's suffix"),
            ("1e100", "unable to parse quantity's numeric value"),
            ("1.1.M", regex),
            ("1+1.0M", regex),
            ("0.1mi", "unable to parse quantity's suffix"),
            ("0.1am", regex),
            ("aoeu", regex),
            (".5i", "unable to parse quantity's suffix"),
            ("-3.01e-", "unable to parse quantity's suffix"),
            (" 1", regex),
            ("1 ", regex),
        ];
        for (s, msg) in cases {
            let err = Quantity::parse(s).expect_err(s);
            assert_eq!(err.to_string(), *msg, "{s}");
        }
    }

    #[test]
    fn serialises_like_upstream() {
        let cases: &[(&str, &str)] = &[
            ("0.5", "500m"),
            ("1000m", "1"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("0.1Ki", "102400m"),
            ("1e3", "1e3"),
            ("1.5k", "1500"),
            ("1000", "1k"),
            ("1000000", "1M"),
            ("1080m", "1080m"),
            ("1.08", "1080m"),
            ("100m", "100m"),
            ("1Ki", "1Ki"),
            ("1025Ki", "1025Ki"),
            ("2048Ki", "2Mi"),
            ("1536Ki", "1536Ki"),
            ("5Ki", "5Ki"),
            ("1Pi", "1Pi"),
            ("1Ei", "1Ei"),
            ("0.5Ki", "512"),
            ("12E", "12E"),
            ("1000E", "1000E"),
            ("10e3", "10e3"),
            ("5e-1", "500e-3"),
            ("1.000", "1"),
            ("0.000000001", "1n"),
            ("1500u", "1500u"),
            ("1000u", "1m"),
            ("-1.5", "-1500m"),
            ("-1Ki", "-1Ki"),
            ("0Gi", "0"),
            // Upstream keeps already-canonical input verbatim.
            ("+1", "+1"),
            ("01", "01"),
        ];
        for (s, out) in cases {
            assert_eq!(q(s).to_string(), *out, "{s}");
        }
        assert_eq!(q("+1").canonical(), "1");
        assert_eq!(q("01").canonical(), "1");
    }

    #[test]
    fn value_and_milli_value_round_away_from_zero() {
        let cases: &[(&str, i64, i64)] = &[
            ("1", 1, 1000),
            ("100m", 1, 100),
            ("1.5", 2, 1500),
            ("1500m", 2, 1500),
            ("1n", 1, 1),
            ("-1n", -1, -1),
            ("-1.5", -2, -1500),
            ("2Gi", 2_147_483_648, 2_147_483_648_000),
            ("0", 0, 0),
            ("12E", i64::MAX, i64::MAX),
        ];
        for (s, v, m) in cases {
            let x = q(s);
            assert_eq!(x.value(), *v, "value {s}");
            assert_eq!(x.milli_value(), *m, "milli {s}");
        }
    }

    #[test]
    fn compares_exactly() {
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1Ki"), q("1024"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("999m") < q("1"));
        assert!(q("-1") < q("0"));
        assert_eq!(q("0.1").cmp(&q("100m")), Ordering::Equal);
        assert!(q("1.0000000001") > q("1"));
    }

    #[test]
    fn adds_and_subtracts() {
        let mut a = q("1.5");
        a.add(&q("500m"));
        assert_eq!(a.to_string(), "2");
        let mut b = q("1Gi");
        b.add(&q("512Mi"));
        assert_eq!(b.to_string(), "1536Mi");
        let mut z = Quantity::zero();
        z.add(&q("1Mi"));
        assert_eq!(z.format(), Format::BinarySI);
        assert_eq!(z.to_string(), "1Mi");
        let mut c = q("1");
        c.sub(&q("1500m"));
        assert_eq!(c.to_string(), "-500m");
        let mut d = q("+1");
        d.add(&Quantity::zero());
        assert_eq!(d.to_string(), "1", "arithmetic drops the cached input form");
    }

    #[test]
    fn round_up_table_from_upstream() {
        let cases: &[(&str, i32, &str, bool)] = &[
            ("9.01", -3, "9010m", true),
            ("9.01", -2, "9010m", true),
            ("9.01", -1, "9100m", false),
            ("9.01", 0, "10", false),
            ("9.01", 1, "10", false),
            ("9.01", 2, "100", false),
            ("-9.01", -1, "-9100m", false),
            ("-9.01", 0, "-10", false),
            ("-9.01", 2, "-100", false),
        ];
        for (s, scale, want, exact) in cases {
            let mut x = q(s);
            assert_eq!(x.round_up(*scale), *exact, "{s} {scale}");
            assert_eq!(x.to_string(), *want, "{s} {scale}");
        }
    }

    #[test]
    fn round_up_to_milli() {
        let mut a = q("100n");
        assert!(!a.round_up(-3));
        assert_eq!(a.to_string(), "1m");
        let mut b = q("+1");
        assert!(b.round_up(-3));
        assert_eq!(b.to_string(), "+1", "exact values keep their form");
        let mut c = q("-1500u");
        assert!(!c.round_up(-3));
        assert_eq!(c.to_string(), "-2m");
    }

    #[test]
    fn binary_values_are_capped_and_small_ones_turn_decimal() {
        assert_eq!(q("8Ei").nanos(), i64::MAX as i128 * 1_000_000_000);
        assert_eq!(q("0.5Ki").format(), Format::BinarySI);
        assert_eq!(q("0.0001Ki").format(), Format::DecimalSI);
    }

    #[test]
    fn json_and_serde_round_trip() {
        assert_eq!(
            Quantity::from_json(&serde_json::json!("250m")).map(|x| x.milli_value()),
            Ok(250)
        );
        assert_eq!(
            Quantity::from_json(&serde_json::json!(2)).map(|x| x.value()),
            Ok(2)
        );
        assert_eq!(
            Quantity::from_json(&serde_json::json!(0.5)).map(|x| x.to_string()),
            Ok("500m".to_string())
        );
        assert!(Quantity::from_json(&serde_json::json!(null)).is_err());
        let v: Quantity = serde_json::from_str("\"1024Mi\"").unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"1Gi\"");
    }

    #[test]
    fn long_inputs_do_not_overflow_or_panic() {
        let long_fraction = format!("1.{}1", "0".repeat(200));
        assert_eq!(q(&long_fraction).nanos(), 1_000_000_001);
        let long_binary = format!("1.{}1Ki", "0".repeat(200));
        assert_eq!(q(&long_binary).nanos(), 1_024_000_000_001);
        assert_eq!(
            Quantity::parse(&"9".repeat(60)),
            Err(QuantityError::Numeric)
        );
        assert_eq!(q("1e-999999999").nanos(), 1);
        assert!(Quantity::parse("1e99999999999999999999").is_err());
    }
}
