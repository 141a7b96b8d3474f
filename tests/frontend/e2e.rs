//! The frontend end to end, in a real headless Chromium: the test web app
//! loaded through the fault proxy and through the service worker (both
//! ways of installing it), with the collector reporting its Web Vitals to
//! the real `faultline` binary. A real click gives INP; leaving the page
//! sends the beacon, as it does for users.

use std::time::Duration;

use faultline_tests::{Browser, HostProcess, WebApp};
use serde_json::{Value, json};

/// Chromium and the timings it measures share two cores: one test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const LOAD: Duration = Duration::from_secs(30);

fn phases(baseline: f64, injecting: f64, recovering: f64) -> Value {
    json!({"baseline_seconds": baseline, "injecting_seconds": injecting, "recovering_seconds": recovering})
}

/// A host, the app, and a collector key (whose role can do nothing else).
async fn setup() -> (HostProcess, WebApp, String, tempfile::TempDir) {
    let app = WebApp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let key = host.api.create_key("shop web pages", "collector").await;
    let as_page = host.api.with_key(Some(&key));
    assert_eq!(as_page.get("/fault-types").await.status, 403, "a collector key reads nothing");
    let start = json!({"fault_type": "http_latency", "targets": [app.origin()], "duration_seconds": 5});
    assert_eq!(as_page.post_json("/experiments/frontend/start", &start).await.status, 403);
    (host, app, key, dir)
}

/// The app's URL with the collector configured (and a service worker: `app`, `proxy`).
fn page_url(base: &str, host: &HostProcess, key: &str, worker: Option<&str>) -> String {
    let sw = worker.map(|w| format!("&sw={w}")).unwrap_or_default();
    format!("{base}/?endpoint={}&key={key}{sw}", host.api.base)
}

/// One visit as a user makes it: load, wait for the app, click the
/// button, leave (which sends the vitals). Returns how long /api/items took.
async fn visit(page: &faultline_tests::Page, url: &str) -> f64 {
    page.goto(url).await.expect("the page loads");
    page.wait_for("(window.appReady || window.appError) && window.faultlineReady", LOAD).await.expect("the app is ready");
    page.click("#work").await.expect("a real click");
    page.wait_for("document.getElementById('work-output').textContent !== ''", LOAD).await.unwrap();
    // The collector sees the interaction before the page goes.
    page.wait_for("Faultline.vitals().INP !== null", LOAD).await.expect("INP measured");
    let api_ms: f64 = page.eval("window.apiMs").await.unwrap();
    page.goto("about:blank").await.unwrap();
    api_ms
}

async fn vitals_count(host: &HostProcess, id: &str, phase: &str) -> u64 {
    let metrics = host.api.get(&format!("/experiments/frontend/metrics?id={id}")).await.body;
    let vitals = &metrics["web"]["phases"][phase]["vitals"];
    ["LCP", "CLS", "INP"].iter().map(|n| vitals[n]["count"].as_u64().unwrap_or(0)).min().unwrap()
}

/// Waits until the phase's three vitals have arrived from `loads` page loads.
async fn wait_vitals(host: &HostProcess, id: &str, phase: &str, loads: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while vitals_count(host, id, phase).await < loads {
        assert!(std::time::Instant::now() < deadline, "the {phase} vitals did not arrive");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn p75(metrics: &Value, phase: &str, vital: &str) -> f64 {
    metrics["web"]["phases"][phase]["vitals"][vital]["p75"].as_f64().unwrap_or_else(|| panic!("no {phase} {vital}: {metrics}"))
}

#[tokio::test]
async fn through_the_proxy_latency_worsens_lcp_the_vitals_arrive_and_the_app_is_clean_after() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (host, app, key, _dir) = setup().await;
    let started = host.api.start("frontend", &json!({"fault_type": "http_latency", "targets": [app.origin()], "intensity": 1000, "ramp": false,
                    "mode": "proxy", "phases": phases(10.0, 16.0, 4.0)})).await;
    let id = started["id"].as_str().unwrap().to_string();
    let proxy = started["resources"][0]["address"].as_str().unwrap().to_string();
    let browser = Browser::launch().await.expect("Chromium starts");
    let page = browser.open("about:blank").await.unwrap();

    let fast = visit(&page, &page_url(&proxy, &host, &key, None)).await;
    wait_vitals(&host, &id, "baseline", 1).await;
    host.api.wait_status("frontend", &id, 30, |s| s["phase"] == "injecting" && s["targets"][0]["injection"] == "active").await;
    let slow = visit(&page, &page_url(&proxy, &host, &key, None)).await;
    assert!(slow >= 1000.0 && fast < 1000.0, "/api/items took {fast} ms before, {slow} ms under the fault");
    wait_vitals(&host, &id, "injecting", 1).await;

    let ended = host.api.wait_status("frontend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    let metrics = host.api.get(&format!("/experiments/frontend/metrics?id={id}")).await.body;
    let (before, under) = (p75(&metrics, "baseline", "LCP"), p75(&metrics, "injecting", "LCP"));
    assert!(under >= before + 2000.0, "LCP p75 {before} ms in baseline, {under} ms with 1 s on every request");
    for vital in ["CLS", "INP"] {
        let rating = &metrics["web"]["phases"]["baseline"]["vitals"][vital]["rating"];
        assert!(["good", "needs-improvement", "poor"].contains(&rating.as_str().unwrap()), "{metrics}");
    }
    assert!(p75(&metrics, "baseline", "INP") >= 100.0, "the click works ~150 ms: {metrics}");
    let score = metrics["score"].as_f64().unwrap();
    assert!(score < 90.0, "the score reflects the slowdown: {score}");

    // Rolled back: the listener is gone, and the app is served clean.
    assert_eq!(ended["resources"][0]["state"], "released");
    assert!(page.goto(&format!("{proxy}/")).await.is_err(), "nothing listens where the proxy was");
    let direct = visit(&page, &page_url(&app.origin(), &host, &key, None)).await;
    assert!(direct < 1000.0, "the app directly: /api/items took {direct} ms");
}

/// The worker controls a page from its second load on: the first load
/// registers it, the next one is its.
async fn controlled(page: &faultline_tests::Page, url: &str) {
    page.goto(url).await.unwrap();
    page.wait_for("window.faultlineReady && (window.appReady || window.appError)", LOAD).await.expect("the first load");
    let active: bool = page.eval("navigator.serviceWorker.ready.then(r => !!r.active)").await.unwrap();
    assert!(active, "the worker is active");
    page.goto(url).await.unwrap();
    page.wait_for("navigator.serviceWorker.controller !== null && (window.appReady || window.appError)", LOAD)
        .await
        .expect("the service worker controls the page");
}

async fn service_worker_experiment(worker: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let (host, app, key, _dir) = setup().await;
    let started = host.api.start("frontend", &json!({"fault_type": "http_latency", "targets": [format!("{}/api/*", app.origin())], "intensity": 1200,
                    "ramp": false, "mode": "service_worker", "phases": phases(8.0, 14.0, 4.0)})).await;
    let id = started["id"].as_str().unwrap().to_string();
    let base = match worker {
        "app" => app.origin(),
        _ => started["resources"][0]["address"].as_str().unwrap().to_string(),
    };
    let url = page_url(&base, &host, &key, Some(worker));
    let browser = Browser::launch().await.expect("Chromium starts");
    let page = browser.open("about:blank").await.unwrap();
    controlled(&page, &url).await;
    let fast = visit(&page, &url).await;
    host.api.wait_status("frontend", &id, 30, |s| s["phase"] == "injecting" && s["targets"][0]["injection"] == "active").await;
    // The same worker, no new registration: it follows the rules live
    // (reading them again at most a second after they change).
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    let mut slow = visit(&page, &url).await;
    while slow < 1200.0 && std::time::Instant::now() < deadline {
        slow = visit(&page, &url).await;
    }
    assert!(fast < 1000.0 && slow >= 1200.0, "/api/items took {fast} ms before, {slow} ms under the worker's delay");
    wait_vitals(&host, &id, "injecting", 1).await;
    let ended = host.api.wait_status("frontend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    let metrics = host.api.get(&format!("/experiments/frontend/metrics?id={id}")).await.body;
    // The image waits for /api/items, held 1.2 s: LCP moves by most of that.
    assert!(p75(&metrics, "injecting", "LCP") >= p75(&metrics, "baseline", "LCP") + 800.0, "{metrics}");
    // The proxy passed the traffic untouched: the worker delayed it.
    if worker == "proxy" {
        let proxied = metrics["web"]["phases"]["injecting"]["traffic"]["latency_ms"]["p99"].as_f64().unwrap();
        assert!(proxied < 1000.0, "the proxy itself added nothing: {metrics}");
    }
    // After the end the worker holds no rule any more.
    if worker == "app" {
        let after = visit(&page, &url).await;
        assert!(after < 1000.0, "after the experiment /api/items took {after} ms");
    }
}

#[tokio::test]
async fn a_one_line_worker_served_by_the_app_applies_the_rules_live() {
    service_worker_experiment("app").await;
}

#[tokio::test]
async fn the_worker_served_by_the_proxy_on_the_apps_origin_applies_the_rules() {
    service_worker_experiment("proxy").await;
}

/// The host dies while a page's worker holds a rule: the worker goes on
/// applying what it last knew, and drops it at the rule's own expiry.
#[tokio::test]
async fn a_rule_held_by_a_worker_ends_at_its_time_to_live_when_the_host_is_gone() {
    let _one = ONE_AT_A_TIME.lock().await;
    let app = WebApp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &["--ttl-margin-seconds", "2"]);
    let key = host.api.create_key("pages", "collector").await;
    let started = host.api.start("frontend", &json!({"fault_type": "http_latency", "targets": [format!("{}/api/*", app.origin())], "intensity": 1500,
                    "ramp": false, "mode": "service_worker", "phases": phases(1.0, 20.0, 1.0)})).await;
    let id = started["id"].as_str().unwrap().to_string();
    let url = page_url(&app.origin(), &host, &key, Some("app"));
    let browser = Browser::launch().await.expect("Chromium starts");
    let page = browser.open("about:blank").await.unwrap();
    controlled(&page, &url).await;
    host.api.wait_status("frontend", &id, 30, |s| s["targets"][0]["injection"] == "active").await;
    let feed = host.api.with_key(Some(&key)).get(&format!("/collector/rules?site={}", app.origin())).await.body;
    let expires_at = feed["rules"][0]["expires_at"].as_i64().unwrap_or_else(|| panic!("no rule in {feed}"));

    // The worker reads its rules again at most a second after they change.
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    while api_ms(&page, &url).await < 1500.0 {
        assert!(std::time::Instant::now() < deadline, "the worker never delayed while the host ran");
    }
    host.kill9();
    let held = api_ms(&page, &url).await;
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(now() < expires_at, "the test is too slow to see the rule held");
    assert!(held >= 1500.0, "with the host gone the worker keeps its last rule until it expires: {held} ms");
    tokio::time::sleep(Duration::from_millis((expires_at - now()).max(0) as u64 + 500)).await;
    let after = api_ms(&page, &url).await;
    assert!(after < 1000.0, "past its expiry the rule is dropped, host or no host: {after} ms");
}

/// A load that needs no host (the collector may be gone): how long
/// /api/items took under the page's worker.
async fn api_ms(page: &faultline_tests::Page, url: &str) -> f64 {
    page.goto(url).await.unwrap();
    page.wait_for("window.appReady || window.appError", LOAD).await.unwrap();
    page.eval::<f64>("window.apiMs").await.unwrap()
}
