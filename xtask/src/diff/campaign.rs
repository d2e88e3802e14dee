//! What a differential campaign found, as data: written as `summary.json`
//! by every run (whole or one shard), and merged from shards with
//! `cargo xtask diff --merge DIR...` into the summary of the whole campaign.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Counts for one (operator, version, feature) row of the table, by the
/// names of how the sides related and who the oracle sided with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub op: String,
    pub version: i64,
    pub feature: String,
    pub kinds: BTreeMap<String, usize>,
    pub settled: BTreeMap<String, usize>,
}

impl Row {
    fn add(&mut self, other: &Row) {
        for (k, c) in &other.kinds {
            *self.kinds.entry(k.clone()).or_default() += c;
        }
        for (k, c) in &other.settled {
            *self.settled.entry(k.clone()).or_default() += c;
        }
    }
}

/// One listed disagreement, placed by its operator and case number so that
/// merged shards list them in the order one run does.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Line {
    pub op_index: usize,
    pub case: usize,
    pub text: String,
}

/// Which part of a campaign a summary covers: shard numbers out of `of`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shards {
    pub parts: Vec<usize>,
    pub of: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub against: String,
    pub seed: u64,
    pub count: usize,
    pub ops: Vec<String>,
    pub plant_bug: Option<String>,
    pub shards: Shards,
    /// Rows sorted by (op, version, feature).
    pub rows: Vec<Row>,
    pub disagreements: usize,
    /// Disagreements where the oracle finds our result wrong: it sides
    /// with the other runtime, or with neither.
    pub ours_wrong: Vec<Line>,
    /// Disagreements neither settled for us by a known finding nor undefined.
    pub failures: Vec<Line>,
}

impl Summary {
    /// Whether case number `case` of an operator belongs to shard `k` of `n`
    /// (numbered from 1): every n-th case, so shards cost about the same.
    pub fn in_shard(case: usize, k: usize, n: usize) -> bool {
        case % n == k - 1
    }

    /// Adds a row's counts under its key.
    pub fn count<'a>(
        rows: &'a mut BTreeMap<(String, i64, String), Row>,
        key: &(String, i64, String),
    ) -> &'a mut Row {
        rows.entry(key.clone()).or_insert_with(|| Row {
            op: key.0.clone(),
            version: key.1,
            feature: key.2.clone(),
            ..Row::default()
        })
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let p = dir.join("summary.json");
        std::fs::write(&p, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {}", p.display()))
    }

    pub fn read(dir: &Path) -> Result<Summary> {
        let p = dir.join("summary.json");
        let text = std::fs::read_to_string(&p).with_context(|| {
            format!(
                "reading {} (a folder written by `diff --shard`)",
                p.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("in {}", p.display()))
    }

    /// The summary of the whole campaign from the summaries of its shards:
    /// they must be of one campaign (runtime, seed, count, operators) and
    /// cover each shard exactly once.
    pub fn merge(parts: Vec<Summary>) -> Result<Summary> {
        let Some(first) = parts.first() else {
            bail!("no shard summaries to merge");
        };
        let mut whole = Summary {
            shards: Shards {
                parts: Vec::new(),
                of: first.shards.of,
            },
            rows: Vec::new(),
            disagreements: 0,
            ours_wrong: Vec::new(),
            failures: Vec::new(),
            ..first.clone()
        };
        let mut rows: BTreeMap<(String, i64, String), Row> = BTreeMap::new();
        for p in &parts {
            let same = p.against == whole.against
                && p.seed == whole.seed
                && p.count == whole.count
                && p.ops == whole.ops
                && p.plant_bug == whole.plant_bug
                && p.shards.of == whole.shards.of;
            if !same {
                bail!(
                    "shards of different campaigns: {} seed {} count {} ops {:?} (of {}) vs {} seed {} count {} ops {:?} (of {})",
                    whole.against, whole.seed, whole.count, whole.ops, whole.shards.of,
                    p.against, p.seed, p.count, p.ops, p.shards.of
                );
            }
            for k in &p.shards.parts {
                if whole.shards.parts.contains(k) {
                    bail!("shard {k}/{} is given twice", whole.shards.of);
                }
                whole.shards.parts.push(*k);
            }
            for r in &p.rows {
                Summary::count(&mut rows, &(r.op.clone(), r.version, r.feature.clone())).add(r);
            }
            whole.disagreements += p.disagreements;
            whole.ours_wrong.extend(p.ours_wrong.iter().cloned());
            whole.failures.extend(p.failures.iter().cloned());
        }
        whole.shards.parts.sort();
        let all: Vec<usize> = (1..=whole.shards.of).collect();
        if whole.shards.parts != all {
            bail!(
                "the shards given are {:?} of {}; a campaign needs each of 1..={} once",
                whole.shards.parts,
                whole.shards.of,
                whole.shards.of
            );
        }
        whole.rows = rows.into_values().collect();
        whole.ours_wrong.sort();
        whole.failures.sort();
        Ok(whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(parts: Vec<usize>, of: usize, rows: Vec<Row>, failures: Vec<Line>) -> Summary {
        Summary {
            against: "onnxruntime".into(),
            seed: 7,
            count: 10,
            ops: vec!["Pad".into()],
            plant_bug: None,
            shards: Shards { parts, of },
            disagreements: failures.len(),
            rows,
            ours_wrong: Vec::new(),
            failures,
        }
    }

    fn row(version: i64, agree: usize) -> Row {
        Row {
            op: "Pad".into(),
            version,
            feature: "constant".into(),
            kinds: [("agree".to_string(), agree)].into(),
            settled: BTreeMap::new(),
        }
    }

    fn line(case: usize) -> Line {
        Line {
            op_index: 0,
            case,
            text: format!("case {case}"),
        }
    }

    #[test]
    fn shards_partition_the_cases() {
        for n in 1..6 {
            for case in 0..30 {
                let owners = (1..=n).filter(|&k| Summary::in_shard(case, k, n)).count();
                assert_eq!(owners, 1, "case {case} of {n} shards");
            }
        }
    }

    #[test]
    fn merged_shards_add_up_and_list_in_case_order() {
        let a = summary(
            vec![1],
            2,
            vec![row(18, 2), row(19, 1)],
            vec![line(2), line(0)],
        );
        let b = summary(vec![2], 2, vec![row(18, 3)], vec![line(1)]);
        let m = Summary::merge(vec![b, a]).unwrap();
        assert_eq!(m.shards.parts, [1, 2]);
        assert_eq!(m.rows, vec![row(18, 5), row(19, 1)]);
        assert_eq!(m.failures, vec![line(0), line(1), line(2)]);
        assert_eq!(m.disagreements, 3);
    }

    #[test]
    fn merging_refuses_missing_repeated_and_foreign_shards() {
        let one = || summary(vec![1], 2, vec![], vec![]);
        assert!(Summary::merge(vec![one()]).is_err());
        assert!(Summary::merge(vec![one(), one()]).is_err());
        let mut other = summary(vec![2], 2, vec![], vec![]);
        other.seed = 8;
        assert!(Summary::merge(vec![one(), other]).is_err());
        assert!(Summary::merge(vec![]).is_err());
    }
}
