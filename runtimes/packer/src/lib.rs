//! What every packer image builder of csis shares: HCL helpers and the
//! layout `packer fmt` gives, the lowered bake steps
//! ([`csis_runtime::recipe::lower`]) rendered as provisioners, the
//! `required_plugins` block, and write-if-changed. Each runtime supplies its
//! `source` block, its connection and its [`csis_runtime::recipe::Target`].

use csis_runtime::recipe::{Step, StepKind, STEP_EXECUTE_COMMAND};
use csis_runtime::{Result, RuntimeError};
use hcl::expr::{Expression, Object, ObjectKey, Traversal, Variable};
use hcl::structure::{Attribute, Block, Body};
use hcl::Identifier;

pub mod process;

pub fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub fn key(s: &str) -> ObjectKey {
    if is_ident(s) {
        ObjectKey::Identifier(Identifier::sanitized(s))
    } else {
        ObjectKey::Expression(Expression::String(s.to_string()))
    }
}

pub fn obj(pairs: &[(String, Expression)]) -> Expression {
    let mut o = Object::new();
    for (k, v) in pairs {
        o.insert(key(k), v.clone());
    }
    Expression::Object(o)
}

pub fn s(v: &str) -> Expression {
    Expression::String(v.to_string())
}

pub fn strs(v: &[String]) -> Expression {
    Expression::Array(v.iter().map(|x| s(x)).collect())
}

pub fn attr(k: &str, v: Expression) -> Attribute {
    Attribute::new(Identifier::sanitized(k), v)
}

pub fn traversal(root: &str, attrs: &[&str]) -> Expression {
    let mut b = Traversal::builder(Variable::sanitized(root));
    for a in attrs {
        b = b.attr(Identifier::sanitized(a));
    }
    Expression::from(b.build())
}

/// A string that packer interpolates (`"${local.image_version}"`), kept
/// as a template so hcl-rs does not escape its `${`.
pub fn template(v: &str) -> Expression {
    Expression::TemplateExpr(Box::new(hcl::expr::TemplateExpr::QuotedString(
        v.to_string(),
    )))
}

/// Strings, each one that holds `${` as a template packer interpolates.
fn args_expr(v: &[String]) -> Expression {
    Expression::Array(
        v.iter()
            .map(|x| if x.contains("${") { template(x) } else { s(x) })
            .collect(),
    )
}

/// The description of `variable "base_image_version"`, as the original writes it.
pub const BASE_IMAGE_VERSION_DESCRIPTION: &str = "The version of the base image to build on top of, used for tagging and versioning the image. Read from the BASE_IMAGE_VERSION environment variable at build time; empty when it is not set.";

/// What every ansible step of a packer bake is given: `-e
/// image_version=<BASE_IMAGE_VERSION, "-SNAPSHOT" when not a release>`
/// (the original's `local.image_version`, which csis hands to the playbook).
pub fn image_version_arguments() -> Vec<String> {
    vec!["-e".into(), "image_version=${local.image_version}".into()]
}

/// `variable "release"`: `force_deregister = !var.release`, and the
/// `-SNAPSHOT` of `local.image_version`.
pub fn release_variable() -> Block {
    Block::builder("variable")
        .add_label("release")
        .add_attribute(attr("type", traversal("bool", &[])))
        .add_attribute(attr("default", Expression::Bool(true)))
        .add_attribute(attr(
            "description",
            s("Determines if the build is meant to be immutable"),
        ))
        .build()
}

/// `variable "base_image_version"`, read from `BASE_IMAGE_VERSION` at build
/// time, as the original emits it.
pub fn base_image_version_variable() -> Block {
    Block::builder("variable")
        .add_label("base_image_version")
        .add_attribute(attr("type", traversal("string", &[])))
        .add_attribute(attr(
            "default",
            Expression::from(
                hcl::expr::FuncCall::builder("env")
                    .arg(s("BASE_IMAGE_VERSION"))
                    .build(),
            ),
        ))
        .add_attribute(attr("description", s(BASE_IMAGE_VERSION_DESCRIPTION)))
        .build()
}

/// The original's `-ebs-ansible-setup.pkr.hcl` locals: `snapshot` and
/// `image_version` (read by [`image_version_arguments`]).
pub fn image_version_locals() -> Block {
    Block::builder("locals")
        .add_attribute(attr(
            "snapshot",
            Expression::from(hcl::expr::Conditional::new(
                traversal("var", &["release"]),
                s(""),
                s("-SNAPSHOT"),
            )),
        ))
        .add_attribute(attr(
            "image_version",
            template("${var.base_image_version}${local.snapshot}"),
        ))
        .build()
}

/// How a runtime's provisioners differ.
#[derive(Debug, Clone, Default)]
pub struct ProvisionerOptions {
    /// `only = ["<type>.<image>"]` on every provisioner.
    pub only: Option<String>,
    /// Arguments put before a step's own on every ansible provisioner
    /// (docker: `ansible_connection=docker ansible_host=<container>`).
    pub ansible_arguments: Vec<String>,
    /// Further attributes of every ansible provisioner (docker: `user`, `ansible_env_vars`).
    pub ansible_attributes: Vec<(String, Expression)>,
}

/// The lowered steps as `provisioner` blocks, with the comment of each
/// (empty: none; a step that runs nothing puts its comment before the next).
pub fn provisioners(steps: &[Step], o: &ProvisionerOptions) -> (Vec<Block>, Vec<String>) {
    let mut blocks = Vec::new();
    let mut comments = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let only = o.only.as_ref().map(|x| strs(std::slice::from_ref(x)));
    let start = |kind: &str| {
        let mut b = Block::builder("provisioner").add_label(kind);
        if let Some(on) = &only {
            b = b.add_attribute(attr("only", on.clone()));
        }
        b
    };
    for step in steps {
        let mut comment = std::mem::take(&mut pending);
        if !step.comment.is_empty() {
            comment.push(step.comment.clone());
        }
        let block = match &step.kind {
            StepKind::Note => {
                pending = comment;
                continue;
            }
            StepKind::Shell {
                lines,
                runner,
                env,
                execute_command,
                private,
            } => {
                let mut b = start("shell");
                // lines that hold a secret stay in their private file (its
                // `export` lines carry `env`): the HCL names the file
                if !env.is_empty() && private.is_none() {
                    b = b.add_attribute(attr("environment_vars", strs(env)));
                }
                if let Some(ec) = execute_command
                    .as_deref()
                    .or(runner.then_some(STEP_EXECUTE_COMMAND))
                {
                    b = b.add_attribute(attr("execute_command", s(ec)));
                }
                match private {
                    Some(p) => b.add_attribute(attr("scripts", strs(&[p.display().to_string()]))),
                    None => b.add_attribute(attr("inline", strs(lines))),
                }
                .build()
            }
            StepKind::Scripts {
                scripts,
                runner,
                env,
                execute_command,
            } => {
                let paths: Vec<String> = scripts.iter().map(|(r, _)| r.clone()).collect();
                let mut b = start("shell").add_attribute(attr("scripts", strs(&paths)));
                if !env.is_empty() {
                    b = b.add_attribute(attr("environment_vars", strs(env)));
                }
                if let Some(ec) = execute_command
                    .as_deref()
                    .or(runner.then_some(STEP_EXECUTE_COMMAND))
                {
                    b = b.add_attribute(attr("execute_command", s(ec)));
                }
                b.build()
            }
            StepKind::Ansible {
                playbook,
                extra_arguments,
                binary,
            } => {
                let mut args = o.ansible_arguments.clone();
                args.extend(extra_arguments.iter().cloned());
                let mut b = start("ansible").add_attribute(attr("playbook_file", s(&playbook.0)));
                if !binary.is_empty() && binary != "ansible-playbook" {
                    b = b.add_attribute(attr("command", s(binary)));
                }
                for (k, v) in &o.ansible_attributes {
                    b = b.add_attribute(attr(k, v.clone()));
                }
                b.add_attribute(attr("extra_arguments", args_expr(&args)))
                    .build()
            }
            StepKind::Upload { rel, destination } => start("file")
                .add_attribute(attr("source", s(rel)))
                .add_attribute(attr("destination", s(destination)))
                .build(),
            StepKind::Verify { lines, private, .. } => match private {
                Some(p) => {
                    start("shell").add_attribute(attr("scripts", strs(&[p.display().to_string()])))
                }
                None => start("shell").add_attribute(attr("inline", strs(lines))),
            }
            .build(),
        };
        blocks.push(block);
        comments.push(comment.join("\n# "));
    }
    (blocks, comments)
}

/// One declared packer plugin (`required_plugins`).
pub use csis_runtime::recipe::RequiredPlugin as Plugin;

/// `packer { required_plugins { ... } }` as declared (first of each name).
pub fn plugins_body(plugins: &[Plugin]) -> Body {
    let mut rp = Block::builder("required_plugins");
    let mut seen = std::collections::BTreeSet::new();
    for p in plugins {
        if !seen.insert(p.name.clone()) {
            continue;
        }
        rp = rp.add_attribute(attr(
            &p.name,
            obj(&[
                ("version".into(), s(&p.version)),
                ("source".into(), s(&p.source)),
            ]),
        ));
    }
    Body::builder()
        .add_block(Block::builder("packer").add_block(rp.build()).build())
        .build()
}

/// Serialize a body with hcl-rs, then lay it out like `packer fmt`.
pub fn render(body: &Body, header: &str, comments: &[String]) -> Result<String> {
    let raw =
        hcl::format::to_string(body).map_err(|e| RuntimeError::Failed(format!("hcl: {e}")))?;
    let mut out = String::new();
    if !header.is_empty() {
        out.push_str(&format!("# {header}\n"));
    }
    let mut comments = comments.iter();
    for line in raw.lines() {
        let t = line.trim_start();
        if t.starts_with("provisioner \"") {
            if let Some(c) = comments.next().filter(|c| !c.is_empty()) {
                let indent = &line[..line.len() - t.len()];
                for l in c.split('\n') {
                    let l = l.strip_prefix("# ").unwrap_or(l);
                    out.push_str(&format!("{indent}# {l}\n"));
                }
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(packer_fmt(&out))
}

/// Bracket balance of a line, outside string literals.
fn net_brackets(line: &str) -> i32 {
    let mut n = 0;
    let mut in_str = false;
    let mut esc = false;
    for c in line.chars() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' | '(' => n += 1,
            '}' | ']' | ')' => n -= 1,
            '#' => break,
            _ => {}
        }
    }
    n
}

/// Position of the first `=` outside strings that is an assignment.
fn assign_pos(line: &str) -> Option<usize> {
    let mut in_str = false;
    let mut esc = false;
    let b = line.as_bytes();
    for (i, c) in line.char_indices() {
        if in_str {
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '#' => return None,
            '=' => {
                let next = b.get(i + 1).copied();
                let prev = if i > 0 { b.get(i - 1).copied() } else { None };
                if next != Some(b'=')
                    && !matches!(prev, Some(b'!') | Some(b'<') | Some(b'>') | Some(b'='))
                {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// hclwrite's layout rules that matter here: two-space indentation by
/// bracket depth, and `=` aligned across consecutive lines that each hold a
/// complete single-line attribute (a line opening a multi-line value, a
/// block line or a closing bracket ends the run).
pub fn packer_fmt(text: &str) -> String {
    // 1. re-indent by bracket depth
    let mut lines: Vec<String> = Vec::new();
    let mut depth: i32 = 0;
    for raw in text.lines() {
        let t = raw.trim();
        if t.is_empty() {
            lines.push(String::new());
            continue;
        }
        let closes_first = t.starts_with('}') || t.starts_with(']') || t.starts_with(')');
        let d = if closes_first { depth - 1 } else { depth };
        lines.push(format!("{}{}", "  ".repeat(d.max(0) as usize), t));
        depth += net_brackets(t);
    }
    // 2. align `=` in runs
    let mut out = lines.clone();
    let mut i = 0;
    while i < lines.len() {
        let single = |l: &str| assign_pos(l).filter(|_| net_brackets(l) == 0);
        if single(&lines[i]).is_none() {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && single(&lines[i]).is_some() {
            i += 1;
        }
        let width = lines[start..i]
            .iter()
            .map(|l| l[..assign_pos(l).unwrap()].trim_end().len())
            .max()
            .unwrap_or(0);
        for (j, l) in lines[start..i].iter().enumerate() {
            let p = assign_pos(l).unwrap();
            let lead = l[..p].trim_end();
            let rest = l[p + 1..].trim_start();
            out[start + j] = format!("{lead}{} = {rest}", " ".repeat(width - lead.len()));
        }
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// Write a file unless it already holds exactly this content.
pub fn write_if_changed(path: &std::path::Path, content: &str) -> Result<bool> {
    csis_runtime::recipe::write_if_changed(path, content.as_bytes(), 0o644)
        .map_err(|e| RuntimeError::Failed(format!("cannot write {}: {e}", path.display())))
}
