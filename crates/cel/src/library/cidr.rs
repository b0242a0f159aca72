//! `k8s.io/apiserver/pkg/cel/library/cidr.go`: `cidr()`, `isCIDR()` and the
//! CIDR methods.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::EvalError;
use crate::functions::CallResult;
use crate::library::ip::parse_ip;
use crate::value::EvalValue;

/// An IP prefix as written (the address need not be masked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, EvalError> {
        let err = || {
            EvalError::Other(format!(
                "network address \"{s}\" parse error during conversion from string: netip.ParsePrefix(\"{s}\"): bad prefix"
            ))
        };
        let (a, p) = s.split_once('/').ok_or_else(err)?;
        let addr = parse_ip(a).map_err(|_| err())?;
        // Go refuses leading zeros and signs in the length.
        if p.is_empty()
            || (p.len() > 1 && p.starts_with('0'))
            || !p.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(err());
        }
        let prefix: u8 = p.parse().map_err(|_| err())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(err());
        }
        Ok(Cidr { addr, prefix })
    }

    pub fn masked(&self) -> Cidr {
        Cidr {
            addr: mask(self.addr, self.prefix),
            prefix: self.prefix,
        }
    }

    pub fn contains(&self, ip: &IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4()
            && mask(*ip, self.prefix) == mask(self.addr, self.prefix)
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix))
            };
            IpAddr::V4(Ipv4Addr::from(bits & m))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix))
            };
            IpAddr::V6(Ipv6Addr::from(bits & m))
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

pub(crate) fn call(
    name: &str,
    target: Option<&EvalValue>,
    args: &[EvalValue],
) -> Option<CallResult> {
    use EvalValue as V;
    match (name, target, args) {
        ("cidr", None, [V::String(s)]) => return Some(Cidr::parse(s).map(V::Cidr)),
        ("isCIDR", None, [V::String(s)]) => return Some(Ok(V::Bool(Cidr::parse(s).is_ok()))),
        _ => {}
    }
    let Some(V::Cidr(c)) = target else {
        return None;
    };
    let r = match (name, args) {
        ("containsIP", [V::Ip(ip)]) => Ok(V::Bool(c.contains(ip))),
        ("containsIP", [V::String(s)]) => parse_ip(s).map(|ip| V::Bool(c.contains(&ip))),
        ("containsCIDR", [V::Cidr(o)]) => Ok(V::Bool(o.prefix >= c.prefix && c.contains(&o.addr))),
        ("containsCIDR", [V::String(s)]) => {
            Cidr::parse(s).map(|o| V::Bool(o.prefix >= c.prefix && c.contains(&o.addr)))
        }
        ("ip", []) => Ok(V::Ip(c.addr)),
        ("masked", []) => Ok(V::Cidr(c.masked())),
        ("prefixLength", []) => Ok(V::Int(i64::from(c.prefix))),
        _ => return None,
    };
    Some(r)
}
