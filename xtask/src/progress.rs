//! Progress of a long command: a bar with count, elapsed time and rate on a
//! terminal; elsewhere (CI logs) a plain line every few seconds, so a log
//! shows the run is alive without a line of dots or thousands of lines.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How often a plain progress line is printed when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(15);

pub struct Progress {
    label: String,
    total: u64,
    done: u64,
    start: Instant,
    last_line: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub fn new(label: &str, total: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            let style = ProgressStyle::with_template(
                "{msg} [{bar:30}] {pos}/{len} ({per_sec}, {elapsed}, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_message(label.to_string());
            bar
        });
        Progress {
            label: label.to_string(),
            total,
            done: 0,
            start: Instant::now(),
            last_line: Instant::now(),
            bar,
        }
    }

    /// The total, when it is learnt only once the work starts (after a
    /// build, say): the clock starts here too.
    pub fn set_total(&mut self, total: u64) {
        self.total = total;
        self.start = Instant::now();
        self.last_line = Instant::now();
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.reset_elapsed();
        }
    }

    pub fn inc(&mut self, n: u64) {
        self.done += n;
        match &self.bar {
            Some(b) => b.inc(n),
            None if self.last_line.elapsed() >= PLAIN_EVERY => {
                self.last_line = Instant::now();
                eprintln!("{}", self.line());
            }
            None => {}
        }
    }

    fn line(&self) -> String {
        let secs = self.start.elapsed().as_secs_f64();
        format!(
            "{}: {}/{} in {:.0} s ({:.1}/s)",
            self.label,
            self.done,
            self.total,
            secs,
            self.done as f64 / secs.max(1e-9)
        )
    }

    pub fn finish(self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        eprintln!("{}", self.line());
    }
}
