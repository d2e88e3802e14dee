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
//!
//! **Serve mode** (`ONNX_COMMAND_SERVE=1`), for programs whose start-up
//! dominates a run (an interpreter importing a runtime): the program is
//! started once per concurrent run as `PROGRAM --serve` and kept. For each
//! run the harness writes the folder as above, sends its path and a newline
//! on the program's standard input, and waits for the line `done` on its
//! standard output; the folder then holds the answer exactly as in the
//! one-shot protocol (outputs, or `error.txt`). Other lines on standard
//! output are ignored; standard error goes to a file the harness quotes on
//! a crash. A program that exits before answering has crashed (a fresh one
//! is started for the next run); one that does not answer within the time
//! limit is killed with its process group, and the run is a timeout.
//! Nothing else changes: the same trials, names and verdicts.

use super::{Backend, RawRun, RunError};
use crate::model::Model;
use crate::proto::{self, LoadOptions};
use crate::tensor::Tensor;
use crate::{files, Limits};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
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
    #[error("ONNX_COMMAND_SERVE={0:?}: expected 0 or 1")]
    BadServe(String),
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
    /// Serve mode: programs started with `--serve` and kept between runs
    /// (idle ones here; one per concurrent run at most).
    serve: Option<Mutex<Vec<Server>>>,
    /// The last `version.txt` the program wrote.
    version: Mutex<Option<String>>,
}

/// How a run of the program ended, before its folder is read.
enum Finished {
    /// One-shot: the program exited with this status.
    Exited(ExitStatus),
    /// Serve mode: the program said `done`.
    Answered,
    /// Serve mode: the program died before answering (how).
    Died(String),
    /// Stopped at the time limit (the end of its standard error).
    TimedOut(String),
}

impl Command {
    /// The backend for `PROGRAM` (what follows `command:`), with the time
    /// limit from `ONNX_COMMAND_TIMEOUT`.
    pub fn from_spec(spec: &str) -> Result<Command, String> {
        let timeout = match std::env::var("ONNX_COMMAND_TIMEOUT") {
            Ok(text) => parse_timeout(&text).map_err(|e| e.to_string())?,
            Err(_) => DEFAULT_TIMEOUT,
        };
        let serve = match std::env::var("ONNX_COMMAND_SERVE").as_deref() {
            Err(_) | Ok("") | Ok("0") => false,
            Ok("1") => true,
            Ok(other) => return Err(CommandError::BadServe(other.to_string()).to_string()),
        };
        let command = Command::new(spec, timeout).map_err(|e| e.to_string())?;
        Ok(if serve { command.serving() } else { command })
    }

    /// The same backend in serve mode.
    pub fn serving(mut self) -> Command {
        self.serve = Some(Mutex::new(Vec::new()));
        self
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
            serve: None,
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
        let finished = match &self.serve {
            Some(pool) => self.ask_server(pool, folder)?,
            None => self.run_program(folder)?,
        };
        if let Some(v) = read_text(&folder.join("version.txt")) {
            if let Ok(mut seen) = self.version.lock() {
                *seen = Some(v.lines().next().unwrap_or("").trim().to_string());
            }
        }
        let status = match finished {
            Finished::TimedOut(stderr) => {
                return Ok(RawRun::TimedOut(format!(
                    "still running after {:?}; killed{stderr}",
                    self.timeout
                )))
            }
            Finished::Died(how) => return Ok(RawRun::Crashed(how)),
            Finished::Exited(status) => Some(status),
            Finished::Answered => None,
        };
        if let Some(message) = read_text(&folder.join("error.txt")) {
            return Ok(RawRun::Rejected(message.trim_end().to_string()));
        }
        if let Some(status) = status.filter(|s| !s.success()) {
            return Ok(RawRun::Crashed(format!(
                "{} without error.txt{}",
                describe(status),
                stderr_tail(&folder.join("stderr.txt"))
            )));
        }
        Ok(read_outputs(folder))
    }

    /// Serve mode: hands `folder` to an idle server (starting one if none
    /// is idle) and waits for its answer. A server that answered goes back
    /// to the pool; one that died or was stopped does not.
    fn ask_server(
        &self,
        pool: &Mutex<Vec<Server>>,
        folder: &Path,
    ) -> Result<Finished, CommandError> {
        let idle = pool.lock().ok().and_then(|mut p| p.pop());
        let mut server = match idle {
            Some(s) => s,
            None => Server::start(&self.argv)?,
        };
        let finished = server.ask(folder, self.timeout);
        if matches!(finished, Finished::Answered) {
            if let Ok(mut p) = pool.lock() {
                p.push(server);
            }
        }
        Ok(finished)
    }

    /// Runs the program once on `folder`.
    fn run_program(&self, folder: &Path) -> Result<Finished, CommandError> {
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
        let mut child = spawn_in_group(&mut cmd, &program)?;
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
                return Ok(Finished::Exited(status));
            }
            if start.elapsed() >= self.timeout {
                kill_group(&mut child);
                // Reaped, so that no zombie is left behind.
                let _ = child.wait();
                return Ok(Finished::TimedOut(stderr_tail(&folder.join("stderr.txt"))));
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

/// A program started with `--serve`, answering one folder at a time.
struct Server {
    child: Child,
    stdin: ChildStdin,
    /// Lines of the program's standard output (a thread reads them, so
    /// that waiting for one can have a deadline); closed when it exits.
    lines: Receiver<String>,
    /// Where its standard error goes: a file with no name, so that nothing
    /// is left behind however the harness ends.
    stderr: std::fs::File,
}

impl Server {
    fn start(argv: &[String]) -> Result<Server, CommandError> {
        let program = argv.join(" ");
        let stderr = tempfile::tempfile().map_err(CommandError::Folder)?;
        let err_file = stderr.try_clone().map_err(CommandError::Folder)?;
        let mut cmd = std::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err_file);
        let mut child = spawn_in_group(&mut cmd, &program)?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            kill_group(&mut child);
            let _ = child.wait();
            return Err(CommandError::Start {
                program,
                source: std::io::Error::other("no pipes to the program"),
            });
        };
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Server {
            child,
            stdin,
            lines,
            stderr,
        })
    }

    /// Sends `folder` and waits up to `timeout` for `done`.
    fn ask(&mut self, folder: &Path, timeout: Duration) -> Finished {
        let sent = writeln!(self.stdin, "{}", folder.display()).and_then(|_| self.stdin.flush());
        if sent.is_err() {
            return self.died();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.trim() == "done" => return Finished::Answered,
                // Not part of the protocol: whatever else the program prints.
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => {
                    kill_group(&mut self.child);
                    let _ = self.child.wait();
                    return Finished::TimedOut(tail_of(&self.stderr));
                }
                Err(RecvTimeoutError::Disconnected) => return self.died(),
            }
        }
    }

    /// The program closed its output: how it ended.
    fn died(&mut self) -> Finished {
        // Its output is closed; it is exiting or has exited. Not waited for
        // without bound: it may have closed its output and kept running.
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    kill_group(&mut self.child);
                    let _ = self.child.wait();
                    break None;
                }
            }
        };
        let how = status.map_or_else(|| "closed its output".to_string(), describe);
        Finished::Died(format!(
            "the serving program ended ({how}) before answering{}",
            tail_of(&self.stderr)
        ))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_group(&mut self.child);
        let _ = self.child.wait();
    }
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

/// The end of the program's standard error (the file `path`), for crash
/// and timeout messages.
fn stderr_tail(path: &Path) -> String {
    std::fs::File::open(path).map_or_else(|_| String::new(), |f| tail_of(&f))
}

/// The end of a file, read without moving its offset: a serving program
/// writes through the same open file, and its file grows over all its runs.
fn tail_of(file: &std::fs::File) -> String {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::fs::FileExt;
        let len = file.metadata().map_or(0, |m| m.len());
        let from = len.saturating_sub(STDERR_TAIL as u64);
        let mut bytes = vec![0; (len - from) as usize];
        match file.read_at(&mut bytes, from) {
            Ok(n) => {
                bytes.truncate(n);
                bytes
            }
            Err(_) => Vec::new(),
        }
    };
    #[cfg(not(unix))]
    let bytes: Vec<u8> = {
        let _ = file;
        Vec::new()
    };
    let text = String::from_utf8_lossy(&bytes);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("; stderr: {text}")
    }
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

/// Starts the program in a process group of its own, so that a time limit
/// stops whatever it started too (a shell script's children, a worker pool).
fn spawn_in_group(
    cmd: &mut std::process::Command,
    program: &str,
) -> Result<std::process::Child, CommandError> {
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    cmd.spawn().map_err(|source| CommandError::Start {
        program: program.to_string(),
        source,
    })
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
    fn serve_mode_keeps_one_program_and_replaces_a_dead_one() {
        let dir = tempfile::tempdir().unwrap();
        let (m, bytes) = model();
        let starts = dir.path().join("starts");
        let server = script(
            dir.path(),
            &format!(
                r#"echo start >> {}
[ "$1" = "--serve" ] || exit 9
while read d; do
  if [ -f "$d/input_0.pb" ]; then cp "$d/input_0.pb" "$d/output_0.pb"; echo noise; echo done
  else echo boom >&2; exit 4; fi
done"#,
                starts.display()
            ),
        );
        let c = Command::new(&server, DEFAULT_TIMEOUT).unwrap().serving();
        let x = Tensor::from_vec(&[1], vec![3u8]);
        let started = || std::fs::read_to_string(&starts).unwrap().lines().count();
        for _ in 0..3 {
            assert_eq!(
                c.run(&m, &bytes, std::slice::from_ref(&x)),
                Ok(vec![x.clone()])
            );
        }
        assert_eq!(started(), 1, "one program served every run");
        match c.run(&m, &bytes, &[]) {
            Err(RunError::Crashed(m)) => {
                assert!(m.contains("exit status 4") && m.contains("boom"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            c.run(&m, &bytes, std::slice::from_ref(&x)),
            Ok(vec![x.clone()])
        );
        assert_eq!(started(), 2, "a fresh program replaced the dead one");

        let hang = script(dir.path(), r#"while read d; do sleep 30; done"#);
        let c = Command::new(&hang, Duration::from_millis(300))
            .unwrap()
            .serving();
        let start = Instant::now();
        assert!(matches!(c.run(&m, &bytes, &[]), Err(RunError::TimedOut(_))));
        assert!(start.elapsed() < Duration::from_secs(5));
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
