//! `cargo xtask report`: runs the conformance suite and writes
//! `target/conformance/report.md` and `report.json`: per operator, a matrix
//! of versions by element types; the failing trials with their largest
//! errors; each version pair's schema diff summary. `--baseline` compares
//! with an earlier `report.json` and exits non-zero on a regression;
//! `--junit` writes JUnit XML.

use anyhow::{bail, Context, Result};
use onnx_conformance::schema;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// An earlier report.json: list what newly fails, newly passes or got
    /// worse, and fail on a regression.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Also write JUnit XML here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Where to write report.md and report.json (default: target/conformance).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Cargo features for the test build (e.g. tract, onnxruntime).
    #[arg(long)]
    features: Option<String>,
    /// Build the report from records written by earlier runs with
    /// `ONNX_RECORD_DIR` (for example one folder per nextest partition)
    /// instead of running the suite.
    #[arg(long, num_args = 1.., value_name = "DIR")]
    merge: Vec<PathBuf>,
}

use onnx_conformance::trial_record::{
    Outcome, SuiteListing, TrialRecord as Trial, TrialRecords as Trials,
};

pub fn run(args: Args) -> Result<()> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| crate::target_dir().join("conformance"));
    std::fs::create_dir_all(&out)?;
    let trials_path = out.join("trials.json");
    // What merged records lack against a whole run, told after the reports
    // are written.
    let mut shortfall = None;
    let trials = if args.merge.is_empty() {
        run_suite(&args, &trials_path)?
    } else {
        let (merged, listing) = merge_dirs(&args.merge)?;
        // The same file a single run writes, so the two can be compared.
        std::fs::write(&trials_path, serde_json::to_string_pretty(&merged)?)?;
        eprintln!(
            "xtask: merged {} trial records from {} folders",
            merged.records.len(),
            args.merge.len()
        );
        shortfall = held_to_whole_run(listing.as_ref(), &merged, "the folders");
        merged
    };
    let report = build(&trials);
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let md = markdown(&trials, &report);
    std::fs::write(out.join("report.md"), &md)?;
    if let Some(j) = &args.junit {
        std::fs::write(j, junit(&trials))?;
        eprintln!("xtask: wrote {}", j.display());
    }
    println!("{}", summary_line(&report));
    println!("{}", later_reading_line(&report));
    eprintln!(
        "xtask: wrote {} and {}",
        out.join("report.md").display(),
        out.join("report.json").display()
    );
    if let Some(b) = &args.baseline {
        let regressions = compare_baseline(b, &report)?;
        if regressions > 0 {
            bail!("{regressions} regressions against {}", b.display());
        }
    }
    if let Some(problem) = shortfall {
        bail!("{problem}");
    }
    Ok(())
}

/// [`whole_run_check`] where `what` (the merged folders) holds a suite
/// listing; without one, a note that it cannot be told, and None.
pub fn held_to_whole_run(
    listing: Option<&SuiteListing>,
    merged: &Trials,
    what: &str,
) -> Option<String> {
    match listing {
        Some(l) => whole_run_check(l, merged),
        None => {
            eprintln!(
                "xtask: {what} hold no {}: they come from runs that did not build the whole suite, \
                 so missing records and stale expectations cannot be told",
                SuiteListing::FILE
            );
            None
        }
    }
}

/// What a whole run would have failed on that the merged parts lack:
/// trials without a record, or (when none is missing) expected failures
/// that explained no failure. None when the merge is as good as one run.
fn whole_run_check(listing: &SuiteListing, merged: &Trials) -> Option<String> {
    if listing.backend != merged.backend {
        return Some(format!(
            "the suite listing is of backend {} but the records are of {}",
            listing.backend, merged.backend
        ));
    }
    let short = listing.shortfall(merged);
    let first = |v: &[String]| {
        v.iter()
            .take(10)
            .map(|s| format!("\n  {s}"))
            .collect::<String>()
    };
    if !short.missing.is_empty() {
        return Some(format!(
            "{} of the suite's {} trials have no record (a partition missing, or a trial that \
             failed before recording); the first:{}",
            short.missing.len(),
            listing.trials.len(),
            first(&short.missing)
        ));
    }
    if !short.stale.is_empty() {
        return Some(format!(
            "cases/expectations.toml has {} expected failures that explained no failure in the merged \
             run (complete: every trial recorded); make them match the failure they describe, \
             or remove them:{}",
            short.stale.len(),
            first(&short.stale)
        ));
    }
    eprintln!(
        "xtask: the merged records are complete ({} trials) and every one of the {} expected \
         failures explained a failure",
        listing.trials.len(),
        listing.expected_failures.len()
    );
    None
}

/// Runs the conformance suite, which writes its records to `trials_path`.
fn run_suite(args: &Args, trials_path: &Path) -> Result<Trials> {
    run_conformance(args.features.as_deref(), &[], trials_path, "trials", true)
}

/// Runs `cargo test --release --test conformance` in a child process with
/// `features` and the extra environment `envs`, its records going to
/// `trials_path` (ONNX_REPORT), with progress under `label`. Shared by
/// `report` and `scoreboard` so both run the suite the same way.
pub fn run_conformance(
    features: Option<&str>,
    envs: &[(String, String)],
    trials_path: &Path,
    label: &str,
    release: bool,
) -> Result<Trials> {
    let _ = std::fs::remove_file(trials_path);
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(crate::project_root())
        .arg("test")
        .args(release.then_some("--release"))
        .args(["--test", "conformance"]);
    if let Some(f) = features.filter(|f| !f.is_empty()) {
        cmd.args(["--features", f]);
    }
    cmd.arg("--")
        .env("ONNX_REPORT", trials_path)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped());
    eprintln!("xtask: running the conformance suite ({cmd:?})");
    let mut child = cmd.spawn().context("running cargo test")?;
    // libtest prints one line per trial: they drive the progress, and only
    // its summary line is passed on.
    let mut progress = crate::progress::Progress::new(label, 0);
    if let Some(out) = child.stdout.take() {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines() {
            let line = line?;
            if let Some(n) = line
                .strip_prefix("running ")
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse().ok())
            {
                progress.set_total(n);
            } else if line.starts_with("test ") && line.contains(" ... ") {
                progress.inc(1);
            } else if line.starts_with("test result:") {
                eprintln!("{line}");
            }
        }
    }
    progress.finish();
    // Failing trials are the report's subject, so the exit status is not an error.
    let status = child.wait().context("running cargo test")?;
    let text = std::fs::read_to_string(trials_path).with_context(|| {
        format!(
            "the suite wrote no {} (cargo test exited with {status})",
            trials_path.display()
        )
    })?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a trial report", trials_path.display()))
}

/// Every record file (`*.json`) in `dirs`, merged into one run, and the
/// suite listing the folders hold (all the same, or an error).
pub fn merge_dirs(dirs: &[PathBuf]) -> Result<(Trials, Option<SuiteListing>)> {
    let mut parts = Vec::new();
    let mut listing: Option<SuiteListing> = None;
    for dir in dirs {
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("reading records in {}", dir.display()))?;
        let before = parts.len();
        for entry in entries {
            let path = entry?.path();
            if path.file_name().is_some_and(|n| n == SuiteListing::FILE) {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let this: SuiteListing = serde_json::from_str(&text)
                    .with_context(|| format!("{} is not a suite listing", path.display()))?;
                match &listing {
                    Some(l) if *l != this => bail!(
                        "{} lists another suite than the other folders: records of different \
                         runs cannot be merged",
                        path.display()
                    ),
                    _ => listing = Some(this),
                }
            } else if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let part: Trials = serde_json::from_str(&text)
                    .with_context(|| format!("{} is not a trial record", path.display()))?;
                parts.push(part);
            }
        }
        if parts.len() == before {
            bail!("{} holds no trial records (*.json)", dir.display());
        }
    }
    Ok((Trials::merge(parts)?, listing))
}

fn counts(trials: &[&Trial]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for t in trials {
        *m.entry(t.outcome.name().to_string()).or_insert(0) += 1;
    }
    m
}

fn build(t: &Trials) -> serde_json::Value {
    let all: Vec<&Trial> = t.records.iter().collect();
    let mut operators = serde_json::Map::new();
    let ops: BTreeSet<&str> = t.records.iter().map(|r| r.meta.op.as_str()).collect();
    for op in ops {
        let of_op: Vec<&Trial> = all.iter().copied().filter(|r| r.meta.op == op).collect();
        let versions: BTreeSet<i64> = of_op.iter().map(|r| r.meta.version).collect();
        let dtypes: BTreeSet<&str> = of_op.iter().map(|r| r.meta.dtype.as_str()).collect();
        let mut cells = serde_json::Map::new();
        for v in &versions {
            for d in &dtypes {
                let here: Vec<&Trial> = of_op
                    .iter()
                    .copied()
                    .filter(|r| r.meta.version == *v && r.meta.dtype == *d)
                    .collect();
                if !here.is_empty() {
                    cells.insert(format!("{op}-{v}|{d}"), json!(counts(&here)));
                }
            }
        }
        let diffs = schema::op(op).map(|s| {
            schema::diff::consecutive(s)
                .iter()
                .map(|d| {
                    json!({
                        "old": d.old, "new": d.new, "breaking": d.breaking(),
                        "changes": d.changes.iter().map(|c| format!("{}{} {} '{}': {}",
                            if c.breaking { "[BREAKING] " } else { "" }, c.kind, c.what, c.name, c.detail)).collect::<Vec<_>>(),
                        "doc_similarity": d.doc.similarity,
                    })
                })
                .collect::<Vec<_>>()
        });
        operators.insert(
            op.to_string(),
            json!({ "versions": versions, "dtypes": dtypes, "counts": counts(&of_op), "cells": cells, "schema_diffs": diffs }),
        );
    }
    let failures: Vec<serde_json::Value> = t
        .records
        .iter()
        .filter(|r| r.outcome.is_failure())
        .map(|r| json!({ "trial": r.meta.trial, "max_abs": r.max_abs, "max_rel": r.max_rel,
            "message": r.message.as_deref().unwrap_or("").lines().take(6).collect::<Vec<_>>().join("\n") }))
        .collect();
    let trials: serde_json::Map<String, serde_json::Value> = t
        .records
        .iter()
        .map(|r| {
            (
                r.meta.trial.clone(),
                json!({ "outcome": r.outcome, "max_abs": r.max_abs, "max_rel": r.max_rel }),
            )
        })
        .collect();
    json!({ "backend": t.backend, "runtime_version": t.runtime_version, "counts": counts(&all), "operators": operators, "failures": failures, "trials": trials,
        "later_reading": later_reading(&all) })
}

/// Trials that hold an older operator text to a later version's reading:
/// counted apart, since their passes rest on that reading.
fn later_reading(all: &[&Trial]) -> serde_json::Value {
    let later: Vec<&Trial> = all
        .iter()
        .copied()
        .filter(|r| r.meta.later_reading.is_some())
        .collect();
    let trials: Vec<serde_json::Value> = later
        .iter()
        .map(|r| json!({ "trial": r.meta.trial, "outcome": r.outcome, "reason": r.meta.later_reading }))
        .collect();
    json!({ "total": later.len(), "counts": counts(&later), "trials": trials })
}

fn later_reading_line(report: &serde_json::Value) -> String {
    let l = &report["later_reading"];
    let by_outcome: Vec<String> = [
        Outcome::Pass,
        Outcome::Fail,
        Outcome::ExpectedFailure,
        Outcome::UnexpectedPass,
        Outcome::Skipped,
    ]
    .iter()
    .filter_map(|o| {
        let n = l["counts"][o.name()].as_u64()?;
        Some(format!("{n} {}", o.name().replace('_', " ")))
    })
    .collect();
    format!(
        "{} trials assume a later version's reading of an older operator text (`~later-reading`; included in the counts above){}",
        l["total"].as_u64().unwrap_or(0),
        if by_outcome.is_empty() {
            String::new()
        } else {
            format!(": {}", by_outcome.join(", "))
        }
    )
}

fn summary_line(report: &serde_json::Value) -> String {
    let c = &report["counts"];
    let n = |k: &str| c[k].as_u64().unwrap_or(0);
    format!(
        "conformance ({}): {} pass, {} fail, {} expected failures, {} unexpected passes, {} skipped, {} not expressible, {} undefined by the spec, {} cannot run",
        report["backend"].as_str().unwrap_or("?"),
        n("pass"),
        n("fail"),
        n("expected_failure"),
        n("unexpected_pass"),
        n("skipped"),
        n("not_expressible"),
        n("undefined"),
        n("cannot_run")
    )
}

fn cell(c: &serde_json::Value) -> String {
    let n = |k: &str| c[k].as_u64().unwrap_or(0);
    let mut parts = Vec::new();
    for (k, sym) in [
        ("pass", "✓"),
        ("fail", "✗"),
        ("unexpected_pass", "!"),
        ("expected_failure", "x"),
        ("skipped", "s"),
        ("not_expressible", "–"),
        ("undefined", "u"),
        ("cannot_run", "c"),
    ] {
        if n(k) > 0 {
            parts.push(format!("{}{sym}", n(k)));
        }
    }
    parts.join(" ")
}

fn markdown(t: &Trials, report: &serde_json::Value) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Conformance report ({})\n", t.backend);
    if !t.runtime_version.is_empty() {
        let _ = writeln!(s, "Runtime: {}\n", t.runtime_version);
    }
    let _ = writeln!(s, "{}\n", summary_line(report));
    let _ = writeln!(s, "{}.\n", later_reading_line(report));
    let _ = writeln!(s, "Cells: ✓ pass, ✗ fail, ! unexpected pass, x expected failure, s skipped, – not expressible at that version, u undefined by the spec, c cannot run.\n");
    for (op, o) in report["operators"].as_object().into_iter().flatten() {
        let _ = writeln!(s, "## {op}\n");
        let dtypes: Vec<&str> = o["dtypes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_str())
            .collect();
        let _ = writeln!(s, "| version | {} |", dtypes.join(" | "));
        let _ = writeln!(s, "|---|{}", "---|".repeat(dtypes.len()));
        for v in o["versions"].as_array().into_iter().flatten() {
            let row: Vec<String> = dtypes
                .iter()
                .map(|d| cell(&o["cells"][format!("{op}-{v}|{d}")]))
                .collect();
            let _ = writeln!(s, "| {op}-{v} | {} |", row.join(" | "));
        }
        if let Some(diffs) = o["schema_diffs"].as_array() {
            let _ = writeln!(s, "\nSchema changes:\n");
            for d in diffs {
                let changes: Vec<&str> = d["changes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.as_str())
                    .collect();
                let _ = writeln!(
                    s,
                    "- {op} {} -> {}: breaking {}; {}",
                    d["old"],
                    d["new"],
                    if d["breaking"].as_bool() == Some(true) {
                        "yes"
                    } else {
                        "no"
                    },
                    if changes.is_empty() {
                        "documentation only".to_string()
                    } else {
                        changes.join("; ")
                    }
                );
            }
        }
        let _ = writeln!(s);
    }
    let later = report["later_reading"]["trials"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !later.is_empty() {
        let _ = writeln!(s, "## Trials under a later reading ({})\n", later.len());
        for l in later {
            let _ = writeln!(
                s,
                "- `{}` ({}): {}",
                l["trial"].as_str().unwrap_or("?"),
                l["outcome"].as_str().unwrap_or("?"),
                l["reason"].as_str().unwrap_or("")
            );
        }
        let _ = writeln!(s);
    }
    undefined_section(&mut s, t);
    let failures = report["failures"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(s, "## Failing trials ({})\n", failures.len());
    for f in failures {
        let _ = writeln!(
            s,
            "- `{}`: largest abs error {}, rel error {}\n\n```\n{}\n```\n",
            f["trial"].as_str().unwrap_or("?"),
            f["max_abs"],
            f["max_rel"],
            f["message"].as_str().unwrap_or("")
        );
    }
    s
}

/// Trials on input whose behaviour the spec leaves undefined: what the
/// runtime did, neither passed nor failed; and those it could not be given.
fn undefined_section(s: &mut String, t: &Trials) {
    for (outcome, title) in [
        (Outcome::Undefined, "Undefined by the spec"),
        (Outcome::CannotRun, "Cannot run"),
    ] {
        let list: Vec<&Trial> = t.records.iter().filter(|r| r.outcome == outcome).collect();
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(s, "## {title} ({})\n", list.len());
        for r in list {
            let _ = writeln!(
                s,
                "- `{}`: {}",
                r.meta.trial,
                r.message.as_deref().unwrap_or("").replace('\n', " ")
            );
        }
        let _ = writeln!(s);
    }
}

fn compare_baseline(path: &Path, now: &serde_json::Value) -> Result<usize> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading baseline {}", path.display()))?;
    let base: serde_json::Value = serde_json::from_str(&text)?;
    let good = |o: &str| o == "pass" || o == "expected_failure";
    let mut newly_failing = Vec::new();
    let mut newly_passing = Vec::new();
    let mut worse = Vec::new();
    for (name, t) in now["trials"].as_object().into_iter().flatten() {
        let o = t["outcome"].as_str().unwrap_or("");
        let b = &base["trials"][name];
        let bo = b["outcome"].as_str().unwrap_or("absent");
        if (o == "fail" || o == "unexpected_pass") && (good(bo) || bo == "absent") {
            newly_failing.push(format!("{name} ({bo} -> {o})"));
        } else if o == "pass" && (bo == "fail" || bo == "unexpected_pass") {
            newly_passing.push(name.clone());
        } else if o == "pass" && bo == "pass" {
            let (a, e) = (
                t["max_abs"].as_f64().unwrap_or(0.0),
                b["max_abs"].as_f64().unwrap_or(0.0),
            );
            // A larger error that still passes: worth a look, counted when it doubles.
            if a > 2.0 * e && a > 1e-12 {
                worse.push(format!("{name} (largest abs error {e:e} -> {a:e})"));
            }
        }
    }
    for (title, list) in [
        ("newly failing", &newly_failing),
        ("newly passing", &newly_passing),
        ("worse (error at least doubled)", &worse),
    ] {
        println!("{title}: {}", list.len());
        for l in list.iter().take(50) {
            println!("  {l}");
        }
    }
    Ok(newly_failing.len() + worse.len())
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn junit(t: &Trials) -> String {
    let mut by_op: BTreeMap<&str, Vec<&Trial>> = BTreeMap::new();
    for r in &t.records {
        by_op.entry(r.meta.op.as_str()).or_default().push(r);
    }
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"onnx-conformance\">\n",
    );
    for (op, list) in by_op {
        let failures = list.iter().filter(|r| r.outcome.is_failure()).count();
        let skipped = list
            .iter()
            .filter(|r| r.outcome != Outcome::Pass && !r.outcome.is_failure())
            .count();
        let _ = writeln!(
            s,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">",
            xml_escape(op),
            list.len()
        );
        for r in list {
            let _ = write!(
                s,
                "    <testcase classname=\"{}\" name=\"{}\"",
                xml_escape(&r.meta.source),
                xml_escape(&r.meta.trial)
            );
            let msg = xml_escape(r.message.as_deref().unwrap_or(""));
            if r.outcome == Outcome::Pass {
                s.push_str("/>\n");
            } else if r.outcome.is_failure() {
                let _ = writeln!(
                    s,
                    ">\n      <failure message=\"{}\">{msg}</failure>\n    </testcase>",
                    r.outcome.name()
                );
            } else {
                let _ = writeln!(
                    s,
                    ">\n      <skipped message=\"{} {msg}\"/>\n    </testcase>",
                    r.outcome.name()
                );
            }
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(trial: &str, outcome: &str, later: Option<&str>) -> serde_json::Value {
        let mut r = json!({ "trial": trial, "source": "oracle", "case": trial, "op": "Pad",
            "version": 1, "dtype": "float", "variant": false, "outcome": outcome,
            "message": null, "max_abs": null, "max_rel": null });
        if let Some(l) = later {
            r["later_reading"] = json!(l);
        }
        r
    }

    /// Records written before `later_reading` existed still parse, and the
    /// report counts the labelled trials apart, by outcome.
    #[test]
    fn later_readings_are_counted_apart() {
        let doc = json!({ "backend": "ours", "records": [
            record("a", "pass", None),
            record("b~later-reading", "pass", Some("Pad-1 says added")),
            record("c~later-reading", "fail", Some("Pad-1 says added")),
            record("d~later-reading", "pass", Some("Pad-1 says added")),
        ]});
        let trials: Trials = serde_json::from_value(doc).unwrap();
        assert_eq!(trials.records[0].meta.later_reading, None);
        let report = build(&trials);
        let l = &report["later_reading"];
        assert_eq!(l["total"], 3);
        assert_eq!(l["counts"], json!({ "pass": 2, "fail": 1 }));
        assert_eq!(report["counts"]["pass"], 3);
        let md = markdown(&trials, &report);
        assert!(
            md.contains("3 trials assume a later version's reading of an older operator text")
                && md.contains("2 pass, 1 fail")
                && md.contains("## Trials under a later reading (3)")
                && md.contains("- `c~later-reading` (fail): Pad-1 says added"),
            "{md}"
        );
    }

    use onnx_conformance::trial_record::{TrialMeta, TrialRecord};

    fn typed_record(trial: &str, outcome: Outcome, message: &str) -> TrialRecord {
        TrialRecord {
            meta: TrialMeta {
                trial: trial.into(),
                source: "invalid".into(),
                case: trial.into(),
                op: "invalid input".into(),
                version: 0,
                dtype: "input".into(),
                variant: false,
                later_reading: None,
            },
            outcome,
            message: Some(message.into()),
            failure: None,
            max_abs: None,
            max_rel: None,
            bound_units: None,
            explained_by: None,
        }
    }

    /// Writes `records` one per file and `listing` into a fresh folder, as
    /// ONNX_RECORD_DIR does.
    fn record_dir(name: &str, listing: Option<&SuiteListing>, records: &[TrialRecord]) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xtask-merge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        if let Some(l) = listing {
            std::fs::write(
                d.join(SuiteListing::FILE),
                serde_json::to_string(l).unwrap(),
            )
            .unwrap();
        }
        for (i, r) in records.iter().enumerate() {
            let doc = Trials {
                backend: "tract".into(),
                runtime_version: String::new(),
                records: vec![r.clone()],
            };
            std::fs::write(
                d.join(format!("{i}.json")),
                serde_json::to_string(&doc).unwrap(),
            )
            .unwrap();
        }
        d
    }

    /// Parts merged are held to what a whole run is held to: a record
    /// missing, or an expected failure that explained nothing, fails.
    #[test]
    fn merged_parts_fail_on_a_missing_record_or_a_stale_expectation() {
        let listing = SuiteListing {
            backend: "tract".into(),
            trials: vec!["invalid/a".into(), "invalid/b".into()],
            expected_failures: vec!["expected_failure #1 (tract): x".into()],
        };
        let mut known = typed_record(
            "invalid/b",
            Outcome::ExpectedFailure,
            "known (r): [panic] x",
        );
        known.explained_by = Some("expected_failure #1 (tract): x".into());
        let pass = typed_record("invalid/a", Outcome::Pass, "");
        let one = record_dir("one", Some(&listing), std::slice::from_ref(&known));
        let two = record_dir("two", Some(&listing), std::slice::from_ref(&pass));
        let (merged, l) = merge_dirs(&[one.clone(), two.clone()]).unwrap();
        assert_eq!(whole_run_check(l.as_ref().unwrap(), &merged), None);
        // Without the second part, a trial has no record.
        let (merged, l) = merge_dirs(std::slice::from_ref(&one)).unwrap();
        let m = whole_run_check(l.as_ref().unwrap(), &merged).unwrap();
        assert!(
            m.contains("1 of the suite's 2 trials have no record") && m.contains("invalid/a"),
            "{m}"
        );
        // Complete, but the listed failure now passes: its entry is stale.
        let fixed = typed_record("invalid/b", Outcome::Pass, "");
        let three = record_dir("three", Some(&listing), &[fixed]);
        let (merged, l) = merge_dirs(&[three.clone(), two.clone()]).unwrap();
        let m = whole_run_check(l.as_ref().unwrap(), &merged).unwrap();
        assert!(
            m.contains("1 expected failures that explained no failure") && m.contains("#1 (tract)"),
            "{m}"
        );
        // Folders of different suites do not merge.
        let other = SuiteListing {
            trials: vec!["invalid/a".into()],
            ..listing.clone()
        };
        let four = record_dir("four", Some(&other), std::slice::from_ref(&pass));
        let e = merge_dirs(&[one.clone(), four.clone()]).unwrap_err();
        assert!(format!("{e:#}").contains("lists another suite"), "{e:#}");
        // Folders without a listing merge, unchecked.
        let five = record_dir("five", None, std::slice::from_ref(&pass));
        assert!(merge_dirs(std::slice::from_ref(&five)).unwrap().1.is_none());
        for d in [one, two, three, four, five] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    /// Undefined and cannot-run trials are neither passes nor failures: they
    /// are counted apart and listed in their own sections.
    #[test]
    fn undefined_and_cannot_run_are_counted_apart() {
        let t = Trials {
            backend: "tract".into(),
            runtime_version: "tract-onnx 0.23.9".into(),
            records: vec![
                typed_record(
                    "invalid/a",
                    Outcome::Undefined,
                    "undefined by the spec (q); tract ran it",
                ),
                typed_record(
                    "invalid/b",
                    Outcome::CannotRun,
                    "tract takes decoded tensors",
                ),
                typed_record("invalid/c", Outcome::Pass, ""),
            ],
        };
        let report = build(&t);
        let line = summary_line(&report);
        assert!(
            line.contains("1 pass, 0 fail")
                && line.contains("1 undefined by the spec, 1 cannot run"),
            "{line}"
        );
        assert!(report["failures"].as_array().unwrap().is_empty());
        let md = markdown(&t, &report);
        assert!(
            md.contains("## Undefined by the spec (1)\n\n- `invalid/a`: undefined by the spec (q); tract ran it"),
            "{md}"
        );
        assert!(md.contains("## Cannot run (1)\n\n- `invalid/b`"), "{md}");
        // Every report names the runtime's version it was made with.
        assert!(md.contains("Runtime: tract-onnx 0.23.9"), "{md}");
        assert_eq!(report["runtime_version"], "tract-onnx 0.23.9");
        let junit = junit(&t);
        assert!(
            junit.contains("skipped=\"2\"") && junit.contains("failures=\"0\""),
            "{junit}"
        );
    }
}
