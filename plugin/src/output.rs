//! What the user sees: progress on stderr while a command runs (a live step list on a terminal,
//! timestamped lines otherwise, nothing but errors with -q) and data on stdout in the format
//! `-o` asks for.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use serde::Serialize;
use uyuni_core::Step;
use uyuni_core::sync_progress::{SyncLine, SyncProgress, VolumeState};
use uyuni_effects::{Progress, ProgressEvent};

use crate::cli::{ColorChoice, OutputFormat, ProgressMode};

/// Log lines of the running Job kept under the live step list.
const LOG_TAIL: usize = 4;
/// Finished steps shown one by one in the live view; earlier ones fold into one line.
const VISIBLE_DONE: usize = 3;
/// In plain mode, rsync's progress figures at most this often (they come several a second).
const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Whether to colour stderr: `--color` wins; `auto` colours a terminal unless `NO_COLOR` is set
/// to a non-empty value (<https://no-color.org>).
pub fn use_color(
    choice: ColorChoice,
    is_terminal: bool,
    no_color: Option<&std::ffi::OsStr>,
) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => is_terminal && no_color.is_none_or(|v| v.is_empty()),
    }
}

/// How the reporter shows progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReporterOptions {
    pub quiet: bool,
    pub progress: ProgressMode,
    pub color: bool,
    /// Verbose logs share stderr with the live view and would tear it: they force plain lines.
    pub verbose: bool,
}

impl ReporterOptions {
    /// Plain lines without colour: what tests and pipes get.
    #[doc(hidden)]
    pub fn plain() -> Self {
        ReporterOptions {
            quiet: false,
            progress: ProgressMode::Plain,
            color: false,
            verbose: false,
        }
    }
}

/// How progress is shown: not at all, as plain lines, or as the live view.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    Quiet,
    Plain,
    Live,
}

pub struct Reporter {
    display: Display,
    color: bool,
    started: Instant,
    namespace: Mutex<String>,
    /// The Job of the current step, while it runs one or waits for one.
    current_job: Mutex<Option<String>>,
    /// The Jobs of this run's steps so far, oldest first.
    jobs: Mutex<Vec<String>>,
    /// Set by a migration whose source's services are stopped (by its final copy, in this run
    /// or before) while the server is not ready: an interrupted run says so.
    source_down: std::sync::atomic::AtomicBool,
    kubectl: Mutex<uyuni_core::kubectl::Kubectl>,
    state: Arc<Mutex<LiveState>>,
    /// The live view, drawn from the first step on (commands without steps never show it)
    /// until the plan's last step ends or [`Reporter::finish`].
    bar: Mutex<Option<ProgressBar>>,
}

/// What the live view shows; also tracked in plain mode (for the rsync throttle).
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct LiveState {
    pub steps: Vec<StepState>,
    /// Position and total of the current step in the plan it came from.
    pub position: (usize, usize),
    pub activity: Option<String>,
    pub log_tail: VecDeque<String>,
    pub rsync: Option<RsyncProgress>,
    /// Where each volume of a data sync stands, from the Job's status lines.
    pub sync: SyncProgress,
    pub last_plain_progress: Option<Instant>,
}

/// A step of the live view: its line, when it started and how it ended.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct StepState {
    pub id: String,
    pub line: String,
    pub started: Instant,
    pub ended: Option<(Instant, Outcome)>,
}

/// How a step ended.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Failed,
}

fn lock(state: &Mutex<LiveState>) -> MutexGuard<'_, LiveState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl Reporter {
    /// How this reporter shows progress (for the tests).
    #[doc(hidden)]
    pub fn display(&self) -> Display {
        self.display
    }

    pub fn new(opts: ReporterOptions) -> Self {
        let display = if opts.quiet {
            Display::Quiet
        } else if opts.progress == ProgressMode::Auto
            && !opts.verbose
            && std::io::stderr().is_terminal()
        {
            Display::Live
        } else {
            Display::Plain
        };
        let state = Arc::new(Mutex::new(LiveState::default()));
        Reporter {
            display,
            color: opts.color,
            started: Instant::now(),
            namespace: Mutex::new(String::new()),
            current_job: Mutex::new(None),
            jobs: Mutex::new(Vec::new()),
            source_down: std::sync::atomic::AtomicBool::new(false),
            kubectl: Mutex::new(uyuni_core::kubectl::Kubectl::default()),
            state,
            bar: Mutex::new(None),
        }
    }

    /// A line above the live view, or a timestamped line.
    fn line(&self, text: &str) {
        if self.display == Display::Quiet {
            return;
        }
        match self.live() {
            Some(bar) => bar.println(text),
            None => {
                let stamp = plain_stamp(self.started.elapsed());
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "{} {text}", paint(&stamp, DIM, self.color));
            }
        }
    }

    /// Warnings are shown even with -q.
    pub fn warn(&self, text: &str) {
        let text = format!("{} {text}", paint("warning:", YELLOW, self.color));
        match self.live() {
            Some(bar) => bar.println(text),
            None => {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "{text}");
            }
        }
    }

    /// A warning event whose advice is a `kubectl` command: rendered with the run's flags.
    fn warn_event(&self, event: &ProgressEvent<'_>) {
        let kubectl = self.kubectl.lock().map(|k| k.clone()).unwrap_or_default();
        let mut text = event.render(&kubectl);
        if text.contains(uyuni_core::kubectl::TOKEN_PLACEHOLDER) {
            text.push_str(&format!(" ({})", uyuni_core::kubectl::TOKEN_NOTE));
        }
        self.warn(&text);
    }

    /// The connection flags of the run, for the `kubectl` commands warnings advise.
    pub fn set_kubectl(&self, kubectl: uyuni_core::kubectl::Kubectl) {
        if let Ok(mut k) = self.kubectl.lock() {
            *k = kubectl;
        }
    }

    pub fn info(&self, text: &str) {
        self.line(text);
    }

    pub fn step(&self, position: usize, total: usize, step: &Step) {
        let line = step_label(step);
        if let Ok(mut job) = self.current_job.lock() {
            *job = matches!(
                step.action,
                uyuni_core::Action::RunJob { .. } | uyuni_core::Action::AwaitJob { .. }
            )
            .then(|| step.target.name.clone());
            if let (Some(name), Ok(mut jobs)) = (job.as_ref(), self.jobs.lock())
                && !jobs.contains(name)
            {
                jobs.push(name.clone());
            }
        }
        {
            let now = Instant::now();
            let mut state = lock(&self.state);
            state.position = (position, total);
            let same = state
                .steps
                .last()
                .is_some_and(|s| s.id == step.id && s.ended.is_none());
            if !same {
                if let Some(last) = state.steps.last_mut().filter(|s| s.ended.is_none()) {
                    last.ended = Some((now, Outcome::Done));
                }
                state.steps.push(StepState {
                    id: step.id.to_string(),
                    line: line.clone(),
                    started: now,
                    ended: None,
                });
                state.activity = None;
                state.log_tail.clear();
                state.rsync = None;
                state.sync = SyncProgress::default();
            }
        }
        if self.display == Display::Live
            && let Ok(mut bar) = self.bar.lock()
            && bar.is_none()
        {
            *bar = Some(live_bar(Arc::clone(&self.state), self.color));
        }
        if self.display == Display::Plain {
            let head = paint(&format!("step {position}/{total}:"), BOLD, self.color);
            self.line(&format!("{head} {}", uyuni_core::render::step_line(step)));
        }
        self.tick();
    }

    /// A step of the run's list that was done already when its turn came: shown under its
    /// number, so that the run counts every step its dry run numbered.
    pub fn done_step(&self, position: usize, total: usize, step: &Step) {
        {
            let now = Instant::now();
            let mut state = lock(&self.state);
            state.position = (position, total);
            if let Some(last) = state.steps.last_mut().filter(|s| s.ended.is_none()) {
                last.ended = Some((now, Outcome::Done));
            }
            state.steps.push(StepState {
                id: step.id.to_string(),
                line: format!("{}: done already when its turn came", step_label(step)),
                started: now,
                ended: Some((now, Outcome::Done)),
            });
        }
        if self.display == Display::Plain {
            let head = paint(&format!("step {position}/{total}:"), BOLD, self.color);
            self.line(&format!(
                "{head} {}",
                uyuni_core::render::done_step_line(step)
            ));
        }
        self.tick();
    }

    /// The namespace of the steps, and the Job the current step runs or waits for: what an
    /// interrupted run says is left running.
    pub fn interrupted_context(&self) -> (Option<String>, Option<String>) {
        let namespace = self
            .namespace
            .lock()
            .ok()
            .map(|ns| ns.clone())
            .filter(|ns| !ns.is_empty());
        let job = self.current_job.lock().ok().and_then(|j| j.clone());
        (namespace, job)
    }

    /// The Jobs this run's steps ran or waited for, oldest first.
    pub fn jobs(&self) -> Vec<String> {
        self.jobs.lock().map(|j| j.clone()).unwrap_or_default()
    }

    /// The source's services are stopped for the migration and the server is not ready yet.
    pub fn set_source_down(&self) {
        self.source_down
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn source_down(&self) -> bool {
        self.source_down.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_job_context(&self, namespace: &str) {
        if let Ok(mut ns) = self.namespace.lock() {
            namespace.clone_into(&mut ns);
        }
    }

    /// The live view, if it is showing.
    fn live(&self) -> Option<ProgressBar> {
        self.bar.lock().ok().and_then(|b| b.clone())
    }

    /// Ends the live view, leaving the step list (with each step's time) on the terminal.
    /// Call it before printing data on stdout: the live view redraws the lines above it.
    /// Harmless when there is no live view; the next step starts a new one.
    pub fn finish(&self, succeeded: bool) {
        let Some(bar) = self.bar.lock().ok().and_then(|mut b| b.take()) else {
            return;
        };
        let text = {
            let now = Instant::now();
            let mut state = lock(&self.state);
            if let Some(last) = state.steps.last_mut().filter(|s| s.ended.is_none()) {
                let outcome = if succeeded {
                    Outcome::Done
                } else {
                    Outcome::Failed
                };
                last.ended = Some((now, outcome));
            }
            let text = render_live(&state, now, self.color, usize::MAX, 0, false);
            let steps = std::mem::take(&mut state.steps);
            *state = LiveState {
                position: state.position,
                ..LiveState::default()
            };
            drop(steps);
            text
        };
        bar.finish_and_clear();
        if !text.is_empty() {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{text}");
        }
    }

    fn tick(&self) {
        if let Some(bar) = self.live() {
            bar.tick();
        }
    }

    fn live_event(&self, event: &ProgressEvent<'_>) {
        match event {
            ProgressEvent::JobLog { line, .. } => {
                let mut state = lock(&self.state);
                let line = last_segment(line);
                if state.sync.update(line) {
                    // Shown as the volumes' list, not as log lines.
                } else if let Some(p) = RsyncProgress::parse(line) {
                    state.rsync = Some(p);
                } else if !line.trim().is_empty() {
                    if state.log_tail.len() == LOG_TAIL {
                        state.log_tail.pop_front();
                    }
                    state.log_tail.push_back(line.to_owned());
                }
            }
            ProgressEvent::Warning { .. } | ProgressEvent::Retrying { .. } => {
                self.warn(&event.to_string());
            }
            ProgressEvent::LogNotFollowed { .. } => self.warn_event(event),
            ProgressEvent::JobFinished {
                succeeded: false, ..
            } => {
                let mut state = lock(&self.state);
                if let Some(last) = state.steps.last_mut().filter(|s| s.ended.is_none()) {
                    last.ended = Some((Instant::now(), Outcome::Failed));
                }
            }
            ProgressEvent::JobFinished {
                succeeded: true, ..
            } => {
                // A Job is the long part of a plan, and often its end: the command may print
                // its result on stdout next, which a live view would draw over. So the view
                // ends here; a following step starts a new one.
                self.finish(true);
                return;
            }
            other => lock(&self.state).activity = Some(other.to_string()),
        }
        self.tick();
    }

    /// Whether a progress figure is due in plain mode: the last of a transfer, or the first
    /// after [`PLAIN_PROGRESS_EVERY`].
    fn plain_progress_due(&self, last: bool) -> bool {
        let now = Instant::now();
        let mut state = lock(&self.state);
        let due = last
            || state
                .last_plain_progress
                .is_none_or(|t| now.duration_since(t) >= PLAIN_PROGRESS_EVERY);
        if due {
            state.last_plain_progress = Some(now);
        }
        due
    }

    fn plain_event(&self, event: &ProgressEvent<'_>) {
        if let ProgressEvent::JobLog { job, line, .. } = event {
            let line = last_segment(line);
            // The data sync's status lines stay lines of the log, as the Job wrote them; only
            // the copies' running figures are thinned out like rsync's.
            if let Some(SyncLine::Volume {
                state:
                    VolumeState::Copying {
                        bytes: Some(_),
                        percent,
                    },
                ..
            }) = uyuni_core::sync_progress::parse(line)
            {
                if self.plain_progress_due(percent.is_some_and(|p| p >= 100)) {
                    self.line(&paint(&format!("job/{job} | {line}"), DIM, self.color));
                }
                return;
            }
            if let Some(p) = RsyncProgress::parse(line) {
                if self.plain_progress_due(p.percent >= 100) {
                    self.line(&format!("job/{job} | rsync {}", p.summary()));
                }
                return;
            }
        }
        let text = event.to_string();
        match event {
            ProgressEvent::Warning { .. } | ProgressEvent::Retrying { .. } => self.warn(&text),
            ProgressEvent::LogNotFollowed { .. } => self.warn_event(event),
            ProgressEvent::JobLog { .. } => self.line(&paint(&text, DIM, self.color)),
            ProgressEvent::JobFinished {
                succeeded: false, ..
            } => self.line(&paint(&text, RED, self.color)),
            _ => self.line(&text),
        }
    }
}

impl Progress for Reporter {
    fn event(&self, event: ProgressEvent<'_>) {
        match self.display {
            Display::Quiet => {}
            Display::Plain => self.plain_event(&event),
            Display::Live => self.live_event(&event),
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        if let Some(bar) = self.live() {
            bar.finish_and_clear();
        }
    }
}

fn live_bar(state: Arc<Mutex<LiveState>>, color: bool) -> ProgressBar {
    let started = Instant::now();
    let style = ProgressStyle::with_template("{live}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .with_key(
            "live",
            move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
                let width = usize::from(console::Term::stderr().size().1).max(20);
                let frame = (started.elapsed().as_millis() / 100) as usize;
                let state = lock(&state);
                let _ = w.write_str(&render_live(
                    &state,
                    Instant::now(),
                    color,
                    width,
                    frame,
                    true,
                ));
            },
        );
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(8));
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

// --- pure formatting -------------------------------------------------------------------------

const BOLD: &str = "1";
const DIM: &str = "2";
#[doc(hidden)]
pub const RED: &str = "31";
const GREEN: &str = "32";
const YELLOW: &str = "33";
const CYAN: &str = "36";

/// `text` in an SGR colour when `color` is on.
pub fn paint(text: &str, sgr: &str, color: bool) -> String {
    if color {
        format!("\x1b[{sgr}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// The plain-mode prefix: seconds since the command started.
pub fn plain_stamp(elapsed: Duration) -> String {
    format!("[{:>7.1}s]", elapsed.as_secs_f64())
}

/// `0.4s`, `12s`, `1m02s`, `2h05m`.
pub fn human_elapsed(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 10 {
        format!("{:.1}s", d.as_secs_f64())
    } else if secs < 60 {
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

/// A step as the live list names it.
fn step_label(step: &Step) -> String {
    format!("{} ({})", step.description, step.target)
}

/// rsync rewrites its progress line with carriage returns; only the latest state counts.
#[doc(hidden)]
pub fn last_segment(line: &str) -> &str {
    line.rsplit('\r')
        .find(|s| !s.trim().is_empty())
        .unwrap_or(line)
}

/// Cuts `text` to `width` characters, marking the cut.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// The live view: one line per step seen so far (✔ done, ✖ failed, spinner for the running one,
/// each with its time), then under the running step what it is doing, rsync's figures and the
/// last lines of its Job's log.
#[doc(hidden)]
pub fn render_live(
    state: &LiveState,
    now: Instant,
    color: bool,
    width: usize,
    frame: usize,
    live_fold: bool,
) -> String {
    let mut out = String::new();
    // Many steps finish in a blink (one per volume): while running, the finished ones beyond
    // the last few fold into one line so the view fits a terminal.
    let finished = state.steps.iter().filter(|s| s.ended.is_some()).count();
    let folded = if live_fold && finished > VISIBLE_DONE {
        finished - VISIBLE_DONE
    } else {
        0
    };
    if folded > 0 {
        let first = &state.steps[0];
        let until = state.steps[folded - 1]
            .ended
            .map_or(first.started, |(end, _)| end);
        let time = human_elapsed(until.saturating_duration_since(first.started));
        let _ = writeln!(
            out,
            "{} {folded} steps done  {}",
            paint("✔", GREEN, color),
            paint(&time, DIM, color)
        );
    }
    for step in state.steps.iter().skip(folded) {
        let (mark, elapsed) = match step.ended {
            Some((end, Outcome::Done)) => (paint("✔", GREEN, color), end - step.started),
            Some((end, Outcome::Failed)) => (paint("✖", RED, color), end - step.started),
            None => (
                paint(SPINNER[frame % SPINNER.len()], CYAN, color),
                now.saturating_duration_since(step.started),
            ),
        };
        let time = human_elapsed(elapsed);
        let label = fit(&step.line, width.saturating_sub(time.len() + 4));
        let _ = writeln!(out, "{mark} {label}  {}", paint(&time, DIM, color));
    }
    let running = state.steps.last().is_some_and(|s| s.ended.is_none());
    if running {
        let indent = "    ";
        let room = width.saturating_sub(indent.len());
        if let Some(activity) = &state.activity {
            let _ = writeln!(out, "{indent}{}", fit(activity, room));
        }
        if let Some(p) = &state.rsync {
            let _ = writeln!(
                out,
                "{indent}{}",
                paint(&fit(&format!("rsync {}", p.summary()), room), BOLD, color)
            );
        }
        for line in sync_lines(&state.sync) {
            let _ = writeln!(out, "{indent}{}", fit(&line, room));
        }
        for line in &state.log_tail {
            let _ = writeln!(
                out,
                "{indent}{}",
                paint(&fit(&format!("│ {line}"), room), DIM, color)
            );
        }
        let (position, total) = state.position;
        if total > position {
            let more = total - position;
            let _ = writeln!(
                out,
                "{}",
                paint(
                    &format!(
                        "  … {more} more step{} planned",
                        if more == 1 { "" } else { "s" }
                    ),
                    DIM,
                    color
                )
            );
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// The volumes of a data sync, under its step in the live view: how many wait, are copied, are
/// done, skipped or failed in the current pass, then one line for each volume being copied
/// (with rsync's figures once it printed some) and each that failed. Nothing before the Job's
/// first pass.
#[doc(hidden)]
pub fn sync_lines(sync: &SyncProgress) -> Vec<String> {
    let Some(pass) = &sync.pass else {
        return Vec::new();
    };
    let c = sync.counts();
    let what = match pass.as_str() {
        "serving" => "copy while the source serves",
        "stopped" => "final copy",
        "measure" => "measuring what the final copy would move",
        other => other,
    };
    let mut parts = Vec::new();
    for (n, word) in [
        (c.done, "done"),
        (c.copying, "copying"),
        (c.waiting, "waiting"),
        (c.skipped, "skipped"),
        (c.failed, "failed"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {word}"));
        }
    }
    let mut lines = vec![format!(
        "volumes ({what}): {}",
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(", ")
        }
    )];
    for (volume, state) in &sync.volumes {
        match state {
            VolumeState::Copying { bytes, percent } => {
                let mut line = format!("  {volume}: copying");
                if let Some(p) = percent {
                    let _ = write!(line, " {p:>3}%");
                }
                if let Some(b) = bytes {
                    let _ = write!(line, "  {}", human_bytes(*b));
                }
                lines.push(line);
            }
            VolumeState::Failed { code } => {
                lines.push(format!("  {volume}: failed (rsync exit code {code})"));
            }
            VolumeState::Waiting | VolumeState::Done { .. } | VolumeState::Skipped => {}
        }
    }
    lines
}

/// The figures of one rsync `--info=progress2` line:
/// `  1,234,567  45%   11.84MB/s    0:01:39 (xfr#12, to-chk=3/40)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RsyncProgress {
    pub bytes: u64,
    pub percent: u32,
    /// As rsync writes it, e.g. `11.84MB/s`.
    pub rate: String,
    /// Time left while running, time taken on the last line of a transfer.
    pub time: String,
    pub files_transferred: Option<u64>,
    /// `to-chk`/`ir-chk`: files still to check, of how many known so far.
    pub to_check: Option<(u64, u64)>,
}

impl RsyncProgress {
    pub fn parse(line: &str) -> Option<RsyncProgress> {
        let mut words = line.split_whitespace();
        let bytes_word = words.next()?;
        if !bytes_word.bytes().all(|b| b.is_ascii_digit() || b == b',') {
            return None;
        }
        let bytes = bytes_word.replace(',', "").parse().ok()?;
        let percent = words.next()?.strip_suffix('%')?.parse().ok()?;
        let rate = words.next().filter(|r| r.ends_with("/s"))?.to_owned();
        let time = words
            .next()
            .filter(|t| t.contains(':') && t.bytes().all(|b| b.is_ascii_digit() || b == b':'))?
            .to_owned();
        let rest: String = words.collect::<Vec<_>>().join(" ");
        let inner = rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or("");
        let mut files_transferred = None;
        let mut to_check = None;
        for part in inner.split(',').map(str::trim) {
            if let Some(n) = part.strip_prefix("xfr#") {
                files_transferred = n.parse().ok();
            } else if let Some(v) = part
                .strip_prefix("to-chk=")
                .or_else(|| part.strip_prefix("ir-chk="))
                && let Some((a, b)) = v.split_once('/')
            {
                to_check = a.parse().ok().zip(b.parse().ok());
            }
        }
        Some(RsyncProgress {
            bytes,
            percent,
            rate,
            time,
            files_transferred,
            to_check,
        })
    }

    /// `45%  1.2 GiB  11.84MB/s  0:01:39  12 files sent, 3 of 40 left to check`
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{:>3}%  {}  {}  {}",
            self.percent,
            human_bytes(self.bytes),
            self.rate,
            self.time
        );
        if let Some(n) = self.files_transferred {
            let _ = write!(s, "  {n} file{} sent", if n == 1 { "" } else { "s" });
        }
        if let Some((left, of)) = self.to_check {
            let _ = write!(s, ", {left} of {of} left to check");
        }
        s
    }
}

/// Binary units, one decimal: `512 B`, `1.5 KiB`, `1.2 GiB` (the core's, so the dry run and the
/// progress display agree).
pub use uyuni_core::dataplane::human_bytes;

/// An error and its causes on one line, as `{:#}` does, without repeating a cause that a
/// message already quotes (the effects errors include their source).
pub fn error_chain(err: &anyhow::Error) -> String {
    error_chain_with(err, &uyuni_core::kubectl::Kubectl::BARE)
}

/// [`error_chain`], with the `kubectl` commands the errors advise carrying the run's flags.
pub fn error_chain_with(err: &anyhow::Error, kubectl: &uyuni_core::kubectl::Kubectl) -> String {
    // An API server that cannot be reached, or that refuses the credentials, is the whole
    // story, whatever was being read.
    if let Some(e) = err.chain().find_map(|c| {
        c.downcast_ref::<uyuni_effects::EffectsError>().filter(|e| {
            matches!(e, uyuni_effects::EffectsError::Unreachable { .. }) || e.unauthorized()
        })
    }) {
        return e.render(kubectl);
    }
    let mut out = String::new();
    for cause in err.chain() {
        let effects = cause.downcast_ref::<uyuni_effects::EffectsError>();
        let kube = uyuni_effects::error::kube_reason(cause);
        let last = effects.is_some() || kube.is_some();
        let text = if let Some(e) = effects {
            e.render(kubectl)
        } else if let Some(reason) = kube {
            // kube's own text ends in a debug dump of the Status.
            reason
        } else if let Some(e) = cause.downcast_ref::<uyuni_core::PlanError>() {
            e.render(kubectl)
        } else {
            cause.to_string()
        };
        if out.contains(&text) {
            if last {
                break;
            }
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
        // Its message has the server's words; below it are only kube's own errors, whose text
        // is a debug dump (`Status { … }`) and no advice.
        if last {
            break;
        }
    }
    out
}

// --- data on stdout --------------------------------------------------------------------------

/// Renders `value` as `-o` asks: JSON (pretty, one trailing newline), YAML, or `human()`.
pub fn render_data<T: Serialize>(
    format: OutputFormat,
    value: &T,
    human: impl FnOnce(&T) -> String,
) -> Result<String> {
    Ok(match format {
        OutputFormat::Human => human(value),
        OutputFormat::Json => {
            let mut s = serde_json::to_string_pretty(value).context("cannot render JSON")?;
            s.push('\n');
            s
        }
        OutputFormat::Yaml => serde_saphyr::to_string(value).context("cannot render YAML")?,
    })
}

/// [`render_data`], written to stdout.
pub fn print_data<T: Serialize>(
    format: OutputFormat,
    value: &T,
    human: impl FnOnce(&T) -> String,
) -> Result<()> {
    let text = render_data(format, value, human)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}
