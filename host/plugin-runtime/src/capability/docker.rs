//! `faultline:plugin/docker`: general container operations, within scope.
//!
//! Every call on a container is checked before the host sees it: the
//! container must be one of the instance's targets, named by its full id
//! (the id the host handed the plugin; a name or an id prefix is denied,
//! since either could come to mean another container), and must not be one
//! the host protects, whatever the plan says. Helpers may join only a
//! target, with Linux capabilities from the operator's allowlist, and may be
//! removed only by the experiment that started them, for the same target.
//! Anything else is `denied`, without a call to Docker.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;

use super::{CapResult, HostCapabilities, NotConfigured};
use crate::bindings::faultline::plugin::docker as wit;
use crate::model::CapabilityError;
use crate::scope::Scope;
use crate::state::StoreState;

pub use wit::{Container, ExecOutput, HelperSpec, Machine, Namespace, ResourceUsage, StartedHelper};

type WitResult<T> = wasmtime::Result<Result<T, wit::CapabilityError>>;

/// What the host offers plugins on Docker. The host's implementation talks
/// to the engine; the SDK's harness records calls instead. The slot below
/// has checked the scope before any of these is called.
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
    /// Starts a helper, labelled with the experiment it acts for.
    async fn run_helper(&self, spec: HelperSpec, experiment: &str) -> CapResult<StartedHelper>;
    async fn remove_helper(&self, helper: String) -> CapResult<()>;
    async fn stats(&self, id: String) -> CapResult<ResourceUsage>;

    /// Why no plugin may ever reach this container, if none may (the host's
    /// never-targets: protected label, its own container, `--protect`).
    async fn protection(&self, id: &str) -> CapResult<Option<String>>;
    /// Whom a helper was started for, read from the helper itself (a fresh
    /// instance after a restart reverts from its token alone); `None` when
    /// the container is not a helper.
    async fn helper_owner(&self, id: &str) -> CapResult<Option<HelperOwner>>;
}

/// The experiment and target a helper acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelperOwner {
    /// The helper's full container id.
    pub id: String,
    pub target: String,
    pub experiment: Option<String>,
}

/// Linux capabilities a plugin may add to its helpers. A helper runs in a
/// target's namespaces; SYS_ADMIN or SYS_PTRACE there would reach far past
/// the fault, so only what the built-in faults need is allowed by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelperCaps(BTreeSet<String>);

impl HelperCaps {
    /// What the built-ins ask for: NET_ADMIN to shape a target's traffic.
    pub const DEFAULT: [&str; 1] = ["NET_ADMIN"];

    /// The default allowlist plus the operator's additions.
    pub fn with(extra: &[String]) -> HelperCaps {
        HelperCaps(Self::DEFAULT.iter().map(|c| c.to_string()).chain(extra.iter().map(|c| normalize(c))).collect())
    }

    pub fn allows(&self, cap: &str) -> bool {
        self.0.contains(&normalize(cap))
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

impl Default for HelperCaps {
    fn default() -> Self {
        HelperCaps::with(&[])
    }
}

/// Docker accepts `net_admin`, `NET_ADMIN` and `CAP_NET_ADMIN` alike.
fn normalize(cap: &str) -> String {
    let upper = cap.trim().to_ascii_uppercase();
    upper.strip_prefix("CAP_").map(str::to_string).unwrap_or(upper)
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
    async fn run_helper(&self, _: HelperSpec, _: &str) -> CapResult<StartedHelper> {
        self.refuse()
    }
    async fn remove_helper(&self, _: String) -> CapResult<()> {
        self.refuse()
    }
    async fn stats(&self, _: String) -> CapResult<ResourceUsage> {
        self.refuse()
    }
    async fn protection(&self, _: &str) -> CapResult<Option<String>> {
        self.refuse()
    }
    async fn helper_owner(&self, _: &str) -> CapResult<Option<HelperOwner>> {
        self.refuse()
    }
}

/// One instance's docker: the host's implementation behind its scope.
pub(crate) struct DockerSlot {
    host: Arc<dyn Docker>,
    scope: Scope,
    helper_caps: Arc<HelperCaps>,
}

fn denied<T>(why: String) -> CapResult<T> {
    Err(CapabilityError::Denied(why))
}

impl DockerSlot {
    pub(crate) fn new(caps: &HostCapabilities, scope: &Scope) -> Self {
        DockerSlot { host: caps.docker.clone(), scope: scope.clone(), helper_caps: caps.helper_caps.clone() }
    }

    /// The scope check of every call on a container.
    async fn target(&self, id: &str) -> CapResult<()> {
        if !self.scope.covers(id) {
            return denied(format!("container `{id}` is not a target of this experiment (targets are named by full id)"));
        }
        match self.host.protection(id).await? {
            Some(reason) => denied(format!("container `{id}` is protected: {reason}")),
            None => Ok(()),
        }
    }

    /// What of a `find` the instance may see: its unprotected targets.
    async fn visible(&self, found: Vec<Container>) -> CapResult<Vec<Container>> {
        let mut visible = vec![];
        for c in found {
            if self.scope.covers(&c.id) && self.host.protection(&c.id).await?.is_none() {
                visible.push(c);
            }
        }
        Ok(visible)
    }

    /// A helper joins only a target, with allowed capabilities.
    async fn helper_spec(&self, spec: &HelperSpec) -> CapResult<()> {
        self.target(&spec.target).await?;
        match spec.cap_add.iter().find(|c| !self.helper_caps.allows(c)) {
            Some(cap) => {
                let allowed: Vec<_> = self.helper_caps.iter().collect();
                denied(format!("helpers may not have {cap} (allowed: {}; the operator adds more with --helper-cap)", allowed.join(", ")))
            }
            None => Ok(()),
        }
    }

    /// The full id of a helper this experiment started for one of its
    /// targets; `None` when it is gone (removed already, as the contract says).
    async fn own_helper(&self, helper: &str) -> CapResult<Option<String>> {
        let owner = match self.host.helper_owner(helper).await {
            Ok(Some(owner)) => owner,
            Ok(None) => return denied(format!("`{helper}` is not a helper")),
            Err(CapabilityError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let ours = owner.experiment.is_some() && owner.experiment.as_deref() == self.scope.experiment_id();
        match ours && self.scope.covers(&owner.target) {
            true => Ok(Some(owner.id)),
            false => denied(format!("helper `{helper}` was not started by this experiment for one of its targets")),
        }
    }
}

fn wit<T>(r: CapResult<T>) -> WitResult<T> {
    Ok(r.map_err(Into::into))
}

impl wit::Host for DockerSlot {
    /// Says only what the machine is: nothing to scope.
    async fn engine_info(&mut self) -> WitResult<Machine> {
        wit(self.host.engine_info().await)
    }
    async fn find(&mut self, selectors: Vec<String>) -> WitResult<Vec<Container>> {
        wit(async { self.visible(self.host.find(selectors).await?).await }.await)
    }
    async fn inspect(&mut self, id: String) -> WitResult<Container> {
        wit(async { self.target(&id).await?; self.host.inspect(id).await }.await)
    }
    async fn signal(&mut self, id: String, signal: String) -> WitResult<()> {
        wit(async { self.target(&id).await?; self.host.signal(id, signal).await }.await)
    }
    async fn pause(&mut self, id: String) -> WitResult<()> {
        wit(async { self.target(&id).await?; self.host.pause(id).await }.await)
    }
    async fn unpause(&mut self, id: String) -> WitResult<()> {
        wit(async { self.target(&id).await?; self.host.unpause(id).await }.await)
    }
    async fn restart(&mut self, id: String, timeout_seconds: u32) -> WitResult<()> {
        wit(async { self.target(&id).await?; self.host.restart(id, timeout_seconds).await }.await)
    }
    async fn exec(&mut self, id: String, command: Vec<String>, timeout_ms: u32) -> WitResult<ExecOutput> {
        wit(async { self.target(&id).await?; self.host.exec(id, command, timeout_ms).await }.await)
    }
    async fn copy_in(&mut self, id: String, path: String, contents: Vec<u8>, mode: u32) -> WitResult<()> {
        wit(async { self.target(&id).await?; self.host.copy_in(id, path, contents, mode).await }.await)
    }
    async fn run_helper(&mut self, spec: HelperSpec) -> WitResult<StartedHelper> {
        let experiment = self.scope.experiment_id().unwrap_or_default();
        wit(async { self.helper_spec(&spec).await?; self.host.run_helper(spec, experiment).await }.await)
    }
    async fn remove_helper(&mut self, helper: String) -> WitResult<()> {
        wit(async {
            match self.own_helper(&helper).await? {
                Some(id) => self.host.remove_helper(id).await,
                None => Ok(()),
            }
        }
        .await)
    }
    async fn stats(&mut self, id: String) -> WitResult<ResourceUsage> {
        wit(async { self.target(&id).await?; self.host.stats(id).await }.await)
    }
}

struct HasDocker;
impl wasmtime::component::HasData for HasDocker {
    type Data<'a> = &'a mut DockerSlot;
}

pub(crate) fn link(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<StoreState, HasDocker>(linker, |s| &mut s.caps.docker)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use wit::Host as _;

    use super::*;

    const TARGET: &str = "aaaa000000000000000000000000000000000000000000000000000000000001";
    const BYSTANDER: &str = "bbbb000000000000000000000000000000000000000000000000000000000002";
    const GUARDED: &str = "cccc000000000000000000000000000000000000000000000000000000000003";

    /// A Docker that records what reached it.
    #[derive(Default)]
    struct Fake {
        calls: Mutex<Vec<String>>,
        helpers: Vec<HelperOwner>,
    }

    impl Fake {
        fn reached(&self) -> Vec<String> {
            self.calls.lock().unwrap().clone()
        }
        fn call(&self, what: String) {
            self.calls.lock().unwrap().push(what);
        }
    }

    fn container(id: &str) -> Container {
        Container {
            id: id.into(),
            name: id[..4].into(),
            image: String::new(),
            labels: vec![],
            state: "running".into(),
            pid: Some(1),
            restart_count: 0,
            health: None,
            memory_limit: None,
            cpu_limit: None,
        }
    }

    #[async_trait]
    impl Docker for Fake {
        async fn engine_info(&self) -> CapResult<Machine> {
            self.call("engine_info".into());
            Ok(Machine { cpus: 1, memory_bytes: 1, kernel: String::new(), cgroup_driver: String::new() })
        }
        async fn find(&self, _: Vec<String>) -> CapResult<Vec<Container>> {
            self.call("find".into());
            Ok([TARGET, BYSTANDER, GUARDED].map(container).to_vec())
        }
        async fn inspect(&self, id: String) -> CapResult<Container> {
            self.call(format!("inspect {id}"));
            Ok(container(&id))
        }
        async fn signal(&self, id: String, _: String) -> CapResult<()> {
            self.call(format!("signal {id}"));
            Ok(())
        }
        async fn pause(&self, id: String) -> CapResult<()> {
            self.call(format!("pause {id}"));
            Ok(())
        }
        async fn unpause(&self, id: String) -> CapResult<()> {
            self.call(format!("unpause {id}"));
            Ok(())
        }
        async fn restart(&self, id: String, _: u32) -> CapResult<()> {
            self.call(format!("restart {id}"));
            Ok(())
        }
        async fn exec(&self, id: String, _: Vec<String>, _: u32) -> CapResult<ExecOutput> {
            self.call(format!("exec {id}"));
            Ok(ExecOutput { exit_code: 0, stdout: String::new(), stderr: String::new() })
        }
        async fn copy_in(&self, id: String, _: String, _: Vec<u8>, _: u32) -> CapResult<()> {
            self.call(format!("copy_in {id}"));
            Ok(())
        }
        async fn run_helper(&self, spec: HelperSpec, experiment: &str) -> CapResult<StartedHelper> {
            self.call(format!("run_helper {} for {experiment}", spec.target));
            Ok(StartedHelper { id: "h".into(), report: String::new() })
        }
        async fn remove_helper(&self, helper: String) -> CapResult<()> {
            self.call(format!("remove_helper {helper}"));
            Ok(())
        }
        async fn stats(&self, id: String) -> CapResult<ResourceUsage> {
            self.call(format!("stats {id}"));
            Ok(ResourceUsage { cpu_percent: 0.0, memory_bytes: 0, memory_limit: 0, online_cpus: 1 })
        }
        async fn protection(&self, id: &str) -> CapResult<Option<String>> {
            Ok((id == GUARDED).then(|| "labelled faultline.protected=true".into()))
        }
        async fn helper_owner(&self, id: &str) -> CapResult<Option<HelperOwner>> {
            match self.helpers.iter().find(|h| h.id == id || h.id.starts_with(id)) {
                Some(owner) => Ok(Some(owner.clone())),
                None if id == "gone" => Err(CapabilityError::NotFound(id.into())),
                None => Ok(None),
            }
        }
    }

    fn slot(fake: Arc<Fake>, scope: Scope, extra_caps: &[&str]) -> DockerSlot {
        let extra: Vec<String> = extra_caps.iter().map(|c| c.to_string()).collect();
        DockerSlot { host: fake, scope, helper_caps: Arc::new(HelperCaps::with(&extra)) }
    }

    /// Scoped to TARGET, and (since the engine never plans one, by mistake) GUARDED.
    fn scoped(fake: &Arc<Fake>) -> DockerSlot {
        slot(fake.clone(), Scope::experiment("exp-1", [TARGET.to_string(), GUARDED.to_string()]), &[])
    }

    fn is_denied<T: std::fmt::Debug>(r: WitResult<T>) -> bool {
        matches!(r.expect("no trap"), Err(wit::CapabilityError::Denied(_)))
    }

    fn spec(target: &str, caps: &[&str]) -> HelperSpec {
        HelperSpec { target: target.into(), args: vec![], share: vec![Namespace::Network], cap_add: caps.iter().map(|c| c.to_string()).collect(), ttl_seconds: 60 }
    }

    #[tokio::test]
    async fn calls_on_a_target_reach_docker() {
        let fake = Arc::new(Fake::default());
        let mut s = scoped(&fake);
        s.inspect(TARGET.into()).await.unwrap().unwrap();
        s.signal(TARGET.into(), "SIGKILL".into()).await.unwrap().unwrap();
        s.exec(TARGET.into(), vec!["true".into()], 1000).await.unwrap().unwrap();
        s.stats(TARGET.into()).await.unwrap().unwrap();
        s.run_helper(spec(TARGET, &["NET_ADMIN"])).await.unwrap().unwrap();
        assert_eq!(fake.reached(), [
            format!("inspect {TARGET}"),
            format!("signal {TARGET}"),
            format!("exec {TARGET}"),
            format!("stats {TARGET}"),
            format!("run_helper {TARGET} for exp-1"),
        ]);
    }

    #[tokio::test]
    async fn every_call_on_a_bystander_is_denied_before_docker_sees_it() {
        let fake = Arc::new(Fake::default());
        let mut s = scoped(&fake);
        assert!(is_denied(s.inspect(BYSTANDER.into()).await));
        assert!(is_denied(s.signal(BYSTANDER.into(), "SIGKILL".into()).await));
        assert!(is_denied(s.pause(BYSTANDER.into()).await));
        assert!(is_denied(s.unpause(BYSTANDER.into()).await));
        assert!(is_denied(s.restart(BYSTANDER.into(), 1).await));
        assert!(is_denied(s.exec(BYSTANDER.into(), vec!["touch".into(), "/x".into()], 1000).await));
        assert!(is_denied(s.copy_in(BYSTANDER.into(), "/x".into(), vec![], 0o644).await));
        assert!(is_denied(s.stats(BYSTANDER.into()).await));
        assert!(is_denied(s.run_helper(spec(BYSTANDER, &[])).await));
        assert!(fake.reached().is_empty(), "{:?}", fake.reached());
    }

    #[tokio::test]
    async fn a_target_named_by_name_or_id_prefix_is_denied() {
        let fake = Arc::new(Fake::default());
        let mut s = scoped(&fake);
        assert!(is_denied(s.signal(TARGET[..12].into(), "SIGKILL".into()).await));
        assert!(is_denied(s.signal("aaaa".into(), "SIGKILL".into()).await));
        assert!(fake.reached().is_empty());
    }

    #[tokio::test]
    async fn a_protected_container_is_denied_even_when_in_scope() {
        let fake = Arc::new(Fake::default());
        let mut s = scoped(&fake);
        assert!(is_denied(s.signal(GUARDED.into(), "SIGKILL".into()).await));
        assert!(is_denied(s.exec(GUARDED.into(), vec![], 1000).await));
        assert!(is_denied(s.run_helper(spec(GUARDED, &[])).await));
        assert!(fake.reached().is_empty());
    }

    #[tokio::test]
    async fn find_returns_only_unprotected_targets() {
        let fake = Arc::new(Fake::default());
        let found = scoped(&fake).find(vec!["app=shop".into()]).await.unwrap().unwrap();
        assert_eq!(found.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [TARGET]);
    }

    #[tokio::test]
    async fn describe_and_validate_reach_nothing_but_the_machine() {
        let fake = Arc::new(Fake::default());
        let mut s = slot(fake.clone(), Scope::none(), &[]);
        assert!(is_denied(s.inspect(TARGET.into()).await));
        assert!(s.find(vec![]).await.unwrap().unwrap().is_empty());
        s.engine_info().await.unwrap().unwrap();
        assert_eq!(fake.reached(), ["find", "engine_info"]);
    }

    #[tokio::test]
    async fn helper_capabilities_come_from_the_allowlist() {
        let fake = Arc::new(Fake::default());
        let mut s = scoped(&fake);
        assert!(is_denied(s.run_helper(spec(TARGET, &["SYS_ADMIN"])).await));
        assert!(is_denied(s.run_helper(spec(TARGET, &["NET_ADMIN", "cap_sys_ptrace"])).await));
        s.run_helper(spec(TARGET, &["cap_net_admin"])).await.unwrap().unwrap();
        assert_eq!(fake.reached().len(), 1, "only the allowed one ran");

        let mut extended = slot(fake.clone(), Scope::experiment("exp-1", [TARGET.to_string()]), &["CAP_SYS_PTRACE"]);
        extended.run_helper(spec(TARGET, &["SYS_PTRACE", "NET_ADMIN"])).await.unwrap().unwrap();
        assert_eq!(fake.reached().len(), 2, "an operator's addition is allowed");
    }

    #[tokio::test]
    async fn only_the_experiments_own_helpers_on_its_targets_can_be_removed() {
        let owner = |id: &str, target: &str, experiment: Option<&str>| HelperOwner {
            id: id.into(),
            target: target.into(),
            experiment: experiment.map(Into::into),
        };
        let fake = Arc::new(Fake {
            helpers: vec![
                owner("mine-full-id", TARGET, Some("exp-1")),
                owner("other-experiment", TARGET, Some("exp-2")),
                owner("other-target", BYSTANDER, Some("exp-1")),
                owner("unlabelled", TARGET, None),
            ],
            ..Fake::default()
        });
        // A fresh instance, as after a restart: it never started any of them.
        let mut s = slot(fake.clone(), Scope::experiment("exp-1", [TARGET.to_string()]), &[]);
        s.remove_helper("mine".into()).await.unwrap().unwrap();
        for theirs in ["other-experiment", "other-target", "unlabelled", BYSTANDER] {
            assert!(is_denied(s.remove_helper(theirs.into()).await), "{theirs}");
        }
        s.remove_helper("gone".into()).await.unwrap().expect("removing a helper that is gone succeeds");
        assert_eq!(fake.reached(), ["remove_helper mine-full-id"], "the resolved id, and only ours");
    }

    #[test]
    fn the_default_allowlist_covers_what_the_built_ins_ask_for() {
        let caps = HelperCaps::default();
        assert!(caps.allows("NET_ADMIN") && caps.allows("net_admin") && caps.allows("CAP_NET_ADMIN"));
        assert!(!caps.allows("SYS_ADMIN") && !caps.allows("ALL"));
    }
}
