#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| vssd_fuzz::corpus_toml(data));
