//! Frontend experiments through the API of the real `faultline` binary, in
//! front of the real test web app: what the proxy does is measured from
//! outside (time taken, statuses, what reached the app), and what is left
//! afterwards is checked by connecting to where the listener was.
//! Browsers come in `e2e.rs`; here the traffic is plain HTTP.

use std::time::{Duration, Instant};

use faultline_tests::{HostProcess, WebApp};
use serde_json::{Value, json};

fn phases(baseline: f64, injecting: f64, recovering: f64) -> Value {
    json!({"baseline_seconds": baseline, "injecting_seconds": injecting, "recovering_seconds": recovering})
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(30)).build().unwrap()
}

async fn timed(client: &reqwest::Client, url: &str) -> (u16, Duration) {
    let started = Instant::now();
    match client.get(url).send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            let _ = r.bytes().await;
            (status, started.elapsed())
        }
        Err(_) => (0, started.elapsed()),
    }
}

/// The test app and a host in a data directory of its own.
async fn app_and_host() -> (WebApp, HostProcess, tempfile::TempDir) {
    let app = WebApp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    (app, host, dir)
}

/// The id and listener address of a start answer.
fn begun(started: &Value) -> (String, String) {
    (started["id"].as_str().unwrap().to_string(), listener(started))
}

/// The listener's address from a start or status answer.
fn listener(body: &Value) -> String {
    body["resources"][0]["address"].as_str().unwrap_or_else(|| panic!("no listener in {body}")).to_string()
}

async fn refuses_connections(address: &str) -> bool {
    let hostport = address.trim_start_matches("http://");
    tokio::net::TcpStream::connect(hostport).await.is_err()
}

#[tokio::test]
async fn an_http_latency_experiment_delays_through_the_listener_only_while_injecting_and_leaves_nothing() {
    let (app, host, _dir) = app_and_host().await;
    let started = host.api.start("frontend", &json!({"fault_type": "http_latency", "targets": [app.origin()], "intensity": 1500, "ramp": false,
                    "phases": phases(3.0, 4.0, 3.0)})).await;
    let (id, proxy) = begun(&started);
    assert_eq!(started["resources"][0]["kind"], "proxy_listener");
    assert_eq!(started["resources"][0]["target"], app.origin());
    let client = client();

    let (status, clean) = timed(&client, &format!("{proxy}/api/items")).await;
    assert_eq!(status, 200);
    assert!(clean < Duration::from_millis(1000), "baseline through the proxy took {clean:?}");
    host.api.wait_status("frontend", &id, 30, |s| s["phase"] == "injecting" && s["targets"][0]["injection"] == "active").await;
    let (status, slow) = timed(&client, &format!("{proxy}/api/items")).await;
    assert_eq!(status, 200);
    assert!(slow >= Duration::from_millis(1500), "a 1500 ms delay took {slow:?}");
    let (_, direct) = timed(&client, &app.url("/api/items")).await;
    assert!(direct < Duration::from_millis(1000), "the app itself is untouched: {direct:?}");

    let ended = host.api.wait_status("frontend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    assert_eq!(ended["resources"][0]["state"], "released", "{ended}");
    assert!(refuses_connections(&proxy).await, "the listener is closed");
    assert!(ended["open_injections"].as_array().unwrap().is_empty());
    let metrics = host.api.get(&format!("/experiments/frontend/metrics?id={id}")).await.body;
    let web = &metrics["web"]["phases"];
    let p50 = |phase: &str| web[phase]["traffic"]["latency_ms"]["p50"].as_f64().unwrap_or_else(|| panic!("no {phase} latency in {metrics}"));
    assert!(p50("injecting") >= 1500.0 && p50("baseline") < 1000.0, "latency by phase: {web}");
    assert!(metrics["score"].as_f64().unwrap() < 95.0, "the score reflects the slowdown: {metrics}");
}

#[tokio::test]
async fn http_errors_show_in_the_metrics_and_the_score_and_only_on_the_route() {
    let (app, host, _dir) = app_and_host().await;
    let route = app.url("/api/items");
    let started = host.api.start("frontend", &json!({"fault_type": "http_error", "targets": [route], "intensity": 100, "ramp": false,
                    "params": {"status": 502}, "phases": phases(2.0, 4.0, 2.0)})).await;
    let (id, proxy) = begun(&started);
    host.api.wait_status("frontend", &id, 30, |s| s["targets"][0]["injection"] == "active").await;
    let client = client();
    let hits_before = app.hits("/api/items");
    assert_eq!(timed(&client, &format!("{proxy}/api/items")).await.0, 502);
    assert_eq!(app.hits("/api/items"), hits_before, "an answered request never reaches the app");
    assert_eq!(timed(&client, &format!("{proxy}/")).await.0, 200, "other routes pass");
    let ended = host.api.wait_status("frontend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    let metrics = host.api.get(&format!("/experiments/frontend/metrics?id={id}")).await.body;
    let traffic = |phase: &str| metrics["web"]["phases"][phase]["traffic"].clone();
    assert_eq!(traffic("baseline")["errors"], 0, "{metrics}");
    assert!(traffic("injecting")["error_rate"].as_f64().unwrap() > 0.5, "{metrics}");
    let score = metrics["score"].as_f64().unwrap();
    assert!(score < 70.0, "every request of the route failing while injecting scores {score}");
}

#[tokio::test]
async fn the_app_going_away_mid_experiment_ends_it_cleanly() {
    let (mut app, host, _dir) = app_and_host().await;
    let started = host.api.start("frontend", &json!({"fault_type": "http_latency", "targets": [app.origin()], "intensity": 200, "phases": phases(1.0, 4.0, 2.0)})).await;
    let (id, proxy) = begun(&started);
    host.api.wait_status("frontend", &id, 30, |s| s["phase"] == "injecting").await;
    app.stop().await;
    let (status, took) = timed(&client(), &format!("{proxy}/api/items")).await;
    assert_eq!(status, 502, "a gone app is a bad gateway");
    assert!(took < Duration::from_secs(10));
    let begun = Instant::now();
    let ended = host.api.wait_status("frontend", &id, 60, |s| s["state"] != "running").await;
    assert!(begun.elapsed() < Duration::from_secs(30), "it ended on time");
    assert!(["completed", "failed"].contains(&ended["state"].as_str().unwrap()), "{ended}");
    assert_eq!(ended["resources"][0]["state"], "released", "{ended}");
    assert!(ended["open_injections"].as_array().unwrap().is_empty(), "{ended}");
    assert!(refuses_connections(&proxy).await);
    let metrics = host.api.get(&format!("/experiments/frontend/metrics?id={id}")).await.body;
    let injecting = &metrics["phases"]["injecting"]["health"]["min"];
    assert!(injecting.as_f64().unwrap() < 0.5, "health saw the app go: {metrics}");
}

#[tokio::test]
async fn a_stop_and_a_host_crash_release_the_listener() {
    let (app, host, dir) = app_and_host().await;
    let request = json!({"fault_type": "http_abort", "targets": [app.origin()], "intensity": 100, "phases": phases(0.5, 600.0, 1.0)});
    let started = host.api.start("frontend", &request).await;
    let (id, proxy) = begun(&started);
    let stopped = host.api.stop("frontend", &id).await;
    assert_eq!(stopped.status, 200);
    assert_eq!(stopped.body["state"], "stopped");
    assert_eq!(stopped.body["resources"][0]["state"], "released", "{}", stopped.body);
    assert!(refuses_connections(&proxy).await);

    // A host killed mid-run: its listener dies with it, and the next start
    // closes the journal and the experiment.
    let started = host.api.start("frontend", &request).await;
    let (id, proxy) = begun(&started);
    host.api.wait_status("frontend", &id, 30, |s| s["phase"] == "injecting" || s["state"] != "running").await;
    let key = host.api.key.clone();
    host.kill9();
    assert!(refuses_connections(&proxy).await);
    let again = HostProcess::start(dir.path(), &[]);
    let api = again.api.with_key(key.as_deref());
    let status = api.get(&format!("/experiments/frontend/status?id={id}")).await.body;
    assert_eq!(status["state"], "failed", "{status}");
    assert_eq!(status["resources"][0]["state"], "released", "closed from the journal at restart: {status}");
    assert!(status["open_injections"].as_array().unwrap().is_empty(), "{status}");
}

#[tokio::test]
async fn bad_frontend_starts_are_refused_with_their_codes_and_nothing_opens() {
    let (app, host, _dir) = app_and_host().await;
    let start = |body: Value| {
        let api = host.api.clone();
        async move { api.post_json("/experiments/frontend/start", &body).await }
    };
    let base = |extra: Value| {
        let mut body = json!({"fault_type": "http_latency", "targets": [app.origin()], "duration_seconds": 5});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let refused = [
        (base(json!({"mode": "tunnel"})), 422, "invalid_field"),
        (base(json!({"routes": [{"path": "api"}]})), 422, "invalid_field"),
        (base(json!({"targets": ["https://127.0.0.1:1"]})), 422, "invalid_target"),
        (base(json!({"targets": ["ftp://127.0.0.1:1"]})), 422, "invalid_target"),
        (base(json!({"targets": ["http://127.0.0.1:1"]})), 422, "no_matching_target"),
        (base(json!({"intensity": 0})), 422, "intensity_out_of_range"),
        (base(json!({"fault_type": "cpu_stress"})), 422, "fault_not_on_platform"),
        (base(json!({"adb": true})), 422, "unknown_field"),
        (base(json!({"proxy_listen": {"http://127.0.0.1:9": "127.0.0.1:0"}})), 422, "invalid_target"),
    ];
    for (body, status, code) in refused {
        let reply = start(body.clone()).await;
        assert_eq!((reply.status, reply.code()), (status, code), "{body} → {reply:?}");
    }
    // An address in use is a conflict, and nothing else was opened.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_at = taken.local_addr().unwrap().to_string();
    let reply = start(base(json!({"proxy_listen": {app.origin(): taken_at}}))).await;
    assert_eq!((reply.status, reply.code()), (409, "resource_unavailable"), "{reply:?}");
    let backend_fields = start(base(json!({"apk": "x"}))).await;
    assert_eq!(backend_fields.code(), "unknown_field", "Android's fields are not the frontend's");
    let listed = host.api.get("/experiments/frontend/status?id=00000000-0000-0000-0000-000000000000").await;
    assert_eq!(listed.status, 404);
}

#[tokio::test]
async fn an_operator_chosen_address_is_where_the_proxy_listens() {
    let (app, host, _dir) = app_and_host().await;
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let started = host.api.start("frontend", &json!({"fault_type": "http_latency", "targets": [app.origin()], "duration_seconds": 3,
                    "proxy_listen": {app.origin(): free.to_string()}})).await;
    assert_eq!(listener(&started), format!("http://{free}"));
    assert_eq!(timed(&client(), &format!("http://{free}/")).await.0, 200);
    let id = started["id"].as_str().unwrap();
    host.api.wait_status("frontend", id, 30, |s| s["state"] != "running").await;
}

#[tokio::test]
async fn adaptive_latency_backs_off_on_what_the_proxy_sees() {
    let (app, host, _dir) = app_and_host().await;
    let started = host.api.start("frontend", &json!({"fault_type": "http_latency", "targets": [app.origin()], "intensity": 3000, "adaptive": true,
                    "tolerance": 0.2, "phases": phases(2.0, 8.0, 2.0)})).await;
    let id = started["id"].as_str().unwrap();
    let ended = host.api.wait_status("frontend", id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    let tolerated = ended["intensity"]["max_tolerated"].as_f64().unwrap_or_else(|| panic!("no max_tolerated in {ended}"));
    assert!(tolerated < 3000.0, "the health the proxy sees stopped the climb below the ceiling: {tolerated}");
    let metrics = host.api.get(&format!("/experiments/frontend/metrics?id={id}")).await.body;
    let levels: Vec<f64> = metrics["series"].as_array().unwrap().iter().filter_map(|s| s["intensity"].as_f64()).collect();
    assert!(levels.windows(2).any(|w| w[1] < w[0]), "the level went down at least once: {levels:?}");
}

#[tokio::test]
async fn a_shutdown_mid_run_rolls_back_and_closes_the_listener() {
    let (app, host, dir) = app_and_host().await;
    let request = json!({"fault_type": "http_latency", "targets": [app.origin()], "intensity": 300, "phases": phases(0.5, 600.0, 1.0)});
    let started = host.api.start("frontend", &request).await;
    let (id, proxy) = begun(&started);
    host.api.wait_status("frontend", &id, 30, |s| s["targets"][0]["injection"] == "active").await;
    let key = host.api.key.clone();
    assert!(host.terminate().success(), "SIGTERM ends the host cleanly");
    assert!(refuses_connections(&proxy).await);
    let again = HostProcess::start(dir.path(), &[]);
    let status = again.api.with_key(key.as_deref()).get(&format!("/experiments/frontend/status?id={id}")).await.body;
    assert_eq!(status["state"], "stopped", "{status}");
    assert_eq!(status["stop_reason"], "host shutdown");
    assert_eq!(status["resources"][0]["state"], "released", "{status}");
    assert_eq!(status["targets"][0]["injection"], "reverted", "{status}");
}

#[tokio::test]
async fn http_abort_cuts_connections_and_bandwidth_throttle_slows_bodies_and_both_revert_cleanly() {
    let (app, host, _dir) = app_and_host().await;
    let client = client();

    let abort = host
        .api
        .start("frontend", &json!({"fault_type": "http_abort", "targets": [app.url("/api/items")], "intensity": 100, "ramp": false,
                                    "phases": phases(0.5, 3.0, 0.5)}))
        .await;
    let (id, proxy) = begun(&abort);
    host.api.wait_status("frontend", &id, 30, |s| s["targets"][0]["injection"] == "active").await;
    let cut = client.get(format!("{proxy}/api/items")).send().await;
    assert!(cut.is_err(), "the connection is cut without an answer: {cut:?}");
    assert_eq!(timed(&client, &format!("{proxy}/")).await.0, 200, "other routes pass");
    let ended = host.api.wait_status("frontend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["targets"][0]["injection"], "reverted", "{ended}");

    // 256 kbit/s is 32 KiB/s: the app's 40 KiB image takes over a second.
    let size = client.get(app.url("/hero.svg")).send().await.unwrap().bytes().await.unwrap().len();
    assert!(size > 32 * 1024, "the image is {size} bytes");
    let throttle = host
        .api
        .start("frontend", &json!({"fault_type": "bandwidth_throttle", "targets": [app.origin()], "params": {"rate_kbit": 256},
                                    "phases": phases(0.5, 6.0, 0.5)}))
        .await;
    let (id, proxy) = begun(&throttle);
    host.api.wait_status("frontend", &id, 30, |s| s["targets"][0]["injection"] == "active").await;
    let started = Instant::now();
    let body = client.get(format!("{proxy}/hero.svg")).send().await.unwrap().bytes().await.unwrap();
    let took = started.elapsed();
    assert_eq!(body.len(), size, "the whole body arrives");
    let floor = Duration::from_secs_f64((size - 32 * 1024) as f64 / (32.0 * 1024.0));
    assert!(took >= floor, "{size} bytes at 32 KiB/s took {took:?}");
    let ended = host.api.wait_status("frontend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    assert!(refuses_connections(&proxy).await);
}

#[tokio::test]
async fn an_app_that_restarts_mid_experiment_is_served_again_through_the_listener() {
    let (mut app, host, _dir) = app_and_host().await;
    let started = host.api.start("frontend", &json!({"fault_type": "http_latency", "targets": [app.origin()], "intensity": 100,
                                                      "phases": phases(1.0, 6.0, 3.0)})).await;
    let (id, proxy) = begun(&started);
    host.api.wait_status("frontend", &id, 30, |s| s["phase"] == "injecting").await;
    app.stop().await;
    assert_eq!(timed(&client(), &format!("{proxy}/api/items")).await.0, 502);
    app.restart().await;
    // Back on its port: the listener reaches it again, with the fault still applied.
    let deadline = Instant::now() + Duration::from_secs(10);
    while timed(&client(), &format!("{proxy}/api/items")).await.0 != 200 {
        assert!(Instant::now() < deadline, "the restarted app is not reached through the listener");
    }
    let ended = host.api.wait_status("frontend", &id, 60, |s| s["state"] != "running").await;
    assert_eq!(ended["state"], "completed", "{ended}");
    assert_eq!(ended["resources"][0]["state"], "released", "{ended}");
    let metrics = host.api.get(&format!("/experiments/frontend/metrics?id={id}")).await.body;
    assert_eq!(metrics["phases"]["recovering"]["health"]["max"], 1.0, "health came back: {metrics}");
    assert!(refuses_connections(&proxy).await);
}
