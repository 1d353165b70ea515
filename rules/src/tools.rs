//! Executables: the generic version check (`<binary> --version`, the first
//! dotted number) against a PEP 440 specifier set (`">=1.14, <1.15"`).
//! The check itself runs a process, so `validate --offline` skips it.

use std::cmp::Ordering;

use csis_schema::model::Executable;

/// A parsed version: its numeric release segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(pub Vec<u64>);

impl Version {
    /// The first dotted number in `text` (`Packer v1.14.2` -> 1.14.2).
    pub fn find(text: &str) -> Option<Version> {
        let re = regex::Regex::new(r"(\d+(?:\.\d+)*)").ok()?;
        let m = re.find(text)?;
        Version::parse(m.as_str())
    }
    pub fn parse(s: &str) -> Option<Version> {
        let parts: Option<Vec<u64>> = s
            .trim()
            .trim_start_matches('v')
            .split('.')
            .map(|p| p.parse().ok())
            .collect();
        parts.filter(|p| !p.is_empty()).map(Version)
    }
    fn cmp_padded(&self, other: &Version) -> Ordering {
        let n = self.0.len().max(other.0.len());
        for i in 0..n {
            let a = self.0.get(i).copied().unwrap_or(0);
            let b = other.0.get(i).copied().unwrap_or(0);
            match a.cmp(&b) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        Ordering::Equal
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s: Vec<String> = self.0.iter().map(|x| x.to_string()).collect();
        f.write_str(&s.join("."))
    }
}

/// Does `v` satisfy every clause of `spec`? Errors name a clause that cannot be read.
pub fn satisfies(v: &Version, spec: &str) -> Result<bool, String> {
    for clause in spec.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let (op, rest) = ["~=", "==", "!=", ">=", "<=", ">", "<", "="]
            .iter()
            .find_map(|op| clause.strip_prefix(op).map(|r| (*op, r)))
            .ok_or_else(|| format!("cannot read version clause `{clause}`"))?;
        let rest = rest.trim();
        let wildcard = rest.ends_with(".*");
        let want = Version::parse(rest.trim_end_matches(".*"))
            .ok_or_else(|| format!("cannot read version clause `{clause}`"))?;
        let ord = v.cmp_padded(&want);
        let ok = match op {
            ">=" => ord != Ordering::Less,
            "<=" => ord != Ordering::Greater,
            ">" => ord == Ordering::Greater,
            "<" => ord == Ordering::Less,
            "==" | "=" if wildcard => {
                v.0.iter().zip(want.0.iter()).all(|(a, b)| a == b) && v.0.len() >= want.0.len()
            }
            "==" | "=" => ord == Ordering::Equal,
            "!=" => ord != Ordering::Equal,
            "~=" => {
                // ~=1.4.2 means >=1.4.2, ==1.4.*
                let prefix = &want.0[..want.0.len().saturating_sub(1).max(1)];
                ord != Ordering::Less && v.0.iter().zip(prefix.iter()).all(|(a, b)| a == b)
            }
            _ => unreachable!(),
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Hold one executable's `--version` answer against its declaration:
/// `probe` runs `<binary> --version` (the caller's: csis-ops caches it) and
/// gives its text (standard output, or standard error when that is
/// empty); `read` finds the version in it. `checker` is the name of the
/// original's checker class when it has its own (`AwsCLIVersionChecker`):
/// its parse failure names it, as the original's does. Returns the version
/// found; errors are the messages `validate` prints.
pub fn check_executable_with(
    exe: &Executable,
    checker: Option<&str>,
    read: &dyn Fn(&str) -> Option<Version>,
    probe: &dyn Fn(&str) -> std::io::Result<String>,
) -> Result<Version, String> {
    let bin = exe.binary();
    let text = probe(bin).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "{}: binary '{bin}' not found (declared in cfg/executables.yml; an absolute path, or a name on PATH)",
                exe.name
            )
        } else {
            format!("{}: could not read its version (`{bin} --version`): {e}", exe.name)
        }
    })?;
    let version = read(&text).ok_or_else(|| match checker {
        Some(c) => format!(
            "{}: {c} could not parse a version from `{bin} --version`",
            exe.name
        ),
        None => format!(
            "{}: could not parse a version from `{bin} --version`",
            exe.name
        ),
    })?;
    if let Some(spec) = &exe.version {
        match satisfies(&version, spec) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "{}: version {version} does not satisfy `{spec}`",
                    exe.name
                ));
            }
            Err(e) => return Err(format!("{}: {e}", exe.name)),
        }
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specifiers() {
        let v = Version::parse("1.14.2").unwrap();
        assert!(satisfies(&v, ">=1.14, <1.15").unwrap());
        assert!(!satisfies(&v, ">=1.15").unwrap());
        assert!(satisfies(&v, "~=1.14.0").unwrap());
        assert!(!satisfies(&v, "~=1.13.0").unwrap());
        assert!(satisfies(&v, "==1.14.*").unwrap());
        assert!(satisfies(&Version::parse("24.0.7").unwrap(), ">=24").unwrap());
        assert!(satisfies(&v, "bogus").is_err());
        assert_eq!(
            Version::find("Packer v1.11.2\n").unwrap().to_string(),
            "1.11.2"
        );
    }
}
