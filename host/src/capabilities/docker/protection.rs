//! Never-targets: containers no selector can make a target, whatever it
//! matches, and no plugin can reach, whatever it asks. Each exclusion
//! carries its reason, and the start answer lists them. It lives with the
//! docker capability because both the backend platform's resolver and the
//! capability's scope check rely on it.
//!
//! - the host's helpers (label `faultline.helper`);
//! - anything labelled `faultline.protected=true`;
//! - the host's own container, when it runs in one (found in
//!   /proc/self/cgroup or /proc/self/mountinfo);
//! - the host's control channel: a container holding the address that
//!   `DOCKER_HOST` points to (a Docker socket proxy, a Docker-in-Docker
//!   daemon), since a fault there would cut the host off from every helper;
//! - whatever the operator names with `--protect` (a name or an id).

use std::net::{IpAddr, ToSocketAddrs};

use bollard::secret::ContainerInspectResponse;
use faultline_plugin_runtime::capability::docker::Container;

use super::HELPER_LABEL;

pub const PROTECTED_LABEL: &str = "faultline.protected";

pub struct Protection {
    own_container: Option<String>,
    control_addresses: Vec<IpAddr>,
    operator: Vec<String>,
}

impl Protection {
    /// Looks at where this process runs and how it reaches Docker.
    pub fn detect(operator: Vec<String>) -> Protection {
        let own_container = ["/proc/self/cgroup", "/proc/self/mountinfo"]
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .find_map(|text| container_id_in(&text));
        let control_addresses = std::env::var("DOCKER_HOST").ok().map(|h| addresses_of(&h)).unwrap_or_default();
        Protection { own_container, control_addresses, operator }
    }

    /// Whether the control channel check needs each candidate's addresses.
    pub fn needs_addresses(&self) -> bool {
        !self.control_addresses.is_empty()
    }

    /// Why `c` (with these IP addresses) must not be a target, if it must not.
    pub fn reason(&self, c: &Container, addresses: &[IpAddr]) -> Option<String> {
        let label = |key: &str| c.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        if label(HELPER_LABEL).is_some() {
            return Some("a Faultline helper".into());
        }
        if label(PROTECTED_LABEL) == Some("true") {
            return Some(format!("labelled {PROTECTED_LABEL}=true"));
        }
        if self.own_container.as_deref().is_some_and(|own| own == c.id) {
            return Some("the Faultline host's own container".into());
        }
        if addresses.iter().any(|a| self.control_addresses.contains(a)) {
            return Some("carries the host's Docker connection (DOCKER_HOST)".into());
        }
        let named = |p: &String| *p == c.name || (p.len() >= 12 && c.id.starts_with(p.as_str()));
        if self.operator.iter().any(named) {
            return Some("protected by the operator (--protect)".into());
        }
        None
    }
}

/// A container's IP addresses, on every network.
pub fn addresses(c: &ContainerInspectResponse) -> Vec<IpAddr> {
    let networks = c.network_settings.as_ref().and_then(|n| n.networks.as_ref());
    networks.into_iter().flat_map(|n| n.values()).filter_map(|e| e.ip_address.as_deref().and_then(|ip| ip.parse().ok())).collect()
}

/// A Docker container id (64 hex digits) in cgroup or mount paths, such as
/// `/docker/<id>`, `docker-<id>.scope` or `/containers/<id>/`.
fn container_id_in(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        ["/docker/", "docker-", "/containers/"].iter().find_map(|marker| {
            line.match_indices(marker).find_map(|(at, _)| {
                let rest = &line[at + marker.len()..];
                let id: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
                (id.len() == 64).then_some(id)
            })
        })
    })
}

/// The IP addresses of a `tcp://host:port` Docker endpoint; none for a
/// local socket.
fn addresses_of(docker_host: &str) -> Vec<IpAddr> {
    let Some(rest) = docker_host.strip_prefix("tcp://").or_else(|| docker_host.strip_prefix("https://")) else {
        return vec![];
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let with_port = if authority.contains(':') { authority.to_string() } else { format!("{authority}:2375") };
    with_port.to_socket_addrs().map(|a| a.map(|s| s.ip()).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4e0c1d2b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

    #[test]
    fn finds_its_own_container_under_cgroup_v1_v2_and_in_mounts() {
        assert_eq!(container_id_in(&format!("12:cpu,cpuacct:/docker/{ID}\n")).as_deref(), Some(ID));
        assert_eq!(container_id_in(&format!("0::/system.slice/docker-{ID}.scope\n")).as_deref(), Some(ID));
        let mount = format!("612 590 254:1 /var/lib/docker/containers/{ID}/hostname /etc/hostname rw - ext4 /dev/vda1 rw");
        assert_eq!(container_id_in(&mount).as_deref(), Some(ID));
        assert_eq!(container_id_in("0::/init.scope\n1:name=systemd:/user.slice\n"), None);
    }

    fn container(name: &str, labels: &[(&str, &str)]) -> Container {
        Container {
            id: ID.into(),
            name: name.into(),
            image: String::new(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            state: "running".into(),
            pid: None,
            restart_count: 0,
            health: None,
            memory_limit: None,
            cpu_limit: None,
        }
    }

    #[test]
    fn every_never_target_says_why() {
        let protection = Protection {
            own_container: None,
            control_addresses: vec!["10.1.2.3".parse().unwrap()],
            operator: vec!["billing-db".into()],
        };
        let reason = |c: &Container, a: &[IpAddr]| protection.reason(c, a);
        assert_eq!(reason(&container("web", &[]), &[]), None);
        assert_eq!(reason(&container("h", &[(HELPER_LABEL, "true")]), &[]).as_deref(), Some("a Faultline helper"));
        assert_eq!(reason(&container("db", &[(PROTECTED_LABEL, "true")]), &[]).as_deref(), Some("labelled faultline.protected=true"));
        assert_eq!(reason(&container("db", &[(PROTECTED_LABEL, "false")]), &[]), None);
        assert!(reason(&container("proxy", &[]), &["10.1.2.3".parse().unwrap()]).unwrap().contains("DOCKER_HOST"));
        assert!(reason(&container("billing-db", &[]), &[]).unwrap().contains("--protect"));
        let own = Protection { own_container: Some(ID.into()), control_addresses: vec![], operator: vec![] };
        assert_eq!(own.reason(&container("faultline", &[]), &[]).as_deref(), Some("the Faultline host's own container"));
    }

    #[test]
    fn a_tcp_docker_host_is_a_control_channel_and_a_socket_is_not() {
        assert_eq!(addresses_of("tcp://127.0.0.1:2375"), vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
        assert!(addresses_of("unix:///var/run/docker.sock").is_empty());
    }
}
