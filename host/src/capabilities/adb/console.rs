//! The Android emulator's console: a line protocol on the emulator's
//! console port (the NNNN of `emulator-NNNN`, on the machine that runs
//! it). It greets with a banner ending in `OK`, asks for `auth <token>`
//! when `~/.emulator_console_auth_token` holds one, and answers each
//! command with its output and a final `OK` or `KO: <why>`.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Most lines of one answer; a console's longest (`help`) has about forty.
const MAX_LINES: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("`{0}` is not an emulator: only emulator-NNNN devices have a console")]
    NotAnEmulator(String),
    #[error("no emulator console answers on port {0}")]
    Unreachable(u16),
    #[error("the emulator console refused: {0}")]
    Refused(String),
    #[error("the emulator console did not answer in {0:?}")]
    Timeout(Duration),
    #[error("the emulator console failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The console port of an emulator's serial.
pub fn port_of(serial: &str) -> Result<u16, ConsoleError> {
    serial.strip_prefix("emulator-").and_then(|p| p.parse().ok()).ok_or_else(|| ConsoleError::NotAnEmulator(serial.into()))
}

/// Sends one command and returns its output (without the final `OK`).
pub async fn send(port: u16, token_file: &Path, command: &str, timeout: Duration) -> Result<String, ConsoleError> {
    match tokio::time::timeout(timeout, session(port, token_file, command)).await {
        Ok(result) => result,
        Err(_) => Err(ConsoleError::Timeout(timeout)),
    }
}

async fn session(port: u16, token_file: &Path, command: &str) -> Result<String, ConsoleError> {
    let stream = TcpStream::connect(("127.0.0.1", port)).await.map_err(|_| ConsoleError::Unreachable(port))?;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let banner = answer(&mut lines).await?;
    if banner.contains("Authentication required") {
        // The emulator writes the token file at first start; an empty one means no auth.
        let token = tokio::fs::read_to_string(token_file)
            .await
            .map_err(|e| ConsoleError::Refused(format!("it asks for the token in {}: {e}", token_file.display())))?;
        write.write_all(format!("auth {}\r\n", token.trim()).as_bytes()).await?;
        answer(&mut lines).await?;
    }
    write.write_all(format!("{command}\r\n").as_bytes()).await?;
    let output = answer(&mut lines).await;
    let _ = write.write_all(b"quit\r\n").await;
    output
}

/// Lines up to `OK`, or the `KO:` message as an error.
async fn answer(lines: &mut tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>) -> Result<String, ConsoleError> {
    let mut out = vec![];
    while let Some(line) = lines.next_line().await? {
        let line = line.trim_end_matches('\r');
        if line == "OK" {
            return Ok(out.join("\n"));
        }
        if let Some(why) = line.strip_prefix("KO:") {
            return Err(ConsoleError::Refused(why.trim().to_string()));
        }
        if out.len() < MAX_LINES {
            out.push(line.to_string());
        }
    }
    Err(ConsoleError::Refused("the console closed the connection".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    #[test]
    fn only_emulator_serials_have_a_console_port() {
        assert_eq!(port_of("emulator-5554").unwrap(), 5554);
        assert!(port_of("127.0.0.1:5555").is_err());
        assert!(port_of("emulator-x").is_err());
    }

    #[tokio::test]
    async fn authenticates_with_the_token_then_reads_the_answer_or_the_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "s3cret\n").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let console = tokio::spawn(async move {
            let mut heard = vec![];
            for reply in ["  download speed: 100 kbits/s\r\nOK\r\n", "KO: bad speed\r\n"] {
                let (mut s, _) = listener.accept().await.unwrap();
                s.write_all(b"Android Console: Authentication required\r\nAndroid Console: type 'auth <auth_token>' to authenticate\r\nOK\r\n").await.unwrap();
                let mut buf = vec![0u8; 256];
                let n = s.read(&mut buf).await.unwrap();
                heard.push(String::from_utf8_lossy(&buf[..n]).to_string());
                s.write_all(b"Android Console: type 'help' for a list of commands\r\nOK\r\n").await.unwrap();
                let n = s.read(&mut buf).await.unwrap();
                heard.push(String::from_utf8_lossy(&buf[..n]).to_string());
                s.write_all(reply.as_bytes()).await.unwrap();
            }
            heard
        });
        let timeout = Duration::from_secs(5);
        assert_eq!(send(port, &token_file, "network status", timeout).await.unwrap(), "  download speed: 100 kbits/s");
        let refused = send(port, &token_file, "network speed x", timeout).await.unwrap_err();
        assert!(matches!(&refused, ConsoleError::Refused(why) if why == "bad speed"), "{refused:?}");
        let heard = console.await.unwrap();
        assert_eq!(heard[0], "auth s3cret\r\n");
        assert_eq!(heard[1], "network status\r\n");
    }
}
