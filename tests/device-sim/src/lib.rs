//! A simulated Android device for Faultline's tests. It speaks the adbd
//! side of the adb protocol to a real adb server (`transport`,
//! `services`), runs a device's shell commands over a modelled device
//! (`shell`, `commands`, `device`, `app`), and, in emulator mode, serves
//! an emulator console (`console`) and registers with the adb server as a
//! real emulator does. See README.md for what it models and what it does not.

pub mod app;
pub mod commands;
pub mod config;
pub mod console;
pub mod device;
pub mod packet;
pub mod services;
pub mod shell;
pub mod transport;
pub mod tunnel;

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use config::Config;
use device::Device;

/// What the device says of itself when an adb server connects.
fn banner(config: &Config) -> String {
    format!("device::ro.product.name={};ro.product.model={};ro.product.device={};features=shell_v2,cmd", config.product, config.model, config.product)
}

/// Tells the adb server an emulator listens on its adb port, as the
/// emulator does (`host:emulator:<port>`); retried while the server starts.
async fn register(server_port: u16, adb_port: u16) {
    for _ in 0..50 {
        if let Ok(mut server) = TcpStream::connect(("127.0.0.1", server_port)).await {
            let request = format!("host:emulator:{adb_port}");
            if server.write_all(format!("{:04x}{request}", request.len()).as_bytes()).await.is_ok() {
                let _ = server.shutdown().await;
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("could not register with the adb server on port {server_port}");
}

/// Runs the device until the process ends. `avd` is the AVD name the console reports.
pub async fn run(config: Config, avd: String) -> std::io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", config.adb_port)).await?;
    let device = Device::new(config.clone());
    if let Some(port) = config.console_port {
        let console = TcpListener::bind(("127.0.0.1", port)).await?;
        tokio::spawn(console::serve(device.clone(), console, avd));
        tokio::spawn(register(config.adb_server_port, config.adb_port));
    }
    let banner = banner(&config);
    let services: transport::Services = {
        let device = device.clone();
        Arc::new(move |service: &str, stream, transport| services::open(&device, service, stream, transport))
    };
    loop {
        let (socket, _) = listener.accept().await?;
        let (device, banner, services) = (device.clone(), banner.clone(), services.clone());
        tokio::spawn(async move { transport::serve(socket, banner, services, |t| device.add_transport(t)).await });
    }
}
