//! A secret in a step's lines (an inline `script:` line, an `ensure:`
//! file's content, a mod builder's `environment_vars`, an in-bake test)
//! never lands in the packer root: `build-*.pkr.hcl` names a 0600 file
//! under the tree's `.csis/bake-vars/` (`scripts = [...]`) instead, and
//! the bundle's inline.sh of that mod is uploaded from there.

use csis_runtime::{BakeParent, BakeStep, Ensure, EnsureFile, Runtime, TestCommand};
use csis_runtime_aws::AwsRuntime;

use crate::emission::{request, standard_aws, tags};

#[tokio::test]
async fn a_secret_line_is_named_by_its_private_file_never_written_in_the_root() {
    let key = csis_schema::secret::default_key();
    let line = "echo aws-secret-inline-line-6a0d";
    let content = "aws-secret-ensure-content-1f3b";
    let env = "TOKEN=aws-secret-env-c8e2";
    let test = "grep -q aws-secret-test-cmd-77d4 /etc/x";
    for s in [line, content, env, test] {
        csis_schema::secret::register(s, &key).unwrap();
    }
    let d = tempfile::tempdir().unwrap();
    let rt = AwsRuntime::new(standard_aws());
    let mut req = request(
        "web",
        "aws-main",
        "web-1",
        BakeParent::Build {
            series: "base".into(),
            build_id: "ami-0base00000000000a".into(),
        },
        tags(&[("csis_series", "web")]),
        &d.path().join("generated"),
    );
    req.tree_root = d.path().to_path_buf();
    req.recipe = csis_runtime::recipe::Recipe {
        base: None,
        image: Some(csis_runtime::recipe::ImageRecipe {
            group: None,
            bundle: Vec::new(),
        }),
    };
    req.steps = vec![BakeStep::Shell {
        name: "secret".into(),
        inline: vec![line.into()],
        scripts: vec![],
        ensure: Some(Ensure {
            files: vec![EnsureFile {
                path: "/etc/secret".into(),
                content: content.into(),
                mode: "0600".into(),
            }],
            ..Default::default()
        }),
        env: vec![env.into()],
        execute_command: None,
    }];
    req.tests = vec![TestCommand {
        description: format!("command `{test}`"),
        run: test.into(),
        expect_rc: 0,
        contains: None,
    }];
    rt.emit(&req).await.unwrap();
    let b64 = "YXdzLXNlY3JldC1lbnN1cmUtY29udGVudC0xZjNi";
    let private = d.path().join(".csis/bake-vars");
    let mut walk = vec![d.path().join("generated")];
    let mut seen = 0;
    while let Some(dir) = walk.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk.push(p);
                continue;
            }
            seen += 1;
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            for s in [line, content, env, test, b64, "aws-secret-env-c8e2"] {
                assert!(!text.contains(s), "{} holds {s}:\n{text}", p.display());
            }
        }
    }
    assert!(seen > 0, "the root was written");
    let hcl = std::fs::read_to_string(d.path().join("generated/build-web.pkr.hcl")).unwrap();
    // the mod and the verification run from their private files, the
    // bundle's inline.sh is uploaded from there
    let named = hcl.matches(&private.display().to_string()).count();
    assert_eq!(named, 3, "{hcl}");
    assert!(
        hcl.contains("chmod 0600 /opt/csis/mods/01-secret/inline.sh"),
        "{hcl}"
    );
    assert!(!hcl.contains("environment_vars"), "{hcl}");
}

/// A secret in the `environment_vars` of a mod that runs script files:
/// packer would write them beside `scripts`; the step runs from its
/// private file instead (the env as `export` lines, then each script).
#[tokio::test]
async fn a_secret_env_of_script_files_is_never_written_in_the_root() {
    let key = csis_schema::secret::default_key();
    let env = "API_KEY=aws-secret-scripts-env-4b9c";
    csis_schema::secret::register(env, &key).unwrap();
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("scripts")).unwrap();
    let script = d.path().join("scripts/setup.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"$API_KEY\" > /etc/app.key\n").unwrap();
    let rt = AwsRuntime::new(standard_aws());
    let mut req = request(
        "web",
        "aws-main",
        "web-1",
        BakeParent::Build {
            series: "base".into(),
            build_id: "ami-0base00000000000a".into(),
        },
        tags(&[("csis_series", "web")]),
        &d.path().join("generated"),
    );
    req.tree_root = d.path().to_path_buf();
    req.recipe = csis_runtime::recipe::Recipe {
        base: None,
        image: Some(csis_runtime::recipe::ImageRecipe {
            group: None,
            bundle: Vec::new(),
        }),
    };
    req.steps = vec![BakeStep::Shell {
        name: "scripted".into(),
        inline: vec![],
        scripts: vec![script],
        ensure: None,
        env: vec![env.into()],
        execute_command: None,
    }];
    req.tests = vec![];
    rt.emit(&req).await.unwrap();
    let hcl = std::fs::read_to_string(d.path().join("generated/build-web.pkr.hcl")).unwrap();
    assert!(!hcl.contains("aws-secret-scripts-env-4b9c"), "{hcl}");
    assert!(!hcl.contains("environment_vars"), "{hcl}");
    let private = d
        .path()
        .join(".csis/bake-vars/images_web_aws-main/step-02.sh");
    assert!(hcl.contains(&private.display().to_string()), "{hcl}");
    let text = std::fs::read_to_string(&private).unwrap();
    assert!(
        text.contains("export API_KEY=aws-secret-scripts-env-4b9c\n"),
        "{text}"
    );
    // the script itself still runs, by its own #!, from the private file
    let b64 = "IyEvYmluL3NoCmVjaG8gIiRBUElfS0VZIiA+IC9ldGMvYXBwLmtleQo=";
    assert!(text.contains(b64), "{text}");
}

/// A secret in an ansible mod builder's `extra_arguments` (an `-e`
/// value, key=value words or JSON) reaches ansible as a 0600 vars file
/// (`-e @<file>`); the HCL names the file, never the value.
#[tokio::test]
async fn a_secret_extra_vars_argument_goes_to_a_private_vars_file() {
    let key = csis_schema::secret::default_key();
    let kv = "aws-secret-kv-value-2e7f";
    let json = "aws-secret-json-value-8c1a";
    for s in [kv, json] {
        csis_schema::secret::register(s, &key).unwrap();
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("playbooks")).unwrap();
    let pb = d.path().join("playbooks/site.yml");
    std::fs::write(&pb, "- hosts: all\n  tasks: []\n").unwrap();
    let rt = AwsRuntime::new(standard_aws());
    let mut req = request(
        "web",
        "aws-main",
        "web-1",
        BakeParent::Build {
            series: "base".into(),
            build_id: "ami-0base00000000000a".into(),
        },
        tags(&[("csis_series", "web")]),
        &d.path().join("generated"),
    );
    req.tree_root = d.path().to_path_buf();
    req.recipe = csis_runtime::recipe::Recipe {
        base: None,
        image: Some(csis_runtime::recipe::ImageRecipe {
            group: None,
            bundle: Vec::new(),
        }),
    };
    req.steps = vec![BakeStep::Ansible {
        name: "app".into(),
        playbooks: vec![pb],
        extra_arguments: vec![
            "-e".into(),
            format!("db_password={kv} msg='a b'"),
            format!("--extra-vars={{\"api\": \"{json}\"}}"),
            "-v".into(),
        ],
        binary: "ansible-playbook".into(),
        extra_vars: Default::default(),
    }];
    req.tests = vec![];
    rt.emit(&req).await.unwrap();
    let hcl = std::fs::read_to_string(d.path().join("generated/build-web.pkr.hcl")).unwrap();
    for s in [kv, json] {
        assert!(!hcl.contains(s), "{hcl}");
    }
    assert!(hcl.contains("\"-v\""), "{hcl}");
    let dir = d.path().join(".csis/bake-vars/images_web_aws-main");
    let one = dir.join("app-extra-vars-1.json");
    let two = dir.join("app-extra-vars-2.json");
    for p in [&one, &two] {
        assert!(hcl.contains(&format!("@{}", p.display())), "{hcl}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let vars: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&one).unwrap()).unwrap();
    assert_eq!(vars, serde_json::json!({"db_password": kv, "msg": "a b"}));
    assert!(std::fs::read_to_string(&two).unwrap().contains(json));
}
