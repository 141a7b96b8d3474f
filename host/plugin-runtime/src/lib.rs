//! The runtime that hosts Faultline fault components.
//!
//! A fault component is a WebAssembly component of the `fault-driver` world
//! (`wit/since_v0.1.0`). This crate compiles it (caching the result on disk),
//! refuses it when it imports a capability its operator did not grant, and
//! runs its calls under a deadline and a memory cap. It knows nothing about
//! experiments: the host's engine drives it.

mod bindings;
pub mod capability;
mod engine;
mod error;
pub mod model;
mod plugin;
mod state;

pub use capability::{Capability, Grants, HostCapabilities};
pub use engine::{PluginEngine, RuntimeConfig};
pub use error::{CallError, LoadError};
pub use plugin::{FaultInstance, LoadedPlugin};

/// The contract version this runtime speaks.
pub const CONTRACT_PACKAGE: &str = "faultline:plugin";
/// Version of the contract package, as in `wit/since_v0.1.0`.
pub const CONTRACT_VERSION: &str = "0.1.0";
