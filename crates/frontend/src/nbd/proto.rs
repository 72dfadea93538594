//! The NBD protocol's wire format (fixed newstyle handshake, simple and
//! structured replies, `base:allocation`), as pure functions over bytes:
//! no sockets, no device. Decoding never panics on any input; it is
//! property-tested here and fuzzed (`fuzz/`).
//!
//! Reference: the NBD protocol specification (`doc/proto.md` of the
//! NetworkBlockDevice/nbd project). All integers are big-endian.

use thiserror::Error;

/// `NBDMAGIC`.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle magic, and the magic of every option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of option replies.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of transmission requests.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of simple replies.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of structured reply chunks.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flags (server).
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: no 124 zero bytes after NBD_OPT_EXPORT_NAME.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: no zeroes.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags.
pub mod tflags {
    /// Flags are valid.
    pub const HAS_FLAGS: u16 = 1 << 0;
    /// Read-only export.
    pub const READ_ONLY: u16 = 1 << 1;
    /// FLUSH is supported.
    pub const SEND_FLUSH: u16 = 1 << 2;
    /// FUA is supported.
    pub const SEND_FUA: u16 = 1 << 3;
    /// Rotational medium.
    pub const ROTATIONAL: u16 = 1 << 4;
    /// TRIM is supported.
    pub const SEND_TRIM: u16 = 1 << 5;
    /// WRITE_ZEROES is supported.
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    /// The DF flag is supported.
    pub const SEND_DF: u16 = 1 << 7;
    /// Several connections see each other's writes after a FLUSH on any.
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
    /// CACHE is supported.
    pub const SEND_CACHE: u16 = 1 << 10;
    /// FAST_ZERO is supported.
    pub const SEND_FAST_ZERO: u16 = 1 << 11;
}

/// Option codes.
pub mod opt {
    /// Old-style export selection (no error possible).
    pub const EXPORT_NAME: u32 = 1;
    /// End the negotiation.
    pub const ABORT: u32 = 2;
    /// List exports.
    pub const LIST: u32 = 3;
    /// TLS.
    pub const STARTTLS: u32 = 5;
    /// Describe an export.
    pub const INFO: u32 = 6;
    /// Describe and select an export.
    pub const GO: u32 = 7;
    /// Use structured replies.
    pub const STRUCTURED_REPLY: u32 = 8;
    /// List metadata contexts.
    pub const LIST_META_CONTEXT: u32 = 9;
    /// Select metadata contexts.
    pub const SET_META_CONTEXT: u32 = 10;
    /// 64-bit extended headers (not offered).
    pub const EXTENDED_HEADERS: u32 = 11;
}

/// Option reply types.
pub mod rep {
    /// Done.
    pub const ACK: u32 = 1;
    /// An export name (LIST).
    pub const SERVER: u32 = 2;
    /// Export information (INFO, GO).
    pub const INFO: u32 = 3;
    /// A metadata context.
    pub const META_CONTEXT: u32 = 4;
    /// Unknown option.
    pub const ERR_UNSUP: u32 = (1 << 31) + 1;
    /// Forbidden by policy.
    pub const ERR_POLICY: u32 = (1 << 31) + 2;
    /// Syntactically or semantically invalid.
    pub const ERR_INVALID: u32 = (1 << 31) + 3;
    /// No such export.
    pub const ERR_UNKNOWN: u32 = (1 << 31) + 6;
    /// Request or reply too large.
    pub const ERR_TOO_BIG: u32 = (1 << 31) + 9;
}

/// `NBD_INFO_*` types.
pub mod info {
    /// Size and transmission flags.
    pub const EXPORT: u16 = 0;
    /// Name.
    pub const NAME: u16 = 1;
    /// Description.
    pub const DESCRIPTION: u16 = 2;
    /// Block size constraints.
    pub const BLOCK_SIZE: u16 = 3;
}

/// Commands.
pub mod cmd {
    /// Read.
    pub const READ: u16 = 0;
    /// Write.
    pub const WRITE: u16 = 1;
    /// Disconnect.
    pub const DISC: u16 = 2;
    /// Flush.
    pub const FLUSH: u16 = 3;
    /// Trim.
    pub const TRIM: u16 = 4;
    /// Prefetch hint.
    pub const CACHE: u16 = 5;
    /// Write zeroes.
    pub const WRITE_ZEROES: u16 = 6;
    /// Block status.
    pub const BLOCK_STATUS: u16 = 7;
}

/// Command flags.
pub mod cflags {
    /// Force unit access.
    pub const FUA: u16 = 1 << 0;
    /// Write zeroes must not punch a hole.
    pub const NO_HOLE: u16 = 1 << 1;
    /// Don't fragment a structured read reply.
    pub const DF: u16 = 1 << 2;
    /// Block status: one extent only.
    pub const REQ_ONE: u16 = 1 << 3;
    /// Write zeroes: fail fast rather than write slowly.
    pub const FAST_ZERO: u16 = 1 << 4;
}

/// Structured reply chunk types and flags.
pub mod chunk {
    /// Last chunk of a reply.
    pub const FLAG_DONE: u16 = 1;
    /// No payload.
    pub const NONE: u16 = 0;
    /// Data at an offset.
    pub const OFFSET_DATA: u16 = 1;
    /// A hole (zeros) at an offset.
    pub const OFFSET_HOLE: u16 = 2;
    /// Block status extents.
    pub const BLOCK_STATUS: u16 = 5;
    /// An error.
    pub const ERROR: u16 = (1 << 15) + 1;
}

/// NBD error values.
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: u32 = 1;
    /// I/O error.
    pub const EIO: u32 = 5;
    /// Invalid argument.
    pub const EINVAL: u32 = 22;
    /// No space left.
    pub const ENOSPC: u32 = 28;
    /// Value too large.
    pub const EOVERFLOW: u32 = 75;
    /// Not supported.
    pub const ENOTSUP: u32 = 95;
    /// Shutting down.
    pub const ESHUTDOWN: u32 = 108;
}

/// `base:allocation` extent flags.
pub mod state {
    /// Not allocated.
    pub const HOLE: u32 = 1;
    /// Reads as zeros.
    pub const ZERO: u32 = 2;
}

/// The only metadata context offered.
pub const BASE_ALLOCATION: &str = "base:allocation";
/// Its id.
pub const BASE_ALLOCATION_ID: u32 = 1;

/// Size of an option request header (magic, option, length).
pub const OPTION_HEADER_LEN: usize = 16;
/// Size of a transmission request header.
pub const REQUEST_LEN: usize = 28;
/// Longest string (name, query) accepted in options, bytes.
pub const MAX_STRING: usize = 4096;
/// Longest option payload read; a longer one ends the connection.
pub const MAX_OPTION_DATA: u32 = 64 * 1024;

/// Why a message is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtoError {
    /// A magic number is wrong.
    #[error("bad magic {0:#x}")]
    BadMagic(u64),
    /// Fewer bytes than the structure needs.
    #[error("{what} is {got} bytes, need {need}")]
    Short {
        /// What was being decoded.
        what: &'static str,
        /// Bytes present.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A length field disagrees with the data.
    #[error("{0}")]
    Invalid(String),
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

fn need(what: &'static str, b: &[u8], n: usize) -> Result<(), ProtoError> {
    if b.len() < n {
        Err(ProtoError::Short {
            what,
            got: b.len(),
            need: n,
        })
    } else {
        Ok(())
    }
}

/// The server's greeting.
pub fn greeting() -> [u8; 18] {
    let mut g = [0u8; 18];
    g[0..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    g[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    g[16..18].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    g
}

/// An option request's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    /// Option code.
    pub option: u32,
    /// Payload length.
    pub len: u32,
}

/// Decode an option header (16 bytes).
pub fn parse_option_header(b: &[u8]) -> Result<OptionHeader, ProtoError> {
    need("option header", b, OPTION_HEADER_LEN)?;
    let magic = be64(b, 0);
    if magic != IHAVEOPT {
        return Err(ProtoError::BadMagic(magic));
    }
    Ok(OptionHeader {
        option: be32(b, 8),
        len: be32(b, 12),
    })
}

/// Encode an option reply.
pub fn option_reply(option: u32, kind: u32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(20 + data.len());
    v.extend(REPLY_MAGIC.to_be_bytes());
    v.extend(option.to_be_bytes());
    v.extend(kind.to_be_bytes());
    v.extend((data.len() as u32).to_be_bytes());
    v.extend(data);
    v
}

fn take_string(b: &[u8], at: usize, len: usize, what: &'static str) -> Result<String, ProtoError> {
    if len > MAX_STRING {
        return Err(ProtoError::Invalid(format!(
            "{what} longer than {MAX_STRING} bytes"
        )));
    }
    let end = at
        .checked_add(len)
        .filter(|e| *e <= b.len())
        .ok_or_else(|| ProtoError::Invalid(format!("{what} runs past the option data")))?;
    String::from_utf8(b[at..end].to_vec())
        .map_err(|_| ProtoError::Invalid(format!("{what} is not UTF-8")))
}

/// The payload of `NBD_OPT_INFO` / `NBD_OPT_GO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    /// Export name.
    pub name: String,
    /// `NBD_INFO_*` items the client asks for.
    pub items: Vec<u16>,
}

/// Decode `NBD_OPT_INFO` / `NBD_OPT_GO` data.
pub fn parse_info_request(b: &[u8]) -> Result<InfoRequest, ProtoError> {
    need("INFO/GO data", b, 6)?;
    let n = be32(b, 0) as usize;
    let name = take_string(b, 4, n, "export name")?;
    let at = 4 + n;
    need("INFO/GO data", b, at + 2)?;
    let count = be16(b, at) as usize;
    let items_at = at + 2;
    if b.len() != items_at + 2 * count {
        return Err(ProtoError::Invalid(format!(
            "INFO/GO data is {} bytes, {} information requests need {}",
            b.len(),
            count,
            items_at + 2 * count
        )));
    }
    let items = (0..count).map(|i| be16(b, items_at + 2 * i)).collect();
    Ok(InfoRequest { name, items })
}

/// The payload of `NBD_OPT_LIST_META_CONTEXT` / `NBD_OPT_SET_META_CONTEXT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaRequest {
    /// Export name.
    pub name: String,
    /// Queries (context names or prefixes).
    pub queries: Vec<String>,
}

/// Decode meta-context option data.
pub fn parse_meta_request(b: &[u8]) -> Result<MetaRequest, ProtoError> {
    need("meta context data", b, 8)?;
    let n = be32(b, 0) as usize;
    let name = take_string(b, 4, n, "export name")?;
    let mut at = 4 + n;
    need("meta context data", b, at + 4)?;
    let count = be32(b, at) as usize;
    at += 4;
    let mut queries = Vec::new();
    for _ in 0..count {
        need("meta context query", b, at + 4)?;
        let l = be32(b, at) as usize;
        queries.push(take_string(b, at + 4, l, "meta context query")?);
        at += 4 + l;
        if queries.len() > 64 {
            return Err(ProtoError::Invalid(
                "more than 64 meta context queries".into(),
            ));
        }
    }
    if at != b.len() {
        return Err(ProtoError::Invalid(format!(
            "{} bytes after the meta context queries",
            b.len() - at
        )));
    }
    Ok(MetaRequest { name, queries })
}

/// `NBD_REP_INFO` payload for `NBD_INFO_EXPORT`.
pub fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut v = Vec::with_capacity(12);
    v.extend(info::EXPORT.to_be_bytes());
    v.extend(size.to_be_bytes());
    v.extend(flags.to_be_bytes());
    v
}

/// `NBD_REP_INFO` payload for `NBD_INFO_BLOCK_SIZE`.
pub fn info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(14);
    v.extend(info::BLOCK_SIZE.to_be_bytes());
    v.extend(min.to_be_bytes());
    v.extend(preferred.to_be_bytes());
    v.extend(max.to_be_bytes());
    v
}

/// `NBD_REP_INFO` payload for a string item (name, description).
pub fn info_string(item: u16, s: &str) -> Vec<u8> {
    let mut v = item.to_be_bytes().to_vec();
    v.extend(s.as_bytes());
    v
}

/// `NBD_REP_SERVER` payload.
pub fn rep_server(name: &str, description: &str) -> Vec<u8> {
    let mut v = (name.len() as u32).to_be_bytes().to_vec();
    v.extend(name.as_bytes());
    v.extend(description.as_bytes());
    v
}

/// `NBD_REP_META_CONTEXT` payload.
pub fn rep_meta_context(id: u32, name: &str) -> Vec<u8> {
    let mut v = id.to_be_bytes().to_vec();
    v.extend(name.as_bytes());
    v
}

/// A transmission request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Command flags.
    pub flags: u16,
    /// Command.
    pub kind: u16,
    /// The client's cookie, echoed in the reply.
    pub cookie: u64,
    /// Byte offset.
    pub offset: u64,
    /// Byte length.
    pub len: u32,
}

/// Decode a transmission request header (28 bytes).
pub fn parse_request(b: &[u8]) -> Result<Request, ProtoError> {
    need("request", b, REQUEST_LEN)?;
    let magic = be32(b, 0);
    if magic != REQUEST_MAGIC {
        return Err(ProtoError::BadMagic(u64::from(magic)));
    }
    Ok(Request {
        flags: be16(b, 4),
        kind: be16(b, 6),
        cookie: be64(b, 8),
        offset: be64(b, 16),
        len: be32(b, 24),
    })
}

/// Encode a request header (the client side; for tests and tools).
pub fn encode_request(r: &Request) -> [u8; REQUEST_LEN] {
    let mut b = [0u8; REQUEST_LEN];
    b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&r.flags.to_be_bytes());
    b[6..8].copy_from_slice(&r.kind.to_be_bytes());
    b[8..16].copy_from_slice(&r.cookie.to_be_bytes());
    b[16..24].copy_from_slice(&r.offset.to_be_bytes());
    b[24..28].copy_from_slice(&r.len.to_be_bytes());
    b
}

/// A simple reply header (data, if any, follows).
pub fn simple_reply(error: u32, cookie: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// A structured reply chunk header for `payload_len` bytes of payload.
pub fn chunk_header(flags: u16, kind: u16, cookie: u64, payload_len: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b[16..20].copy_from_slice(&payload_len.to_be_bytes());
    b
}

/// A complete `NBD_REPLY_TYPE_ERROR` chunk (final).
pub fn error_chunk(cookie: u64, error: u32, message: &str) -> Vec<u8> {
    let msg = &message.as_bytes()[..message.len().min(1024)];
    let mut v = chunk_header(chunk::FLAG_DONE, chunk::ERROR, cookie, 6 + msg.len() as u32).to_vec();
    v.extend(error.to_be_bytes());
    v.extend((msg.len() as u16).to_be_bytes());
    v.extend(msg);
    v
}

/// A complete `NBD_REPLY_TYPE_BLOCK_STATUS` chunk (final) for extents
/// `(length, flags)`.
pub fn block_status_chunk(cookie: u64, context: u32, extents: &[(u32, u32)]) -> Vec<u8> {
    let len = 4 + 8 * extents.len() as u32;
    let mut v = chunk_header(chunk::FLAG_DONE, chunk::BLOCK_STATUS, cookie, len).to_vec();
    v.extend(context.to_be_bytes());
    for (l, f) in extents {
        v.extend(l.to_be_bytes());
        v.extend(f.to_be_bytes());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn greeting_and_headers() {
        let g = greeting();
        assert_eq!(&g[0..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        let mut o = IHAVEOPT.to_be_bytes().to_vec();
        o.extend(opt::GO.to_be_bytes());
        o.extend(7u32.to_be_bytes());
        assert_eq!(
            parse_option_header(&o),
            Ok(OptionHeader {
                option: opt::GO,
                len: 7
            })
        );
        o[0] ^= 1;
        assert!(matches!(
            parse_option_header(&o),
            Err(ProtoError::BadMagic(_))
        ));
        let r = Request {
            flags: cflags::FUA,
            kind: cmd::WRITE,
            cookie: 0xdead_beef,
            offset: 4096,
            len: 512,
        };
        assert_eq!(parse_request(&encode_request(&r)), Ok(r));
    }

    #[test]
    fn info_and_meta_requests() {
        let mut b = 4u32.to_be_bytes().to_vec();
        b.extend(b"vssd");
        b.extend(2u16.to_be_bytes());
        b.extend(info::BLOCK_SIZE.to_be_bytes());
        b.extend(info::NAME.to_be_bytes());
        assert_eq!(
            parse_info_request(&b),
            Ok(InfoRequest {
                name: "vssd".into(),
                items: vec![info::BLOCK_SIZE, info::NAME]
            })
        );
        b.push(0);
        assert!(parse_info_request(&b).is_err(), "trailing byte");
        let mut m = 0u32.to_be_bytes().to_vec();
        m.extend(1u32.to_be_bytes());
        m.extend((BASE_ALLOCATION.len() as u32).to_be_bytes());
        m.extend(BASE_ALLOCATION.as_bytes());
        assert_eq!(
            parse_meta_request(&m),
            Ok(MetaRequest {
                name: String::new(),
                queries: vec![BASE_ALLOCATION.into()]
            })
        );
        m.truncate(m.len() - 1);
        assert!(parse_meta_request(&m).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
        /// No input makes a decoder panic.
        #[test]
        fn decoders_never_panic(b in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_option_header(&b);
            let _ = parse_request(&b);
            let _ = parse_info_request(&b);
            let _ = parse_meta_request(&b);
        }

        /// Plausible option payloads (lengths near the data) never panic either.
        #[test]
        fn length_prefixed_payloads_never_panic(
            n in 0u32..40, count in 0u32..5, tail in prop::collection::vec(any::<u8>(), 0..48)
        ) {
            let mut b = n.to_be_bytes().to_vec();
            b.extend(&tail);
            let _ = parse_info_request(&b);
            let mut m = n.to_be_bytes().to_vec();
            m.extend(vec![b'x'; (n as usize).min(40)]);
            m.extend(count.to_be_bytes());
            m.extend(&tail);
            let _ = parse_meta_request(&m);
        }
    }
}
