//! Command output on standard output, and how `main` ends a command.
//!
//! `vssd profiles | head -1` closes the pipe after one line; `vssd sim … >
//! /dev/full` cannot write at all. `println!` panics on both. Instead:
//!
//! - a command writes its output with [`print`] (a whole text), or with
//!   `writeln!` to [`stdout`] (a locked handle) mapping each error with
//!   [`StdoutError::from`], and returns the error like any other, wrapped in
//!   its own error enum as a `#[source]`;
//! - `main` hands the command's result to [`finish`]: a closed pipe on
//!   standard output ends the program quietly with status 0 (the reader has
//!   all it wanted, as with `cat`); any other error is printed, with each
//!   cause once, and gives status 1.
//!
//! Only a [`StdoutError`] counts as "the reader went away": a broken pipe on
//! a socket or a file is a real error and is reported.
//!
//! ```no_run
//! use std::io::Write;
//! fn list() -> Result<(), vssd_common::cli_out::StdoutError> {
//!     let mut out = vssd_common::cli_out::stdout();
//!     for name in ["a", "b"] {
//!         writeln!(out, "{name}")?;
//!     }
//!     out.flush()?;
//!     Ok(())
//! }
//! std::process::exit(match vssd_common::cli_out::finish(list().map_err(Into::into)) {
//!     vssd_common::cli_out::Exit::Success => 0,
//!     vssd_common::cli_out::Exit::Failure => 1,
//! });
//! ```

use std::error::Error;
use std::io::{self, Write};

use thiserror::Error;

/// Writing to standard output failed.
#[derive(Debug, Error)]
#[error("cannot write to standard output")]
pub struct StdoutError(#[from] pub io::Error);

impl StdoutError {
    /// Whether the reader closed its end (EPIPE): not a failure of ours.
    pub fn is_broken_pipe(&self) -> bool {
        self.0.kind() == io::ErrorKind::BrokenPipe
    }
}

/// Standard output, locked for the caller and buffered; flush it before
/// returning, so a write error is seen (and not lost at exit).
pub fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::new(io::stdout().lock())
}

/// Write `text` to standard output and flush it.
pub fn print(text: &str) -> Result<(), StdoutError> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Whether `e` or one of its causes is a [`StdoutError`] for a closed pipe.
pub fn is_closed_stdout(e: &(dyn Error + 'static)) -> bool {
    let mut cur: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err
            .downcast_ref::<StdoutError>()
            .is_some_and(StdoutError::is_broken_pipe)
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// The message of `e` followed by its causes, one per line, each cause
/// printed once: a cause whose text the message before it already contains
/// is skipped (some errors include their source in their own message).
pub fn error_report(e: &(dyn Error + 'static)) -> String {
    let mut out = format!("vssd: error: {e}");
    let mut shown = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !shown.contains(&text) {
            out.push_str("\n  caused by: ");
            out.push_str(&text);
            shown = text;
        }
        cur = s.source();
    }
    out
}

/// How the program ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Status 0.
    Success,
    /// Status 1; the error was printed on standard error.
    Failure,
}

/// End a command: success, or a closed standard output (quietly), is
/// [`Exit::Success`]; any other error is printed on standard error and is
/// [`Exit::Failure`].
pub fn finish(r: Result<(), Box<dyn Error>>) -> Exit {
    match r {
        Ok(()) => Exit::Success,
        Err(e) if is_closed_stdout(e.as_ref()) => Exit::Success,
        Err(e) => {
            let _ = writeln!(io::stderr(), "{}", error_report(e.as_ref()));
            Exit::Failure
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Error)]
    enum Outer {
        #[error("cannot write the report")]
        Out(#[source] StdoutError),
        #[error("socket gone: {0}")]
        Sock(#[source] io::Error),
    }

    #[test]
    fn only_a_closed_stdout_is_quiet() {
        let pipe = || io::Error::from(io::ErrorKind::BrokenPipe);
        let e = Outer::Out(StdoutError(pipe()));
        assert!(is_closed_stdout(&e));
        assert_eq!(finish(Err(Box::new(e))), Exit::Success);
        let full = Outer::Out(StdoutError(io::Error::from_raw_os_error(libc::ENOSPC)));
        assert!(!is_closed_stdout(&full));
        // A broken pipe elsewhere is a real error.
        assert!(!is_closed_stdout(&Outer::Sock(pipe())));
        assert_eq!(finish(Err(Box::new(Outer::Sock(pipe())))), Exit::Failure);
    }

    #[test]
    fn causes_are_printed_once() {
        let e = Outer::Sock(io::Error::other("peer reset"));
        assert_eq!(error_report(&e), "vssd: error: socket gone: peer reset");
        let e = Outer::Out(StdoutError(io::Error::other("disk full")));
        assert_eq!(
            error_report(&e),
            "vssd: error: cannot write the report\n  caused by: cannot write to standard output\n  caused by: disk full"
        );
    }
}
