//! Where things are, and building what the tests need.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The test plugins under tests/plugins, by crate suffix.
pub const TEST_PLUGINS: [&str; 8] = ["steady", "share", "looper", "hog", "trapper", "overreach", "fickle", "reacher"];

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// The request files in `examples/requests`, each with the platform its
/// name starts with (`backend-kill.json` is a backend start).
pub fn example_requests() -> Vec<(String, PathBuf)> {
    let dir = workspace_root().join("examples/requests");
    let mut examples: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("an entry of examples/requests").path())
        .map(|path| (path.file_name().unwrap().to_string_lossy().split('-').next().unwrap().to_string(), path))
        .collect();
    examples.sort();
    examples
}

/// The cargo target directory this test binary was built into.
pub fn target_dir() -> PathBuf {
    // target/<profile>/deps/<test binary>
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors().nth(3).expect("a target directory above the test binary").to_path_buf()
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(workspace_root());
    // Flags meant for the outer build must not leak into these.
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "CARGO_TARGET_DIR"] {
        cmd.env_remove(var);
    }
    cmd
}

fn run(mut cmd: Command, what: &str) {
    let status = cmd.status().unwrap_or_else(|e| panic!("running cargo to build {what}: {e}"));
    assert!(status.success(), "building {what} failed");
}

/// Builds the test plugins once per test binary (cargo makes concurrent
/// builds from several binaries wait for each other) and returns the
/// component of one of them.
pub fn test_plugin(name: &str) -> Vec<u8> {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let target = target_dir().join("test-plugins");
        let mut cmd = cargo();
        cmd.args(["build", "--release", "--target", "wasm32-wasip2", "--target-dir"]).arg(&target);
        for plugin in TEST_PLUGINS {
            cmd.args(["-p", &format!("test-plugin-{plugin}")]);
        }
        run(cmd, "the test plugins");
        target.join("wasm32-wasip2").join("release")
    });
    let path = dir.join(format!("test_plugin_{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The `faultline` binary, built if needed.
pub fn host_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let target = target_dir();
            let mut cmd = cargo();
            cmd.args(["build", "-p", "faultline", "--bin", "faultline", "--target-dir"]).arg(&target);
            run(cmd, "the faultline binary");
            target.join("debug").join("faultline")
        })
        .clone()
}

/// The device simulator and the `emulator` stand-in (tests/device-sim),
/// built once per test binary; the simulator's path.
pub fn device_sim_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let target = target_dir();
            let mut cmd = cargo();
            cmd.args(["build", "-p", "faultline-device-sim", "--bins", "--target-dir"]).arg(&target);
            run(cmd, "the device simulator");
            target.join("debug").join("faultline-device-sim")
        })
        .clone()
}

/// The `emulator` stand-in, beside the simulator.
pub fn emulator_standin() -> PathBuf {
    device_sim_binary().with_file_name("emulator")
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
