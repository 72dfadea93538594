//! The client side of the control socket: one connection, its requests
//! and replies, and the one-call helpers other crates use.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::CtlError;
use crate::protocol::{CtlReply, CtlRequest, ProgressLine, StatsReport};

/// A connection to a daemon's control socket.
pub struct Client {
    w: UnixStream,
    r: BufReader<UnixStream>,
    timeout: Duration,
    path: PathBuf,
}

impl Client {
    /// Connect, with `timeout` for each reply line.
    pub fn connect(control: &Path, timeout: Duration) -> Result<Client, CtlError> {
        let s = UnixStream::connect(control).map_err(|source| CtlError::Connect {
            path: control.into(),
            source,
        })?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        Ok(Client {
            r: BufReader::new(s.try_clone()?),
            w: s,
            timeout,
            path: control.into(),
        })
    }

    fn send(&mut self, req: &CtlRequest) -> Result<(), CtlError> {
        let mut line = serde_json::to_vec(req).map_err(|e| CtlError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.w.write_all(&line)?;
        Ok(())
    }

    fn line(&mut self) -> Result<String, CtlError> {
        let not_control = |what| CtlError::NotControl {
            path: self.path.clone(),
            what,
        };
        let timeout = |e: &std::io::Error| {
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )
        };
        // What arrives first tells what is at the other end: an NBD server
        // greets before it is asked; a vhost-user backend drops a client
        // whose message it cannot parse.
        // A signal landing during the wait is not an answer: wait again
        // (`fill_buf`, unlike `read_line`, hands EINTR up).
        let first = loop {
            match self.r.fill_buf() {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.map(|b| b[..b.len().min(8)].to_vec()),
            }
        };
        match first {
            Ok(b) if b.is_empty() => {
                return Err(not_control("it closed the connection without a reply"));
            }
            Ok(b) if b.starts_with(b"NBDMAGIC") => {
                return Err(not_control("it greets like an NBD server"));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Err(not_control("it reset the connection without a reply"));
            }
            Err(e) if timeout(&e) => return Err(CtlError::Timeout(self.timeout)),
            Err(e) => return Err(e.into()),
        }
        let mut l = String::new();
        match self.r.read_line(&mut l) {
            Ok(0) => Err(CtlError::Protocol(
                "the daemon closed the connection".into(),
            )),
            Ok(_) => Ok(l),
            Err(e) if timeout(&e) => Err(CtlError::Timeout(self.timeout)),
            Err(e) => Err(e.into()),
        }
    }

    fn finish(line: &str) -> Result<Value, CtlError> {
        let reply: CtlReply =
            serde_json::from_str(line).map_err(|e| CtlError::Protocol(e.to_string()))?;
        if reply.ok {
            Ok(reply.result.unwrap_or(Value::Null))
        } else {
            Err(CtlError::Refused(reply.error.unwrap_or_default()))
        }
    }

    /// Send one request and return its result as JSON. Progress lines, if
    /// any, go to `on_progress`.
    pub fn call(
        &mut self,
        req: &CtlRequest,
        on_progress: &mut dyn FnMut(&ProgressLine),
    ) -> Result<Value, CtlError> {
        self.send(req)?;
        loop {
            let l = self.line()?;
            if let Ok(p) = serde_json::from_str::<ProgressLine>(&l) {
                on_progress(&p);
                continue;
            }
            return Self::finish(&l);
        }
    }

    /// [`Self::call`] with the result decoded as `T`.
    pub fn call_typed<T: DeserializeOwned>(
        &mut self,
        req: &CtlRequest,
        on_progress: &mut dyn FnMut(&ProgressLine),
    ) -> Result<T, CtlError> {
        let v = self.call(req, on_progress)?;
        serde_json::from_value(v).map_err(|e| CtlError::Protocol(e.to_string()))
    }
}

/// Default reply timeout of [`request`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Send one request, return the result (or the daemon's error).
pub fn request(control: &Path, req: &CtlRequest) -> Result<Value, CtlError> {
    Client::connect(control, DEFAULT_TIMEOUT)?.call(req, &mut |_| {})
}

/// The drive's statistics.
pub fn stats(control: &Path) -> Result<StatsReport, CtlError> {
    Client::connect(control, DEFAULT_TIMEOUT)?.call_typed(&CtlRequest::Stats, &mut |_| {})
}

/// Retry connecting and asking for stats until the daemon answers.
pub(crate) fn wait_ready(control: &Path, timeout: Duration) -> Result<(), CtlError> {
    let start = std::time::Instant::now();
    loop {
        let r = Client::connect(control, timeout)
            .and_then(|mut c| c.call(&CtlRequest::Stats, &mut |_| {}));
        match r {
            Ok(_) => return Ok(()),
            // Waiting does not make the socket ours.
            Err(e @ CtlError::Connect { .. })
                if matches!(&e, CtlError::Connect { source, .. }
                    if source.kind() == std::io::ErrorKind::PermissionDenied) =>
            {
                return Err(e);
            }
            Err(e @ (CtlError::Connect { .. } | CtlError::Io(_))) => {
                if start.elapsed() >= timeout {
                    return Err(e);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}
