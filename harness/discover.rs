//! Finds cases: folders holding `model.onnx` and `test_data_set_*/`.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use walkdir::WalkDir;

#[derive(Debug, Clone)]
pub struct Case {
    /// The folder path between the root and the case, e.g. `node`.
    pub source: String,
    /// The case folder's name, e.g. `test_edge_pad`.
    pub name: String,
    pub dir: PathBuf,
    /// Data set folders, ordered by their number.
    pub data_sets: Vec<PathBuf>,
    /// `expected_error.toml`, when the case is invalid input that must be
    /// rejected (see `invalid.rs`).
    pub expected_error: Option<PathBuf>,
    /// What is wrong with the folder's layout, if anything: reported by the
    /// case's trial, so one odd folder does not stop the whole run.
    pub layout_error: Option<String>,
}

impl Case {
    pub fn id(&self) -> String {
        format!("{}/{}", self.source, self.name)
    }
}

/// The folders to search: `ONNX_CASES` (`:`-separated) or the default.
pub fn roots(default: &Path) -> Vec<PathBuf> {
    match std::env::var_os("ONNX_CASES") {
        Some(v) if !v.is_empty() => std::env::split_paths(&v).collect(),
        _ => vec![default.to_path_buf()],
    }
}

/// Every case under `roots`, sorted by id. Zero cases is an error.
pub fn discover(roots: &[PathBuf]) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for root in roots {
        if !root.is_dir() {
            bail!(
                "case folder {} does not exist (run `cargo xtask fetch-cases`, or point ONNX_CASES at a folder of cases)",
                root.display()
            );
        }
        let before = cases.len();
        for entry in WalkDir::new(root).sort_by_file_name() {
            let entry = entry.with_context(|| format!("walking {}", root.display()))?;
            if entry.file_type().is_dir() && entry.path().join("model.onnx").is_file() {
                cases.push(case_at(root, entry.path())?);
            }
        }
        if cases.len() == before {
            bail!(
                "no cases found under {}: a case is a folder holding model.onnx and test_data_set_*/",
                root.display()
            );
        }
    }
    cases.sort_by_key(|c| c.id());
    Ok(cases)
}

/// The cases that trials named `names` belong to, found from the names
/// alone (no walk of the roots), so that one trial can run without reading
/// every case. `None` when a name does not lead to a case folder: the
/// caller then discovers everything.
pub fn locate(roots: &[PathBuf], names: &[String]) -> Option<Vec<Case>> {
    let mut cases: Vec<Case> = Vec::new();
    for name in names {
        let id = case_id_of_trial(name);
        if cases.iter().any(|c| c.id() == id) {
            continue;
        }
        cases.push(locate_one(roots, id)?);
    }
    cases.sort_by_key(|c| c.id());
    Some(cases)
}

/// A trial name without its data set (`#N`), version (`@Op-N`) and
/// reading (`~...`) suffixes: the id of its case.
pub fn case_id_of_trial(name: &str) -> &str {
    let end = name.find(['#', '@', '~']).unwrap_or(name.len());
    &name[..end]
}

fn locate_one(roots: &[PathBuf], id: &str) -> Option<Case> {
    let (source, name) = id.rsplit_once('/')?;
    if name.is_empty() || name.contains("..") || source.split('/').any(|p| p == "..") {
        return None;
    }
    for root in roots {
        // The case's id depends on where it sits under its root (see
        // `case_at`), so each place it could be is checked by the id it gives.
        let places = [root.join(source).join(name), root.join(name), root.clone()];
        for dir in places {
            if dir.join("model.onnx").is_file() {
                if let Ok(case) = case_at(root, &dir) {
                    if case.id() == id {
                        return Some(case);
                    }
                }
            }
        }
    }
    None
}

fn case_at(root: &Path, dir: &Path) -> Result<Case> {
    let rel = dir.strip_prefix(root).unwrap_or(dir);
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let name = parts.pop().unwrap_or_else(|| dir_name(dir));
    let source = if parts.is_empty() {
        // The root is itself the case folder, or cases sit directly under
        // it: name the source after the root.
        let base = if rel.as_os_str().is_empty() {
            dir.parent().unwrap_or(dir)
        } else {
            root
        };
        dir_name(base)
    } else {
        parts.join("/")
    };
    let mut data_sets: Vec<(usize, PathBuf)> = Vec::new();
    let mut layout_error = None;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if let Some(n) = file_name.strip_prefix("test_data_set_") {
            if entry.path().is_dir() {
                match n.parse::<usize>() {
                    Ok(n) => data_sets.push((n, entry.path())),
                    Err(_) => {
                        layout_error = Some(format!(
                            "data set folder {} has no number",
                            entry.path().display()
                        ))
                    }
                }
            }
        }
    }
    data_sets.sort();
    let expected_error = Some(dir.join("expected_error.toml")).filter(|p| p.is_file());
    Ok(Case {
        source,
        name,
        dir: dir.to_path_buf(),
        data_sets: data_sets.into_iter().map(|(_, p)| p).collect(),
        expected_error,
        layout_error,
    })
}

fn dir_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "cases".to_string())
}

/// The `input_N.pb` or `output_N.pb` files of a data set, ordered by N.
pub fn numbered(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    let mut files: Vec<(usize, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(n) = name
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(".pb"))
        {
            if let Ok(n) = n.parse::<usize>() {
                files.push((n, entry.path()));
            }
        }
    }
    files.sort();
    for (i, (n, p)) in files.iter().enumerate() {
        if *n != i {
            bail!(
                "{} is numbered {n} but {prefix}{i}.pb is missing",
                p.display()
            );
        }
    }
    Ok(files.into_iter().map(|(_, p)| p).collect())
}
