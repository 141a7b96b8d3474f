//! Helpers: the host's agent binary, run in a target container's
//! namespaces, from an image built locally (see `images`). Every
//! helper carries its time-to-live twice: the agent exits by itself, and
//! the container is labelled with its expiry so a later start sweeps it.

use std::collections::HashMap;
use std::sync::Arc;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, StartContainerOptions, StopContainerOptionsBuilder, WaitContainerOptionsBuilder,
};
use faultline_plugin_runtime::capability::CapResult;
use faultline_plugin_runtime::capability::docker::{HelperOwner, HelperSpec, Namespace, StartedHelper};
use faultline_plugin_runtime::model::CapabilityError;
use futures_util::StreamExt;
use tokio::sync::OnceCell;

use super::{CALL_TIMEOUT, capability_error, timed};
use crate::store::now_ms;

use super::images::{AGENT, scratch_image};
use super::signals;

/// Every helper carries this label; its value is the experiment-free owner tag.
pub const HELPER_LABEL: &str = "faultline.helper";
const EXPIRES_LABEL: &str = "faultline.expires";
/// The full id of the container whose namespaces the helper joined.
const TARGET_LABEL: &str = "faultline.target";
/// The experiment a plugin started the helper for: only it may remove the helper.
const EXPERIMENT_LABEL: &str = "faultline.experiment";
/// How long a stopped agent gets to undo its changes (the agent itself gives up after 5 s).
const STOP_GRACE_SECONDS: i32 = 6;
/// The agent's line saying its effect is in place.
const READY: &str = "ready: ";
/// How long an agent gets to report ready; it takes well under a second
/// on an idle machine, and a target frozen meanwhile must not hold the
/// injection for a whole call budget.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// Cheap to clone: a batch of signals is delivered from its own task.
#[derive(Clone)]
pub struct Helpers {
    pub(super) client: Docker,
    image: Arc<OnceCell<String>>,
    pub(super) signals: signals::Pending,
}

impl Helpers {
    pub fn new(client: Docker) -> Self {
        Helpers { client, image: Arc::new(OnceCell::new()), signals: Arc::default() }
    }

    /// The agent image, built on first use if this engine lacks it.
    async fn image(&self) -> CapResult<String> {
        self.image.get_or_try_init(|| scratch_image(&self.client, "faultline-agent", AGENT)).await.cloned()
    }

    /// Creates a helper container (not yet started); `experiment` is the
    /// one a plugin started it for, none for the host's own helpers.
    pub(super) async fn create(
        &self,
        args: Vec<String>,
        ttl_seconds: u32,
        target: &str,
        experiment: Option<&str>,
        host_config: HostConfig,
    ) -> CapResult<String> {
        let image = self.image().await?;
        let expires = now_ms() / 1000 + i64::from(ttl_seconds);
        let mut cmd = vec!["--ttl".to_string(), ttl_seconds.to_string()];
        cmd.extend(args);
        let mut labels = HashMap::from([
            (HELPER_LABEL.to_string(), "true".to_string()),
            (EXPIRES_LABEL.to_string(), expires.to_string()),
            (TARGET_LABEL.to_string(), target.to_string()),
        ]);
        labels.extend(experiment.map(|e| (EXPERIMENT_LABEL.to_string(), e.to_string())));
        let body = ContainerCreateBody {
            image: Some(image),
            cmd: Some(cmd),
            labels: Some(labels),
            host_config: Some(host_config),
            ..Default::default()
        };
        let name = format!("faultline-helper-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = timed("creating a helper", CALL_TIMEOUT, self.client.create_container(Some(options), body)).await?;
        Ok(created.id)
    }

    /// Starts a created helper; removes it again if it cannot start.
    pub(super) async fn start(&self, id: &str) -> CapResult<()> {
        let start = self.client.start_container(id, None::<StartContainerOptions>);
        if let Err(e) = timed("starting a helper", CALL_TIMEOUT, start).await {
            let _ = self.remove(id.to_string()).await;
            return Err(e);
        }
        Ok(())
    }

    /// Starts a helper in the target's namespaces for an experiment and
    /// waits for its agent's ready line; returns its container id and what
    /// the agent reported.
    pub async fn run(&self, spec: HelperSpec, experiment: &str) -> CapResult<StartedHelper> {
        let target = timed("inspecting a helper's target", CALL_TIMEOUT, self.client.inspect_container(&spec.target, None::<bollard::query_parameters::InspectContainerOptions>)).await?;
        let target_id = target.id.unwrap_or_default();
        let (running, paused) = target.state.map_or((false, false), |s| (s.running.unwrap_or(false), s.paused.unwrap_or(false)));
        if !running {
            return Err(CapabilityError::NotFound(format!("{} is not running", spec.target)));
        }
        // A helper under a paused target's cgroup would be frozen with it
        // and never report ready: for such a fault the target is not there.
        if paused && spec.share.contains(&Namespace::Cgroup) {
            return Err(CapabilityError::NotFound(format!("{} is paused", spec.target)));
        }
        let joined = format!("container:{target_id}");
        let share = |ns: Namespace| spec.share.contains(&ns).then(|| joined.clone());
        let cgroup_parent = if spec.share.contains(&Namespace::Cgroup) {
            // Under the target's own cgroup (cgroupfs driver): the target's
            // limits bind the helper and its stats include the helper's use.
            let parent = target.host_config.and_then(|h| h.cgroup_parent).filter(|p| !p.is_empty());
            Some(format!("{}/{target_id}", parent.as_deref().unwrap_or("/docker")))
        } else {
            None
        };
        let host_config = HostConfig {
            network_mode: share(Namespace::Network),
            pid_mode: share(Namespace::Pid),
            cgroup_parent,
            cap_add: (!spec.cap_add.is_empty()).then_some(spec.cap_add),
            auto_remove: Some(true),
            ..Default::default()
        };
        let id = self.create(spec.args, spec.ttl_seconds, &target_id, Some(experiment), host_config).await?;
        // One budget for starting and reporting: Docker cannot even start a
        // container under a cgroup frozen since the check above.
        let started = async { ready_line(self.attach_and_start(&id).await?).await };
        let ready = tokio::time::timeout(READY_TIMEOUT, started).await.unwrap_or_else(|_| {
            Err(CapabilityError::Timeout(format!("the agent did not start and report ready within {READY_TIMEOUT:?}")))
        });
        match ready {
            Ok(report) => Ok(StartedHelper { id, report }),
            Err(e) => {
                self.discard(id, spec.ttl_seconds);
                Err(e)
            }
        }
    }

    /// Removes a helper that never became ready. When Docker cannot remove
    /// it now (its target is frozen), keeps trying in the background until
    /// its time-to-live, so a helper that comes to life later does not act
    /// unseen for long.
    fn discard(&self, id: String, ttl_seconds: u32) {
        let helpers = self.clone();
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + std::time::Duration::from_secs(ttl_seconds.into());
            let mut wait = std::time::Duration::from_secs(1);
            loop {
                match helpers.remove(id.clone()).await {
                    Ok(()) => return,
                    Err(e) if tokio::time::Instant::now() >= until => {
                        tracing::warn!(helper = %id, "could not remove a helper that never became ready: {e}; its time-to-live ends it");
                        return;
                    }
                    Err(_) => tokio::time::sleep(wait).await,
                }
                wait = (wait * 2).min(std::time::Duration::from_secs(10));
            }
        });
    }

    /// Starts a created helper and returns its output stream, attached
    /// before the start so that nothing is missed, even from an agent that
    /// fails at once (and is then removed by Docker).
    pub(super) async fn attach_and_start(&self, id: &str) -> CapResult<Output> {
        let options = AttachContainerOptionsBuilder::default().stdout(true).stderr(true).stream(true).logs(true).build();
        let attached = timed("attaching to a helper", CALL_TIMEOUT, self.client.attach_container(id, Some(options))).await;
        let output = match attached {
            Ok(a) => a.output,
            Err(e) => {
                let _ = self.remove(id.to_string()).await;
                return Err(e);
            }
        };
        self.start(id).await?;
        Ok(output)
    }

    /// Stops a helper, giving its agent time to undo what it changed (a
    /// qdisc outlives its process), then removes it. One that is gone
    /// already is fine.
    pub async fn remove(&self, id: String) -> CapResult<()> {
        self.refuse_if_frozen(&id).await?;
        let stop = StopContainerOptionsBuilder::default().t(STOP_GRACE_SECONDS).build();
        let grace = CALL_TIMEOUT + std::time::Duration::from_secs(STOP_GRACE_SECONDS as u64);
        match timed("stopping a helper", grace, self.client.stop_container(&id, Some(stop))).await {
            Ok(()) | Err(CapabilityError::NotFound(_)) => {}
            // Already stopped, or being removed: removal below settles it.
            Err(CapabilityError::Failed(why)) if why.starts_with("304") || why.starts_with("409") => {}
            Err(e) => tracing::warn!(helper = %id, "stopping a helper: {e}; removing it by force"),
        }
        let options = RemoveContainerOptionsBuilder::default().force(true).build();
        match timed("removing a helper", CALL_TIMEOUT, self.client.remove_container(&id, Some(options))).await {
            Err(CapabilityError::NotFound(_)) => Ok(()),
            // Docker is already removing it (auto-remove after exit): done
            // only once it is gone, or "nothing left" would not yet be true.
            Err(CapabilityError::Failed(why)) if why.starts_with("409") => {
                let removed = WaitContainerOptionsBuilder::default().condition("removed").build();
                let mut wait = self.client.wait_container(&id, Some(removed));
                match tokio::time::timeout(CALL_TIMEOUT, wait.next()).await {
                    Ok(_) => Ok(()),
                    Err(_) => Err(CapabilityError::Timeout(format!("helper {id} was still being removed after {CALL_TIMEOUT:?}"))),
                }
            }
            other => other,
        }
    }

    /// A helper under a paused target's cgroup is frozen with it: it can
    /// neither undo its work nor die (cgroup v1 holds even SIGKILL) until
    /// the target is unpaused. Say so at once rather than hang on Docker;
    /// the caller retries later (the reconciler does, with backoff).
    async fn refuse_if_frozen(&self, id: &str) -> CapResult<()> {
        let options = || None::<bollard::query_parameters::InspectContainerOptions>;
        let Ok(helper) = timed("inspecting a helper", CALL_TIMEOUT, self.client.inspect_container(id, options())).await else {
            return Ok(()); // gone, or Docker will say why below
        };
        let under_target = helper.host_config.and_then(|h| h.cgroup_parent).is_some_and(|p| !p.is_empty());
        let target = helper.config.and_then(|c| c.labels).and_then(|l| l.get(TARGET_LABEL).cloned());
        let (Some(target), true) = (target, under_target) else { return Ok(()) };
        let inspected = timed("inspecting a helper's target", CALL_TIMEOUT, self.client.inspect_container(&target, options())).await;
        if inspected.ok().and_then(|t| t.state).and_then(|s| s.paused).unwrap_or(false) {
            return Err(CapabilityError::Unavailable(format!(
                "helper {} is frozen with its paused target; it can be removed once the target is unpaused",
                &id[..id.len().min(12)]
            )));
        }
        Ok(())
    }

    /// Whom a helper acts for, from its labels; `None` when `id` is not a helper.
    pub async fn owner(&self, id: &str) -> CapResult<Option<HelperOwner>> {
        let options = None::<bollard::query_parameters::InspectContainerOptions>;
        let helper = timed("inspecting a helper", CALL_TIMEOUT, self.client.inspect_container(id, options)).await?;
        let labels = helper.config.and_then(|c| c.labels).unwrap_or_default();
        if !labels.contains_key(HELPER_LABEL) {
            return Ok(None);
        }
        Ok(Some(HelperOwner {
            id: helper.id.unwrap_or_default(),
            target: labels.get(TARGET_LABEL).cloned().unwrap_or_default(),
            experiment: labels.get(EXPERIMENT_LABEL).cloned(),
        }))
    }

    /// Removes helpers whose time-to-live has passed: what a host that died
    /// left behind. Returns how many.
    pub async fn sweep_expired(&self) -> CapResult<usize> {
        let filters = HashMap::from([("label", vec![HELPER_LABEL.to_string()])]);
        let options = ListContainersOptionsBuilder::default().all(true).filters(&filters).build();
        let helpers = self.client.list_containers(Some(options)).await.map_err(capability_error)?;
        let now = now_ms() / 1000;
        let mut removed = 0;
        for helper in helpers {
            let expires = helper.labels.as_ref().and_then(|l| l.get(EXPIRES_LABEL)).and_then(|e| e.parse::<i64>().ok());
            if let Some(id) = helper.id.filter(|_| expires.is_none_or(|e| e <= now)) {
                self.remove(id).await?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// Reads an agent's output until its ready line; the rest of the line is
/// the agent's report. An agent that ends first failed: its error output says why.
/// A helper's standard output and error, as Docker streams them.
pub(super) type Output = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

async fn ready_line(mut output: Output) -> CapResult<String> {
    let mut said = String::new();
    while let Some(chunk) = output.next().await {
        let chunk = chunk.map_err(super::capability_error)?;
        said.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        let complete = said.split_inclusive('\n').filter(|l| l.ends_with('\n'));
        if let Some(report) = complete.into_iter().find_map(|l| l.strip_prefix(READY)) {
            return Ok(report.trim().to_string());
        }
    }
    let why = said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("no output").to_string();
    Err(CapabilityError::Failed(format!("the agent ended before it was ready: {why}")))
}
