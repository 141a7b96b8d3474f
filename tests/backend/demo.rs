//! `faultline serve --demo`: the service starts, a demo system is built
//! from the project's own demo service, one experiment runs through the
//! API with its phases and score printed, and the system is removed.

use std::time::Duration;

use faultline_tests::HostProcess;
use faultline_tests::docker::docker;

#[tokio::test]
async fn the_demo_runs_an_experiment_prints_its_phases_and_score_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--demo"]);
    let printed = host.wait_for_output("demo: done", Duration::from_secs(120));
    let expected = [
        "demo: building",
        "demo: experiment",
        "phase baseline",
        "phase injecting",
        "injected faultline-demo-api",
        "phase recovering",
        "reverted faultline-demo-api",
        "phase completed",
        "demo: completed — score",
        "demo: done",
    ];
    let mut at = 0;
    for wanted in expected {
        let found = printed[at..].iter().position(|l| l.contains(wanted));
        let found = found.unwrap_or_else(|| panic!("`{wanted}` missing or out of order in {printed:#?}"));
        at += found + 1;
    }
    let score_line = printed.iter().find(|l| l.starts_with("demo: completed")).unwrap();
    let score: f64 = score_line.split("score ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert!(score < 100.0, "the api was down while injecting: {score_line}");

    let left = docker(&["ps", "-a", "--filter", "label=faultline.demo", "--format", "{{.Names}}"]);
    assert!(left.is_empty(), "the demo system was removed: {left}");
    assert_eq!(host.api.get("/health").await.status, 200, "the service keeps running");

    // The demo's own key is revoked once it is done.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let keys = host.api.get("/api-keys").await.body;
        let demo = keys.as_array().unwrap().iter().find(|k| k["name"] == "demo").expect("the demo had a key").clone();
        if demo["revoked_at"].is_number() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the demo key was never revoked: {demo}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
