//! A real headless Chromium for end-to-end tests of web pages, driven over
//! the DevTools protocol with `chromiumoxide`.
//!
//! We launch Debian's Chromium ourselves rather than through chromiumoxide:
//! the flags are the ones known to work on these machines (root, no
//! network, no GPU), nothing is ever downloaded, and the whole process tree
//! is ours to kill. Each browser has a fresh profile in a temporary
//! directory; the Chromium processes die and the profile is removed when
//! the [`Browser`] is dropped.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use chromiumoxide::cdp::browser_protocol::input::{DispatchMouseEventParams, DispatchMouseEventType, MouseButton};
use chromiumoxide::cdp::browser_protocol::log::EventEntryAdded;
use chromiumoxide::cdp::browser_protocol::target::SetAutoAttachParams;
use chromiumoxide::cdp::js_protocol::runtime::{EvaluateParams, EventConsoleApiCalled, EventExceptionThrown, RemoteObject};
use chromiumoxide::handler::HandlerConfig;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::task::JoinHandle;

/// Where Chromium is looked for, first to last. The real binary comes
/// before Debian's `/usr/bin/chromium` wrapper script: the wrapper adds
/// flags of its own (extensions, GPU rasterization) and prints shell errors.
const CANDIDATES: [&str; 3] = ["/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser"];

/// How long Chromium may take to open its DevTools socket.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one DevTools command (a navigation included) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// How a browser is launched.
#[derive(Debug, Clone, Default)]
pub struct BrowserOptions {
    /// Sends every request through this proxy (`http://127.0.0.1:PORT`),
    /// loopback included: Chromium otherwise bypasses proxies for
    /// 127.0.0.1, where the test servers are.
    pub proxy_server: Option<String>,
    /// More command-line flags.
    pub extra_args: Vec<String>,
}

/// The Chromium binary: `FAULTLINE_CHROMIUM` if set, else Debian's.
pub fn chromium_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("FAULTLINE_CHROMIUM") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("FAULTLINE_CHROMIUM names {}, which is not a file", path.display());
        }
        return Ok(path);
    }
    CANDIDATES.iter().map(PathBuf::from).find(|p| p.is_file()).ok_or_else(|| {
        anyhow!("Chromium is not installed (looked for {}): install it with `apt-get install chromium`", CANDIDATES.join(", "))
    })
}

/// The Chromium processes of one browser and its profile directory.
struct Process {
    child: Child,
    /// Chromium's helpers (zygotes, renderers, GPU, network) stay in the
    /// browser's process group, which is the browser's own pid.
    pgid: libc::pid_t,
    /// Crash handlers leave the group (they start their own session); they
    /// are found by this profile path, which their database path contains.
    profile: tempfile::TempDir,
    /// The last lines Chromium printed, for error messages.
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Process {
    fn spawn(options: &BrowserOptions) -> anyhow::Result<(Process, tokio::sync::oneshot::Receiver<String>)> {
        let binary = chromium_binary()?;
        let profile = tempfile::Builder::new().prefix("faultline-chromium-").tempdir().context("creating a Chromium profile directory")?;
        let mut cmd = Command::new(&binary);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--remote-debugging-port=0",
            // Nothing leaves the machine: every name but 127.0.0.1 fails to resolve.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            // A desktop-sized viewport, so clicks land where the layout says.
            "--window-size=1280,800",
        ]);
        cmd.arg(format!("--user-data-dir={}", profile.path().join("profile").display()));
        if let Some(proxy) = &options.proxy_server {
            cmd.arg(format!("--proxy-server={proxy}")).arg("--proxy-bypass-list=<-loopback>");
        }
        cmd.args(&options.extra_args).arg("about:blank");
        // Chromium's crash handler keeps its database under the XDG config
        // directory, not the profile: keep that in the temporary directory too.
        cmd.env("XDG_CONFIG_HOME", profile.path().join("config")).env("XDG_CACHE_HOME", profile.path().join("cache"));
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).process_group(0);
        // If the test binary dies without dropping the browser (killed on a
        // timeout, say), the kernel kills Chromium; its helpers follow it.
        // The signal comes when the launching thread ends: a test's thread
        // or its runtime's, which outlive the test.
        // SAFETY: prctl is async-signal-safe and touches nothing of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().with_context(|| format!("starting {}", binary.display()))?;
        let pgid = child.id() as libc::pid_t;

        // Chromium prints `DevTools listening on ws://...` once its socket is
        // open; the rest of its output (D-Bus complaints, mostly) is kept
        // only as the tail an error message shows. FAULTLINE_BROWSER_STDERR=1
        // prints all of it.
        let (url_tx, url_rx) = tokio::sync::oneshot::channel();
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr.clone();
        let echo = std::env::var_os("FAULTLINE_BROWSER_STDERR").is_some();
        let pipe = child.stderr.take().expect("piped stderr");
        std::thread::spawn(move || {
            let mut url_tx = Some(url_tx);
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ")
                    && let Some(tx) = url_tx.take()
                {
                    let _ = tx.send(url.trim().to_string());
                }
                if echo {
                    eprintln!("[chromium] {line}");
                }
                let mut tail = tail.lock().unwrap();
                if tail.len() == 40 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
        Ok((Process { child, pgid, profile, stderr }, url_rx))
    }

    fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap().iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Pids of processes outside the group that belong to this browser.
    fn strays(&self) -> Vec<libc::pid_t> {
        let needle = self.profile.path().as_os_str().as_encoded_bytes().to_vec();
        let Ok(entries) = std::fs::read_dir("/proc") else { return vec![] };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| cmd.windows(needle.len()).any(|w| w == needle))
            })
            .collect()
    }

    /// Kills every process of this browser and waits until they are gone,
    /// zombies included: helpers orphaned by the kill are reaped by init,
    /// which on these machines takes up to about 1.5 s, but a test that
    /// looks for leftover Chromium processes afterwards finds none.
    fn kill(&mut self) {
        let strays = self.strays();
        // SAFETY: plain signals to processes this browser started.
        unsafe {
            libc::killpg(self.pgid, libc::SIGKILL);
            for pid in &strays {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        let _ = self.child.wait();
        // SAFETY: signal 0 only checks that a process (or group) exists.
        let gone = |pid: libc::pid_t| unsafe { libc::kill(pid, 0) } == -1;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(gone(-self.pgid) && strays.iter().all(|p| gone(*p))) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        // The profile directory goes after this, with `self.profile`.
    }
}

/// A headless Chromium with a fresh profile.
pub struct Browser {
    cdp: chromiumoxide::Browser,
    handler: JoinHandle<()>,
    // Dropped last: the connection goes before the processes die.
    process: Process,
}

impl Browser {
    /// Launches Chromium with the default options.
    pub async fn launch() -> anyhow::Result<Browser> {
        Self::launch_with(BrowserOptions::default()).await
    }

    pub async fn launch_with(options: BrowserOptions) -> anyhow::Result<Browser> {
        let (mut process, url) = Process::spawn(&options)?;
        let url = match tokio::time::timeout(LAUNCH_TIMEOUT, url).await {
            Ok(Ok(url)) => url,
            Ok(Err(_)) => {
                let status = process.child.try_wait().ok().flatten();
                bail!("Chromium exited ({status:?}) before opening its DevTools socket; it printed:\n{}", process.stderr_tail());
            }
            Err(_) => bail!("Chromium did not open its DevTools socket within {LAUNCH_TIMEOUT:?}; it printed:\n{}", process.stderr_tail()),
        };
        let config = HandlerConfig { request_timeout: COMMAND_TIMEOUT, ..HandlerConfig::default() };
        let (cdp, mut handler) = chromiumoxide::Browser::connect_with_config(url.clone(), config)
            .await
            .with_context(|| format!("connecting to Chromium's DevTools at {url}"))?;
        // The handler drives the websocket: nothing happens unless it is polled.
        let handler = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                if let Err(e) = event {
                    eprintln!("[browser] DevTools: {e}");
                }
            }
        });
        Ok(Browser { cdp, handler, process })
    }

    /// Opens a new tab on `url` and waits until it has loaded. Its console
    /// messages, uncaught exceptions and log entries (failed loads, for
    /// example) are printed on standard error.
    pub async fn open(&self, url: &str) -> anyhow::Result<Page> {
        let cdp = self.cdp.new_page("about:blank").await.context("opening a tab")?;
        // chromiumoxide asks for new workers to wait for a debugger; a
        // service worker it does not resume would never install. The tests
        // need no child targets, so none are attached.
        let no_pause = SetAutoAttachParams::builder().auto_attach(false).wait_for_debugger_on_start(false).flatten(true).build();
        cdp.execute(no_pause.map_err(|e| anyhow!(e))?).await.context("leaving workers to run")?;
        let page = Page { printers: print_page_output(&cdp).await?, cdp };
        page.goto(url).await?;
        Ok(page)
    }

    /// The chromiumoxide browser, for what this module does not offer.
    pub fn cdp(&self) -> &chromiumoxide::Browser {
        &self.cdp
    }

    /// This browser's temporary directory: its profile (`profile/`), and
    /// the config and cache directories Chromium writes outside a profile.
    pub fn profile_dir(&self) -> &Path {
        self.process.profile.path()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.handler.abort();
    }
}

/// Prints what the page logs, for debugging failing tests.
async fn print_page_output(page: &chromiumoxide::Page) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let mut console = page.event_listener::<EventConsoleApiCalled>().await?;
    let mut exceptions = page.event_listener::<EventExceptionThrown>().await?;
    let mut log = page.event_listener::<EventEntryAdded>().await?;
    page.enable_log().await?;
    Ok(vec![
        tokio::spawn(async move {
            while let Some(event) = console.next().await {
                let args: Vec<String> = event.args.iter().map(describe).collect();
                eprintln!("[page console.{}] {}", event.r#type.as_ref(), args.join(" "));
            }
        }),
        tokio::spawn(async move {
            while let Some(event) = exceptions.next().await {
                let details = &event.exception_details;
                let what = details.exception.as_ref().and_then(|e| e.description.clone()).unwrap_or_else(|| details.text.clone());
                match details.url.as_deref().filter(|u| !u.is_empty()) {
                    Some(url) => eprintln!("[page exception] {what} ({url}:{}:{})", details.line_number + 1, details.column_number + 1),
                    None => eprintln!("[page exception] {what}"),
                }
            }
        }),
        tokio::spawn(async move {
            while let Some(event) = log.next().await {
                let entry = &event.entry;
                let url = entry.url.as_deref().map(|u| format!(" ({u})")).unwrap_or_default();
                eprintln!("[page log.{}] {}{url}", entry.level.as_ref(), entry.text);
            }
        }),
    ])
}

/// A console argument as the console would show it.
fn describe(object: &RemoteObject) -> String {
    match (&object.value, &object.unserializable_value, &object.description) {
        (Some(Value::String(s)), _, _) => s.clone(),
        (Some(value), _, _) => value.to_string(),
        (None, Some(value), _) => value.as_ref().to_string(),
        (None, None, Some(description)) => description.clone(),
        _ => object.r#type.as_ref().to_string(),
    }
}

/// JavaScript's truthiness of a JSON value (`undefined` reads as null).
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// A tab.
pub struct Page {
    cdp: chromiumoxide::Page,
    printers: Vec<JoinHandle<()>>,
}

impl Page {
    /// Navigates to `url` and waits for its load event.
    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.cdp.goto(url).await.with_context(|| format!("navigating to {url}"))?;
        Ok(())
    }

    /// Evaluates a JavaScript expression in the page, awaits it if it is a
    /// promise, and deserializes its value (`undefined` reads as null).
    /// A thrown exception is an error with its message and stack.
    pub async fn eval<T: DeserializeOwned>(&self, expression: &str) -> anyhow::Result<T> {
        let params = EvaluateParams::builder()
            .expression(expression)
            .await_promise(true)
            .return_by_value(true)
            .build()
            .map_err(|e| anyhow!("building Runtime.evaluate: {e}"))?;
        let reply = self.cdp.execute(params).await.with_context(|| format!("evaluating `{expression}`"))?;
        if let Some(details) = &reply.result.exception_details {
            let what = details.exception.as_ref().and_then(|e| e.description.clone()).unwrap_or_else(|| details.text.clone());
            bail!("`{expression}` threw: {what}");
        }
        let value = reply.result.result.value.clone().unwrap_or(Value::Null);
        serde_json::from_value(value.clone()).with_context(|| format!("`{expression}` gave {value}"))
    }

    /// Polls a JavaScript expression every 50 ms until it is truthy and
    /// returns that value; fails after `within` with the last value (or
    /// error) it gave. Errors count as not yet: the page may be navigating.
    pub async fn wait_for(&self, condition: &str, within: Duration) -> anyhow::Result<Value> {
        let deadline = Instant::now() + within;
        loop {
            let last = match self.eval::<Value>(condition).await {
                Ok(value) if truthy(&value) => return Ok(value),
                Ok(value) => value.to_string(),
                Err(e) => format!("{e:#}"),
            };
            if Instant::now() >= deadline {
                bail!("`{condition}` was still not true after {within:?}; last: {last}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks the first element matching a CSS selector as a user would:
    /// scrolled into view, then a real mouse move, press and release at the
    /// centre of its bounding box (`Input.dispatchMouseEvent`). The page sees
    /// trusted events, and the click counts as an interaction for INP.
    pub async fn click(&self, selector: &str) -> anyhow::Result<()> {
        let quoted = serde_json::to_string(selector)?;
        let script = format!(
            "(() => {{ const el = document.querySelector({quoted}); if (!el) return null;
               el.scrollIntoView({{block: 'center', inline: 'center'}});
               const r = el.getBoundingClientRect();
               return {{x: r.left + r.width / 2, y: r.top + r.height / 2, width: r.width, height: r.height}}; }})()"
        );
        let Some(bx) = self.eval::<Option<Value>>(&script).await? else {
            bail!("no element matches `{selector}`");
        };
        let number = |k: &str| bx[k].as_f64().unwrap_or_default();
        if number("width") <= 0.0 || number("height") <= 0.0 {
            bail!("`{selector}` is not rendered (its box is {bx})");
        }
        let (x, y) = (number("x"), number("y"));
        // `buttons` is the state after the event: held between press and release.
        let moved = DispatchMouseEventParams::builder().r#type(DispatchMouseEventType::MouseMoved).x(x).y(y).buttons(0);
        let pressed = DispatchMouseEventParams::builder()
            .r#type(DispatchMouseEventType::MousePressed)
            .x(x)
            .y(y)
            .button(MouseButton::Left)
            .buttons(1)
            .click_count(1);
        let released = pressed.clone().r#type(DispatchMouseEventType::MouseReleased).buttons(0);
        for event in [moved, pressed, released] {
            let event = event.build().map_err(|e| anyhow!("building Input.dispatchMouseEvent: {e}"))?;
            self.cdp.execute(event).await.with_context(|| format!("clicking `{selector}`"))?;
        }
        Ok(())
    }

    /// Closes the tab.
    pub async fn close(self) -> anyhow::Result<()> {
        self.cdp.clone().close().await.context("closing the tab")?;
        Ok(())
    }

    /// The chromiumoxide page, for what this module does not offer.
    pub fn cdp(&self) -> &chromiumoxide::Page {
        &self.cdp
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        for printer in &self.printers {
            printer.abort();
        }
    }
}
