//! The parser on real APKs built by `tests/android/apks/build.sh`, checked
//! against `aapt dump badging` where aapt follows Android, and on hostile
//! input built here: every case gets its error code, none panics.

use std::io::Write;
use std::path::PathBuf;

use faultline_apk::{ApkError, inspect_bytes, inspect_file, parse_manifest};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/android/apks").join(format!("{name}.apk"))
}

/// What `aapt dump badging` says: the package and the first launchable activity.
fn aapt(name: &str) -> Option<(String, Option<String>)> {
    let out = std::process::Command::new("aapt").args(["dump", "badging"]).arg(fixture(name)).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let quoted = |line: &str, key: &str| line.split(key).nth(1).and_then(|rest| rest.split('\'').nth(1)).map(str::to_string);
    let package = text.lines().find(|l| l.starts_with("package:")).and_then(|l| quoted(l, "name="))?;
    let activity = text.lines().find(|l| l.starts_with("launchable-activity:")).and_then(|l| quoted(l, "name="));
    Some((package, activity))
}

fn launchable(name: &str) -> (String, Option<String>) {
    let info = inspect_file(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    (info.package, info.activity)
}

#[test]
fn the_test_app_reads_as_aapt_reads_it_with_its_versions() {
    let info = inspect_file(&fixture("testapp")).unwrap();
    assert_eq!(info.package, "dev.faultline.testapp");
    assert_eq!(info.activity.as_deref(), Some("dev.faultline.testapp.MainActivity"));
    assert_eq!((info.version_code, info.version_name.as_deref()), (Some(1), Some("1.0")));
    assert_eq!((info.min_sdk, info.target_sdk), (Some(21), Some(29)));
    assert_eq!(info.label.as_deref(), Some("Faultline Test App"));
    let bytes = std::fs::read(fixture("testapp")).unwrap();
    assert_eq!(inspect_bytes(&bytes).unwrap(), info, "in memory as on disk");
}

#[test]
fn where_aapt_follows_android_the_two_agree() {
    for name in ["testapp", "bare_name", "qualified_name", "utf8_pool", "no_launcher"] {
        let ours = launchable(name);
        match aapt(name) {
            Some(theirs) => assert_eq!(ours, theirs, "{name}"),
            None => eprintln!("aapt is not installed: {name} is checked against the README's values only"),
        }
    }
    assert_eq!(launchable("bare_name").1.as_deref(), Some("dev.faultline.cases.bare.Start"), "a bare name is the package's");
    assert_eq!(launchable("qualified_name").1.as_deref(), Some("com.example.shared.HomeActivity"));
    assert_eq!(launchable("no_launcher").1, None, "MAIN and LAUNCHER on two activities launch nothing");
}

#[test]
fn an_alias_is_launchable_though_aapt_ignores_aliases() {
    assert_eq!(launchable("alias_only"), ("dev.faultline.cases.alias".into(), Some("dev.faultline.cases.alias.Entry".into())));
    if let Some((_, theirs)) = aapt("alias_only") {
        assert_eq!(theirs, None, "aapt lists no launchable activity for an alias");
    }
}

#[test]
fn a_disabled_launcher_entry_is_skipped_though_aapt_lists_it() {
    assert_eq!(launchable("disabled_first").1.as_deref(), Some("dev.faultline.cases.disabled.New"));
    if let Some((_, theirs)) = aapt("disabled_first") {
        assert_eq!(theirs.as_deref(), Some("dev.faultline.cases.disabled.Old"), "aapt ignores android:enabled");
    }
}

#[test]
fn main_and_launcher_count_only_in_one_intent_filter_though_aapt_mixes_filters() {
    assert_eq!(launchable("split_filters").1.as_deref(), Some("dev.faultline.cases.split.Whole"));
    if let Some((_, theirs)) = aapt("split_filters") {
        assert_eq!(theirs.as_deref(), Some("dev.faultline.cases.split.Split"), "aapt does not keep MAIN and LAUNCHER to one filter");
    }
}

#[test]
fn utf8_and_utf16_string_pools_read_the_same_text() {
    let utf8 = inspect_file(&fixture("utf8_pool")).unwrap();
    assert_eq!(utf8.activity.as_deref(), Some("dev.faultline.cases.utf8.Main"));
    assert_eq!(utf8.version_name.as_deref(), Some("3.0-case"));
    let manifest = |name: &str| {
        let mut zip = zip::ZipArchive::new(std::fs::File::open(fixture(name)).unwrap()).unwrap();
        let mut bytes = vec![];
        std::io::copy(&mut zip.by_name("AndroidManifest.xml").unwrap(), &mut bytes).unwrap();
        bytes
    };
    assert_ne!(manifest("utf8_pool")[8 + 16 + 1] & 1, 0, "its pool has the UTF-8 flag (0x100)");
    assert_eq!(manifest("testapp")[8 + 16 + 1] & 1, 0, "aapt's own pool is UTF-16");
}

fn zip_of(entries: &[(&str, &[u8])], deflate: bool) -> Vec<u8> {
    let mut out = std::io::Cursor::new(vec![]);
    let mut zip = zip::ZipWriter::new(&mut out);
    let method = if deflate { zip::CompressionMethod::Deflated } else { zip::CompressionMethod::Stored };
    for (name, data) in entries {
        zip.start_file(*name, zip::write::SimpleFileOptions::default().compression_method(method)).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap();
    out.into_inner()
}

fn testapp_manifest() -> Vec<u8> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(fixture("testapp")).unwrap()).unwrap();
    let mut bytes = vec![];
    std::io::copy(&mut zip.by_name("AndroidManifest.xml").unwrap(), &mut bytes).unwrap();
    bytes
}

fn code(result: Result<faultline_apk::ApkInfo, ApkError>) -> &'static str {
    result.map(|i| panic!("accepted: {i:?}")).unwrap_or_else(|e| e.code())
}

#[test]
fn what_is_not_an_apk_gets_its_code() {
    let real = std::fs::read(fixture("testapp")).unwrap();
    assert_eq!(code(inspect_bytes(b"")), "not_an_apk");
    assert_eq!(code(inspect_bytes(b"PK\x03\x04 not really")), "not_an_apk");
    assert_eq!(code(inspect_bytes(&real[..real.len() / 2])), "not_an_apk");
    assert_eq!(code(inspect_bytes(&zip_of(&[("classes.dex", b"dex")], false))), "missing_manifest");
    let text = b"<?xml version=\"1.0\"?><manifest package=\"a.b\"/>";
    assert_eq!(code(inspect_bytes(&zip_of(&[("AndroidManifest.xml", text)], true))), "manifest_not_binary");
    assert_eq!(code(parse_manifest(&[])), "manifest_not_binary");
}

#[test]
fn a_decompression_bomb_is_refused_without_inflating_it() {
    let mut huge = vec![3, 0, 8, 0];
    huge.resize(64 << 20, 0);
    let bomb = zip_of(&[("AndroidManifest.xml", &huge)], true);
    assert!(bomb.len() < 1 << 20, "it compresses to {} bytes", bomb.len());
    assert_eq!(code(inspect_bytes(&bomb)), "manifest_too_large");
}

#[test]
fn hostile_chunk_sizes_are_invalid_not_a_panic() {
    let good = testapp_manifest();
    let set32 = |at: usize, v: u32| {
        let mut bad = good.clone();
        bad[at..at + 4].copy_from_slice(&v.to_le_bytes());
        bad
    };
    let set16 = |at: usize, v: u16| {
        let mut bad = good.clone();
        bad[at..at + 2].copy_from_slice(&v.to_le_bytes());
        bad
    };
    let cases = [
        ("file size past the end", set32(4, u32::MAX)),
        ("file size zero", set32(4, 0)),
        ("pool size past the file", set32(12, u32::MAX)),
        ("pool header smaller than a chunk header", set16(10, 2)),
        ("a billion strings", set32(16, 1_000_000_000)),
        ("strings start outside the pool", set32(28, u32::MAX - 8)),
        ("a string offset outside the pool", set32(36, 0x00ff_ffff)),
        ("truncated", good[..good.len() - 7].to_vec()),
    ];
    for (what, bytes) in cases {
        let result = parse_manifest(&bytes);
        assert!(matches!(result, Err(ApkError::InvalidManifest(_))), "{what}: {result:?}");
    }
}

#[test]
fn no_mutation_of_a_real_manifest_panics() {
    let good = testapp_manifest();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for position in 0..good.len() {
        for value in [0x00, 0xff, 0x80, 0x7f] {
            let mut bad = good.clone();
            bad[position] = value;
            let _ = parse_manifest(&bad);
        }
    }
    for _ in 0..20_000 {
        let mut bad = good.clone();
        for _ in 0..1 + next() % 8 {
            let at = (next() as usize) % bad.len();
            bad[at] = next() as u8;
        }
        let _ = parse_manifest(&bad);
    }
}
