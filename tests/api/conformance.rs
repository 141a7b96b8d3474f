//! The served OpenAPI document is exact: schemathesis (`--checks all`) runs
//! every phase (examples, coverage, fuzzing, stateful) against a live host
//! and finds nothing the document does not say.
//!
//! The host serves over HTTP on a free port with its own data directory:
//! the real router, store, engine and plugins, with the scripted backend
//! platform in place of Docker. No Docker engine is reachable from it, so
//! no fuzzed start can touch a container (another test's, or anyone's),
//! and a backend start that passes every check really starts: the stateful
//! phase follows the document's links from a start to its status, metrics
//! and stop.
//!
//! The fuzzer holds an admin key. It may create keys, revoke the ones it
//! created, load random bytes as plugins, start and stop experiments. The
//! emergency stop gets a run of its own after the rest, so that an engaged
//! stop cannot turn every later start into a 409; after each run the key is
//! checked to still work, so a run cannot pass on 401s alone.
//!
//! Needs schemathesis (`make test-tools` installs the pinned version).
//! Alone: `cargo test -p faultline-tests --test conformance -- --nocapture`;
//! `SCHEMATHESIS_SEED=<n>` replays a run; `SCHEMATHESIS_ARGS` adds options
//! (say, `--report har --report-dir /tmp/st`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use faultline_tests::{InProcessHost, Options};

/// Test cases per operation in the fuzzing and stateful phases.
const MAX_EXAMPLES: &str = "40";
/// How long one run may take before it counts as hung.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);

fn config_file() -> PathBuf {
    faultline_tests::paths::workspace_root().join("tests/api/schemathesis.toml")
}

/// Runs schemathesis against the host's document; its output, and whether it passed.
async fn schemathesis(host: &InProcessHost, workdir: &Path, filter: &[&str]) -> (bool, String) {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let key = host.api.key.clone().expect("the host's admin key");
    let mut cmd = tokio::process::Command::new(&python);
    cmd.args(["-m", "schemathesis.cli", "--config-file"])
        .arg(config_file())
        .arg("run")
        .arg(format!("{}/openapi.json", host.api.base))
        .args(["--checks", "all", "--phases", "examples,coverage,fuzzing,stateful"])
        .args(["--max-examples", MAX_EXAMPLES, "--request-timeout", "30", "--no-color"])
        .args(["--generation-database", "none"])
        .args(["-H", &format!("x-api-key: {key}")])
        .args(filter)
        // Its caches and reports stay out of the source tree.
        .current_dir(workdir)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if let Ok(seed) = std::env::var("SCHEMATHESIS_SEED") {
        cmd.args(["--seed", &seed]);
    }
    // More options for a run by hand, such as `--report har --report-dir /tmp/st`.
    if let Ok(extra) = std::env::var("SCHEMATHESIS_ARGS") {
        cmd.args(extra.split_whitespace());
    }
    let started = Instant::now();
    let output = tokio::time::timeout(RUN_TIMEOUT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("schemathesis ran longer than {RUN_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("running `{python} -m schemathesis.cli` (make test-tools installs it): {e}"));
    let text = format!(
        "{}{}\n(schemathesis {:?} took {:.0?})",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        filter,
        started.elapsed()
    );
    (output.status.success(), text)
}

/// The run's key still works: the run did not pass on refusals alone.
async fn key_still_works(host: &InProcessHost) {
    let reply = host.api.get("/fault-types").await;
    assert_eq!(reply.status, 200, "the run's own key no longer works: {}", reply.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_the_document_does_not_say() {
    let dir = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    // The built-in faults; the backend is the scripted platform, the
    // frontend the real one, and no Android platform is served (there is no
    // adb server or device behind this host).
    let host = InProcessHost::start(dir.path(), Options { plugins: vec![], ..Options::default() }).await;

    const ANDROID: &str = "^/experiments/android/";
    let runs: [&[&str]; 3] = [
        &["--exclude-path", "/emergency-stop", "--exclude-path-regex", ANDROID],
        &["--include-path", "/emergency-stop"],
        // Without an Android platform a start that passes every check is a
        // 503 platform_unavailable by design: every other check still holds.
        &["--include-path-regex", ANDROID, "--exclude-checks", "not_a_server_error"],
    ];
    for filter in runs {
        let (passed, output) = schemathesis(&host, workdir.path(), filter).await;
        println!("{output}");
        assert!(passed, "schemathesis found failures (output above)");
        key_still_works(&host).await;
    }
    assert!(
        host.state.store.count_experiments_by_state().await.unwrap().iter().map(|(_, n)| n).sum::<i64>() > 0,
        "no start succeeded: the stateful phase had nothing to follow"
    );
}
