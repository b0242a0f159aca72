//! The SPDY/3.1 framing the agent needs as a *client* of containerd's streaming
//! server: SYN_STREAM with a few headers, DATA (with FIN for half-closing
//! stdin), PING echoes; everything else the server sends is skipped.
//!
//! Header blocks are a zlib stream shared by the session. The agent never
//! needs to read the server's headers (a SYN_REPLY's stream id comes before its
//! header block), and writes its own as *stored* (uncompressed) deflate blocks,
//! which every zlib reader accepts without the SPDY dictionary.

use bytes::{Buf, BufMut, Bytes, BytesMut};

const VERSION: u16 = 3;
const TYPE_SYN_STREAM: u16 = 1;
const TYPE_SYN_REPLY: u16 = 2;
const TYPE_RST_STREAM: u16 = 3;
const TYPE_PING: u16 = 6;
const TYPE_GOAWAY: u16 = 7;
pub const FLAG_FIN: u8 = 0x01;
/// Largest DATA payload written at once (the length field allows 16 MiB).
pub const MAX_DATA: usize = 32 * 1024;

/// A frame read from the server, reduced to what the relay acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Data {
        stream_id: u32,
        fin: bool,
        data: Bytes,
    },
    SynReply {
        stream_id: u32,
    },
    RstStream {
        stream_id: u32,
        status: u32,
    },
    Ping {
        id: u32,
    },
    GoAway,
    /// SETTINGS, HEADERS, WINDOW_UPDATE, server-initiated streams.
    Other,
}

/// Splits a byte stream into frames.
#[derive(Default)]
pub struct Decoder {
    buf: BytesMut,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("SPDY protocol error: {0}")]
pub struct ProtocolError(pub String);

impl Decoder {
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete frame, if buffered.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, ProtocolError> {
        if self.buf.len() < 8 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([0, self.buf[5], self.buf[6], self.buf[7]]) as usize;
        if self.buf.len() < 8 + len {
            return Ok(None);
        }
        let mut frame = self.buf.split_to(8 + len).freeze();
        let word = frame.get_u32();
        let flags = frame.get_u8();
        frame.advance(3);
        if word & 0x8000_0000 == 0 {
            return Ok(Some(Frame::Data {
                stream_id: word & 0x7fff_ffff,
                fin: flags & FLAG_FIN != 0,
                data: frame,
            }));
        }
        let version = ((word >> 16) & 0x7fff) as u16;
        if version != VERSION {
            return Err(ProtocolError(format!("unsupported SPDY version {version}")));
        }
        let need = |n: usize, f: &Bytes| {
            if f.len() < n {
                Err(ProtocolError(format!(
                    "control frame too short ({} bytes)",
                    f.len()
                )))
            } else {
                Ok(())
            }
        };
        Ok(Some(match (word & 0xffff) as u16 {
            TYPE_SYN_REPLY => {
                need(4, &frame)?;
                Frame::SynReply {
                    stream_id: frame.get_u32() & 0x7fff_ffff,
                }
            }
            TYPE_RST_STREAM => {
                need(8, &frame)?;
                Frame::RstStream {
                    stream_id: frame.get_u32() & 0x7fff_ffff,
                    status: frame.get_u32(),
                }
            }
            TYPE_PING => {
                need(4, &frame)?;
                Frame::Ping {
                    id: frame.get_u32(),
                }
            }
            TYPE_GOAWAY => Frame::GoAway,
            _ => Frame::Other,
        }))
    }
}

/// Writes frames; keeps the header compression context (the zlib stream).
#[derive(Default)]
pub struct Encoder {
    started: bool,
}

impl Encoder {
    /// SYN_STREAM opening `stream_id` with `headers` (names must be lower case).
    pub fn syn_stream(&mut self, stream_id: u32, headers: &[(&str, &str)]) -> Bytes {
        let mut block = BytesMut::new();
        block.put_u32(headers.len() as u32);
        for (k, v) in headers {
            block.put_u32(k.len() as u32);
            block.put_slice(k.as_bytes());
            block.put_u32(v.len() as u32);
            block.put_slice(v.as_bytes());
        }
        let compressed = self.stored(&block);
        let mut out = BytesMut::with_capacity(18 + compressed.len());
        control_header(&mut out, TYPE_SYN_STREAM, 0, 10 + compressed.len());
        out.put_u32(stream_id & 0x7fff_ffff);
        out.put_u32(0); // associated stream
        out.put_u16(0); // priority, slot
        out.put_slice(&compressed);
        out.freeze()
    }

    /// The header block as the next piece of the session's zlib stream: stored
    /// deflate blocks (never final) and a sync flush, preceded once by the
    /// zlib header.
    fn stored(&mut self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len() + 8);
        if !self.started {
            out.extend_from_slice(&[0x78, 0x01]);
            self.started = true;
        }
        for chunk in data.chunks(0xffff) {
            let n = chunk.len() as u16;
            out.push(0x00); // BFINAL=0, BTYPE=00 (stored), padded to a byte
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&(!n).to_le_bytes());
            out.extend_from_slice(chunk);
        }
        // A sync flush (an empty stored block), as zlib writers end each frame:
        // Go's inflater hands out a block's bytes only when it reads the next
        // block header, which must be in this frame.
        out.extend_from_slice(&[0x00, 0x00, 0x00, 0xff, 0xff]);
        out
    }
}

fn control_header(out: &mut BytesMut, kind: u16, flags: u8, len: usize) {
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u32(((flags as u32) << 24) | (len as u32 & 0x00ff_ffff));
}

/// One DATA frame (callers split payloads above [`MAX_DATA`]).
pub fn data(stream_id: u32, fin: bool, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(8 + payload.len());
    out.put_u32(stream_id & 0x7fff_ffff);
    let flags = if fin { FLAG_FIN } else { 0 } as u32;
    out.put_u32((flags << 24) | (payload.len() as u32 & 0x00ff_ffff));
    out.put_slice(payload);
    out.freeze()
}

/// The PING reply (the same frame back).
pub fn ping(id: u32) -> Bytes {
    let mut out = BytesMut::with_capacity(12);
    control_header(&mut out, TYPE_PING, 0, 4);
    out.put_u32(id);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inflates stored blocks (what `Encoder` writes) back, checking the framing.
    fn unstore(mut z: &[u8], with_header: bool) -> Vec<u8> {
        if with_header {
            assert_eq!(&z[..2], &[0x78, 0x01]);
            let check = u32::from(z[0]) * 256 + u32::from(z[1]);
            assert!(check.is_multiple_of(31), "valid zlib header check");
            z = &z[2..];
        }
        let mut out = Vec::new();
        while !z.is_empty() {
            assert_eq!(z[0], 0, "stored, not final");
            let n = u16::from_le_bytes([z[1], z[2]]);
            let nn = u16::from_le_bytes([z[3], z[4]]);
            assert_eq!(n, !nn);
            out.extend_from_slice(&z[5..5 + n as usize]);
            z = &z[5 + n as usize..];
        }
        out
    }

    #[test]
    fn syn_stream_layout() {
        let mut enc = Encoder::default();
        let f = enc.syn_stream(1, &[("streamtype", "error")]);
        assert_eq!(&f[..4], &[0x80, 0x03, 0x00, 0x01]);
        let len = u32::from_be_bytes([0, f[5], f[6], f[7]]) as usize;
        assert_eq!(len, f.len() - 8);
        assert_eq!(&f[8..12], &1u32.to_be_bytes());
        let block = unstore(&f[18..], true);
        let mut want = vec![0, 0, 0, 1, 0, 0, 0, 10];
        want.extend_from_slice(b"streamtype");
        want.extend_from_slice(&[0, 0, 0, 5]);
        want.extend_from_slice(b"error");
        assert_eq!(block, want);
        assert!(
            f.ends_with(&[0, 0, 0, 0xff, 0xff]),
            "ends with a sync flush"
        );
        // Later frames continue the same zlib stream: no second header.
        let g = enc.syn_stream(3, &[("streamtype", "stdin")]);
        assert_eq!(&g[8..12], &3u32.to_be_bytes());
        assert!(unstore(&g[18..], false).ends_with(b"stdin"));
    }

    #[test]
    fn decodes_frames_split_anywhere() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&data(3, false, b"hello"));
        bytes.extend_from_slice(&data(3, true, b""));
        bytes.extend_from_slice(&ping(2));
        // SYN_REPLY for stream 5 with some (opaque) header block.
        bytes.extend_from_slice(&[0x80, 3, 0, 2, 0, 0, 0, 7, 0, 0, 0, 5, 0xaa, 0xbb, 0xcc]);
        // RST_STREAM 7, status 5 (CANCEL).
        bytes.extend_from_slice(&[0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 7, 0, 0, 0, 5]);
        // WINDOW_UPDATE is skipped.
        bytes.extend_from_slice(&[0x80, 3, 0, 9, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 1, 0]);
        let want = vec![
            Frame::Data {
                stream_id: 3,
                fin: false,
                data: Bytes::from_static(b"hello"),
            },
            Frame::Data {
                stream_id: 3,
                fin: true,
                data: Bytes::new(),
            },
            Frame::Ping { id: 2 },
            Frame::SynReply { stream_id: 5 },
            Frame::RstStream {
                stream_id: 7,
                status: 5,
            },
            Frame::Other,
        ];
        for split in [1, 3, 7, bytes.len()] {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for chunk in bytes.chunks(split) {
                d.extend(chunk);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got, want, "split {split}");
        }
    }

    #[test]
    fn rejects_other_versions_and_short_frames() {
        let mut d = Decoder::default();
        d.extend(&[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1]);
        assert!(d.next_frame().is_err());
        let mut d = Decoder::default();
        d.extend(&[0x80, 3, 0, 6, 0, 0, 0, 2, 0, 0]);
        assert!(d.next_frame().is_err());
    }
}
