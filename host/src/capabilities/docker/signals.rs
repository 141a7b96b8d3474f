//! Signals delivered from outside a container, as the kernel would send
//! them, by a short-lived agent in the host's PID namespace: Docker's own
//! kill API marks a container as stopped by hand, and its restart policy
//! would never apply. The PID comes from Docker, never from a plugin.
//!
//! A helper costs about half a second to start, so signals asked for within
//! a few milliseconds of each other (an experiment killing fifty replicas
//! at once) share one helper.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::models::HostConfig;
use faultline_plugin_runtime::capability::CapResult;
use faultline_plugin_runtime::model::CapabilityError;
use futures_util::StreamExt;
use tokio::sync::oneshot;

use super::helpers::Helpers;
use super::CALL_TIMEOUT;

/// How long the first signal of a batch waits for others.
const WINDOW: Duration = Duration::from_millis(20);
/// A signalling helper's time-to-live; it needs a moment.
const TTL_SECONDS: u32 = 30;

pub struct Request {
    container: String,
    pid: u32,
    signal: String,
    reply: oneshot::Sender<CapResult<()>>,
}

/// The batch being gathered, if any.
pub type Pending = Arc<Mutex<Option<Vec<Request>>>>;

impl Helpers {
    /// Sends `signal` to a process of the engine's host, by its host PID.
    pub async fn signal_host_pid(&self, container: &str, pid: u32, signal: &str) -> CapResult<()> {
        let (reply, answer) = oneshot::channel();
        let request = Request { container: container.into(), pid, signal: signal.into(), reply };
        let opens_batch = {
            let mut pending = self.signals.lock().expect("signal batch lock");
            let opens = pending.is_none();
            pending.get_or_insert_with(Vec::new).push(request);
            opens
        };
        if opens_batch {
            // Its own task: the batch is delivered even if this caller goes away.
            let helpers = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(WINDOW).await;
                let batch = helpers.signals.lock().expect("signal batch lock").take().unwrap_or_default();
                let mut by_signal: BTreeMap<String, Vec<Request>> = BTreeMap::new();
                for request in batch {
                    by_signal.entry(request.signal.clone()).or_default().push(request);
                }
                for (signal, requests) in by_signal {
                    helpers.deliver(&signal, requests).await;
                }
            });
        }
        answer.await.unwrap_or_else(|_| Err(CapabilityError::Failed("the signal was never delivered".into())))
    }

    /// One helper sends `signal` to every requested PID and prints a line
    /// for each (`signalled PID` or `failed PID: why`); each request gets
    /// its own line's answer.
    async fn deliver(&self, signal: &str, requests: Vec<Request>) {
        let mut args = vec!["signal".to_string(), "--signal".into(), signal.into()];
        for r in &requests {
            args.extend(["--pid".into(), r.pid.to_string()]);
        }
        let host_config = HostConfig { pid_mode: Some("host".into()), ..Default::default() };
        let said = async {
            let id = self.create(args, TTL_SECONDS, &requests[0].container, None, host_config).await?;
            let output = self.attach_and_start(&id).await;
            let read = async {
                let mut said = String::new();
                let mut output = output?;
                while let Some(chunk) = output.next().await {
                    said.push_str(&String::from_utf8_lossy(&chunk.map_err(super::capability_error)?.into_bytes()));
                }
                Ok(said)
            };
            let said = tokio::time::timeout(CALL_TIMEOUT, read).await.unwrap_or_else(|_| {
                Err(CapabilityError::Timeout(format!("signalling took longer than {CALL_TIMEOUT:?}")))
            });
            let _ = self.remove(id).await;
            said
        };
        match said.await {
            Ok(said) => {
                for r in requests {
                    let answer = if said.lines().any(|l| l == format!("signalled {}", r.pid)) {
                        Ok(())
                    } else {
                        let why = said.lines().find_map(|l| l.strip_prefix(&format!("failed {}: ", r.pid))).unwrap_or("no answer from the agent");
                        Err(CapabilityError::Failed(format!("the agent could not send {signal} to pid {}: {why}", r.pid)))
                    };
                    let _ = r.reply.send(answer);
                }
            }
            Err(e) => {
                for r in requests {
                    let _ = r.reply.send(Err(e.clone()));
                }
            }
        }
    }
}
