//! API keys and roles, against the real `faultline` binary.

use faultline_tests::HostProcess;
use serde_json::json;

#[tokio::test]
async fn first_start_prints_an_admin_key_once_and_a_restart_prints_none() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let key = host.api.key.clone().expect("the first start prints an admin key");
    assert_eq!(host.api.get("/api-keys").await.status, 200, "the printed key is an admin key");
    drop(host);

    let again = HostProcess::start(dir.path(), &[]);
    assert!(again.api.key.is_none(), "a restart must not print a key: {:?}", again.stdout);
    let listed = again.api.with_key(Some(&key)).get("/api-keys").await;
    assert_eq!(listed.body.as_array().unwrap().len(), 1);
    assert_eq!(listed.body[0]["name"], "bootstrap-admin");
}

#[tokio::test]
async fn every_route_but_health_needs_a_key_and_says_why_it_refused() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let anonymous = host.api.with_key(None);

    assert_eq!(anonymous.get("/health").await.status, 200);
    for path in ["/fault-types", "/plugins", "/api-keys", "/metrics", "/openapi.json", "/experiments/backend/status?id=x"] {
        let reply = anonymous.get(path).await;
        assert_eq!((reply.status, reply.code()), (401, "missing_api_key"), "{path}");
    }
    let weak = host.api.with_key(Some("letmein")).get("/fault-types").await;
    assert_eq!((weak.status, weak.code()), (401, "malformed_api_key"));
    let unknown = host.api.with_key(Some("flk_0000000000000000000000000000000000000000")).get("/fault-types").await;
    assert_eq!((unknown.status, unknown.code()), (401, "unknown_api_key"));
}

#[tokio::test]
async fn keys_are_shown_once_stored_hashed_and_roles_limit_what_they_do() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);

    let created = host.api.post_json("/api-keys", &json!({"name": "ci", "role": "engineer"})).await;
    assert_eq!(created.status, 201, "{created:?}");
    let engineer_key = created.body["key"].as_str().unwrap().to_string();
    assert_eq!(created.body["role"], "engineer");
    let viewer = host.api.post_json("/api-keys", &json!({"name": "dash", "role": "viewer"})).await;
    let viewer_key = viewer.body["key"].as_str().unwrap().to_string();

    let listed = host.api.get("/api-keys").await;
    assert!(listed.text.contains("\"ci\"") && !listed.text.contains(&engineer_key), "a listing never shows a key");

    // Nothing on disk holds the key itself.
    drop(host);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            let found = bytes.windows(engineer_key.len()).any(|w| w == engineer_key.as_bytes());
            assert!(!found, "{} holds a key in clear", path.display());
        }
    }
    let host = HostProcess::start(dir.path(), &[]);

    let engineer = host.api.with_key(Some(&engineer_key));
    assert_eq!(engineer.get("/fault-types").await.status, 200);
    let refused = engineer.post_json("/api-keys", &json!({"name": "x", "role": "admin"})).await;
    assert_eq!((refused.status, refused.code()), (403, "forbidden"));

    let viewer = host.api.with_key(Some(&viewer_key));
    assert_eq!(viewer.get("/fault-types").await.status, 200);
    let start = viewer
        .post_json("/experiments/backend/start", &json!({"fault_type": "x", "targets": ["a"], "duration": 10}))
        .await;
    assert_eq!((start.status, start.code()), (403, "forbidden"));
}

#[tokio::test]
async fn key_creation_rejects_bad_input_with_stable_codes() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let cases = [
        (json!({"name": "a", "role": "root"}), 422, "invalid_role"),
        (json!({"name": "", "role": "viewer"}), 422, "invalid_name"),
        (json!({"name": "a"}), 422, "missing_field"),
        (json!({"name": "a", "role": "viewer", "scope": "all"}), 422, "unknown_field"),
        (json!({"name": 7, "role": "viewer"}), 422, "invalid_field"),
    ];
    for (body, status, code) in cases {
        let reply = host.api.post_json("/api-keys", &body).await;
        assert_eq!((reply.status, reply.code()), (status, code), "{body}");
    }
    let malformed = host.api.send_raw("POST", "/api-keys", "application/json", b"{\"name\": ".to_vec()).await;
    assert_eq!((malformed.status, malformed.code()), (400, "malformed_json"));
    let form = host.api.send_raw("POST", "/api-keys", "text/plain", b"name=a".to_vec()).await;
    assert_eq!((form.status, form.code()), (415, "unsupported_media_type"));
    assert_eq!(host.api.get("/api-keys").await.body.as_array().unwrap().len(), 1, "no key was created by a bad request");
}

#[tokio::test]
async fn a_cli_minted_key_works_and_a_revoked_key_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let minted = HostProcess::mint_key_with_cli(dir.path(), "ops", "admin");
    let ops = host.api.with_key(Some(&minted));
    assert_eq!(ops.get("/api-keys").await.status, 200);

    let keys = ops.get("/api-keys").await.body;
    let ops_id = keys.as_array().unwrap().iter().find(|k| k["name"] == "ops").unwrap()["id"].as_str().unwrap().to_string();
    let bootstrap_id = keys.as_array().unwrap().iter().find(|k| k["name"] == "bootstrap-admin").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    assert_eq!(host.api.delete(&format!("/api-keys/{ops_id}")).await.status, 204);
    let revoked = ops.get("/fault-types").await;
    assert_eq!((revoked.status, revoked.code()), (401, "unknown_api_key"));

    let last = host.api.delete(&format!("/api-keys/{bootstrap_id}")).await;
    assert_eq!((last.status, last.code()), (409, "last_admin_key"));
    let missing = host.api.delete("/api-keys/nope").await;
    assert_eq!((missing.status, missing.code()), (404, "key_not_found"));
}
