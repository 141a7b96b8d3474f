//! The audit trail: every start, stop, emergency stop, key creation and
//! plugin load, through the API or by the host itself, is listed for an
//! admin with the key's name, the time and the outcome, refusals included.

use faultline_tests::paths::test_plugin;
use faultline_tests::{Api, DemoSystem, HostProcess};
use serde_json::{Value, json};

const WASM: &str = "application/wasm";

/// The audit events matching a query, newest first.
async fn audit(api: &Api, query: &str) -> Vec<Value> {
    let reply = api.get(&format!("/audit{query}")).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.body.as_array().unwrap().clone()
}

/// The one event with this actor, action and subject.
fn find<'a>(events: &'a [Value], actor: &str, action: &str, subject: &str) -> &'a Value {
    let found: Vec<&Value> = events.iter().filter(|e| e["actor"] == actor && e["action"] == action && e["subject"] == subject).collect();
    assert_eq!(found.len(), 1, "one {actor} {action} {subject} in {events:#?}");
    found[0]
}

#[tokio::test]
async fn every_start_stop_emergency_stop_key_and_plugin_load_is_recorded_with_who_when_and_outcome() {
    let system = DemoSystem::replicas(1, &[]);
    let dir = tempfile::tempdir().unwrap();
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let host = HostProcess::start(dir.path(), &[]);
    let admin = host.api.clone();
    HostProcess::mint_key_with_cli(dir.path(), "ops-cli", "admin");

    let created = admin.post_json("/api-keys", &json!({"name": "ci", "role": "engineer"})).await;
    assert_eq!(created.status, 201);
    let ci = admin.with_key(created.body["key"].as_str());
    let denied = ci.post_json("/api-keys", &json!({"name": "sneaky", "role": "admin"})).await;
    assert_eq!(denied.status, 403);

    // A real start and stop, and a refused start.
    let id = ci
        .start_in_effect(&json!({"targets": [system.selector()], "fault_type": "cpu_stress", "intensity": 10, "ramp": false,
            "phases": {"baseline_seconds": 0.2, "injecting_seconds": 60, "recovering_seconds": 0.5}}))
        .await;
    assert_eq!(system.helpers_left().len(), 1, "the start injected");
    assert_eq!(ci.stop("backend", &id).await.status, 200);
    assert!(system.helpers_left().is_empty(), "the stop reverted");
    let typo = ci.post_json("/experiments/backend/start", &json!({"targets": [system.selector()], "fault_type": "cpu_stres", "duration": 5})).await;
    assert_eq!(typo.status, 422);
    let anonymous = admin.with_key(None).post_json("/experiments/backend/start", &json!({"fault_type": "kill"})).await;
    assert_eq!(anonymous.status, 401);

    // Plugins and the emergency stop.
    assert_eq!(admin.send_raw("POST", "/plugins/steady", WASM, test_plugin("steady")).await.status, 201);
    assert_eq!(admin.delete("/plugins/steady").await.status, 204);
    assert_eq!(admin.post_json("/emergency-stop", &json!({"reason": "drill"})).await.status, 200);
    assert_eq!(admin.delete("/emergency-stop").await.status, 200);

    let denied_list = ci.get("/audit").await;
    assert_eq!((denied_list.status, denied_list.code()), (403, "forbidden"), "only an admin reads the trail");

    let events = audit(&admin, "").await;
    let admin_name = "bootstrap-admin";
    // What the host did itself as it started, and the CLI.
    assert_eq!(find(&events, "host", "api_key.create", admin_name)["outcome"], "succeeded");
    let builtin = find(&events, "host", "plugin.load", "kill");
    assert_eq!((&builtin["outcome"], &builtin["detail"]["source"]), (&json!("succeeded"), &json!("builtin")));
    assert_eq!(find(&events, "cli", "api_key.create", "ops-cli")["detail"]["role"], "admin");
    // Through the API: who, what, how it ended.
    let key = find(&events, admin_name, "api_key.create", "ci");
    assert_eq!((&key["outcome"], &key["status"], &key["role"], &key["detail"]["role"]), (&json!("succeeded"), &json!(201), &json!("admin"), &json!("engineer")));
    let refused_key = events.iter().find(|e| e["actor"] == "ci" && e["action"] == "api_key.create").unwrap();
    assert_eq!((&refused_key["outcome"], &refused_key["status"], &refused_key["code"]), (&json!("refused"), &json!(403), &json!("forbidden")));
    let start = find(&events, "ci", "experiment.start", &id);
    assert_eq!((&start["outcome"], &start["detail"]["fault_type"], &start["detail"]["targets"]), (&json!("succeeded"), &json!("cpu_stress"), &json!(system.names)));
    assert_eq!(find(&events, "ci", "experiment.stop", &id)["outcome"], "succeeded");
    let refused_start = events.iter().find(|e| e["action"] == "experiment.start" && e["outcome"] == "refused").unwrap();
    assert_eq!((&refused_start["actor"], &refused_start["code"]), (&json!("ci"), &json!("unknown_fault_type")));
    assert!(refused_start["detail"]["detail"].as_str().unwrap().contains("cpu_stres"), "{refused_start}");
    let loaded = find(&events, admin_name, "plugin.load", "steady");
    assert_eq!(loaded["detail"]["digest"].as_str().map(str::len), Some(64), "{loaded}");
    assert_eq!(find(&events, admin_name, "plugin.unload", "steady")["outcome"], "succeeded");
    let engage = events.iter().find(|e| e["action"] == "emergency_stop.engage").unwrap();
    assert_eq!((&engage["actor"], &engage["detail"]["reason"]), (&json!(admin_name), &json!("drill")));
    assert_eq!(events.iter().find(|e| e["action"] == "emergency_stop.lift").unwrap()["actor"], admin_name);
    assert!(!events.iter().any(|e| e["status"] == 401), "requests without a valid key change nothing and are not recorded");

    // Newest first, each with its time.
    let times: Vec<i64> = events.iter().map(|e| e["at"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]) && times.iter().all(|t| *t >= before), "{times:?}");
    assert_eq!(events[0]["action"], "emergency_stop.lift");

    // Filters and paging.
    let starts = audit(&admin, "?action=experiment.start").await;
    assert_eq!(starts.len(), 2, "{starts:#?}");
    assert_eq!(audit(&admin, "?actor=ci&outcome=refused").await.len(), 2);
    let page = audit(&admin, "?limit=2").await;
    let next = audit(&admin, &format!("?limit=2&before={}", page[1]["id"].as_str().unwrap())).await;
    assert_eq!((page[0]["id"].clone(), next[0]["id"].clone()), (events[0]["id"].clone(), events[2]["id"].clone()));
    for query in ["limit=0", "limit=1001", "limit=ten", "sort=asc"] {
        let bad = admin.get(&format!("/audit?{query}")).await;
        assert_eq!((bad.status, bad.code()), (400, "invalid_query"), "{query}: {bad:?}");
    }
}
