//! "a first install compiles nothing it does not need": the docker-only
//! build of the quick start (`--no-default-features --features docker`)
//! resolves no AWS SDK crate and no `aws-lc-sys` (TLS is rustls on ring,
//! which bollard already builds; aws-lc-sys is half a minute of C on two
//! cores), and neither the shared store's client nor the Okta PAM one
//! (`object_store`, `reqwest`: the `store` and `opa` features, about a
//! minute of compile).

/// The crates of `cargo tree --prefix none` output (one `name vX` per line)
/// that a docker-only build must not compile.
pub fn heavy_crates(tree: &str) -> Vec<String> {
    let mut out: Vec<String> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| {
            [
                "aws-lc-sys",
                "aws-lc-rs",
                "object_store",
                "reqwest",
                "csis-opa",
            ]
            .contains(name)
                || super::is_aws_sdk(name)
        })
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `cargo tree` of the docker-only build of the `csis` package (normal and
/// build dependencies, as the install compiles them).
pub fn docker_only_tree() -> String {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "--locked",
            "-p",
            "csis",
            "--no-default-features",
            "--features",
            "docker",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .current_dir(super::workspace())
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("cargo tree speaks UTF-8")
}

#[test]
fn a_docker_only_install_builds_no_aws_sdk_no_aws_lc_and_no_store_client() {
    let tree = docker_only_tree();
    assert!(
        tree.contains("bollard"),
        "the docker runtime is in the tree:\n{tree}"
    );
    let v = heavy_crates(&tree);
    assert!(v.is_empty(), "a docker-only build compiles {v:?}");
}

#[test]
fn the_install_rule_fails_on_aws_lc_or_an_sdk_crate() {
    let tree = "csis v0.1.0 (/w)\nbollard v0.21.1\naws-lc-sys v0.47.0\naws-config v1.13.0\nring v0.17.14\naws-lc-sys v0.47.0 (*)\nobject_store v0.14.2\nreqwest v0.13.1\n";
    assert_eq!(
        heavy_crates(tree),
        ["aws-config", "aws-lc-sys", "object_store", "reqwest"]
    );
    assert!(heavy_crates("csis v0.1.0\nring v0.17.14\n").is_empty());
}
