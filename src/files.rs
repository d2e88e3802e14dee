//! Reading untrusted files: model and tensor files bounded by a size limit,
//! and external tensor data confined to the folder of the file that
//! names it.
//!
//! External data is resolved like ONNX does, relative to the folder of the
//! model (or tensor file), but only inside that folder: absolute paths,
//! `..` components and symbolic links that lead out of it are refused, so a
//! case can never make the harness read `/etc/passwd` or a sibling case.

use crate::error::{Error, Result};
use crate::limits::Limits;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

fn io_err(path: &Path, e: impl ToString) -> Error {
    Error::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

/// Reads a whole file, refusing one larger than `max_bytes` before reading.
pub fn read_limited(path: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    // Checked before opening: opening a FIFO or a device would block or
    // read forever.
    let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    if !meta.is_file() {
        return Err(io_err(path, "not a regular file"));
    }
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let len = file.metadata().map_err(|e| io_err(path, e))?.len();
    Limits::check(
        format!("file {}", path.display()),
        "max_file_bytes",
        len as u128,
        max_bytes,
    )?;
    let mut bytes = Vec::with_capacity(len as usize);
    // `take` guards against a file that grows while it is read.
    file.take(max_bytes)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(path, e))?;
    Ok(bytes)
}

/// Where a tensor's external data lives, as its `external_data` entries say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalRef {
    pub location: String,
    pub offset: u64,
    /// None: to the end of the file.
    pub length: Option<u64>,
}

/// Reads the bytes an external-data reference names, from inside `base`.
/// `base` is None when the tensor was decoded from bytes with no folder:
/// then external data is refused.
pub fn read_external(
    tensor: &str,
    r: &ExternalRef,
    base: Option<&Path>,
    max_bytes: u64,
) -> Result<Vec<u8>> {
    let refuse = |detail: String| Error::ExternalData {
        tensor: tensor.to_string(),
        location: r.location.clone(),
        detail,
    };
    let Some(base) = base else {
        return Err(refuse(
            "no folder to resolve it in (the tensor was decoded from bytes; load the model from its file)".into(),
        ));
    };
    let rel = Path::new(&r.location);
    if r.location.is_empty() {
        return Err(refuse("the location is empty".into()));
    }
    if let Some(c) = rel
        .components()
        .find(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        let why = match c {
            Component::ParentDir => "'..' leaves the folder",
            _ => "an absolute path",
        };
        return Err(refuse(format!(
            "{why}: external data must be a relative path inside {}",
            base.display()
        )));
    }
    let root = base
        .canonicalize()
        .map_err(|e| refuse(format!("cannot resolve {}: {e}", base.display())))?;
    let path = base
        .join(rel)
        .canonicalize()
        .map_err(|e| refuse(format!("cannot open it in {}: {e}", base.display())))?;
    if !path.starts_with(&root) {
        return Err(refuse(format!(
            "it resolves to {}, outside {} (through a symbolic link)",
            path.display(),
            root.display()
        )));
    }
    // Checked before opening, which would block on a FIFO.
    let meta = std::fs::metadata(&path).map_err(|e| refuse(e.to_string()))?;
    if !meta.is_file() {
        return Err(refuse(format!("{} is not a file", path.display())));
    }
    let mut file = std::fs::File::open(&path).map_err(|e| refuse(e.to_string()))?;
    let size = meta.len();
    if r.offset > size {
        return Err(refuse(format!(
            "offset {} is past the end of the {size}-byte file",
            r.offset
        )));
    }
    let length = r.length.unwrap_or(size - r.offset);
    if length > size - r.offset {
        return Err(refuse(format!(
            "offset {} + length {length} is past the end of the {size}-byte file",
            r.offset
        )));
    }
    Limits::check(
        format!("external data of tensor '{tensor}'"),
        "max_tensor_bytes",
        length as u128,
        max_bytes,
    )?;
    file.seek(SeekFrom::Start(r.offset))
        .map_err(|e| refuse(e.to_string()))?;
    let mut bytes = vec![0u8; length as usize];
    file.read_exact(&mut bytes)
        .map_err(|e| refuse(e.to_string()))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "onnx-conformance-files-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn at(location: &str, offset: u64, length: Option<u64>) -> ExternalRef {
        ExternalRef {
            location: location.into(),
            offset,
            length,
        }
    }

    #[test]
    fn reads_a_slice_inside_the_folder() {
        let d = scratch("ok");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/w.bin"), [1u8, 2, 3, 4, 5]).unwrap();
        let got = read_external("w", &at("./sub/w.bin", 1, Some(3)), Some(&d), 100).unwrap();
        assert_eq!(got, [2, 3, 4]);
        let rest = read_external("w", &at("sub/w.bin", 2, None), Some(&d), 100).unwrap();
        assert_eq!(rest, [3, 4, 5]);
    }

    #[test]
    fn escapes_bad_ranges_and_big_slices_are_refused() {
        let d = scratch("bad");
        std::fs::write(d.join("w.bin"), [0u8; 8]).unwrap();
        let outside = d
            .parent()
            .unwrap()
            .join(format!("outside-{}", std::process::id()));
        std::fs::write(&outside, [0u8; 8]).unwrap();
        let err = |r: ExternalRef, base: Option<&Path>| {
            read_external("w", &r, base, 4).unwrap_err().to_string()
        };
        let abs = outside.display().to_string();
        assert!(err(at(&abs, 0, None), Some(&d)).contains("an absolute path"));
        assert!(err(at("../x", 0, None), Some(&d)).contains("'..' leaves the folder"));
        assert!(err(at("a/../../x", 0, None), Some(&d)).contains("'..'"));
        assert!(err(at("", 0, None), Some(&d)).contains("location is empty"));
        assert!(err(at("w.bin", 0, None), None).contains("no folder to resolve it in"));
        assert!(err(at("missing.bin", 0, None), Some(&d)).contains("cannot open it"));
        assert!(err(at("w.bin", 9, None), Some(&d)).contains("offset 9 is past the end"));
        assert!(err(at("w.bin", 4, Some(5)), Some(&d)).contains("past the end"));
        assert!(err(at("w.bin", 4, Some(u64::MAX)), Some(&d)).contains("past the end"));
        let big = read_external("w", &at("w.bin", 0, None), Some(&d), 4).unwrap_err();
        assert_eq!(big.kind(), "limit");
        assert!(big.to_string().contains("max_tensor_bytes"), "{big}");
        std::fs::create_dir_all(d.join("dir")).unwrap();
        assert!(err(at("dir", 0, None), Some(&d)).contains("is not a file"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&outside, d.join("link.bin")).unwrap();
            assert!(err(at("link.bin", 0, None), Some(&d)).contains("outside"));
        }
        let _ = std::fs::remove_file(outside);
    }

    #[test]
    fn large_files_are_refused_before_reading() {
        let d = scratch("size");
        std::fs::write(d.join("m.onnx"), [0u8; 10]).unwrap();
        assert_eq!(read_limited(&d.join("m.onnx"), 10).unwrap().len(), 10);
        let e = read_limited(&d.join("m.onnx"), 9).unwrap_err();
        assert!(e.to_string().contains("max_file_bytes"), "{e}");
        let e = read_limited(&d.join("none.onnx"), 9).unwrap_err();
        assert_eq!(e.kind(), "io");
        let e = read_limited(&d, 9).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        #[cfg(unix)]
        {
            // A FIFO would block the open until a writer comes.
            let fifo = d.join("input_0.pb");
            let made = std::process::Command::new("mkfifo").arg(&fifo).status();
            if made.is_ok_and(|s| s.success()) {
                let e = read_limited(&fifo, 9).unwrap_err();
                assert!(e.to_string().contains("not a regular file"), "{e}");
            }
        }
    }
}
