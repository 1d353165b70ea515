//! `AwsCLIVersionChecker` (registered under `aws-cli`): runs
//! `<binary> --version` and reads the version from the first output line.

use regex::Regex;

/// The checker's regex on the first output line (`aws-cli/2.32.0 Python/...`).
pub const AWS_CLI_VERSION_RE: &str = r"aws-cli\/([\d\.]+)\s";

/// The version in `aws --version` output, or `None` when it does not parse.
pub fn aws_cli_version(output: &str) -> Option<String> {
    let re = Regex::new(AWS_CLI_VERSION_RE).expect("valid regex");
    let first = output.lines().next().unwrap_or("");
    // the regex needs whitespace after the version: the line's own end counts
    let line = format!("{first}\n");
    re.captures(&line).map(|c| c[1].to_string())
}

/// Run `<binary> --version` and read the version; the error texts are the seed's.
pub fn check_aws_cli(binary: &str) -> Result<String, String> {
    let out = match csis_runtime::probe::run(binary, &["--version"]) {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "aws-cli: binary '{binary}' not found (declared in cfg/executables.yml; an absolute path, or a name on PATH)"
            ))
        }
        Err(e) => {
            return Err(format!(
                "aws-cli: could not read its version (`{binary} --version`): {e}"
            ))
        }
    };
    // aws v1 printed its version on stderr
    aws_cli_version(out.text()).ok_or_else(|| {
        format!("aws-cli: AwsCLIVersionChecker could not parse a version from `{binary} --version`")
    })
}
