//! The emergency stop on real containers: one admin call rolls back every
//! running experiment (checked by Docker's view of the helpers, the
//! target's network namespace and timed traffic) and refuses new starts
//! until an admin lifts it, across a restart of the host.

use faultline_tests::{Api, DemoSystem, HostProcess};
use serde_json::{Value, json};

const START: &str = "/experiments/backend/start";

fn minute_of(fault: &str, target: &str, intensity: u32) -> Value {
    json!({"targets": [target], "fault_type": fault, "intensity": intensity, "ramp": false,
        "phases": {"baseline_seconds": 0.2, "injecting_seconds": 60, "recovering_seconds": 0.5}})
}

async fn key(admin: &Api, name: &str, role: &str) -> Api {
    let created = admin.post_json("/api-keys", &json!({"name": name, "role": role})).await;
    assert_eq!(created.status, 201, "{created:?}");
    admin.with_key(created.body["key"].as_str())
}

#[tokio::test]
async fn an_emergency_stop_rolls_back_everything_and_refuses_starts_until_an_admin_lifts_it() {
    let system = DemoSystem::replicas(2, &[]);
    let (one, two) = (system.names[0].clone(), system.names[1].clone());
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let ops = key(&host.api, "ops", "admin").await;
    let ci = key(&host.api, "ci", "engineer").await;

    let ids = vec![
        ci.start_in_effect(&minute_of("network_delay", &one, 200)).await,
        ci.start_in_effect(&minute_of("cpu_stress", &two, 20)).await,
    ];
    assert_eq!(system.helpers_left().len(), 2);
    assert!(system.measure_udp("replica-1", 10).quantile(0.5) > 150.0, "the delay is in effect");

    // Only an admin may pull the brake.
    let denied = ci.post_json("/emergency-stop", &json!({"reason": "not mine to pull"})).await;
    assert_eq!((denied.status, denied.code()), (403, "forbidden"), "{denied:?}");
    assert_eq!(system.helpers_left().len(), 2, "a refused emergency stop halts nothing");

    let engaged = ops.post_json("/emergency-stop", &json!({"reason": "checkout is down"})).await;
    assert_eq!(engaged.status, 200, "{engaged:?}");
    assert_eq!((&engaged.body["engaged"], &engaged.body["engaged_by"], &engaged.body["reason"]), (&json!(true), &json!("ops"), &json!("checkout is down")));
    assert!(engaged.body["engaged_at"].as_i64().unwrap() > 0);
    let mut halted: Vec<String> = engaged.body["halted"].as_array().unwrap().iter().map(|h| h.as_str().unwrap().into()).collect();
    halted.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(halted, expected, "both experiments were halted");

    // By the time it answered, everything was rolled back.
    assert!(system.helpers_left().is_empty(), "no helper left");
    assert_eq!(DemoSystem::network_state(&one), Vec::<String>::new(), "no table or qdisc left");
    assert!(system.measure_udp("replica-1", 20).quantile(0.95) < 50.0, "no delay left");
    for id in &ids {
        let status = host.api.get(&format!("/experiments/backend/status?id={id}")).await.body;
        assert_eq!((&status["state"], &status["stop_reason"]), (&json!("stopped"), &json!("emergency stop by ops")), "{status}");
        assert_eq!(status["targets"][0]["injection"], "reverted");
    }

    // Starts are refused, saying who engaged it and why; anyone may look.
    let refused = ci.post_json(START, &minute_of("cpu_stress", &two, 20)).await;
    assert_eq!((refused.status, refused.code()), (409, "emergency_stop_engaged"), "{refused:?}");
    assert_eq!((&refused.body["engaged_by"], &refused.body["reason"]), (&json!("ops"), &json!("checkout is down")));
    assert_eq!(ci.get("/emergency-stop").await.body["engaged"], true);
    assert!(ci.get("/metrics").await.text.contains("faultline_emergency_stop_engaged 1"), "alerting can see it");
    assert!(system.helpers_left().is_empty(), "the refused start injected nothing");

    // It outlives the host.
    assert!(host.terminate().success());
    let host = HostProcess::start(dir.path(), &[]);
    let (ops, ci) = (host.api.with_key(ops.key.as_deref()), host.api.with_key(ci.key.as_deref()));
    let still = ci.post_json(START, &minute_of("cpu_stress", &two, 20)).await;
    assert_eq!((still.status, still.code()), (409, "emergency_stop_engaged"), "after a restart: {still:?}");

    let denied = ci.delete("/emergency-stop").await;
    assert_eq!((denied.status, denied.code()), (403, "forbidden"));
    let lifted = ops.delete("/emergency-stop").await;
    assert_eq!(lifted.status, 200, "{lifted:?}");
    assert_eq!((&lifted.body["engaged"], &lifted.body["lifted_by"], &lifted.body["engaged_by"]), (&json!(false), &json!("ops"), &json!("ops")));
    assert!(lifted.body["lifted_at"].as_i64().unwrap() >= engaged.body["engaged_at"].as_i64().unwrap());
    let again = ops.delete("/emergency-stop").await;
    assert_eq!((again.status, again.code()), (409, "emergency_stop_not_engaged"));

    let resumed = ci.post_json(START, &minute_of("cpu_stress", &two, 20)).await;
    assert_eq!(resumed.status, 201, "starts are accepted again: {resumed:?}");
    ci.stop("backend", resumed.body["id"].as_str().unwrap()).await;
    assert!(system.helpers_left().is_empty());
}
