//! Plugin round trip: a fresh instance, one inject, one revert; beside a
//! native call of the same logic, and with and without wasmtime's pooling
//! allocator. Run with `make bench`; results are kept in README.md here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use faultline_plugin_runtime::capability::log::{Level, LogSink};
use faultline_plugin_runtime::model::{Platform, Settings, Target};
use faultline_plugin_runtime::{Grants, HostCapabilities, PluginEngine, RuntimeConfig, Scope};
use faultline_tests::paths::test_plugin;

const WARM_UP: usize = 200;
const ROUNDS: usize = 3000;

/// Discards what plugins log, so only the round trip is measured.
struct Discard;
impl LogSink for Discard {
    fn write(&self, _: &str, _: Option<&str>, _: Level, message: &str) {
        std::hint::black_box(message);
    }
}

fn target() -> Target {
    Target { platform: Platform::Backend, id: "svc-a".into(), name: "svc-a".into(), attributes: vec![] }
}

fn settings() -> Settings {
    Settings { intensity: 40.0, params: vec![], ttl_seconds: 60 }
}

/// What the test_steady plugin does, natively: format a token, log it, log its revert.
fn native_round_trip(sink: &dyn LogSink, origin: Instant, target: &Target, settings: &Settings) {
    let token = format!("{}@{}#{}", target.id, settings.intensity, origin.elapsed().as_millis());
    sink.write("native", None, Level::Info, &format!("inject {token}"));
    sink.write("native", None, Level::Info, &format!("revert {token}"));
}

struct Summary {
    mean: Duration,
    p50: Duration,
    p99: Duration,
}

fn summarize(mut samples: Vec<Duration>) -> Summary {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    Summary { mean, p50: samples[samples.len() / 2], p99: samples[samples.len() * 99 / 100] }
}

/// What one round measures.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// A fresh instance, inject, revert.
    RoundTrip,
    /// A fresh instance only.
    Instantiate,
    /// Inject and revert on an instance that already exists.
    Calls,
}

async fn wasm_rounds(pooling: bool, part: Part, component: &[u8]) -> Summary {
    let caps = HostCapabilities { log: Arc::new(Discard), ..HostCapabilities::default() };
    let engine = PluginEngine::new(RuntimeConfig { pooling, ..RuntimeConfig::default() }, caps).unwrap();
    let plugin = engine.load("steady", component, &Grants::parse("log,clock").unwrap()).await.unwrap();
    let (target, settings) = (target(), settings());
    let mut live = plugin.instantiate(Scope::none()).await.unwrap();
    let mut samples = Vec::with_capacity(ROUNDS);
    for round in 0..WARM_UP + ROUNDS {
        let started = Instant::now();
        match part {
            Part::RoundTrip => {
                let mut instance = plugin.instantiate(Scope::none()).await.unwrap();
                let token = instance.inject(&target, &settings).await.unwrap();
                instance.revert(&token).await.unwrap();
            }
            Part::Instantiate => drop(plugin.instantiate(Scope::none()).await.unwrap()),
            Part::Calls => {
                let token = live.inject(&target, &settings).await.unwrap();
                live.revert(&token).await.unwrap();
            }
        }
        if round >= WARM_UP {
            samples.push(started.elapsed());
        }
    }
    summarize(samples)
}

fn native_round_trips() -> Summary {
    let (sink, origin, target, settings) = (Discard, Instant::now(), target(), settings());
    let mut samples = Vec::with_capacity(ROUNDS);
    for round in 0..WARM_UP + ROUNDS {
        let started = Instant::now();
        native_round_trip(&sink, origin, std::hint::black_box(&target), &settings);
        if round >= WARM_UP {
            samples.push(started.elapsed());
        }
    }
    summarize(samples)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // `cargo bench` passes --bench; a plain `cargo test` run must not bench.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let component = test_plugin("steady");
    let rows = [
        ("native call, same logic", native_round_trips()),
        ("wasm, on-demand allocator", wasm_rounds(false, Part::RoundTrip, &component).await),
        ("wasm, pooling allocator", wasm_rounds(true, Part::RoundTrip, &component).await),
        ("  of which instantiate", wasm_rounds(true, Part::Instantiate, &component).await),
        ("  of which inject + revert", wasm_rounds(true, Part::Calls, &component).await),
    ];
    println!("instantiate + inject + revert, {ROUNDS} rounds after {WARM_UP} warm-up");
    println!("| {:<26} | {:>10} | {:>10} | {:>10} |", "path", "mean µs", "p50 µs", "p99 µs");
    println!("|{:-<28}|{:->12}|{:->12}|{:->12}|", "", "", "", "");
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for (name, s) in rows {
        println!("| {:<26} | {:>10.1} | {:>10.1} | {:>10.1} |", name, us(s.mean), us(s.p50), us(s.p99));
    }
}
