//! A stream the device opened to the adb server (`adb reverse`), as a
//! byte pipe for the app's HTTP client.

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use crate::transport::Stream;

pub struct Tunnel;

impl Tunnel {
    /// The app's end of the pipe; a task carries bytes both ways until
    /// either side closes.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(mut stream: Stream) -> DuplexStream {
        let (app, mut pump) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                tokio::select! {
                    read = pump.read(&mut buf) => match read {
                        Ok(0) | Err(_) => break,
                        Ok(n) => if !stream.write(&buf[..n]).await { break },
                    },
                    data = stream.read() => match data {
                        Some(data) => if pump.write_all(&data).await.is_err() { break },
                        None => break,
                    },
                }
            }
            stream.close();
        });
        app
    }
}
