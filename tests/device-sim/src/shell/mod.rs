//! The device's shell: runs a command line as /system/bin/sh would, with
//! the programs in `commands`. A line ending in `&` runs as a background
//! job: a process of its own (in `ps`, found by `pgrep -f`, ended by
//! `kill`/`pkill`) that outlives the adb session that started it.

pub mod parse;

use std::sync::Arc;

use parse::{Piece, Redirect, Simple, Step, Then, Word};

use crate::commands;
use crate::device::{Device, ProcessKind};

/// What commands write.
#[derive(Debug, Default, Clone)]
pub struct Output {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    pub fn out(&mut self, text: impl AsRef<str>) {
        self.stdout.extend_from_slice(text.as_ref().as_bytes());
    }
    pub fn err(&mut self, text: impl AsRef<str>) {
        self.stderr.extend_from_slice(text.as_ref().as_bytes());
    }
}

/// A shell's variables that the model keeps.
#[derive(Debug, Default, Clone)]
pub struct Context {
    pub status: i32,
    pub last_job: Option<u32>,
    /// `$0`, `$1` … of `sh -c script name args`.
    pub args: Vec<String>,
    /// Set by `exit`: the script stops.
    pub exited: bool,
}

fn expand(word: &Word, ctx: &Context) -> String {
    word.iter()
        .map(|piece| match piece {
            Piece::Text(t) => t.clone(),
            Piece::Status => ctx.status.to_string(),
            Piece::LastJob => ctx.last_job.map(|p| p.to_string()).unwrap_or_default(),
            Piece::Arg(n) => ctx.args.get(*n).cloned().unwrap_or_default(),
        })
        .collect()
}

/// Runs a command line; its exit code.
pub async fn run(device: &Arc<Device>, line: &str, ctx: &mut Context, stdin: &[u8], out: &mut Output) -> i32 {
    let steps = match parse::parse(line) {
        Ok(steps) => steps,
        Err(why) => {
            out.err(format!("/system/bin/sh: {why}\n"));
            ctx.status = 2;
            return 2;
        }
    };
    let mut skip = false;
    let mut previous = Then::Seq;
    for Step { pipeline, then } in steps {
        // `a && b`: b runs if a succeeded; `a || b`: if it failed.
        let runs = match previous {
            Then::And => ctx.status == 0,
            Then::Or => ctx.status != 0,
            _ => true,
        } && !skip;
        previous = then;
        if !runs {
            continue;
        }
        if then == Then::Background {
            let pid = background(device, pipeline, ctx.clone());
            ctx.last_job = Some(pid);
            ctx.status = 0;
            continue;
        }
        ctx.status = pipe(device, &pipeline, ctx, stdin, out).await;
        if ctx.exited {
            skip = true;
        }
    }
    ctx.status
}

/// A pipeline: each command's output is the next one's input.
async fn pipe(device: &Arc<Device>, pipeline: &[Simple], ctx: &mut Context, stdin: &[u8], out: &mut Output) -> i32 {
    let mut input = stdin.to_vec();
    let mut status = 0;
    for (i, simple) in pipeline.iter().enumerate() {
        let last = i + 1 == pipeline.len();
        let mut own = Output::default();
        status = simple_command(device, simple, ctx, &input, &mut own).await;
        out.stderr.extend(own.stderr);
        if last {
            out.stdout.extend(own.stdout);
        } else {
            input = own.stdout;
        }
    }
    status
}

/// One command, with its redirections.
async fn simple_command(device: &Arc<Device>, simple: &Simple, ctx: &mut Context, stdin: &[u8], out: &mut Output) -> i32 {
    let words: Vec<String> = simple.words.iter().map(|w| expand(w, ctx)).collect();
    let mut input = stdin.to_vec();
    let (mut keep_out, mut keep_err, mut err_to_out) = (true, true, false);
    for redirect in &simple.redirects {
        match redirect {
            // Files are not modelled: what goes to one is not kept.
            Redirect::Stdout(_) => keep_out = false,
            Redirect::Stderr(_) => keep_err = false,
            Redirect::StderrToStdout => err_to_out = true,
            Redirect::Stdin(_) => input.clear(),
        }
    }
    let mut own = Output::default();
    let status = Box::pin(commands::run(device, ctx, &words, &input, &mut own)).await;
    if err_to_out {
        // 2>&1 after >x: both go where stdout goes.
        if keep_out {
            out.stdout.extend(own.stderr);
        }
    } else if keep_err {
        out.stderr.extend(own.stderr);
    }
    if keep_out {
        out.stdout.extend(own.stdout);
    }
    status
}

/// Starts a background job; its pid.
fn background(device: &Arc<Device>, pipeline: Vec<Simple>, mut ctx: Context) -> u32 {
    let cmdline: Vec<String> = pipeline.iter().flat_map(|s| s.words.iter().map(|w| expand(w, &ctx))).collect();
    // `nohup x` and `sh -c …` are what ps shows as the job's name and command line.
    let shown: Vec<String> = if cmdline.first().map(String::as_str) == Some("nohup") { cmdline[1..].to_vec() } else { cmdline.clone() };
    let name = shown.first().cloned().unwrap_or_default();
    let device2 = device.clone();
    let (start_tx, start_rx) = tokio::sync::oneshot::channel::<u32>();
    let task = tokio::spawn(async move {
        let pid = start_rx.await.unwrap_or(0);
        let mut out = Output::default();
        let _ = pipe(&device2, &pipeline, &mut ctx, &[], &mut out).await;
        device2.state().processes.remove(&pid);
    });
    let pid = device.state().spawn(&name, &shown.join(" "), ProcessKind::Job(task.abort_handle()), "shell");
    let _ = start_tx.send(pid);
    pid
}

/// Runs a command line as an adb shell session does: in a shell process
/// of its own (`sh -c <line>`), seen by `ps` and `pgrep` while it runs.
pub async fn session(device: &Arc<Device>, line: &str, stdin: &[u8]) -> (i32, Output) {
    let pid = device.state().spawn("sh", &format!("/system/bin/sh -c {line}"), ProcessKind::Shell, "shell");
    let mut ctx = Context { args: vec!["sh".into()], ..Context::default() };
    let mut out = Output::default();
    let status = run(device, line, &mut ctx, stdin, &mut out).await;
    device.state().processes.remove(&pid);
    (status, out)
}
