//! Crashes and ANRs of an app, read from what the device reports:
//! - `logcat -b crash`: a Java crash is AndroidRuntime's `FATAL EXCEPTION:
//!   <thread>` followed by `Process: <package>, PID: <pid>`; a native one is
//!   the debuggerd tombstone's `>>> <package> <<<` line (tag DEBUG);
//! - `logcat -b system`: ActivityManager's `ANR in <package> (<component>)`;
//! - `dumpsys activity lastanr`, whose text changes when a new ANR comes,
//!   for an ANR whose log lines have already rotated away.
//!
//! Lines are read in logcat's `-v epoch` format:
//! `<seconds>.<millis> <pid> <tid> <priority> <tag>: <message>`.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Crash,
    Anr,
}

/// One crash or ANR of the app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceEvent {
    pub kind: EventKind,
    /// Device time, ms since the epoch (0 when only dumpsys told it).
    pub at_ms: i64,
    pub detail: String,
}

/// One parsed logcat line.
struct Line<'a> {
    at_ms: i64,
    pid: &'a str,
    tag: &'a str,
    message: &'a str,
}

fn parse_line(line: &str) -> Option<Line<'_>> {
    // Four words (time, pid, tid, priority), then "tag: message".
    let mut rest = line.trim_start();
    let mut words = [""; 4];
    for word in &mut words {
        let end = rest.find(char::is_whitespace)?;
        (*word, rest) = (&rest[..end], rest[end..].trim_start());
    }
    let [time, pid, _tid, _priority] = words;
    let (secs, millis) = time.split_once('.')?;
    let at_ms = secs.parse::<i64>().ok()? * 1000 + millis.get(..3)?.parse::<i64>().ok()?;
    let (tag, message) = rest.split_once(':')?;
    Some(Line { at_ms, pid, tag: tag.trim(), message: message.strip_prefix(' ').unwrap_or(message) })
}

/// The app's crashes and ANRs in a logcat dump (crash and system buffers).
pub fn from_logcat(text: &str, package: &str) -> Vec<DeviceEvent> {
    let lines: Vec<Line> = text.lines().filter_map(parse_line).collect();
    let mut events = vec![];
    for (i, line) in lines.iter().enumerate() {
        if line.tag == "AndroidRuntime" && line.message.starts_with("FATAL EXCEPTION") {
            // The process line follows in the same process's next lines.
            let process = lines[i + 1..].iter().take(4).filter(|l| l.pid == line.pid).find_map(|l| l.message.strip_prefix("Process: "));
            if let Some(process) = process
                && process.split(',').next().map(str::trim) == Some(package)
            {
                let exception = lines[i + 1..].iter().filter(|l| l.pid == line.pid).find(|l| !l.message.starts_with("Process: ")).map(|l| l.message);
                events.push(DeviceEvent { kind: EventKind::Crash, at_ms: line.at_ms, detail: exception.unwrap_or(line.message).to_string() });
            }
        } else if line.tag == "DEBUG" && line.message.contains(&format!(">>> {package} <<<")) {
            events.push(DeviceEvent { kind: EventKind::Crash, at_ms: line.at_ms, detail: format!("native crash: {}", line.message.trim()) });
        } else if line.tag == "ActivityManager"
            && let Some(rest) = line.message.strip_prefix("ANR in ")
            && rest.split([' ', '(']).next() == Some(package)
        {
            events.push(DeviceEvent { kind: EventKind::Anr, at_ms: line.at_ms, detail: line.message.to_string() });
        }
    }
    events
}

/// Whether `dumpsys activity lastanr` tells of a new ANR of the app since
/// `before` (its text then).
pub fn new_anr_in_dumpsys(before: &str, now: &str, package: &str) -> bool {
    now != before && now.lines().any(|l| l.trim().strip_prefix("ANR in ").is_some_and(|rest| rest.split([' ', '(']).next() == Some(package)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "\
--------- beginning of crash
  1700000001.250  4321  4321 E AndroidRuntime: FATAL EXCEPTION: main
  1700000001.250  4321  4321 E AndroidRuntime: Process: dev.faultline.testapp, PID: 4321
  1700000001.250  4321  4321 E AndroidRuntime: java.lang.IllegalStateException: no network
  1700000001.251  4321  4321 E AndroidRuntime: \tat dev.faultline.testapp.MainActivity.onResume(MainActivity.java:10)
  1700000002.000  5555  5555 E AndroidRuntime: FATAL EXCEPTION: main
  1700000002.000  5555  5555 E AndroidRuntime: Process: com.other.app, PID: 5555
--------- beginning of system
  1700000003.500   600   640 E ActivityManager: ANR in dev.faultline.testapp (dev.faultline.testapp/.MainActivity)
  1700000003.600   600   640 E ActivityManager: ANR in dev.faultline.testapp.other
  1700000004.000   700   700 F DEBUG   : pid: 4400, tid: 4400, name: testapp  >>> dev.faultline.testapp <<<
";

    #[test]
    fn crashes_and_anrs_of_the_app_are_found_and_others_are_not() {
        let events = from_logcat(DUMP, "dev.faultline.testapp");
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!((events[0].kind, events[0].at_ms), (EventKind::Crash, 1_700_000_001_250));
        assert_eq!(events[0].detail, "java.lang.IllegalStateException: no network");
        assert_eq!((events[1].kind, events[1].at_ms), (EventKind::Anr, 1_700_000_003_500));
        assert!(events[1].detail.contains("(dev.faultline.testapp/.MainActivity)"));
        assert_eq!(events[2].kind, EventKind::Crash);
        assert!(from_logcat(DUMP, "com.nothing").is_empty());
        assert!(from_logcat("garbage\n\n  12 x", "dev.faultline.testapp").is_empty());
    }

    #[test]
    fn a_changed_lastanr_naming_the_app_is_a_new_anr() {
        let none = "ACTIVITY MANAGER LAST ANR (dumpsys activity lastanr)\n  <no ANR has occurred since boot>\n";
        let one = "ACTIVITY MANAGER LAST ANR (dumpsys activity lastanr)\n  ANR in dev.faultline.testapp (dev.faultline.testapp/.MainActivity)\n";
        assert!(new_anr_in_dumpsys(none, one, "dev.faultline.testapp"));
        assert!(!new_anr_in_dumpsys(one, one, "dev.faultline.testapp"));
        assert!(!new_anr_in_dumpsys(none, one, "com.other"));
    }
}
