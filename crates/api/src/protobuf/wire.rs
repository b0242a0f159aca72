//! Protobuf wire format: varints, keys, length-delimited fields.

use super::ProtobufError;

pub const VARINT: u8 = 0;
pub const FIXED64: u8 = 1;
pub const LEN: u8 = 2;
pub const FIXED32: u8 = 5;

/// A field's raw value as read off the wire.
#[derive(Debug, Clone, Copy)]
pub enum Raw<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'a [u8]),
}

impl Raw<'_> {
    pub fn wire_type(&self) -> u8 {
        match self {
            Raw::Varint(_) => VARINT,
            Raw::Fixed64(_) => FIXED64,
            Raw::Fixed32(_) => FIXED32,
            Raw::Len(_) => LEN,
        }
    }
}

pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut out: u64 = 0;
        for i in 0..10 {
            let b = *self.buf.get(self.pos).ok_or(ProtobufError::Truncated)?;
            self.pos += 1;
            // The tenth byte may only carry the top bit of a 64-bit value.
            if i == 9 && b > 1 {
                return Err(ProtobufError::VarintOverflow);
            }
            out |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(ProtobufError::VarintOverflow)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        let end = self.pos.checked_add(n).ok_or(ProtobufError::Truncated)?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(ProtobufError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    /// The next field: its number and raw value.
    pub fn field(&mut self) -> Result<(u32, Raw<'a>), ProtobufError> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| ProtobufError::BadFieldNumber)?;
        if number == 0 {
            return Err(ProtobufError::BadFieldNumber);
        }
        let raw = match (key & 7) as u8 {
            VARINT => Raw::Varint(self.varint()?),
            FIXED64 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Raw::Fixed64(u64::from_le_bytes(a))
            }
            LEN => {
                let n = usize::try_from(self.varint()?).map_err(|_| ProtobufError::Truncated)?;
                Raw::Len(self.take(n)?)
            }
            FIXED32 => {
                let b = self.take(4)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                Raw::Fixed32(u32::from_le_bytes(a))
            }
            other => return Err(ProtobufError::UnsupportedWireType(other)),
        };
        Ok((number, raw))
    }
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_key(out: &mut Vec<u8>, number: u32, wire_type: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire_type));
}

pub fn put_len(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_key(out, number, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}
