//! The fixed newstyle handshake: greeting, client flags, then options until
//! the client selects the export (`NBD_OPT_GO`, `NBD_OPT_EXPORT_NAME`) or
//! leaves. The export is the drive, under the empty name (QEMU's and
//! libnbd's default) and under `vssd`.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use log::debug;

use super::proto::{
    self, BASE_ALLOCATION, BASE_ALLOCATION_ID, FLAG_C_FIXED_NEWSTYLE, FLAG_C_NO_ZEROES,
    MAX_OPTION_DATA, OPTION_HEADER_LEN, info, opt, rep, tflags,
};

/// Names the export answers to (besides the empty name).
pub const EXPORT_NAME: &str = "vssd";

/// Largest payload (read or write) the server accepts.
pub const MAX_PAYLOAD: u32 = 32 << 20;

/// What the server says about its export.
#[derive(Debug, Clone)]
pub struct ExportInfo {
    /// Size, bytes.
    pub size: u64,
    /// Preferred block size (the drive's page).
    pub preferred_block: u32,
    /// Description (`NBD_INFO_DESCRIPTION`, `NBD_OPT_LIST`).
    pub description: String,
}

/// What the client and server agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// Structured replies are in use.
    pub structured: bool,
    /// `base:allocation` was selected (block status allowed).
    pub base_allocation: bool,
    /// The transmission flags sent.
    pub flags: u16,
}

/// How the handshake ended without a transmission phase.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The client asked to stop (`NBD_OPT_ABORT`) or closed the connection.
    #[error("the client ended the negotiation")]
    Aborted,
    /// The client broke the protocol; the connection is closed.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The socket failed (or timed out).
    #[error("connection: {0}")]
    Io(#[from] io::Error),
}

fn is_ours(name: &str) -> bool {
    name.is_empty() || name == EXPORT_NAME
}

/// Transmission flags for a connection.
pub fn transmission_flags(structured: bool) -> u16 {
    let mut f = tflags::HAS_FLAGS
        | tflags::SEND_FLUSH
        | tflags::SEND_FUA
        | tflags::SEND_TRIM
        | tflags::SEND_WRITE_ZEROES
        | tflags::SEND_CACHE
        // One device and one store behind every connection, and FLUSH
        // syncs the whole store: a flush on any connection covers writes
        // completed on all of them.
        | tflags::CAN_MULTI_CONN;
    if structured {
        // Reads are always answered in one chunk.
        f |= tflags::SEND_DF;
    }
    f
}

struct Session<'a, S: Read + Write> {
    s: &'a mut S,
    export: &'a ExportInfo,
    structured: bool,
    base_allocation: bool,
}

impl<S: Read + Write> Session<'_, S> {
    fn reply(&mut self, option: u32, kind: u32, data: &[u8]) -> io::Result<()> {
        self.s.write_all(&proto::option_reply(option, kind, data))
    }

    fn error(&mut self, option: u32, kind: u32, msg: &str) -> io::Result<()> {
        debug!("NBD option {option}: refused ({kind:#x}): {msg}");
        self.reply(option, kind, msg.as_bytes())
    }

    fn read_exact_or_abort(&mut self, buf: &mut [u8]) -> Result<(), HandshakeError> {
        match self.s.read_exact(buf) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(HandshakeError::Aborted),
            Err(e) => Err(e.into()),
        }
    }

    /// Send `NBD_REP_INFO` items and the final ACK for INFO / GO.
    fn info_replies(&mut self, option: u32, items: &[u16], flags: u16) -> io::Result<()> {
        self.reply(
            option,
            rep::INFO,
            &proto::info_export(self.export.size, flags),
        )?;
        // Block sizes always: the client must respect them even if it did not ask.
        self.reply(
            option,
            rep::INFO,
            &proto::info_block_size(512, self.export.preferred_block, MAX_PAYLOAD),
        )?;
        for &item in items {
            match item {
                info::NAME => self.reply(
                    option,
                    rep::INFO,
                    &proto::info_string(info::NAME, EXPORT_NAME),
                )?,
                info::DESCRIPTION => self.reply(
                    option,
                    rep::INFO,
                    &proto::info_string(info::DESCRIPTION, &self.export.description),
                )?,
                _ => {}
            }
        }
        self.reply(option, rep::ACK, &[])
    }

    /// Meta-context queries that match `base:allocation`.
    fn meta_matches(queries: &[String], list: bool) -> bool {
        queries.is_empty() && list
            || queries
                .iter()
                .any(|q| q == BASE_ALLOCATION || (list && q == "base:"))
    }

    /// Handle one option; `Some(flags)` once the export is selected.
    fn option(&mut self, option: u32, data: &[u8]) -> Result<Option<u16>, HandshakeError> {
        match option {
            opt::ABORT => {
                let _ = self.reply(option, rep::ACK, &[]);
                Err(HandshakeError::Aborted)
            }
            opt::EXPORT_NAME => {
                let name = String::from_utf8_lossy(data);
                if !is_ours(&name) {
                    // No error reply is possible for this option.
                    return Err(HandshakeError::Protocol(format!(
                        "NBD_OPT_EXPORT_NAME for unknown export {name:?}"
                    )));
                }
                let flags = transmission_flags(self.structured);
                let mut v = self.export.size.to_be_bytes().to_vec();
                v.extend(flags.to_be_bytes());
                self.s.write_all(&v)?;
                Ok(Some(flags))
            }
            opt::LIST => {
                if !data.is_empty() {
                    self.error(option, rep::ERR_INVALID, "NBD_OPT_LIST takes no data")?;
                    return Ok(None);
                }
                let d = proto::rep_server(EXPORT_NAME, &self.export.description);
                self.reply(option, rep::SERVER, &d)?;
                self.reply(option, rep::ACK, &[])?;
                Ok(None)
            }
            opt::INFO | opt::GO => {
                let req = match proto::parse_info_request(data) {
                    Ok(r) => r,
                    Err(e) => {
                        self.error(option, rep::ERR_INVALID, &e.to_string())?;
                        return Ok(None);
                    }
                };
                if !is_ours(&req.name) {
                    self.error(
                        option,
                        rep::ERR_UNKNOWN,
                        &format!("no export {:?}: use \"\" or \"{EXPORT_NAME}\"", req.name),
                    )?;
                    return Ok(None);
                }
                let flags = transmission_flags(self.structured);
                self.info_replies(option, &req.items, flags)?;
                Ok((option == opt::GO).then_some(flags))
            }
            opt::STRUCTURED_REPLY => {
                if !data.is_empty() {
                    self.error(
                        option,
                        rep::ERR_INVALID,
                        "NBD_OPT_STRUCTURED_REPLY takes no data",
                    )?;
                } else {
                    self.structured = true;
                    self.reply(option, rep::ACK, &[])?;
                }
                Ok(None)
            }
            opt::LIST_META_CONTEXT | opt::SET_META_CONTEXT => {
                let set = option == opt::SET_META_CONTEXT;
                if set && !self.structured {
                    self.error(
                        option,
                        rep::ERR_INVALID,
                        "negotiate structured replies before selecting metadata contexts",
                    )?;
                    return Ok(None);
                }
                let req = match proto::parse_meta_request(data) {
                    Ok(r) => r,
                    Err(e) => {
                        self.error(option, rep::ERR_INVALID, &e.to_string())?;
                        return Ok(None);
                    }
                };
                if !is_ours(&req.name) {
                    self.error(
                        option,
                        rep::ERR_UNKNOWN,
                        &format!("no export {:?}", req.name),
                    )?;
                    return Ok(None);
                }
                let hit = Self::meta_matches(&req.queries, !set);
                if set {
                    self.base_allocation = hit;
                }
                if hit {
                    let d = proto::rep_meta_context(BASE_ALLOCATION_ID, BASE_ALLOCATION);
                    self.reply(option, rep::META_CONTEXT, &d)?;
                }
                self.reply(option, rep::ACK, &[])?;
                Ok(None)
            }
            opt::STARTTLS => {
                self.error(
                    option,
                    rep::ERR_UNSUP,
                    "TLS is not offered (use a unix socket or loopback)",
                )?;
                Ok(None)
            }
            other => {
                self.error(other, rep::ERR_UNSUP, "option not supported")?;
                Ok(None)
            }
        }
    }
}

/// A socket whose read and write timeouts can be set.
pub trait Timeouts {
    /// Timeout for reads (`None`: wait forever).
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    /// Timeout for writes.
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()>;
}

impl Timeouts for super::sock::Sock {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        super::sock::Sock::set_read_timeout(self, t)
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        super::sock::Sock::set_write_timeout(self, t)
    }
}

impl Timeouts for UnixStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, t)
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        UnixStream::set_write_timeout(self, t)
    }
}

/// A socket with one deadline for everything read and written through it:
/// before each read or write the socket's timeout is set to the time left,
/// so a client that sends a byte at a time cannot stretch the handshake
/// past the deadline (a timeout per read would restart with every byte).
pub struct Deadline<'a, S: Read + Write + Timeouts> {
    s: &'a mut S,
    deadline: Instant,
}

impl<'a, S: Read + Write + Timeouts> Deadline<'a, S> {
    /// `s` until `deadline`.
    pub fn new(s: &'a mut S, deadline: Instant) -> Self {
        Deadline { s, deadline }
    }

    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the deadline passed",
            ));
        }
        Ok(left)
    }
}

impl<S: Read + Write + Timeouts> Read for Deadline<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.s.set_read_timeout(Some(left))?;
        match self.s.read(buf) {
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the deadline passed",
            )),
            r => r,
        }
    }
}

impl<S: Read + Write + Timeouts> Write for Deadline<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.s.set_write_timeout(Some(left))?;
        match self.s.write(buf) {
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the deadline passed",
            )),
            r => r,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.s.flush()
    }
}

/// Run the handshake on `s` (already connected). On success the
/// transmission phase starts.
pub fn negotiate<S: Read + Write>(
    s: &mut S,
    export: &ExportInfo,
) -> Result<Negotiated, HandshakeError> {
    s.write_all(&proto::greeting())?;
    let mut cf = [0u8; 4];
    match s.read_exact(&mut cf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(HandshakeError::Aborted),
        Err(e) => return Err(e.into()),
    }
    let client_flags = u32::from_be_bytes(cf);
    if client_flags & FLAG_C_FIXED_NEWSTYLE == 0 {
        return Err(HandshakeError::Protocol(
            "client does not speak fixed newstyle".into(),
        ));
    }
    if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(HandshakeError::Protocol(format!(
            "unknown client flags {client_flags:#x}"
        )));
    }
    let no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;
    let mut sess = Session {
        s,
        export,
        structured: false,
        base_allocation: false,
    };
    loop {
        let mut h = [0u8; OPTION_HEADER_LEN];
        sess.read_exact_or_abort(&mut h)?;
        let hdr = proto::parse_option_header(&h)
            .map_err(|e| HandshakeError::Protocol(format!("option header: {e}")))?;
        if hdr.len > MAX_OPTION_DATA {
            // Too long to read and skip safely: end the conversation.
            return Err(HandshakeError::Protocol(format!(
                "option {} with {} bytes of data (at most {MAX_OPTION_DATA})",
                hdr.option, hdr.len
            )));
        }
        let mut data = vec![0u8; hdr.len as usize];
        sess.read_exact_or_abort(&mut data)?;
        if let Some(flags) = sess.option(hdr.option, &data)? {
            if hdr.option == opt::EXPORT_NAME && !no_zeroes {
                sess.s.write_all(&[0u8; 124])?;
            }
            sess.s.flush()?;
            return Ok(Negotiated {
                structured: sess.structured,
                base_allocation: sess.base_allocation && sess.structured,
                flags,
            });
        }
        sess.s.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nbd::proto::{IHAVEOPT, REPLY_MAGIC};
    use std::os::unix::net::UnixStream;
    use std::thread;

    fn export() -> ExportInfo {
        ExportInfo {
            size: 1 << 30,
            preferred_block: 8192,
            description: "test drive".into(),
        }
    }

    fn send_opt(c: &mut UnixStream, option: u32, data: &[u8]) {
        let mut v = IHAVEOPT.to_be_bytes().to_vec();
        v.extend(option.to_be_bytes());
        v.extend((data.len() as u32).to_be_bytes());
        v.extend(data);
        c.write_all(&v).unwrap();
    }

    /// (option, reply type, data)
    fn read_reply(c: &mut UnixStream) -> (u32, u32, Vec<u8>) {
        let mut h = [0u8; 20];
        c.read_exact(&mut h).unwrap();
        assert_eq!(u64::from_be_bytes(h[0..8].try_into().unwrap()), REPLY_MAGIC);
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut d = vec![0u8; len as usize];
        c.read_exact(&mut d).unwrap();
        (
            u32::from_be_bytes(h[8..12].try_into().unwrap()),
            u32::from_be_bytes(h[12..16].try_into().unwrap()),
            d,
        )
    }

    fn go_data(name: &str, items: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend(name.as_bytes());
        d.extend((items.len() as u16).to_be_bytes());
        for i in items {
            d.extend(i.to_be_bytes());
        }
        d
    }

    fn meta_data(name: &str, queries: &[&str]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend(name.as_bytes());
        d.extend((queries.len() as u32).to_be_bytes());
        for q in queries {
            d.extend((q.len() as u32).to_be_bytes());
            d.extend(q.as_bytes());
        }
        d
    }

    fn start() -> (
        UnixStream,
        thread::JoinHandle<Result<Negotiated, HandshakeError>>,
    ) {
        let (mut srv, mut c) = UnixStream::pair().unwrap();
        let h = thread::spawn(move || negotiate(&mut srv, &export()));
        let mut g = [0u8; 18];
        c.read_exact(&mut g).unwrap();
        assert_eq!(&g[..8], b"NBDMAGIC");
        c.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
            .unwrap();
        (c, h)
    }

    #[test]
    fn full_negotiation_like_qemu() {
        let (mut c, h) = start();
        send_opt(&mut c, opt::STRUCTURED_REPLY, &[]);
        assert_eq!(read_reply(&mut c).1, rep::ACK);
        send_opt(&mut c, opt::LIST, &[]);
        let (_, t, d) = read_reply(&mut c);
        assert_eq!(t, rep::SERVER);
        assert_eq!(&d[4..8], b"vssd");
        assert_eq!(read_reply(&mut c).1, rep::ACK);
        send_opt(
            &mut c,
            opt::SET_META_CONTEXT,
            &meta_data("", &[BASE_ALLOCATION]),
        );
        let (_, t, d) = read_reply(&mut c);
        assert_eq!(t, rep::META_CONTEXT);
        assert_eq!(&d[4..], BASE_ALLOCATION.as_bytes());
        assert_eq!(read_reply(&mut c).1, rep::ACK);
        send_opt(&mut c, opt::GO, &go_data("nope", &[]));
        assert_eq!(read_reply(&mut c).1, rep::ERR_UNKNOWN);
        send_opt(
            &mut c,
            opt::INFO,
            &go_data("vssd", &[info::BLOCK_SIZE, info::DESCRIPTION]),
        );
        let mut kinds = Vec::new();
        loop {
            let (o, t, d) = read_reply(&mut c);
            assert_eq!(o, opt::INFO);
            if t == rep::ACK {
                break;
            }
            kinds.push(u16::from_be_bytes([d[0], d[1]]));
            if kinds.last() == Some(&info::BLOCK_SIZE) {
                assert_eq!(u32::from_be_bytes(d[2..6].try_into().unwrap()), 512);
                assert_eq!(u32::from_be_bytes(d[6..10].try_into().unwrap()), 8192);
                assert!(u32::from_be_bytes(d[10..14].try_into().unwrap()) >= 32 << 20);
            }
            if kinds.last() == Some(&info::EXPORT) {
                assert_eq!(u64::from_be_bytes(d[2..10].try_into().unwrap()), 1 << 30);
            }
        }
        assert_eq!(
            kinds,
            vec![info::EXPORT, info::BLOCK_SIZE, info::DESCRIPTION]
        );
        send_opt(&mut c, 99, &[1, 2, 3]);
        assert_eq!(read_reply(&mut c).1, rep::ERR_UNSUP);
        send_opt(&mut c, opt::GO, &go_data("", &[]));
        while read_reply(&mut c).1 != rep::ACK {}
        let n = h.join().unwrap().unwrap();
        assert!(n.structured && n.base_allocation);
        assert_ne!(n.flags & tflags::SEND_TRIM, 0);
        assert_ne!(n.flags & tflags::SEND_DF, 0);
        assert_eq!(n.flags & tflags::ROTATIONAL, 0);
    }

    #[test]
    fn meta_context_needs_structured_replies_and_export_name_works() {
        let (mut c, h) = start();
        send_opt(
            &mut c,
            opt::SET_META_CONTEXT,
            &meta_data("", &[BASE_ALLOCATION]),
        );
        assert_eq!(read_reply(&mut c).1, rep::ERR_INVALID);
        send_opt(&mut c, opt::LIST_META_CONTEXT, &meta_data("", &[]));
        assert_eq!(read_reply(&mut c).1, rep::META_CONTEXT);
        assert_eq!(read_reply(&mut c).1, rep::ACK);
        send_opt(&mut c, opt::EXPORT_NAME, b"vssd");
        let mut v = [0u8; 10];
        c.read_exact(&mut v).unwrap();
        assert_eq!(u64::from_be_bytes(v[..8].try_into().unwrap()), 1 << 30);
        let n = h.join().unwrap().unwrap();
        assert!(!n.structured && !n.base_allocation);
        assert_eq!(
            n.flags & tflags::SEND_DF,
            0,
            "no DF without structured replies"
        );
    }

    /// A client that drips a byte at a time is cut off at the deadline of
    /// the whole handshake, however often it sends.
    #[test]
    fn a_dripping_client_is_cut_off_at_the_deadline() {
        let (mut srv, mut c) = UnixStream::pair().unwrap();
        let t = std::time::Instant::now();
        let h = thread::spawn(move || {
            let mut d = Deadline::new(&mut srv, Instant::now() + Duration::from_millis(600));
            negotiate(&mut d, &export())
        });
        let mut g = [0u8; 18];
        c.read_exact(&mut g).unwrap();
        c.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
            .unwrap();
        // An option header, one byte every 50 ms: 16 bytes take 800 ms.
        let mut v = IHAVEOPT.to_be_bytes().to_vec();
        v.extend(opt::GO.to_be_bytes());
        v.extend(0u32.to_be_bytes());
        for b in v {
            if c.write_all(&[b]).is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let r = h.join().unwrap();
        let took = t.elapsed();
        assert!(
            matches!(&r, Err(HandshakeError::Io(e)) if e.kind() == io::ErrorKind::TimedOut),
            "{r:?}"
        );
        assert!(took < Duration::from_millis(1500), "{took:?}");
    }

    /// A write to a peer that never reads fails at the deadline of the
    /// whole write, not after a timeout per partial write.
    #[test]
    fn a_write_to_a_peer_that_does_not_read_ends_at_the_deadline() {
        let (mut srv, _c) = UnixStream::pair().unwrap();
        let t = std::time::Instant::now();
        let big = vec![0u8; 8 << 20];
        let r =
            Deadline::new(&mut srv, Instant::now() + Duration::from_millis(500)).write_all(&big);
        assert!(
            matches!(&r, Err(e) if e.kind() == io::ErrorKind::TimedOut),
            "{r:?}"
        );
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn hostile_handshakes_end_cleanly() {
        // Bad option magic.
        let (mut c, h) = start();
        c.write_all(&[0u8; 16]).unwrap();
        assert!(matches!(
            h.join().unwrap(),
            Err(HandshakeError::Protocol(_))
        ));
        // Huge option length.
        let (mut c, h) = start();
        let mut v = IHAVEOPT.to_be_bytes().to_vec();
        v.extend(opt::GO.to_be_bytes());
        v.extend(u32::MAX.to_be_bytes());
        c.write_all(&v).unwrap();
        assert!(matches!(
            h.join().unwrap(),
            Err(HandshakeError::Protocol(_))
        ));
        // Half an option, then gone.
        let (mut c, h) = start();
        c.write_all(&IHAVEOPT.to_be_bytes()).unwrap();
        drop(c);
        assert!(matches!(h.join().unwrap(), Err(HandshakeError::Aborted)));
        // Unknown export by EXPORT_NAME: closed.
        let (mut c, h) = start();
        send_opt(&mut c, opt::EXPORT_NAME, b"other");
        assert!(matches!(
            h.join().unwrap(),
            Err(HandshakeError::Protocol(_))
        ));
        // Abort.
        let (mut c, h) = start();
        send_opt(&mut c, opt::ABORT, &[]);
        assert!(matches!(h.join().unwrap(), Err(HandshakeError::Aborted)));
        // Old-style client without fixed newstyle.
        let (mut srv, mut c) = UnixStream::pair().unwrap();
        let h = thread::spawn(move || negotiate(&mut srv, &export()));
        let mut g = [0u8; 18];
        c.read_exact(&mut g).unwrap();
        c.write_all(&0u32.to_be_bytes()).unwrap();
        assert!(matches!(
            h.join().unwrap(),
            Err(HandshakeError::Protocol(_))
        ));
    }
}
