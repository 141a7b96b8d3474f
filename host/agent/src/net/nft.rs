//! The agent's nftables table, written over netlink (no `nft` binary in a
//! FROM-scratch image). It is created with the owner flag: the kernel
//! deletes it when the agent's netlink socket closes, so an agent that dies
//! any death leaves no rule behind. `nft list ruleset` in the target's
//! network namespace shows it as table `inet faultline_<id>`.
//!
//! Rules, on the input hook so that a drop is silent to the sender (a drop
//! on output returns EPERM to the sending application) and held packets do
//! not count against the sender's TCP small-queue budget:
//!   meta iif != lo numgen random mod 10000 < LOSS drop
//!   meta iif != lo queue num N bypass     (the iptables NFQUEUE target:
//!                                          this kernel lacks nft's own queue)

use std::io;

use netlink_packet_core::{DefaultNla, NLM_F_ACK, NLM_F_CREATE, NetlinkMessage};
use netlink_packet_netfilter::nftables::{
    ChainAttribute, Cmp, DataAttribute, Expressions, Hook, Immediate, InetHookNumber, ListAttribute, Meta, MetaKey,
    NfTablesMessage, Operator, Register, RuleAttribute, RuleMessage, TableAttribute, TableFlags, TableMessage, Verdict,
    VerdictAttribute,
};
use netlink_packet_netfilter::nftables::{ChainMessage, ExpressionAttribute};
use netlink_packet_netfilter::{NetfilterHeader, NetfilterMessage, NetfilterProtoFamily};

use super::netlink::Conn;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const CHAIN: &str = "input";
/// Loss is drawn out of this many, so it has a resolution of 0.01 %.
pub const LOSS_SCALE: u32 = 10_000;
const LOOPBACK_INDEX: u32 = 1;
const NF_DROP: u32 = 0;
// numgen and byteorder attributes (linux/netfilter/nf_tables.h).
const NFTA_NG_DREG: u16 = 1;
const NFTA_NG_MODULUS: u16 = 2;
const NFTA_NG_TYPE: u16 = 3;
const NFT_NG_RANDOM: u32 = 1;
const NFTA_BYTEORDER_SREG: u16 = 1;
const NFTA_BYTEORDER_DREG: u16 = 2;
const NFTA_BYTEORDER_OP: u16 = 3;
const NFTA_BYTEORDER_LEN: u16 = 4;
const NFTA_BYTEORDER_SIZE: u16 = 5;
const NFT_BYTEORDER_HTON: u32 = 1;
// The iptables compatibility target (nft_compat).
const NFTA_TARGET_NAME: u16 = 1;
const NFTA_TARGET_REV: u16 = 2;
const NFTA_TARGET_INFO: u16 = 3;
const NFQ_FLAG_BYPASS: u16 = 1;

/// What the table does to inbound packets.
pub struct Rules {
    /// Packets dropped per [`LOSS_SCALE`].
    pub loss: Option<u32>,
    /// The netfilter queue that holds packets for the delay line.
    pub queue: Option<u16>,
}

pub struct Table {
    conn: Conn,
    pub name: String,
}

impl Table {
    /// Creates the table `faultline_<id>`, its chain and rules in one
    /// batch: all or nothing.
    pub fn create(id: u32, rules: &Rules) -> io::Result<Table> {
        let mut conn = Conn::open(netlink_sys::constants::NETLINK_NETFILTER)?;
        let name = format!("faultline_{id:08x}");
        let table = TableMessage {
            attributes: vec![TableAttribute::Name(name.clone()), TableAttribute::Flags(TableFlags::Owner)],
        };
        let chain = ChainMessage {
            attributes: vec![
                ChainAttribute::Table(name.clone()),
                ChainAttribute::Name(CHAIN.into()),
                ChainAttribute::Type("filter".into()),
                ChainAttribute::Hook(vec![Hook::Number(InetHookNumber::LocalIn.into()), Hook::Priority(0)]),
                ChainAttribute::Policy(1),
            ],
        };
        let mut batch = vec![NfTablesMessage::NewTable(table), NfTablesMessage::NewChain(chain)];
        if let Some(loss) = rules.loss {
            batch.push(rule(&name, [not_loopback(), random_below(loss), vec![drop()]].concat()));
        }
        if let Some(queue) = rules.queue {
            batch.push(rule(&name, [not_loopback(), vec![nfqueue(queue)]].concat()));
        }
        conn.transact(framed(batch))?;
        Ok(Table { conn, name })
    }

    /// Deletes the table now (closing the socket would, a moment later).
    pub fn delete(mut self) -> io::Result<()> {
        let table = TableMessage { attributes: vec![TableAttribute::Name(self.name.clone())] };
        self.conn.transact(framed(vec![NfTablesMessage::DeleteTable(table)]))
    }
}

/// Frames nftables messages as one transaction.
fn framed(batch: Vec<NfTablesMessage>) -> Vec<NetlinkMessage<NetfilterMessage>> {
    use netlink_packet_netfilter::none::ControlMessage;
    let control = |message| {
        NetlinkMessage::from(NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::Unspec, 0, NFNL_SUBSYS_NFTABLES),
            message,
        ))
    };
    let mut messages = vec![control(ControlMessage::BatchBegin)];
    for message in batch {
        let mut message = NetlinkMessage::from(NetfilterMessage::new(
            NetfilterHeader::new(NetfilterProtoFamily::Inet, 0, 0),
            message,
        ));
        message.header.flags |= NLM_F_ACK | NLM_F_CREATE;
        messages.push(message);
    }
    messages.push(control(ControlMessage::BatchEnd));
    messages
}

fn rule(table: &str, expressions: Vec<Expressions>) -> NfTablesMessage {
    NfTablesMessage::NewRule(RuleMessage {
        attributes: vec![
            RuleAttribute::Table(table.into()),
            RuleAttribute::Chain(CHAIN.into()),
            RuleAttribute::Expressions(expressions.into_iter().map(ListAttribute::<ExpressionAttribute>::from).collect()),
        ],
    })
}

fn be(value: u32) -> Vec<u8> {
    value.to_be_bytes().to_vec()
}

fn nla(kind: u16, value: Vec<u8>) -> DefaultNla {
    DefaultNla::new(kind, value)
}

/// `meta iif != lo`: a target's own local traffic is left alone.
fn not_loopback() -> Vec<Expressions> {
    vec![
        Expressions::Meta(vec![Meta::Key(MetaKey::Iif), Meta::DestinationRegister(Register::Reg1)]),
        Expressions::Cmp(vec![
            Cmp::SourceRegister(Register::Reg1),
            Cmp::Op(Operator::NotEqual),
            Cmp::Data(DataAttribute::Value(LOOPBACK_INDEX.to_ne_bytes().to_vec())),
        ]),
    ]
}

/// `numgen random mod LOSS_SCALE < below`. numgen writes host byte order;
/// cmp compares bytes, so the number is turned big-endian first (as nft does).
fn random_below(below: u32) -> Vec<Expressions> {
    let reg = be(u32::from(Register::Reg1));
    let numgen = Expressions::Other {
        expression_type: "numgen".into(),
        attributes: vec![nla(NFTA_NG_DREG, reg.clone()), nla(NFTA_NG_MODULUS, be(LOSS_SCALE)), nla(NFTA_NG_TYPE, be(NFT_NG_RANDOM))],
    };
    let byteorder = Expressions::Other {
        expression_type: "byteorder".into(),
        attributes: vec![
            nla(NFTA_BYTEORDER_SREG, reg.clone()),
            nla(NFTA_BYTEORDER_DREG, reg),
            nla(NFTA_BYTEORDER_OP, be(NFT_BYTEORDER_HTON)),
            nla(NFTA_BYTEORDER_LEN, be(4)),
            nla(NFTA_BYTEORDER_SIZE, be(4)),
        ],
    };
    let compare = Expressions::Cmp(vec![
        Cmp::SourceRegister(Register::Reg1),
        Cmp::Op(Operator::LessThan),
        Cmp::Data(DataAttribute::Value(be(below))),
    ]);
    vec![numgen, byteorder, compare]
}

fn drop() -> Expressions {
    Expressions::Immediate(vec![
        Immediate::DestinationRegister(Register::Verdict),
        Immediate::Data(DataAttribute::Verdict(vec![VerdictAttribute::Code(Verdict::Other(NF_DROP))])),
    ])
}

/// The NFQUEUE target, revision 3 (`xt_NFQ_info_v3`: queue number, one
/// queue, bypass): with bypass the kernel lets packets through whenever no
/// reader is bound, so a dead agent never blackholes its target.
fn nfqueue(queue: u16) -> Expressions {
    let info = [queue.to_ne_bytes(), 1u16.to_ne_bytes(), NFQ_FLAG_BYPASS.to_ne_bytes()].concat();
    Expressions::Other {
        expression_type: "target".into(),
        attributes: vec![
            nla(NFTA_TARGET_NAME, b"NFQUEUE\0".to_vec()),
            nla(NFTA_TARGET_REV, be(3)),
            nla(NFTA_TARGET_INFO, info),
        ],
    }
}
