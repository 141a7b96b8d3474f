//! One listener of the fault proxy, for one experiment: a reverse proxy in
//! front of one site (an origin), or, as a device's HTTP proxy, a forward
//! proxy to whatever origin each request names. HTTP/1.1 with keep-alive
//! and HTTP/2 (prior knowledge, as there is no TLS) from clients; HTTP/1.1
//! to the origin. Bodies stream both ways; an upgrade (WebSocket) is passed
//! through untouched once the origin agrees to it, and so is a forward
//! proxy's CONNECT tunnel (HTTPS: its requests cannot be seen, so no rule
//! acts on them). The listener ends by itself at its time-to-live,
//! whatever the host does.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Uri, Version};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;
use faultline_plugin_runtime::capability::proxy::RuleAction;
use rand::RngExt;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::rules::RuleBook;
use super::throttle::throttle;
use super::traffic::{Outcome, Traffic};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = BoxBody<Bytes, BoxError>;

/// How long open connections get to finish when a listener closes.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// How long the origin may take to answer a request's head.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);

/// Path on the app's origin where the listener serves the service worker.
pub const WORKER_PATH: &str = "/faultline-sw.js";
/// Paths under this prefix are the listener's own, never forwarded.
pub const OWN_PREFIX: &str = "/__faultline/";

/// What the listener shares with the rest of the proxy.
pub(super) struct Shared {
    pub rules: RuleBook,
    pub client: Client<HttpConnector, Incoming>,
}

/// What to open.
#[derive(Debug, Clone)]
pub struct ListenerSpec {
    /// The origin traffic goes to, as `http://host:port`; for a forward
    /// proxy, the key its rules are filed under.
    pub site: String,
    /// A forward proxy (a device's HTTP proxy): each request goes to the
    /// origin its absolute URI names, instead of to `site`.
    pub forward: bool,
    /// A host name that means this machine's loopback to the clients (the
    /// Android emulator's 10.0.2.2): a forward proxy connects to 127.0.0.1
    /// for it, keeping the name in the Host header.
    pub loopback_alias: Option<String>,
    pub experiment: String,
    /// Where to listen; port 0 lets the system choose.
    pub bind: SocketAddr,
    /// Apply the experiment's rules here (proxy mode), or pass traffic
    /// through untouched and leave the rules to the service worker.
    pub apply_rules: bool,
    /// When the listener closes by itself.
    pub ttl: Duration,
    /// The service worker script, served at `/faultline-sw.js`.
    pub worker_script: Bytes,
    /// Where the listener counts what it sees (an experiment's listeners share one).
    pub traffic: Arc<Traffic>,
}

/// An open listener.
pub struct Listener {
    pub id: String,
    pub spec: ListenerSpec,
    pub address: SocketAddr,
    /// Epoch milliseconds at which it closes by itself.
    pub expires_at: i64,
    authority: HeaderValue,
    shared: Arc<Shared>,
    close: CancellationToken,
    closed: AtomicBool,
    tasks: TaskTracker,
    /// Set once the socket is dropped: `close` returns after that.
    unbound: tokio::sync::watch::Sender<bool>,
}

impl Listener {
    /// Binds and starts serving.
    pub(super) async fn open(id: String, spec: ListenerSpec, shared: Arc<Shared>) -> std::io::Result<Arc<Listener>> {
        let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
        let authority = match spec.forward {
            true => String::new(),
            false => {
                let origin: Uri = spec.site.parse().map_err(|e| invalid(format!("`{}` is not an origin: {e}", spec.site)))?;
                if origin.scheme_str() != Some("http") {
                    return Err(invalid(format!("the fault proxy forwards to http origins, not `{}`", spec.site)));
                }
                origin.authority().map(|a| a.as_str().to_string()).ok_or_else(|| invalid(format!("`{}` has no host", spec.site)))?
            }
        };
        let socket = TcpListener::bind(spec.bind).await?;
        let address = socket.local_addr()?;
        let listener = Arc::new(Listener {
            id,
            address,
            expires_at: crate::store::now_ms() + spec.ttl.as_millis() as i64,
            authority: HeaderValue::from_str(&authority).map_err(|e| invalid(e.to_string()))?,
            spec,
            shared,
            close: CancellationToken::new(),
            closed: AtomicBool::new(false),
            tasks: TaskTracker::new(),
            unbound: tokio::sync::watch::Sender::new(false),
        });
        let serving = listener.clone();
        tokio::spawn(async move { serving.serve(socket).await });
        Ok(listener)
    }

    /// The listener's own origin, such as `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Stops accepting (the port is free when this returns), gives open
    /// connections a moment, then cuts them.
    pub async fn close(&self) {
        self.close.cancel();
        let mut unbound = self.unbound.subscribe();
        let _ = unbound.wait_for(|done| *done).await;
        self.tasks.close();
        let _ = tokio::time::timeout(CLOSE_GRACE * 2, self.tasks.wait()).await;
    }

    async fn serve(self: Arc<Self>, socket: TcpListener) {
        let deadline = Instant::now() + self.spec.ttl;
        loop {
            let (stream, peer) = tokio::select! {
                accepted = socket.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Out of descriptors and the like: wait, do not spin.
                        tracing::warn!(listener = %self.id, "accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = self.close.cancelled() => break,
                () = tokio::time::sleep_until(deadline) => {
                    tracing::warn!(listener = %self.id, site = %self.spec.site, "the proxy listener reached its time-to-live; closing");
                    break;
                }
            };
            let _ = stream.set_nodelay(true);
            let this = self.clone();
            self.tasks.spawn(async move { this.connection(stream, peer).await });
        }
        drop(socket);
        self.unbound.send_replace(true);
        self.closed.store(true, Ordering::SeqCst);
        self.close.cancel();
        self.tasks.close();
    }

    async fn connection(self: Arc<Self>, stream: tokio::net::TcpStream, peer: SocketAddr) {
        let this = self.clone();
        let service = service_fn(move |req| {
            let this = this.clone();
            async move { this.handle(req, peer).await }
        });
        // HTTP/2 streams run as tasks of their own: tracked, so a close waits for them.
        let builder = auto::Builder::new(Tracked(self.tasks.clone()));
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
        tokio::pin!(conn);
        tokio::select! {
            _ = conn.as_mut() => {}
            () = self.close.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
            }
        }
    }

    /// One request: the listener's own paths, then the rules, then the origin.
    /// An `Err` cuts the connection (HTTP/1) or resets the stream (HTTP/2).
    async fn handle(self: Arc<Self>, req: Request<Incoming>, peer: SocketAddr) -> Result<Response<Body>, Cut> {
        let started = Instant::now();
        let path = req.uri().path().to_string();
        if self.spec.forward && req.method() == hyper::Method::CONNECT {
            return Ok(self.tunnel(req));
        }
        if !self.spec.forward && path == WORKER_PATH {
            return Ok(self.worker());
        }
        if !self.spec.forward && path.starts_with(OWN_PREFIX) {
            return Ok(self.own(&path));
        }
        let record = |status: Option<u16>, faulted: bool| self.spec.traffic.record(Outcome { status, faulted, latency: started.elapsed() });
        // The first selecting rule whose draw succeeds acts, as in the
        // service worker (while a plugin replaces a rule, old and new
        // coexist for a moment: they must not add up).
        let method = req.method().as_str().to_string();
        let acting = match self.spec.apply_rules {
            true => self.shared.rules.of(&self.spec.site, &self.spec.experiment).into_iter().find(|r| r.selects(&method, &path) && roll(r.rule.probability)),
            false => None,
        };
        let mut rate = None;
        match acting.as_ref().map(|r| r.rule.action) {
            None => {}
            Some(RuleAction::Delay((ms, jitter))) => {
                // A listener that closes cuts what it holds.
                tokio::select! {
                    () = tokio::time::sleep(jittered(ms, jitter)) => {}
                    () = self.close.cancelled() => return Err(Cut),
                }
            }
            Some(RuleAction::Throttle(kbps)) => rate = Some(kbps),
            Some(RuleAction::Reset) => {
                record(None, true);
                return Err(Cut);
            }
            Some(RuleAction::Abort(status)) => {
                record(Some(status), true);
                return Ok(injected_status(status));
            }
        }
        let faulted = acting.is_some();
        match self.forward(req, peer).await {
            Ok(response) => {
                record(Some(response.status().as_u16()), faulted);
                Ok(match rate {
                    Some(kbps) => response.map(|body| throttle(body, kbps)),
                    None => response,
                })
            }
            Err(e) => {
                record(Some(502), faulted);
                tracing::debug!(listener = %self.id, "the origin failed: {e}");
                Ok(text(StatusCode::BAD_GATEWAY, format!("Faultline proxy: the origin {} did not answer: {e}", self.spec.site)))
            }
        }
    }

    async fn forward(&self, mut req: Request<Incoming>, peer: SocketAddr) -> Result<Response<Body>, BoxError> {
        let upgrading = wants_upgrade(req.headers());
        let client_side = upgrading.then(|| hyper::upgrade::on(&mut req));
        let (mut parts, body) = req.into_parts();
        let original_host = parts.uri.authority().map(|a| a.as_str().to_string()).or_else(|| {
            parts.headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(String::from)
        });
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        let authority = match self.spec.forward {
            // A proxy request names its origin: `GET http://host/path`.
            true => match (parts.uri.scheme_str(), parts.uri.authority().cloned()) {
                (Some("http"), Some(authority)) => {
                    if self.spec.loopback_alias.as_deref() == Some(authority.host()) {
                        let port = authority.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
                        parts.uri = format!("http://127.0.0.1{port}{path}").parse()?;
                    }
                    HeaderValue::from_str(authority.as_str())?
                }
                _ => return Err(format!("a proxy request needs an absolute http URI, not `{}`", parts.uri).into()),
            },
            false => {
                parts.uri = format!("{}{path}", self.spec.site.trim_end_matches('/')).parse()?;
                self.authority.clone()
            }
        };
        parts.version = Version::HTTP_11;
        join_cookies(&mut parts.headers);
        strip_hop_by_hop(&mut parts.headers, upgrading);
        parts.headers.insert(header::HOST, authority);
        append_forwarded(&mut parts.headers, peer, original_host.as_deref());
        let call = self.shared.client.request(Request::from_parts(parts, body));
        let mut response = tokio::time::timeout(UPSTREAM_TIMEOUT, call).await.map_err(|_| "the origin took too long to answer")??;
        if response.status() == StatusCode::SWITCHING_PROTOCOLS {
            let Some(client_side) = client_side else { return Err("the origin switched protocols unasked".into()) };
            let origin_side = hyper::upgrade::on(&mut response);
            let close = self.close.clone();
            self.tasks.spawn(async move {
                let (Ok(client), Ok(origin)) = tokio::join!(client_side, origin_side) else { return };
                let (mut client, mut origin) = (TokioIo::new(client), TokioIo::new(origin));
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut client, &mut origin) => {}
                    () = close.cancelled() => {}
                }
            });
            return Ok(response.map(|_| Empty::new().map_err(|never: Infallible| match never {}).boxed()));
        }
        strip_hop_by_hop(response.headers_mut(), false);
        if !self.spec.forward {
            self.point_back_here(response.headers_mut());
        }
        Ok(response.map(|body| body.map_err(BoxError::from).boxed()))
    }

    /// Redirects the origin sends to itself point at this listener, so the
    /// browser stays behind the proxy (and under the experiment's faults).
    fn point_back_here(&self, headers: &mut HeaderMap) {
        let site = self.spec.site.trim_end_matches('/');
        let bare = site.strip_suffix(":80").unwrap_or(site);
        for name in [header::LOCATION, header::CONTENT_LOCATION] {
            let Some(value) = headers.get(&name).and_then(|v| v.to_str().ok()) else { continue };
            let rest = [site, bare].iter().find_map(|origin| value.strip_prefix(origin).filter(|r| r.is_empty() || r.starts_with('/')));
            if let Some(v) = rest.and_then(|rest| HeaderValue::from_str(&format!("{}{rest}", self.url())).ok()) {
                headers.insert(name, v);
            }
        }
    }

    /// A forward proxy's CONNECT: a tunnel to the named host, passed
    /// through untouched (its requests are encrypted) and cut when the
    /// listener closes.
    fn tunnel(&self, req: Request<Incoming>) -> Response<Body> {
        let Some(authority) = req.uri().authority().map(|a| a.to_string()) else {
            return text(StatusCode::BAD_REQUEST, "CONNECT needs host:port".into());
        };
        let close = self.close.clone();
        self.tasks.spawn(async move {
            let Ok(upgraded) = hyper::upgrade::on(req).await else { return };
            let Ok(Ok(mut origin)) = tokio::time::timeout(Duration::from_secs(10), tokio::net::TcpStream::connect(&authority)).await else { return };
            let mut client = TokioIo::new(upgraded);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut origin) => {}
                () = close.cancelled() => {}
            }
        });
        Response::new(Empty::new().map_err(|never: Infallible| match never {}).boxed())
    }

    /// The service worker, configured to read its rules from this listener.
    fn worker(&self) -> Response<Body> {
        let config = json!({ "rules": format!("{OWN_PREFIX}rules"), "key": "" });
        let mut script = format!("self.FAULTLINE_CONFIG = {config};\n").into_bytes();
        script.extend_from_slice(&self.spec.worker_script);
        let mut response = Response::new(full(script));
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(HeaderName::from_static("service-worker-allowed"), HeaderValue::from_static("/"));
        response
    }

    /// The listener's own paths: the rules feed for its service worker.
    fn own(&self, path: &str) -> Response<Body> {
        if path != format!("{OWN_PREFIX}rules") {
            return text(StatusCode::NOT_FOUND, "no such Faultline path".into());
        }
        let rules: Vec<_> = match self.spec.apply_rules {
            // In proxy mode the proxy applies them; the worker must not apply them twice.
            true => vec![],
            false => self.shared.rules.of(&self.spec.site, &self.spec.experiment).iter().map(|r| r.feed()).collect(),
        };
        let feed = json!({ "experiment": self.spec.experiment, "poll_ms": super::FEED_POLL_MS, "rules": rules });
        let mut response = Response::new(full(feed.to_string().into_bytes()));
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// Runs hyper's tasks (HTTP/2 streams) on the listener's tracker.
#[derive(Clone)]
struct Tracked(TaskTracker);

impl<F> hyper::rt::Executor<F> for Tracked
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        self.0.spawn(future);
    }
}

/// Returned by a request handler to cut the connection.
#[derive(Debug)]
pub struct Cut;

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection cut by a fault rule")
    }
}

impl std::error::Error for Cut {}

fn roll(probability: f64) -> bool {
    probability >= 1.0 || (probability > 0.0 && rand::rng().random::<f64>() < probability)
}

/// `ms` plus a uniform amount up to `jitter` either way, never below zero.
fn jittered(ms: u32, jitter: u32) -> Duration {
    let offset = if jitter == 0 { 0 } else { rand::rng().random_range(-i64::from(jitter)..=i64::from(jitter)) };
    Duration::from_millis((i64::from(ms) + offset).max(0) as u64)
}

fn full(bytes: Vec<u8>) -> Body {
    Full::new(Bytes::from(bytes)).map_err(|never: Infallible| match never {}).boxed()
}

fn text(status: StatusCode, message: String) -> Response<Body> {
    let mut response = Response::new(full(message.into_bytes()));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn injected_status(status: u16) -> Response<Body> {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let mut response = text(code, format!("Faultline: injected HTTP {status}"));
    response.headers_mut().insert(HeaderName::from_static("x-faultline-fault"), HeaderValue::from_static("status"));
    response
}

fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers.get_all(header::CONNECTION).iter().any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade"))))
}

/// Removes the headers that concern one hop only (RFC 9110 §7.6.1), and
/// those the Connection header names; an upgrade keeps its two.
fn strip_hop_by_hop(headers: &mut HeaderMap, upgrading: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .filter(|n| !(upgrading && n == header::UPGRADE))
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in ["keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "proxy-authenticate", "proxy-authorization"] {
        headers.remove(name);
    }
    if upgrading {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    } else {
        headers.remove(header::CONNECTION);
        headers.remove(header::UPGRADE);
    }
}

/// HTTP/2 may split cookies over several fields; HTTP/1.1 wants one
/// (RFC 9113 §8.2.3).
fn join_cookies(headers: &mut HeaderMap) {
    if headers.get_all(header::COOKIE).iter().count() < 2 {
        return;
    }
    let joined: Vec<&str> = headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).collect();
    if let Ok(v) = HeaderValue::from_str(&joined.join("; ")) {
        headers.insert(header::COOKIE, v);
    }
}

fn append_forwarded(headers: &mut HeaderMap, peer: SocketAddr, host: Option<&str>) {
    let ip = peer.ip().to_string();
    let chain = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(before) => format!("{before}, {ip}"),
        None => ip,
    };
    if let Ok(v) = HeaderValue::from_str(&chain) {
        headers.insert(HeaderName::from_static("x-forwarded-for"), v);
    }
    if let Some(v) = host.and_then(|h| HeaderValue::from_str(h).ok()) {
        headers.insert(HeaderName::from_static("x-forwarded-host"), v);
    }
    headers.insert(HeaderName::from_static("x-forwarded-proto"), HeaderValue::from_static("http"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_stay_on_their_hop() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, x-secret"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        h.insert("x-app", HeaderValue::from_static("kept"));
        strip_hop_by_hop(&mut h, false);
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["x-app"]);
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert!(wants_upgrade(&h));
        strip_hop_by_hop(&mut h, true);
        assert_eq!(h.get(header::UPGRADE).unwrap(), "websocket");
    }

    #[test]
    fn jitter_stays_within_its_bounds_and_never_below_zero() {
        for _ in 0..1000 {
            let d = jittered(100, 30).as_millis();
            assert!((70..=130).contains(&d));
            assert!(jittered(10, 50).as_millis() <= 60);
        }
        assert!(roll(1.0) && !roll(0.0));
    }
}
