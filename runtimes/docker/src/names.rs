//! Names on a docker daemon: tags, repositories, label keys, movable tags,
//! release tags and bake container names. Pure functions, no daemon; the
//! offline check of a series baked on a docker runtime
//! ([`series_problems`]).
//!
//! Grammar (docker/distribution `reference`): a tag is `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`;
//! a repository path component is `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`, components
//! joined by `/`, optionally after a registry domain (`host[:port]/`).

use csis_schema::{MadeSeries, Problem};

/// The longest tag the daemon accepts.
pub const TAG_MAX: usize = 128;

/// Separator inside movable and release tags.
pub const SEP: &str = "--";

fn is_tag_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-'
}

/// A build's final name written as a tag: every character a tag cannot carry
/// becomes `-`; a leading `.` or `-` (a tag must start with a word character)
/// becomes `_`. Not cut: [`image_name_problem`] refuses a name too long.
pub fn image_name_as_made(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if is_tag_char(c) { c } else { '-' })
        .collect();
    if out.is_empty() {
        return "_".to_string();
    }
    if out.starts_with(['.', '-']) {
        out.replace_range(0..1, "_");
    }
    out
}

/// Why a final name cannot be a tag once made (`None` when it can).
pub fn image_name_problem(name: &str) -> Option<String> {
    let made = image_name_as_made(name);
    if made.len() > TAG_MAX {
        return Some(format!(
            "a docker tag is at most {TAG_MAX} characters: '{made}' is {} once made",
            made.len()
        ));
    }
    None
}

/// The offline problems of a series baked on a docker runtime, as the load
/// reports them: a made name longer than a tag, tag keys no label carries.
pub fn series_problems(series: &MadeSeries) -> Vec<Problem> {
    let mut out = Vec::new();
    let made = &series.made_name;
    if image_name_problem(made).is_some() {
        out.push(
            Problem::error(
                "name",
                format!(
                    "a docker tag is at most {TAG_MAX} characters: `{}...` is {} once made",
                    &made[..40],
                    made.len()
                ),
            )
            .with_hint(format!("shorten the {} name", series.class)),
        );
    }
    for k in &series.tag_keys {
        if let Some(p) = label_key_refusal(k) {
            out.push(p);
        }
    }
    out
}

/// A tag key that no label can carry (see [`label_key_problem`]), as a
/// problem of `tags.<key>`.
pub fn label_key_refusal(key: &str) -> Option<Problem> {
    label_key_problem(key)?;
    Some(
        Problem::error(
            format!("tags.{key}"),
            format!("docker label key `{key}` carries whitespace or `=`"),
        )
        .with_hint("a label key carries neither whitespace nor `=`")
        .pointing_at("tags"),
    )
}

/// Is `tag` a valid docker tag as it stands?
pub fn is_valid_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= TAG_MAX
        && tag.chars().all(is_tag_char)
        && !tag.starts_with(['.', '-'])
}

/// Why a label key cannot be carried (`None` when it can): no whitespace, no `=`.
pub fn label_key_problem(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some("a docker label key cannot be empty".to_string());
    }
    if key.chars().any(char::is_whitespace) {
        return Some(format!(
            "docker label key '{key}' contains whitespace, which a label key cannot carry"
        ));
    }
    if key.contains('=') {
        return Some(format!(
            "docker label key '{key}' contains '=', which a label key cannot carry"
        ));
    }
    None
}

fn valid_path_component(c: &str) -> bool {
    // [a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*
    if c.is_empty() {
        return false;
    }
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // a separator run
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

fn valid_domain(d: &str) -> bool {
    let (host, port) = match d.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (d, None),
    };
    if let Some(p) = port {
        if p.is_empty() || !p.bytes().all(|x| x.is_ascii_digit()) {
            return false;
        }
    }
    !host.is_empty()
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.bytes().all(|x| x.is_ascii_alphanumeric() || x == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// The repository a runtime's builds are tagged in: the declared one, or
/// `csis/<runtime name>`, lower-cased and with characters a repository cannot
/// carry replaced by `-`. `Err` says why it still is not a repository name.
pub fn repository_name(runtime: &str, declared: Option<&str>) -> Result<String, String> {
    let raw = match declared {
        Some(r) if !r.trim().is_empty() => r.trim().to_string(),
        _ => format!("csis/{runtime}"),
    };
    // A registry domain (first component with '.' or ':' or 'localhost') keeps its case rules.
    let mut parts: Vec<String> = raw.split('/').map(str::to_string).collect();
    let has_domain = parts.len() > 1
        && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost");
    let first_path = usize::from(has_domain);
    for (i, p) in parts.iter_mut().enumerate() {
        if i < first_path {
            continue;
        }
        *p = p
            .to_lowercase()
            .chars()
            .map(|c| {
                if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
    }
    let made = parts.join("/");
    if has_domain && !valid_domain(&parts[0]) {
        return Err(format!(
            "repository '{raw}': '{}' is not a valid registry address",
            parts[0]
        ));
    }
    if let Some(bad) = parts[first_path..]
        .iter()
        .find(|p| !valid_path_component(p))
    {
        return Err(format!(
            "repository '{raw}' is not a valid docker repository name (component '{bad}' made from it is not [a-z0-9] words joined by '.', '_', '__' or '-')"
        ));
    }
    if made.len() > 255 {
        return Err(format!("repository '{raw}' is longer than 255 characters"));
    }
    Ok(made)
}

/// The short id of an image id (`sha256:<hex>` or bare hex): 12 hex characters.
pub fn short_id(image_id: &str) -> String {
    let hex = image_id.strip_prefix("sha256:").unwrap_or(image_id);
    hex.chars().take(12).collect()
}

fn is_lower_hex(c: char) -> bool {
    c.is_ascii_digit() || ('a'..='f').contains(&c)
}

/// Escape a value into tag characters, reversibly ([`unescape`]).
///
/// Kept: `[A-Za-z0-9.]`, `-` (unless `key` is set: a key never carries `-`, so
/// `--` separates unambiguously), and `_` when the next two characters are not
/// both lower-case hex digits. Everything else is `_` + two lower-case hex
/// digits per UTF-8 byte (`:` -> `_3a`, `/` -> `_2f`, `_` before hex -> `_5f`).
fn escape(s: &str, key: bool) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        let keep = c.is_ascii_alphanumeric()
            || c == '.'
            || (c == '-' && !key)
            || (c == '_'
                && !(chars.get(i + 1).is_some_and(|&n| is_lower_hex(n))
                    && chars.get(i + 2).is_some_and(|&n| is_lower_hex(n))));
        if keep {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("_{b:02x}"));
            }
        }
    }
    out
}

/// The inverse of the escape used in movable tags.
pub fn unescape(s: &str) -> Option<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut bytes = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '_'
            && chars.get(i + 1).is_some_and(|&n| is_lower_hex(n))
            && chars.get(i + 2).is_some_and(|&n| is_lower_hex(n))
        {
            let h: String = chars[i + 1..i + 3].iter().collect();
            bytes.push(u8::from_str_radix(&h, 16).ok()?);
            i += 3;
        } else {
            let mut buf = [0u8; 4];
            bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            i += 1;
        }
    }
    String::from_utf8(bytes).ok()
}

/// The movable tag (without repository) that carries `key = value` for the
/// image with `image_id`: `<short id>--<key>--<value>`, key and value escaped.
/// `Err` when it would exceed [`TAG_MAX`].
pub fn movable_tag(image_id: &str, key: &str, value: &str) -> Result<String, String> {
    let tag = format!(
        "{}{SEP}{}{SEP}{}",
        short_id(image_id),
        escape(key, true),
        escape(value, false)
    );
    if tag.len() > TAG_MAX {
        return Err(format!(
            "a docker tag is at most {TAG_MAX} characters: the movable tag for {key}='{value}' would be {}",
            tag.len()
        ));
    }
    Ok(tag)
}

/// A movable tag read back: (short id, key, value).
pub fn parse_movable_tag(tag: &str) -> Option<(String, String, String)> {
    let (short, rest) = tag.split_once(SEP)?;
    if short.len() != 12 || !short.chars().all(is_lower_hex) {
        return None;
    }
    let (key, value) = rest.split_once(SEP)?;
    if key.is_empty() || key.contains('-') {
        return None;
    }
    Some((short.to_string(), unescape(key)?, unescape(value)?))
}

/// The release tag (without repository): `<series>--<model>`, each made a tag.
pub fn release_tag(series: &str, model: &str) -> String {
    let made = |s: &str| -> String {
        s.chars()
            .map(|c| if is_tag_char(c) { c } else { '-' })
            .collect()
    };
    image_name_as_made(&format!("{}{SEP}{}", made(series), made(model)))
}

/// `RepoTags` entries as the daemon wrote them, normalised: Podman spells
/// `docker.io/<repository>:<tag>` (and `docker.io/library/<name>`) what Docker
/// spells `<repository>:<tag>`. Podman also names local images `localhost/<repository>`.
pub fn normalize_repo_tag(repo_tag: &str) -> &str {
    let s = repo_tag
        .strip_prefix("docker.io/")
        .or_else(|| repo_tag.strip_prefix("localhost/"))
        .unwrap_or(repo_tag);
    s.strip_prefix("library/").unwrap_or(s)
}

/// Split `repo:tag` (a registry port is not a tag).
pub fn split_repo_tag(repo_tag: &str) -> Option<(&str, &str)> {
    let (repo, tag) = repo_tag.rsplit_once(':')?;
    if tag.contains('/') {
        return None;
    }
    Some((repo, tag))
}

/// The tag of `repo_tag` when it is in `repository` (with or without `docker.io/`).
pub fn tag_in_repository<'a>(repo_tag: &'a str, repository: &str) -> Option<&'a str> {
    let (repo, tag) = split_repo_tag(repo_tag)?;
    (normalize_repo_tag(repo) == normalize_repo_tag(repository)).then_some(tag)
}

/// The bake container's name: `csis-bake-<runtime>-<image>-<run id>`
/// (without a run id, `csis-bake-<runtime>-<image>`), made a valid
/// container name (`[a-zA-Z0-9][a-zA-Z0-9_.-]+`). Per run, so that two
/// builds of one series on one daemon (two checkouts, two CI jobs) never
/// share a container; two runs started in the same microsecond (one run
/// id) are told apart when the second creates its container: it takes
/// `<name>-<pid>` (`create_bake_container`).
pub fn bake_container_name(runtime: &str, image: &str, run: Option<&str>) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| if is_tag_char(c) { c } else { '-' })
            .collect()
    };
    match run.filter(|r| !r.is_empty()) {
        Some(r) => format!(
            "{}{}-{}",
            bake_container_prefix(runtime),
            clean(image),
            clean(r)
        ),
        None => format!("{}{}", bake_container_prefix(runtime), clean(image)),
    }
}

/// The name a failed bake's container is kept under (`csis build
/// --keep-failed`): its bake container's name with `csis-failed-` for
/// `csis-bake-`, out of the prefix the clean-up of stale bakes removes.
pub fn kept_container_name(bake_container: &str) -> String {
    match bake_container.strip_prefix("csis-bake-") {
        Some(rest) => format!("{KEPT_CONTAINER_PREFIX}{rest}"),
        None => format!("{KEPT_CONTAINER_PREFIX}{bake_container}"),
    }
}

/// What the name of every kept failed bake's container starts with.
pub const KEPT_CONTAINER_PREFIX: &str = "csis-failed-";

/// The prefix every bake container of `runtime` starts with.
pub fn bake_container_prefix(runtime: &str) -> String {
    let clean: String = runtime
        .chars()
        .map(|c| if is_tag_char(c) { c } else { '-' })
        .collect();
    format!("csis-bake-{clean}-")
}

/// The name of a post-bake test container: `csis-test-<runtime>-<series>-<pid>`.
pub fn test_container_name(runtime: &str, series: &str, pid: u32) -> String {
    let clean: String = series
        .chars()
        .map(|c| if is_tag_char(c) { c } else { '-' })
        .collect();
    format!("{}{clean}-{pid}", test_container_prefix(runtime))
}

/// The prefix of every post-bake test container of a runtime.
pub fn test_container_prefix(runtime: &str) -> String {
    let clean: String = runtime
        .chars()
        .map(|c| if is_tag_char(c) { c } else { '-' })
        .collect();
    format!("csis-test-{clean}-")
}

/// Is `id` a pin the runtime accepts: `<repository>@sha256:<64 hex>` or an
/// image id `sha256:<64 hex>`? `Err` carries the seed's refusal.
pub fn check_image_id_pin(id: &str) -> Result<(), String> {
    let digest_ok = |d: &str| {
        d.strip_prefix("sha256:")
            .is_some_and(|h| h.len() == 64 && h.chars().all(is_lower_hex))
    };
    let ok = match id.split_once('@') {
        Some((repo, digest)) => !repo.is_empty() && !repo.contains(' ') && digest_ok(digest),
        None => digest_ok(id),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "image_id '{id}' is not a digest reference: pin <repository>@sha256:<digest> (docker image inspect --format '{{{{index .RepoDigests 0}}}}') or a local image id sha256:<digest>"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_as_made_replaces_what_a_tag_cannot_carry() {
        assert_eq!(
            image_name_as_made("web:app/2026 01 01+x"),
            "web-app-2026-01-01-x"
        );
        assert_eq!(image_name_as_made("ok_name-1.2"), "ok_name-1.2");
        assert_eq!(image_name_as_made(".hidden"), "_hidden");
        assert_eq!(image_name_as_made("-x"), "_x");
        assert!(is_valid_tag(&image_name_as_made("é/ü:::")));
    }

    #[test]
    fn series_problems_name_the_field() {
        let ok = MadeSeries {
            class: "image",
            made_name: "web-docker-20260101-120000".into(),
            tag_keys: vec!["team".into()],
        };
        assert!(series_problems(&ok).is_empty());
        let long = MadeSeries {
            class: "OS builder",
            made_name: "a".repeat(129),
            tag_keys: vec!["bad key".into(), "a=b".into()],
        };
        let p = series_problems(&long);
        assert_eq!(p.len(), 3, "{p:?}");
        assert_eq!(p[0].path, "name");
        assert!(p[0]
            .message
            .starts_with("a docker tag is at most 128 characters"));
        assert_eq!(p[0].hint.as_deref(), Some("shorten the OS builder name"));
        assert_eq!(p[1].path, "tags.bad key");
        assert_eq!(p[1].at.as_deref(), Some("tags"));
        assert_eq!(p[2].path, "tags.a=b");
    }

    #[test]
    fn tag_limit_is_128() {
        assert_eq!(image_name_problem(&"a".repeat(128)), None);
        let p = image_name_problem(&"a".repeat(129)).unwrap();
        assert!(p.contains("a docker tag is at most 128 characters"), "{p}");
        assert!(!is_valid_tag(&"a".repeat(129)));
    }

    #[test]
    fn repository_names() {
        assert_eq!(
            repository_name("docker-local", None).unwrap(),
            "csis/docker-local"
        );
        assert_eq!(
            repository_name("Docker Local", None).unwrap(),
            "csis/docker-local"
        );
        assert_eq!(
            repository_name("x", Some("CSIS/Local")).unwrap(),
            "csis/local"
        );
        assert_eq!(
            repository_name("x", Some("registry.example.com:5000/Team/img")).unwrap(),
            "registry.example.com:5000/team/img"
        );
        assert!(repository_name("x", Some("csis//local")).is_err());
        assert!(repository_name("x", Some("csis/-local")).is_err());
        assert!(repository_name("x", Some("csis/a..b")).is_err());
        assert_eq!(
            repository_name("x", Some("a__b/c-d.e")).unwrap(),
            "a__b/c-d.e"
        );
    }

    #[test]
    fn label_keys() {
        assert_eq!(label_key_problem("csis_series"), None);
        assert!(label_key_problem("a b").unwrap().contains("whitespace"));
        assert!(label_key_problem("a=b").unwrap().contains("'='"));
        assert!(label_key_problem("a\tb").is_some());
        assert!(label_key_problem("").is_some());
    }

    #[test]
    fn movable_tags_round_trip() {
        let id = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let cases = [
            ("csis_parent", "sha256:fedcba9876543210"),
            ("csis_fingerprint", "b3:abc-def"),
            ("csis_release", "prod--2026/01"),
            ("k-ey", "_ab_zz__"),
            ("key", ""),
            ("key", "é ü = x"),
            ("_5f", "_5f"),
        ];
        for (k, v) in cases {
            let t = movable_tag(id, k, v).unwrap();
            assert!(is_valid_tag(&t), "{t}");
            assert!(t.starts_with("0123456789ab--"), "{t}");
            let (s, k2, v2) = parse_movable_tag(&t).unwrap();
            assert_eq!(
                (s.as_str(), k2.as_str(), v2.as_str()),
                ("0123456789ab", k, v),
                "{t}"
            );
        }
        // readable for the usual keys
        assert_eq!(
            movable_tag(id, "csis_parent", "web-1").unwrap(),
            "0123456789ab--csis_parent--web-1"
        );
    }

    #[test]
    fn movable_tags_round_trip_random() {
        let alphabet: Vec<char> = "ab_-:/.=9f0 é".chars().collect();
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for _ in 0..3000 {
            let klen = 1 + next() % 6;
            let vlen = next() % 8;
            let k: String = (0..klen)
                .map(|_| alphabet[next() % alphabet.len()])
                .collect();
            let v: String = (0..vlen)
                .map(|_| alphabet[next() % alphabet.len()])
                .collect();
            let t = movable_tag("sha256:aaaaaaaaaaaaaaaa", &k, &v).unwrap();
            assert!(is_valid_tag(&t), "{t}");
            let (_, k2, v2) = parse_movable_tag(&t).unwrap();
            assert_eq!((k2, v2), (k, v));
        }
    }

    #[test]
    fn movable_tag_too_long_is_refused() {
        let e = movable_tag("sha256:abc", "k", &"x".repeat(200)).unwrap_err();
        assert!(e.contains("a docker tag is at most 128 characters"));
    }

    #[test]
    fn not_movable_tags() {
        assert_eq!(parse_movable_tag("web-base-20260101"), None);
        assert_eq!(parse_movable_tag("base--prod"), None);
        assert_eq!(parse_movable_tag("0123456789ab--only"), None);
    }

    #[test]
    fn release_tags() {
        assert_eq!(release_tag("web", "prod"), "web--prod");
        assert_eq!(release_tag("web/x", "pro d"), "web-x--pro-d");
    }

    #[test]
    fn repo_tags_with_and_without_docker_io() {
        assert_eq!(
            tag_in_repository("csis/local:web-1", "csis/local"),
            Some("web-1")
        );
        assert_eq!(
            tag_in_repository("docker.io/csis/local:web-1", "csis/local"),
            Some("web-1")
        );
        assert_eq!(tag_in_repository("csis/other:web-1", "csis/local"), None);
        assert_eq!(
            tag_in_repository("localhost:5000/csis/local:t", "localhost:5000/csis/local"),
            Some("t")
        );
        assert_eq!(split_repo_tag("localhost:5000/x"), None);
        assert_eq!(normalize_repo_tag("docker.io/library/debian"), "debian");
        assert_eq!(
            tag_in_repository("localhost/csis/local:web-1", "csis/local"),
            Some("web-1")
        );
    }

    #[test]
    fn bake_container_names() {
        assert_eq!(
            bake_container_name("docker-local", "web", None),
            "csis-bake-docker-local-web"
        );
        assert_eq!(
            bake_container_name("docker-local", "web", Some("2026_11_30t06_26_25_779098")),
            "csis-bake-docker-local-web-2026_11_30t06_26_25_779098"
        );
        assert_eq!(bake_container_name("d l", "a/b", None), "csis-bake-d-l-a-b");
        assert!(bake_container_name("d", "x", Some("r")).starts_with(&bake_container_prefix("d")));
        let kept = kept_container_name(&bake_container_name("d", "x", Some("r")));
        assert_eq!(kept, "csis-failed-d-x-r");
        assert!(!kept.starts_with(&bake_container_prefix("d")));
    }

    #[test]
    fn image_id_pins() {
        let hex = "a".repeat(64);
        assert!(check_image_id_pin(&format!("debian@sha256:{hex}")).is_ok());
        assert!(check_image_id_pin(&format!("registry:5000/x/debian@sha256:{hex}")).is_ok());
        assert!(check_image_id_pin(&format!("sha256:{hex}")).is_ok());
        let e = check_image_id_pin("debian:12").unwrap_err();
        assert!(
            e.starts_with("image_id 'debian:12' is not a digest reference"),
            "{e}"
        );
        assert!(check_image_id_pin("debian@sha256:abc").is_err());
        assert!(check_image_id_pin(&format!("sha256:{}", "A".repeat(64))).is_err());
    }
}
