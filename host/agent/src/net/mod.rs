//! `net`: shapes the target's traffic from inside its network namespace.
//!
//! faultline-agent net [--delay-ms D [--jitter-ms J]] [--loss-percent P] [--rate-kbit R]
//!
//! The kernel decides the mechanism, and the ready line names it:
//! - delay, jitter and rate: netem where the kernel has it (one root qdisc
//!   per interface, egress); otherwise (no `sch_netem`) a userspace delay
//!   line on an NFQUEUE (inbound packets) and tbf (egress).
//! - loss: always an nftables random drop (inbound), so a loss combines
//!   with a delay whatever the kernel (two root qdiscs could not).
//!
//! Either way the added delay counts once per round trip, whether the
//! target is the client or the server. Everything is undone when the agent
//! is stopped or its time-to-live ends; if it is killed outright, the
//! kernel removes its nftables table and the queue's bypass lets traffic
//! through, but a qdisc (netem, tbf) stays until removed.

mod netlink;
mod nft;
mod queue;
mod tc;

use std::time::Duration;

use crate::{flag, lifecycle};

/// What to do to the traffic.
pub struct Shape {
    pub delay_ms: Option<f64>,
    pub jitter_ms: f64,
    pub loss_percent: Option<f64>,
    pub rate_kbit: Option<u32>,
}

fn number(args: &[String], name: &str, range: std::ops::RangeInclusive<f64>) -> Result<Option<f64>, String> {
    match flag(args, name) {
        None => Ok(None),
        Some(text) => match text.parse::<f64>() {
            Ok(v) if range.contains(&v) => Ok(Some(v)),
            _ => Err(format!("{name} must be a number in {}..={}, not `{text}`", range.start(), range.end())),
        },
    }
}

impl Shape {
    fn parse(args: &[String]) -> Result<Shape, String> {
        let shape = Shape {
            delay_ms: number(args, "--delay-ms", 0.0..=60_000.0)?,
            jitter_ms: number(args, "--jitter-ms", 0.0..=60_000.0)?.unwrap_or(0.0),
            loss_percent: number(args, "--loss-percent", 0.0..=100.0)?,
            rate_kbit: number(args, "--rate-kbit", 8.0..=100_000_000.0)?.map(|r| r as u32),
        };
        if shape.delay_ms.is_none() && shape.loss_percent.is_none() && shape.rate_kbit.is_none() {
            return Err("nothing to do: give --delay-ms, --loss-percent or --rate-kbit".into());
        }
        Ok(shape)
    }

    fn describe(&self) -> String {
        let mut parts = vec![];
        if let Some(d) = self.delay_ms {
            parts.push(if self.jitter_ms > 0.0 { format!("delay {d} ms ± {} ms", self.jitter_ms) } else { format!("delay {d} ms") });
        }
        if let Some(p) = self.loss_percent {
            parts.push(format!("loss {p} %"));
        }
        if let Some(r) = self.rate_kbit {
            parts.push(format!("rate {r} kbit/s"));
        }
        parts.join(", ")
    }
}

fn failed(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

pub fn run(args: &[String]) -> Result<(), String> {
    let shape = Shape::parse(args)?;
    lifecycle::undo_on_stop();
    let mut qdiscs = tc::Qdiscs::open().map_err(failed("opening rtnetlink"))?;
    let links = qdiscs.links().map_err(failed("listing interfaces"))?;
    if links.is_empty() {
        return Err("the target has no network interface besides loopback".into());
    }
    let names = links.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(",");
    let mut mechanisms = vec![];

    // Delay and rate: netem where the kernel has it.
    let mut netem = false;
    if shape.delay_ms.is_some() || shape.rate_kbit.is_some() {
        match qdiscs.add(&links, "netem", tc::netem_options(&shape)) {
            Ok(()) => {
                netem = true;
                mechanisms.push("delay and rate through netem (egress)".to_string());
            }
            // "Specified qdisc kind is unknown": this kernel has no netem.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => mechanisms.push("no netem in this kernel".to_string()),
            Err(e) => return Err(format!("adding netem on {names}: {e}")),
        }
    }

    // Names this agent's table and queue apart from another agent's in the same namespace.
    let id = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos() ^ d.as_secs() as u32);
    let mut queue = match shape.delay_ms {
        Some(_) if !netem => Some(queue::Queue::bind(id).map_err(failed("binding a netfilter queue"))?),
        _ => None,
    };
    // Loss always goes through nftables, so it combines with any delay.
    let rules = nft::Rules {
        loss: shape.loss_percent.map(|p| (p / 100.0 * f64::from(nft::LOSS_SCALE)).round() as u32),
        queue: queue.as_ref().map(|q| q.number),
    };
    let table = match rules.loss.is_some() || rules.queue.is_some() {
        true => Some(nft::Table::create(id, &rules).map_err(failed("creating the nftables table"))?),
        false => None,
    };
    if let Some(q) = &queue {
        mechanisms.push(format!("delay through NFQUEUE {} (inbound)", q.number));
    }
    if rules.loss.is_some() {
        mechanisms.push("loss through an nftables random drop (inbound)".to_string());
    }
    if let Some(kbit) = shape.rate_kbit.filter(|_| !netem) {
        qdiscs.add(&links, "tbf", tc::tbf_options(kbit)).map_err(failed("adding tbf"))?;
        mechanisms.push("rate through tbf (egress)".to_string());
    }
    let table_name = table.as_ref().map(|t| format!("; table inet {}", t.name)).unwrap_or_default();
    lifecycle::ready(&format!("{} on {names}: {}{table_name}", shape.describe(), mechanisms.join(", ")));

    let shaped = match &mut queue {
        Some(queue) => {
            let delay = Duration::from_secs_f64(shape.delay_ms.unwrap_or(0.0) / 1000.0);
            queue::run(queue, queue::Delay::new(delay, Duration::from_secs_f64(shape.jitter_ms / 1000.0), id))
                .map_err(failed("delaying packets"))
        }
        None => {
            while !lifecycle::stopping() {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(())
        }
    };
    let removed = table.map_or(Ok(()), |t| t.delete().map_err(failed("deleting the nftables table")));
    let unshaped = qdiscs.remove_all().map_err(failed("removing a qdisc"));
    shaped.and(removed).and(unshaped)
}
