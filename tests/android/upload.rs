//! APK uploads through the API of the real `faultline` binary: both
//! routes answer the APK record read from the manifest; the same bytes are
//! one APK; listing and deleting work; every bad upload is refused with
//! its code, and nothing of it is kept on disk.

use std::path::Path;

use faultline_tests::HostProcess;
use faultline_tests::android::{TEST_ACTIVITY, TEST_APP, fixture_apk};
use serde_json::Value;

fn apk(name: &str) -> Vec<u8> {
    std::fs::read(fixture_apk(name)).unwrap_or_else(|e| panic!("{name}.apk: {e} (tests/android/apks/build.sh builds it)"))
}

/// What the APK directory holds besides kept APKs: nothing, ever.
fn leftovers(data: &Path) -> Vec<String> {
    std::fs::read_dir(data.join("apks"))
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| !n.ends_with(".apk")).collect())
        .unwrap_or_default()
}

/// A zip of stored entries, written by hand: the smallest honest archive.
fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = vec![];
    let mut central = vec![];
    for (name, data) in entries {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let header = |sig: u32, central: bool| {
            let mut h = vec![];
            h.extend_from_slice(&sig.to_le_bytes());
            if central {
                h.extend_from_slice(&20u16.to_le_bytes());
            }
            h.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            h.extend_from_slice(&crc.to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(name.len() as u16).to_le_bytes());
            h.extend_from_slice(&0u16.to_le_bytes());
            if central {
                // comment length, disk, internal attributes; external attributes; offset
                h.extend_from_slice(&[0; 6]);
                h.extend_from_slice(&0u32.to_le_bytes());
                h.extend_from_slice(&offset.to_le_bytes());
            }
            h.extend_from_slice(name.as_bytes());
            h
        };
        out.extend(header(0x0403_4b50, false));
        out.extend_from_slice(data);
        central.extend(header(0x0201_4b50, true));
    }
    let (start, size) = (out.len() as u32, central.len() as u32);
    out.extend(central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// A zip whose deflated manifest inflates to 64 MiB (python3's zipfile
/// writes it; a real bomb is built the same way).
fn bomb(dir: &Path) -> Vec<u8> {
    let path = dir.join("bomb.zip");
    let script = "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n    z.writestr('AndroidManifest.xml', b'\\x03\\x00\\x08\\x00' + bytes(64 << 20))\n";
    let status = std::process::Command::new("python3").args(["-c", script]).arg(&path).status().expect("python3");
    assert!(status.success(), "writing the bomb");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(path).unwrap();
    bytes
}

#[tokio::test]
async fn both_routes_answer_the_apk_record_and_the_same_bytes_are_one_apk() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let first = host.api.upload("/upload/apk", "file", apk("testapp")).await;
    assert_eq!(first.status, 201, "{first:?}");
    let record = &first.body;
    for field in ["id", "apk", "path", "package", "activity"] {
        assert!(record[field].is_string(), "{field} in {record}");
    }
    assert_eq!(record["id"], record["apk"]);
    assert_eq!((record["package"].as_str(), record["activity"].as_str()), (Some(TEST_APP), Some(TEST_ACTIVITY)));
    let path = record["path"].as_str().unwrap();
    assert!(path.ends_with(".apk") && Path::new(path).is_file(), "{path}");
    assert_eq!(std::fs::read(path).unwrap(), apk("testapp"), "the stored file is the upload");
    assert_eq!(record["version_name"], "1.0");

    // The same bytes by the part `apk`, and by the other route: the same APK.
    for (route, part) in [("/upload/apk", "apk"), ("/android/upload", "apk"), ("/android/upload", "file")] {
        let again = host.api.upload(route, part, apk("testapp")).await;
        assert_eq!((again.status, &again.body["id"]), (200, &record["id"]), "{route} {part}: {again:?}");
    }
    let listed = host.api.get("/apks").await;
    assert_eq!(listed.body.as_array().map(Vec::len), Some(1), "{listed:?}");
    let id = record["id"].as_str().unwrap();
    assert_eq!(host.api.get(&format!("/apks/{id}")).await.body["package"], TEST_APP);

    let deleted = host.api.delete(&format!("/apks/{id}")).await;
    assert_eq!(deleted.status, 204, "{deleted:?}");
    assert!(!Path::new(path).exists(), "its file is gone");
    let gone = host.api.get(&format!("/apks/{id}")).await;
    assert_eq!((gone.status, gone.code()), (404, "apk_not_found"));
    assert_eq!(host.api.delete(&format!("/apks/{id}")).await.status, 404);
}

#[tokio::test]
async fn the_manifest_is_read_as_androids_launcher_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let readme = std::fs::read_to_string(fixture_apk("testapp").with_file_name("README.md")).unwrap();
    let mut checked = 0;
    // The fixtures' README holds a table: | file | package | activity (Android) | ...
    for row in readme.lines().filter(|l| l.starts_with("| `") && l.contains(".apk`")) {
        let cells: Vec<&str> = row.split('|').map(|c| c.trim().trim_matches('`')).collect();
        let (file, package, activity) = (cells[1], cells[2], cells[3]);
        let reply = host.api.upload("/upload/apk", "file", std::fs::read(fixture_apk(file.trim_end_matches(".apk"))).unwrap()).await;
        if activity == "none" || activity.is_empty() || activity == "-" {
            assert_eq!((reply.status, reply.code()), (422, "no_launchable_activity"), "{file}");
        } else {
            assert!(reply.status == 201 || reply.status == 200, "{file}: {reply:?}");
            assert_eq!((reply.body["package"].as_str(), reply.body["activity"].as_str()), (Some(package), Some(activity)), "{file}");
        }
        checked += 1;
    }
    assert!(checked >= 6, "the fixtures' table lists {checked} APKs");
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
}

#[tokio::test]
async fn a_bad_upload_gets_its_code_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--max-apk-mb", "1"]);
    let real = apk("testapp");
    let manifest_text = b"<?xml version=\"1.0\"?><manifest package=\"com.x\"/>";
    let bomb = bomb(dir.path());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("random bytes", b"this is not an apk at all".to_vec(), "not_an_apk"),
        ("a truncated APK", real[..real.len() / 2].to_vec(), "not_an_apk"),
        ("a zip without a manifest", zip(&[("classes.dex", b"dex\n035")]), "missing_manifest"),
        ("a text manifest", zip(&[("AndroidManifest.xml", manifest_text)]), "manifest_not_binary"),
        ("a binary manifest of garbage", zip(&[("AndroidManifest.xml", &[3, 0, 8, 0, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3])]), "invalid_manifest"),
        ("a decompression bomb", bomb, "manifest_too_large"),
    ];
    for (what, bytes, code) in cases {
        let reply = host.api.upload("/upload/apk", "file", bytes).await;
        assert_eq!((reply.status, reply.code()), (422, code), "{what}: {}", reply.text);
    }
    // Past the limit: refused by its declared length, and streaming without one.
    let big = vec![7u8; 2 << 20];
    let reply = host.api.upload("/upload/apk", "file", big.clone()).await;
    assert_eq!((reply.status, reply.code()), (413, "payload_too_large"), "{}", reply.text);
    let frames: Vec<Result<_, std::io::Error>> = big.chunks(64 << 10).map(|c| Ok(hyper::body::Frame::data(bytes::Bytes::copy_from_slice(c)))).collect();
    let streamed = reqwest::Body::wrap(http_body_util::StreamBody::new(futures_util::stream::iter(frames)));
    let part = reqwest::multipart::Part::stream(streamed).file_name("big.apk");
    let reply = reqwest::Client::new()
        .post(format!("{}/upload/apk", host.api.base))
        .header("x-api-key", host.api.key.clone().unwrap())
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 413, "a chunked upload past the limit");

    // Not multipart, no file part, no key, a viewer's key.
    let json = host.api.send_raw("POST", "/upload/apk", "application/json", b"{}".to_vec()).await;
    assert_eq!((json.status, json.code()), (415, "unsupported_media_type"));
    let wrong_part = host.api.upload("/android/upload", "document", real.clone()).await;
    assert_eq!((wrong_part.status, wrong_part.code()), (422, "missing_file"));
    let anonymous = host.api.with_key(None).upload("/upload/apk", "file", real.clone()).await;
    assert_eq!((anonymous.status, anonymous.code()), (401, "missing_api_key"));
    let viewer = host.api.create_key("watcher", "viewer").await;
    let refused = host.api.with_key(Some(&viewer)).upload("/upload/apk", "file", real.clone()).await;
    assert_eq!((refused.status, refused.code()), (403, "forbidden"));

    assert_eq!(host.api.get("/apks").await.body, Value::Array(vec![]), "nothing was kept");
    assert!(leftovers(dir.path()).is_empty(), "{:?}", leftovers(dir.path()));
    let kept: Vec<_> = std::fs::read_dir(dir.path().join("apks")).unwrap().collect();
    assert!(kept.is_empty(), "no file is kept: {kept:?}");
}
