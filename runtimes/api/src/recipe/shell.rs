//! Shell text: the one quoting function ([`sq`]), base64 for files written
//! by a line, scripts of lines, the packer-style `execute_command` and the
//! step runner's, and the python literals step comments show.

/// Quote for POSIX sh: a word of safe characters as is, else single quotes.
pub fn sq(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Always single-quoted (the original's spelling for paths and contents).
pub(super) fn sq_always(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The step runner's command: a step runs through `/run/csis-step` when the
/// settle step wrote it.
pub const STEP_EXECUTE_COMMAND: &str = "chmod +x {{ .Path }}; if [ -r /run/csis-step ]; then {{ .Vars }} sh /run/csis-step {{ .Path }}; else {{ .Vars }} {{ .Path }}; fi";

pub(super) fn py_list(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("'{s}'")).collect();
    format!("[{}]", items.join(", "))
}

pub(super) fn py_map(v: &[(String, String)]) -> String {
    let items: Vec<String> = v.iter().map(|(k, x)| format!("'{k}': '{x}'")).collect();
    format!("{{{}}}", items.join(", "))
}

pub(super) fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// A script of shell lines, as packer writes an `inline` provisioner.
pub fn script_of(lines: &[String]) -> String {
    let mut s = String::from("#!/bin/sh -e\n");
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// Render a packer-style `execute_command` (`{{ .Vars }}`, `{{ .Path }}`).
pub fn execute_command(template: Option<&str>, path: &str, env: &[String]) -> String {
    let vars = env
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => format!("{k}={}", sq(v)),
            None => sq(kv),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let t = template.unwrap_or("chmod +x {{ .Path }}; {{ .Vars }} {{ .Path }}");
    let mut out = t.to_string();
    for (pat, val) in [
        ("{{ .Path }}", path),
        ("{{.Path}}", path),
        ("{{ .Vars }}", vars.as_str()),
        ("{{.Vars}}", vars.as_str()),
    ] {
        out = out.replace(pat, val);
    }
    out.trim().to_string()
}
