//! Safety rails on real containers: what a retried, overlapping or careless
//! request does, checked from outside (Docker's view of the helpers and
//! containers) as well as from the answers.

use faultline_tests::{DemoSystem, HostProcess};
use serde_json::{Value, json};

fn cpu_stress(system: &DemoSystem, percent: u32) -> Value {
    json!({"targets": [system.selector()], "fault_type": "cpu_stress", "intensity": percent, "ramp": false,
        "phases": {"baseline_seconds": 0.2, "injecting_seconds": 60, "recovering_seconds": 0.5}})
}

const START: &str = "/experiments/backend/start";

#[tokio::test]
async fn a_retried_start_returns_the_first_experiment_and_injects_once() {
    let system = DemoSystem::replicas(1, &[]);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let request = cpu_stress(&system, 10);
    let key = [("Idempotency-Key", "deploy-42-chaos")];

    // Sent twice at once: one creates the experiment; the other either
    // finds it or is told the first is still in progress.
    let (a, b) = tokio::join!(host.api.post_json_with(START, &request, &key), host.api.post_json_with(START, &request, &key));
    let created: Vec<&str> = [&a, &b].iter().filter(|r| r.status == 201).map(|r| r.body["id"].as_str().unwrap()).collect();
    assert!(!created.is_empty() && created.iter().all(|i| *i == created[0]), "one experiment: {a:?} {b:?}");
    for other in [&a, &b].into_iter().filter(|r| r.status != 201) {
        assert_eq!((other.status, other.code()), (409, "idempotency_key_in_use"), "{other:?}");
    }
    let id = created[0].to_string();
    let retry = host.api.post_json_with(START, &request, &key).await;
    assert_eq!((retry.status, retry.body["id"].as_str()), (201, Some(id.as_str())), "{retry:?}");
    assert_eq!(retry.headers["idempotent-replayed"], "true");
    host.api.wait_status("backend", &id, 60, |s| s["targets"][0]["injection"] == "active").await;
    assert_eq!(system.helpers_left().len(), 1, "one container, one fault: nothing was injected twice");

    let changed = host.api.post_json_with(START, &cpu_stress(&system, 20), &key).await;
    assert_eq!((changed.status, changed.code()), (422, "idempotency_key_reused"), "{changed:?}");
    assert_eq!(changed.body["idempotency_key"], "deploy-42-chaos");
    for bad in ["", &"k".repeat(256), "two words"] {
        let reply = host.api.post_json_with(START, &request, &[("Idempotency-Key", bad)]).await;
        assert_eq!((reply.status, reply.code()), (400, "invalid_idempotency_key"), "{bad:?}: {reply:?}");
    }
    assert_eq!(system.helpers_left().len(), 1, "refused requests injected nothing");

    let stopped = host.api.stop("backend", &id).await;
    assert_eq!(stopped.body["state"], "stopped", "{stopped:?}");
    assert!(system.helpers_left().is_empty());

    // A refused start frees its key: the corrected retry goes through.
    let mut wrong = request.clone();
    wrong["fault_type"] = json!("cpu_stres");
    let fix = [("Idempotency-Key", "typo-then-fix")];
    let refused = host.api.post_json_with(START, &wrong, &fix).await;
    assert_eq!((refused.status, refused.code()), (422, "unknown_fault_type"));
    let corrected = host.api.post_json_with(START, &request, &fix).await;
    assert_eq!(corrected.status, 201, "{corrected:?}");
    assert_ne!(corrected.body["id"], json!(id), "a new experiment");
    let id = corrected.body["id"].as_str().unwrap();
    host.api.stop("backend", id).await;
    assert!(system.helpers_left().is_empty());
}

fn network(fault: &str, target: &str, extra: Value) -> Value {
    let mut request = json!({"targets": [target], "fault_type": fault, "ramp": false,
        "phases": {"baseline_seconds": 0.2, "injecting_seconds": 60, "recovering_seconds": 0.5}});
    request.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    request
}

#[tokio::test]
async fn a_target_already_under_the_same_kind_of_fault_is_refused_naming_the_other_experiment() {
    let system = DemoSystem::replicas(2, &[]);
    let (one, two) = (system.names[0].clone(), system.names[1].clone());
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let first = host.api.post_json(START, &network("network_delay", &system.selector(), json!({"intensity": 50}))).await;
    assert_eq!(first.status, 201, "{first:?}");
    let first_id = first.body["id"].as_str().unwrap().to_string();

    // The same kind, under its other name, on one of the same containers.
    let same = host.api.post_json(START, &network("latency", &one, json!({"intensity": 80}))).await;
    assert_eq!((same.status, same.code()), (409, "target_busy"), "{same:?}");
    assert_eq!((same.body["experiment"].as_str(), same.body["targets"].clone()), (Some(first_id.as_str()), json!([one])), "{same:?}");

    // Another kind is allowed beside it...
    let loss = host.api.post_json(START, &network("packet_loss", &one, json!({"intensity": 5}))).await;
    assert_eq!(loss.status, 201, "{loss:?}");
    // ...unless its driver declares a conflict.
    let capped = host.api.post_json(START, &network("bandwidth_limit", &two, json!({"params": {"rate_kbit": 1000}}))).await;
    assert_eq!((capped.status, capped.code()), (409, "target_busy"), "{capped:?}");
    assert_eq!(capped.body["experiment"], json!(first_id));

    for id in [&first_id, loss.body["id"].as_str().unwrap()] {
        host.api.wait_status("backend", id, 60, |s| s["targets"].as_array().unwrap().iter().all(|t| t["injection"] == "active")).await;
    }
    let left = system.helpers_left();
    assert_eq!(left.len(), 3, "a delay on each container and a loss on one, nothing else: {left:?}");
    let tables = DemoSystem::network_state(&one);
    assert_eq!(tables.len(), 2, "the delay's and the loss's own tables on {one}: {tables:?}");

    host.api.stop("backend", &first_id).await;
    let after = host.api.post_json(START, &network("bandwidth_limit", &two, json!({"params": {"rate_kbit": 1000}}))).await;
    assert_eq!(after.status, 201, "free again once the other experiment ended: {after:?}");
    for id in [loss.body["id"].as_str().unwrap(), after.body["id"].as_str().unwrap()] {
        host.api.stop("backend", id).await;
    }
    assert!(system.helpers_left().is_empty());
    assert_eq!(DemoSystem::network_state(&one), Vec::<String>::new());
}

#[tokio::test]
async fn protected_containers_are_never_targets_and_the_answer_says_why() {
    let mut system = DemoSystem::replicas(2, &[]);
    let guarded = system.run("guarded", &[("faultline.protected", "true")], &[], &[]);
    let (plain, named) = (system.names[0].clone(), system.names[1].clone());
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--protect", &named]);

    // The selector matches all three; only the one nobody protected is hit.
    let started = host
        .api
        .post_json(START, &json!({"targets": [system.selector()], "fault_type": "kill", "intensity": 100, "ramp": false,
            "phases": {"baseline_seconds": 0.2, "injecting_seconds": 2, "recovering_seconds": 0.2}}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    assert_eq!(started.body["targets"], json!([plain]));
    let excluded: Vec<(String, String)> = started.body["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e["reason"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(excluded.len(), 2, "{excluded:?}");
    assert!(excluded.contains(&(guarded.clone(), "labelled faultline.protected=true".into())), "{excluded:?}");
    assert!(excluded.contains(&(named.clone(), "protected by the operator (--protect)".into())), "{excluded:?}");
    let id = started.body["id"].as_str().unwrap();
    let ended = host.api.wait_status("backend", id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    assert_eq!(ended["excluded"].as_array().unwrap().len(), 2, "the status keeps what was left out: {ended}");
    assert!(!DemoSystem::running(&plain), "the unprotected container was killed");
    assert!(DemoSystem::running(&guarded) && DemoSystem::running(&named), "the protected ones were not touched");

    // A selector that matches only protected containers is refused.
    let only = host.api.post_json(START, &json!({"targets": [guarded], "fault_type": "kill", "duration": 5})).await;
    assert_eq!((only.status, only.code()), (422, "only_protected_targets"), "{only:?}");
    assert_eq!(only.body["excluded"][0]["name"], json!(guarded));
    assert!(DemoSystem::running(&guarded));
}
