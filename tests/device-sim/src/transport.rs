//! One adb transport: the connection an adb server made to this device,
//! carrying many streams. The server opens streams to services (OPEN,
//! answered OKAY or CLSE); the device opens streams back for `adb
//! reverse`. Flow control as adbd keeps it: every WRTE waits for the
//! peer's OKAY before the next on that stream, and every WRTE received is
//! acknowledged with OKAY.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::packet::{AUTH, CLSE, CNXN, MAX_PAYLOAD, OKAY, OPEN, Packet, STLS, VERSION, WRTE};

/// What a stream's two ends share.
struct Shared {
    /// The peer's id for the stream (0 until a device-opened stream is accepted).
    remote: AtomicU32,
    /// Data from the peer; dropped when the peer closes.
    incoming: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    /// One permit: a WRTE may go out. The peer's OKAY gives it back.
    ready: Semaphore,
    /// A device-opened stream's acceptance (true) or refusal (false).
    opened: Mutex<Option<oneshot::Sender<bool>>>,
}

pub struct Transport {
    out: mpsc::UnboundedSender<Packet>,
    streams: Mutex<HashMap<u32, Arc<Shared>>>,
    next_id: AtomicU32,
    max_data: AtomicU32,
}

/// A service's end of a stream.
pub struct Stream {
    transport: Arc<Transport>,
    local: u32,
    shared: Arc<Shared>,
    incoming: mpsc::UnboundedReceiver<Vec<u8>>,
}

impl Stream {
    /// The next data the peer wrote; none once it closed the stream.
    pub async fn read(&mut self) -> Option<Vec<u8>> {
        self.incoming.recv().await
    }

    /// Writes data, waiting for the peer's OKAY after each message; false
    /// if the stream is closed.
    pub async fn write(&self, data: &[u8]) -> bool {
        let max = self.transport.max_data.load(Ordering::Relaxed).max(1) as usize;
        for chunk in data.chunks(max) {
            match self.shared.ready.acquire().await {
                Ok(permit) => permit.forget(),
                Err(_) => return false,
            }
            let remote = self.shared.remote.load(Ordering::SeqCst);
            if !self.transport.send(Packet::new(WRTE, self.local, remote, chunk)) {
                return false;
            }
        }
        true
    }

    /// Closes the stream from this end.
    pub fn close(&self) {
        if self.transport.streams.lock().unwrap().remove(&self.local).is_some() {
            self.shared.ready.close();
            let remote = self.shared.remote.load(Ordering::SeqCst);
            self.transport.send(Packet::new(CLSE, self.local, remote, vec![]));
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.close();
    }
}

impl Transport {
    fn send(&self, packet: Packet) -> bool {
        self.out.send(packet).is_ok()
    }

    fn new_stream(self: &Arc<Self>, remote: u32) -> Stream {
        let local = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared { remote: AtomicU32::new(remote), incoming: Mutex::new(Some(tx)), ready: Semaphore::new(1), opened: Mutex::new(None) });
        self.streams.lock().unwrap().insert(local, shared.clone());
        Stream { transport: self.clone(), local, shared, incoming: rx }
    }

    /// Opens a stream from the device to a service of the server (`tcp:PORT`
    /// for a reverse); none if the server refuses.
    pub async fn open(self: &Arc<Self>, service: &str) -> Option<Stream> {
        let stream = self.new_stream(0);
        let (tx, rx) = oneshot::channel();
        *stream.shared.opened.lock().unwrap() = Some(tx);
        let mut name = service.as_bytes().to_vec();
        name.push(0);
        self.send(Packet::new(OPEN, stream.local, 0, name));
        match rx.await {
            Ok(true) => Some(stream),
            _ => None,
        }
    }
}

/// A service running on a stream.
pub type Service = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// What starts the service a stream asks for, or refuses it (none).
pub type Services = Arc<dyn Fn(&str, Stream, Arc<Transport>) -> Option<Service> + Send + Sync>;

/// Serves one connection from an adb server until it closes. `banner` is
/// the CNXN identity (`device::ro.product.name=...;features=...`).
pub async fn serve(socket: TcpStream, banner: String, open: Services, on_connect: impl Fn(&Arc<Transport>)) {
    let _ = socket.set_nodelay(true);
    let (mut reader, mut writer) = socket.into_split();
    let (out, mut queue) = mpsc::unbounded_channel::<Packet>();
    let writing = tokio::spawn(async move {
        while let Some(packet) = queue.recv().await {
            if packet.write(&mut writer).await.is_err() {
                return;
            }
        }
    });
    let transport = Arc::new(Transport { out, streams: Mutex::default(), next_id: AtomicU32::new(1), max_data: AtomicU32::new(MAX_PAYLOAD) });
    on_connect(&transport);
    while let Ok(packet) = Packet::read(&mut reader).await {
        match packet.command {
            CNXN => {
                transport.max_data.store(packet.arg1.clamp(1, MAX_PAYLOAD), Ordering::Relaxed);
                transport.send(Packet::new(CNXN, VERSION.min(packet.arg0.max(VERSION)), MAX_PAYLOAD, banner.as_bytes()));
            }
            OPEN => {
                let service = String::from_utf8_lossy(&packet.data).trim_end_matches('\0').to_string();
                let stream = transport.new_stream(packet.arg0);
                let local = stream.local;
                // Accepted before the service writes anything, as adbd does; a
                // refused OPEN is closed without an OKAY (the dropped stream sent CLSE).
                if let Some(service) = open(&service, stream, transport.clone()) {
                    transport.send(Packet::new(OKAY, local, packet.arg0, vec![]));
                    tokio::spawn(service);
                }
            }
            OKAY => {
                let shared = transport.streams.lock().unwrap().get(&packet.arg1).cloned();
                if let Some(shared) = shared {
                    let opening = shared.opened.lock().unwrap().take();
                    match opening {
                        Some(opened) => {
                            shared.remote.store(packet.arg0, Ordering::SeqCst);
                            let _ = opened.send(true);
                        }
                        None => shared.ready.add_permits(1),
                    }
                }
            }
            WRTE => {
                let shared = transport.streams.lock().unwrap().get(&packet.arg1).cloned();
                if let Some(shared) = shared {
                    if let Some(tx) = shared.incoming.lock().unwrap().as_ref() {
                        let _ = tx.send(packet.data);
                    }
                    transport.send(Packet::new(OKAY, packet.arg1, packet.arg0, vec![]));
                }
            }
            CLSE => {
                let shared = transport.streams.lock().unwrap().remove(&packet.arg1);
                if let Some(shared) = shared {
                    shared.incoming.lock().unwrap().take();
                    shared.ready.close();
                    if let Some(opened) = shared.opened.lock().unwrap().take() {
                        let _ = opened.send(false);
                    }
                }
            }
            AUTH | STLS => {}
            _ => {}
        }
    }
    // The server went away: every stream ends.
    for (_, shared) in transport.streams.lock().unwrap().drain() {
        shared.incoming.lock().unwrap().take();
        shared.ready.close();
    }
    writing.abort();
}
