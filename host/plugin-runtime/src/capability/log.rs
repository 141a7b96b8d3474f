//! `faultline:plugin/log`: plugin logs, attributed to plugin and experiment,
//! rate-limited per instance: a plugin that loops on `write` cannot flood
//! the host's logs or its experiment's timeline.

use std::sync::Arc;
use std::time::Instant;

use super::HostCapabilities;
use crate::bindings::faultline::plugin::log as wit;
use crate::scope::Scope;
use crate::state::StoreState;

pub use wit::Level;

/// Longest message kept; a plugin cannot flood the host's logs with one call.
const MAX_MESSAGE: usize = 4096;
/// Records an instance may write at once: a fan-out over many targets logs one each.
const BURST: f64 = 100.0;
/// Records per second after the burst.
const PER_SECOND: f64 = 10.0;

/// Where plugin logs go.
pub trait LogSink: Send + Sync {
    fn write(&self, plugin: &str, experiment: Option<&str>, level: Level, message: &str);
}

/// The default sink: the host's tracing logs.
pub struct TracingLog;

impl LogSink for TracingLog {
    fn write(&self, plugin: &str, experiment: Option<&str>, level: Level, message: &str) {
        let experiment = experiment.unwrap_or("-");
        match level {
            Level::Debug => tracing::debug!(plugin, experiment, "{message}"),
            Level::Info => tracing::info!(plugin, experiment, "{message}"),
            Level::Warn => tracing::warn!(plugin, experiment, "{message}"),
            Level::Error => tracing::error!(plugin, experiment, "{message}"),
        }
    }
}

/// A token bucket: `BURST` records at once, then `PER_SECOND`.
struct Bucket {
    tokens: f64,
    at: Instant,
    /// Records dropped since the last note about it.
    dropped: u64,
}

impl Bucket {
    fn new(now: Instant) -> Bucket {
        Bucket { tokens: BURST, at: now, dropped: 0 }
    }

    fn admit(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * PER_SECOND;
        self.tokens = (self.tokens + refill).min(BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

pub(crate) struct LogSlot {
    sink: Arc<dyn LogSink>,
    plugin: Arc<str>,
    scope: Scope,
    bucket: Bucket,
}

impl LogSlot {
    pub(crate) fn new(caps: &HostCapabilities, plugin: &Arc<str>, scope: &Scope) -> Self {
        LogSlot { sink: caps.log.clone(), plugin: plugin.clone(), scope: scope.clone(), bucket: Bucket::new(Instant::now()) }
    }

    fn emit(&self, level: Level, message: &str) {
        self.sink.write(&self.plugin, self.scope.experiment_id(), level, message);
    }

    /// Says, once per flood, how many records it cost.
    fn note_dropped(&mut self) {
        if self.bucket.dropped > 0 {
            let note = format!(
                "dropped {} log records of this plugin: over {BURST} at once or {PER_SECOND} a second",
                self.bucket.dropped
            );
            self.bucket.dropped = 0;
            self.emit(Level::Warn, &note);
        }
    }
}

impl Drop for LogSlot {
    /// A plugin that floods to its last call still gets its note.
    fn drop(&mut self) {
        self.note_dropped();
    }
}

impl wit::Host for LogSlot {
    async fn write(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        if !self.bucket.admit(Instant::now()) {
            return Ok(());
        }
        self.note_dropped();
        let mut end = message.len().min(MAX_MESSAGE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        self.emit(level, &message[..end]);
        Ok(())
    }
}

struct HasLog;
impl wasmtime::component::HasData for HasLog {
    type Data<'a> = &'a mut LogSlot;
}

pub(crate) fn link(linker: &mut wasmtime::component::Linker<StoreState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<StoreState, HasLog>(linker, |s| &mut s.caps.log)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use wit::Host as _;

    use super::*;

    #[derive(Default)]
    struct Kept(Mutex<Vec<(Option<String>, String)>>);

    impl LogSink for Kept {
        fn write(&self, _: &str, experiment: Option<&str>, _: Level, message: &str) {
            self.0.lock().unwrap().push((experiment.map(Into::into), message.into()));
        }
    }

    #[test]
    fn the_bucket_allows_a_burst_then_its_rate() {
        let start = Instant::now();
        let mut bucket = Bucket::new(start);
        assert_eq!((0..200).filter(|_| bucket.admit(start)).count(), BURST as usize);
        assert_eq!(bucket.dropped, 200 - BURST as u64);
        let later = start + Duration::from_secs(2);
        assert_eq!((0..200).filter(|_| bucket.admit(later)).count(), (2.0 * PER_SECOND) as usize);
        let much_later = later + Duration::from_secs(3600);
        assert_eq!((0..1000).filter(|_| bucket.admit(much_later)).count(), BURST as usize, "never more than a burst");
    }

    #[tokio::test]
    async fn a_flood_is_cut_and_noted_once_with_its_count() {
        let kept = Arc::new(Kept::default());
        let caps = HostCapabilities { log: kept.clone(), ..HostCapabilities::default() };
        let mut slot = LogSlot::new(&caps, &"chatty".into(), &Scope::experiment("exp-1", []));
        for i in 0..10_000 {
            slot.write(Level::Info, format!("line {i}")).await.unwrap();
        }
        drop(slot);
        let records = kept.0.lock().unwrap().clone();
        assert!(records.iter().all(|(e, _)| e.as_deref() == Some("exp-1")));
        let lines = records.iter().filter(|(_, m)| m.starts_with("line ")).count();
        let notes: Vec<u64> = records
            .iter()
            .filter_map(|(_, m)| m.strip_prefix("dropped ")?.split(' ').next()?.parse().ok())
            .collect();
        // The loop takes a moment, so a record or two may refill in it.
        assert!((BURST as usize..BURST as usize + 10).contains(&lines), "{lines} records kept");
        assert!(!notes.is_empty() && notes.len() <= 10, "noted once per flood: {notes:?}");
        assert_eq!(lines as u64 + notes.iter().sum::<u64>(), 10_000, "every record is kept or counted");
    }
}
