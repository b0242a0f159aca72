//! The address and port ranges Services draw from (pure).
//!
//! As upstream's IPAddress allocator: a range excludes the network address
//! (and, for IPv4, the broadcast address); dynamic allocations prefer the
//! upper part of the range so the lower part (KEP-3070 / KEP-3668) stays for
//! addresses and ports users pick themselves, like `10.43.0.10` for DNS.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("invalid CIDR {0:?}: {1}")]
    Cidr(String, &'static str),
    #[error("invalid port range {0:?}: want FIRST-LAST with 1 <= FIRST <= LAST <= 65535")]
    Ports(String),
}

/// A Service CIDR such as `10.43.0.0/16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: u128,
    bits: u8,
    v6: bool,
}

impl FromStr for Cidr {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, RangeError> {
        let err = |why| RangeError::Cidr(s.to_string(), why);
        let (addr, bits) = s.split_once('/').ok_or_else(|| err("missing /prefix"))?;
        let addr: IpAddr = addr.parse().map_err(|_| err("bad address"))?;
        let bits: u8 = bits.parse().map_err(|_| err("bad prefix length"))?;
        let (value, width, v6) = to_u128(addr);
        if bits > width {
            return Err(err("prefix length too long"));
        }
        let host_bits = u32::from(width - bits);
        // Upstream refuses ranges too small to hold a usable address, and
        // IPv6 ranges wider than /64 (the allocator's size cap).
        if (!v6 && host_bits < 2) || (v6 && host_bits < 1) {
            return Err(err("range too small"));
        }
        if v6 && bits < 64 {
            return Err(err("shortest allowed prefix length for service CIDR is 64"));
        }
        let mask = if host_bits >= 128 {
            0
        } else {
            !((1u128 << host_bits) - 1)
        };
        Ok(Cidr {
            network: value & mask,
            bits,
            v6,
        })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ip_at(self.network), self.bits)
    }
}

fn to_u128(ip: IpAddr) -> (u128, u8, bool) {
    match ip {
        IpAddr::V4(a) => (u128::from(u32::from(a)), 32, false),
        IpAddr::V6(a) => (u128::from(a), 128, true),
    }
}

impl Cidr {
    /// Berth's default Service CIDR, `10.43.0.0/16` (as k3s).
    pub fn default_service_cidr() -> Cidr {
        Cidr {
            network: u128::from(u32::from_be_bytes([10, 43, 0, 0])),
            bits: 16,
            v6: false,
        }
    }

    /// `IPv4` or `IPv6`, as `spec.ipFamilies` spells them.
    pub fn family(&self) -> &'static str {
        if self.v6 { "IPv6" } else { "IPv4" }
    }

    fn host_bits(&self) -> u32 {
        u32::from(if self.v6 { 128 } else { 32 } - self.bits)
    }

    fn ip_at(&self, v: u128) -> IpAddr {
        if self.v6 {
            IpAddr::V6(v.into())
        } else {
            IpAddr::V4((v as u32).into())
        }
    }

    /// The first usable address (network + 1).
    pub fn first(&self) -> u128 {
        self.network + 1
    }

    /// The last usable address (the broadcast address is skipped for IPv4).
    pub fn last(&self) -> u128 {
        let hb = self.host_bits();
        let broadcast = if hb >= 128 {
            u128::MAX
        } else {
            self.network | ((1u128 << hb) - 1)
        };
        if self.v6 { broadcast } else { broadcast - 1 }
    }

    /// How many addresses may be handed out.
    pub fn size(&self) -> u128 {
        self.last() - self.first() + 1
    }

    /// Upstream's `calculateRangeOffset`: min(max(16, size/16), 256) of the
    /// whole block, 0 for blocks of 16 addresses or fewer.
    pub fn range_offset(&self) -> u128 {
        let block = 1u128.checked_shl(self.host_bits()).unwrap_or(u128::MAX);
        if block <= 16 {
            return 0;
        }
        (block / 16).clamp(16, 256)
    }

    /// The `n`th usable address (0 = [`Cidr::first`]), if in range.
    pub fn nth(&self, n: u128) -> Option<IpAddr> {
        let v = self.first().checked_add(n)?;
        (v <= self.last()).then(|| self.ip_at(v))
    }

    /// Whether `ip` is of this family and inside the network at all.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (v, _, v6) = to_u128(ip);
        let hb = self.host_bits();
        v6 == self.v6 && (hb >= 128 || (v >> hb) == (self.network >> hb))
    }

    /// Whether `ip` may be allocated (in the network and not its network or
    /// broadcast address).
    pub fn usable(&self, ip: IpAddr) -> bool {
        let (v, _, v6) = to_u128(ip);
        v6 == self.v6 && v >= self.first() && v <= self.last()
    }

    /// Offsets (from [`Cidr::first`]) to try for a dynamic allocation: the
    /// upper band from a random start, wrapping, then the lower band likewise.
    pub fn dynamic_order(&self, rnd: u128) -> impl Iterator<Item = u128> + '_ {
        let size = self.size();
        let off = self.range_offset().min(size);
        let upper = size - off;
        let lower = off;
        let up_start = if upper == 0 { 0 } else { rnd % upper };
        let low_start = if lower == 0 { 0 } else { rnd % lower };
        (0..upper)
            .map(move |i| off + (up_start + i) % upper)
            .chain((0..lower).map(move |i| (low_start + i) % lower))
    }
}

/// The NodePort range, `30000-32767` by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub base: u16,
    pub last: u16,
}

impl Default for PortRange {
    fn default() -> Self {
        PortRange {
            base: 30000,
            last: 32767,
        }
    }
}

impl FromStr for PortRange {
    type Err = RangeError;
    /// `30000-32767`, or `30000+2767` (base+size-1), as upstream's `net.PortRange`.
    fn from_str(s: &str) -> Result<Self, RangeError> {
        let err = || RangeError::Ports(s.to_string());
        let (a, b, plus) = match s.split_once('-') {
            Some((a, b)) => (a, b, false),
            None => {
                let (a, b) = s.split_once('+').ok_or_else(err)?;
                (a, b, true)
            }
        };
        let base: u16 = a.trim().parse().map_err(|_| err())?;
        let n: u16 = b.trim().parse().map_err(|_| err())?;
        let last = if plus {
            base.checked_add(n).ok_or_else(err)?
        } else {
            n
        };
        if base == 0 || last < base {
            return Err(err());
        }
        Ok(PortRange { base, last })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.base, self.last)
    }
}

impl PortRange {
    pub fn size(&self) -> u32 {
        u32::from(self.last - self.base) + 1
    }

    pub fn contains(&self, port: i64) -> bool {
        port >= i64::from(self.base) && port <= i64::from(self.last)
    }

    /// Upstream's port-range offset: min(max(16, size/32), 128), 0 when size <= 16.
    pub fn range_offset(&self) -> u32 {
        let size = self.size();
        if size <= 16 {
            return 0;
        }
        (size / 32).clamp(16, 128)
    }

    /// Ports to try for a dynamic allocation: upper band first, each band from a
    /// random start.
    pub fn dynamic_order(&self, rnd: u32) -> impl Iterator<Item = u16> + '_ {
        let size = self.size();
        let off = self.range_offset().min(size);
        let upper = size - off;
        let up_start = if upper == 0 { 0 } else { rnd % upper };
        let low_start = if off == 0 { 0 } else { rnd % off };
        let base = u32::from(self.base);
        (0..upper)
            .map(move |i| off + (up_start + i) % upper)
            .chain((0..off).map(move |i| (low_start + i) % off))
            .filter_map(move |o| u16::try_from(base + o).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn cidr_bounds() {
        let cases = [
            (
                "10.43.0.0/16",
                "10.43.0.1",
                "10.43.255.254",
                256u128,
                "IPv4",
            ),
            ("10.43.7.9/16", "10.43.0.1", "10.43.255.254", 256, "IPv4"),
            ("192.168.1.0/28", "192.168.1.1", "192.168.1.14", 0, "IPv4"),
            ("10.0.0.0/24", "10.0.0.1", "10.0.0.254", 16, "IPv4"),
            ("fd00::/112", "fd00::1", "fd00::ffff", 256, "IPv6"),
        ];
        for (cidr, first, last, offset, fam) in cases {
            let c: Cidr = cidr.parse().unwrap();
            assert_eq!(c.nth(0).unwrap().to_string(), first, "{cidr}");
            assert_eq!(c.nth(c.size() - 1).unwrap().to_string(), last, "{cidr}");
            assert!(c.nth(c.size()).is_none(), "{cidr}");
            assert_eq!(c.range_offset(), offset, "{cidr}");
            assert_eq!(c.family(), fam);
        }
    }

    #[test]
    fn default_cidr() {
        assert_eq!(
            Cidr::default_service_cidr(),
            "10.43.0.0/16".parse().unwrap()
        );
        assert_eq!(Cidr::default_service_cidr().to_string(), "10.43.0.0/16");
    }

    #[test]
    fn cidr_rejects_bad_input() {
        for bad in [
            "10.43.0.0",
            "10.43.0.0/33",
            "x/16",
            "10.0.0.0/31",
            "fd00::/48",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn usable_and_contains() {
        let c: Cidr = "10.43.0.0/16".parse().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(c.usable(ip("10.43.0.1")));
        assert!(c.usable(ip("10.43.255.254")));
        assert!(!c.usable(ip("10.43.0.0")));
        assert!(!c.usable(ip("10.43.255.255")));
        assert!(c.contains(ip("10.43.255.255")));
        assert!(!c.contains(ip("10.44.0.1")));
        assert!(!c.contains(ip("::1")));
    }

    #[test]
    fn dynamic_order_covers_every_address_upper_band_first() {
        let c: Cidr = "10.0.0.0/24".parse().unwrap();
        let order: Vec<u128> = c.dynamic_order(12345).collect();
        assert_eq!(order.len() as u128, c.size());
        let uniq: HashSet<_> = order.iter().collect();
        assert_eq!(uniq.len(), order.len());
        // The first size-offset tries are all in the upper band.
        let off = c.range_offset();
        assert!(order[..(c.size() - off) as usize].iter().all(|&o| o >= off));
    }

    #[test]
    fn port_ranges() {
        let p: PortRange = "30000-32767".parse().unwrap();
        assert_eq!(p, PortRange::default());
        assert_eq!(p.range_offset(), 86);
        assert_eq!(p.to_string(), "30000-32767");
        assert_eq!("30000+99".parse::<PortRange>().unwrap().last, 30099);
        for bad in ["", "5-1", "0-10", "x-y", "30000"] {
            assert!(bad.parse::<PortRange>().is_err(), "{bad}");
        }
        let order: Vec<u16> = p.dynamic_order(7).collect();
        assert_eq!(order.len(), 2768);
        assert!(order[..2682].iter().all(|&x| x >= 30086));
        assert_eq!(order.iter().collect::<HashSet<_>>().len(), 2768);
    }
}
