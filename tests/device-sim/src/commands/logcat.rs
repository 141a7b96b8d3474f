//! `logcat -d` over the device's buffers: `-b <buffer>` (repeatable or
//! comma-separated; default main, system and crash), `-v
//! epoch|threadtime|brief`, `-t <count>` or `-t '<seconds>.<millis>'`
//! (lines since then), `-s <tag>`, and `-c` (clear). Without `-d` it dumps
//! and exits too: following the log live is not modelled.

use std::sync::Arc;

use crate::device::{BUFFERS, Device, LogLine};
use crate::shell::Output;

fn format(line: &LogLine, style: &str) -> String {
    let secs = line.at_ms / 1000;
    let millis = line.at_ms % 1000;
    match style {
        "brief" => format!("{}/{}({:5}): {}\n", line.priority, line.tag, line.pid, line.message),
        "epoch" => format!("{secs:>12}.{millis:03} {:>5} {:>5} {} {:<8}: {}\n", line.pid, line.tid, line.priority, line.tag, line.message),
        _ => {
            // threadtime: MM-DD HH:MM:SS.mmm, in UTC here.
            let days = secs / 86_400;
            let (h, m, s) = ((secs % 86_400) / 3600, (secs % 3600) / 60, secs % 60);
            let (month, day) = month_day(days);
            format!("{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{millis:03} {:>5} {:>5} {} {:<8}: {}\n", line.pid, line.tid, line.priority, line.tag, line.message)
        }
    }
}

/// Month and day of a day count since 1970-01-01 (civil calendar).
fn month_day(days: i64) -> (i64, i64) {
    let z = days + 719_468;
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (month, day)
}

pub fn run(device: &Arc<Device>, args: &[&str], out: &mut Output) -> i32 {
    let (mut buffers, mut style, mut since, mut count, mut tags, mut clear) = (vec![], "threadtime", None, None, vec![], false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "-d" => {}
            "-c" | "--clear" => clear = true,
            "-b" => buffers.extend(it.next().map(|b| b.split(',').collect::<Vec<_>>()).unwrap_or_default()),
            "-v" => style = it.next().copied().unwrap_or("threadtime"),
            "-t" | "-T" => match it.next() {
                Some(t) if t.contains('.') || t.contains(':') => since = parse_time(t),
                Some(t) => count = t.parse::<usize>().ok(),
                None => {}
            },
            "-s" => tags.extend(it.next().copied()),
            a if a.contains(':') && !a.starts_with('-') => tags.push(a.split(':').next().unwrap_or(a)),
            _ => {}
        }
    }
    if buffers.is_empty() || buffers.contains(&"all") || buffers.contains(&"default") {
        buffers = if buffers.contains(&"all") { BUFFERS.to_vec() } else { vec!["main", "system", "crash"] };
    }
    if let Some(unknown) = buffers.iter().find(|b| !BUFFERS.contains(b)) {
        out.err(format!("logcat: unknown buffer {unknown}\n"));
        return 1;
    }
    let mut state = device.state();
    if clear {
        state.logs.retain(|l| !buffers.contains(&l.buffer));
        return 0;
    }
    let lines: Vec<&LogLine> = state
        .logs
        .iter()
        .filter(|l| buffers.contains(&l.buffer))
        .filter(|l| since.is_none_or(|t| l.at_ms >= t))
        .filter(|l| tags.is_empty() || tags.contains(&l.tag.as_str()))
        .collect();
    let skip = count.map_or(0, |n| lines.len().saturating_sub(n));
    let mut current = "";
    for line in &lines[skip..] {
        if line.buffer != current {
            current = line.buffer;
            out.out(format!("--------- beginning of {current}\n"));
        }
        out.out(format(line, style));
    }
    drop(state);
    0
}

/// `-t '<seconds>.<millis>'` (epoch): lines since then, in ms.
fn parse_time(text: &str) -> Option<i64> {
    let (secs, frac) = text.split_once('.')?;
    let millis: i64 = format!("{frac:0<3}")[..3].parse().ok()?;
    Some(secs.parse::<i64>().ok()? * 1000 + millis)
}
