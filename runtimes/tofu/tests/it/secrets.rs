//! Secrets never in clear: a sealed member or login is written by reference
//! (`local.sensitive[...]`, its ciphertext in the root's `data "external"
//! "sensitive"` query, opened at plan time by `csis decrypt --json`); a
//! registered plaintext anywhere in a root refuses the whole emission
//! before any file is written; the Okta credentials are variables.
//! Its own test binary: it registers secrets for the process.

use crate::common;

use csis_tofu::*;

const MARKER: &str = "ENC[age:YWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSBzZWFsZWQ=]";

fn sealed(key: &str, as_key: bool) -> Hv {
    Hv::Sealed {
        key: key.into(),
        marker: MARKER.into(),
        as_key,
    }
}

fn all_text(dir: &std::path::Path) -> String {
    common::files_under(dir)
        .iter()
        .map(|f| std::fs::read_to_string(dir.join(f)).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn sealed_members_and_logins_are_written_by_reference() {
    let plain = "casey.charlie.sealed-member";
    csis_schema::secret::register(plain, &csis_schema::secret::default_key());
    let mut input = common::standard_aws();
    input.roots[0] = common::groups_root(
        Hv::List(vec![sealed("member_team_0", true)]),
        Hv::List(vec![Hv::s("avery.alpha")]),
    );
    input.roots[1] = common::users_root(vec![(
        "casey.charlie",
        sealed("email_casey_charlie", false),
    )]);
    let work = tempfile::tempdir().unwrap();
    let generated = work.path().join("generated");
    emit(&input, work.path(), &generated).unwrap();
    let groups = generated.join("identity/opa-groups/group-generation");
    let call =
        std::fs::read_to_string(groups.join("opa-groups-group-generation-group-team.tf")).unwrap();
    assert!(
        call.contains(
            r#"members                   = [nonsensitive(local.sensitive["member_team_0"])]"#
        ),
        "{call}"
    );
    let main = std::fs::read_to_string(groups.join("opa-groups-group-generation.tf")).unwrap();
    assert!(main.contains("data \"external\" \"sensitive\""), "{main}");
    assert!(
        main.contains(&format!("member_team_0 = \"{MARKER}\",")),
        "{main}"
    );
    assert!(main.contains("        \"csis\",\n        \"decrypt\",\n        \"--json\",\n"));
    let users = generated.join("identity/okta-users/user-generation");
    let data =
        std::fs::read_to_string(users.join("okta-users-user-generation-users-data.tf")).unwrap();
    assert!(
        data.contains(r#"value = local.sensitive["email_casey_charlie"]"#),
        "{data}"
    );
    let umain = std::fs::read_to_string(users.join("okta-users-user-generation.tf")).unwrap();
    assert!(
        umain.contains("external = {\n            source = \"hashicorp/external\""),
        "{umain}"
    );
    for dir in [&groups, &users] {
        for f in common::files_under(dir) {
            if f.extension().is_some_and(|x| x == "tf") {
                let text = std::fs::read_to_string(dir.join(&f)).unwrap();
                hcl::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            }
        }
    }
    assert!(!all_text(&generated).contains(plain));
}

#[test]
fn a_plaintext_secret_in_any_value_refuses_the_emission_before_any_write() {
    let plain = "s3cr3t-okta-api-key-value";
    csis_schema::secret::register(plain, &csis_schema::secret::default_key());
    let mut input = common::standard_aws();
    // a mapping that would pass a decrypted key in clear
    if let Some(p) = input.roots[0].providers.first_mut() {
        p.args[0].1 = Hv::s(plain);
    }
    let work = tempfile::tempdir().unwrap();
    let generated = work.path().join("generated");
    let err = emit(&input, work.path(), &generated)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("opa-groups") && err.contains("secret in clear"),
        "{err}"
    );
    assert!(!err.contains(plain));
    assert!(!generated.exists(), "nothing written");
}

#[test]
fn okta_credentials_are_sensitive_variables_filled_from_the_environment() {
    let input = common::standard_aws();
    let work = tempfile::tempdir().unwrap();
    let generated = work.path().join("generated");
    emit(&input, work.path(), &generated).unwrap();
    let dir = generated.join("identity/opa-groups/group-generation");
    let vars = std::fs::read_to_string(dir.join("opa-groups-group-generation-opa-groups-vars.tf"))
        .unwrap();
    assert_eq!(vars.matches("sensitive = true").count(), 2);
    let main = std::fs::read_to_string(dir.join("opa-groups-group-generation.tf")).unwrap();
    assert!(main.contains("oktapam_key = var.replace_me_team_key\n"));
    let outputs =
        std::fs::read_to_string(dir.join("opa-groups-group-generation-outputs.tf")).unwrap();
    let tokens = outputs
        .split("output \"group_enrollment_tokens\"")
        .nth(1)
        .unwrap();
    assert!(tokens.contains("sensitive = true"));
}
