//! Container stats, streamed: Docker sends a reading about every second per
//! container; a reading of the experiment takes the latest one instead of
//! waiting a second for Docker's two samples.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bollard::Docker;
use bollard::query_parameters::StatsOptionsBuilder;
use faultline_plugin_runtime::capability::docker::ResourceUsage;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use crate::capabilities::docker::usage_of;

#[derive(Default)]
struct Watched {
    /// Experiments watching the container.
    watchers: usize,
    task: Option<JoinHandle<()>>,
}

pub struct StatsWatcher {
    client: Docker,
    latest: Arc<Mutex<HashMap<String, ResourceUsage>>>,
    watched: Mutex<HashMap<String, Watched>>,
}

impl StatsWatcher {
    pub fn new(client: Docker) -> Self {
        StatsWatcher { client, latest: Arc::default(), watched: Mutex::default() }
    }

    /// Starts streaming the containers' stats (shared between experiments).
    pub fn watch(&self, ids: &[String]) {
        let mut watched = self.watched.lock().expect("stats lock");
        for id in ids {
            let entry = watched.entry(id.clone()).or_default();
            entry.watchers += 1;
            if entry.task.is_none() {
                let (client, latest, id) = (self.client.clone(), self.latest.clone(), id.clone());
                entry.task = Some(tokio::spawn(async move {
                    let options = StatsOptionsBuilder::default().stream(true).build();
                    let mut stream = std::pin::pin!(client.stats(&id, Some(options)));
                    while let Some(Ok(reading)) = stream.next().await {
                        latest.lock().expect("stats lock").insert(id.clone(), usage_of(&reading));
                    }
                }));
            }
        }
    }

    /// Stops streaming containers no experiment watches any more.
    pub fn unwatch(&self, ids: &[String]) {
        let mut watched = self.watched.lock().expect("stats lock");
        for id in ids {
            let Some(entry) = watched.get_mut(id) else { continue };
            entry.watchers = entry.watchers.saturating_sub(1);
            if entry.watchers == 0 {
                if let Some(task) = watched.remove(id).and_then(|w| w.task) {
                    task.abort();
                }
                self.latest.lock().expect("stats lock").remove(id);
            }
        }
    }

    /// The latest reading of a container, if one has arrived.
    pub fn latest(&self, id: &str) -> Option<ResourceUsage> {
        self.latest.lock().expect("stats lock").get(id).cloned()
    }
}
