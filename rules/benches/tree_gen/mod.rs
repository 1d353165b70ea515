//! The generated tree the rules benches share: 20 OS builders, 2 runtimes,
//! `images` images in files of 100 (chains of depth up to 5), one playbook.

use std::fmt::Write as _;
use std::path::Path;

/// Images per file under `images/` (`images/images-NNN.yaml`).
pub const PER_FILE: usize = 100;

/// The text of the `f`-th image file of a tree of `images` images; `v`
/// replaces the config value of image `edit` (a one-image edit).
pub fn image_file(f: usize, images: usize, edit: Option<(usize, &str)>) -> String {
    let mut s = String::from("images:\n");
    for j in 0..PER_FILE {
        let i = f * PER_FILE + j;
        if i >= images {
            break;
        }
        // chains of depth up to 5; the rest start at an OS builder
        let src = if i.is_multiple_of(5) {
            format!("os-{}", i % 20)
        } else {
            format!("img-{}", i - 1)
        };
        let desc = if i.is_multiple_of(10) {
            "\n    description: \"image {{ this.name }} for {{ ENV['USER'] }}\""
        } else {
            ""
        };
        let v = match edit {
            Some((e, v)) if e == i => v.to_string(),
            _ => i.to_string(),
        };
        write!(
            s,
            "  - name: img-{i}\n    source_image: {src}{desc}\n    parent_policy: follow\n    tags: {{team: t{}}}\n    runtimes:\n      - image_builder: b1\n      - image_builder: b2\n        machine_type: large\n    modifications:\n      - name: m\n        playbooks: [playbooks/p.yml]\n        config: {{v: \"{v}\"}}\n      - name: s\n        type: bash\n        script: [\"echo {i}\"]\n    tests:\n      packages: [curl]\n      commands:\n        - run: \"true\"\n",
            i % 7
        )
        .unwrap();
    }
    s
}

/// The path of the `f`-th image file.
pub fn image_path(root: &Path, f: usize) -> std::path::PathBuf {
    root.join("images").join(format!("images-{f:03}.yaml"))
}

pub fn generate(root: &Path, images: usize) {
    let cfg = root.join("cfg");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::create_dir_all(root.join("playbooks")).unwrap();
    std::fs::write(root.join("playbooks/p.yml"), "- hosts: all\n").unwrap();
    std::fs::write(
        cfg.join("_config.yml"),
        "id: bench\nconfig:\n  admin_public_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample bench']\n",
    )
    .unwrap();
    std::fs::write(
        cfg.join("runtimes.yml"),
        "runtime_builders:\n  - {name: sim, type: dummy, is_default: true, default_machine_type: small}\n  - {name: sim2, type: dummy, default_machine_type: small}\n\
         image_builders:\n  - {name: b1, type: dummy, runtime: sim, is_default: true}\n  - {name: b2, type: dummy, runtime: sim2}\n\
         mod_builders:\n  - {name: ansible, type: ansible, is_default: true}\n  - {name: bash, type: bash-remote}\n\
         state_backends:\n  - {name: local, type: local, is_default: true}\n",
    )
    .unwrap();
    let mut os = String::from("os_builders:\n");
    for i in 0..20 {
        writeln!(
            os,
            "  - name: os-{i}\n    type: debian\n    family: debian\n    family_version: 12\n    tags: {{OS: \"{{{{ this.family }}}}\"}}\n    runtimes:\n      - image_builder: b1\n      - image_builder: b2"
        )
        .unwrap();
    }
    std::fs::write(cfg.join("os.yml"), os).unwrap();
    for f in 0..images.div_ceil(PER_FILE) {
        std::fs::write(image_path(root, f), image_file(f, images, None)).unwrap();
    }
}
