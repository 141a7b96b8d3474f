//! The host's implementations of plugin capabilities, one folder each.
//! The traits they implement live in the plugin runtime.

pub mod adb;
pub mod docker;
pub mod proxy;
