//! The test web application: the static files of `tests/frontend/app/`,
//! a small JSON API and a slow endpoint, on 127.0.0.1. It counts the
//! requests that reach it (what a fault in front of it let through), and it
//! can vanish at once, open connections included, as a crashed app would.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::paths::workspace_root;

/// The items `GET /api/items` lists.
pub const ITEMS: [&str; 3] = ["alpha", "beta", "gamma"];

/// The longest `GET /slow?ms=N` waits.
const SLOW_MAX: Duration = Duration::from_secs(60);

/// What the server shares with its handlers.
#[derive(Default)]
struct Shared {
    root: PathBuf,
    /// Files served from memory, before the directory: `/path` → body.
    files: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Every request that reached the app: method and path with query.
    requests: Mutex<Vec<(Method, String)>>,
}

pub struct WebApp {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// Cancelled when the app stops: ends every open connection.
    stopped: CancellationToken,
    server: Option<JoinHandle<()>>,
}

impl WebApp {
    /// Serves `tests/frontend/app/`.
    pub async fn start() -> WebApp {
        Self::serve(&workspace_root().join("tests/frontend/app")).await
    }

    /// Serves the static files of `root`.
    pub async fn serve(root: &Path) -> WebApp {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding the web app");
        let shared = Arc::new(Shared { root: root.to_path_buf(), ..Shared::default() });
        Self::run(listener, shared)
    }

    fn run(listener: TcpListener, shared: Arc<Shared>) -> WebApp {
        let addr = listener.local_addr().expect("the web app's address");
        let stopped = CancellationToken::new();
        let app = Router::new()
            .route("/api/items", get(|| async { axum::Json(json!({"items": ITEMS})) }))
            .route("/slow", get(slow))
            // Chromium asks for one on every page; no icon, and no 404 in the page's log.
            .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
            .fallback(static_file)
            .layer(middleware::from_fn_with_state(shared.clone(), record))
            .with_state(AppState { shared: shared.clone(), stopped: stopped.clone() });
        let listener = Listener { tcp: listener, stopped: stopped.clone() };
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serving the web app");
        });
        WebApp { addr, shared, stopped, server: Some(server) }
    }

    /// `http://127.0.0.1:PORT`
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The origin followed by `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves `body` at `path` (`/faultline-sw.js`, say), ahead of the
    /// directory; the content type follows the extension.
    pub fn put_file(&self, path: &str, body: impl Into<Vec<u8>>) {
        self.shared.files.lock().unwrap().insert(path.to_string(), body.into());
    }

    /// How many requests for `path` (without query) reached the app.
    pub fn hits(&self, path: &str) -> usize {
        self.shared.requests.lock().unwrap().iter().filter(|(_, p)| p.split('?').next() == Some(path)).count()
    }

    /// Every request that reached the app so far: `GET /path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.shared.requests.lock().unwrap().iter().map(|(m, p)| format!("{m} {p}")).collect()
    }

    /// Stops at once: the port is closed (new connections are refused) and
    /// open connections are dropped, requests in flight included.
    pub async fn stop(&mut self) {
        self.halt();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }

    /// Serves again on the same port after [`stop`](Self::stop), with the
    /// same files and request log.
    pub async fn restart(&mut self) {
        self.stop().await;
        let listener = TcpListener::bind(self.addr).await.expect("binding the web app's port again");
        *self = Self::run(listener, self.shared.clone());
    }

    fn halt(&mut self) {
        if let Some(server) = &self.server {
            // Dropping the serve future closes the listening socket.
            server.abort();
        }
        self.stopped.cancel();
    }
}

impl Drop for WebApp {
    fn drop(&mut self) {
        self.halt();
    }
}

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    stopped: CancellationToken,
}

async fn record(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let path = request.uri().path_and_query().map_or_else(|| request.uri().path().to_string(), |p| p.to_string());
    shared.requests.lock().unwrap().push((request.method().clone(), path));
    next.run(request).await
}

#[derive(serde::Deserialize)]
struct SlowQuery {
    #[serde(default)]
    ms: u64,
}

/// Answers after `ms` milliseconds (or never, if the app stops first).
async fn slow(State(state): State<AppState>, Query(query): Query<SlowQuery>) -> Response {
    let wait = Duration::from_millis(query.ms).min(SLOW_MAX);
    tokio::select! {
        () = tokio::time::sleep(wait) => axum::Json(json!({"slept_ms": wait.as_millis() as u64})).into_response(),
        () = state.stopped.cancelled() => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).as_deref() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}

/// `GET /` is index.html, `GET /<file>` that file. Service workers are
/// served from the root, so their default scope is the whole app and they
/// need no `Service-Worker-Allowed` header.
async fn static_file(State(state): State<AppState>, method: Method, uri: Uri) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let path = if uri.path() == "/" { "/index.html" } else { uri.path() };
    let in_memory = state.shared.files.lock().unwrap().get(path).cloned();
    let body = match in_memory {
        Some(body) => body,
        None => {
            let relative = &path[1..];
            if relative.split('/').any(|part| part.is_empty() || part == "." || part == "..") || relative.contains('\\') {
                return StatusCode::NOT_FOUND.into_response();
            }
            match tokio::fs::read(state.shared.root.join(relative)).await {
                Ok(body) => body,
                Err(_) => return StatusCode::NOT_FOUND.into_response(),
            }
        }
    };
    // Every load asks the app again, so hits count what the page loaded.
    ([(header::CONTENT_TYPE, content_type(path)), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// The listening socket; its connections end when the app stops.
struct Listener {
    tcp: TcpListener,
    stopped: CancellationToken,
}

impl axum::serve::Listener for Listener {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Connection, SocketAddr) {
        loop {
            match self.tcp.accept().await {
                Ok((tcp, addr)) => {
                    let _ = tcp.set_nodelay(true);
                    return (Connection { tcp, stopped: Box::pin(self.stopped.clone().cancelled_owned()) }, addr);
                }
                // Out of file descriptors, say: try again shortly.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// A connection that fails every read and write once the app stops, so the
/// server drops it (axum serves each connection in a task of its own, which
/// stopping the server does not end).
struct Connection {
    tcp: TcpStream,
    stopped: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl Connection {
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.stopped.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the web app stopped")),
            Poll::Pending => Ok(()),
        }
    }
}

impl AsyncRead for Connection {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
