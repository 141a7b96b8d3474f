//! The experiment engine, exercised through the API by test plugins that
//! use only the log and clock capabilities. What a plugin did is read back
//! from its own log records, not from the engine's bookkeeping.

use std::sync::Arc;

use faultline_tests::{InProcessHost, Options, RecordingLog};
use serde_json::{Value, json};

fn phases(baseline: f64, injecting: f64, recovering: f64) -> Value {
    json!({"baseline_seconds": baseline, "injecting_seconds": injecting, "recovering_seconds": recovering})
}

fn ended(status: &Value) -> bool {
    status["state"] != "running"
}

fn levels_logged(log: &RecordingLog, id: &str) -> Vec<f64> {
    let tokens: Vec<String> = log
        .messages(id, "")
        .into_iter()
        .filter_map(|m| {
            m.strip_prefix("inject ").map(str::to_string).or_else(|| m.split_once(" -> ").map(|(_, new)| new.to_string()))
        })
        .collect();
    tokens.iter().map(|t| t.split('@').nth(1).unwrap().split('#').next().unwrap().parse().unwrap()).collect()
}

#[tokio::test]
async fn log_and_clock_plugin_experiment_passes_every_phase_ramps_up_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let started = host
        .api
        .post_json(
            "/experiments/backend/start",
            &json!({"fault_type": "test_steady", "targets": ["svc-a", "svc-b"], "intensity": 40, "phases": phases(0.6, 1.6, 0.6)}),
        )
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    assert_eq!((started.body["state"].as_str(), started.body["phase"].as_str()), (Some("running"), Some("baseline")));
    assert_eq!(started.body["targets"], json!(["svc-a", "svc-b"]));
    let id = started.body["id"].as_str().unwrap().to_string();

    let mut seen = vec![];
    let status = host
        .api
        .wait_status("backend", &id, 30, |s| {
            let phase = s["phase"].as_str().unwrap().to_string();
            if seen.last() != Some(&phase) {
                seen.push(phase);
            }
            ended(s)
        })
        .await;
    assert_eq!(status["state"], "completed", "{status}");
    assert_eq!(status["phase"], "completed");
    let phase_events: Vec<&str> =
        status["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "phase").map(|e| e["detail"].as_str().unwrap()).collect();
    assert_eq!(phase_events, ["baseline", "injecting", "recovering", "completed"]);
    assert!(seen.contains(&"injecting".to_string()), "polling saw the injecting phase: {seen:?}");

    // The plugin logged a ramp of 10, 20, 30, 40 on each target ...
    let levels = levels_logged(&host.log, &id);
    for level in [10.0, 20.0, 30.0, 40.0] {
        assert_eq!(levels.iter().filter(|l| **l == level).count(), 2, "level {level} on both targets: {levels:?}");
    }
    assert!(levels.windows(2).all(|w| w[0] <= w[1]), "the ramp only climbs: {levels:?}");
    // ... and, by its own records, nothing is left in effect.
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
    for target in status["targets"].as_array().unwrap() {
        assert_eq!(target["injection"], "reverted", "{target}");
    }
    let score = status["score"].as_f64().expect("a completed experiment has a score");
    assert_eq!(score, 100.0, "the scripted system never degraded: {status}");
    assert_eq!(status["intensity"]["current"], 40.0);

    let metrics = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await;
    assert_eq!(metrics.status, 200);
    for phase in ["baseline", "injecting", "recovering"] {
        assert!(metrics.body["phases"][phase]["samples"].as_u64().unwrap() >= 1, "{phase}: {}", metrics.body);
    }
    assert_eq!(metrics.body["phases"]["injecting"]["metrics"]["level_in_effect"]["max"], 40.0);
    assert_eq!(metrics.body["score"], score);
}

#[tokio::test]
async fn log_and_clock_plugin_adaptive_intensity_follows_health_and_reports_the_highest_tolerated_level() {
    let dir = tempfile::tempdir().unwrap();
    // Health drops whenever a level above 40 is in effect.
    let host = InProcessHost::start(dir.path(), Options { tolerated: 40.0, ..Options::default() }).await;
    let id = host
        .start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-a"], "intensity": 100, "adaptive": true,
            "phases": phases(0.4, 3.2, 0.4)}))
        .await;
    let status = host.api.wait_status("backend", &id, 30, ended).await;
    assert_eq!(status["state"], "completed", "{status}");
    assert_eq!(status["intensity"]["max_tolerated"], 40.0, "{status}");

    let levels = levels_logged(&host.log, &id);
    assert_eq!(levels.iter().copied().fold(0.0, f64::max), 50.0, "it tried one step past tolerance, never two: {levels:?}");
    let series = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body["series"].clone();
    let injecting: Vec<&Value> = series.as_array().unwrap().iter().filter(|s| s["phase"] == "injecting").collect();
    let mut backed_off = 0;
    for pair in injecting.windows(2) {
        let (level, health, next) = (pair[0]["intensity"].as_f64().unwrap(), pair[0]["health"].as_f64().unwrap(), pair[1]["intensity"].as_f64().unwrap());
        if health < 1.0 {
            assert!(next < level, "after poor health at {level} the next level must be lower, was {next}");
            backed_off += 1;
        } else {
            assert!(next >= level, "after good health at {level} the level must not fall, was {next}");
        }
    }
    assert!(backed_off >= 1, "the controller met the limit at least once: {injecting:?}");
    assert!(host.log.in_effect().is_empty());
    assert!(status["score"].as_f64().unwrap() < 100.0, "a degraded system scores below 100");
}

#[tokio::test]
async fn stopping_rolls_back_before_answering_and_stopping_again_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let id = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-a"], "phases": phases(0.2, 120.0, 1.0)})).await;
    host.api
        .wait_status("backend", &id, 60, |s| s["targets"][0]["injection"] == "active")
        .await;
    assert_eq!(host.log.in_effect().len(), 1);

    let stopped = host.api.post_json(&format!("/experiments/backend/stop?id={id}"), &json!({})).await;
    assert_eq!(stopped.status, 200, "{stopped:?}");
    assert!(host.log.in_effect().is_empty(), "the fault is gone by the time stop answers");
    assert_eq!((stopped.body["state"].as_str(), stopped.body["phase"].as_str()), (Some("stopped"), Some("completed")));
    assert!(stopped.body["stop_reason"].as_str().unwrap().contains("bootstrap-admin"));
    assert!(stopped.body["score"].is_number(), "a stopped experiment is still scored");

    let again = host.api.post_json(&format!("/experiments/backend/stop?id={id}"), &json!({})).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body["state"], "stopped");
    assert_eq!(again.body["timing"]["ended_at"], stopped.body["timing"]["ended_at"]);
}

#[tokio::test]
async fn shutting_the_host_down_rolls_back_every_running_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let first = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-a"], "phases": phases(0.2, 120.0, 1.0)})).await;
    let second = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-b"], "phases": phases(0.2, 120.0, 1.0)})).await;
    for id in [&first, &second] {
        host.api.wait_status("backend", id, 60, |s| s["targets"][0]["injection"] == "active").await;
    }
    let (store, log) = (host.state.store.clone(), host.log.clone());
    host.shutdown().await;
    assert!(log.in_effect().is_empty(), "left behind: {:?}", log.in_effect());
    for id in [&first, &second] {
        let row = store.experiment(id).await.unwrap().unwrap();
        assert_eq!((row.state.as_str(), row.stop_reason.as_deref()), ("stopped", Some("host shutdown")));
    }
}

/// A crash is simulated by dropping the runtime the host runs on: its tasks
/// vanish mid-flight and no rollback code runs, as with SIGKILL.
#[test]
fn faults_a_crashed_host_left_behind_are_reverted_from_the_journal_on_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(RecordingLog::default());

    let crashed = tokio::runtime::Runtime::new().unwrap();
    let id = crashed.block_on(async {
        let host = InProcessHost::start_with_log(dir.path(), Options::default(), log.clone()).await;
        let id = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-a"], "phases": phases(0.2, 600.0, 1.0)})).await;
        host.api.wait_status("backend", &id, 60, |s| s["targets"][0]["injection"] == "active").await;
        id
    });
    drop(crashed);
    assert_eq!(log.in_effect().len(), 1, "the crash left the fault in effect");
    let token = log.messages(&id, "inject ")[0].trim_start_matches("inject ").to_string();

    let restarted = tokio::runtime::Runtime::new().unwrap();
    restarted.block_on(async {
        let host = InProcessHost::start_with_log(dir.path(), Options::default(), log.clone()).await;
        assert_eq!(host.recovery.reverted, 1, "{:?}", host.recovery);
        assert_eq!(host.recovery.interrupted_experiments, 1);
        assert!(log.in_effect().is_empty(), "the restart reverted it");
        assert_eq!(log.messages(&id, "revert "), [format!("revert {token}")], "reverted from the journaled token");

        let status = host.api.get(&format!("/experiments/backend/status?id={id}")).await.body;
        assert_eq!(status["state"], "failed");
        assert_eq!(status["stop_reason"], "host restart");
        assert!(status["error"].as_str().unwrap().contains("reverted from the journal"), "{status}");
        assert_eq!(status["targets"][0]["injection"], "reverted");
    });
}

#[tokio::test]
async fn prometheus_metrics_count_injections_rollbacks_states_and_plugin_call_time() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let id = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-a"], "phases": phases(0.3, 0.5, 0.3)})).await;
    host.api.wait_status("backend", &id, 30, ended).await;
    let text = host.api.get("/metrics").await.text;
    for line in [
        "faultline_experiments{state=\"completed\"} 1",
        "faultline_injections_total{fault_type=\"test_steady\",outcome=\"injected\"} 1",
        "faultline_rollbacks_total{reason=\"end\",outcome=\"reverted\"} 1",
        "faultline_plugin_call_duration_seconds_count{plugin=\"steady\",call=\"inject\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing `{line}` in:\n{text}");
    }
}

#[tokio::test]
async fn the_openapi_document_describes_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let doc = host.api.get("/openapi.json").await.body;
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/health", "get"),
        ("/api-keys", "post"),
        ("/api-keys", "get"),
        ("/api-keys/{id}", "delete"),
        ("/fault-types", "get"),
        ("/plugins", "get"),
        ("/plugins/{name}", "put"),
        ("/plugins/{name}", "post"),
        ("/plugins/{name}", "delete"),
        ("/metrics", "get"),
        ("/emergency-stop", "post"),
        ("/audit", "get"),
    ] {
        assert!(paths.get(path).and_then(|p| p.get(method)).is_some(), "{method} {path} missing from the OpenAPI document");
    }
    // Each platform's experiment routes, concretely, with their own schemas.
    for platform in ["backend", "frontend", "android"] {
        for (route, method) in [("start", "post"), ("preview", "post"), ("status", "get"), ("metrics", "get"), ("stop", "post")] {
            let path = format!("/experiments/{platform}/{route}");
            assert!(paths.get(&path).and_then(|p| p.get(method)).is_some(), "{method} {path} missing from the OpenAPI document");
        }
        let title = format!("{}{}", platform[..1].to_uppercase(), &platform[1..]);
        let body = &paths[&format!("/experiments/{platform}/start")]["post"]["requestBody"]["content"]["application/json"]["schema"];
        assert_eq!(body["$ref"], format!("#/components/schemas/{title}StartRequest"));
    }
    assert!(!paths.contains_key("/experiments/{platform}/start"), "the generic route is listed per platform");
    let android = &doc["components"]["schemas"]["AndroidStartRequest"]["properties"];
    for field in ["fault_type", "targets", "target_type", "observation_type", "duration_seconds", "apk", "android_run", "scenarios", "expected"] {
        assert!(android[field].is_object(), "the Android start request has no `{field}`");
    }
    // A key's name and a target are "not blank" alike.
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["CreateKey"]["properties"]["name"]["pattern"], schemas["BackendStartRequest"]["properties"]["targets"]["items"]["pattern"]);
    // Every error is a problem document.
    let refused = &paths["/api-keys"]["post"]["responses"]["422"]["content"];
    assert!(refused["application/problem+json"]["schema"]["$ref"].as_str().is_some_and(|r| r.ends_with("/Problem")), "{refused}");
    assert!(doc["components"]["securitySchemes"]["api_key"].is_object());
}

#[tokio::test]
async fn log_and_clock_plugin_share_of_targets_skips_a_vanished_target_for_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options { plugins: vec!["share"], ..Options::default() }).await;
    let id = host
        .start_experiment(json!({"fault_type": "test_share", "targets": ["gone-1", "svc-a", "svc-b", "svc-c"], "intensity": 50,
            "phases": phases(0.3, 1.2, 0.3)}))
        .await;
    let status = host.api.wait_status("backend", &id, 30, ended).await;
    assert_eq!(status["state"], "completed", "{status}");
    let injections: Vec<(&str, &str)> = status["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["injection"].as_str().unwrap()))
        .collect();
    // 50 % of 4 is 2: the vanished first target was skipped for the next two.
    assert_eq!(injections, [("gone-1", "failed"), ("svc-a", "reverted"), ("svc-b", "reverted"), ("svc-c", "none")]);
    assert_eq!(host.log.messages(&id, "inject ").len(), 2);
    assert!(host.log.in_effect().is_empty());
}

#[tokio::test]
async fn an_experiment_whose_every_target_is_gone_fails_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let id = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["gone-1", "gone-2"], "phases": phases(0.2, 0.6, 0.2)})).await;
    let status = host.api.wait_status("backend", &id, 30, ended).await;
    assert_eq!(status["state"], "failed", "{status}");
    assert!(status["error"].as_str().unwrap().contains("no target could be injected"), "{status}");
}

#[tokio::test]
async fn retention_prunes_the_samples_events_and_audit_rows_of_ended_experiments_and_keeps_the_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let id = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-a"], "phases": phases(0.2, 0.6, 0.2)})).await;
    host.api.wait_status("backend", &id, 30, ended).await;
    let metrics = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body;
    let stored = metrics["samples_total"].as_u64().unwrap();
    assert!(stored > 0 && metrics["series"].as_array().unwrap().len() as u64 == stored, "{metrics}");
    assert_eq!(metrics["series_bucket"], 1, "a short experiment's series is whole: {metrics}");
    let running = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-b"], "duration": 60})).await;

    // What a pass with a retention ending now deletes: everything of the ended experiment but its record.
    let pruned = host.state.store.prune(faultline::store::now_ms() + 1).await.unwrap();
    assert!(pruned >= stored, "{pruned} rows pruned");
    let after = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body;
    assert_eq!((after["samples_total"].as_u64(), after["state"].as_str()), (Some(0), Some("completed")), "{after}");
    assert!(after["score"].is_number(), "the experiment's result is kept: {after}");
    let status = host.api.get(&format!("/experiments/backend/status?id={id}")).await.body;
    assert_eq!(status["events"], json!([]), "{status}");
    assert_eq!(host.api.get("/audit").await.body, json!([]), "audit rows older than the retention are gone");
    // A running experiment keeps its readings.
    let live = host.api.get(&format!("/experiments/backend/status?id={running}")).await.body;
    assert!(!live["events"].as_array().unwrap().is_empty(), "{live}");
    host.api.stop("backend", &running).await;
}
