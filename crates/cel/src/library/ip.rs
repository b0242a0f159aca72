//! `k8s.io/apiserver/pkg/cel/library/ip.go`: `ip()`, `isIP()`,
//! `ip.isCanonical()` and the IP methods. Like upstream, IPv4-mapped IPv6
//! addresses and zones are refused.

use std::net::IpAddr;

use crate::EvalError;
use crate::functions::CallResult;
use crate::value::EvalValue;

pub(crate) fn parse_ip(s: &str) -> Result<IpAddr, EvalError> {
    let ip: IpAddr = s
        .parse()
        .map_err(|_| EvalError::Other(format!("IP Address \"{s}\" parse error during conversion from string: ParseAddr(\"{s}\"): unable to parse IP")))?;
    if let IpAddr::V6(v6) = ip
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(EvalError::Other(format!(
            "IPv4-mapped IPv6 address \"{s}\" is not allowed"
        )));
    }
    Ok(ip)
}

fn is_link_local_multicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 224 && o[1] == 0 && o[2] == 0
        }
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn is_link_local_unicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_global_unicast(ip: &IpAddr) -> bool {
    // Go's netip.Addr.IsGlobalUnicast: not unspecified, loopback, multicast,
    // link-local, nor the IPv4 broadcast address.
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || is_link_local_unicast(ip))
        }
    }
}

pub(crate) fn call(
    name: &str,
    target: Option<&EvalValue>,
    args: &[EvalValue],
) -> Option<CallResult> {
    use EvalValue as V;
    match (name, target, args) {
        ("ip", None, [V::String(s)]) => return Some(parse_ip(s).map(V::Ip)),
        ("isIP", None, [V::String(s)]) => return Some(Ok(V::Bool(parse_ip(s).is_ok()))),
        ("ip.isCanonical", None, [V::String(s)]) => {
            return Some(parse_ip(s).map(|ip| V::Bool(ip.to_string() == **s)));
        }
        _ => {}
    }
    let Some(V::Ip(ip)) = target else {
        return None;
    };
    let r = match (name, args) {
        ("family", []) => V::Int(if ip.is_ipv4() { 4 } else { 6 }),
        ("isUnspecified", []) => V::Bool(ip.is_unspecified()),
        ("isLoopback", []) => V::Bool(ip.is_loopback()),
        ("isLinkLocalMulticast", []) => V::Bool(is_link_local_multicast(ip)),
        ("isLinkLocalUnicast", []) => V::Bool(is_link_local_unicast(ip)),
        ("isGlobalUnicast", []) => V::Bool(is_global_unicast(ip)),
        _ => return None,
    };
    Some(Ok(r))
}
