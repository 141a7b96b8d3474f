//! The docker capability, through bollard. Honours `DOCKER_HOST`; every
//! call has its own timeout, because a wasm deadline cannot interrupt a
//! host call. The plugin runtime's docker slot checks each plugin call
//! against its instance's scope before it reaches this module; what the
//! slot asks of the host (is a container protected, whom does a helper act
//! for) is answered here.

mod convert;
mod helpers;
mod signals;
pub mod images;
pub mod protection;

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::query_parameters::{
    InspectContainerOptions, ListContainersOptionsBuilder, RestartContainerOptionsBuilder,
    StatsOptionsBuilder, UploadToContainerOptionsBuilder,
};
use faultline_plugin_runtime::capability::CapResult;
use faultline_plugin_runtime::capability::docker::{
    self as cap, Container, ExecOutput, HelperOwner, HelperSpec, Machine, ResourceUsage, StartedHelper,
};
use faultline_plugin_runtime::model::CapabilityError;
use futures_util::{StreamExt, TryStreamExt, future};

pub use convert::{container_of, usage_of};
pub use helpers::{HELPER_LABEL, Helpers};

use self::protection::Protection;

/// Budget of one Docker API call that is not a user-given wait.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(30);

pub struct DockerEngine {
    client: Docker,
    helpers: Helpers,
    protection: Protection,
}

/// Maps bollard's errors onto the contract's.
pub(crate) fn capability_error(e: bollard::errors::Error) -> CapabilityError {
    use bollard::errors::Error as E;
    match e {
        E::DockerResponseServerError { status_code: 404, message } => CapabilityError::NotFound(message),
        E::DockerResponseServerError { status_code, message } => CapabilityError::Failed(format!("{status_code}: {message}")),
        E::RequestTimeoutError => CapabilityError::Timeout("the Docker engine did not answer in time".into()),
        other => CapabilityError::Unavailable(other.to_string()),
    }
}

pub(crate) async fn timed<T>(what: &str, limit: Duration, call: impl Future<Output = Result<T, bollard::errors::Error>>) -> CapResult<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result.map_err(capability_error),
        Err(_) => Err(CapabilityError::Timeout(format!("{what} took longer than {limit:?}"))),
    }
}

impl DockerEngine {
    /// Connects as the Docker CLI would (`DOCKER_HOST`, else the local
    /// socket) and agrees on an API version the engine speaks. `protection`
    /// says which containers no experiment and no plugin may touch.
    pub async fn connect(protection: Protection) -> Result<Self, bollard::errors::Error> {
        let client = Docker::connect_with_defaults()?.negotiate_version().await?;
        client.ping().await?;
        Ok(DockerEngine { helpers: Helpers::new(client.clone()), client, protection })
    }

    pub fn client(&self) -> &Docker {
        &self.client
    }

    pub fn helpers(&self) -> &Helpers {
        &self.helpers
    }

    pub fn protection(&self) -> &Protection {
        &self.protection
    }

    /// Ids of the containers carrying every one of these labels (`key=value`).
    async fn with_labels(&self, labels: &[&str]) -> CapResult<Vec<String>> {
        let filters = HashMap::from([("label", labels.to_vec())]);
        let options = ListContainersOptionsBuilder::default().all(true).filters(&filters).build();
        let listed = timed("listing containers", CALL_TIMEOUT, self.client.list_containers(Some(options))).await?;
        Ok(listed.into_iter().filter_map(|c| c.id).collect())
    }
}

#[async_trait]
impl cap::Docker for DockerEngine {
    async fn engine_info(&self) -> CapResult<Machine> {
        let info = timed("reading the engine's info", CALL_TIMEOUT, self.client.info()).await?;
        Ok(Machine {
            cpus: info.ncpu.unwrap_or(1).max(1) as u32,
            memory_bytes: info.mem_total.unwrap_or(0).max(0) as u64,
            kernel: info.kernel_version.unwrap_or_default(),
            cgroup_driver: info.cgroup_driver.map(|d| d.to_string()).unwrap_or_default(),
        })
    }

    /// A selector with `=` is a label (`key=value`); otherwise it is a
    /// container name, matched exactly. All selectors must hold.
    async fn find(&self, selectors: Vec<String>) -> CapResult<Vec<Container>> {
        let (labels, names): (Vec<&str>, Vec<&str>) = selectors.iter().map(String::as_str).partition(|s| s.contains('='));
        if names.len() > 1 {
            return Ok(vec![]); // one container has one name
        }
        let ids = match names.first() {
            Some(name) => match self.inspect(name.to_string()).await {
                Ok(c) => vec![c.id],
                Err(CapabilityError::NotFound(_)) => vec![],
                Err(e) => return Err(e),
            },
            None => self.with_labels(&labels).await?,
        };
        let found = future::join_all(ids.into_iter().map(|id| self.inspect(id))).await;
        let mut containers = vec![];
        for result in found {
            match result {
                Ok(c) if labels.iter().all(|l| has_label(&c, l)) => containers.push(c),
                Ok(_) | Err(CapabilityError::NotFound(_)) => {} // gone since it was listed
                Err(e) => return Err(e),
            }
        }
        containers.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(containers)
    }

    async fn inspect(&self, id: String) -> CapResult<Container> {
        let options = Some(InspectContainerOptions { size: false });
        let response = timed("inspecting a container", CALL_TIMEOUT, self.client.inspect_container(&id, options)).await?;
        Ok(container_of(response))
    }

    /// Signals the main process from outside the container, as a crash
    /// would: Docker's own kill API marks the container as stopped by hand,
    /// and its restart policy would never apply.
    async fn signal(&self, id: String, signal: String) -> CapResult<()> {
        let container = self.inspect(id).await?;
        let pid = container.pid.ok_or_else(|| CapabilityError::NotFound(format!("{} is not running", container.name)))?;
        self.helpers.signal_host_pid(&container.id, pid, &signal).await
    }

    async fn pause(&self, id: String) -> CapResult<()> {
        timed("pausing a container", CALL_TIMEOUT, self.client.pause_container(&id)).await
    }

    async fn unpause(&self, id: String) -> CapResult<()> {
        timed("unpausing a container", CALL_TIMEOUT, self.client.unpause_container(&id)).await
    }

    async fn restart(&self, id: String, timeout_seconds: u32) -> CapResult<()> {
        let options = RestartContainerOptionsBuilder::default().t(timeout_seconds as i32).build();
        let limit = CALL_TIMEOUT + Duration::from_secs(timeout_seconds.into());
        timed("restarting a container", limit, self.client.restart_container(&id, Some(options))).await
    }

    async fn exec(&self, id: String, command: Vec<String>, timeout_ms: u32) -> CapResult<ExecOutput> {
        let limit = Duration::from_millis(timeout_ms.into());
        let config = CreateExecOptions {
            cmd: Some(command),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let created = timed("creating an exec", CALL_TIMEOUT, self.client.create_exec(&id, config)).await?;
        let run = async {
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            if let StartExecResults::Attached { mut output, .. } = self.client.start_exec(&created.id, None).await? {
                while let Some(chunk) = output.next().await {
                    match chunk? {
                        bollard::container::LogOutput::StdErr { message } => stderr.extend_from_slice(&message),
                        other => stdout.extend_from_slice(&other.into_bytes()),
                    }
                }
            }
            Ok((stdout, stderr))
        };
        let (stdout, stderr) = timed("running a command in a container", limit, run).await?;
        let inspected = timed("reading an exec's exit code", CALL_TIMEOUT, self.client.inspect_exec(&created.id)).await?;
        Ok(ExecOutput {
            exit_code: inspected.exit_code.unwrap_or(-1) as i32,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }

    async fn copy_in(&self, id: String, path: String, contents: Vec<u8>, mode: u32) -> CapResult<()> {
        let path = std::path::Path::new(&path);
        let (Some(dir), Some(file)) = (path.parent(), path.file_name()) else {
            return Err(CapabilityError::Failed(format!("`{}` is not a file path", path.display())));
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(mode);
        header.set_cksum();
        let mut archive = tar::Builder::new(Vec::new());
        archive
            .append_data(&mut header, file, contents.as_slice())
            .and_then(|()| archive.finish())
            .map_err(|e| CapabilityError::Failed(format!("packing {}: {e}", path.display())))?;
        let tar = archive.into_inner().map_err(|e| CapabilityError::Failed(e.to_string()))?;
        let options = UploadToContainerOptionsBuilder::default().path(&dir.to_string_lossy()).build();
        let body = bollard::body_full(tar.into());
        timed("copying into a container", CALL_TIMEOUT, self.client.upload_to_container(&id, Some(options), body)).await
    }

    async fn run_helper(&self, spec: HelperSpec, experiment: &str) -> CapResult<StartedHelper> {
        self.helpers.run(spec, experiment).await
    }

    async fn remove_helper(&self, helper: String) -> CapResult<()> {
        self.helpers.remove(helper).await
    }

    /// One reading; Docker takes two samples about a second apart to give
    /// CPU use, so this call takes that long.
    async fn stats(&self, id: String) -> CapResult<ResourceUsage> {
        let options = StatsOptionsBuilder::default().stream(false).one_shot(false).build();
        let mut stream = std::pin::pin!(self.client.stats(&id, Some(options)));
        let reading = timed("reading container stats", CALL_TIMEOUT, stream.try_next()).await?;
        let reading = reading.ok_or_else(|| CapabilityError::NotFound(format!("no stats for {id}")))?;
        Ok(convert::usage_of(&reading))
    }

    async fn protection(&self, id: &str) -> CapResult<Option<String>> {
        let options = Some(InspectContainerOptions { size: false });
        let response = timed("inspecting a container", CALL_TIMEOUT, self.client.inspect_container(id, options)).await?;
        let addresses = if self.protection.needs_addresses() { protection::addresses(&response) } else { vec![] };
        Ok(self.protection.reason(&container_of(response), &addresses))
    }

    async fn helper_owner(&self, id: &str) -> CapResult<Option<HelperOwner>> {
        self.helpers.owner(id).await
    }
}

fn has_label(c: &Container, selector: &str) -> bool {
    let (key, value) = selector.split_once('=').unwrap_or((selector, ""));
    c.labels.iter().any(|(k, v)| k == key && v == value)
}
