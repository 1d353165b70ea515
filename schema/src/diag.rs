//! Diagnostics: every error or warning of a load names the file, line,
//! column and field path it is about, with a hint where one exists.
//!
//! `--json` serializes a diagnostic as `{file, line, column, path, message}`;
//! people get a miette report with the source span ([`Diagnostic::to_report`]).

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::span::{Loc, SourceFile};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    #[default]
    Error,
    Warning,
}

#[derive(Debug, Clone, Serialize)]
pub struct Diagnostic {
    /// Display path of the file, relative to the tree root (`cfg/runtime-builders.yml`).
    pub file: String,
    /// 1-based; 0 when the diagnostic is about no particular place.
    pub line: u32,
    pub column: u32,
    /// Field path (`runtime_builders[0].credentials.profile_nme`).
    pub path: String,
    /// Redacted when serialized or shown ([`crate::secret`]).
    #[serde(serialize_with = "redacted")]
    pub message: String,
    #[serde(skip)]
    pub hint: Option<String>,
    #[serde(skip)]
    pub severity: Severity,
    /// Byte offset and length of the span in the source (for rendering).
    #[serde(skip)]
    pub offset: u32,
    #[serde(skip)]
    pub len: u32,
    #[serde(skip)]
    pub source: Option<Arc<SourceFile>>,
    /// The span covers secret material (a private key pasted where a
    /// public one goes): the report's source snippet shows it masked.
    #[serde(skip)]
    pub secret_span: bool,
}

fn redacted<S: serde::Serializer>(m: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::secret::redact(m))
}

impl Diagnostic {
    /// Replace every secret value in the message and hint by its token.
    pub fn redact(&mut self) {
        if let std::borrow::Cow::Owned(m) = crate::secret::redact(&self.message) {
            self.message = m;
        }
        if let Some(h) = &self.hint {
            if let std::borrow::Cow::Owned(x) = crate::secret::redact(h) {
                self.hint = Some(x);
            }
        }
    }

    /// An error at a location.
    pub fn at(loc: &Loc, path: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: loc.file.path.clone(),
            line: loc.line,
            column: loc.column,
            path: path.to_string(),
            message: message.into(),
            hint: None,
            severity: Severity::Error,
            offset: loc.offset,
            len: loc.len,
            source: if loc.file.text.is_empty() {
                None
            } else {
                Some(loc.file.clone())
            },
            secret_span: false,
        }
    }

    /// An error about a file (or a command-line value) with no position.
    pub fn plain(file: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: file.to_string(),
            line: 0,
            column: 0,
            path: String::new(),
            message: message.into(),
            hint: None,
            severity: Severity::Error,
            offset: 0,
            len: 0,
            source: None,
            secret_span: false,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    pub fn with_hint_opt(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
    /// The span covers secret material: its snippet is masked.
    pub fn secret_span(mut self) -> Self {
        self.secret_span = true;
        self
    }
    pub fn warning(mut self) -> Self {
        self.severity = Severity::Warning;
        self
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `file:line:col`, or just the file when there is no position.
    pub fn location(&self) -> String {
        if self.line == 0 {
            self.file.clone()
        } else {
            format!("{}:{}:{}", self.file, self.line, self.column)
        }
    }

    /// A miette report with the source span, the field path and the hint.
    pub fn to_report(&self) -> miette::Report {
        let mut this = self.clone();
        this.redact();
        let self_ = &this;
        self_.report()
    }

    fn report(&self) -> miette::Report {
        let sev = match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        };
        let head = if self.path.is_empty() {
            format!("{}: {}", self.location(), self.message)
        } else {
            format!("{}: {}: {}", self.location(), self.path, self.message)
        };
        let mut d = miette::MietteDiagnostic::new(head).with_severity(sev);
        if let Some(h) = &self.hint {
            d = d.with_help(h.clone());
        }
        match &self.source {
            Some(src) if self.line > 0 => {
                let len = (self.len as usize).max(1);
                let label = if self.path.is_empty() {
                    self.message.clone()
                } else {
                    self.path.clone()
                };
                d = d.with_label(miette::LabeledSpan::at(
                    self.offset as usize..self.offset as usize + len,
                    label,
                ));
                let span = self
                    .secret_span
                    .then_some(self.offset as usize..self.offset as usize + len);
                miette::Report::new(d).with_source_code(
                    miette::NamedSource::new(src.path.clone(), masked_source(&src.text, span))
                        .with_language("yaml"),
                )
            }
            _ => miette::Report::new(d),
        }
    }
}

/// A source as a report's snippet may show it: every byte (but line
/// breaks) of `span` (a diagnostic about secret material), of a registered
/// secret's value, of a PEM private key block and of an `AGE-SECRET-KEY-`
/// string becomes `*`. Offsets and lines stay where they were.
pub fn masked_source(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    let mut b = text.as_bytes().to_vec();
    let mut mask = |r: std::ops::Range<usize>| {
        let end = r.end.min(b.len());
        for x in &mut b[r.start.min(end)..end] {
            if *x != b'\n' && *x != b'\r' {
                *x = b'*';
            }
        }
    };
    if let Some(r) = span {
        mask(r);
    }
    for r in crate::secret::occurrences(text) {
        mask(r);
    }
    let mut from = 0;
    while let Some(i) = text[from..].find("-----BEGIN ") {
        let start = from + i;
        let head_end = text[start..].find('\n').map_or(text.len(), |n| start + n);
        if !text[start..head_end].contains("PRIVATE KEY") {
            from = start + 1;
            continue;
        }
        let end = match text[start + 1..].find("-----END ") {
            Some(n) => {
                let e = start + 1 + n;
                text[e..].find('\n').map_or(text.len(), |m| e + m)
            }
            None => text.len(),
        };
        mask(start..end);
        from = end.max(start + 1);
    }
    let mut from = 0;
    while let Some(i) = text[from..].find("AGE-SECRET-KEY-") {
        let start = from + i;
        let end = text[start..]
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '-')
            .map_or(text.len(), |n| start + n);
        mask(start..end);
        from = end;
    }
    String::from_utf8_lossy(&b).into_owned()
}

impl fmt::Display for Diagnostic {
    /// `cfg/runtime-builders.yml:14:7: runtime_builders[0].credentials.profile_nme: unknown field (hint: ...)`
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}: ", self.location())?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&crate::secret::redact(&self.message))?;
        if let Some(h) = &self.hint {
            write!(f, " (hint: {h})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

/// A collector of diagnostics for one load.
#[derive(Debug, Default)]
pub struct Diags {
    pub items: Vec<Diagnostic>,
}

impl Diags {
    pub fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }
    pub fn error(&mut self, loc: &Loc, path: &str, message: impl Into<String>) {
        self.items.push(Diagnostic::at(loc, path, message));
    }
    pub fn error_hint(
        &mut self,
        loc: &Loc,
        path: &str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.items
            .push(Diagnostic::at(loc, path, message).with_hint(hint));
    }
    pub fn warn(&mut self, loc: &Loc, path: &str, message: impl Into<String>) {
        self.items
            .push(Diagnostic::at(loc, path, message).warning());
    }
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }
}

#[cfg(test)]
mod tests {
    use super::masked_source;

    #[test]
    fn a_snippet_masks_private_keys_and_the_secret_span() {
        let text = "a: 1\nk: |\n  -----BEGIN OPENSSH PRIVATE KEY-----\n  b3BlbnNzaC1rZXkt\n  -----END OPENSSH PRIVATE KEY-----\nid: AGE-SECRET-KEY-1QQQQ\npw: hunter-span\n";
        let span = text.find("hunter-span").map(|i| i..i + "hunter-span".len());
        let m = masked_source(text, span);
        assert_eq!(m.len(), text.len());
        assert_eq!(m.lines().count(), text.lines().count());
        for gone in [
            "b3BlbnNzaC1rZXkt",
            "PRIVATE KEY",
            "AGE-SECRET-KEY-1QQQQ",
            "hunter-span",
        ] {
            assert!(!m.contains(gone), "{m}");
        }
        assert!(m.starts_with("a: 1\nk: |\n  ***"), "{m}");
        assert!(m.contains("pw: ***********\n"), "{m}");
    }
}
