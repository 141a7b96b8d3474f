//! `faultline-device-sim`: a simulated Android device for Faultline's tests.

use clap::Parser;
use faultline_device_sim::config::{Args, Config};

#[tokio::main]
async fn main() {
    let config = match Config::from_args(Args::parse()) {
        Ok(config) => config,
        Err(why) => {
            eprintln!("faultline-device-sim: {why}");
            std::process::exit(2);
        }
    };
    if let Err(e) = faultline_device_sim::run(config, "faultline_sim".into()).await {
        eprintln!("faultline-device-sim: {e}");
        std::process::exit(1);
    }
}
