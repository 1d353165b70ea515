//! Spans: a source file and a place in it. Every spanned YAML node and
//! every diagnostic carries a [`Loc`].

use std::path::PathBuf;
use std::sync::Arc;

/// One source file: its display path (relative to the tree root when it lies
/// inside it) and its text, kept for rendering diagnostics with spans.
#[derive(Debug)]
pub struct SourceFile {
    /// Display path (`cfg/runtime-builders.yml`).
    pub path: String,
    /// Absolute (or as-given) path on disk.
    pub abs: PathBuf,
    pub text: Arc<str>,
}

/// Where a node is: file, 1-based line and column, byte offset and length.
#[derive(Debug, Clone)]
pub struct Loc {
    pub file: Arc<SourceFile>,
    pub line: u32,
    pub column: u32,
    pub offset: u32,
    pub len: u32,
}

impl Loc {
    /// A location with no position in a file (line 0), e.g. for a value
    /// given on the command line.
    pub fn detached(label: &str) -> Loc {
        Loc {
            file: Arc::new(SourceFile {
                path: label.to_string(),
                abs: PathBuf::from(label),
                text: Arc::from(""),
            }),
            line: 0,
            column: 0,
            offset: 0,
            len: 0,
        }
    }

    /// `file:line:col`
    pub fn display(&self) -> String {
        format!("{}:{}:{}", self.file.path, self.line, self.column)
    }
}

impl PartialEq for Loc {
    fn eq(&self, other: &Self) -> bool {
        self.file.path == other.file.path && self.line == other.line && self.column == other.column
    }
}
