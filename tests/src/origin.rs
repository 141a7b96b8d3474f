//! A small origin server for the fault proxy's tests, on hyper directly so
//! it can count connections and take protocol upgrades: `/hello`, `/api/*`
//! (JSON), `/big?kb=N` (a body of N KiB, in 1 KiB chunks), `/echo` (the
//! request body back, streamed), `/ws` (an upgrade to an echo of raw
//! bytes, as a WebSocket handshake would). Every answer says which
//! connection served it (`x-connection`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

type Body = BoxBody<Bytes, hyper::Error>;

pub struct Origin {
    pub address: SocketAddr,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    /// Requests answered so far (upgrades included).
    pub requests: Arc<AtomicUsize>,
    stop: CancellationToken,
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).map_err(|never: Infallible| match never {}).boxed()
}

async fn answer(mut req: Request<Incoming>, connection: usize) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    let mut response = match path.as_str() {
        "/hello" => Response::new(full("hello")),
        "/echo" => Response::new(req.into_body().boxed()),
        "/big" => {
            let kb: usize = req.uri().query().and_then(|q| q.strip_prefix("kb=")).and_then(|n| n.parse().ok()).unwrap_or(64);
            let chunks = futures_util::stream::iter((0..kb).map(|_| Ok::<_, hyper::Error>(Frame::data(Bytes::from(vec![b'x'; 1024])))));
            Response::new(BodyExt::boxed(StreamBody::new(chunks)))
        }
        "/ws" => {
            let upgrade = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                let Ok(upgraded) = upgrade.await else { return };
                let mut io = TokioIo::new(upgraded);
                let mut buf = [0u8; 1024];
                while let Ok(n) = io.read(&mut buf).await {
                    if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
            let mut r = Response::new(full(Bytes::new()));
            *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            r.headers_mut().insert("upgrade", "websocket".parse().unwrap());
            r.headers_mut().insert("connection", "upgrade".parse().unwrap());
            r
        }
        p if p.starts_with("/api/") => Response::new(full(r#"{"items":["alpha","beta"]}"#)),
        _ => {
            let mut r = Response::new(full("not found"));
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    };
    response.headers_mut().insert("x-connection", connection.into());
    Ok(response)
}

impl Origin {
    pub async fn start() -> Origin {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (connections, requests, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), CancellationToken::new());
        let (counted, answered, stopping) = (connections.clone(), requests.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let (stream, _) = tokio::select! {
                    accepted = listener.accept() => match accepted { Ok(a) => a, Err(_) => continue },
                    () = stopping.cancelled() => return,
                };
                let connection = counted.fetch_add(1, Ordering::SeqCst) + 1;
                let (answered, stopping) = (answered.clone(), stopping.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        answered.fetch_add(1, Ordering::SeqCst);
                        answer(req, connection)
                    });
                    let builder = auto::Builder::new(TokioExecutor::new());
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                    tokio::select! {
                        _ = conn => {}
                        () = stopping.cancelled() => {}
                    }
                });
            }
        });
        Origin { address, connections, requests, stop }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Closes the listener and every connection: the app is gone.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
