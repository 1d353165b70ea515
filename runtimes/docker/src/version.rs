//! `DockerCLIVersionChecker`: `docker --version` against the executable's floor.

use semver::{Version, VersionReq};

/// The floor the system runs with (`version: ">=24"` in `cfg/executables.yml`).
pub const DOCKER_VERSION_FLOOR: &str = ">=24";

/// The version in `docker --version` output (`Docker version 28.2.2, build e6534b4`,
/// `Docker version 20.10.24+dfsg1, build 297e128`, `podman version 5.8.2`).
pub fn parse_docker_version(output: &str) -> Option<Version> {
    let line = output
        .lines()
        .find(|l| l.to_ascii_lowercase().contains("version"))?;
    let after = line.to_ascii_lowercase();
    let idx = after.find("version")? + "version".len();
    let word = line[idx..]
        .trim_start()
        .split(|c: char| c.is_whitespace() || c == ',')
        .next()?;
    lenient(word.trim_start_matches('v'))
}

fn lenient(s: &str) -> Option<Version> {
    // The numeric head, padded to three parts: 24 -> 24.0.0, 28.2.2+dfsg -> 28.2.2.
    let head: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut parts: Vec<u64> = head
        .split('.')
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().ok())
        .collect::<Option<Vec<_>>>()?;
    if parts.is_empty() {
        return None;
    }
    parts.resize(3, 0);
    Some(Version::new(parts[0], parts[1], parts[2]))
}

/// Check `docker --version` output against a requirement (`>=24`). `Err` says why not.
pub fn check_docker_version(output: &str, requirement: &str) -> Result<Version, String> {
    let req = VersionReq::parse(&pep440_to_semver(requirement))
        .map_err(|e| format!("version requirement '{requirement}' is not readable: {e}"))?;
    let v = parse_docker_version(output).ok_or_else(|| {
        format!(
            "cannot read a version from `docker --version`: '{}'",
            output.trim()
        )
    })?;
    if req.matches(&v) {
        Ok(v)
    } else {
        Err(format!(
            "docker {v} does not satisfy the version '{requirement}' declared in cfg/executables.yml"
        ))
    }
}

/// A PEP 440 specifier set (what `cfg/executables.yml` declares) as a semver
/// requirement: `~=` -> `~`, `==` -> `=`, `!=X` dropped (semver has none).
pub fn pep440_to_semver(spec: &str) -> String {
    spec.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.starts_with("!="))
        .map(|p| {
            if let Some(r) = p.strip_prefix("~=") {
                format!("~{}", r.trim())
            } else if let Some(r) = p.strip_prefix("==") {
                format!("={}", r.trim())
            } else {
                p.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Run `<binary> --version` and check it against `requirement`.
pub async fn check_docker_cli(binary: &str, requirement: &str) -> Result<Version, String> {
    let out = csis_runtime::probe::run_async(binary, &["--version"])
        .await
        .map_err(|e| format!("executable '{binary}' cannot run: {e}"))?;
    if !out.success {
        return Err(format!(
            "`{binary} --version` failed: {}",
            out.stderr.trim()
        ));
    }
    check_docker_version(&out.stdout, requirement)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cli_versions() {
        assert_eq!(
            parse_docker_version("Docker version 28.2.2, build e6534b4\n"),
            Some(Version::new(28, 2, 2))
        );
        assert_eq!(
            parse_docker_version("Docker version 20.10.24+dfsg1, build 297e128"),
            Some(Version::new(20, 10, 24))
        );
        assert_eq!(
            parse_docker_version("podman version 5.8.2"),
            Some(Version::new(5, 8, 2))
        );
        assert_eq!(
            parse_docker_version("Docker version 24, build x"),
            Some(Version::new(24, 0, 0))
        );
        assert_eq!(parse_docker_version("nothing here"), None);
    }

    #[test]
    fn pep440_specifiers() {
        assert_eq!(pep440_to_semver(">=24"), ">=24");
        assert_eq!(pep440_to_semver(">=1.14, <1.15"), ">=1.14, <1.15");
        assert_eq!(pep440_to_semver("~=24.0"), "~24.0");
        assert_eq!(pep440_to_semver("==28.*"), "=28.*");
        assert!(
            check_docker_version("Docker version 28.2.2, build x", ">=24, <29, !=25.0").is_ok()
        );
        assert!(check_docker_version("Docker version 29.0.0, build x", ">=24, <29").is_err());
    }

    #[test]
    fn floor_is_24() {
        assert!(
            check_docker_version("Docker version 28.2.2, build e6534b4", DOCKER_VERSION_FLOOR)
                .is_ok()
        );
        assert!(
            check_docker_version("Docker version 24.0.0, build x", DOCKER_VERSION_FLOOR).is_ok()
        );
        let e = check_docker_version(
            "Docker version 20.10.24+dfsg1, build x",
            DOCKER_VERSION_FLOOR,
        )
        .unwrap_err();
        assert!(e.contains("20.10.24") && e.contains(">=24"), "{e}");
        assert!(check_docker_version("garbage", ">=24")
            .unwrap_err()
            .contains("cannot read"));
    }
}
