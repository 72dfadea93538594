//! Which of the host's files the test guest sees: all of them (its root is
//! the host's, read-only over 9p) but those under the directories it
//! mounts private tmpfs over.

use std::path::{Path, PathBuf};

use crate::{Result, io_err};

/// Directories the test guest mounts its own tmpfs over, hiding the
/// host's files there.
const HIDDEN_IN_GUEST: [&str; 3] = ["/tmp/", "/dev/shm/", "/run/"];

/// A path of `exe` that the test guest can see: itself, or, for a binary
/// under a directory the guest hides (e.g. a checkout in /tmp), a copy in
/// a private directory under /var/tmp, removed when the guard drops.
pub fn guest_visible(exe: &Path) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    let shown = exe.display().to_string();
    if !HIDDEN_IN_GUEST.iter().any(|d| shown.starts_with(d)) {
        return Ok((exe.to_path_buf(), None));
    }
    let what = format!(
        "{shown} is under a directory the guest does not see, and copying it to /var/tmp failed"
    );
    // tempfile creates the directory with mode 0700.
    let dir = tempfile::Builder::new()
        .prefix("vssd-bench-exe-")
        .tempdir_in("/var/tmp")
        .map_err(io_err(what.clone()))?;
    let copy = dir.path().join("vssd");
    std::fs::copy(exe, &copy).map_err(io_err(what))?;
    Ok((copy, Some(dir)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_binary_the_guest_cannot_see_is_copied_where_it_can() {
        let (p, guard) = guest_visible(Path::new("/usr/bin/env")).unwrap();
        assert_eq!(p, Path::new("/usr/bin/env"));
        assert!(guard.is_none());
        let d = tempfile::Builder::new()
            .prefix("vssd-exe-test-")
            .tempdir_in("/tmp")
            .unwrap();
        let exe = d.path().join("vssd");
        std::fs::write(&exe, b"#!/bin/sh\n").unwrap();
        let (p, guard) = guest_visible(&exe).unwrap();
        assert!(p.starts_with("/var/tmp"), "{}", p.display());
        assert_eq!(std::fs::read(&p).unwrap(), b"#!/bin/sh\n");
        let dir = guard.unwrap();
        let copy_dir = dir.path().to_path_buf();
        drop(dir);
        assert!(!copy_dir.exists());
    }
}
