#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| vssd_fuzz::nbd_handshake(data));
