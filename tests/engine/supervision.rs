//! Our own chaos, inside the engine: targets that vanish mid-ramp, a plugin
//! that panics mid-ramp, reverts that fail, and bugs inside the host itself
//! (a platform that panics or hangs). Every experiment must end in a
//! documented state within its planned length plus the margin, and by the
//! plugins' own records nothing may stay in effect.

use std::time::{Duration, Instant};

use faultline_tests::{InProcessHost, Misbehaviour, Options};
use serde_json::{Value, json};

fn phases(baseline: f64, injecting: f64, recovering: f64) -> Value {
    json!({"baseline_seconds": baseline, "injecting_seconds": injecting, "recovering_seconds": recovering})
}

fn ended(status: &Value) -> bool {
    status["state"] != "running"
}

fn events(status: &Value, kind: &str) -> Vec<String> {
    status["events"].as_array().unwrap().iter().filter(|e| e["kind"] == kind).map(|e| e["detail"].as_str().unwrap().to_string()).collect()
}

fn fickle() -> Options {
    Options { plugins: vec!["fickle"], ..Options::default() }
}

#[tokio::test]
async fn a_target_vanishing_mid_ramp_is_dropped_and_the_others_ramp_on_to_a_clean_end() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), fickle()).await;
    for targets in [json!(["vanish-a", "svc-b"]), json!(["vanish-only"])] {
        let begun = Instant::now();
        let id = host
            .start_experiment(json!({"fault_type": "test_fickle", "targets": targets, "intensity": 40, "phases": phases(0.3, 2.0, 0.5)}))
            .await;
        let status = host.api.wait_status("backend", &id, 30, ended).await;
        assert!(begun.elapsed() < Duration::from_secs(10), "it ended on time: {:?}", begun.elapsed());
        assert_eq!(status["state"], "completed", "{status}");
        assert!(events(&status, "skipped").iter().any(|e| e.starts_with("vanish")), "the vanished target is skipped: {status}");
        assert_eq!(status["open_injections"], json!([]), "{status}");
        assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
    }
    // The target that stayed was taken to the level asked for.
    let adjusted = host.log.records().iter().filter(|r| r.message.starts_with("adjust svc-b") && r.message.contains("svc-b@40#")).count();
    assert_eq!(adjusted, 1, "svc-b reached 40 once: {:?}", host.log.records());
}

#[tokio::test]
async fn a_plugin_that_panics_mid_ramp_fails_its_experiment_and_every_target_is_reverted() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), fickle()).await;
    let id = host
        .start_experiment(json!({"fault_type": "test_fickle", "targets": ["svc-a", "panic-b"], "intensity": 40, "phases": phases(0.3, 2.0, 0.5)}))
        .await;
    let status = host.api.wait_status("backend", &id, 30, ended).await;
    assert_eq!(status["state"], "failed", "{status}");
    assert!(status["error"].as_str().unwrap().contains("panic-b"), "{status}");
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
    for target in status["targets"].as_array().unwrap() {
        assert_eq!(target["injection"], "reverted", "{target}");
    }
    // The host kept serving and the targets are free again.
    let again = host.start_experiment(json!({"fault_type": "test_fickle", "targets": ["svc-a"], "duration": 1})).await;
    assert_eq!(host.api.wait_status("backend", &again, 30, ended).await["state"], "completed");
}

#[tokio::test]
async fn a_revert_that_fails_stays_open_and_the_reconciler_reverts_it_later() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), fickle()).await;
    let id = host
        .start_experiment(json!({"fault_type": "test_fickle", "targets": ["sticky-a", "svc-b"], "intensity": 20, "ramp": false,
            "phases": phases(0.2, 0.5, 0.3)}))
        .await;
    let status = host.api.wait_status("backend", &id, 30, ended).await;
    // The run could not revert sticky-a: no clean completion, and the status says what is open.
    assert_eq!(status["state"], "failed", "{status}");
    assert!(status["error"].as_str().unwrap().contains("sticky-a"), "{status}");
    let open = status["open_injections"].as_array().unwrap();
    assert_eq!(open.len(), 1, "{status}");
    assert_eq!((open[0]["target"].as_str(), open[0]["state"].as_str()), (Some("sticky-a"), Some("retrying")), "{status}");
    assert!(open[0]["expires_at"].as_i64().is_some() && open[0]["error"].as_str().is_some(), "{status}");
    assert_eq!(host.log.in_effect().keys().collect::<Vec<_>>(), ["sticky-a"]);

    // The sticky target accepts a revert 6 s after injection; the reconciler gets there.
    let status = host.api.wait_status("backend", &id, 30, |s| s["open_injections"] == json!([])).await;
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
    assert!(events(&status, "reverted").iter().any(|e| e == "sticky-a (by the reconciler)"), "{status}");
    assert_eq!(status["targets"][0]["injection"], "reverted", "{status}");
    assert_eq!(status["state"], "failed", "the end stays as it was reported");
}

#[tokio::test]
async fn a_plugin_with_unreverted_faults_can_be_replaced_or_unloaded_and_its_build_is_kept_until_they_are_reverted() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), fickle()).await;
    let retired = host.data_dir.join("plugins").join(".retired");
    for how in ["replace", "unload"] {
        if host.state.plugins.plugin("fickle").is_none() {
            let reply = host.api.send_raw("POST", "/plugins/fickle", "application/wasm", faultline_tests::paths::test_plugin("fickle")).await;
            assert_eq!(reply.status, 201, "{reply:?}");
        }
        let digest = host.state.plugins.plugin("fickle").unwrap().plugin.digest().to_string();
        let id = host
            .start_experiment(json!({"fault_type": "test_fickle", "targets": ["sticky-a"], "ramp": false, "phases": phases(0.2, 0.6, 0.2)}))
            .await;
        host.api.wait_status("backend", &id, 30, |s| ended(s) && s["open_injections"] != json!([])).await;
        let reply = match how {
            // Another build under the same name: the steady plugin's component.
            "replace" => host.api.send_raw("PUT", "/plugins/fickle", "application/wasm", faultline_tests::paths::test_plugin("steady")).await,
            _ => host.api.delete("/plugins/fickle").await,
        };
        assert!(reply.status == 200 || reply.status == 204, "{how}: {reply:?}");
        assert!(retired.join(format!("{digest}.wasm")).exists(), "{how}: the old build is kept while its fault is open");
        let status = host.api.wait_status("backend", &id, 30, |s| s["open_injections"] == json!([])).await;
        assert!(events(&status, "reverted").iter().any(|e| e == "sticky-a (by the reconciler)"), "{status}");
        assert!(host.log.in_effect().is_empty(), "{how}: left behind: {:?}", host.log.in_effect());
        let deadline = Instant::now() + Duration::from_secs(10);
        while retired.join(format!("{digest}.wasm")).exists() {
            assert!(Instant::now() < deadline, "{how}: the old build is released once nothing needs it");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if how == "replace" {
            assert_eq!(host.api.delete("/plugins/fickle").await.status, 204);
        }
    }
}

#[tokio::test]
async fn a_run_that_panics_inside_the_host_is_rolled_back_from_its_journal_and_ends_failed() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let id = host
        .api
        .start_in_effect(&json!({"fault_type": "test_steady", "targets": ["svc-a", "svc-b"], "ramp": false, "phases": phases(0.2, 30.0, 0.2)}))
        .await;
    host.platform.misbehave(Misbehaviour::Panic);
    let status = host.api.wait_status("backend", &id, 10, ended).await;
    *host.platform.misbehave.lock().unwrap() = None;
    assert_eq!(status["state"], "failed", "{status}");
    assert!(status["error"].as_str().unwrap().contains("panic"), "{status}");
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
    assert!(events(&status, "reverted").iter().any(|e| e.ends_with("(by the supervisor)")), "{status}");
    assert_eq!(status["open_injections"], json!([]));
    // Stop answers truthfully, and the targets are free again.
    let stopped = host.api.stop("backend", &id).await;
    assert_eq!((stopped.status, stopped.body["state"].as_str()), (200, Some("failed")), "{stopped:?}");
    let again = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-a"], "duration": 1})).await;
    assert_eq!(host.api.wait_status("backend", &again, 30, ended).await["state"], "completed");
    let metrics = host.api.get("/metrics").await.text;
    assert!(metrics.contains("faultline_broken_runs_total 1"), "{metrics}");
}

#[tokio::test]
async fn a_run_stuck_inside_the_host_is_cut_off_at_its_planned_end_plus_the_margin() {
    let dir = tempfile::tempdir().unwrap();
    let margin = Duration::from_secs(2);
    let host = InProcessHost::start(dir.path(), Options { ttl_margin: margin, ..Options::default() }).await;
    // Left to its planned end: 3 s plus the margin.
    let begun = Instant::now();
    let id = host.api.start_in_effect(&json!({"fault_type": "test_steady", "targets": ["svc-a"], "ramp": false, "duration": 3})).await;
    host.platform.misbehave(Misbehaviour::Hang);
    let status = host.api.wait_status("backend", &id, 20, ended).await;
    let took = begun.elapsed();
    assert!(took >= Duration::from_secs(3) + margin && took < Duration::from_secs(3) + margin + Duration::from_secs(8), "{took:?}");
    assert_eq!(status["state"], "failed", "{status}");
    assert!(status["error"].as_str().unwrap().contains("cut off"), "{status}");
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());

    // Stopped while stuck: the stop answers within the margin, with the fault reverted.
    *host.platform.misbehave.lock().unwrap() = None;
    let id = host.api.start_in_effect(&json!({"fault_type": "test_steady", "targets": ["svc-a"], "ramp": false, "phases": phases(0.2, 600.0, 0.2)})).await;
    host.platform.misbehave(Misbehaviour::Hang);
    let asked = Instant::now();
    let stopped = host.api.stop("backend", &id).await;
    assert!(asked.elapsed() < margin + Duration::from_secs(8), "{:?}", asked.elapsed());
    assert_eq!(stopped.body["state"], "failed", "{stopped:?}");
    assert!(stopped.body["stop_reason"].as_str().unwrap().starts_with("stopped by"), "{stopped:?}");
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
    *host.platform.misbehave.lock().unwrap() = None;
}

#[tokio::test]
async fn a_stop_during_recovering_ends_stopped_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let id = host.start_experiment(json!({"fault_type": "test_steady", "targets": ["svc-a"], "phases": phases(0.2, 0.6, 60.0)})).await;
    host.api.wait_status("backend", &id, 10, |s| s["phase"] == "injecting").await;
    // The system goes down under the fault and does not come back, so
    // recovery is watched for its whole minute.
    *host.platform.forced_health.lock().unwrap() = Some(0.0);
    host.api.wait_status("backend", &id, 10, |s| s["phase"] == "recovering").await;
    let asked = Instant::now();
    let stopped = host.api.stop("backend", &id).await;
    assert!(asked.elapsed() < Duration::from_secs(5));
    assert_eq!(stopped.body["state"], "stopped", "{stopped:?}");
    assert!(stopped.body["stop_reason"].as_str().unwrap().starts_with("stopped by"), "{stopped:?}");
    assert!(stopped.body["score"].as_f64().is_some(), "scored on what was observed: {stopped:?}");
}

#[tokio::test]
async fn the_ramp_reaches_the_requested_level_by_the_middle_of_injecting_and_the_metrics_say_which_samples_were_at_it() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let cases = [
        (json!({}), 0.5),
        (json!({"ramp_seconds": 0.5}), 0.25),
        (json!({"ramp": false}), 0.0),
    ];
    for (extra, ramp_share) in cases {
        let mut request = json!({"fault_type": "test_steady", "targets": ["svc-a"], "intensity": 40, "phases": phases(0.3, 2.0, 0.3)});
        request.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let id = host.start_experiment(request.clone()).await;
        let status = host.api.wait_status("backend", &id, 30, ended).await;
        assert_eq!(status["state"], "completed", "{status}");
        let metrics = host.api.get(&format!("/experiments/backend/metrics?id={id}")).await.body;
        let injecting: Vec<&Value> = metrics["series"].as_array().unwrap().iter().filter(|s| s["phase"] == "injecting").collect();
        let start = injecting[0]["at"].as_i64().unwrap();
        for s in &injecting {
            // Allow a few sampling intervals (100 ms each) past the end of the ramp.
            if (s["at"].as_i64().unwrap() - start) as f64 > ramp_share * 2000.0 + 400.0 {
                assert_eq!(s["intensity"], 40.0, "{request}: held at the requested level after the ramp: {s}");
            }
            assert_eq!(s["at_requested"], s["intensity"] == 40.0, "{s}");
        }
        let at_requested = injecting.iter().filter(|s| s["at_requested"] == true).count();
        assert_eq!(metrics["at_requested"]["samples"], at_requested, "{metrics}");
        assert!(at_requested as f64 >= (1.0 - ramp_share) * injecting.len() as f64 - 5.0, "{request}: {at_requested} of {}", injecting.len());
        assert_eq!(metrics["requested_intensity"], 40.0);
    }
}

#[tokio::test]
async fn starts_racing_a_shutdown_are_either_refused_or_rolled_back_before_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let host = InProcessHost::start(dir.path(), Options::default()).await;
    let api = host.api.clone();
    let starts: Vec<_> = (0..6)
        .map(|i| {
            let api = api.clone();
            tokio::spawn(async move {
                let body = json!({"fault_type": "test_steady", "targets": [format!("svc-{i}")], "ramp": false, "phases": phases(0.1, 600.0, 0.1)});
                api.post_json("/experiments/backend/start", &body).await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let engine = host.state.engine.clone();
    let began = Instant::now();
    engine.shutdown().await;
    assert!(began.elapsed() < Duration::from_secs(30), "shutdown took {:?}", began.elapsed());
    for start in starts {
        let reply = start.await.unwrap();
        match reply.status {
            201 => {
                let id = reply.body["id"].as_str().unwrap();
                let row = host.state.store.experiment(id).await.unwrap().unwrap();
                assert_eq!(row.state, "stopped", "an accepted start is rolled back by the shutdown: {row:?}");
            }
            503 => assert_eq!(reply.code(), "shutting_down"),
            other => panic!("unexpected {other}: {reply:?}"),
        }
    }
    assert!(host.log.in_effect().is_empty(), "left behind: {:?}", host.log.in_effect());
}
