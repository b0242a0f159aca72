//! What the node agent reads from the machine: capacity, addresses, versions.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::net::Ipv4Addr;
use std::path::Path;

use berth_api::quantity::{Format, Quantity};

/// `MemTotal` of /proc/meminfo in bytes.
pub fn parse_meminfo_total(text: &str) -> Option<i64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `PRETTY_NAME` of /etc/os-release.
pub fn parse_os_release(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("PRETTY_NAME="))?;
    Some(line["PRETTY_NAME=".len()..].trim_matches('"').to_string())
}

pub fn memory_bytes() -> i64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_meminfo_total(&t))
        .unwrap_or(0)
}

fn statvfs_bytes(path: &Path) -> Option<i64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and an out-parameter of the right type.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some((s.f_blocks as i64).saturating_mul(s.f_frsize as i64))
}

/// Node capacity: cpu, memory, ephemeral-storage (the data dir's filesystem), pods.
pub fn capacity(data_dir: &Path) -> BTreeMap<String, Quantity> {
    let mut r = BTreeMap::new();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as i64;
    r.insert(
        "cpu".to_string(),
        Quantity::from_value(cpus, Format::DecimalSI),
    );
    r.insert(
        "memory".to_string(),
        Quantity::from_value(memory_bytes(), Format::BinarySI),
    );
    if let Some(b) = statvfs_bytes(data_dir) {
        r.insert(
            "ephemeral-storage".to_string(),
            Quantity::from_value(b, Format::BinarySI),
        );
    }
    r.insert(
        "pods".to_string(),
        Quantity::from_value(110, Format::DecimalSI),
    );
    r.extend(hugepages(Path::new("/sys/kernel/mm/hugepages")));
    r
}

/// `hugepages-<size>` capacity for each page size the kernel offers, the
/// pages reserved now times their size (0 when none are: upstream's nodes
/// list every size), from `hugepages-<kB>kB/nr_hugepages` under `dir`.
pub fn hugepages(dir: &Path) -> BTreeMap<String, Quantity> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(kb) = name
            .to_str()
            .and_then(|n| n.strip_prefix("hugepages-"))
            .and_then(|n| n.strip_suffix("kB"))
            .and_then(|n| n.parse::<i64>().ok())
        else {
            continue;
        };
        let pages: i64 = std::fs::read_to_string(e.path().join("nr_hugepages"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        let size = Quantity::from_value(kb * 1024, Format::BinarySI);
        out.insert(
            format!("hugepages-{size}"),
            Quantity::from_value(pages.saturating_mul(kb * 1024), Format::BinarySI),
        );
    }
    out
}

/// The first non-loopback IPv4 address of an interface that is up.
pub fn host_ipv4() -> Option<Ipv4Addr> {
    let mut addrs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a linked list we free below.
    if unsafe { libc::getifaddrs(&mut addrs) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = addrs;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_flags & libc::IFF_UP as u32 == 0 {
            continue;
        }
        // SAFETY: ifa_addr is non-null.
        if unsafe { (*ifa.ifa_addr).sa_family } as i32 != libc::AF_INET {
            continue;
        }
        // SAFETY: an AF_INET address is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }.to_string_lossy();
        // Skip loopback and Berth's own pod bridge.
        if ip.is_loopback() || name == crate::cni::BRIDGE {
            continue;
        }
        found = Some(ip);
        break;
    }
    // SAFETY: the list from getifaddrs.
    unsafe { libc::freeifaddrs(addrs) };
    found
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).to_lowercase()
}

pub fn kernel_version() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn os_image() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| parse_os_release(&t))
        .unwrap_or_else(|| "Linux".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hugepages_capacity_lists_every_page_size() {
        let d = crate::testutil::TempDir::new("hugepages");
        d.write(&[
            ("hugepages-2048kB/nr_hugepages", "512\n"),
            ("hugepages-1048576kB/nr_hugepages", "0\n"),
            ("other/nr_hugepages", "9\n"),
        ]);
        let got: Vec<(String, String)> = hugepages(d.path())
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                ("hugepages-1Gi".to_string(), "0".to_string()),
                ("hugepages-2Mi".to_string(), "1Gi".to_string()),
            ]
        );
        assert!(hugepages(&d.path().join("missing")).is_empty());
    }

    #[test]
    fn parses_meminfo_and_os_release() {
        assert_eq!(
            parse_meminfo_total("MemFree: 5 kB\nMemTotal:       24684096 kB\n"),
            Some(24684096 * 1024)
        );
        assert_eq!(parse_meminfo_total("nothing"), None);
        assert_eq!(
            parse_os_release("NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n")
                .as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
    }

    #[test]
    fn capacity_has_the_four_resources() {
        let c = capacity(Path::new("/"));
        assert!(c["cpu"].value() >= 1);
        assert!(c["memory"].value() > 0);
        assert!(c.contains_key("ephemeral-storage"));
        assert_eq!(c["pods"].value(), 110);
    }
}
