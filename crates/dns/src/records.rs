//! The cluster zone as CoreDNS's kubernetes plugin serves it, built from Services
//! and EndpointSlices (pure: objects in, a lookup table out).
//!
//! - `svc.ns.svc.<domain>`: A/AAAA of the ClusterIPs; for a headless Service, of
//!   every ready endpoint; CNAME to `externalName` for ExternalName Services.
//! - `_port._proto.svc.ns.svc.<domain>`: SRV per named port (headless: one per
//!   endpoint, targeting its hostname record); `svc.ns.svc.<domain>` SRV: all ports.
//! - `host.svc.ns.svc.<domain>`: each endpoint, `host` being its `hostname`
//!   (StatefulSet pods with `subdomain`) or its dashed IP.
//! - `1-2-3-4.ns.pod.<domain>`: any pod IP (CoreDNS's `pods insecure`).
//! - PTR for ClusterIPs and endpoint IPs; other reverse names are not ours.
//! - Other names in the domain: NXDOMAIN (names above records: NODATA), with the
//!   zone's SOA in the authority section.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::rr::RecordType;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// TTL of every record and of negative answers (CoreDNS kubernetes plugin's default).
pub const TTL: u32 = 5;
/// The label tying an EndpointSlice to its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// One record's data; names are lowercase and without the trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Data {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Srv { port: u16, target: String },
    Cname(String),
    Ptr(String),
    Soa,
    Ns(String),
}

impl Data {
    pub fn record_type(&self) -> RecordType {
        match self {
            Data::A(_) => RecordType::A,
            Data::Aaaa(_) => RecordType::AAAA,
            Data::Srv { .. } => RecordType::SRV,
            Data::Cname(_) => RecordType::CNAME,
            Data::Ptr(_) => RecordType::PTR,
            Data::Soa => RecordType::SOA,
            Data::Ns(_) => RecordType::NS,
        }
    }

    fn ip(ip: IpAddr) -> Data {
        match ip {
            IpAddr::V4(v) => Data::A(v),
            IpAddr::V6(v) => Data::Aaaa(v),
        }
    }
}

/// What the zone says about a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Inside the cluster domain (or a known reverse name): an authoritative answer.
    Answer(Answer),
    /// Not ours: forward it.
    Forward,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answer {
    /// NXDOMAIN when true, else NOERROR.
    pub nxdomain: bool,
    pub answers: Vec<(String, Data)>,
    /// A/AAAA of SRV and NS targets (glue).
    pub additionals: Vec<(String, Data)>,
    /// The zone's SOA goes in the authority section (negative answers).
    pub soa: bool,
}

/// A snapshot of the cluster zone.
#[derive(Debug, Clone, Default)]
pub struct Zone {
    domain: String,
    names: HashMap<String, Vec<Data>>,
    /// Names that exist only because longer names under them do (NODATA, not NXDOMAIN).
    parents: HashSet<String>,
    reverse: HashMap<IpAddr, String>,
}

/// Lowercase, without the trailing dot.
pub fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl Zone {
    /// An empty zone for `domain` (e.g. `cluster.local`).
    pub fn empty(domain: &str) -> Zone {
        Zone {
            domain: normalize(domain),
            ..Default::default()
        }
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The zone for these Services and EndpointSlices.
    pub fn build(domain: &str, services: &[&Service], slices: &[&EndpointSlice]) -> Zone {
        let mut z = Zone::empty(domain);
        let mut by_service: HashMap<(&str, &str), Vec<&EndpointSlice>> = HashMap::new();
        for s in slices {
            let ns = s.metadata.namespace.as_deref().unwrap_or("default");
            if let Some(svc) = s
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
            {
                by_service.entry((ns, svc.as_str())).or_default().push(s);
            }
        }
        let mut sorted: Vec<&&Service> = services.iter().collect();
        sorted.sort_by_key(|s| (s.metadata.namespace.clone(), s.metadata.name.clone()));
        for svc in sorted {
            let (Some(name), ns) = (
                svc.metadata.name.as_deref(),
                svc.metadata.namespace.as_deref().unwrap_or("default"),
            ) else {
                continue;
            };
            let slices = by_service
                .get(&(ns, name))
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            z.add_service(ns, name, svc, slices);
            // The apex's NS target names the DNS Service's IPs, as CoreDNS does.
            if (ns, name) == ("kube-system", "kube-dns")
                && let Some(ips) = z
                    .names
                    .get(&format!("kube-dns.kube-system.svc.{}", z.domain))
            {
                let ips: Vec<Data> = ips
                    .iter()
                    .filter(|d| matches!(d, Data::A(_) | Data::Aaaa(_)))
                    .cloned()
                    .collect();
                let ns_name = format!("ns.dns.{}", z.domain);
                for ip in ips {
                    z.push(ns_name.clone(), ip);
                }
            }
        }
        z.index_parents();
        z
    }

    fn push(&mut self, name: String, data: Data) {
        let v = self.names.entry(name).or_default();
        if !v.contains(&data) {
            v.push(data);
        }
    }

    fn add_service(&mut self, ns: &str, name: &str, svc: &Service, slices: &[&EndpointSlice]) {
        let base = format!("{name}.{ns}.svc.{}", self.domain).to_ascii_lowercase();
        let Some(spec) = &svc.spec else { return };
        if spec.type_.as_deref() == Some("ExternalName") {
            if let Some(target) = spec.external_name.as_deref().filter(|t| !t.is_empty()) {
                self.push(base, Data::Cname(normalize(target)));
            }
            return;
        }
        let cluster_ips: Vec<IpAddr> = spec
            .cluster_ips
            .iter()
            .flatten()
            .chain(spec.cluster_ip.iter())
            .filter_map(|ip| ip.parse().ok())
            .collect::<BTreeSet<IpAddr>>()
            .into_iter()
            .collect();
        let headless = spec.cluster_ip.as_deref() == Some("None") || cluster_ips.is_empty();
        if !headless {
            for ip in &cluster_ips {
                self.push(base.clone(), Data::ip(*ip));
                self.reverse.insert(*ip, base.clone());
            }
            for p in spec.ports.iter().flatten() {
                let Ok(port) = u16::try_from(p.port) else {
                    continue;
                };
                let proto = p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase();
                let srv = Data::Srv {
                    port,
                    target: base.clone(),
                };
                if let Some(pn) = p.name.as_deref().filter(|n| !n.is_empty()) {
                    self.push(
                        format!("_{}._{proto}.{base}", pn.to_ascii_lowercase()),
                        srv.clone(),
                    );
                }
                self.push(base.clone(), srv);
            }
        }
        // Endpoints: names for each ready address; for headless Services they also
        // make the Service's own A/AAAA and SRV records.
        let mut seen = HashSet::new();
        for slice in slices {
            if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
                continue;
            }
            let ports: Vec<(Option<String>, String, u16)> = slice
                .ports
                .iter()
                .flatten()
                .filter_map(|p| {
                    let port = u16::try_from(p.port?).ok()?;
                    let proto = p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase();
                    Some((p.name.clone().filter(|n| !n.is_empty()), proto, port))
                })
                .collect();
            for ep in &slice.endpoints {
                // A nil `ready` means unknown, which consumers treat as ready.
                if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                    continue;
                }
                for addr in &ep.addresses {
                    let Ok(ip) = addr.parse::<IpAddr>() else {
                        continue;
                    };
                    if !seen.insert(ip) {
                        continue;
                    }
                    let host = ep
                        .hostname
                        .as_deref()
                        .filter(|h| !h.is_empty())
                        .map(str::to_ascii_lowercase)
                        .unwrap_or_else(|| dashed(ip));
                    let host_name = format!("{host}.{base}");
                    self.push(host_name.clone(), Data::ip(ip));
                    self.reverse.entry(ip).or_insert_with(|| host_name.clone());
                    if headless {
                        self.push(base.clone(), Data::ip(ip));
                        for (pn, proto, port) in &ports {
                            let srv = Data::Srv {
                                port: *port,
                                target: host_name.clone(),
                            };
                            if let Some(pn) = pn {
                                self.push(
                                    format!("_{}._{proto}.{base}", pn.to_ascii_lowercase()),
                                    srv.clone(),
                                );
                            }
                            self.push(base.clone(), srv);
                        }
                    }
                }
            }
        }
    }

    fn index_parents(&mut self) {
        let suffix = format!(".{}", self.domain);
        for name in self.names.keys() {
            let mut rest = name.as_str();
            while let Some((_, parent)) = rest.split_once('.') {
                if !parent.ends_with(&suffix) {
                    break;
                }
                self.parents.insert(parent.to_string());
                rest = parent;
            }
        }
    }

    fn in_domain(&self, name: &str) -> bool {
        name == self.domain
            || name
                .strip_suffix(&self.domain)
                .is_some_and(|p| p.ends_with('.'))
    }

    /// Answers `qtype` for `qname` (any case, trailing dot optional).
    pub fn lookup(&self, qname: &str, qtype: RecordType) -> Lookup {
        let name = normalize(qname);
        if let Some(ip) = reverse_ip(&name) {
            return match self.reverse.get(&ip) {
                Some(target) => {
                    Lookup::Answer(self.filter(&name, &[Data::Ptr(target.clone())], qtype))
                }
                None => Lookup::Forward,
            };
        }
        if !self.in_domain(&name) {
            return Lookup::Forward;
        }
        if name == self.domain {
            let apex = [Data::Soa, Data::Ns(format!("ns.dns.{}", self.domain))];
            return Lookup::Answer(self.filter(&name, &apex, qtype));
        }
        if let Some(ip) = self.pod_ip(&name) {
            return Lookup::Answer(self.filter(&name, &[Data::ip(ip)], qtype));
        }
        if let Some(data) = self.names.get(&name) {
            return Lookup::Answer(self.filter(&name, data, qtype));
        }
        Lookup::Answer(Answer {
            nxdomain: !self.parents.contains(&name),
            soa: true,
            ..Default::default()
        })
    }

    /// `a-b-c-d.<ns>.pod.<domain>` → a.b.c.d (IPv6: colons written as dashes).
    fn pod_ip(&self, name: &str) -> Option<IpAddr> {
        let rest = name.strip_suffix(&format!(".pod.{}", self.domain))?;
        let (ip, ns) = rest.split_once('.')?;
        if ns.is_empty() || ns.contains('.') {
            return None;
        }
        if let Ok(v4) = ip.replace('-', ".").parse::<Ipv4Addr>() {
            return Some(v4.into());
        }
        ip.replace('-', ":")
            .parse::<Ipv6Addr>()
            .ok()
            .map(Into::into)
    }

    fn filter(&self, name: &str, data: &[Data], qtype: RecordType) -> Answer {
        let mut out = Answer::default();
        // A CNAME owns its name: it answers every type.
        let matching: Vec<&Data> = if data.iter().any(|d| matches!(d, Data::Cname(_))) {
            data.iter()
                .filter(|d| matches!(d, Data::Cname(_)))
                .collect()
        } else {
            data.iter()
                .filter(|d| qtype == RecordType::ANY || d.record_type() == qtype)
                .collect()
        };
        for d in matching {
            out.answers.push((name.to_string(), d.clone()));
            if let Data::Srv { target, .. } | Data::Ns(target) = d {
                for t in self.names.get(target).into_iter().flatten() {
                    if matches!(t, Data::A(_) | Data::Aaaa(_)) {
                        let extra = (target.clone(), t.clone());
                        if !out.additionals.contains(&extra) {
                            out.additionals.push(extra);
                        }
                    }
                }
            }
        }
        out.soa = out.answers.is_empty();
        out
    }
}

/// `10.42.0.5` → `10-42-0-5`; IPv6 colons become dashes (CoreDNS's endpoint names).
pub fn dashed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v) => v.to_string().replace('.', "-"),
        IpAddr::V6(v) => v.to_string().replace(':', "-"),
    }
}

/// The address of a full reverse name (`4.3.2.1.in-addr.arpa`, 32 nibbles of `ip6.arpa`).
pub fn reverse_ip(name: &str) -> Option<IpAddr> {
    if let Some(rest) = name.strip_suffix(".in-addr.arpa") {
        let parts: Vec<u8> = rest
            .split('.')
            .map(|p| p.parse::<u8>().ok())
            .collect::<Option<_>>()?;
        if parts.len() != 4 {
            return None;
        }
        return Some(IpAddr::from([parts[3], parts[2], parts[1], parts[0]]));
    }
    let rest = name.strip_suffix(".ip6.arpa")?;
    let nibbles: Vec<u8> = rest
        .split('.')
        .map(|p| {
            (p.len() == 1)
                .then(|| u8::from_str_radix(p, 16).ok())
                .flatten()
        })
        .collect::<Option<_>>()?;
    if nibbles.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, pair) in nibbles.rchunks(2).enumerate() {
        // Reverse order: the last nibble in the name is the highest of byte 0.
        bytes[i] = (pair[1] << 4) | pair[0];
    }
    Some(IpAddr::from(bytes))
}

#[cfg(test)]
mod tests;
