//! Write a Faultline fault plugin: implement [`Fault`], then call
//! [`register_fault!`]. Build with `cargo build --release --target
//! wasm32-wasip2`; the `.wasm` it produces is the component the host loads.
//!
//! ```ignore
//! use faultline_sdk::{Fault, FaultError, FaultInfo, Settings, Target};
//!
//! struct Pause;
//! impl Fault for Pause {
//!     fn describe() -> FaultInfo { /* name, platforms, intensity ... */ }
//!     fn inject(target: Target, _: Settings) -> Result<String, FaultError> {
//!         faultline_sdk::docker::pause(&target.id)?;
//!         Ok(target.id)
//!     }
//!     fn revert(token: String) -> Result<(), FaultError> {
//!         Ok(faultline_sdk::docker::unpause(&token)?)
//!     }
//! }
//! faultline_sdk::register_fault!(Pause);
//! ```
//!
//! Fault drivers need little stack: linking with
//! `-C link-arg=-zstack-size=131072` (for example in `.cargo/config.toml`
//! under `[target.wasm32-wasip2]`) makes instantiation cheaper on hosts that
//! use the pooling allocator.
//!
//! A plugin's imports are its permission request: calling
//! `faultline_sdk::docker::*` makes the component import the docker
//! capability, which the operator must grant.

extern crate self as faultline_sdk;

#[doc(hidden)]
pub use wit_bindgen;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/since_v0.1.0",
        world: "fault-driver",
        pub_export_macro: true,
        default_bindings_module: "faultline_sdk::bindings",
        runtime_path: "faultline_sdk::wit_bindgen::rt",
    });
}

pub mod android;
pub mod helper;
mod settings;
pub mod web;

#[cfg(all(feature = "harness", not(target_arch = "wasm32")))]
pub mod harness;

pub use bindings::faultline::plugin::types::{
    CapabilityError, FaultError, FaultInfo, IntensityScope, IntensitySpec, Param, ParamKind, ParamSpec, ParamValue,
    Platform, Settings, Target,
};

/// The contract version this SDK builds plugins for.
pub const CONTRACT_VERSION: &str = "0.1.0";

/// Docker containers (needs the `docker` grant).
pub mod docker {
    pub use crate::bindings::faultline::plugin::docker::*;
}

/// Android devices through adb (needs the `adb` grant).
pub mod adb {
    pub use crate::bindings::faultline::plugin::adb::*;
}

/// HTTP fault rules in the fault proxy (needs the `proxy` grant).
pub mod proxy {
    pub use crate::bindings::faultline::plugin::proxy::*;
}

/// Time (needs the `clock` grant).
pub mod clock {
    pub use crate::bindings::faultline::plugin::clock::*;
}

/// Logs attributed to the plugin and experiment (needs the `log` grant).
pub mod log {
    use crate::bindings::faultline::plugin::log::{Level, write};

    pub fn debug(message: &str) {
        write(Level::Debug, message)
    }
    pub fn info(message: &str) {
        write(Level::Info, message)
    }
    pub fn warn(message: &str) {
        write(Level::Warn, message)
    }
    pub fn error(message: &str) {
        write(Level::Error, message)
    }
}

impl From<CapabilityError> for FaultError {
    fn from(e: CapabilityError) -> Self {
        FaultError::Capability(e)
    }
}

/// A fault driver. Keep no state between calls: everything needed to undo a
/// fault goes into the token that `inject` returns, because the host that
/// reverts it may be a restarted one.
pub trait Fault {
    /// Name, aliases, platforms, intensity range and parameters.
    fn describe() -> FaultInfo;

    /// Checks parameters beyond the declared range. The host has already
    /// checked intensity against the range and required parameters.
    fn validate(settings: Settings) -> Result<(), FaultError> {
        let _ = settings;
        Ok(())
    }

    /// Applies the fault to one target; returns the token that undoes it. On
    /// error, leave nothing behind on that target.
    fn inject(target: Target, settings: Settings) -> Result<String, FaultError>;

    /// Changes the intensity of an injected fault; returns the new token.
    /// By default a driver cannot adjust, and the host reverts and injects again.
    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        let _ = (token, settings);
        Err(FaultError::Failed("this fault cannot be adjusted in place".into()))
    }

    /// Undoes a fault from its token alone; succeeds if it is already gone.
    fn revert(token: String) -> Result<(), FaultError>;
}

#[doc(hidden)]
pub struct Adapter<F>(core::marker::PhantomData<F>);

impl<F: Fault> bindings::exports::faultline::plugin::fault::Guest for Adapter<F> {
    fn describe() -> FaultInfo {
        F::describe()
    }
    fn validate(settings: Settings) -> Result<(), FaultError> {
        F::validate(settings)
    }
    fn inject(target: Target, settings: Settings) -> Result<String, FaultError> {
        F::inject(target, settings)
    }
    fn adjust(token: String, settings: Settings) -> Result<String, FaultError> {
        F::adjust(token, settings)
    }
    fn revert(token: String) -> Result<(), FaultError> {
        F::revert(token)
    }
}

/// Exports a [`Fault`] implementation as the component's `fault` interface.
#[macro_export]
macro_rules! register_fault {
    ($fault:ty) => {
        type __FaultlineExport = $crate::Adapter<$fault>;
        $crate::bindings::export!(__FaultlineExport with_types_in $crate::bindings);
    };
}
