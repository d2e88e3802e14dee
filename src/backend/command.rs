//! Any runtime as a command: `ONNX_BACKEND=command:PROGRAM`.
//!
//! A runtime with no Rust binding (a Python package, a C++ tool) is judged
//! by the same suite through a small program that speaks this folder
//! protocol, one process per run:
//!
//! 1. The harness makes a fresh temporary folder and writes `model.onnx`
//!    (the model's bytes as the case holds them) and `input_0.pb` ..
//!    `input_{n-1}.pb`, serialized `TensorProto`s in the order of the graph
//!    inputs that are not initializers, each named after its graph input
//!    (unnamed when our loader rejected the model and the names are not
//!    known; feed by position).
//! 2. It runs `PROGRAM FOLDER`. PROGRAM is split on whitespace, so
//!    `command:python3 path/to/runner.py` works; standard input is empty,
//!    standard output and error go to `stdout.txt` and `stderr.txt` in the
//!    folder.
//! 3. The program answers in the same folder:
//!    - it ran: `output_0.pb`, `output_1.pb`, .. (`TensorProto`s, the graph
//!      outputs in order) and exit status 0;
//!    - it refused the model or the inputs: `error.txt` (its text is the
//!      rejection message) and any exit status;
//!    - optionally `version.txt`: one line naming the runtime and its
//!      version (`onnxruntime 1.32.0`), recorded with the results.
//! 4. A nonzero exit, or death by a signal, without `error.txt` is a crash,
//!    judged like a panic. A program still running after the time limit
//!    (`ONNX_COMMAND_TIMEOUT` seconds, default 60) is killed, with every
//!    process it started, and the run is reported as a timeout.
//!
//! The folder is removed when the run ends. The backend's name is
//! `command:<stem>`, the file stem of the program's last word that is not
//! an option (`command:onnx_reference` for
//! `python3 xtask/src/runtimes/onnx_reference.py`).

use super::{Backend, RawRun, RunError};
use crate::model::Model;
use crate::proto::{self, LoadOptions};
use crate::tensor::Tensor;
use crate::{files, Limits};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The time limit when `ONNX_COMMAND_TIMEOUT` is not set: generous for a
/// Python interpreter that imports a runtime for every run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of the program's standard error a crash message quotes.
const STDERR_TAIL: usize = 2000;

/// Failures of the protocol itself (not the runtime's answer).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("ONNX_BACKEND=command: needs a program to run")]
    NoProgram,
    #[error("ONNX_COMMAND_TIMEOUT={0:?}: expected a positive number of seconds")]
    BadTimeout(String),
    #[error("program '{0}' not found (give a path, or a name on PATH)")]
    NotFound(String),
    #[error("making the run's folder: {0}")]
    Folder(std::io::Error),
    #[error("writing {file}: {detail}")]
    Write { file: String, detail: String },
    #[error("starting '{program}': {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("waiting for '{program}': {source}")]
    Wait {
        program: String,
        source: std::io::Error,
    },
}

impl From<CommandError> for RunError {
    fn from(e: CommandError) -> RunError {
        RunError::Rejected(format!("the command backend could not run: {e}"))
    }
}

/// A runtime reached through a program that speaks the folder protocol.
pub struct Command {
    /// The program and its leading arguments (the folder is added last).
    argv: Vec<String>,
    name: String,
    timeout: Duration,
    /// The last `version.txt` the program wrote.
    version: Mutex<Option<String>>,
}

impl Command {
    /// The backend for `PROGRAM` (what follows `command:`), with the time
    /// limit from `ONNX_COMMAND_TIMEOUT`.
    pub fn from_spec(spec: &str) -> Result<Command, String> {
        let timeout = match std::env::var("ONNX_COMMAND_TIMEOUT") {
            Ok(text) => parse_timeout(&text).map_err(|e| e.to_string())?,
            Err(_) => DEFAULT_TIMEOUT,
        };
        Command::new(spec, timeout).map_err(|e| e.to_string())
    }

    pub fn new(spec: &str, timeout: Duration) -> Result<Command, CommandError> {
        let argv: Vec<String> = spec.split_whitespace().map(str::to_string).collect();
        let program = argv.first().ok_or(CommandError::NoProgram)?;
        if !is_runnable(program) {
            return Err(CommandError::NotFound(program.clone()));
        }
        Ok(Command {
            name: format!("command:{}", stem(&argv)),
            argv,
            timeout,
            version: Mutex::new(None),
        })
    }

    /// Runs the program on a folder holding `model` (bytes) and `inputs`.
    fn run_in_folder(
        &self,
        model: &[u8],
        inputs: &[Tensor],
        names: &[&str],
    ) -> Result<RawRun, CommandError> {
        // Removed on drop, whatever the program left in it.
        let dir = tempfile::Builder::new()
            .prefix("onnx-command-")
            .tempdir()
            .map_err(CommandError::Folder)?;
        let folder = dir.path();
        write(&folder.join("model.onnx"), model)?;
        for (k, t) in inputs.iter().enumerate() {
            let file = format!("input_{k}.pb");
            let name = names.get(k).copied().unwrap_or("");
            let bytes = proto::save_tensor(name, t).map_err(|e| CommandError::Write {
                file: file.clone(),
                detail: e.to_string(),
            })?;
            write(&folder.join(&file), &bytes)?;
        }
        let status = self.run_program(folder)?;
        if let Some(v) = read_text(&folder.join("version.txt")) {
            if let Ok(mut seen) = self.version.lock() {
                *seen = Some(v.lines().next().unwrap_or("").trim().to_string());
            }
        }
        let Some(status) = status else {
            return Ok(RawRun::TimedOut(format!(
                "still running after {:?}; killed{}",
                self.timeout,
                stderr_tail(folder)
            )));
        };
        if let Some(message) = read_text(&folder.join("error.txt")) {
            return Ok(RawRun::Rejected(message.trim_end().to_string()));
        }
        if !status.success() {
            return Ok(RawRun::Crashed(format!(
                "{} without error.txt{}",
                describe(status),
                stderr_tail(folder)
            )));
        }
        Ok(read_outputs(folder))
    }

    /// Runs the program on `folder`: its exit status, or None when it was
    /// killed at the time limit.
    fn run_program(&self, folder: &Path) -> Result<Option<ExitStatus>, CommandError> {
        let program = self.argv.join(" ");
        let open = |name: &str| {
            std::fs::File::create(folder.join(name)).map_err(|e| CommandError::Write {
                file: name.to_string(),
                detail: e.to_string(),
            })
        };
        let mut cmd = std::process::Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .arg(folder)
            .stdin(Stdio::null())
            .stdout(open("stdout.txt")?)
            .stderr(open("stderr.txt")?);
        // Its own process group, so that a time limit stops whatever the
        // program started too (a shell script's children, a worker pool).
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().map_err(|source| CommandError::Start {
            program: program.clone(),
            source,
        })?;
        let wait_err = |source| CommandError::Wait {
            program: program.clone(),
            source,
        };
        let start = Instant::now();
        // Polling: std has no wait with a deadline. The pause grows to 20 ms,
        // small against a run that starts an interpreter.
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(status) = child.try_wait().map_err(wait_err)? {
                return Ok(Some(status));
            }
            if start.elapsed() >= self.timeout {
                kill_group(&mut child);
                // Reaped, so that no zombie is left behind.
                let _ = child.wait();
                return Ok(None);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

/// Kills the child's whole process group (the child leads it).
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) with a negative pid signals the process group
            // the child leads (`process_group(0)` above); it touches no
            // memory of ours.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    let _ = child.kill();
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), CommandError> {
    std::fs::write(path, bytes).map_err(|e| CommandError::Write {
        file: path.display().to_string(),
        detail: e.to_string(),
    })
}

/// A small text file the program wrote, if any (bounded: it is untrusted).
fn read_text(path: &Path) -> Option<String> {
    let bytes = files::read_limited(path, 1 << 20).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The end of the program's standard error, for crash and timeout messages.
fn stderr_tail(folder: &Path) -> String {
    let text = read_text(&folder.join("stderr.txt")).unwrap_or_default();
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let start = text
        .char_indices()
        .rev()
        .nth(STDERR_TAIL)
        .map_or(0, |(i, _)| i);
    format!("; stderr: {}", &text[start..])
}

fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}

/// `output_0.pb`, `output_1.pb`, .. as long as they exist. A file that does
/// not decode is the program's fault: a crash, not a refusal.
fn read_outputs(folder: &Path) -> RawRun {
    let opts = LoadOptions::new(Limits::default());
    let mut outputs = Vec::new();
    for k in 0.. {
        let path = folder.join(format!("output_{k}.pb"));
        if !path.exists() {
            break;
        }
        let decoded = files::read_limited(&path, opts.limits.max_file_bytes)
            .and_then(|bytes| proto::load_tensor_with(&bytes, &opts));
        match decoded {
            Ok((_, t)) => outputs.push(t),
            Err(e) => {
                return RawRun::Crashed(format!(
                    "exit status 0, but output_{k}.pb does not decode: {e}"
                ))
            }
        }
    }
    RawRun::Ran(outputs)
}

fn parse_timeout(text: &str) -> Result<Duration, CommandError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| CommandError::BadTimeout(text.to_string()))
}

/// The stem of the program's last word that is not an option.
fn stem(argv: &[String]) -> String {
    let word = argv
        .iter()
        .rev()
        .find(|w| !w.starts_with('-'))
        .unwrap_or(&argv[0]);
    Path::new(word)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| word.clone())
}

/// Whether `program` names a file (a path) or a file on PATH.
fn is_runnable(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d: PathBuf| d.join(program).is_file())
    })
}

impl Backend for Command {
    fn name(&self) -> &str {
        &self.name
    }

    fn version(&self) -> String {
        match self.version.lock().ok().and_then(|v| v.clone()) {
            Some(v) if !v.is_empty() => v,
            _ => format!("{} (wrote no version.txt)", self.argv.join(" ")),
        }
    }

    fn run(
        &self,
        model: &Model,
        model_bytes: &[u8],
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, RunError> {
        let names = crate::graph::feed_names(model);
        match self.run_in_folder(model_bytes, inputs, &names)? {
            RawRun::Ran(outputs) => Ok(outputs),
            RawRun::Rejected(m) | RawRun::CannotRun(m) => Err(RunError::Rejected(m)),
            RawRun::Crashed(m) => Err(RunError::Crashed(m)),
            RawRun::TimedOut(m) => Err(RunError::TimedOut(m)),
        }
    }

    fn check_input(&self, input: &Tensor) -> Result<(), String> {
        // Whatever our writer can serialize can be handed over.
        proto::save_tensor("", input)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn run_files(&self, model: &Path, inputs: &[Tensor]) -> RawRun {
        // The file's bytes as they are (read within our file limit); files
        // beside it, such as external data, are not copied: the program sees
        // the model alone, as a runtime given only this file would.
        let bytes = match files::read_limited(model, Limits::default().max_file_bytes) {
            Ok(b) => b,
            Err(e) => return RawRun::CannotRun(format!("reading the model file: {e}")),
        };
        self.run_in_folder(&bytes, inputs, &[])
            .unwrap_or_else(|e| RawRun::CannotRun(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, body: &str) -> String {
        let path = dir.join("runtime.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        format!("sh {}", path.display())
    }

    fn model() -> (Model, Vec<u8>) {
        let mut m = Model {
            ir_version: 10,
            opset_import: vec![(String::new(), 18)],
            graph: Default::default(),
        };
        m.graph.inputs.push(crate::model::ValueInfo {
            name: "x".into(),
            ..Default::default()
        });
        (m, b"not really a model".to_vec())
    }

    #[test]
    fn names_come_from_the_program_stem() {
        let c = Command::new("sh /a/b/onnx_reference.py --fast", DEFAULT_TIMEOUT).unwrap();
        assert_eq!(c.name(), "command:onnx_reference");
        assert!(matches!(
            Command::new("", DEFAULT_TIMEOUT),
            Err(CommandError::NoProgram)
        ));
        assert!(matches!(
            Command::new("/no/such/program", DEFAULT_TIMEOUT),
            Err(CommandError::NotFound(_))
        ));
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("x").is_err());
        assert_eq!(parse_timeout(" 2.5 ").unwrap(), Duration::from_millis(2500));
    }

    #[test]
    fn the_four_answers_of_the_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let (m, bytes) = model();
        let x = Tensor::from_vec(&[2], vec![1.5f32, -2.0]);
        // Echo: the input as the output, after checking the model arrived.
        let echo = script(
            dir.path(),
            r#"printf 'not really a model' | cmp -s "$1/model.onnx" - || exit 3
cp "$1/input_0.pb" "$1/output_0.pb"; echo "echo 1.0" > "$1/version.txt""#,
        );
        let c = Command::new(&echo, DEFAULT_TIMEOUT).unwrap();
        assert_eq!(
            c.run(&m, &bytes, std::slice::from_ref(&x)),
            Ok(vec![x.clone()])
        );
        assert_eq!(c.version(), "echo 1.0");

        let refuse = script(
            dir.path(),
            r#"echo "no kernel for Pad" > "$1/error.txt"; exit 1"#,
        );
        let c = Command::new(&refuse, DEFAULT_TIMEOUT).unwrap();
        assert_eq!(
            c.run(&m, &bytes, &[]),
            Err(RunError::Rejected("no kernel for Pad".into()))
        );
        assert!(c.version().contains("wrote no version.txt"));

        let crash = script(dir.path(), "echo 'Segmentation fault' >&2; kill -SEGV $$");
        let c = Command::new(&crash, DEFAULT_TIMEOUT).unwrap();
        match c.run(&m, &bytes, &[]) {
            Err(RunError::Crashed(m)) => {
                assert!(
                    m.contains("signal 11") && m.contains("Segmentation fault"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        let exit = script(dir.path(), "exit 2");
        let c = Command::new(&exit, DEFAULT_TIMEOUT).unwrap();
        assert!(
            matches!(c.run(&m, &bytes, &[]), Err(RunError::Crashed(m)) if m.contains("exit status 2"))
        );

        // A child that outlives its parent is stopped with it.
        let marker = dir.path().join("survivor");
        let hang = script(
            dir.path(),
            &format!("(sleep 2; touch {}) & sleep 30", marker.display()),
        );
        let c = Command::new(&hang, Duration::from_millis(300)).unwrap();
        let start = Instant::now();
        assert!(matches!(c.run(&m, &bytes, &[]), Err(RunError::TimedOut(_))));
        assert!(start.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "the program's child was not stopped");
    }

    #[test]
    fn outputs_that_do_not_decode_are_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let (m, bytes) = model();
        let bad = script(dir.path(), r#"printf '\377\377\377' > "$1/output_0.pb""#);
        let c = Command::new(&bad, DEFAULT_TIMEOUT).unwrap();
        assert!(
            matches!(c.run(&m, &bytes, &[]), Err(RunError::Crashed(m)) if m.contains("output_0.pb"))
        );
    }

    #[test]
    fn the_folder_is_removed_and_files_are_passed_as_is() {
        let dir = tempfile::tempdir().unwrap();
        let seen = dir.path().join("seen");
        let keep = script(
            dir.path(),
            &format!(
                r#"echo "$1" > {}; cp "$1/model.onnx" "$1/output_0.pb""#,
                seen.display()
            ),
        );
        let model_file = dir.path().join("model.onnx");
        let x = Tensor::from_vec(&[1], vec![7i64]);
        std::fs::write(&model_file, proto::save_tensor("t", &x).unwrap()).unwrap();
        let c = Command::new(&keep, DEFAULT_TIMEOUT).unwrap();
        match c.run_files(&model_file, &[]) {
            RawRun::Ran(outs) => assert_eq!(outs, vec![x]),
            other => panic!("{other:?}"),
        }
        let folder = std::fs::read_to_string(&seen).unwrap();
        assert!(
            !Path::new(folder.trim()).exists(),
            "{folder} was left behind"
        );
    }
}
