//! `dumpsys battery` (and its set/unplug/reset), `dumpsys activity
//! activities` (the resumed activity, as the API level prints it),
//! `dumpsys activity lastanr` and `dumpsys window` (the focused window).

use std::sync::Arc;

use crate::app;
use crate::config::Condition;
use crate::device::Device;
use crate::shell::Output;

pub fn run(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    match args {
        ["battery", rest @ ..] => battery(device, rest, out),
        ["activity", "activities", ..] | ["activity", "a", ..] => activities(device, out),
        ["activity", "lastanr", ..] => {
            out.out("ACTIVITY MANAGER LAST ANR (dumpsys activity lastanr)\n");
            match &device.state().last_anr {
                Some(anr) => out.out(anr),
                None => out.out("  <no ANR has occurred since boot>\n"),
            }
            0
        }
        ["window", ..] => {
            let (package, activity) = device.state().resumed.clone();
            out.out("WINDOW MANAGER WINDOWS (dumpsys window windows)\n");
            out.out(format!("  mCurrentFocus=Window{{7a1b2c3 u0 {}}}\n", app::short_component(&package, &activity)));
            out.out(format!("  mFocusedApp=ActivityRecord{{4d5e6f7 u0 {} t9}}\n", app::short_component(&package, &activity)));
            0
        }
        [service, ..] => {
            out.err(format!("Can't find service: {service}\n"));
            0
        }
        [] => 0,
    }
}

/// `dumpsys battery [set level N | set ac|usb|wireless 0|1 | set status N | unplug | reset]`.
pub fn battery(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let mut state = device.state();
    let b = &mut state.battery;
    match args {
        [] => {
            out.out("Current Battery Service state:\n");
            if b.unplugged {
                out.out("  (UPDATES STOPPED -- use 'reset' to restart)\n");
            }
            out.out(format!(
                "  AC powered: {}\n  USB powered: {}\n  Wireless powered: {}\n  Dock powered: false\n  Max charging current: 0\n  Max charging voltage: 0\n  Charging counter: {}\n  status: {}\n  health: 2\n  present: true\n  level: {}\n  scale: 100\n  voltage: 5000\n  temperature: 250\n  technology: Li-ion\n",
                b.ac, b.usb, b.wireless, b.level * 100, b.status, b.level
            ));
            return 0;
        }
        ["unplug"] => {
            (b.ac, b.usb, b.wireless, b.unplugged, b.status) = (false, false, false, true, 3);
        }
        ["reset"] => *b = Default::default(),
        ["set", what, value] => {
            let Ok(n) = value.parse::<u32>() else {
                out.err(format!("Bad value: {value}\n"));
                return 255;
            };
            b.unplugged = true;
            match *what {
                "level" => b.level = n.min(100),
                "ac" => b.ac = n != 0,
                "usb" => b.usb = n != 0,
                "wireless" => b.wireless = n != 0,
                "status" => b.status = n,
                other => {
                    out.err(format!("Unknown set option: {other}\n"));
                    return 255;
                }
            }
        }
        _ => {
            out.err("Battery service (battery) commands:\n  set [-f] [ac|usb|wireless|status|level|temp|present|invalid] <value>\n  unplug [-f]\n  reset [-f]\n");
            return 255;
        }
    }
    let level = b.level;
    drop(state);
    app::react_all(device, |c| matches!(c, Condition::BatteryBelow(n) if level <= *n));
    0
}

/// The resumed activity, in the format of the device's API level.
fn activities(device: &Arc<Device>, out: &mut Output) -> i32 {
    let (package, activity) = device.state().resumed.clone();
    let record = format!("ActivityRecord{{6c9b9c7 u0 {} t42}}", app::short_component(&package, &activity));
    out.out("ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)\n");
    if device.config.sdk >= 31 {
        out.out("Display #0 (activities from top to bottom):\n");
        out.out(format!("  * Task{{1f0e3a2 #42 type=standard A=10123:{package} U=0 visible=true visibleRequested=true mode=fullscreen translucent=false sz=1}}\n"));
        out.out(format!("    * Hist  #0: {record}\n"));
        out.out(format!("  ResumedActivity: {record}\n\n"));
        out.out(format!("  topResumedActivity={record}\n"));
    } else {
        out.out("Display #0 (activities from top to bottom):\n  Stack #42: type=standard mode=fullscreen\n");
        out.out(format!("    * Hist #0: {record}\n"));
        out.out(format!("    mResumedActivity: {record}\n"));
        out.out(format!("  mFocusedActivity: {record}\n"));
    }
    0
}
