//! `settings get|put|delete|list [--user N] <namespace> [<key> [<value>]]`.

use std::sync::Arc;

use crate::device::Device;
use crate::shell::Output;

const NAMESPACES: [&str; 3] = ["global", "system", "secure"];

pub fn run(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let args: Vec<&str> = {
        let mut kept = vec![];
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match *a {
                "--user" => {
                    it.next();
                }
                a => kept.push(a),
            }
        }
        kept
    };
    let bad = |out: &mut Output| {
        out.err("Invalid command: ");
        out.err(format!("{}\n", args.join(" ")));
        255
    };
    match args.as_slice() {
        ["get", ns, key] if NAMESPACES.contains(ns) => {
            let value = device.state().setting(ns, key).cloned().unwrap_or_else(|| "null".into());
            out.out(format!("{value}\n"));
            0
        }
        ["put", ns, key, value, ..] if NAMESPACES.contains(ns) => {
            device.state().settings.insert((ns.to_string(), key.to_string()), value.to_string());
            0
        }
        ["delete", ns, key] if NAMESPACES.contains(ns) => {
            let removed = device.state().settings.remove(&(ns.to_string(), key.to_string())).is_some();
            out.out(format!("Deleted {} rows\n", u8::from(removed)));
            0
        }
        ["list", ns] if NAMESPACES.contains(ns) => {
            for ((n, k), v) in device.state().settings.iter() {
                if n == ns {
                    out.out(format!("{k}={v}\n"));
                }
            }
            0
        }
        _ => bad(out),
    }
}
