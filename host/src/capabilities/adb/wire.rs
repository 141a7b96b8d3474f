//! The adb server's client protocol ("smart sockets", AOSP adb's
//! OVERVIEW.TXT and SERVICES.TXT): one TCP connection per request; a
//! request is four hex digits of length then the service name; the server
//! answers `OKAY`, or `FAIL` with a length-prefixed message. A device
//! service is reached by asking for `host:transport:<serial>` first, on
//! the same connection, then for the service; what follows is the
//! service's own byte stream.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What went wrong talking to the adb server.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Nothing listens at the server's address.
    #[error("no adb server answers at {0}")]
    NoServer(SocketAddr),
    /// The server (or the device behind it) refused the request.
    #[error("{0}")]
    Refused(String),
    #[error("the adb connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the adb server answered something unexpected: {0}")]
    Protocol(String),
}

/// Longest answer of a host service (a device list): far beyond any real one.
const MAX_HOST_ANSWER: usize = 1 << 20;

/// A connection to the adb server.
pub struct Connection {
    stream: TcpStream,
}

impl Connection {
    pub async fn open(server: SocketAddr) -> Result<Connection, WireError> {
        match TcpStream::connect(server).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                Ok(Connection { stream })
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Err(WireError::NoServer(server)),
            Err(e) => Err(e.into()),
        }
    }

    /// Sends one request and reads the server's OKAY or FAIL.
    pub async fn request(&mut self, service: &str) -> Result<(), WireError> {
        if service.len() > 0xffff {
            return Err(WireError::Protocol(format!("a service name of {} bytes is too long", service.len())));
        }
        self.stream.write_all(format!("{:04x}{service}", service.len()).as_bytes()).await?;
        self.status().await
    }

    /// Reads `OKAY`, or `FAIL` and its message.
    pub async fn status(&mut self) -> Result<(), WireError> {
        let mut word = [0u8; 4];
        self.stream.read_exact(&mut word).await?;
        match &word {
            b"OKAY" => Ok(()),
            b"FAIL" => Err(WireError::Refused(self.read_prefixed().await?)),
            other => Err(WireError::Protocol(format!("expected OKAY or FAIL, got {:?}", String::from_utf8_lossy(other)))),
        }
    }

    /// Reads four hex digits of length and that many bytes.
    pub async fn read_prefixed(&mut self) -> Result<String, WireError> {
        let mut hex = [0u8; 4];
        self.stream.read_exact(&mut hex).await?;
        let len = std::str::from_utf8(&hex)
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or_else(|| WireError::Protocol(format!("bad length {:?}", String::from_utf8_lossy(&hex))))?;
        let mut body = vec![0u8; len.min(MAX_HOST_ANSWER)];
        self.stream.read_exact(&mut body).await?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// A host service that answers one length-prefixed string.
    pub async fn host_query(server: SocketAddr, service: &str) -> Result<String, WireError> {
        let mut connection = Connection::open(server).await?;
        connection.request(service).await?;
        connection.read_prefixed().await
    }

    /// A connection switched to a device's transport, then to `service`.
    pub async fn device_service(server: SocketAddr, serial: &str, service: &str) -> Result<Connection, WireError> {
        let mut connection = Connection::open(server).await?;
        connection.request(&format!("host:transport:{serial}")).await?;
        connection.request(service).await?;
        Ok(connection)
    }

    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Everything the service writes until it closes, up to `limit` bytes.
    pub async fn read_to_end(&mut self, limit: usize) -> Result<Vec<u8>, WireError> {
        let mut out = vec![];
        (&mut self.stream).take(limit as u64).read_to_end(&mut out).await?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server that reads one request and answers `reply`.
    async fn answering(reply: &'static [u8]) -> (SocketAddr, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut len = [0u8; 4];
            s.read_exact(&mut len).await.unwrap();
            let mut body = vec![0u8; usize::from_str_radix(std::str::from_utf8(&len).unwrap(), 16).unwrap()];
            s.read_exact(&mut body).await.unwrap();
            s.write_all(reply).await.unwrap();
            String::from_utf8(body).unwrap()
        });
        (addr, task)
    }

    #[tokio::test]
    async fn a_request_is_length_prefixed_and_an_answer_is_read_back() {
        let (addr, sent) = answering(b"OKAY000c0123456789ab").await;
        assert_eq!(Connection::host_query(addr, "host:devices-l").await.unwrap(), "0123456789ab");
        assert_eq!(sent.await.unwrap(), "host:devices-l");
    }

    #[tokio::test]
    async fn a_refusal_carries_the_servers_message() {
        let (addr, _) = answering(b"FAIL0010device not found").await;
        let err = Connection::host_query(addr, "host:transport:nope").await.unwrap_err();
        assert!(matches!(&err, WireError::Refused(m) if m == "device not found"), "{err:?}");
    }

    #[tokio::test]
    async fn garbage_is_a_protocol_error_and_no_listener_is_no_server() {
        let (addr, _) = answering(b"WHAT").await;
        assert!(matches!(Connection::host_query(addr, "host:version").await, Err(WireError::Protocol(_))));
        let free = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        assert!(matches!(Connection::host_query(free, "host:version").await, Err(WireError::NoServer(_))));
    }
}
