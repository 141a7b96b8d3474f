//! Docker for the backend tests, driven through the `docker` CLI so that
//! what a test checks never goes through the host's own Docker code. Images
//! are built here FROM scratch from this project's static demo service;
//! nothing is pulled.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::paths::{target_dir, workspace_root};

/// Runs `docker ARGS`; its trimmed output, or its error output.
pub fn try_docker(args: &[&str]) -> Result<String, String> {
    let out = Command::new("docker").args(args).output().map_err(|e| format!("running docker: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Runs `docker ARGS`, panicking on failure.
pub fn docker(args: &[&str]) -> String {
    try_docker(args).unwrap_or_else(|e| panic!("docker {}: {e}", args.join(" ")))
}

/// The demo service built static for musl.
fn demo_binary() -> PathBuf {
    let target = target_dir().join("static");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace_root())
        .args(["build", "--release", "--target", "x86_64-unknown-linux-musl", "-p", "demo-service", "--target-dir"])
        .arg(&target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("running cargo");
    assert!(status.success(), "building the demo service failed");
    target.join("x86_64-unknown-linux-musl/release/demo-service")
}

/// The demo image, tagged by the binary's content, built once per process.
pub fn demo_image() -> String {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let binary = std::fs::read(demo_binary()).expect("reading the demo binary");
            let tag = format!("faultline-demo:{:016x}", fnv(&binary));
            if try_docker(&["image", "inspect", &tag]).is_ok() {
                return tag;
            }
            let context = tempfile::tempdir().unwrap();
            std::fs::write(context.path().join("demo-service"), &binary).unwrap();
            std::fs::set_permissions(context.path().join("demo-service"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            let dockerfile = "FROM scratch\nCOPY demo-service /demo-service\nENTRYPOINT [\"/demo-service\"]\n";
            std::fs::write(context.path().join("Dockerfile"), dockerfile).unwrap();
            docker(&["build", "-q", "-t", &tag, &context.path().to_string_lossy()]);
            tag
        })
        .clone()
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100000001b3))
}

/// UDP round trips measured by the demo service's `measure` mode.
#[derive(Debug, serde::Deserialize)]
pub struct RoundTrips {
    pub sent: u32,
    pub received: u32,
    pub rtt_ms: Vec<f64>,
}

impl RoundTrips {
    /// The `q` quantile of the round-trip times (nearest rank).
    pub fn quantile(&self, q: f64) -> f64 {
        let mut sorted = self.rtt_ms.clone();
        sorted.sort_by(f64::total_cmp);
        assert!(!sorted.is_empty(), "no datagram came back");
        sorted[((sorted.len() - 1) as f64 * q).round() as usize]
    }

    pub fn loss(&self) -> f64 {
        1.0 - f64::from(self.received) / f64::from(self.sent)
    }
}

/// Containers of one test, all labelled `faultline.test=<id>`, removed
/// (with their network) when dropped.
pub struct DemoSystem {
    pub id: String,
    pub network: String,
    pub names: Vec<String>,
}

impl DemoSystem {
    /// A system with no container yet, and its network.
    pub fn empty() -> DemoSystem {
        let id = format!("fl{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
        let network = format!("{id}-net");
        docker(&["network", "create", "--label", &format!("faultline.test={id}"), &network]);
        DemoSystem { id, network, names: vec![] }
    }

    /// Starts one container of the demo service; `extra` goes to `docker run`.
    pub fn run(&mut self, name: &str, labels: &[(&str, &str)], extra: &[&str], args: &[&str]) -> String {
        let full = format!("{}-{name}", self.id);
        let mut cmd: Vec<String> = vec!["run".into(), "-d".into(), "--name".into(), full.clone()];
        cmd.extend(["--network".into(), self.network.clone(), "--network-alias".into(), name.into()]);
        cmd.extend(["--label".into(), format!("faultline.test={}", self.id), "--label".into(), format!("app={}", self.id)]);
        for (k, v) in labels {
            cmd.extend(["--label".into(), format!("{k}={v}")]);
        }
        cmd.extend(extra.iter().map(|s| s.to_string()));
        cmd.push(demo_image());
        cmd.extend(["--name".into(), name.into()]);
        cmd.extend(args.iter().map(|s| s.to_string()));
        docker(&cmd.iter().map(String::as_str).collect::<Vec<_>>());
        self.names.push(full.clone());
        full
    }

    /// `count` identical replicas labelled `app=<id>`; `extra` goes to `docker run`.
    pub fn replicas(count: usize, extra: &[&str]) -> DemoSystem {
        let mut system = DemoSystem::empty();
        for i in 1..=count {
            system.run(&format!("replica-{i}"), &[("tier", "replica")], extra, &[]);
        }
        system
    }

    /// web → api → db, wired by compose labels and upstream arguments on
    /// one network, beside a `loner` that depends on nothing: a fault on db
    /// has blast radius 2 and cascade depth 2.
    pub fn three_tier() -> DemoSystem {
        let mut system = DemoSystem::empty();
        let project = system.id.clone();
        for (name, depends_on, upstream) in [("db", "", None), ("api", "db:service_started:false", Some("db:8080")), ("web", "api:service_started:false", Some("api:8080"))] {
            let labels = [
                ("com.docker.compose.project", project.as_str()),
                ("com.docker.compose.service", name),
                ("com.docker.compose.depends_on", depends_on),
            ];
            let args: Vec<&str> = upstream.map(|u| vec!["--upstream", u]).unwrap_or_default();
            system.run(name, &labels, &[], &args);
        }
        system.run("loner", &[], &[], &[]);
        system
    }

    /// The selector matching every container of this system.
    pub fn selector(&self) -> String {
        format!("app={}", self.id)
    }

    /// Docker's own view: is the container running?
    pub fn running(name: &str) -> bool {
        docker(&["inspect", "-f", "{{.State.Running}}", name]) == "true"
    }

    /// A container's IP address (on its one network).
    pub fn ip(name: &str) -> String {
        docker(&["inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name])
    }

    pub fn restart_count(name: &str) -> u32 {
        docker(&["inspect", "-f", "{{.RestartCount}}", name]).parse().unwrap()
    }

    /// Helper containers the host started against this system's containers
    /// that still exist (they must not outlive their work).
    pub fn helpers_left(&self) -> Vec<String> {
        let ids: Vec<String> = self.names.iter().filter_map(|n| try_docker(&["inspect", "-f", "{{.Id}}", n]).ok()).collect();
        let helpers = docker(&["ps", "-a", "--filter", "label=faultline.helper", "--format", "{{.ID}} {{.Label \"faultline.target\"}}"]);
        helpers
            .lines()
            .filter(|l| ids.iter().any(|id| l.ends_with(id.as_str())))
            .map(|l| l.split(' ').next().unwrap_or_default().to_string())
            .collect()
    }

    /// Times UDP round trips to `alias` (a container of this system) from a
    /// new container on the same network, as a client next to it would see
    /// them: `count` datagrams, one every 5 ms.
    pub fn measure_udp(&self, alias: &str, count: u32) -> RoundTrips {
        let out = docker(&[
            "run", "--rm", "--network", &self.network, "--label", &format!("faultline.test={}", self.id), &demo_image(),
            "measure", "--udp", &format!("{alias}:8080"), "--count", &count.to_string(), "--interval-ms", "5",
        ]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("the measurement `{out}`: {e}"))
    }

    /// The nftables tables and the root qdiscs (other than Docker's
    /// defaults) in a container's network namespace, read with the host's
    /// own `nft` and `tc`: what a network fault could leave behind.
    pub fn network_state(name: &str) -> Vec<String> {
        let pid = docker(&["inspect", "-f", "{{.State.Pid}}", name]);
        let run = |tool: &[&str]| {
            let out = Command::new("nsenter").args(["-t", &pid, "-n"]).args(tool).output().expect("running nsenter");
            assert!(out.status.success(), "{tool:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let tables = run(&["nft", "list", "tables"]);
        let qdiscs = run(&["tc", "qdisc", "show"]);
        tables
            .lines()
            .filter(|l| l.contains("faultline"))
            .chain(qdiscs.lines().filter(|l| !l.contains("noqueue")))
            .map(str::to_string)
            .collect()
    }

    pub fn running_count(&self) -> usize {
        self.names.iter().filter(|n| try_docker(&["inspect", n]).is_ok() && Self::running(n)).count()
    }
}

impl Drop for DemoSystem {
    fn drop(&mut self) {
        let filter = format!("label=faultline.test={}", self.id);
        if let Ok(ids) = try_docker(&["ps", "-aq", "--filter", &filter]) {
            for id in ids.lines() {
                let _ = try_docker(&["rm", "-f", id]);
            }
        }
        let _ = try_docker(&["network", "rm", &self.network]);
    }
}
