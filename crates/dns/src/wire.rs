//! DNS messages on the wire (hickory-proto): parsing queries with upstream's error
//! replies, answers from the zone as records, UDP size limits.

use std::str::FromStr;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV};
use hickory_proto::rr::{Name, RData, Record};

use crate::records::{self, Answer, Data};

/// Largest UDP response we send; the EDNS buffer size advertised (the DNS flag day's 1232).
pub const EDNS_PAYLOAD: u16 = 1232;
/// Without EDNS a UDP response must fit in 512 bytes.
const CLASSIC_UDP: usize = 512;

/// What to do with a received datagram or TCP frame.
#[derive(Debug)]
pub enum Parsed {
    /// A well-formed standard query with one question.
    Query(Box<Message>),
    /// Answer this at once (FORMERR, NOTIMP).
    Reply(Vec<u8>),
    /// Nothing can be answered (too short for a header, or a response).
    Drop,
}

pub fn parse(raw: &[u8]) -> Parsed {
    if raw.len() < 12 {
        return Parsed::Drop;
    }
    // QR set: a response sent to us; never answer it (no reflection loops).
    if raw[2] & 0x80 != 0 {
        return Parsed::Drop;
    }
    let msg = match Message::from_vec(raw) {
        Ok(m) => m,
        Err(_) => return Parsed::Reply(header_only(raw, ResponseCode::FormErr)),
    };
    if msg.metadata.op_code != OpCode::Query {
        return Parsed::Reply(error(&msg, ResponseCode::NotImp));
    }
    if msg.queries.len() != 1 {
        return Parsed::Reply(error(&msg, ResponseCode::FormErr));
    }
    Parsed::Query(Box::new(msg))
}

/// A reply built from the raw header alone, for a message that does not parse:
/// the ID, opcode and RD copied, QR set, no sections (what CoreDNS sends).
fn header_only(raw: &[u8], rcode: ResponseCode) -> Vec<u8> {
    let mut out = vec![0u8; 12];
    out[0] = raw[0];
    out[1] = raw[1];
    out[2] = 0x80 | (raw[2] & 0x79); // QR, opcode, RD
    out[3] = rcode.low();
    out
}

/// An error reply to a parsed request (the question echoed).
pub fn error(req: &Message, rcode: ResponseCode) -> Vec<u8> {
    let mut m = response_to(req);
    m.metadata.response_code = rcode;
    encode(&m, None)
}

/// A response skeleton for `req`: same ID, question and RD, RA set, EDNS echoed.
pub fn response_to(req: &Message) -> Message {
    let mut m = Message::response(req.metadata.id, req.metadata.op_code);
    m.metadata.recursion_desired = req.metadata.recursion_desired;
    m.metadata.recursion_available = true;
    m.metadata.checking_disabled = req.metadata.checking_disabled;
    m.queries = req.queries.clone();
    if req.edns.is_some() {
        let mut e = Edns::new();
        e.set_max_payload(EDNS_PAYLOAD);
        m.edns = Some(e);
    }
    m
}

/// The most a UDP response to `req` may carry.
pub fn udp_limit(req: &Message) -> usize {
    match &req.edns {
        Some(e) => usize::from(e.max_payload().clamp(512, EDNS_PAYLOAD)),
        None => CLASSIC_UDP,
    }
}

/// Encodes `m`; over `limit` (UDP), the sections are dropped and TC set so the
/// client retries over TCP.
pub fn encode(m: &Message, limit: Option<usize>) -> Vec<u8> {
    match m.to_vec() {
        Ok(bytes) if limit.is_none_or(|l| bytes.len() <= l) => bytes,
        Ok(_) => {
            let mut t = m.clone();
            t.answers.clear();
            t.authorities.clear();
            t.additionals.clear();
            t.metadata.truncation = true;
            t.to_vec().unwrap_or_default()
        }
        Err(_) => {
            let mut t =
                Message::error_msg(m.metadata.id, m.metadata.op_code, ResponseCode::ServFail);
            t.queries = m.queries.clone();
            t.to_vec().unwrap_or_default()
        }
    }
}

/// The response carrying the zone's `answer` to `req`.
pub fn answer(req: &Message, domain: &str, ans: &Answer) -> Message {
    let mut m = response_to(req);
    m.metadata.authoritative = true;
    if ans.nxdomain {
        m.metadata.response_code = ResponseCode::NXDomain;
    }
    let convert = |items: &[(String, Data)]| -> Vec<Record> {
        items
            .iter()
            .filter_map(|(name, d)| to_record(name, d, domain))
            .collect()
    };
    // Names in the answer keep the question's spelling (case) where they are the question.
    let mut answers = convert(&ans.answers);
    if let Some(q) = req.queries.first() {
        let asked = records::normalize(&q.name().to_ascii());
        for r in &mut answers {
            if records::normalize(&r.name.to_ascii()) == asked {
                r.name = q.name().clone();
            }
        }
    }
    m.answers = answers;
    m.additionals = convert(&ans.additionals);
    if ans.soa
        && let Some(soa) = to_record(domain, &Data::Soa, domain)
    {
        m.authorities.push(soa);
    }
    m
}

fn fqdn(name: &str) -> Option<Name> {
    let mut n = Name::from_str(name).ok()?;
    n.set_fqdn(true);
    Some(n)
}

fn to_record(name: &str, d: &Data, domain: &str) -> Option<Record> {
    let owner = fqdn(name)?;
    let rdata = match d {
        Data::A(ip) => RData::A(A(*ip)),
        Data::Aaaa(ip) => RData::AAAA(AAAA(*ip)),
        Data::Srv { port, target } => RData::SRV(SRV::new(0, 100, *port, fqdn(target)?)),
        Data::Cname(t) => RData::CNAME(CNAME(fqdn(t)?)),
        Data::Ptr(t) => RData::PTR(PTR(fqdn(t)?)),
        Data::Ns(t) => RData::NS(NS(fqdn(t)?)),
        Data::Soa => RData::SOA(SOA::new(
            fqdn(&format!("ns.dns.{domain}"))?,
            fqdn(&format!("hostmaster.{domain}"))?,
            // CoreDNS's kubernetes plugin serial is a timestamp; any constant works
            // for a zone nobody transfers.
            1,
            7200,
            1800,
            86400,
            records::TTL,
        )),
    };
    Some(Record::from_rdata(owner, records::TTL, rdata))
}

/// SRV weights: 100 shared evenly among the records of one answer (as CoreDNS).
pub fn spread_srv_weights(m: &mut Message) {
    let n = m
        .answers
        .iter()
        .filter(|r| matches!(r.data, RData::SRV(_)))
        .count();
    if n < 2 {
        return;
    }
    let w = u16::try_from((100 / n).max(1)).unwrap_or(1);
    for r in &mut m.answers {
        if let RData::SRV(srv) = &r.data {
            r.data = RData::SRV(SRV::new(srv.priority, w, srv.port, srv.target.clone()));
        }
    }
}

/// The rcode as CoreDNS's metrics label it.
pub fn rcode_label(rcode: ResponseCode) -> &'static str {
    match rcode {
        ResponseCode::NoError => "NOERROR",
        ResponseCode::FormErr => "FORMERR",
        ResponseCode::ServFail => "SERVFAIL",
        ResponseCode::NXDomain => "NXDOMAIN",
        ResponseCode::NotImp => "NOTIMP",
        ResponseCode::Refused => "REFUSED",
        _ => "OTHER",
    }
}

/// The rcode of an encoded response (low 4 bits of byte 3).
pub fn rcode_of(bytes: &[u8]) -> Option<ResponseCode> {
    bytes.get(3).map(|b| ResponseCode::from(0, b & 0x0F))
}

/// True for messages whose QR bit says response.
pub fn is_response(m: &Message) -> bool {
    m.metadata.message_type == MessageType::Response
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::RecordType;

    fn query(name: &str, t: RecordType) -> Message {
        let mut m = Message::query();
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
        m
    }

    #[test]
    fn malformed_input() {
        // Too short for a header: nothing to answer.
        assert!(matches!(parse(&[1, 2, 3]), Parsed::Drop));
        // A header claiming a question that is not there: FORMERR with the same ID.
        let raw = [0xAB, 0xCD, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 7, b'x'];
        let Parsed::Reply(r) = parse(&raw) else {
            panic!("no reply")
        };
        assert_eq!(&r[..2], &[0xAB, 0xCD]);
        assert_eq!(r[2] & 0x80, 0x80, "QR");
        assert_eq!(r[2] & 0x01, 0x01, "RD copied");
        assert_eq!(rcode_of(&r), Some(ResponseCode::FormErr));
        let back = Message::from_vec(&r).unwrap();
        assert_eq!(back.metadata.id, 0xABCD);
        // Two questions: FORMERR.
        let mut two = query("a.example.", RecordType::A);
        two.add_query(Query::query(
            Name::from_str("b.example.").unwrap(),
            RecordType::A,
        ));
        let Parsed::Reply(r) = parse(&two.to_vec().unwrap()) else {
            panic!("no reply")
        };
        assert_eq!(rcode_of(&r), Some(ResponseCode::FormErr));
        // A response is never answered.
        let resp = Message::response(1, OpCode::Query).to_vec().unwrap();
        assert!(matches!(parse(&resp), Parsed::Drop));
        // Other opcodes: NOTIMP.
        let mut upd = query("a.example.", RecordType::A);
        upd.metadata.op_code = OpCode::Update;
        let Parsed::Reply(r) = parse(&upd.to_vec().unwrap()) else {
            panic!("no reply")
        };
        assert_eq!(rcode_of(&r), Some(ResponseCode::NotImp));
    }

    #[test]
    fn big_udp_answers_are_truncated() {
        let req = query("db.prod.svc.cluster.local.", RecordType::A);
        let ans = Answer {
            answers: (0..100)
                .map(|i| {
                    (
                        "db.prod.svc.cluster.local".to_string(),
                        Data::A([10, 42, 0, i].into()),
                    )
                })
                .collect(),
            ..Default::default()
        };
        let m = answer(&req, "cluster.local", &ans);
        let udp = encode(&m, Some(udp_limit(&req)));
        let back = Message::from_vec(&udp).unwrap();
        assert!(back.metadata.truncation);
        assert!(back.answers.is_empty());
        let tcp = Message::from_vec(&encode(&m, None)).unwrap();
        assert!(!tcp.metadata.truncation);
        assert_eq!(tcp.answers.len(), 100);
        assert!(tcp.metadata.authoritative);
    }

    #[test]
    fn negative_answers_carry_the_soa() {
        let req = query("Nope.Default.svc.cluster.local.", RecordType::A);
        let ans = Answer {
            nxdomain: true,
            soa: true,
            ..Default::default()
        };
        let m = Message::from_vec(&encode(&answer(&req, "cluster.local", &ans), None)).unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
        assert_eq!(
            m.queries[0].name().to_ascii(),
            "Nope.Default.svc.cluster.local."
        );
        let RData::SOA(soa) = &m.authorities[0].data else {
            panic!("no SOA")
        };
        assert_eq!(soa.minimum, 5);
        assert_eq!(m.authorities[0].ttl, 5);
    }
}
