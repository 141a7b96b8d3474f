//! adb transport messages (AOSP adb `protocol.txt`): a 24-byte header of
//! six little-endian u32 (command, arg0, arg1, data length, data check,
//! magic = command ^ 0xffffffff), then the data.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const CNXN: u32 = 0x4e58_4e43;
pub const AUTH: u32 = 0x4854_5541;
pub const OPEN: u32 = 0x4e45_504f;
pub const OKAY: u32 = 0x5941_4b4f;
pub const CLSE: u32 = 0x4553_4c43;
pub const WRTE: u32 = 0x4554_5257;
pub const STLS: u32 = 0x534c_5453;

/// The protocol version that no longer checks data sums.
pub const VERSION: u32 = 0x0100_0001;
/// Largest data this device takes in one message.
pub const MAX_PAYLOAD: u32 = 256 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub command: u32,
    pub arg0: u32,
    pub arg1: u32,
    pub data: Vec<u8>,
}

impl Packet {
    pub fn new(command: u32, arg0: u32, arg1: u32, data: impl Into<Vec<u8>>) -> Packet {
        Packet { command, arg0, arg1, data: data.into() }
    }

    pub async fn read(from: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Packet> {
        let mut header = [0u8; 24];
        from.read_exact(&mut header).await?;
        let word = |i: usize| u32::from_le_bytes([header[i * 4], header[i * 4 + 1], header[i * 4 + 2], header[i * 4 + 3]]);
        let (command, arg0, arg1, length, magic) = (word(0), word(1), word(2), word(3), word(5));
        if magic != command ^ 0xffff_ffff {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad magic for command {command:#x}")));
        }
        if length > MAX_PAYLOAD * 4 {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("a message of {length} bytes")));
        }
        let mut data = vec![0u8; length as usize];
        from.read_exact(&mut data).await?;
        Ok(Packet { command, arg0, arg1, data })
    }

    pub async fn write(&self, to: &mut (impl AsyncWrite + Unpin)) -> std::io::Result<()> {
        // The check is the byte sum; peers at VERSION and later ignore it.
        let check: u32 = self.data.iter().map(|b| u32::from(*b)).fold(0, u32::wrapping_add);
        let mut bytes = Vec::with_capacity(24 + self.data.len());
        for word in [self.command, self.arg0, self.arg1, self.data.len() as u32, check, self.command ^ 0xffff_ffff] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(&self.data);
        to.write_all(&bytes).await
    }
}
