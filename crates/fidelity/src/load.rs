//! Loading the corpus: the built-in files (compiled in) or a directory's,
//! each corpus file with the procedure files it includes.

use std::collections::BTreeSet;
use std::path::Path;

use crate::ValidateError;
use crate::corpus::{BUILT_IN, CorpusFile};
use crate::shape::ProcedureFile;

/// The procedure files shipped with vssd (`validation/procedures/`).
pub const BUILT_IN_PROCEDURES: &[(&str, &str)] = &[
    (
        "p1-used-state-2009",
        include_str!("../../../validation/procedures/p1-used-state-2009.toml"),
    ),
    (
        "p2-trim-drivers-2011",
        include_str!("../../../validation/procedures/p2-trim-drivers-2011.toml"),
    ),
    (
        "p3-retention-2011",
        include_str!("../../../validation/procedures/p3-retention-2011.toml"),
    ),
];

/// A file's origin (for messages) and text.
type Named = (String, String);

/// The built-in corpus, or every `*.toml` of `dir` (its procedure files in
/// `dir/procedures/`), each corpus file with the procedures it includes.
pub fn load(dir: Option<&Path>) -> Result<Vec<CorpusFile>, ValidateError> {
    let (files, procedures): (Vec<Named>, Vec<Named>) = match dir {
        None => (
            BUILT_IN
                .iter()
                .map(|(n, t)| (format!("validation/{n}.toml"), t.to_string()))
                .collect(),
            BUILT_IN_PROCEDURES
                .iter()
                .map(|(n, t)| (format!("validation/procedures/{n}.toml"), t.to_string()))
                .collect(),
        ),
        Some(d) => {
            let pd = d.join("procedures");
            let procs = if pd.is_dir() {
                toml_files(&pd)?
            } else {
                Vec::new()
            };
            (toml_files(d)?, procs)
        }
    };
    let procedures: Vec<(String, ProcedureFile)> = procedures
        .iter()
        .map(|(origin, text)| {
            toml::from_str(text)
                .map(|p| (origin.clone(), p))
                .map_err(|e| ValidateError::Corpus {
                    origin: origin.clone(),
                    msg: e.to_string(),
                })
        })
        .collect::<Result<_, _>>()?;
    files
        .iter()
        .map(|(origin, text)| {
            let raw: CorpusFile = toml::from_str(text).map_err(|e| ValidateError::Corpus {
                origin: origin.clone(),
                msg: e.to_string(),
            })?;
            let mut c = raw.with_procedures(&procedures, origin)?;
            c.origin = origin.clone();
            c.check(origin)?;
            Ok(c)
        })
        .collect()
}

impl CorpusFile {
    /// This file with the procedures it includes: their sources,
    /// protocols, figures and the shapes that cover its preset joined to
    /// its own.
    fn with_procedures(
        mut self,
        procedures: &[(String, ProcedureFile)],
        origin: &str,
    ) -> Result<CorpusFile, ValidateError> {
        for name in self.procedures.clone() {
            let (porigin, p) = procedures
                .iter()
                .find(|(_, p)| p.procedure == name)
                .ok_or_else(|| ValidateError::Corpus {
                    origin: origin.into(),
                    msg: format!(
                        "includes procedure {name:?}, which no procedure file defines ({})",
                        procedures
                            .iter()
                            .map(|(_, p)| p.procedure.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })?;
            if !p.presets.contains(&self.preset) {
                return Err(ValidateError::Corpus {
                    origin: porigin.clone(),
                    msg: format!(
                        "is included by {origin} but does not list its preset {:?} among the drives it covers",
                        self.preset
                    ),
                });
            }
            for sh in &p.shape {
                if let Some(unknown) = sh.presets.iter().find(|x| !p.presets.contains(x)) {
                    return Err(ValidateError::Corpus {
                        origin: porigin.clone(),
                        msg: format!(
                            "shape {:?} covers {unknown:?}, which the procedure does not",
                            sh.id
                        ),
                    });
                }
            }
            // A source the file cites already (the same article) is one
            // source: its figures and shapes leave a fit together.
            let have: BTreeSet<String> = self.source.iter().map(|s| s.id.clone()).collect();
            self.source
                .extend(p.source.iter().filter(|s| !have.contains(&s.id)).cloned());
            self.protocol.extend(p.protocol.iter().cloned());
            self.figure.extend(p.figure.iter().cloned());
            self.shape
                .extend(p.shape.iter().filter(|s| s.covers(&self.preset)).cloned());
        }
        Ok(self)
    }
}

/// Every `*.toml` of `dir`, in name order, as (path, text): each a regular
/// file of at most 4 MiB.
pub fn toml_files(dir: &Path) -> Result<Vec<(String, String)>, ValidateError> {
    let io = |path: &Path, e: std::io::Error| ValidateError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| Ok((p.display().to_string(), read_toml_file(p)?)))
        .collect()
}

/// One TOML file of the corpus or a fit record: a regular file of at most
/// 4 MiB.
pub fn read_toml_file(p: &Path) -> Result<String, ValidateError> {
    let io = |e: std::io::Error| ValidateError::Io {
        path: p.display().to_string(),
        source: e,
    };
    let meta = std::fs::metadata(p).map_err(io)?;
    if !meta.is_file() || meta.len() > 4 << 20 {
        return Err(ValidateError::Corpus {
            origin: p.display().to_string(),
            msg: "not a regular file of at most 4 MiB".into(),
        });
    }
    std::fs::read_to_string(p).map_err(io)
}
