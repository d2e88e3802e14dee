use super::*;
use onnx_conformance::trial_record::{FailureKind, TrialMeta};

fn record(outcome: Outcome, failure: Option<FailureKind>) -> TrialRecord {
    TrialRecord {
        meta: TrialMeta {
            trial: "node/t".into(),
            source: "node".into(),
            case: "t".into(),
            op: "Pad".into(),
            version: 18,
            dtype: "float".into(),
            variant: false,
            later_reading: None,
        },
        outcome,
        message: None,
        failure,
        max_abs: None,
        max_rel: None,
        bound_units: None,
        explained_by: None,
    }
}

#[test]
fn outcomes_map_by_failure_kind() {
    let cases = [
        (Outcome::Pass, None, "pass"),
        (Outcome::UnexpectedPass, None, "pass"),
        (Outcome::Fail, Some(FailureKind::Values), "wrong"),
        (Outcome::Fail, Some(FailureKind::Accepted), "wrong"),
        (Outcome::Fail, Some(FailureKind::Error), "error"),
        (Outcome::Fail, Some(FailureKind::Panic), "crash"),
        (Outcome::Fail, None, "error"),
        (Outcome::Fail, Some(FailureKind::Timeout), "timeout"),
        // A known failure is still the failure it is.
        (Outcome::ExpectedFailure, Some(FailureKind::Values), "wrong"),
        (Outcome::ExpectedFailure, Some(FailureKind::Error), "error"),
        (Outcome::ExpectedFailure, Some(FailureKind::Panic), "crash"),
        (Outcome::Undefined, None, "undefined"),
        (Outcome::NotExpressible, None, "not_applicable"),
        (Outcome::Skipped, None, "skipped"),
        (Outcome::CannotRun, None, "cannot_run"),
        (Outcome::Timeout, None, "timeout"),
    ];
    for (o, k, want) in cases {
        assert_eq!(outcome_of(&record(o, k)), want, "{o:?} {k:?}");
        assert!(OUTCOMES.contains(&want));
    }
}

fn row(runtime: &str, trial: &str, outcome: &str) -> Row {
    Row {
        runtime: runtime.into(),
        trial: trial.into(),
        operator: "Pad".into(),
        op_version: 18,
        element_type: "float".into(),
        outcome: outcome.into(),
        failure: None,
        max_abs: None,
        bound_units: None,
        message: None,
        known: false,
    }
}

fn board(runs: &[(&str, &str)], results: Vec<Row>) -> Scoreboard {
    let runtimes = runs
        .iter()
        .map(|(name, status)| RuntimeRun {
            name: name.to_string(),
            version: String::new(),
            features: String::new(),
            backend: name.to_string(),
            status: status.to_string(),
            message: None,
            repro: String::new(),
            counts: counts(&results, name),
            known: known(&results, name),
        })
        .collect();
    Scoreboard {
        schema: SCHEMA,
        generated_unix: 0,
        outcomes: vec![],
        runtimes,
        results,
        baseline: None,
        changes: vec![],
    }
}

#[test]
fn a_healthy_run_raises_no_alarm() {
    let b = board(
        &[("ours", "ran")],
        vec![row("ours", "a", "pass"), row("ours", "b", "not_applicable")],
    );
    assert!(alarms(&b, None, 0).is_empty());
}

#[test]
fn a_runtime_that_executed_nothing_raises_an_alarm() {
    // Could not be built.
    let b = board(&[("rten", "failed")], vec![]);
    assert_eq!(alarms(&b, None, 0).len(), 1);
    // Ran, but every trial was skipped, not run or refused by our loader.
    let mut refused = row("tract", "c", "error");
    refused.message = Some("our loader cannot decode x.pb".into());
    let b = board(
        &[("tract", "ran")],
        vec![
            row("tract", "a", "skipped"),
            row("tract", "b", "cannot_run"),
            refused,
        ],
    );
    let a = alarms(&b, None, 0);
    assert_eq!(a.len(), 1);
    assert!(a[0].contains("all 3 trials"), "{a:?}");
    // The runtime's own refusal is a trial it executed.
    let b = board(
        &[("tract", "ran")],
        vec![row("tract", "a", "skipped"), row("tract", "b", "error")],
    );
    assert!(alarms(&b, None, 0).is_empty());
}

#[test]
fn a_drop_in_passes_beyond_the_threshold_raises_an_alarm() {
    let old = board(
        &[("ours", "ran")],
        vec![row("ours", "a", "pass"), row("ours", "b", "pass")],
    );
    let new = board(
        &[("ours", "ran")],
        vec![row("ours", "a", "pass"), row("ours", "b", "wrong")],
    );
    assert_eq!(alarms(&new, Some(&old), 0).len(), 1);
    assert!(alarms(&new, Some(&old), 1).is_empty());
    // More passes is no alarm.
    assert!(alarms(&old, Some(&new), 0).is_empty());
}

#[test]
fn changes_list_newly_passing_and_newly_failing() {
    let old = board(
        &[("ours", "ran")],
        vec![
            row("ours", "a", "pass"),
            row("ours", "b", "wrong"),
            row("ours", "c", "wrong"),
        ],
    );
    let new = board(
        &[("ours", "ran")],
        vec![
            row("ours", "a", "crash"),
            row("ours", "b", "pass"),
            row("ours", "c", "error"),
        ],
    );
    let c = changes(&old, &new);
    let got: Vec<_> = c
        .iter()
        .map(|c| (c.trial.as_str(), c.before.as_str(), c.after.as_str()))
        .collect();
    assert_eq!(got, [("a", "pass", "crash"), ("b", "wrong", "pass")]);
}

#[test]
fn every_runtime_in_the_table_has_a_unique_name() {
    let mut names: Vec<_> = RUNTIMES.iter().map(|r| r.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), RUNTIMES.len());
}

#[test]
fn reproducing_commands_quote_what_the_shell_would_split() {
    let rt = &RUNTIMES[1];
    assert_eq!(
        repro(rt, "onnxruntime"),
        "ORT_DYLIB_PATH=$(cargo xtask ort-path) ONNX_BACKEND=onnxruntime cargo test --features onnxruntime --test conformance -- --exact "
    );
    assert_eq!(shell_quote("command:py x.py"), "'command:py x.py'");
}

#[test]
fn known_failures_show_their_kind_and_are_counted_as_known() {
    let mut listed = record(Outcome::ExpectedFailure, Some(FailureKind::Values));
    listed.message = Some("known (rounds half up): [values] output 0 'y' differs".into());
    let records = TrialRecords {
        backend: "tract".into(),
        runtime_version: String::new(),
        records: vec![
            listed,
            record(Outcome::Fail, Some(FailureKind::Values)),
            record(Outcome::Pass, None),
        ],
    };
    let rows = rows_of("tract", &records);
    let got: Vec<_> = rows.iter().map(|r| (r.outcome.as_str(), r.known)).collect();
    assert_eq!(got, [("wrong", true), ("wrong", false), ("pass", false)]);
    let b = board(&[("tract", "ran")], rows);
    assert_eq!(b.runtimes[0].counts["wrong"], 2);
    assert_eq!(b.runtimes[0].known, 1);
    let table = summary_table(&b);
    assert!(table.contains("known |"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("| tract |") && l.ends_with(" 1 |")),
        "{table}"
    );
}

/// A split run's record folders, gathered with --reuse, are merged and held
/// to the checks of a whole run.
#[test]
fn reused_record_folders_merge_and_must_be_complete() {
    use onnx_conformance::trial_record::SuiteListing;
    let out = std::env::temp_dir().join(format!("xtask-scoreboard-reuse-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let tract = RUNTIMES.iter().find(|r| r.name == "tract").unwrap();
    let listing = SuiteListing {
        backend: "tract".into(),
        trials: vec!["node/a".into(), "node/b".into()],
        expected_failures: vec![],
    };
    let write = |part: &str, trial: &str| {
        let dir = out.join("records-tract").join(part);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(SuiteListing::FILE),
            serde_json::to_string(&listing).unwrap(),
        )
        .unwrap();
        let mut r = record(Outcome::Pass, None);
        r.meta.trial = trial.into();
        let doc = TrialRecords {
            backend: "tract".into(),
            runtime_version: "tract-onnx 0.23.9".into(),
            records: vec![r],
        };
        std::fs::write(dir.join("r.json"), serde_json::to_string(&doc).unwrap()).unwrap();
    };
    write("1", "node/a");
    let e = reuse(tract, &out.join("records-tract.json")).unwrap_err();
    assert!(format!("{e:#}").contains("have no record"), "{e:#}");
    write("2", "node/b");
    let (backend, t) = reuse(tract, &out.join("records-tract.json")).unwrap();
    assert_eq!((backend.as_str(), t.records.len()), ("tract", 2));
    assert_eq!(t.runtime_version, "tract-onnx 0.23.9");
    let _ = std::fs::remove_dir_all(&out);
}
