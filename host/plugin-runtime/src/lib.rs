//! The runtime that hosts Faultline fault components.
//!
//! A fault component is a WebAssembly component of the `fault-driver` world
//! (`wit/since_v0.1.0`). This crate compiles it (caching the result on disk),
//! refuses it when it imports a capability its operator did not grant, and
//! runs its calls under a deadline and a memory cap. Of an experiment it
//! knows only the [`Scope`] each instance is given, within which every
//! capability call must stay: the host's engine drives it.

mod bindings;
pub mod capability;
mod engine;
mod error;
pub mod model;
mod plugin;
mod scope;
mod state;

pub use capability::{Capability, Grants, HostCapabilities};
pub use engine::{PluginEngine, RuntimeConfig};
pub use error::{CallError, LoadError};
pub use plugin::{FaultInstance, LoadedPlugin};
pub use scope::Scope;

/// The contract version this runtime speaks.
pub const CONTRACT_PACKAGE: &str = "faultline:plugin";
/// Version of the contract package, as in `wit/since_v0.1.0`.
pub const CONTRACT_VERSION: &str = "0.1.0";
