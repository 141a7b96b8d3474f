//! Bad requests get problem+json with a stable code, and change nothing.
//! The host runs in-process with the scripted platform and the log-and-clock
//! test plugin, so a valid start really starts.

use faultline_tests::{InProcessHost, Options};
use serde_json::{Value, json};

fn start_body(overrides: Value) -> Value {
    let mut body = json!({"fault_type": "test_steady", "targets": ["svc-a"], "duration": 3, "intensity": 40});
    for (k, v) in overrides.as_object().unwrap() {
        if v.is_null() {
            body.as_object_mut().unwrap().remove(k);
        } else {
            body[k] = v.clone();
        }
    }
    body
}

#[tokio::test]
async fn start_requests_with_bad_meaning_are_refused_before_anything_is_injected() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let cases = [
        (json!({"fault_type": "meteor_strike"}), 422, "unknown_fault_type"),
        (json!({"intensity": 101}), 422, "intensity_out_of_range"),
        (json!({"intensity": -1}), 422, "intensity_out_of_range"),
        (json!({"duration": 0}), 422, "duration_out_of_range"),
        (json!({"duration": 90_000}), 422, "duration_out_of_range"),
        (json!({"duration": null}), 422, "missing_duration"),
        (json!({"duration_seconds": 5}), 422, "conflicting_durations"),
        (json!({"targets": []}), 422, "missing_targets"),
        (json!({"targets": ["missing-service"]}), 422, "no_matching_target"),
        (json!({"params": {"colour": "red"}}), 422, "unknown_param"),
        (json!({"params": {"label": 5}}), 422, "invalid_param"),
        (json!({"params": {"label": "invalid"}}), 422, "invalid_settings"),
        (json!({"tolerance": 2}), 422, "tolerance_out_of_range"),
        (json!({"phases": {"baseline_seconds": 1, "injecting_seconds": 0, "recovering_seconds": 1}}), 422, "invalid_phases"),
        (json!({"phases": {"baseline_seconds": 1, "injecting_seconds": 1, "recovering_seconds": 5}}), 422, "phases_mismatch"),
        (json!({"duration": "ten"}), 422, "invalid_field"),
        (json!({"adaptive": "yes"}), 422, "invalid_field"),
        (json!({"blast": true}), 422, "unknown_field"),
        (json!({"fault_type": null}), 422, "missing_field"),
        (json!({"probes": [{"type": "http", "url": "ftp://svc/"}]}), 422, "invalid_probe"),
        (json!({"probes": [{"type": "tcp", "address": "nohost"}]}), 422, "invalid_probe"),
        (json!({"probes": [{"type": "http", "url": "http://svc/", "timeout_ms": 0}]}), 422, "invalid_probe"),
        (json!({"probes": [{"type": "http", "url": "http://svc/", "timeout_ms": 100, "max_latency_ms": 500}]}), 422, "invalid_probe"),
        (json!({"probes": [{"type": "udp", "address": "svc:53"}]}), 422, "invalid_field"),
        (json!({"probes": [{"type": "tcp", "address": "svc:80", "retries": 3}]}), 422, "unknown_field"),
        (json!({"guardrails": {"max_targets": 0}}), 422, "invalid_guardrail"),
        (json!({"guardrails": {"max_targets": -1}}), 422, "invalid_field"),
        (json!({"guardrails": {"max_blast_radius": 1}}), 422, "guardrail_not_supported"),
        (json!({"guardrails": {"abort_when": [{"metric": "success_rate", "below": 0.5}]}}), 422, "invalid_guardrail"),
        (json!({"guardrails": {"abort_when": [{"metric": "health", "below": 1.5}]}}), 422, "invalid_guardrail"),
        (json!({"guardrails": {"abort_when": [{"metric": "health", "above": 0.5}]}}), 422, "invalid_guardrail"),
        (json!({"guardrails": {"abort_when": [{"metric": "health", "below": 0.5, "for_seconds": 60}]}}), 422, "invalid_guardrail"),
        (json!({"guardrails": {"abort_when": [{"metric": "errors", "below": 0.5}]}}), 422, "invalid_field"),
        (json!({"guardrails": {"abort_when": [{"metric": "health", "below": 0.5, "window": 3}]}}), 422, "unknown_field"),
        (json!({"probes": [{"type": "tcp", "address": "svc:80"}], "guardrails": {"abort_when": [{"metric": "latency_ms", "above": 100, "probe": 1}]}}), 422, "invalid_guardrail"),
        (json!({"guardrails": {"max_targets": 1, "stop_if": "bad"}}), 422, "unknown_field"),
        // The injecting phase of 3 s is 1.8 s.
        (json!({"ramp_seconds": 5}), 422, "invalid_ramp"),
        (json!({"ramp_seconds": -1}), 422, "invalid_ramp"),
        (json!({"ramp": false, "ramp_seconds": 1}), 422, "invalid_ramp"),
        (json!({"adaptive": true, "ramp_seconds": 1}), 422, "invalid_ramp"),
        (json!({"ramp_seconds": "soon"}), 422, "invalid_field"),
    ];
    for (overrides, status, code) in cases {
        let body = start_body(overrides.clone());
        let reply = host.api.post_json("/experiments/backend/start", &body).await;
        assert_eq!((reply.status, reply.code()), (status, code), "{overrides} → {}", reply.text);
        assert!(reply.body["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }
    let range = host.api.post_json("/experiments/backend/start", &start_body(json!({"intensity": 500}))).await;
    assert_eq!((range.body["min"].as_f64(), range.body["max"].as_f64()), (Some(0.0), Some(100.0)), "the range is in the problem");

    assert!(host.log.records().is_empty(), "a refused start must not call inject: {:?}", host.log.records());
    let counts = host.state.store.count_experiments_by_state().await.unwrap();
    assert!(counts.is_empty(), "a refused start must not record an experiment: {counts:?}");
}

#[tokio::test]
async fn malformed_oversized_and_mistyped_bodies_get_their_own_codes() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let path = "/experiments/backend/start";

    let malformed = host.api.send_raw("POST", path, "application/json", b"{\"fault_type\": \"test_steady\",".to_vec()).await;
    assert_eq!((malformed.status, malformed.code()), (400, "malformed_json"));
    let not_json = host.api.send_raw("POST", path, "application/json", b"fault_type=test_steady".to_vec()).await;
    assert_eq!((not_json.status, not_json.code()), (400, "malformed_json"));
    let wrong_type = host.api.send_raw("POST", path, "text/plain", b"{}".to_vec()).await;
    assert_eq!((wrong_type.status, wrong_type.code()), (415, "unsupported_media_type"));
    let huge = format!("{{\"fault_type\": \"{}\"}}", "x".repeat(200_000));
    let oversized = host.api.send_raw("POST", path, "application/json", huge.into_bytes()).await;
    assert_eq!((oversized.status, oversized.code()), (413, "payload_too_large"));
    let array = host.api.post_json(path, &json!([1, 2])).await;
    assert_eq!((array.status, array.code()), (422, "invalid_field"));
}

#[tokio::test]
async fn routes_ids_and_methods_that_do_not_exist_are_problems_too() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let cases = [
        ("/experiments/mainframe/status?id=00000000-0000-0000-0000-000000000000", 404, "unknown_platform"),
        ("/experiments/backend/status", 400, "missing_id"),
        ("/experiments/backend/status?id=", 400, "missing_id"),
        ("/experiments/backend/status?id=not-a-uuid", 404, "experiment_not_found"),
        ("/experiments/backend/metrics?id=00000000-0000-0000-0000-000000000000", 404, "experiment_not_found"),
        ("/no/such/route", 404, "no_such_route"),
    ];
    for (path, status, code) in cases {
        let reply = host.api.get(path).await;
        assert_eq!((reply.status, reply.code()), (status, code), "{path}");
    }
    let wrong_method = host.api.get("/experiments/backend/start").await;
    assert_eq!((wrong_method.status, wrong_method.code()), (405, "method_not_allowed"));
    let stop_unknown = host.api.post_json("/experiments/backend/stop?id=00000000-0000-0000-0000-000000000000", &json!({})).await;
    assert_eq!((stop_unknown.status, stop_unknown.code()), (404, "experiment_not_found"));

    // An experiment of one platform is not found under another.
    let id = host.start_experiment(start_body(json!({}))).await;
    let elsewhere = host.api.get(&format!("/experiments/android/status?id={id}")).await;
    assert_eq!((elsewhere.status, elsewhere.code()), (404, "experiment_not_found"));
}

#[tokio::test]
async fn a_platform_the_host_does_not_serve_is_unavailable_not_an_error_of_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let reply = host.api.post_json("/experiments/android/start", &start_body(json!({}))).await;
    assert_eq!((reply.status, reply.code()), (503, "platform_unavailable"));
}

#[tokio::test]
async fn every_example_request_file_passes_every_check_of_a_start() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    // The frontend's examples name an app on 127.0.0.1:8080: the test app stands in.
    let app = faultline_tests::WebApp::start().await;
    let mut checked = 0;
    for (platform, path) in faultline_tests::paths::example_requests() {
        // Android's need a device and an uploaded APK: `tests/android/experiments.rs` checks them.
        if platform == "android" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap().replace("http://127.0.0.1:8080", &app.origin());
        let body: Value = serde_json::from_str(&text).unwrap();
        let reply = host.api.post_json(&format!("/experiments/{platform}/preview"), &body).await;
        assert_eq!(reply.status, 200, "{}: {}", path.display(), reply.text);
        checked += 1;
    }
    assert!(checked >= 3, "found {checked} example requests");
}

#[tokio::test]
async fn network_fault_settings_out_of_range_are_refused_before_anything_is_injected() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let cases = [
        (json!({"fault_type": "network_delay", "intensity": 0}), "intensity_out_of_range"),
        (json!({"fault_type": "latency", "intensity": 20_000}), "intensity_out_of_range"),
        (json!({"fault_type": "network_delay", "params": {"jitter_ms": -5}}), "invalid_settings"),
        (json!({"fault_type": "latency", "params": {"jitter_ms": 90_000}}), "invalid_settings"),
        (json!({"fault_type": "network_delay", "params": {"jitter_ms": "lots"}}), "invalid_param"),
        (json!({"fault_type": "packet_loss", "intensity": 101}), "intensity_out_of_range"),
        (json!({"fault_type": "packet_loss", "intensity": 0}), "intensity_out_of_range"),
        (json!({"fault_type": "bandwidth_limit", "intensity": null}), "missing_param"),
        (json!({"fault_type": "bandwidth_limit", "intensity": null, "params": {"rate_kbit": 1}}), "invalid_settings"),
        (json!({"fault_type": "bandwidth_limit", "intensity": 5, "params": {"rate_kbit": 1000}}), "intensity_not_supported"),
        (json!({"fault_type": "bandwidth_limit", "intensity": null, "adaptive": true, "params": {"rate_kbit": 1000}}), "adaptive_not_supported"),
    ];
    for (overrides, code) in cases {
        let reply = host.api.post_json("/experiments/backend/start", &start_body(overrides.clone())).await;
        assert_eq!((reply.status, reply.code()), (422, code), "{overrides} → {}", reply.text);
    }
    assert!(host.log.records().is_empty(), "a refused start must not call inject: {:?}", host.log.records());
    let counts = host.state.store.count_experiments_by_state().await.unwrap();
    assert!(counts.is_empty(), "a refused start must not record an experiment: {counts:?}");
}

#[tokio::test]
async fn emergency_stop_bodies_are_checked_and_engaging_twice_keeps_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let path = "/emergency-stop";
    let long = host.api.post_json(path, &json!({"reason": "x".repeat(501)})).await;
    assert_eq!((long.status, long.code()), (422, "invalid_reason"));
    let unknown = host.api.post_json(path, &json!({"why": "drill"})).await;
    assert_eq!((unknown.status, unknown.code()), (422, "unknown_field"));
    let text = host.api.send_raw("POST", path, "text/plain", b"drill".to_vec()).await;
    assert_eq!((text.status, text.code()), (415, "unsupported_media_type"));
    let broken = host.api.send_raw("POST", path, "application/json", b"{".to_vec()).await;
    assert_eq!((broken.status, broken.code()), (400, "malformed_json"));
    assert_eq!(host.api.get(path).await.body["engaged"], false, "refused requests engaged nothing");

    // No body at all is fine: the button needs no form.
    let running = host.start_experiment(start_body(json!({"duration": 30}))).await;
    let first = host.api.post_empty(path).await;
    assert_eq!((first.status, &first.body["halted"]), (200, &json!([running])), "{first:?}");
    let second = host.api.post_json(path, &json!({"reason": "again"})).await;
    assert_eq!(second.status, 200);
    assert_eq!((&second.body["engaged_at"], &second.body["reason"], &second.body["halted"]), (&first.body["engaged_at"], &Value::Null, &json!([])));
    assert_eq!(host.api.delete(path).await.status, 200);
    assert_eq!(host.api.get(path).await.body["engaged"], false);
}

#[tokio::test]
async fn an_android_start_takes_the_spec_fields_and_no_other_platform_does() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let android = start_body(json!({
        "duration": null, "duration_seconds": 10, "targets": ["com.example.shop"],
        "target_type": "android", "observation_type": "android", "apk": "shop-1.4.2",
        "android_run": {"avd_name": "Pixel_6_API_34", "headless": true, "reset_app_state": true},
        "scenarios": [{"type": "test_steady", "at": 8, "duration_seconds": 2}],
        "expected": {"running": true, "not_crash": true, "not_anr": true, "should_recover": true},
    }));
    // Every check passes; the Android platform is not served by this host.
    let reply = host.api.post_json("/experiments/android/start", &android).await;
    assert_eq!((reply.status, reply.code()), (503, "platform_unavailable"), "{}", reply.text);
    let cases = [
        (json!({"target_type": "backend"}), "invalid_field"),
        (json!({"apk": " "}), "invalid_field"),
        (json!({"android_run": {"avd_name": ""}}), "invalid_field"),
        (json!({"android_run": {"gpu": "host"}}), "unknown_field"),
        (json!({"scenarios": [{"type": "test_steady", "at": 8, "duration_seconds": 0}]}), "invalid_scenario"),
        (json!({"scenarios": [{"type": "", "at": 1, "duration_seconds": 1}]}), "unknown_fault_type"),
        (json!({"scenarios": [{"type": "test_steady", "at": -1, "duration_seconds": 1}]}), "invalid_field"),
        (json!({"scenarios": [{"type": "test_steady", "duration_seconds": 1}]}), "missing_field"),
        (json!({"expected": {"fast": true}}), "unknown_field"),
        (json!({"colour": "red"}), "unknown_field"),
    ];
    for (overrides, code) in cases {
        let mut body = android.clone();
        for (k, v) in overrides.as_object().unwrap() {
            body[k] = v.clone();
        }
        let reply = host.api.post_json("/experiments/android/start", &body).await;
        assert_eq!((reply.status, reply.code()), (422, code), "{overrides} → {}", reply.text);
    }
    // The Android fields are Android's own.
    for platform in ["backend", "frontend"] {
        let reply = host.api.post_json(&format!("/experiments/{platform}/start"), &start_body(json!({"apk": "shop-1.4.2"}))).await;
        assert_eq!((reply.status, reply.code()), (422, "unknown_field"), "{platform}: {}", reply.text);
    }
    assert!(host.state.store.count_experiments_by_state().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_server_refuses_what_the_document_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    // The audit trail's query: typed, bounded, closed.
    for query in ["limit=true", "limit=0", "limit=1001", "limit=1.5", "outcome=maybe", "action=experiment.pause", "before=yesterday", "before=0123456789abcdef0123456789abcdef", "colour=red"] {
        let reply = host.api.get(&format!("/audit?{query}")).await;
        assert_eq!((reply.status, reply.code()), (400, "invalid_query"), "{query}: {}", reply.text);
    }
    for query in ["limit=1", "outcome=refused", "action=experiment.start", "before=00000000-0000-7000-8000-000000000000", "actor=ci"] {
        let reply = host.api.get(&format!("/audit?{query}")).await;
        assert_eq!(reply.status, 200, "{query}: {}", reply.text);
    }
    // A path parameter that does not decode is a problem like any other.
    for path in ["/plugins/%FF", "/experiments/%FF/status?id=00000000-0000-0000-0000-000000000000"] {
        let reply = host.api.get(path).await;
        assert_eq!((reply.status, reply.code()), (400, "invalid_path"), "{path}: {}", reply.text);
    }
    let reply = host.api.delete("/api-keys/%C3%28").await;
    assert_eq!((reply.status, reply.code()), (400, "invalid_path"), "{}", reply.text);
    // A key's name is at most 64 characters as sent, whitespace included.
    let padded = format!("  {}  ", "k".repeat(62));
    let reply = host.api.post_json("/api-keys", &json!({"name": padded, "role": "viewer"})).await;
    assert_eq!((reply.status, reply.code()), (422, "invalid_name"), "{}", reply.text);
    let reply = host.api.post_json("/api-keys", &json!({"name": " ci ", "role": "viewer"})).await;
    assert_eq!((reply.status, reply.body["name"].as_str()), (201, Some("ci")), "{}", reply.text);
    // So is an emergency stop's reason.
    let reply = host.api.post_json("/emergency-stop", &json!({"reason": format!(" {} ", "x".repeat(499))})).await;
    assert_eq!((reply.status, reply.code()), (422, "invalid_reason"), "{}", reply.text);
}
