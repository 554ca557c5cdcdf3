//! What the user sees on stderr while a command runs: steps, Job logs, retries. Data goes to
//! stdout elsewhere.

use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

use uyuni_core::Step;
use uyuni_effects::{Progress, ProgressEvent};

pub struct Reporter {
    quiet: bool,
    started: Instant,
    namespace: Mutex<String>,
}

impl Reporter {
    pub fn new(quiet: bool) -> Self {
        Reporter {
            quiet,
            started: Instant::now(),
            namespace: Mutex::new(String::new()),
        }
    }

    fn line(&self, text: &str) {
        if self.quiet {
            return;
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "[{elapsed:>7.1}s] {text}");
    }

    pub fn info(&self, text: &str) {
        self.line(text);
    }

    pub fn step(&self, position: usize, total: usize, step: &Step) {
        self.line(&format!(
            "step {position}/{total}: {}",
            uyuni_core::render::step_line(step)
        ));
    }

    pub fn set_job_context(&self, namespace: &str) {
        if let Ok(mut ns) = self.namespace.lock() {
            namespace.clone_into(&mut ns);
        }
    }
}

impl Progress for Reporter {
    fn event(&self, event: ProgressEvent<'_>) {
        self.line(&event.to_string());
    }
}
