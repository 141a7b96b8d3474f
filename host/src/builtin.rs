//! Fault plugins compiled into the host. Each is a component under
//! `plugins/`, embedded at build time, and loaded before the operator's.

use crate::plugins::Builtin;

pub static BUILTINS: &[Builtin] = &[];
