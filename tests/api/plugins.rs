//! Operator plugins: loaded from the plugins directory at start and through
//! the admin upload route at runtime, replaced and unloaded without a
//! restart, refused when they import what they were not granted.

use faultline_tests::HostProcess;
use faultline_tests::paths::test_plugin;
use serde_json::json;

const WASM: &str = "application/wasm";

/// Fault types from operator plugins (the built-ins are always there).
fn fault_names(reply: &faultline_tests::Reply) -> Vec<String> {
    let types = reply.body.as_array().unwrap().iter().filter(|f| f["source"] != "builtin");
    types.map(|f| f["name"].as_str().unwrap().to_string()).collect()
}

fn operator_plugins(reply: &faultline_tests::Reply) -> Vec<serde_json::Value> {
    reply.body.as_array().unwrap().iter().filter(|p| p["source"] != "builtin").cloned().collect()
}

#[tokio::test]
async fn built_in_plugins_load_at_start_and_cannot_be_replaced_or_unloaded() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--grant", "my-kill=docker,log"]);
    let plugins = host.api.get("/plugins").await;
    let kill = plugins.body.as_array().unwrap().iter().find(|p| p["name"] == "kill").expect("kill is built in").clone();
    assert_eq!((kill["source"].as_str(), kill["fault_type"].as_str()), (Some("builtin"), Some("kill")));
    assert_eq!(kill["grants"], json!(["log", "docker"]));
    let types = host.api.get("/fault-types").await;
    let kill_type = types.body.as_array().unwrap().iter().find(|t| t["name"] == "kill").unwrap().clone();
    assert_eq!(kill_type["intensity"]["scope"], "share_of_targets");
    assert_eq!(kill_type["platforms"], json!(["backend"]));

    let replace = host.api.send_raw("PUT", "/plugins/kill", WASM, test_plugin("steady")).await;
    assert_eq!((replace.status, replace.code()), (409, "builtin_plugin"));
    let unload = host.api.delete("/plugins/kill").await;
    assert_eq!((unload.status, unload.code()), (409, "builtin_plugin"));
    let taken = host.api.send_raw("POST", "/plugins/my-kill", WASM, built_in_twin()).await;
    assert_eq!((taken.status, taken.code()), (409, "fault_type_taken"), "an operator plugin cannot shadow a built-in fault type");
}

/// The built-in kill component itself, as an operator might upload it again.
fn built_in_twin() -> Vec<u8> {
    let target = faultline_tests::paths::target_dir().join("builtin-plugins/wasm32-wasip2/release/faultline_plugin_kill.wasm");
    std::fs::read(&target).unwrap_or_else(|e| panic!("{}: {e}", target.display()))
}

#[tokio::test]
async fn an_uploaded_plugin_is_listed_with_its_unit_and_range_and_kept_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let loaded = host.api.send_raw("POST", "/plugins/steady", WASM, test_plugin("steady")).await;
    assert_eq!(loaded.status, 201, "{loaded:?}");
    assert_eq!(loaded.body["fault_type"], "test_steady");
    assert_eq!(loaded.body["grants"], json!(["log", "clock"]));

    let types = host.api.get("/fault-types").await;
    let steady = types.body.as_array().unwrap().iter().find(|t| t["name"] == "test_steady").unwrap();
    assert_eq!(steady["name"], "test_steady");
    assert_eq!(steady["intensity"], json!({"unit": "level", "min": 0.0, "max": 100.0, "default": 50.0, "step": 10.0, "scope": "per_target", "descending": false}));
    assert_eq!(steady["platforms"], json!(["backend", "frontend", "android"]));
    assert!(steady["description"].as_str().unwrap().contains("log and clock"));
    assert!(dir.path().join("plugins/steady.wasm").exists(), "an upload is written to the plugins directory");
    let digest = loaded.body["digest"].as_str().unwrap().to_string();
    let cached = |dir: &std::path::Path| -> Vec<std::fs::Metadata> {
        let entries = std::fs::read_dir(dir.join("cache/components")).unwrap();
        let ours = entries.map(|e| e.unwrap()).filter(|e| e.file_name().to_string_lossy().starts_with(&digest));
        ours.map(|e| e.metadata().unwrap()).collect()
    };
    let first = cached(dir.path());
    assert_eq!(first.len(), 1, "the compiled component is cached on disk, named by its digest");

    let key = host.api.key.clone();
    drop(host);
    let host = HostProcess::start(dir.path(), &[]);
    let host_api = host.api.with_key(key.as_deref());
    assert_eq!(fault_names(&host_api.get("/fault-types").await), ["test_steady"]);
    let again = cached(dir.path());
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].modified().unwrap(), first[0].modified().unwrap(), "a restart reuses the cached compilation");
}

#[tokio::test]
async fn plugins_in_the_directory_load_at_start_and_a_bad_file_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    std::fs::write(dir.path().join("plugins/steady.wasm"), test_plugin("steady")).unwrap();
    std::fs::write(dir.path().join("plugins/broken.wasm"), b"\0asm not really").unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    assert_eq!(fault_names(&host.api.get("/fault-types").await), ["test_steady"]);
    let plugins = operator_plugins(&host.api.get("/plugins").await);
    assert_eq!(plugins[0]["source"], "directory");
}

#[tokio::test]
async fn a_plugin_importing_an_ungranted_capability_is_refused_naming_the_import() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let refused = host.api.send_raw("POST", "/plugins/overreach", WASM, test_plugin("overreach")).await;
    assert_eq!((refused.status, refused.code()), (422, "capability_not_granted"));
    assert_eq!(refused.body["import"], "faultline:plugin/docker@0.1.0");
    assert!(refused.body["detail"].as_str().unwrap().contains("faultline:plugin/docker@0.1.0"));
    assert!(!dir.path().join("plugins/overreach.wasm").exists(), "a refused plugin is not kept");
    assert!(fault_names(&host.api.get("/fault-types").await).is_empty());
    drop(host);

    // The operator grants it, and the same component loads.
    let key = HostProcess::mint_key_with_cli(dir.path(), "ops", "admin");
    let host = HostProcess::start(dir.path(), &["--grant", "overreach=log,clock,docker"]);
    let api = host.api.with_key(Some(&key));
    let loaded = api.send_raw("POST", "/plugins/overreach", WASM, test_plugin("overreach")).await;
    assert_eq!(loaded.status, 201, "{loaded:?}");
    assert_eq!(loaded.body["grants"], json!(["log", "clock", "docker"]));
}

#[tokio::test]
async fn plugins_are_replaced_and_unloaded_at_runtime_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let first = host.api.send_raw("POST", "/plugins/chaos", WASM, test_plugin("steady")).await;
    assert_eq!(first.status, 201);
    let again = host.api.send_raw("POST", "/plugins/chaos", WASM, test_plugin("looper")).await;
    assert_eq!((again.status, again.code()), (409, "plugin_exists"));

    let replaced = host.api.send_raw("PUT", "/plugins/chaos", WASM, test_plugin("looper")).await;
    assert_eq!(replaced.status, 200, "{replaced:?}");
    assert_ne!(replaced.body["digest"], first.body["digest"]);
    assert_eq!(fault_names(&host.api.get("/fault-types").await), ["test_looper"], "the old fault type is gone");

    let taken = host.api.send_raw("POST", "/plugins/copycat", WASM, test_plugin("looper")).await;
    assert_eq!((taken.status, taken.code()), (409, "fault_type_taken"));

    assert_eq!(host.api.delete("/plugins/chaos").await.status, 204);
    assert!(fault_names(&host.api.get("/fault-types").await).is_empty());
    assert!(!dir.path().join("plugins/chaos.wasm").exists());
    let gone = host.api.delete("/plugins/chaos").await;
    assert_eq!((gone.status, gone.code()), (404, "plugin_not_found"));
}

#[tokio::test]
async fn bad_uploads_are_refused_with_stable_codes_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let corrupt = host.api.send_raw("POST", "/plugins/junk", WASM, b"\0asm\x0d\0\x01\0garbage".to_vec()).await;
    assert_eq!((corrupt.status, corrupt.code()), (422, "invalid_component"));
    let empty = host.api.send_raw("POST", "/plugins/empty", WASM, vec![]).await;
    assert_eq!((empty.status, empty.code()), (422, "invalid_component"));
    let bad_name = host.api.send_raw("POST", "/plugins/Bad%20Name", WASM, test_plugin("steady")).await;
    assert_eq!((bad_name.status, bad_name.code()), (422, "invalid_plugin_name"));
    let huge = host.api.send_raw("POST", "/plugins/huge", WASM, vec![0; 17 << 20]).await;
    assert_eq!((huge.status, huge.code()), (413, "payload_too_large"));

    let engineer = HostProcess::mint_key_with_cli(dir.path(), "eng", "engineer");
    let refused = host.api.with_key(Some(&engineer)).send_raw("POST", "/plugins/steady", WASM, test_plugin("steady")).await;
    assert_eq!((refused.status, refused.code()), (403, "forbidden"));

    assert!(operator_plugins(&host.api.get("/plugins").await).is_empty());
    let files: Vec<_> = std::fs::read_dir(dir.path().join("plugins")).unwrap().collect();
    assert!(files.is_empty(), "nothing was written: {files:?}");
}
