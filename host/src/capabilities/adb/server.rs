//! The adb server the host talks to: the one already running at the
//! configured address, else one the host starts there with the `adb`
//! binary (as the adb client itself does), when that address is local.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// How long `adb start-server` may take.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Starts an adb server on the address's port; it keeps running after
/// the host, as one started by the adb client does.
pub async fn start(adb: &Path, address: SocketAddr) -> Result<(), String> {
    if !address.ip().is_loopback() {
        return Err(format!("no adb server answers at {address}, and the host starts one only on this machine"));
    }
    // The server it forks lives on: its output must not be a pipe we wait on.
    let mut command = tokio::process::Command::new(adb);
    command
        .args(["-P", &address.port().to_string(), "start-server"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let status = match tokio::time::timeout(START_TIMEOUT, command.status()).await {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Err(format!("no adb server answers at {address}, and `{}` could not be run: {e}", adb.display())),
        Err(_) => return Err(format!("`{} start-server` did not finish in {START_TIMEOUT:?}", adb.display())),
    };
    if !status.success() {
        return Err(format!("no adb server answers at {address}, and `{} -P {} start-server` failed ({status})", adb.display(), address.port()));
    }
    tracing::info!(%address, "started an adb server");
    Ok(())
}
