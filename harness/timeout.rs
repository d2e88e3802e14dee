//! The time limit of one trial (`ONNX_TRIAL_TIMEOUT`): a runtime that hangs
//! costs one trial, recorded as a timeout, not the whole run.

use anyhow::{bail, Result};
use std::time::Duration;

/// Runs `run`, on a thread of its own when there is a time limit; `None`
/// when it did not finish in time. The thread of a trial that timed out is
/// left behind (a hung runtime cannot be stopped from outside); it ends
/// with the process.
pub fn run_within<T: Send + 'static>(
    limit: Option<Duration>,
    run: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let Some(limit) = limit else {
        return Some(run());
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run());
    });
    rx.recv_timeout(limit).ok()
}

/// `ONNX_TRIAL_TIMEOUT`, when set.
pub fn from_env() -> Result<Option<Duration>> {
    match std::env::var("ONNX_TRIAL_TIMEOUT") {
        Ok(s) => parse(&s).map(Some),
        Err(_) => Ok(None),
    }
}

/// A time limit in seconds (fractions allowed).
pub fn parse(s: &str) -> Result<Duration> {
    match s.trim().parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs.is_finite() => Ok(Duration::from_secs_f64(secs)),
        _ => bail!("ONNX_TRIAL_TIMEOUT={s}: expected a positive number of seconds"),
    }
}
