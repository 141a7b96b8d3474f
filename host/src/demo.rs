//! `faultline serve --demo`: beside the service it starts, build a small
//! system (web → api → db, from the demo service embedded in the host, as
//! an image FROM scratch), run one experiment on it through the service's
//! own API, print its phases and score, and remove the system again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, NetworkCreateRequest};
use bollard::query_parameters::{CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use serde_json::{Value, json};

use crate::capabilities::docker::images::{DEMO_SERVICE, scratch_image};

const LABEL: &str = "faultline.demo";
const NETWORK: &str = "faultline-demo";

fn name(service: &str) -> String {
    format!("faultline-demo-{service}")
}

/// Removes every container and the network of the demo system.
pub async fn remove(client: &Docker) {
    let filters = HashMap::from([("label", vec![LABEL.to_string()])]);
    let listed = client.list_containers(Some(ListContainersOptionsBuilder::default().all(true).filters(&filters).build())).await;
    for id in listed.unwrap_or_default().into_iter().filter_map(|c| c.id) {
        let _ = client.remove_container(&id, Some(RemoveContainerOptionsBuilder::default().force(true).build())).await;
    }
    let _ = client.remove_network(NETWORK).await;
}

/// Creates db, api and web on one network, wired as a compose project;
/// returns web's address.
async fn create(client: &Docker) -> anyhow::Result<String> {
    remove(client).await;
    let image = scratch_image(client, "faultline-demo", DEMO_SERVICE).await?;
    let labels = HashMap::from([(LABEL.to_string(), "true".to_string())]);
    client.create_network(NetworkCreateRequest { name: NETWORK.into(), labels: Some(labels), ..Default::default() }).await?;
    for (service, upstream, depends_on) in [("db", None, ""), ("api", Some("db"), "db:service_started:false"), ("web", Some("api"), "api:service_started:false")] {
        let mut cmd = vec!["--name".to_string(), service.to_string()];
        if let Some(up) = upstream {
            cmd.extend(["--upstream".to_string(), format!("{}:8080", name(up))]);
        }
        let body = ContainerCreateBody {
            image: Some(image.clone()),
            cmd: Some(cmd),
            labels: Some(HashMap::from([
                (LABEL.to_string(), "true".to_string()),
                ("com.docker.compose.project".to_string(), "faultline-demo".to_string()),
                ("com.docker.compose.service".to_string(), service.to_string()),
                ("com.docker.compose.depends_on".to_string(), depends_on.to_string()),
            ])),
            host_config: Some(HostConfig { network_mode: Some(NETWORK.into()), ..Default::default() }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::default().name(&name(service)).build();
        client.create_container(Some(options), body).await?;
        client.start_container(&name(service), None::<bollard::query_parameters::StartContainerOptions>).await?;
    }
    let web = client.inspect_container(&name("web"), None::<bollard::query_parameters::InspectContainerOptions>).await?;
    let ip = web.network_settings.and_then(|n| n.networks).and_then(|n| n.get(NETWORK).and_then(|e| e.ip_address.clone()));
    ip.filter(|ip| !ip.is_empty()).ok_or_else(|| anyhow::anyhow!("the demo web container has no address"))
}

/// Runs the demo against the service at `base` with an engineer `key`.
pub async fn run(client: Docker, base: String, key: String) -> anyhow::Result<()> {
    println!("demo: building web → api → db from the demo service ...");
    let web = create(&client).await?;
    let http = reqwest::Client::builder().no_proxy().build()?;
    let body = json!({
        // api stays down while injecting; the rollback restarts it.
        "targets": [name("api")], "fault_type": "kill", "ramp": false, "params": {"restart_after": true},
        "probes": [{"type": "http", "url": format!("http://{web}:8080/"), "timeout_ms": 1000}],
        "phases": {"baseline_seconds": 3, "injecting_seconds": 4, "recovering_seconds": 8},
    });
    let started: Value = http.post(format!("{base}/experiments/backend/start")).header("x-api-key", &key).json(&body).send().await?.json().await?;
    let id = started["id"].as_str().ok_or_else(|| anyhow::anyhow!("the start failed: {started}"))?.to_string();
    println!(
        "demo: experiment {id}: kill {} (blast radius {}: {}); probing web at http://{web}:8080/",
        name("api"),
        started["blast_radius"],
        started["dependents"].as_array().map(|d| d.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()
    );
    let began = Instant::now();
    let mut seen_events = 0;
    let status = loop {
        let status: Value = http.get(format!("{base}/experiments/backend/status?id={id}")).header("x-api-key", &key).send().await?.json().await?;
        let events = status["events"].as_array().cloned().unwrap_or_default();
        for event in events.iter().skip(seen_events) {
            println!("demo: {:>5.1}s  {} {}", began.elapsed().as_secs_f64(), event["kind"].as_str().unwrap_or(""), event["detail"].as_str().unwrap_or(""));
        }
        seen_events = events.len();
        if status["state"] != "running" {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!(
        "demo: {} — score {} (recovered after {} ms)",
        status["state"].as_str().unwrap_or("?"),
        status["score"],
        status["result"]["recovered_after_ms"]
    );
    remove(&client).await;
    println!("demo: done; the demo system is removed and the service keeps running");
    Ok(())
}
