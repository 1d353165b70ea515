//! The files emission writes: unchanged ones are not rewritten, their layout
//! is packer fmt's, and Debian's packer validates the root.

use std::path::Path;

use csis_runtime::{BakeStep, Ensure, Runtime, TestCommand};
use csis_runtime_aws::AwsRuntime;

use crate::emission::{request, source_file, standard_aws, tags, vendor};

/// Copy a directory the emitter wrote (the local modification bundle).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let t = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

#[tokio::test]
async fn unchanged_files_are_not_rewritten_and_the_layout_is_packer_fmt() {
    let d = tempfile::tempdir().unwrap();
    let rt = AwsRuntime::new(standard_aws());
    let req = request(
        "web",
        "aws-main",
        "web-1",
        vendor("ami-1", "amazon", "rhel", None),
        tags(&[("csis_series", "web"), ("Project", "x")]),
        d.path(),
    );
    let files = rt.emit(&req).await.unwrap();
    let before: Vec<_> = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().modified().unwrap())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let files2 = rt.emit(&req).await.unwrap();
    let after: Vec<_> = files2
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().modified().unwrap())
        .collect();
    assert_eq!(before, after);
    let src = source_file(d.path(), "web");
    // hclwrite's runs: `tags = {` ends the first run and starts none
    assert!(
        src.contains("\n  source_ami    = data.amazon-ami.web_aws-main.id\n"),
        "{src}"
    );
    assert!(
        src.contains("\n  associate_public_ip_address = false\n"),
        "{src}"
    );
    assert!(src.contains("    Project     = \"x\"\n"), "{src}");
    // Debian's packer (1.6.6) formats HCL2 when installed: our layout is already its layout
    if let Ok(o) = std::process::Command::new("packer").arg("version").output() {
        if o.status.success() {
            // packer 1.6.6's hclwrite writes a unary `!` with a space (`! var.release`);
            // newer packer writes `!var.release`, as we do: compare on that spelling
            let tmp = tempfile::tempdir().unwrap();
            for f in &files {
                let copy = tmp.path().join(f.file_name().unwrap());
                let text = std::fs::read_to_string(f)
                    .unwrap()
                    .replace("= !var.release", "= ! var.release");
                std::fs::write(&copy, text).unwrap();
                let out = std::process::Command::new("packer")
                    .args(["fmt", "-check", "-diff"])
                    .arg(&copy)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "packer fmt -check {}: {}",
                    f.display(),
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        } else {
            crate::common::loud("*** packer not usable here: fmt check skipped ***");
        }
    } else {
        crate::common::loud("*** packer not installed: fmt check skipped ***");
    }
}

/// Debian's packer 1.6.6 validates a root once the parts it predates are
/// taken out of a copy: the `packer { required_plugins }` file and the
/// `data "amazon-ami"` block (both arrived in packer 1.7; the copy gets a
/// literal `source_ami`), and its gp3 check wants an explicit throughput.
#[tokio::test]
async fn debian_packer_validates_the_root() {
    let ok = std::process::Command::new("packer")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        crate::common::loud("*** SKIPPED: no packer here (apt-get install packer) ***");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let tree = d.path().join("tree");
    std::fs::create_dir_all(tree.join("scripts")).unwrap();
    std::fs::create_dir_all(tree.join("playbooks")).unwrap();
    std::fs::write(tree.join("scripts/a.sh"), "#!/bin/sh\necho a\n").unwrap();
    std::fs::write(
        tree.join("playbooks/site.yml"),
        "- hosts: all\n  tasks: []\n",
    )
    .unwrap();
    let root = d.path().join("root");
    let rt = AwsRuntime::new(standard_aws());
    let mut req = request(
        "web",
        "aws-main",
        "web-1",
        vendor("ami-1", "amazon", "rhel", None),
        tags(&[("csis_series", "web")]),
        &root,
    );
    req.steps = vec![
        BakeStep::Shell {
            name: "s".into(),
            inline: vec!["echo ${HOME}".into()],
            scripts: vec![tree.join("scripts/a.sh")],
            ensure: Some(Ensure {
                packages: vec!["git".into()],
                ..Default::default()
            }),
            env: vec!["A=1".into()],
            execute_command: Some("sudo -E sh '{{ .Path }}'".into()),
        },
        BakeStep::Ansible {
            name: "site".into(),
            playbooks: vec![tree.join("playbooks/site.yml")],
            extra_arguments: vec!["-e".into(), "x=1".into()],
            binary: "ansible-playbook".into(),
            extra_vars: Default::default(),
        },
    ];
    req.tests = vec![TestCommand {
        description: "git".into(),
        run: "git --version".into(),
        expect_rc: 0,
        contains: Some("git version".into()),
    }];
    rt.emit(&req).await.unwrap();
    let check = d.path().join("check");
    std::fs::create_dir_all(&check).unwrap();
    for f in std::fs::read_dir(&root).unwrap() {
        let f = f.unwrap().path();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name == "plugins.pkr.hcl" {
            continue;
        }
        if f.is_dir() {
            copy_tree(&f, &check.join(&name));
            continue;
        }
        let mut text = std::fs::read_to_string(&f).unwrap();
        if let Some(start) = text.find("data \"amazon-ami\"") {
            let end = start + text[start..].find("\n}\n").unwrap() + 3;
            text.replace_range(start..end, "");
            text = text.replace(
                "data.amazon-ami.web_aws-main.id",
                "\"ami-0123456789abcdef0\"",
            );
            text = text.replace(
                "volume_type           = \"gp3\"",
                "volume_type = \"gp3\"\n    throughput = 125\n    iops = 3000",
            );
        }
        std::fs::write(check.join(&name), text).unwrap();
    }
    let out = std::process::Command::new("packer")
        .arg("validate")
        .arg(".")
        .current_dir(&check)
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "packer validate: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
