//! The emulator console (emulator mode): the line protocol the Android
//! emulator serves on its console port. The real banner and `auth` flow
//! (the token in ~/.emulator_console_auth_token, made with a random token
//! when missing, as the emulator makes it; an empty file asks for no
//! auth), and the commands the product and `adb emu` use: `network
//! speed|delay|status`, `power capacity|ac|status`, `avd name`, `kill`,
//! `help`, `quit`. Each answer ends in `OK` or `KO: <why>`.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::config::profile;
use crate::device::{Device, Network};

/// Reads the token, making one as the emulator does when there is none.
fn token(device: &Device) -> String {
    let path = &device.config.console_token;
    if let Ok(token) = std::fs::read_to_string(path) {
        return token.trim().to_string();
    }
    let made: String = (0..16).map(|i| char::from(b'a' + ((crate::device::now_ms() as u64 >> (i % 8)).wrapping_mul(2654435761 + i) % 26) as u8)).collect();
    let _ = std::fs::write(path, &made);
    made
}

pub async fn serve(device: Arc<Device>, listener: TcpListener, avd: String) {
    let _ = token(&device);
    while let Ok((socket, _)) = listener.accept().await {
        let (device, avd) = (device.clone(), avd.clone());
        tokio::spawn(async move {
            let (read, mut write) = socket.into_split();
            let mut lines = BufReader::new(read).lines();
            let token = token(&device);
            let mut authenticated = token.is_empty();
            let banner = match authenticated {
                true => "Android Console: type 'help' for a list of commands\r\nOK\r\n".to_string(),
                false => format!(
                    "Android Console: Authentication required\r\nAndroid Console: type 'auth <auth_token>' to authenticate\r\nAndroid Console: you can find your <auth_token> in \r\n'{}'\r\nOK\r\n",
                    device.config.console_token.display()
                ),
            };
            if write.write_all(banner.as_bytes()).await.is_err() {
                return;
            }
            while let Ok(Some(line)) = lines.next_line().await {
                let words: Vec<&str> = line.split_whitespace().collect();
                let answer = match words.as_slice() {
                    ["quit" | "exit"] => return,
                    ["auth", given] if *given == token => {
                        authenticated = true;
                        "Android Console: type 'help' for a list of commands\r\nOK\r\n".to_string()
                    }
                    ["auth", ..] => "KO: authentication token does not match ~/.emulator_console_auth_token\r\n".to_string(),
                    _ if !authenticated && words.first() != Some(&"help") => "KO: unknown command, try 'help'\r\n".to_string(),
                    ["kill"] => {
                        let _ = write.write_all(b"OK: killing emulator, bye bye\r\n").await;
                        std::process::exit(0);
                    }
                    _ => command(&device, &avd, &words),
                };
                if write.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

fn command(device: &Arc<Device>, avd: &str, words: &[&str]) -> String {
    match words {
        ["help", ..] => "Android console commands:\r\n\r\n    help|h|?         print a list of commands\r\n    network          manage network settings\r\n    power            power related commands\r\n    avd              control virtual device execution\r\n    kill             kill the emulator instance\r\n    quit|exit        quit control session\r\n\r\ntry 'help <command>' for command-specific help\r\nOK\r\n".into(),
        ["network", "status"] => {
            let n = device.state().network;
            let kb = |kbps: f64| (kbps * 1000.0).round() as u64;
            format!(
                "Current network status:\r\n  download speed:   {} bits/s ({:.1} KB/s)\r\n  upload speed:     {} bits/s ({:.1} KB/s)\r\n  minimum latency:  {} ms\r\n  maximum latency:  {} ms\r\nOK\r\n",
                kb(n.down_kbps), n.down_kbps / 8.0, kb(n.up_kbps), n.up_kbps / 8.0, n.min_delay_ms, n.max_delay_ms
            )
        }
        ["network", "speed", value] => {
            let speeds = match profile(value) {
                Some((up, down, _, _)) => Some((up, down)),
                None => match value.split_once(':') {
                    Some((up, down)) => up.parse().ok().zip(down.parse().ok()),
                    None => value.parse().ok().map(|v| (v, v)),
                },
            };
            match speeds {
                Some((up, down)) => {
                    let mut state = device.state();
                    state.network = Network { up_kbps: up, down_kbps: down, ..state.network };
                    "OK\r\n".into()
                }
                None => "KO: invalid <speed> format, see 'help network speed'\r\n".into(),
            }
        }
        ["network", "delay", value] => {
            let delays = match profile(value) {
                Some((_, _, min, max)) => Some((min, max)),
                None => match value.split_once(':') {
                    Some((min, max)) => min.parse().ok().zip(max.parse().ok()),
                    None => value.parse().ok().map(|v| (v, v)),
                },
            };
            match delays {
                Some((min, max)) => {
                    let mut state = device.state();
                    state.network = Network { min_delay_ms: min, max_delay_ms: max, ..state.network };
                    "OK\r\n".into()
                }
                None => "KO: invalid <delay> format, see 'help network delay'\r\n".into(),
            }
        }
        ["power", "capacity", value] => match value.parse::<u32>() {
            Ok(level) if level <= 100 => {
                device.state().battery.level = level;
                "OK\r\n".into()
            }
            _ => "KO: Usage: \"capacity <percentage>\"\r\n".into(),
        },
        ["power", "ac", on @ ("on" | "off")] => {
            device.state().battery.ac = *on == "on";
            "OK\r\n".into()
        }
        ["power", "status", _] => "OK\r\n".into(),
        ["power", "display"] => {
            let b = device.state().battery.clone();
            format!("AC: {}\r\nstatus: {}\r\nhealth: Good\r\npresent: true\r\ncapacity: {}\r\nOK\r\n", if b.ac { "online" } else { "offline" }, if b.ac { "Charging" } else { "Discharging" }, b.level)
        }
        ["avd", "name"] => format!("{avd}\r\nOK\r\n"),
        ["avd", "status"] => "virtual device is running\r\nOK\r\n".into(),
        _ => "KO: unknown command, try 'help'\r\n".into(),
    }
}
