//! A netlink connection that sends requests and waits for their
//! acknowledgements, shared by the nftables and traffic-control code.

use std::fmt::Debug;
use std::io;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, NetlinkDeserializable, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
};
use netlink_sys::Socket;

const RECV_BUFFER: usize = 1 << 16;

pub struct Conn {
    pub socket: Socket,
    seq: u32,
}

impl Conn {
    pub fn open(protocol: isize) -> io::Result<Conn> {
        let mut socket = Socket::new(protocol)?;
        socket.bind_auto()?;
        socket.connect(&netlink_sys::SocketAddr::new(0, 0))?;
        Ok(Conn { socket, seq: 0 })
    }

    /// Sends `messages` in one datagram (a batch, when they are framed by
    /// batch begin and end) and waits until every one sent with `NLM_F_ACK`
    /// is acknowledged. The first refusal is the error.
    pub fn transact<I>(&mut self, messages: Vec<NetlinkMessage<I>>) -> io::Result<()>
    where
        I: NetlinkSerializable + NetlinkDeserializable + Debug,
    {
        let mut pending = 0;
        let mut datagram = Vec::new();
        let first = self.seq + 1;
        for mut message in messages {
            self.seq += 1;
            message.header.sequence_number = self.seq;
            message.header.flags |= NLM_F_REQUEST;
            if message.header.flags & NLM_F_ACK != 0 {
                pending += 1;
            }
            message.finalize();
            let start = datagram.len();
            datagram.resize(start + message.buffer_len(), 0);
            message.serialize(&mut datagram[start..]);
        }
        self.socket.send(&datagram, 0)?;
        if pending == 0 {
            return Ok(());
        }
        let ours = first..=self.seq;
        let mut first_error = None;
        self.receive(|message: NetlinkMessage<I>| {
            if let NetlinkPayload::Error(e) = message.payload
                && ours.contains(&message.header.sequence_number)
            {
                pending -= 1;
                if let Some(code) = e.code {
                    first_error.get_or_insert(io::Error::from_raw_os_error(-code.get()));
                }
            }
            pending > 0
        })?;
        first_error.map_or(Ok(()), Err)
    }

    /// Sends a dump request; every answer's payload.
    pub fn dump<I>(&mut self, mut request: NetlinkMessage<I>) -> io::Result<Vec<I>>
    where
        I: NetlinkSerializable + NetlinkDeserializable + Debug,
    {
        self.seq += 1;
        request.header.sequence_number = self.seq;
        request.header.flags |= NLM_F_REQUEST | NLM_F_DUMP;
        request.finalize();
        let mut datagram = vec![0; request.buffer_len()];
        request.serialize(&mut datagram);
        self.socket.send(&datagram, 0)?;
        let mut answers = Vec::new();
        let mut failure = None;
        self.receive(|message: NetlinkMessage<I>| match message.payload {
            NetlinkPayload::InnerMessage(inner) => {
                answers.push(inner);
                true
            }
            NetlinkPayload::Error(e) => {
                failure = e.code.map(|c| io::Error::from_raw_os_error(-c.get()));
                false
            }
            NetlinkPayload::Done(_) => false,
            _ => true,
        })?;
        failure.map_or(Ok(answers), Err)
    }

    /// Reads messages and hands each to `more` until it returns false.
    fn receive<I>(&mut self, mut more: impl FnMut(NetlinkMessage<I>) -> bool) -> io::Result<()>
    where
        I: NetlinkSerializable + NetlinkDeserializable + Debug,
    {
        let mut buffer = Vec::with_capacity(RECV_BUFFER);
        loop {
            buffer.clear();
            let size = self.socket.recv(&mut buffer, 0)?;
            let mut offset = 0;
            while offset < size.min(buffer.len()) {
                let message = NetlinkMessage::<I>::deserialize(&buffer[offset..])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let length = message.header.length as usize;
                if !more(message) {
                    return Ok(());
                }
                if length == 0 {
                    break;
                }
                offset += (length + 3) & !3;
            }
        }
    }
}
