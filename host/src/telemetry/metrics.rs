use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InjectionLabels {
    fault_type: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RollbackLabels {
    reason: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    plugin: String,
    call: String,
}

type CallHistograms = Family<CallLabels, Histogram, fn() -> Histogram>;

fn call_histogram() -> Histogram {
    // 50 µs to about 13 s.
    Histogram::new(exponential_buckets(0.00005, 4.0, 10))
}

pub struct Metrics {
    registry: Registry,
    experiments: Family<StateLabels, Gauge>,
    injections: Family<InjectionLabels, Counter>,
    rollbacks: Family<RollbackLabels, Counter>,
    plugin_calls: CallHistograms,
    emergency_stop: Gauge,
    broken_runs: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("faultline");
        let experiments = Family::<StateLabels, Gauge>::default();
        let injections = Family::<InjectionLabels, Counter>::default();
        let rollbacks = Family::<RollbackLabels, Counter>::default();
        let plugin_calls = CallHistograms::new_with_constructor(call_histogram);
        registry.register("experiments", "Experiments by state", experiments.clone());
        registry.register("injections", "Fault injections by fault type and outcome", injections.clone());
        registry.register("rollbacks", "Fault rollbacks by reason and outcome", rollbacks.clone());
        registry.register("plugin_call_duration_seconds", "Duration of calls into fault plugins", plugin_calls.clone());
        let emergency_stop = Gauge::default();
        registry.register("emergency_stop_engaged", "1 while an emergency stop is in force", emergency_stop.clone());
        let broken_runs = Counter::default();
        registry.register("broken_runs", "Runs the supervisor had to settle (a panic or an overrun inside the host)", broken_runs.clone());
        Metrics { registry, experiments, injections, rollbacks, plugin_calls, emergency_stop, broken_runs }
    }
}

impl Metrics {
    pub fn injection(&self, fault_type: &str, outcome: &str) {
        let labels = InjectionLabels { fault_type: fault_type.into(), outcome: outcome.into() };
        self.injections.get_or_create(&labels).inc();
    }

    pub fn rollback(&self, reason: &str, outcome: &str) {
        self.rollbacks.get_or_create(&RollbackLabels { reason: reason.into(), outcome: outcome.into() }).inc();
    }

    /// A run panicked or overran and its supervisor settled it.
    pub fn broken_run(&self) {
        self.broken_runs.inc();
    }

    pub fn plugin_call(&self, plugin: &str, call: &str, took: Duration) {
        let labels = CallLabels { plugin: plugin.into(), call: call.into() };
        self.plugin_calls.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// Sets the experiments-by-state gauges from counts read at scrape time.
    pub fn set_experiment_counts(&self, counts: &[(String, i64)]) {
        self.experiments.clear();
        for (state, n) in counts {
            self.experiments.get_or_create(&StateLabels { state: state.clone() }).set(*n);
        }
    }

    /// Set at scrape time: whether an emergency stop is in force.
    pub fn set_emergency_stop(&self, engaged: bool) {
        self.emergency_stop.set(i64::from(engaged));
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }
}
