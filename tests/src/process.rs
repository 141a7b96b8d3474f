//! The real `faultline` binary, started by a test on a free port with its
//! own data directory.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::Api;
use crate::paths::{free_port, host_binary};

pub struct HostProcess {
    child: Child,
    pub api: Api,
    pub data_dir: PathBuf,
    /// What the host printed on standard output until it served.
    pub stdout: Vec<String>,
    /// What it printed after that.
    later: Arc<Mutex<Vec<String>>>,
}

impl HostProcess {
    /// Starts `faultline serve` on `data_dir` with extra arguments and waits
    /// until it serves. The API client carries the bootstrap key if the host
    /// printed one.
    pub fn start(data_dir: &Path, extra: &[&str]) -> HostProcess {
        Self::start_with_env(data_dir, extra, &[])
    }

    /// The same, with more environment variables for the host.
    pub fn start_with_env(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> HostProcess {
        let port = free_port();
        let mut child = Command::new(host_binary())
            .arg("--data-dir")
            .arg(data_dir)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .envs(env.iter().copied())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting faultline");
        let mut reader = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut stdout = vec![];
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut line = String::new();
            let n = reader.read_line(&mut line).expect("reading the host's output");
            assert!(n > 0, "faultline exited before serving; it printed {stdout:?}");
            stdout.push(line.trim_end().to_string());
            if line.starts_with("Faultline listening on") {
                break;
            }
            assert!(Instant::now() < deadline, "faultline did not start");
        }
        // Keep draining stdout so the host never blocks on a full pipe.
        let later = Arc::new(Mutex::new(vec![]));
        let sink = later.clone();
        std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let key = stdout.iter().find(|l| l.starts_with("flk_")).cloned();
        let api = Api::new(format!("http://127.0.0.1:{port}"), key);
        HostProcess { child, api, data_dir: data_dir.to_path_buf(), stdout, later }
    }

    /// Waits until the host prints a line starting with `prefix`; every line
    /// printed after start-up, up to and with that one.
    pub fn wait_for_output(&self, prefix: &str, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        loop {
            let lines = self.later.lock().unwrap().clone();
            if let Some(at) = lines.iter().position(|l| l.starts_with(prefix)) {
                return lines[..=at].to_vec();
            }
            assert!(Instant::now() < deadline, "no line `{prefix}` within {within:?}; printed: {lines:#?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Mints a key with the CLI against this host's store.
    pub fn mint_key_with_cli(data_dir: &Path, name: &str, role: &str) -> String {
        let out = Command::new(host_binary())
            .arg("--data-dir")
            .arg(data_dir)
            .args(["keys", "create", "--name", name, "--role", role])
            .output()
            .expect("running faultline keys create");
        assert!(out.status.success(), "keys create failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Kills the host with SIGKILL: no rollback code runs.
    pub fn kill9(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("waiting for faultline");
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
        self.child.wait().expect("waiting for faultline")
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
