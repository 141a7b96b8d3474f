//! The delay line for kernels without netem: the nftables rule hands each
//! inbound packet to a netfilter queue; this reader holds it until its due
//! time (a heap ordered by due time, so a long jitter draw never holds up
//! the packets behind it) and then accepts it. Only packet metadata is
//! copied to userspace. The queue fails open: a full queue lets packets
//! through rather than dropping them, and with the rule's bypass flag a
//! dead reader means no delay, never a blackhole.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use netlink_packet_core::{DefaultNla, NLM_F_ACK, NetlinkBuffer, NetlinkMessage, NlaBuffer, NlasIterator};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily, NetfilterSubsystem,
};

use super::netlink::Conn;
use crate::lifecycle;

const NFNL_SUBSYS_QUEUE: u8 = 3;
const NFQNL_MSG_PACKET: u8 = 0;
const NFQNL_MSG_VERDICT: u8 = 1;
const NFQNL_MSG_CONFIG: u8 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NFQA_CFG_F_FAIL_OPEN: u32 = 1;
const NFQA_CFG_F_GSO: u32 = 4;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NF_ACCEPT: u32 = 1;
/// Packets waiting for a verdict, held ones included; beyond it packets pass undelayed.
const QUEUE_MAX_LEN: u32 = 16_384;
const RECEIVE_BUFFER: usize = 8 << 20;
/// Longest wait between checks of the stop flag.
const IDLE: Duration = Duration::from_millis(50);

pub struct Queue {
    conn: Conn,
    pub number: u16,
    buffer: Vec<u8>,
}

fn config(queue: u16, attributes: Vec<DefaultNla>) -> NetlinkMessage<NetfilterMessage> {
    message(queue, NFQNL_MSG_CONFIG, attributes, NLM_F_ACK)
}

fn message(queue: u16, kind: u8, attributes: Vec<DefaultNla>, flags: u16) -> NetlinkMessage<NetfilterMessage> {
    let inner = NetfilterMessageInner::Other { subsys: NetfilterSubsystem::Other(NFNL_SUBSYS_QUEUE), message_type: kind, attributes };
    let mut message = NetlinkMessage::from(NetfilterMessage::new(NetfilterHeader::new(NetfilterProtoFamily::Unspec, 0, queue), inner));
    message.header.flags |= flags;
    message
}

impl Queue {
    /// Binds the first free queue number, counting from `seed`, so agents
    /// in one namespace do not collide (each is PID 1 of its container, so
    /// the PID is no help). A number bound by another socket is refused with
    /// EBUSY or EPERM.
    pub fn bind(seed: u32) -> io::Result<Queue> {
        let mut conn = Conn::open(netlink_sys::constants::NETLINK_NETFILTER)?;
        conn.socket.set_rx_buf_sz(RECEIVE_BUFFER)?;
        conn.socket.set_no_enobufs(true)?;
        let first = 1000 + (seed % 60_000) as u16;
        let mut bound = None;
        let mut refused = io::Error::other("no free netfilter queue number");
        for number in (first..u16::MAX).chain(1000..first).take(64) {
            // struct nfqnl_msg_config_cmd: command, pad, pf (unused since Linux 3.8)
            let bind = config(number, vec![DefaultNla::new(NFQA_CFG_CMD, vec![NFQNL_CFG_CMD_BIND, 0, 0, 0])]);
            match conn.transact(vec![bind]) {
                Ok(()) => {
                    bound = Some(number);
                    break;
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EPERM)) => refused = e,
                Err(e) => return Err(e),
            }
        }
        let number = bound.ok_or(refused)?;
        let flags = (NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO).to_be_bytes().to_vec();
        conn.transact(vec![config(
            number,
            vec![
                // struct nfqnl_msg_config_params: copy range (none), copy mode
                DefaultNla::new(NFQA_CFG_PARAMS, [0u32.to_be_bytes().as_slice(), &[NFQNL_COPY_META]].concat()),
                DefaultNla::new(NFQA_CFG_QUEUE_MAXLEN, QUEUE_MAX_LEN.to_be_bytes().to_vec()),
                DefaultNla::new(NFQA_CFG_FLAGS, flags.clone()),
                DefaultNla::new(NFQA_CFG_MASK, flags),
            ],
        )])?;
        Ok(Queue { conn, number, buffer: Vec::with_capacity(1 << 16) })
    }

    /// Waits up to `timeout` for packets; true when some are waiting.
    fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let mut poll = libc::pollfd { fd: self.conn.socket.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let spec = libc::timespec { tv_sec: timeout.as_secs() as _, tv_nsec: timeout.subsec_nanos() as _ };
        // SAFETY: one valid pollfd and a timespec that outlive the call.
        match unsafe { libc::ppoll(&mut poll, 1, &spec, std::ptr::null()) } {
            -1 if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => Ok(false),
            -1 => Err(io::Error::last_os_error()),
            n => Ok(n > 0),
        }
    }

    /// Reads every waiting packet's id into `ids`, without blocking.
    fn receive(&mut self, ids: &mut Vec<u32>) -> io::Result<()> {
        loop {
            self.buffer.clear();
            let size = match self.conn.socket.recv(&mut self.buffer, libc::MSG_DONTWAIT) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                other => other?,
            };
            let mut rest = &self.buffer[..size.min(self.buffer.len())];
            while let Ok(message) = NetlinkBuffer::new_checked(rest) {
                let length = (message.length() as usize + 3) & !3;
                if message.message_type() == u16::from(NFNL_SUBSYS_QUEUE) << 8 | u16::from(NFQNL_MSG_PACKET) {
                    ids.extend(packet_id(&message.payload()[4..]));
                }
                rest = rest.get(length..).unwrap_or_default();
            }
        }
    }

    fn accept(&mut self, id: u32) -> io::Result<()> {
        // struct nfqnl_msg_verdict_hdr: verdict, packet id
        let header = [NF_ACCEPT.to_be_bytes(), id.to_be_bytes()].concat();
        let verdict = message(self.number, NFQNL_MSG_VERDICT, vec![DefaultNla::new(NFQA_VERDICT_HDR, header)], 0);
        self.conn.transact(vec![verdict])
    }
}

/// The packet id in a packet message's attributes (`struct nfqnl_msg_packet_hdr`).
fn packet_id(attributes: &[u8]) -> Option<u32> {
    NlasIterator::new(attributes).filter_map(Result::ok).find(|a: &NlaBuffer<&[u8]>| a.kind() == NFQA_PACKET_HDR).and_then(|a| {
        let value = a.value();
        Some(u32::from_be_bytes(value.get(..4)?.try_into().ok()?))
    })
}

/// Added delay: `delay` plus a uniform draw in ±`jitter` (as netem without
/// a distribution table), never below zero.
pub struct Delay {
    pub delay: Duration,
    pub jitter: Duration,
    state: u64,
}

impl Delay {
    pub fn new(delay: Duration, jitter: Duration, seed: u32) -> Delay {
        Delay { delay, jitter, state: u64::from(seed) << 32 | 1 }
    }

    fn draw(&mut self) -> Duration {
        if self.jitter.is_zero() {
            return self.delay;
        }
        // xorshift64*: plenty for spreading packets.
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let unit = (self.state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        let offset = self.jitter.as_secs_f64() * (2.0 * unit - 1.0);
        Duration::from_secs_f64((self.delay.as_secs_f64() + offset).max(0.0))
    }
}

/// Holds every queued packet for its drawn delay until the agent is asked
/// to stop; then lets whatever it still holds go at once, so stopping the
/// fault loses no packet.
pub fn run(queue: &mut Queue, mut delay: Delay) -> io::Result<()> {
    let mut held: BinaryHeap<Reverse<(Instant, u32)>> = BinaryHeap::new();
    let mut arrived = Vec::new();
    while !lifecycle::stopping() {
        let now = Instant::now();
        while let Some(&Reverse((due, id))) = held.peek() {
            if due > now {
                break;
            }
            held.pop();
            queue.accept(id)?;
        }
        let next = held.peek().map_or(IDLE, |Reverse((due, _))| due.saturating_duration_since(now));
        if queue.wait(next.min(IDLE))? {
            let at = Instant::now();
            queue.receive(&mut arrived)?;
            for id in arrived.drain(..) {
                held.push(Reverse((at + delay.draw(), id)));
            }
        }
    }
    for Reverse((_, id)) in held.into_vec() {
        queue.accept(id)?;
    }
    Ok(())
}
