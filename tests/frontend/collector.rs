//! The browser side's routes on the real binary: the scripts, the page's
//! context and rules, and the vitals reports with every refusal a page (or
//! anyone holding its public key) can provoke.

use std::time::Duration;

use faultline_tests::{Api, HostProcess, WebApp};
use serde_json::{Value, json};

struct Setup {
    host: HostProcess,
    app: WebApp,
    /// The API with the collector key.
    page: Api,
    key: String,
    id: String,
    proxy: String,
    _dir: tempfile::TempDir,
}

/// A running service-worker experiment on the app, and a collector key.
async fn setup() -> Setup {
    let app = WebApp::start().await;
    let dir = tempfile::tempdir().unwrap();
    let host = HostProcess::start(dir.path(), &[]);
    let key = host.api.create_key("pages", "collector").await;
    let started = host.api.start("frontend", &json!({"fault_type": "http_error", "targets": [format!("{}/api/*", app.origin())], "intensity": 100,
                    "ramp": false, "mode": "service_worker",
                    "phases": {"baseline_seconds": 0.5, "injecting_seconds": 120, "recovering_seconds": 1}})).await;
    let id = started["id"].as_str().unwrap().to_string();
    let proxy = started["resources"][0]["address"].as_str().unwrap().to_string();
    host.api.wait_status("frontend", &id, 30, |s| s["targets"][0]["injection"] == "active").await;
    let page = host.api.with_key(Some(&key));
    Setup { host, app, page, key, id, proxy, _dir: dir }
}

fn report(s: &Setup, metrics: Value) -> Value {
    json!({"apiKey": s.key, "experiment": s.id, "phase": "injecting", "page": s.app.url("/shop"), "metrics": metrics})
}

fn lcp(value: f64, id: &str) -> Value {
    json!({"name": "LCP", "value": value, "rating": if value <= 2500.0 { "good" } else if value <= 4000.0 { "needs-improvement" } else { "poor" }, "id": id})
}

async fn send(api: &Api, body: &Value) -> faultline_tests::Reply {
    // As sendBeacon sends it: a string body, text/plain.
    api.send_raw("POST", "/collector/vitals", "text/plain;charset=UTF-8", body.to_string().into_bytes()).await
}

#[tokio::test]
async fn a_page_gets_its_scripts_context_and_rules_and_a_collector_key_nothing_else() {
    let s = setup().await;
    let anonymous = s.host.api.with_key(None);
    let script = anonymous.get("/collector.js").await;
    assert_eq!(script.status, 200, "the collector needs no key");
    assert!(script.text.contains("Faultline"));
    let worker = anonymous.get(&format!("/faultline-sw.js?key={}", s.key)).await;
    assert!(worker.text.starts_with(&format!("self.FAULTLINE_CONFIG = {{\"key\":\"{}\",\"rules\":\"{}/collector/rules\"}};", s.key, s.host.api.base)), "{}", worker.text);
    assert_eq!(anonymous.get("/faultline-sw.js?key=a%22b").await.code(), "invalid_query");

    let context = s.page.get(&format!("/collector/context?page={}", s.app.url("/any/page?x=1"))).await;
    assert_eq!(context.body["experiment"], s.id.as_str(), "{context:?}");
    assert_eq!(context.body["mode"], "service_worker");
    assert_eq!(context.body["phase"], "injecting");
    let through_proxy = s.page.get(&format!("/collector/context?page={}/", s.proxy)).await;
    assert_eq!(through_proxy.body["experiment"], s.id.as_str(), "a page loaded through the listener is in it too");
    let elsewhere = s.page.get("/collector/context?page=http://127.0.0.1:1/").await;
    assert_eq!(elsewhere.body["experiment"], Value::Null);

    let feed = s.page.get(&format!("/collector/rules?site={}", s.app.origin())).await;
    assert_eq!(feed.status, 200);
    let rule = &feed.body["rules"][0];
    assert_eq!(rule["action"], json!({"kind": "status", "status": 503}), "{}", feed.body);
    assert_eq!(rule["path"], "/api/*");
    assert!(rule["expires_at"].as_i64().unwrap() > 0);
    assert_eq!(anonymous.get(&format!("/collector/rules?site={}", s.app.origin())).await.status, 401);

    for path in ["/fault-types".to_string(), format!("/experiments/frontend/status?id={}", s.id), "/api-keys".into(), "/metrics".into()] {
        assert_eq!(s.page.get(&path).await.status, 403, "{path} with a collector key");
    }
    assert_eq!(s.page.stop("frontend", &s.id).await.status, 403);

    // A page on another origin: the preflight is answered, the answer is open to it.
    let preflight = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, format!("{}/collector/context", s.host.api.base))
        .header("origin", "http://127.0.0.1:1")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "x-api-key")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    let not_browser_side = reqwest::Client::new().get(format!("{}/health", s.host.api.base)).send().await.unwrap();
    assert!(!not_browser_side.headers().contains_key("access-control-allow-origin"), "the rest of the API is not open to pages");
}

#[tokio::test]
async fn reports_are_checked_field_by_field_and_recorded_once_per_page_load() {
    let s = setup().await;
    let anonymous = s.host.api.with_key(None);
    let ok = send(&anonymous, &report(&s, json!([lcp(1200.0, "v5-1"), {"name": "CLS", "value": 0.3, "id": "v5-1"}]))).await;
    assert_eq!((ok.status, ok.body["accepted"].as_u64()), (202, Some(2)), "{ok:?}");
    // The same page load reports again as CLS grows: one row, the latest value.
    let again = send(&anonymous, &report(&s, json!([{"name": "CLS", "value": 0.05, "id": "v5-1"}]))).await;
    assert_eq!(again.status, 202);
    let metrics = s.host.api.get(&format!("/experiments/frontend/metrics?id={}", s.id)).await.body;
    let vitals = &metrics["web"]["phases"]["injecting"]["vitals"];
    assert_eq!(vitals["CLS"], json!({"p75": 0.05, "rating": "good", "count": 1}), "{metrics}");
    assert_eq!(vitals["LCP"]["rating"], "good");

    // The key in the header works as well as in the body.
    let mut headed = report(&s, json!([lcp(100.0, "v5-2")]));
    headed.as_object_mut().unwrap().remove("apiKey");
    assert_eq!(send(&s.page, &headed).await.status, 202);

    let refusals: Vec<(Value, u16, &str)> = vec![
        (report(&s, json!([{"name": "INP", "value": 900, "rating": "good", "id": "x"}])), 422, "invalid_report"),
        (report(&s, json!([{"name": "FID", "value": 9, "id": "x"}])), 422, "invalid_report"),
        (report(&s, json!([{"name": "LCP", "value": -1, "id": "x"}])), 422, "invalid_report"),
        (report(&s, json!([{"name": "CLS", "value": 1e9, "id": "x"}])), 422, "invalid_report"),
        (report(&s, json!([{"name": "LCP", "value": 1, "id": ""}])), 422, "invalid_report"),
        (report(&s, json!([])), 422, "invalid_report"),
        (report(&s, json!((0..21).map(|i| lcp(1.0, &format!("v{i}"))).collect::<Vec<_>>())), 422, "invalid_report"),
        (report(&s, json!([{"name": "LCP", "value": "fast", "id": "x"}])), 422, "invalid_field"),
        (report(&s, json!([{"name": "LCP", "value": 1, "id": "x", "extra": 1}])), 422, "unknown_field"),
        (json!({"apiKey": s.key, "experiment": s.id, "page": "not a url", "metrics": [lcp(1.0, "x")]}), 422, "invalid_report"),
        (json!({"apiKey": s.key, "experiment": s.id, "page": "http://127.0.0.1:1/", "metrics": [lcp(1.0, "x")]}), 422, "page_not_in_experiment"),
        (json!({"apiKey": s.key, "experiment": s.id, "phase": "lunch", "page": s.app.url("/"), "metrics": [lcp(1.0, "x")]}), 422, "invalid_report"),
        (json!({"apiKey": s.key, "experiment": null, "page": s.app.url("/"), "metrics": [lcp(1.0, "x")]}), 422, "no_experiment"),
        (json!({"apiKey": s.key, "experiment": "00000000-0000-0000-0000-000000000000", "page": s.app.url("/"), "metrics": [lcp(1.0, "x")]}), 404, "experiment_not_found"),
        (json!({"experiment": s.id, "page": s.app.url("/"), "metrics": [lcp(1.0, "x")]}), 401, "missing_api_key"),
        (json!({"apiKey": "flk_0000000000000000000000000000000000000000", "experiment": s.id, "page": s.app.url("/"), "metrics": [lcp(1.0, "x")]}), 401, "unknown_api_key"),
        (json!({"apiKey": "weak", "experiment": s.id, "page": s.app.url("/"), "metrics": [lcp(1.0, "x")]}), 401, "malformed_api_key"),
    ];
    for (body, status, code) in refusals {
        let reply = send(&anonymous, &body).await;
        assert_eq!((reply.status, reply.code()), (status, code), "{body} → {reply:?}");
        assert_eq!(reply.body["status"], status, "problem+json: {reply:?}");
    }
    let malformed = anonymous.send_raw("POST", "/collector/vitals", "text/plain", b"{not json".to_vec()).await;
    assert_eq!((malformed.status, malformed.code()), (400, "malformed_json"));
    let huge = anonymous.send_raw("POST", "/collector/vitals", "text/plain", vec![b' '; 64 << 10]).await;
    assert_eq!((huge.status, huge.code()), (413, "payload_too_large"));
    // Nothing refused was recorded.
    let metrics = s.host.api.get(&format!("/experiments/frontend/metrics?id={}", s.id)).await.body;
    assert_eq!(metrics["web"]["phases"]["injecting"]["vitals"]["LCP"]["count"], 2, "{metrics}");
}

#[tokio::test]
async fn a_flood_of_reports_is_limited_with_retry_after() {
    let s = setup().await;
    let anonymous = s.host.api.with_key(None);
    // All at once, as a flood comes: well past the burst of 30 from one address.
    let flood = (0..120).map(|i| {
        let (api, body) = (anonymous.clone(), report(&s, json!([lcp(100.0, &format!("v5-{i}"))])));
        async move { send(&api, &body).await }
    });
    let replies = futures_util::future::join_all(flood).await;
    assert!(replies.iter().all(|r| r.status == 202 || r.status == 429), "{replies:?}");
    let limited = replies.iter().find(|r| r.status == 429).expect("120 reports at once from one address are limited");
    assert_eq!(limited.code(), "rate_limited");
    let wait: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=5).contains(&wait));
    // Limited before the key is checked: a flood of bad keys is limited too.
    let mut bad = report(&s, json!([lcp(1.0, "x")]));
    bad["apiKey"] = json!("flk_0000000000000000000000000000000000000000");
    assert_eq!(send(&anonymous, &bad).await.code(), "rate_limited");
    // The bucket refills: after a while a report goes through again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while send(&anonymous, &report(&s, json!([lcp(100.0, "v5-late")]))).await.status != 202 {
        assert!(std::time::Instant::now() < deadline, "the limit never lifted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
