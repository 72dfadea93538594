#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| vssd_fuzz::ctl_json(data));
