//! Android's binary XML (AOSP `ResourceTypes.h`): a file chunk (type
//! 0x0003) holding a string pool (0x0001), a resource-id map (0x0180) and
//! the element chunks (0x0102 start, 0x0103 end; namespaces 0x0100/0x0101
//! and CDATA 0x0104 are skipped). Every chunk is {type u16, header_size
//! u16, size u32}, little-endian. An attribute is {namespace, name, raw
//! value: string indices; typed value: {size u16, 0 u8, type u8, data u32}}.
//!
//! Every read is checked: a size or offset outside the buffer is an
//! error, never a panic, and what is allocated is bounded by the input.

use crate::ApkError;

const XML: u16 = 0x0003;
const STRING_POOL: u16 = 0x0001;
const RESOURCE_MAP: u16 = 0x0180;
const START_ELEMENT: u16 = 0x0102;
const END_ELEMENT: u16 = 0x0103;
const UTF8_FLAG: u32 = 0x100;
/// No string index (an absent namespace or raw value).
const NONE: u32 = 0xffff_ffff;
/// Deeper nesting than any manifest has: an input built to exhaust the stack or memory.
const MAX_DEPTH: usize = 64;

/// A typed attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Text(String),
    Int(u32),
    Bool(bool),
    /// A resource reference, such as @string/app_name.
    Reference(u32),
    Other,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    /// The attribute's name as written; obfuscated APKs may blank it.
    pub name: String,
    /// Its resource id in the android namespace (android:name is 0x01010003).
    pub resource_id: Option<u32>,
    /// Whether it is in a namespace (`package` on `<manifest>` is not).
    pub namespaced: bool,
    pub value: Value,
}

/// An element opening or closing, in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Start { name: String, attributes: Vec<Attribute> },
    End,
}

fn invalid(why: impl Into<String>) -> ApkError {
    ApkError::InvalidManifest(why.into())
}

/// Little-endian reads that fail instead of panicking.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u16(&self, at: usize) -> Result<u16, ApkError> {
        let b = self.0.get(at..at.checked_add(2).ok_or_else(|| invalid("offset overflow"))?).ok_or_else(|| invalid(format!("reading past the end at {at}")))?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&self, at: usize) -> Result<u32, ApkError> {
        let b = self.0.get(at..at.checked_add(4).ok_or_else(|| invalid("offset overflow"))?).ok_or_else(|| invalid(format!("reading past the end at {at}")))?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// A chunk's header, checked to lie within `limit`.
struct Chunk {
    kind: u16,
    header: usize,
    start: usize,
    end: usize,
}

fn chunk(bytes: &Bytes, start: usize, limit: usize) -> Result<Chunk, ApkError> {
    let kind = bytes.u16(start)?;
    let header = bytes.u16(start + 2)? as usize;
    let size = bytes.u32(start + 4)? as usize;
    if header < 8 || size < header {
        return Err(invalid(format!("a chunk at {start} has header {header} and size {size}")));
    }
    let end = start.checked_add(size).filter(|end| *end <= limit).ok_or_else(|| invalid(format!("a chunk at {start} of {size} bytes runs past its parent")))?;
    Ok(Chunk { kind, header, start, end })
}

/// The strings, decoded once.
struct Pool(Vec<String>);

impl Pool {
    fn get(&self, index: u32) -> Result<String, ApkError> {
        if index == NONE {
            return Ok(String::new());
        }
        self.0.get(index as usize).cloned().ok_or_else(|| invalid(format!("string {index} is not in the pool of {}", self.0.len())))
    }
}

fn string_pool(bytes: &Bytes, c: &Chunk) -> Result<Pool, ApkError> {
    let count = bytes.u32(c.start + 8)? as usize;
    let flags = bytes.u32(c.start + 16)?;
    let strings_start = bytes.u32(c.start + 20)? as usize;
    // The offsets table must fit in the chunk: this bounds `count` by the input.
    let offsets_at = c.start + c.header;
    if count.checked_mul(4).and_then(|n| n.checked_add(offsets_at)).is_none_or(|end| end > c.end) {
        return Err(invalid(format!("a string pool of {count} strings does not fit its {} bytes", c.end - c.start)));
    }
    let data = c.start.checked_add(strings_start).filter(|d| *d <= c.end).ok_or_else(|| invalid("the strings start outside their pool"))?;
    let utf8 = flags & UTF8_FLAG != 0;
    let mut strings = Vec::with_capacity(count);
    for i in 0..count {
        let at = data.checked_add(bytes.u32(offsets_at + 4 * i)? as usize).ok_or_else(|| invalid("offset overflow"))?;
        if at >= c.end {
            return Err(invalid(format!("string {i} starts outside its pool")));
        }
        strings.push(if utf8 { utf8_string(bytes, at, c.end)? } else { utf16_string(bytes, at, c.end)? });
    }
    Ok(Pool(strings))
}

/// A UTF-8 pool entry: its length in UTF-16 units, its length in bytes
/// (each one byte, or two with the high bit set), the bytes.
fn utf8_string(bytes: &Bytes, at: usize, end: usize) -> Result<String, ApkError> {
    let length = |at: usize| -> Result<(usize, usize), ApkError> {
        let first = *bytes.0.get(at).ok_or_else(|| invalid("a string runs past its pool"))? as usize;
        if first & 0x80 == 0 {
            return Ok((first, 1));
        }
        let second = *bytes.0.get(at + 1).ok_or_else(|| invalid("a string runs past its pool"))? as usize;
        Ok((((first & 0x7f) << 8) | second, 2))
    };
    let (_, skip) = length(at)?;
    let (len, skip2) = length(at + skip)?;
    let from = at + skip + skip2;
    let raw = bytes.0.get(from..from + len).filter(|_| from + len <= end).ok_or_else(|| invalid("a string runs past its pool"))?;
    Ok(String::from_utf8_lossy(raw).into_owned())
}

/// A UTF-16 pool entry: its length in units (one u16, or two with the high
/// bit set), the units.
fn utf16_string(bytes: &Bytes, at: usize, end: usize) -> Result<String, ApkError> {
    let first = bytes.u16(at)? as usize;
    let (len, from) = match first & 0x8000 {
        0 => (first, at + 2),
        _ => ((((first & 0x7fff) << 16) | bytes.u16(at + 2)? as usize), at + 4),
    };
    let bytes_end = len.checked_mul(2).and_then(|n| n.checked_add(from)).filter(|e| *e <= end).ok_or_else(|| invalid("a string runs past its pool"))?;
    let units: Vec<u16> = bytes.0[from..bytes_end].chunks_exact(2).map(|u| u16::from_le_bytes([u[0], u[1]])).collect();
    Ok(String::from_utf16_lossy(&units))
}

fn attributes(bytes: &Bytes, c: &Chunk, pool: &Pool, ids: &[u32]) -> Result<(String, Vec<Attribute>), ApkError> {
    // After the node header (line, comment): ns, name, attributeStart, attributeSize, attributeCount.
    let ext = c.start + c.header;
    let name = pool.get(bytes.u32(ext + 4)?)?;
    let first = bytes.u16(ext + 8)? as usize;
    let size = bytes.u16(ext + 10)? as usize;
    let count = bytes.u16(ext + 12)? as usize;
    if size < 20 {
        return Err(invalid(format!("<{name}> has attributes of {size} bytes, fewer than 20")));
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = ext + first + i * size;
        if at + 20 > c.end {
            return Err(invalid(format!("attribute {i} of <{name}> runs past its element")));
        }
        let (namespace, name_index, raw) = (bytes.u32(at)?, bytes.u32(at + 4)?, bytes.u32(at + 8)?);
        let data_type = *bytes.0.get(at + 15).ok_or_else(|| invalid("attribute past the end"))?;
        let data = bytes.u32(at + 16)?;
        let value = match data_type {
            0x03 => Value::Text(pool.get(data)?),
            0x10 | 0x11 => Value::Int(data),
            0x12 => Value::Bool(data != 0),
            0x01 => Value::Reference(data),
            // A raw string kept beside another type (rare): the text still says it.
            _ if raw != NONE => Value::Text(pool.get(raw)?),
            _ => Value::Other,
        };
        out.push(Attribute {
            name: pool.get(name_index)?,
            resource_id: ids.get(name_index as usize).copied().filter(|id| *id != 0),
            namespaced: namespace != NONE,
            value,
        });
    }
    Ok((name, out))
}

/// The elements of a binary XML document, in order.
pub fn parse(input: &[u8]) -> Result<Vec<Event>, ApkError> {
    let bytes = Bytes(input);
    if input.len() < 8 || bytes.u16(0)? != XML {
        return Err(ApkError::ManifestNotBinary);
    }
    let file = chunk(&bytes, 0, input.len())?;
    let mut pool = None;
    let mut ids: Vec<u32> = vec![];
    let mut events = vec![];
    let mut depth = 0usize;
    let mut at = file.header;
    while at < file.end {
        let c = chunk(&bytes, at, file.end)?;
        match c.kind {
            STRING_POOL if pool.is_none() => pool = Some(string_pool(&bytes, &c)?),
            RESOURCE_MAP => ids = (c.start + c.header..c.end).step_by(4).take_while(|i| i + 4 <= c.end).map(|i| bytes.u32(i)).collect::<Result<_, _>>()?,
            START_ELEMENT => {
                let pool = pool.as_ref().ok_or_else(|| invalid("an element comes before the string pool"))?;
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(invalid(format!("elements nest deeper than {MAX_DEPTH}")));
                }
                let (name, attributes) = attributes(&bytes, &c, pool, &ids)?;
                events.push(Event::Start { name, attributes });
            }
            END_ELEMENT => {
                depth = depth.checked_sub(1).ok_or_else(|| invalid("an element ends that never began"))?;
                events.push(Event::End);
            }
            _ => {}
        }
        at = c.end;
    }
    if depth != 0 {
        return Err(invalid(format!("{depth} element(s) never end")));
    }
    if events.is_empty() {
        return Err(invalid("the document has no element"));
    }
    Ok(events)
}
