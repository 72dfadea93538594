//! Options the simulator accepts only at a value that changes nothing here
//! (fio's default, or one file, or the uniform distribution): anything
//! else is an error that says what is not simulated.

use super::Opt;

/// The options honoured only at their neutral value.
pub(super) const OPTIONS: &[Opt] = &[
    (&["do_verify"], |_, v| {
        // Only meaningful with `verify`, which must be off here.
        v.flag()?;
        Ok(())
    }),
    (&["unified_rw_reporting"], |_, v| {
        let t = v.text_or("1").to_ascii_lowercase();
        if !matches!(t.as_str(), "0" | "none") {
            return Err(v.err("unified reporting is not supported"));
        }
        Ok(())
    }),
    (&["fsync", "fdatasync", "sync"], |_, v| {
        let t = v.text_or("1").to_ascii_lowercase();
        if !matches!(t.as_str(), "0" | "none" | "false") {
            return Err(v.err("periodic syncs are not simulated; use end_fsync"));
        }
        Ok(())
    }),
    (&["verify"], |_, v| {
        let t = v.text_or("").to_ascii_lowercase();
        if !matches!(t.as_str(), "0" | "none" | "") {
            return Err(v.err("data verification needs data; the model keeps none"));
        }
        Ok(())
    }),
    (&["nrfiles"], |_, v| {
        if v.int()? != 1 {
            return Err(v.err("only one file (the device) is simulated"));
        }
        Ok(())
    }),
    (&["random_distribution"], |_, v| {
        if !v.need()?.eq_ignore_ascii_case("random") {
            return Err(v.err("only the uniform `random` distribution is simulated"));
        }
        Ok(())
    }),
];
