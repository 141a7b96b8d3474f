//! The binary XML parser on arbitrary bytes: it may refuse them, never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = faultline_apk::parse_manifest(data);
});
