//! `cargo xtask schema-diff <Op> [<from> <to>]`: prints what changed between
//! versions of an operator (every consecutive pair, or the pair given).
//! The diff itself is computed by the library (`schema::diff`).

use anyhow::{bail, Context, Result};
use onnx_conformance::schema;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Operator name: Pad, Conv or CenterCropPad.
    op: String,
    /// Old version (a since_version).
    from: Option<i64>,
    /// New version (a since_version).
    to: Option<i64>,
}

pub fn run(args: Args) -> Result<()> {
    let op = schema::op(&args.op).with_context(|| {
        let known: Vec<&str> = schema::all().iter().map(|s| s.name.as_str()).collect();
        format!("no schema for '{}' (known: {})", args.op, known.join(", "))
    })?;
    let versions: Vec<i64> = op.versions.iter().map(|v| v.since_version).collect();
    let diffs = match (args.from, args.to) {
        (None, None) => schema::diff::consecutive(op),
        (Some(a), Some(b)) => {
            let find = |v: i64| {
                op.versions
                    .iter()
                    .find(|s| s.since_version == v)
                    .with_context(|| {
                        format!("{} has no version {v} (versions: {versions:?})", op.name)
                    })
            };
            vec![schema::diff::diff(op, find(a)?, find(b)?)]
        }
        _ => bail!("give both <from> and <to>, or neither"),
    };
    if diffs.is_empty() {
        println!(
            "{} has a single version ({versions:?}): nothing to diff",
            op.name
        );
    }
    for (i, d) in diffs.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!("{d}");
    }
    Ok(())
}
