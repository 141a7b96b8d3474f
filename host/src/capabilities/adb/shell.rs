//! The shell protocol v2 (AOSP adb's shell_protocol.h): over a
//! `shell,v2,raw:` stream each packet is an id byte, a little-endian u32
//! length and the data. Ids: 0 stdin, 1 stdout, 2 stderr, 3 exit (one
//! byte: the exit code), 4 close-stdin, 5 window size. Without it a shell
//! has no exit code, which is why the host asks for it.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const EXIT: u8 = 3;
const CLOSE_STDIN: u8 = 4;

/// Most output kept of one stream; past it the rest is read and dropped.
pub const MAX_OUTPUT: usize = 8 << 20;

/// What a shell command left.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Output {
    /// None when the stream ended without an exit packet (the device went away).
    pub exit_code: Option<u8>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Tells the device the command gets no input.
pub async fn close_stdin(stream: &mut (impl AsyncWrite + Unpin)) -> std::io::Result<()> {
    stream.write_all(&[CLOSE_STDIN, 0, 0, 0, 0]).await
}

/// Reads packets until the exit packet or the end of the stream.
pub async fn read_output(stream: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Output> {
    let mut out = Output::default();
    loop {
        let mut header = [0u8; 5];
        match stream.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(out),
            Err(e) => return Err(e),
        }
        let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let sink = match header[0] {
            STDOUT => Some(&mut out.stdout),
            STDERR => Some(&mut out.stderr),
            _ => None,
        };
        let mut data = vec![0u8; len.min(1 << 20)];
        let mut left = len;
        let mut exit = None;
        while left > 0 {
            let n = left.min(data.len());
            stream.read_exact(&mut data[..n]).await?;
            left -= n;
            if header[0] == EXIT {
                exit = exit.or(data.first().copied());
            }
        }
        if let Some(sink) = sink {
            let room = MAX_OUTPUT.saturating_sub(sink.len());
            sink.extend_from_slice(&data[..len.min(room).min(data.len())]);
        }
        if header[0] == EXIT {
            out.exit_code = exit.or(Some(0));
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(id: u8, data: &[u8]) -> Vec<u8> {
        let mut p = vec![id];
        p.extend_from_slice(&(data.len() as u32).to_le_bytes());
        p.extend_from_slice(data);
        p
    }

    #[tokio::test]
    async fn stdout_stderr_and_the_exit_code_are_read_apart() {
        let mut bytes = packet(STDOUT, b"hello ");
        bytes.extend(packet(STDERR, b"warn"));
        bytes.extend(packet(STDOUT, b"world"));
        bytes.extend(packet(EXIT, &[3]));
        bytes.extend(packet(STDOUT, b"after exit is ignored"));
        let out = read_output(&mut bytes.as_slice()).await.unwrap();
        assert_eq!(out, Output { exit_code: Some(3), stdout: b"hello world".to_vec(), stderr: b"warn".to_vec() });
    }

    #[tokio::test]
    async fn a_stream_that_ends_early_has_no_exit_code() {
        let bytes = packet(STDOUT, b"partial");
        let out = read_output(&mut bytes.as_slice()).await.unwrap();
        assert_eq!((out.exit_code, out.stdout.as_slice()), (None, b"partial".as_slice()));
        let truncated = &packet(STDOUT, b"abcdef")[..7];
        assert!(read_output(&mut &truncated[..]).await.is_err());
    }
}
