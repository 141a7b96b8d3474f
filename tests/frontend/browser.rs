//! The browser test support itself: a real headless Chromium loads the test
//! app from the test web server and a real mouse click runs its handler;
//! the web app vanishes on demand, open connections included.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use faultline_tests::webapp::ITEMS;
use faultline_tests::{Browser, WebApp};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn chromium_loads_the_app_and_a_real_click_is_a_trusted_interaction() {
    let started = Instant::now();
    let mut app = WebApp::start().await;
    let browser = Browser::launch().await.expect("Chromium starts");
    let launched = started.elapsed();
    let page = browser.open(&app.url("/")).await.expect("the app opens");
    page.wait_for("document.readyState === 'complete'", WAIT).await.unwrap();
    page.wait_for("window.appReady || window.appError", WAIT).await.unwrap();
    assert_eq!(page.eval::<Option<String>>("window.appError").await.unwrap(), None);

    let items: Vec<String> = page.eval("[...document.querySelectorAll('#items li')].map(li => li.textContent)").await.unwrap();
    assert_eq!(items, ITEMS);
    let api_status: u16 = page.eval("window.apiStatus").await.unwrap();
    assert_eq!(api_status, 200);
    // A promise is awaited.
    let fetched: Value = page.eval("fetch('/api/items').then(r => r.json())").await.unwrap();
    assert_eq!(fetched["items"][2], "gamma");
    // An exception is an error that says what was thrown.
    let thrown = page.eval::<Value>("null.nothing").await.unwrap_err();
    assert!(format!("{thrown:#}").contains("TypeError"), "{thrown:#}");

    // What INP measures: event timing entries of an interaction (the
    // handler works 150 ms, well over the 16 ms reporting threshold).
    page.eval::<Value>(
        "window.interactions = [];
         new PerformanceObserver(list => list.getEntries().forEach(e =>
           e.interactionId && window.interactions.push({name: e.name, interactionId: e.interactionId, duration: e.duration})
         )).observe({type: 'event', durationThreshold: 16});
         document.getElementById('work').addEventListener('click', e => window.trusted = e.isTrusted);",
    )
    .await
    .unwrap();
    page.click("#work").await.expect("the button is clicked");
    page.wait_for("document.getElementById('work-output').textContent === '1 click'", WAIT).await.unwrap();
    assert!(page.eval::<bool>("window.trusted").await.unwrap(), "the click is a trusted event");
    let interactions = page.wait_for("window.interactions.some(e => e.name === 'click') && window.interactions", WAIT).await.unwrap();
    let click = interactions.as_array().unwrap().iter().find(|e| e["name"] == "click").unwrap();
    assert!(click["interactionId"].as_u64().unwrap() > 0, "{interactions}");
    assert!(click["duration"].as_f64().unwrap() >= 150.0, "{interactions}");

    assert_eq!(app.hits("/"), 1, "{:?}", app.requests());
    assert_eq!(app.hits("/app.js"), 1, "{:?}", app.requests());
    assert_eq!(app.hits("/hero.svg"), 1, "{:?}", app.requests());
    assert_eq!(app.hits("/api/items"), 2, "the app's own request and the test's: {:?}", app.requests());

    // The app vanishes: the page's next request fails at once (Chromium's
    // kept-alive connection is closed under it), and so does a navigation.
    app.stop().await;
    let vanished = Instant::now();
    let failed: String = page.eval("fetch('/api/items').then(r => 'HTTP ' + r.status, e => e.name + ': ' + e.message)").await.unwrap();
    assert_eq!(failed, "TypeError: Failed to fetch");
    let refused = page.goto(&app.url("/")).await.unwrap_err();
    assert!(format!("{refused:#}").contains("ERR_CONNECTION_REFUSED"), "{refused:#}");
    assert!(vanished.elapsed() < Duration::from_secs(5), "{:?}", vanished.elapsed());
    page.close().await.unwrap();
    eprintln!("browser launched in {launched:?}, whole test {:?}", started.elapsed());
}

/// A raw HTTP/1.1 request on a connection that stays open.
fn get(conn: &mut std::net::TcpStream, path: &str) -> std::io::Result<String> {
    write!(conn, "GET {path} HTTP/1.1\r\nHost: app\r\n\r\n")?;
    let mut buf = [0u8; 4096];
    let n = conn.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_web_app_drops_its_open_connections_and_refuses_new_ones() {
    let mut app = WebApp::start().await;
    let addr = app.addr();
    let (mut idle, mut busy) = tokio::task::spawn_blocking(move || {
        let mut idle = std::net::TcpStream::connect(addr).unwrap();
        let answer = get(&mut idle, "/api/items").unwrap();
        assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("alpha"), "{answer}");
        let mut busy = std::net::TcpStream::connect(addr).unwrap();
        write!(busy, "GET /slow?ms=30000 HTTP/1.1\r\nHost: app\r\n\r\n").unwrap();
        (idle, busy)
    })
    .await
    .unwrap();
    // The slow request has reached the app before it stops.
    let deadline = Instant::now() + WAIT;
    while app.hits("/slow") == 0 {
        assert!(Instant::now() < deadline, "{:?}", app.requests());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let stopping = Instant::now();
    app.stop().await;
    let (idle_after, busy_after) = tokio::task::spawn_blocking(move || {
        idle.set_read_timeout(Some(WAIT)).unwrap();
        busy.set_read_timeout(Some(WAIT)).unwrap();
        let mut buf = [0u8; 1024];
        (get(&mut idle, "/api/items"), busy.read(&mut buf).map(|n| String::from_utf8_lossy(&buf[..n]).into_owned()))
    })
    .await
    .unwrap();
    assert!(idle_after.as_ref().map_or(true, String::is_empty), "an idle connection is closed: {idle_after:?}");
    assert!(busy_after.as_ref().map_or(true, String::is_empty), "a request in flight is cut: {busy_after:?}");
    assert!(stopping.elapsed() < Duration::from_secs(2), "{:?}", stopping.elapsed());
    assert!(std::net::TcpStream::connect(addr).is_err(), "the port is closed");

    app.restart().await;
    let answer = tokio::task::spawn_blocking(move || get(&mut std::net::TcpStream::connect(addr).unwrap(), "/"))
        .await
        .unwrap()
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("text/html"), "{answer}");
    assert_eq!(app.hits("/api/items"), 1, "{:?}", app.requests());
}
