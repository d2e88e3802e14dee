//! `cargo xtask fetch-cases`: writes the official ONNX backend test cases
//! for the covered operators into `cases/`, pinned and reproducible.
//!
//! Sources:
//! - default: the onnx package from PyPI at a pinned version; its node case
//!   generators run with a fixed numpy seed, and its bundled PyTorch cases
//!   are copied;
//! - `--archive <path-or-url>`: an onnx source archive (.tar.gz) holding
//!   `onnx/backend/test/data/` (releases up to v1.22.0);
//! - `--dir <path>`: an onnx checkout or a data folder.
//!
//! Everything is written to a temporary folder first and renamed into place;
//! `--check` regenerates and compares with what is committed instead.

use crate::python;
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The operators the project covers.
pub const OPS: &[&str] = &["Pad", "Conv", "CenterCropPad"];

pub const DEFAULT_NODE_FILTERS: &[&str] = &[
    "test_constant_pad*",
    "test_edge_pad",
    "test_reflect_pad",
    "test_wrap_pad",
    "test_conv_*",
    "test_basic_conv_*",
    "test_center_crop_pad_*",
];

pub const DEFAULT_PYTORCH_FILTERS: &[&str] = &[
    "test_Conv*",
    "test_*Pad2d",
    "test_operator_conv",
    "test_operator_pad",
];

/// The numpy seed every node case generator runs under.
pub const DEFAULT_SEED: u64 = 0;

/// Official case kinds (folders under `onnx/backend/test/data/` and `cases/`).
const KINDS: &[&str] = &["node", "pytorch-converted", "pytorch-operator"];

/// Cases whose expected outputs come from numpy or onnx's reference
/// implementation (`gen_oracle_cases.py`), the invalid-input suite
/// (`gen_invalid_cases.py`), the schemas and the kept differential findings
/// (`gen_findings.py`); only the PyPI source writes them.
const ORACLE: &[&str] = &["oracle", "seed", "schemas", "invalid", "differential"];

/// Files inside generated folders that people write: kept across
/// regeneration, named in MANIFEST.toml, but without a sha256. They are
/// notes and matching rules, not outputs of a pinned generator, so there is
/// nothing to reproduce; a digest would only make every edit of a finding
/// wait for a full regeneration.
pub const HAND_WRITTEN: &[&str] = &["differential/FINDINGS.md", "differential/known.toml"];

#[derive(clap::Args, Debug)]
pub struct Args {
    /// An onnx source archive (.tar.gz, path or URL) to extract cases from.
    #[arg(long, conflicts_with = "dir")]
    archive: Option<String>,
    /// An onnx checkout, or a folder holding node/ and pytorch-*/ case folders.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Case name glob (repeatable); replaces the default filters for every kind.
    #[arg(long = "filter")]
    filters: Vec<String>,
    /// Regenerate into a temporary folder and fail if anything differs from cases/.
    #[arg(long)]
    check: bool,
    /// The numpy seed for the generators (PyPI source only).
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Where to write (default: cases/ in the project root).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Name filters per kind.
#[derive(Debug, Clone)]
pub struct Filters {
    pub node: Vec<String>,
    pub pytorch: Vec<String>,
}

impl Filters {
    pub fn new(custom: &[String]) -> Filters {
        if custom.is_empty() {
            Filters {
                node: DEFAULT_NODE_FILTERS.iter().map(|s| s.to_string()).collect(),
                pytorch: DEFAULT_PYTORCH_FILTERS
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            }
        } else {
            Filters {
                node: custom.to_vec(),
                pytorch: custom.to_vec(),
            }
        }
    }

    pub fn accepts(&self, kind: &str, name: &str) -> bool {
        let list = if kind == "node" {
            &self.node
        } else {
            &self.pytorch
        };
        list.iter().any(|p| glob(p, name))
    }
}

pub fn run(args: Args) -> Result<()> {
    let root = crate::project_root();
    let out = args.out.clone().unwrap_or_else(|| root.join("cases"));
    let target = crate::target_dir();
    let tmp = target
        .join("xtask")
        .join(format!("fetch-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    std::fs::create_dir_all(&tmp)?;
    let result = generate_and_apply(&args, &out, &target, &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn generate_and_apply(args: &Args, out: &Path, target: &Path, tmp: &Path) -> Result<()> {
    let filters = Filters::new(&args.filters);
    let source = if let Some(archive) = &args.archive {
        let path = local_archive(archive, tmp)?;
        extract_archive(&path, &filters, tmp)?;
        format!("archive {archive}")
    } else if let Some(dir) = &args.dir {
        copy_from_dir(dir, &filters, tmp)?;
        format!("dir {}", dir.display())
    } else {
        generate_from_pypi(&filters, args.seed, target, tmp)?;
        format!("pypi {}", python::CASE_REQUIREMENTS[0])
    };
    if hash_tree(tmp, KINDS)?.is_empty() {
        bail!(
            "no case matched the filters {:?} / {:?}",
            filters.node,
            filters.pytorch
        );
    }
    // The official kinds always come from the source; the oracle cases only
    // from the PyPI source (other sources leave the committed ones alone).
    let mut managed: Vec<&str> = KINDS.to_vec();
    for kind in ORACLE {
        if tmp.join(kind).is_dir() {
            managed.push(kind);
        }
    }
    for kind in all_kinds() {
        if !managed.contains(&kind) && out.join(kind).is_dir() {
            copy_tree(&out.join(kind), &tmp.join(kind))?;
        }
    }
    for file in HAND_WRITTEN {
        let (from, to) = (out.join(file), tmp.join(file));
        if from.is_file() && !to.exists() {
            std::fs::copy(&from, &to).with_context(|| format!("keeping {}", from.display()))?;
        }
    }
    let files = hash_generated(tmp)?;
    std::fs::write(
        tmp.join("MANIFEST.toml"),
        manifest(&source, args, &filters, &files),
    )?;
    if args.check {
        return check(tmp, out, args);
    }
    std::fs::create_dir_all(out)?;
    managed.push("MANIFEST.toml");
    for entry in managed {
        let (from, to) = (tmp.join(entry), out.join(entry));
        if to.is_dir() {
            std::fs::remove_dir_all(&to).with_context(|| format!("removing {}", to.display()))?;
        } else if to.exists() {
            std::fs::remove_file(&to)?;
        }
        if from.exists() {
            std::fs::rename(&from, &to)
                .with_context(|| format!("moving {} to {}", from.display(), to.display()))?;
        }
    }
    let cases = files.keys().filter(|f| f.ends_with("/model.onnx")).count();
    eprintln!(
        "xtask: wrote {cases} cases ({} files) to {} from {source}",
        files.len(),
        out.display()
    );
    Ok(())
}

fn generate_from_pypi(filters: &Filters, seed: u64, target: &Path, tmp: &Path) -> Result<()> {
    let env = python::venv(target, "cases-venv", python::CASE_REQUIREMENTS)?;
    let script = tmp.join("gen_cases.py");
    std::fs::write(&script, include_str!("gen_cases.py"))?;
    let config = serde_json::json!({
        "node_filters": filters.node,
        "pytorch_filters": filters.pytorch,
        "seed": seed,
        "ops": OPS,
    });
    let gen = tmp.join("generated");
    let report = python::output(
        Command::new(&env.python)
            .arg(&script)
            .arg(&gen)
            .arg(config.to_string())
            .env("PYTHONHASHSEED", "0"),
    )
    .context("running the onnx case generators")?;
    let report: serde_json::Value =
        serde_json::from_str(&report).context("reading the generator's report")?;
    if report["onnx_version"] != python::CASE_REQUIREMENTS[0].trim_start_matches("onnx==") {
        bail!(
            "the environment runs onnx {} instead of the pinned version",
            report["onnx_version"]
        );
    }
    std::fs::remove_file(&script)?;
    let oracle_script = tmp.join("gen_oracle_cases.py");
    std::fs::write(&oracle_script, include_str!("gen_oracle_cases.py"))?;
    python::output(
        Command::new(&env.python)
            .arg(&oracle_script)
            .arg(&gen)
            .arg(serde_json::json!({ "seed": seed }).to_string())
            .env("PYTHONHASHSEED", "0"),
    )
    .context("running the numpy oracle case generator")?;
    std::fs::remove_file(&oracle_script)?;
    let invalid_script = tmp.join("gen_invalid_cases.py");
    std::fs::write(&invalid_script, include_str!("gen_invalid_cases.py"))?;
    python::output(Command::new(&env.python).arg(&invalid_script).arg(&gen))
        .context("writing the invalid-input cases")?;
    std::fs::remove_file(&invalid_script)?;
    let audit_script = tmp.join("audit_invalid.py");
    std::fs::write(&audit_script, include_str!("audit_invalid.py"))?;
    python::output(Command::new(&env.python).arg(&audit_script).arg(&gen))
        .context("auditing the invalid-input cases with onnx (audit_invalid.py)")?;
    std::fs::remove_file(&audit_script)?;
    let schema_script = tmp.join("gen_schemas.py");
    std::fs::write(&schema_script, include_str!("gen_schemas.py"))?;
    python::output(
        Command::new(&env.python)
            .arg(&schema_script)
            .arg(&gen)
            .arg(serde_json::json!(OPS).to_string()),
    )
    .context("writing operator schemas from onnx.defs")?;
    std::fs::remove_file(&schema_script)?;
    let findings_script = tmp.join("gen_findings.py");
    std::fs::write(&findings_script, include_str!("gen_findings.py"))?;
    python::output(
        Command::new(&env.python)
            .arg(&findings_script)
            .arg(gen.join("differential"))
            .env("PYTHONHASHSEED", "0"),
    )
    .context("writing the kept differential findings")?;
    std::fs::remove_file(&findings_script)?;
    for kind in all_kinds() {
        if gen.join(kind).exists() {
            std::fs::rename(gen.join(kind), tmp.join(kind))?;
        }
    }
    std::fs::remove_dir_all(&gen).ok();
    Ok(())
}

/// A local path for the archive, downloading it first when given a URL.
fn local_archive(archive: &str, tmp: &Path) -> Result<PathBuf> {
    if archive.starts_with("http://") || archive.starts_with("https://") {
        let dest = tmp.join("download.tar.gz");
        python::run(Command::new("curl").args(["-fsSL", "-o"]).arg(&dest).arg(archive))
            .with_context(|| format!("downloading {archive} (if the network is closed, download it elsewhere and pass the local file)"))?;
        Ok(dest)
    } else {
        let p = PathBuf::from(archive);
        if !p.is_file() {
            bail!("archive {} does not exist", p.display());
        }
        Ok(p)
    }
}

/// Where a path inside an onnx tree points: (kind, case, rest).
fn split_data_path(path: &Path) -> Option<(String, String, PathBuf)> {
    let parts: Vec<String> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let at = parts
        .windows(3)
        .position(|w| w == ["backend", "test", "data"])?;
    let kind = parts.get(at + 3)?;
    let case = parts.get(at + 4)?;
    if !KINDS.contains(&kind.as_str()) || parts.len() <= at + 5 {
        return None;
    }
    Some((kind.clone(), case.clone(), parts[at + 5..].iter().collect()))
}

/// Extracts the matching case folders of an onnx source archive.
pub fn extract_archive(archive: &Path, filters: &Filters, out: &Path) -> Result<()> {
    let file =
        std::fs::File::open(archive).with_context(|| format!("opening {}", archive.display()))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut found = 0;
    for entry in tar
        .entries()
        .with_context(|| format!("reading {} as .tar.gz", archive.display()))?
    {
        let mut entry = entry.with_context(|| format!("reading {}", archive.display()))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path()?.into_owned();
        let Some((kind, case, rest)) = split_data_path(&path) else {
            continue;
        };
        if !filters.accepts(&kind, &case) {
            continue;
        }
        let dest = out.join(&kind).join(&case).join(&rest);
        if rest
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            bail!("archive entry {} escapes its folder", path.display());
        }
        std::fs::create_dir_all(dest.parent().unwrap_or(out))?;
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes)?;
        std::fs::write(&dest, bytes)?;
        found += 1;
    }
    if found == 0 {
        bail!(
            "{} holds no onnx/backend/test/data/<kind>/<case>/ files matching {:?} / {:?} (archives after v1.22.0 no longer carry node data)",
            archive.display(),
            filters.node,
            filters.pytorch
        );
    }
    drop_foreign_pytorch_cases(out)
}

/// Copies matching case folders from an onnx checkout or a data folder.
pub fn copy_from_dir(dir: &Path, filters: &Filters, out: &Path) -> Result<()> {
    let data = if dir.join("onnx/backend/test/data").is_dir() {
        dir.join("onnx/backend/test/data")
    } else {
        dir.to_path_buf()
    };
    let mut found = 0;
    for kind in KINDS {
        let src = data.join(kind);
        if !src.is_dir() {
            continue;
        }
        let mut names: Vec<_> = std::fs::read_dir(&src)?.collect::<std::io::Result<Vec<_>>>()?;
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().join("model.onnx").is_file() && filters.accepts(kind, &name) {
                copy_tree(&e.path(), &out.join(kind).join(&name))?;
                found += 1;
            }
        }
    }
    if found == 0 {
        bail!(
            "{} holds no node/ or pytorch-*/ case folders matching the filters (looked in {})",
            dir.display(),
            data.display()
        );
    }
    drop_foreign_pytorch_cases(out)
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dest = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &dest)?;
        } else {
            std::fs::copy(e.path(), &dest)?;
        }
    }
    Ok(())
}

/// PyTorch cases are kept only when their graph uses covered operators
/// alone (a ConvTranspose model matches `test_Conv*` by name).
fn drop_foreign_pytorch_cases(out: &Path) -> Result<()> {
    for kind in ["pytorch-converted", "pytorch-operator"] {
        let dir = out.join(kind);
        if !dir.is_dir() {
            continue;
        }
        for e in std::fs::read_dir(&dir)? {
            let case = e?.path();
            let model = case.join("model.onnx");
            let keep = match std::fs::read(&model)
                .ok()
                .and_then(|b| onnx_conformance::proto::load_model(&b).ok())
            {
                Some(m) => {
                    !m.graph.nodes.is_empty()
                        && m.graph
                            .nodes
                            .iter()
                            .all(|n| OPS.contains(&n.op_type.as_str()))
                }
                None => false,
            };
            if !keep {
                std::fs::remove_dir_all(&case)?;
            }
        }
    }
    Ok(())
}

fn all_kinds() -> Vec<&'static str> {
    let mut k = KINDS.to_vec();
    k.extend(ORACLE);
    k
}

/// Relative path (with `/`) to sha256 of every file under `root/<kind>`.
pub fn hash_tree(root: &Path, kinds: &[&str]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<()> {
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let p = e.path();
            if e.file_type()?.is_dir() {
                walk(root, &p, out)?;
            } else {
                let rel = p
                    .strip_prefix(root)?
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                let digest = Sha256::digest(std::fs::read(&p)?);
                out.insert(rel, digest.iter().map(|b| format!("{b:02x}")).collect());
            }
        }
        Ok(())
    }
    for kind in kinds {
        if root.join(kind).is_dir() {
            walk(root, &root.join(kind), &mut out)?;
        }
    }
    Ok(out)
}

/// `hash_tree` of every kind, without the hand-written files.
fn hash_generated(root: &Path) -> Result<BTreeMap<String, String>> {
    let mut files = hash_tree(root, &all_kinds())?;
    files.retain(|path, _| !HAND_WRITTEN.contains(&path.as_str()));
    Ok(files)
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

fn manifest(
    source: &str,
    args: &Args,
    filters: &Filters,
    files: &BTreeMap<String, String>,
) -> String {
    let mut s = String::from(
        "# Written by `cargo xtask fetch-cases`; do not edit by hand, rerun the command.\n",
    );
    s += &format!("source = {source:?}\n");
    if args.archive.is_none() && args.dir.is_none() {
        let reqs: Vec<String> = python::CASE_REQUIREMENTS
            .iter()
            .map(|s| s.to_string())
            .collect();
        s += &format!("python_requirements = {}\n", toml_list(&reqs));
        s += &format!("numpy_seed = {}\n", args.seed);
    }
    s += &format!("node_filters = {}\n", toml_list(&filters.node));
    s += &format!("pytorch_filters = {}\n", toml_list(&filters.pytorch));
    s += "# Written by hand, kept across regeneration, no digest (see HAND_WRITTEN in xtask/src/fetch_cases.rs).\n";
    let hand: Vec<String> = HAND_WRITTEN.iter().map(|s| s.to_string()).collect();
    s += &format!("hand_written = {}\n", toml_list(&hand));
    s += "\n[sha256]\n";
    for (path, digest) in files {
        s += &format!("{path:?} = \"{digest}\"\n");
    }
    s
}

fn check(tmp: &Path, out: &Path, args: &Args) -> Result<()> {
    let fresh = hash_generated(tmp)?;
    let committed = hash_generated(out)?;
    let mut problems = Vec::new();
    for (path, digest) in &fresh {
        match committed.get(path) {
            None => problems.push(format!("missing: cases/{path}")),
            Some(d) if d != digest => problems.push(format!("differs: cases/{path}")),
            _ => {}
        }
    }
    for path in committed.keys() {
        if !fresh.contains_key(path) {
            problems.push(format!("not generated: cases/{path}"));
        }
    }
    let manifest_fresh = std::fs::read_to_string(tmp.join("MANIFEST.toml"))?;
    let manifest_old = std::fs::read_to_string(out.join("MANIFEST.toml")).unwrap_or_default();
    if manifest_fresh != manifest_old {
        problems.push("differs: cases/MANIFEST.toml".to_string());
    }
    if problems.is_empty() {
        eprintln!(
            "xtask: cases/ matches a fresh generation ({} files)",
            fresh.len()
        );
        return Ok(());
    }
    let mut cmd = String::from("cargo xtask fetch-cases");
    for f in &args.filters {
        cmd += &format!(" --filter '{f}'");
    }
    if args.seed != DEFAULT_SEED {
        cmd += &format!(" --seed {}", args.seed);
    }
    bail!(
        "cases/ differs from a fresh generation ({} problems):\n  {}\nrun `{cmd}` and commit the result",
        problems.len(),
        problems.iter().take(50).cloned().collect::<Vec<_>>().join("\n  ")
    )
}

/// `*` matches any run of characters, `?` one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some((b'*', rest)) => (0..=t.len()).any(|i| go(rest, &t[i..])),
            Some((b'?', rest)) => !t.is_empty() && go(rest, &t[1..]),
            Some((c, rest)) => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xtask-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn add(
        builder: &mut tar::Builder<flate2::write::GzEncoder<std::fs::File>>,
        path: &str,
        data: &[u8],
    ) {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        builder.append_data(&mut h, path, data).unwrap();
    }

    /// A small archive laid out like a GitHub source archive of onnx.
    #[test]
    fn archive_source_extracts_only_matching_cases() {
        let dir = tmpdir("archive");
        let archive = dir.join("onnx-1.22.0.tar.gz");
        {
            let f = std::fs::File::create(&archive).unwrap();
            let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
                f,
                flate2::Compression::fast(),
            ));
            let base = "onnx-1.22.0/onnx/backend/test/data/node";
            add(
                &mut b,
                &format!("{base}/test_edge_pad/model.onnx"),
                b"model",
            );
            add(
                &mut b,
                &format!("{base}/test_edge_pad/test_data_set_0/input_0.pb"),
                b"in",
            );
            add(&mut b, &format!("{base}/test_abs/model.onnx"), b"other op");
            add(&mut b, "onnx-1.22.0/README.md", b"readme");
            b.into_inner().unwrap().finish().unwrap();
        }
        let out = dir.join("out");
        extract_archive(&archive, &Filters::new(&[]), &out).unwrap();
        assert_eq!(
            std::fs::read(out.join("node/test_edge_pad/model.onnx")).unwrap(),
            b"model"
        );
        assert_eq!(
            std::fs::read(out.join("node/test_edge_pad/test_data_set_0/input_0.pb")).unwrap(),
            b"in"
        );
        assert!(!out.join("node/test_abs").exists());
        let files = hash_tree(&out, KINDS).unwrap();
        assert_eq!(files.len(), 2);

        let err = extract_archive(
            &archive,
            &Filters::new(&["test_nothing".into()]),
            &dir.join("none"),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("holds no onnx/backend/test/data"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `--check` covers the generated findings (a changed output, a file no
    /// generator writes) and leaves the hand-written notes to their authors.
    #[test]
    fn check_covers_differential_cases_but_not_hand_written_files() {
        let dir = tmpdir("check-differential");
        let (fresh, committed) = (dir.join("fresh"), dir.join("committed"));
        let put = |root: &Path, rel: &str, data: &[u8]| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        };
        for root in [&fresh, &committed] {
            put(root, "differential/case/model.onnx", b"model");
            put(root, "differential/FINDINGS.md", b"notes");
        }
        put(
            &fresh,
            "differential/case/test_data_set_0/output_0.pb",
            b"oracle",
        );
        put(
            &committed,
            "differential/case/test_data_set_0/output_0.pb",
            b"ours",
        );
        put(&committed, "differential/stray/model.onnx", b"kept by hand");
        put(&committed, "differential/known.toml", b"edited since");
        let args = Args {
            archive: None,
            dir: None,
            filters: Vec::new(),
            check: true,
            seed: DEFAULT_SEED,
            out: None,
        };
        let files = hash_generated(&fresh).unwrap();
        assert!(
            files.keys().all(|f| !f.ends_with("FINDINGS.md")),
            "{files:?}"
        );
        let text = manifest("pypi", &args, &Filters::new(&[]), &files);
        assert!(text.contains(
            "hand_written = [\"differential/FINDINGS.md\", \"differential/known.toml\"]"
        ));
        std::fs::write(fresh.join("MANIFEST.toml"), &text).unwrap();
        std::fs::write(committed.join("MANIFEST.toml"), &text).unwrap();
        let e = check(&fresh, &committed, &args).unwrap_err().to_string();
        assert!(
            e.contains("differs: cases/differential/case/test_data_set_0/output_0.pb"),
            "{e}"
        );
        assert!(
            e.contains("not generated: cases/differential/stray/model.onnx"),
            "{e}"
        );
        assert!(e.contains("(2 problems)"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn data_paths_are_recognized() {
        let p = Path::new("onnx-1.22.0/onnx/backend/test/data/pytorch-converted/test_Conv1d/test_data_set_0/input_0.pb");
        let (kind, case, rest) = split_data_path(p).unwrap();
        assert_eq!(
            (kind.as_str(), case.as_str()),
            ("pytorch-converted", "test_Conv1d")
        );
        assert_eq!(rest, Path::new("test_data_set_0/input_0.pb"));
        assert!(split_data_path(Path::new("onnx/backend/test/data/real/x/model.onnx")).is_none());
    }

    #[test]
    fn default_filters_select_the_covered_cases() {
        let f = Filters::new(&[]);
        assert!(f.accepts("node", "test_constant_pad_negative_axes"));
        assert!(f.accepts("node", "test_center_crop_pad_crop_expanded"));
        assert!(!f.accepts("node", "test_convtranspose"));
        assert!(f.accepts("pytorch-converted", "test_ReflectionPad2d"));
        assert!(!f.accepts("pytorch-converted", "test_edge_pad"));
    }
}
