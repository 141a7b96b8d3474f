//! From Docker's answers to the contract's records.

use bollard::secret::{ContainerInspectResponse, ContainerStatsResponse};
use faultline_plugin_runtime::capability::docker::{Container, ResourceUsage};

pub fn container_of(r: ContainerInspectResponse) -> Container {
    let config = r.config.unwrap_or_default();
    let host = r.host_config.unwrap_or_default();
    let state = r.state.unwrap_or_default();
    let mut labels: Vec<(String, String)> = config.labels.unwrap_or_default().into_iter().collect();
    labels.sort();
    let cpu_limit = match (host.nano_cpus, host.cpu_quota, host.cpu_period) {
        (Some(n), _, _) if n > 0 => Some(n as f64 / 1e9),
        (_, Some(q), Some(p)) if q > 0 && p > 0 => Some(q as f64 / p as f64),
        _ => None,
    };
    Container {
        id: r.id.unwrap_or_default(),
        name: r.name.unwrap_or_default().trim_start_matches('/').to_string(),
        image: config.image.unwrap_or_default(),
        labels,
        state: state.status.map(|s| s.to_string()).unwrap_or_default(),
        pid: state.pid.filter(|p| *p > 0).map(|p| p as u32),
        restart_count: r.restart_count.unwrap_or_default().max(0) as u32,
        health: state.health.and_then(|h| h.status).map(|s| s.to_string()).filter(|s| !s.is_empty() && s != "none"),
        memory_limit: host.memory.filter(|m| *m > 0).map(|m| m as u64),
        cpu_limit,
    }
}

/// CPU use in percent of one CPU, from the two samples Docker sends.
pub fn usage_of(s: &ContainerStatsResponse) -> ResourceUsage {
    let (cpu, pre) = (s.cpu_stats.clone().unwrap_or_default(), s.precpu_stats.clone().unwrap_or_default());
    let total = |c: &bollard::secret::ContainerCpuStats| c.cpu_usage.as_ref().and_then(|u| u.total_usage).unwrap_or(0);
    let cpu_delta = total(&cpu).saturating_sub(total(&pre)) as f64;
    let system_delta = cpu.system_cpu_usage.unwrap_or(0).saturating_sub(pre.system_cpu_usage.unwrap_or(0)) as f64;
    let online = cpu.online_cpus.unwrap_or(1).max(1);
    let cpu_percent = if system_delta > 0.0 { cpu_delta / system_delta * online as f64 * 100.0 } else { 0.0 };
    let memory = s.memory_stats.clone().unwrap_or_default();
    // As `docker stats` does: page cache that can be dropped is not "used".
    let cache = memory.stats.as_ref().and_then(|m| m.get("total_inactive_file").or(m.get("inactive_file")).copied()).unwrap_or(0);
    ResourceUsage {
        cpu_percent,
        memory_bytes: memory.usage.unwrap_or(0).saturating_sub(cache),
        memory_limit: memory.limit.unwrap_or(0),
        online_cpus: online,
    }
}
