//! The whole APK reader (zip, then manifest) on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = faultline_apk::inspect_bytes(data);
});
