//! Support for Faultline's end-to-end tests: building the test plugins,
//! running the host (as a real process, or in-process with a scripted
//! platform), talking to it over HTTP, and driving a real headless
//! Chromium against a test web application.

pub mod android;
pub mod browser;
pub mod client;
pub mod docker;
pub mod inproc;
pub mod origin;
pub mod paths;
pub mod process;
pub mod scripted;
pub mod webapp;

pub use browser::{Browser, BrowserOptions, Page};
pub use client::{Api, Reply};
pub use docker::DemoSystem;
pub use inproc::{InProcessHost, Options};
pub use process::HostProcess;
pub use scripted::{Misbehaviour, RecordingLog, ScriptedPlatform};
pub use webapp::WebApp;
