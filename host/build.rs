//! Builds what the host embeds:
//! - the fault components under `plugins/`, for wasm32-wasip2, so built-in
//!   faults are always there to revert what they injected. Each plugin crate
//!   names its grants in its manifest:
//!   `[package.metadata.faultline] grants = "docker,log,clock"`;
//! - the helper agent (`host/agent`) and the demo service
//!   (`examples/demo-service`), static for musl, which the host packages
//!   into images FROM scratch.

use std::env;
use std::fmt::Write;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Plugin {
    /// The plugin's name: its folder under plugins/.
    name: String,
    package: String,
    grants: String,
}

fn manifest_value(manifest: &str, key: &str) -> Option<String> {
    manifest.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

fn plugins(dir: &Path) -> Vec<Plugin> {
    let mut found: Vec<Plugin> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let manifest = fs::read_to_string(e.path().join("Cargo.toml")).ok()?;
            Some(Plugin {
                name: e.file_name().to_string_lossy().into_owned(),
                package: manifest_value(&manifest, "name")?,
                grants: manifest_value(&manifest, "grants")
                    .unwrap_or_else(|| panic!("{}: no [package.metadata.faultline] grants", e.path().display())),
            })
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// `cargo build --release --target TRIPLE -p PACKAGES` into `<target>/<dir>`,
/// beside the outer build's own profile folders; returns the output folder.
fn cargo_build(root: &Path, out: &Path, dir: &str, triple: &str, packages: &[&str]) -> PathBuf {
    // OUT_DIR is <target>/[<triple>/]<profile>/build/<pkg>-<hash>/out.
    let build = out.ancestors().find(|p| p.file_name().is_some_and(|n| n == "build")).unwrap();
    let target_dir = build.parent().unwrap().parent().unwrap().join(dir);
    let mut cargo = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(root).args(["build", "--release", "--target", triple, "--target-dir"]).arg(&target_dir);
    for package in packages {
        cargo.args(["-p", package]);
    }
    // The outer build's flags are for the host, not for these targets.
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET"] {
        cargo.env_remove(var);
    }
    let status = cargo.status().expect("running cargo");
    assert!(status.success(), "building {packages:?} for {triple} failed (are the targets installed? `make setup`)");
    target_dir.join(triple).join("release")
}

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap();
    for watched in ["plugins", "sdk", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-changed={}", manifest_dir.join("agent").display());
    println!("cargo:rerun-if-changed={}", root.join("examples/demo-service").display());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());

    let statics = cargo_build(root, &out, "static", "x86_64-unknown-linux-musl", &["faultline-agent", "demo-service"]);
    let generated = format!(
        "pub static AGENT: &[u8] = include_bytes!({:?});\npub static DEMO_SERVICE: &[u8] = include_bytes!({:?});\n",
        statics.join("faultline-agent").display().to_string(),
        statics.join("demo-service").display().to_string()
    );
    fs::write(out.join("static_binaries.rs"), generated).unwrap();

    let plugins = plugins(&root.join("plugins"));
    let mut generated = String::from("pub static BUILTINS: &[Builtin] = &[\n");
    if !plugins.is_empty() {
        let packages: Vec<&str> = plugins.iter().map(|p| p.package.as_str()).collect();
        let built = cargo_build(root, &out, "builtin-plugins", "wasm32-wasip2", &packages);
        for p in &plugins {
            let wasm = built.join(format!("{}.wasm", p.package.replace('-', "_")));
            writeln!(
                generated,
                "    Builtin {{ name: {:?}, component: include_bytes!({:?}), grants: {:?} }},",
                p.name,
                wasm.display().to_string(),
                p.grants
            )
            .unwrap();
        }
    }
    generated.push_str("];\n");
    fs::write(out.join("builtins.rs"), generated).unwrap();
}
