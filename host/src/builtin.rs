//! Fault plugins compiled into the host: each folder under `plugins/` is a
//! component, built and embedded by `build.rs`, and loaded before the
//! operator's plugins.

use crate::plugins::Builtin;

include!(concat!(env!("OUT_DIR"), "/builtins.rs"));
