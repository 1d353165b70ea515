//! `csis mask` prints the CI mask lines of the decrypted values.

use super::{encrypt_keys, identity, text, tree, with_stdin, KEY, KEY2};

#[test]
fn mask_prints_an_add_mask_line_per_value() {
    let a = identity();
    let dir = tree(&[&a]);
    assert_eq!(encrypt_keys(&dir).status.code(), Some(0));
    let mut c = dir.csis();
    c.args(["encrypt", "-"]);
    let short = text(&with_stdin(c, "abc").stdout).trim().to_string();
    let mut c = dir.csis();
    c.args(["encrypt", "-"]);
    let multi = text(&with_stdin(c, "first-line-secret\nsecond-line-50%").stdout)
        .trim()
        .to_string();
    std::fs::write(
        dir.path().join("cfg/zz-more.yml"),
        format!("config:\n  m1: {short}\n  m2: {multi}\n  m3: {short}\n"),
    )
    .unwrap();

    let out = dir
        .csis()
        .arg("mask")
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    lines.sort();
    let mut want = vec![
        "::add-mask::first-line-secret".to_string(),
        format!("::add-mask::{KEY}"),
        format!("::add-mask::{KEY2}"),
        "::add-mask::second-line-50%25".to_string(),
    ];
    want.sort();
    assert_eq!(lines, want);
    assert!(
        text(&out.stderr).contains("1 shorter than 8 not masked"),
        "{}",
        text(&out.stderr)
    );

    let out = dir
        .csis()
        .args(["mask", "--min", "2", "--json"])
        .env("CSIS_CONFIG_IDENTITY", &a.secret)
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["markers"], 5);
    assert_eq!(j["values"].as_array().unwrap().len(), 5);
    assert!(j["values"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("abc")));

    // no identity: an error, not an empty mask
    let out = dir.csis().arg("mask").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
}
