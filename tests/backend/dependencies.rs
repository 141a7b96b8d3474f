//! Dependencies, blast radius and cascade depth on a real system with a
//! known graph: web → api → db, wired by compose labels and upstream
//! arguments on one network, beside a container that depends on nothing.

use faultline_tests::{DemoSystem, HostProcess};
use serde_json::{Value, json};

fn names(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn preview_computes_blast_radius_and_cascade_depth_of_a_known_graph_without_injecting() {
    let system = DemoSystem::three_tier();
    let full = |n: &str| format!("{}-{n}", system.id);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);

    let db = host.api.post_json("/experiments/backend/preview", &json!({"targets": [full("db")], "fault_type": "kill", "duration": 10})).await;
    assert_eq!(db.status, 200, "{db:?}");
    assert_eq!(names(&db.body["targets"]), [full("db")]);
    assert_eq!(names(&db.body["dependents"]), [full("api"), full("web")]);
    assert_eq!((db.body["blast_radius"].as_u64(), db.body["cascade_depth"].as_u64()), (Some(2), Some(2)));
    assert!(names(&db.body["dependencies"]).is_empty());

    let web = host.api.post_json("/experiments/backend/preview", &json!({"targets": [full("web")], "fault_type": "kill", "duration": 10})).await;
    assert_eq!(names(&web.body["dependencies"]), [full("api"), full("db")]);
    assert_eq!(web.body["blast_radius"], 0);

    let api = host.api.post_json("/experiments/backend/preview", &json!({"targets": [full("api")], "fault_type": "kill", "duration": 10})).await;
    assert_eq!((api.body["blast_radius"].as_u64(), api.body["cascade_depth"].as_u64()), (Some(1), Some(1)));

    let loner = host.api.post_json("/experiments/backend/preview", &json!({"targets": [full("loner")], "fault_type": "kill", "duration": 10})).await;
    assert_eq!((loner.body["blast_radius"].as_u64(), names(&loner.body["dependencies"]).len()), (Some(0), 0));

    assert_eq!(system.running_count(), 4, "a preview injects nothing");
    let bad = host.api.post_json("/experiments/backend/preview", &json!({"targets": [full("db")], "fault_type": "kill", "duration": 0})).await;
    assert_eq!((bad.status, bad.code()), (422, "duration_out_of_range"), "a preview checks what a start checks");
}

#[tokio::test]
async fn the_start_response_carries_the_dependency_information() {
    let system = DemoSystem::three_tier();
    let full = |n: &str| format!("{}-{n}", system.id);
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let started = host
        .api
        .post_json("/experiments/backend/start", &json!({"targets": [full("db")], "fault_type": "cpu_stress", "intensity": 10,
            "phases": {"baseline_seconds": 0.3, "injecting_seconds": 0.5, "recovering_seconds": 0.3}}))
        .await;
    assert_eq!(started.status, 201, "{started:?}");
    assert_eq!(names(&started.body["targets"]), [full("db")]);
    assert!(names(&started.body["dependencies"]).is_empty());
    assert_eq!(names(&started.body["dependents"]), [full("api"), full("web")]);
    assert_eq!((started.body["blast_radius"].as_u64(), started.body["cascade_depth"].as_u64()), (Some(2), Some(2)));
    let id = started.body["id"].as_str().unwrap();
    let status = host.api.wait_status("backend", id, 30, |s| s["state"] != "running").await;
    assert_eq!(status["impact"]["blast_radius"], 2, "{status}");
    assert!(system.helpers_left().is_empty());
}
