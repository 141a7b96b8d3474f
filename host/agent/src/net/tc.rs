//! Traffic control over rtnetlink (no `tc` binary in a FROM-scratch image):
//! a root qdisc on each of the target's interfaces. Unlike the nftables
//! table, a qdisc outlives the process that added it, so [`Qdiscs`] removes
//! what it added when dropped, and the agent undoes it before it exits.

use std::io;

use netlink_packet_core::{DefaultNla, Emitable, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NetlinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage};

use super::Shape;
use super::netlink::Conn;

const TCA_OPTIONS: u16 = 2;
// netem (linux/pkt_sched.h)
const TCA_NETEM_RATE: u16 = 6;
const TCA_NETEM_LATENCY64: u16 = 10;
const TCA_NETEM_JITTER64: u16 = 11;
const NETEM_LIMIT: u32 = 10_000;
// tbf
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_BURST: u16 = 6;
const TC_LINKLAYER_ETHERNET: u8 = 1;
const MIN_BURST: u32 = 2 * 1514;

/// An interface of the target's network namespace.
pub struct Link {
    pub index: u32,
    pub name: String,
}

pub struct Qdiscs {
    conn: Conn,
    added: Vec<u32>,
}

impl Qdiscs {
    pub fn open() -> io::Result<Qdiscs> {
        Ok(Qdiscs { conn: Conn::open(netlink_sys::constants::NETLINK_ROUTE)?, added: vec![] })
    }

    /// The namespace's interfaces other than loopback.
    pub fn links(&mut self) -> io::Result<Vec<Link>> {
        let request = NetlinkMessage::from(RouteNetlinkMessage::GetLink(LinkMessage::default()));
        let mut links = vec![];
        for answer in self.conn.dump(request)? {
            let RouteNetlinkMessage::NewLink(link) = answer else { continue };
            if link.header.flags.contains(LinkFlags::Loopback) {
                continue;
            }
            let name = link.attributes.iter().find_map(|a| match a {
                LinkAttribute::IfName(n) => Some(n.clone()),
                _ => None,
            });
            links.push(Link { index: link.header.index, name: name.unwrap_or_default() });
        }
        Ok(links)
    }

    /// Adds a root qdisc of `kind` to every link; all or none. An interface
    /// that already has a root qdisc of its own is refused (EEXIST), so a
    /// second network fault never replaces the first one's qdisc.
    pub fn add(&mut self, links: &[Link], kind: &str, options: Vec<u8>) -> io::Result<()> {
        for link in links {
            let mut message = TcMessage::default();
            message.header.index = link.index as i32;
            message.header.parent = TcHandle::ROOT;
            message.attributes = vec![TcAttribute::Kind(kind.into()), TcAttribute::Other(DefaultNla::new(TCA_OPTIONS, options.clone()))];
            let mut request = NetlinkMessage::from(RouteNetlinkMessage::NewQueueDiscipline(message));
            request.header.flags |= NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
            if let Err(e) = self.conn.transact(vec![request]) {
                let _ = self.remove_all(); // the refusal is what to report
                return Err(e);
            }
            self.added.push(link.index);
        }
        Ok(())
    }

    /// Removes every qdisc this agent added; returns the first failure.
    pub fn remove_all(&mut self) -> io::Result<()> {
        let mut outcome = Ok(());
        for index in std::mem::take(&mut self.added) {
            let mut message = TcMessage::default();
            message.header.index = index as i32;
            message.header.parent = TcHandle::ROOT;
            let mut request = NetlinkMessage::from(RouteNetlinkMessage::DelQueueDiscipline(message));
            request.header.flags |= NLM_F_ACK;
            if let Err(e) = self.conn.transact(vec![request]) {
                outcome = outcome.and(Err(e));
            }
        }
        outcome
    }
}

impl Drop for Qdiscs {
    fn drop(&mut self) {
        let _ = self.remove_all();
    }
}

fn nlas(attributes: &[DefaultNla]) -> Vec<u8> {
    let mut bytes = vec![0; attributes.buffer_len()];
    attributes.emit(&mut bytes);
    bytes
}

fn u32s(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// netem's options: `struct tc_netem_qopt` followed by attributes. Delay and
/// jitter go in the 64-bit nanosecond attributes (Linux 4.15 and later), so
/// no psched tick conversion is needed. Loss is left to nftables.
pub fn netem_options(shape: &Shape) -> Vec<u8> {
    // latency, limit, loss, gap, duplicate, jitter
    let mut options = u32s(&[0, NETEM_LIMIT, 0, 0, 0, 0]);
    let nanos = |ms: f64| ((ms * 1e6) as i64).to_ne_bytes().to_vec();
    let mut attributes = vec![];
    if let Some(delay) = shape.delay_ms {
        attributes.push(DefaultNla::new(TCA_NETEM_LATENCY64, nanos(delay)));
        attributes.push(DefaultNla::new(TCA_NETEM_JITTER64, nanos(shape.jitter_ms)));
    }
    if let Some(kbit) = shape.rate_kbit {
        // struct tc_netem_rate: rate (bytes/s), packet_overhead, cell_size, cell_overhead
        attributes.push(DefaultNla::new(TCA_NETEM_RATE, u32s(&[bytes_per_second(kbit), 0, 0, 0])));
    }
    options.extend(nlas(&attributes));
    options
}

/// tbf's options: `struct tc_tbf_qopt` with an Ethernet link layer (so the
/// kernel needs no rate table) and the burst in bytes. The queue holds up to
/// 200 ms at the rate; the burst is 10 ms at the rate, at least two frames.
pub fn tbf_options(kbit: u32) -> Vec<u8> {
    let rate = bytes_per_second(kbit);
    let burst = (rate / 100).max(MIN_BURST);
    let limit = rate / 5 + burst;
    // struct tc_ratespec: cell_log, linklayer, overhead, cell_align, mpu, rate
    let mut ratespec = vec![0u8, TC_LINKLAYER_ETHERNET];
    ratespec.extend([0u8; 6]);
    ratespec.extend(rate.to_ne_bytes());
    let mut parms = ratespec;
    parms.extend([0u8; 12]); // no peak rate
    parms.extend(u32s(&[limit, 0, 0])); // limit, buffer (given as burst below), mtu
    nlas(&[DefaultNla::new(TCA_TBF_PARMS, parms), DefaultNla::new(TCA_TBF_BURST, burst.to_ne_bytes().to_vec())])
}

fn bytes_per_second(kbit: u32) -> u32 {
    (u64::from(kbit) * 1000 / 8).min(u64::from(u32::MAX)) as u32
}
