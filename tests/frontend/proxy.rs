//! The fault proxy on real sockets: a listener in front of a real origin,
//! driven by real clients (HTTP/1.1 with keep-alive, HTTP/2, a raw
//! upgrade). Effects are measured from outside: time taken, statuses,
//! bytes, which connections the origin saw.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use faultline::capabilities::proxy::{FaultProxy, Listener, ListenerSpec, Traffic};
use faultline_plugin_runtime::capability::proxy::{Proxy, RequestMatch, Rule, RuleAction};
use faultline_tests::origin::Origin;
use http_body_util::{BodyExt, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn listener(proxy: &FaultProxy, origin: &Origin, apply_rules: bool, ttl: Duration) -> Arc<Listener> {
    let spec = ListenerSpec {
        site: origin.url(),
        forward: false,
        loopback_alias: None,
        experiment: "exp-1".into(),
        bind: "127.0.0.1:0".parse().unwrap(),
        apply_rules,
        ttl,
        worker_script: Bytes::from_static(b"/* worker */"),
        traffic: Arc::new(Traffic::default()),
    };
    proxy.open(spec).await.expect("the listener opens")
}

fn rule(path: &str, methods: &[&str], action: RuleAction, probability: f64) -> Rule {
    let methods = methods.iter().map(|m| m.to_string()).collect();
    Rule { match_: RequestMatch { methods, path: path.into() }, action, probability, ttl_seconds: 60 }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn timed_get(client: &reqwest::Client, url: &str) -> (u16, Duration) {
    let started = Instant::now();
    let response = client.get(url).send().await.expect("an answer");
    let status = response.status().as_u16();
    response.bytes().await.unwrap();
    (status, started.elapsed())
}

#[tokio::test]
async fn a_listener_without_rules_passes_traffic_through_on_kept_alive_connections() {
    let origin = Origin::start().await;
    let proxy = FaultProxy::default();
    let l = listener(&proxy, &origin, true, Duration::from_secs(60)).await;
    let client = client();
    for _ in 0..20 {
        let response = client.get(format!("{}/hello", l.url())).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "hello");
    }
    assert_eq!(origin.connections.load(Ordering::SeqCst), 1, "the proxy keeps its connection to the origin alive");
    // A streamed body both ways, a megabyte.
    let body = vec![b'z'; 1 << 20];
    let echoed = client.post(format!("{}/echo", l.url())).body(body.clone()).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(echoed.len(), body.len());
    let big = client.get(format!("{}/big?kb=256", l.url())).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(big.len(), 256 * 1024);
    // The origin's 404 comes back as it was, not as a proxy error.
    assert_eq!(client.get(format!("{}/missing", l.url())).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn rules_delay_answer_cut_and_throttle_only_what_they_select_and_removing_them_restores_a_clean_pass() {
    let origin = Origin::start().await;
    let proxy = FaultProxy::default();
    let l = listener(&proxy, &origin, true, Duration::from_secs(60)).await;
    let client = client();
    let site = origin.url();

    // A second's delay: far above anything a busy machine adds.
    let delay = proxy.add_rule(site.clone(), rule("/api/*", &[], RuleAction::Delay((1000, 0)), 1.0), "exp-1").await.unwrap();
    let (status, took) = timed_get(&client, &format!("{}/api/items", l.url())).await;
    assert_eq!(status, 200);
    assert!(took >= Duration::from_millis(1000), "a 1000 ms delay took {took:?}");
    let (_, untouched) = timed_get(&client, &format!("{}/hello", l.url())).await;
    assert!(untouched < Duration::from_millis(800), "a path the rule does not select took {untouched:?}");
    proxy.remove_rule(delay).await.unwrap();
    let (_, clean) = timed_get(&client, &format!("{}/api/items", l.url())).await;
    assert!(clean < Duration::from_millis(800), "after removal /api took {clean:?}");

    let before = origin.requests.load(Ordering::SeqCst);
    let abort = proxy.add_rule(site.clone(), rule("/api/*", &["GET"], RuleAction::Abort(503), 1.0), "exp-1").await.unwrap();
    let response = client.get(format!("{}/api/items", l.url())).send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["x-faultline-fault"], "status");
    assert_eq!(origin.requests.load(Ordering::SeqCst), before, "an answered request never reaches the origin");
    let post = client.post(format!("{}/api/items", l.url())).send().await.unwrap();
    assert_eq!(post.status(), 200, "a POST is not among the rule's methods");
    proxy.remove_rule(abort).await.unwrap();

    let reset = proxy.add_rule(site.clone(), rule("/api/*", &[], RuleAction::Reset, 1.0), "exp-1").await.unwrap();
    let cut = client.get(format!("{}/api/items", l.url())).send().await;
    assert!(cut.is_err(), "a reset is a network error, got {cut:?}");
    proxy.remove_rule(reset).await.unwrap();

    let throttle = proxy.add_rule(site.clone(), rule("/big", &[], RuleAction::Throttle(32), 1.0), "exp-1").await.unwrap();
    let started = Instant::now();
    let body = client.get(format!("{}/big?kb=48", l.url())).send().await.unwrap().bytes().await.unwrap();
    let took = started.elapsed();
    assert_eq!(body.len(), 48 * 1024);
    assert!(took >= Duration::from_millis(1400), "48 KiB at 32 KiB/s took {took:?}");
    proxy.remove_rule(throttle).await.unwrap();

    let traffic = l.spec.traffic.take_window();
    assert!(traffic.faulted >= 4 && traffic.errors >= 2, "the listener counted what it did: {traffic:?}");
}

#[tokio::test]
async fn a_probability_affects_about_that_share_of_requests() {
    let origin = Origin::start().await;
    let proxy = FaultProxy::default();
    let l = listener(&proxy, &origin, true, Duration::from_secs(60)).await;
    proxy.add_rule(origin.url(), rule("/*", &[], RuleAction::Abort(500), 0.5), "exp-1").await.unwrap();
    let client = client();
    let mut failed = 0;
    for _ in 0..200 {
        failed += u32::from(client.get(format!("{}/hello", l.url())).send().await.unwrap().status() == 500);
    }
    // Binomial(200, 0.5): outside 60..140 once in ~10^8 runs.
    assert!((60..=140).contains(&failed), "{failed} of 200 failed at probability 0.5");
}

#[tokio::test]
async fn http2_clients_are_served_and_a_reset_resets_only_their_stream() {
    let origin = Origin::start().await;
    let proxy = FaultProxy::default();
    let l = listener(&proxy, &origin, true, Duration::from_secs(60)).await;
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let get = |path: &str| {
        let request = hyper::Request::get(format!("{}{path}", l.url())).body(Full::new(Bytes::new())).unwrap();
        h2.request(request)
    };
    let response = get("/hello").await.unwrap();
    assert_eq!(response.version(), hyper::Version::HTTP_2);
    assert_eq!(response.into_body().collect().await.unwrap().to_bytes(), "hello");
    proxy.add_rule(origin.url(), rule("/api/*", &[], RuleAction::Reset, 1.0), "exp-1").await.unwrap();
    assert!(get("/api/items").await.is_err(), "the stream is reset");
    let after = get("/hello").await.expect("other streams go on");
    assert_eq!(after.status(), 200);
}

#[tokio::test]
async fn an_upgrade_is_passed_through_untouched() {
    let origin = Origin::start().await;
    let proxy = FaultProxy::default();
    let l = listener(&proxy, &origin, true, Duration::from_secs(60)).await;
    let mut stream = tokio::net::TcpStream::connect(l.address).await.unwrap();
    let handshake = format!(
        "GET /ws HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        l.address
    );
    stream.write_all(handshake.as_bytes()).await.unwrap();
    let mut head = vec![];
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "the origin's 101 came through: {head}");
    for message in [&b"frame one"[..], b"\x81\x05hello", &[0u8, 255, 7]] {
        stream.write_all(message).await.unwrap();
        let mut back = vec![0u8; message.len()];
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut back)).await.expect("echoed in time").unwrap();
        assert_eq!(back, message, "bytes pass both ways unchanged");
    }
}

#[tokio::test]
async fn a_listener_ends_by_itself_at_its_time_to_live_and_a_closed_one_takes_nothing() {
    let origin = Origin::start().await;
    let proxy = FaultProxy::default();
    let short = listener(&proxy, &origin, true, Duration::from_secs(1)).await;
    assert_eq!(client().get(format!("{}/hello", short.url())).send().await.unwrap().status(), 200);
    let deadline = Instant::now() + Duration::from_secs(15);
    while tokio::net::TcpStream::connect(short.address).await.is_ok() {
        assert!(Instant::now() < deadline, "the listener still accepts past its time-to-live");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(short.is_closed());
    assert_eq!(proxy.open_listeners(), 0);

    let closed = listener(&proxy, &origin, true, Duration::from_secs(60)).await;
    assert!(proxy.close(&closed.id).await);
    assert!(tokio::net::TcpStream::connect(closed.address).await.is_err(), "nothing listens after a close");
    assert!(!proxy.close(&closed.id).await, "closing twice is a no-op");
}

#[tokio::test]
async fn in_service_worker_mode_the_listener_passes_through_and_serves_the_worker_its_rules() {
    let origin = Origin::start().await;
    let proxy = FaultProxy::default();
    let l = listener(&proxy, &origin, false, Duration::from_secs(60)).await;
    proxy.add_rule(origin.url(), rule("/api/*", &[], RuleAction::Abort(503), 1.0), "exp-1").await.unwrap();
    let client = client();
    assert_eq!(client.get(format!("{}/api/items", l.url())).send().await.unwrap().status(), 200, "the worker applies rules, not the proxy");
    let worker = client.get(format!("{}/faultline-sw.js", l.url())).send().await.unwrap();
    assert!(worker.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
    let script = worker.text().await.unwrap();
    assert!(script.starts_with("self.FAULTLINE_CONFIG = {\"key\":\"\",\"rules\":\"/__faultline/rules\"};"), "{script}");
    let feed: serde_json::Value = client.get(format!("{}/__faultline/rules", l.url())).send().await.unwrap().json().await.unwrap();
    assert_eq!(feed["rules"][0]["action"], serde_json::json!({"kind": "status", "status": 503}));
    assert_eq!(feed["rules"][0]["path"], "/api/*");
    assert!(feed["rules"][0]["expires_at"].as_i64().unwrap() > 0);
}

#[tokio::test]
async fn an_origin_that_is_gone_is_a_bad_gateway_not_a_hang() {
    let origin = Origin::start().await;
    let proxy = FaultProxy::default();
    let l = listener(&proxy, &origin, true, Duration::from_secs(60)).await;
    origin.stop();
    drop(origin);
    let started = Instant::now();
    let response = client().get(format!("{}/hello", l.url())).send().await.unwrap();
    assert_eq!(response.status(), 502);
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test]
async fn as_a_devices_http_proxy_a_listener_forwards_to_the_origin_each_request_names_under_its_rules() {
    let origin = Origin::start().await;
    let proxy = FaultProxy::default();
    let spec = ListenerSpec {
        site: "emulator-5554/dev.faultline.testapp".into(),
        forward: true,
        loopback_alias: None,
        experiment: "exp-1".into(),
        bind: "127.0.0.1:0".parse().unwrap(),
        apply_rules: true,
        ttl: Duration::from_secs(60),
        worker_script: Bytes::new(),
        traffic: Arc::new(Traffic::default()),
    };
    let l = proxy.open(spec).await.unwrap();
    // A client set to use the listener as its HTTP proxy, as the device is.
    let client = reqwest::Client::builder().proxy(reqwest::Proxy::http(l.url()).unwrap()).build().unwrap();
    let (status, clean) = timed_get(&client, &format!("{}/hello", origin.url())).await;
    assert_eq!(status, 200);
    assert!(clean < Duration::from_millis(500), "{clean:?}");
    proxy.add_rule("emulator-5554/dev.faultline.testapp".into(), rule("/hello", &[], RuleAction::Delay((600, 0)), 1.0), "exp-1").await.unwrap();
    let (status, slow) = timed_get(&client, &format!("{}/hello", origin.url())).await;
    assert_eq!(status, 200);
    assert!(slow >= Duration::from_millis(600), "the rule on the app's traffic held it: {slow:?}");
    // An origin-form request is not a proxy request.
    let direct = client_without_proxy_get(&format!("{}/hello", l.url())).await;
    assert_eq!(direct, 502, "a forward proxy forwards only what names its origin");
}

async fn client_without_proxy_get(url: &str) -> u16 {
    client().get(url).send().await.map(|r| r.status().as_u16()).unwrap_or(0)
}
