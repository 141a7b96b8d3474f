//! `faultline:plugin/docker`: general container operations.

use std::sync::Arc;

use async_trait::async_trait;

use super::{CapResult, NotConfigured};
use crate::bindings::faultline::plugin::docker as wit;
use crate::state::StoreState;

pub use wit::{Container, ExecOutput, HelperSpec, Machine, Namespace, ResourceUsage, StartedHelper};

type WitResult<T> = wasmtime::Result<Result<T, wit::CapabilityError>>;

/// What the host offers plugins on Docker. The host's implementation talks
/// to the engine; the SDK's harness records calls instead.
#[async_trait]
pub trait Docker: Send + Sync {
    async fn engine_info(&self) -> CapResult<Machine>;
    async fn find(&self, selectors: Vec<String>) -> CapResult<Vec<Container>>;
    async fn inspect(&self, id: String) -> CapResult<Container>;
    async fn signal(&self, id: String, signal: String) -> CapResult<()>;
    async fn pause(&self, id: String) -> CapResult<()>;
    async fn unpause(&self, id: String) -> CapResult<()>;
    async fn restart(&self, id: String, timeout_seconds: u32) -> CapResult<()>;
    async fn exec(&self, id: String, command: Vec<String>, timeout_ms: u32) -> CapResult<ExecOutput>;
    async fn copy_in(&self, id: String, path: String, contents: Vec<u8>, mode: u32) -> CapResult<()>;
    async fn run_helper(&self, spec: HelperSpec) -> CapResult<StartedHelper>;
    async fn remove_helper(&self, helper: String) -> CapResult<()>;
    async fn stats(&self, id: String) -> CapResult<ResourceUsage>;
}

#[async_trait]
impl Docker for NotConfigured {
    async fn engine_info(&self) -> CapResult<Machine> {
        self.refuse()
    }
    async fn find(&self, _: Vec<String>) -> CapResult<Vec<Container>> {
        self.refuse()
    }
    async fn inspect(&self, _: String) -> CapResult<Container> {
        self.refuse()
    }
    async fn signal(&self, _: String, _: String) -> CapResult<()> {
        self.refuse()
    }
    async fn pause(&self, _: String) -> CapResult<()> {
        self.refuse()
    }
    async fn unpause(&self, _: String) -> CapResult<()> {
        self.refuse()
    }
    async fn restart(&self, _: String, _: u32) -> CapResult<()> {
        self.refuse()
    }
    async fn exec(&self, _: String, _: Vec<String>, _: u32) -> CapResult<ExecOutput> {
        self.refuse()
    }
    async fn copy_in(&self, _: String, _: String, _: Vec<u8>, _: u32) -> CapResult<()> {
        self.refuse()
    }
    async fn run_helper(&self, _: HelperSpec) -> CapResult<StartedHelper> {
        self.refuse()
    }
    async fn remove_helper(&self, _: String) -> CapResult<()> {
        self.refuse()
    }
    async fn stats(&self, _: String) -> CapResult<ResourceUsage> {
        self.refuse()
    }
}

pub(crate) struct DockerSlot(pub Arc<dyn Docker>);

fn wit<T>(r: CapResult<T>) -> WitResult<T> {
    Ok(r.map_err(Into::into))
}

impl wit::Host for DockerSlot {
    async fn engine_info(&mut self) -> WitResult<Machine> {
        wit(self.0.engine_info().await)
    }
    async fn find(&mut self, selectors: Vec<String>) -> WitResult<Vec<Container>> {
        wit(self.0.find(selectors).await)
    }
    async fn inspect(&mut self, id: String) -> WitResult<Container> {
        wit(self.0.inspect(id).await)
    }
    async fn signal(&mut self, id: String, signal: String) -> WitResult<()> {
        wit(self.0.signal(id, signal).await)
    }
    async fn pause(&mut self, id: String) -> WitResult<()> {
        wit(self.0.pause(id).await)
    }
    async fn unpause(&mut self, id: String) -> WitResult<()> {
        wit(self.0.unpause(id).await)
    }
    async fn restart(&mut self, id: String, timeout_seconds: u32) -> WitResult<()> {
        wit(self.0.restart(id, timeout_seconds).await)
    }
    async fn exec(&mut self, id: String, command: Vec<String>, timeout_ms: u32) -> WitResult<ExecOutput> {
        wit(self.0.exec(id, command, timeout_ms).await)
    }
    async fn copy_in(&mut self, id: String, path: String, contents: Vec<u8>, mode: u32) -> WitResult<()> {
        wit(self.0.copy_in(id, path, contents, mode).await)
    }
    async fn run_helper(&mut self, spec: HelperSpec) -> WitResult<StartedHelper> {
        wit(self.0.run_helper(spec).await)
    }
    async fn remove_helper(&mut self, helper: String) -> WitResult<()> {
        wit(self.0.remove_helper(helper).await)
    }
    async fn stats(&mut self, id: String) -> WitResult<ResourceUsage> {
        wit(self.0.stats(id).await)
    }
}

struct HasDocker;
impl wasmtime::component::HasData for HasDocker {
    type Data<'a> = &'a mut DockerSlot;
}

pub(crate) fn link(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<StoreState, HasDocker>(linker, |s| &mut s.docker)
}
