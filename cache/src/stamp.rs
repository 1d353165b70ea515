//! No-op stamps: what lets a build of an unchanged tree answer without
//! reading it, as ninja and git answer from file metadata.
//!
//! A stamp (`.csis/cache/noop-<key>`) says: "with these arguments, while
//! every one of these files and directories has the metadata recorded
//! here, and until this time, the build has nothing to do; it printed
//! this". The caller decides what goes in: the key (a blake3 of the
//! arguments, the binary, the environment the templates read), the paths
//! (every file the load and the compile read, every directory they listed,
//! the records), the time limit (the earliest update policy) and the
//! payload (what the no-op build printed).
//!
//! Checking a stamp costs one `stat` per path and no read of the tree.
//! Any difference (size, mtime, ctime, inode, kind, a file that appeared
//! or went) and the stamp does not hold: the caller takes the full path.
//!
//! Racy files: a file changed within [`RACY_WINDOW`] of the moment the build
//! started reading (or after) could change again without its metadata
//! changing (filesystem timestamps are coarse), so a stamp is not written
//! while any recorded path is that fresh ([`Stamp::write`] answers
//! `Ok(false)`). This is git's racy-index rule, with a margin.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A path changed this close to the start of the build (or later) is racy.
pub const RACY_WINDOW: Duration = Duration::from_secs(1);

const MAGIC: &str = "csis-noop-stamp 2";

/// What a path looked like: kind, size, times, inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileStat {
    /// 0 missing, 1 file, 2 directory, 3 other.
    kind: u8,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    dev: u64,
}

impl FileStat {
    /// The metadata of `path` (symlinks followed); a missing path is a value too.
    pub fn of(path: &Path) -> FileStat {
        match fs::metadata(path) {
            Err(_) => FileStat {
                kind: 0,
                size: 0,
                mtime_ns: 0,
                ctime_ns: 0,
                ino: 0,
                dev: 0,
            },
            Ok(m) => FileStat {
                kind: if m.is_file() {
                    1
                } else if m.is_dir() {
                    2
                } else {
                    3
                },
                // A directory's size says nothing on some filesystems; its
                // mtime and ctime change when an entry is added or removed.
                size: if m.is_dir() { 0 } else { m.size() },
                mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
                ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
                ino: m.ino(),
                dev: m.dev(),
            },
        }
    }

    /// Whether the path was there.
    pub fn exists(&self) -> bool {
        self.kind != 0
    }

    /// Changed within [`RACY_WINDOW`] of `since` (or later): a change in
    /// the same clock tick could leave the same metadata, so it proves
    /// nothing.
    pub fn is_racy(&self, since: SystemTime) -> bool {
        let since = since
            .checked_sub(RACY_WINDOW)
            .unwrap_or(UNIX_EPOCH)
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        self.kind != 0 && self.mtime_ns >= since
    }

    /// Its text (kind, size, mtime, ctime, inode, device), as a stamp
    /// keeps it.
    pub fn encode(&self, out: &mut String) {
        let _ = write!(
            out,
            "{} {} {} {} {} {}",
            self.kind, self.size, self.mtime_ns, self.ctime_ns, self.ino, self.dev
        );
    }

    fn decode(s: &str) -> Option<FileStat> {
        let mut it = s.split(' ');
        let st = FileStat {
            kind: it.next()?.parse().ok()?,
            size: it.next()?.parse().ok()?,
            mtime_ns: it.next()?.parse().ok()?,
            ctime_ns: it.next()?.parse().ok()?,
            ino: it.next()?.parse().ok()?,
            dev: it.next()?.parse().ok()?,
        };
        it.next().is_none().then_some(st)
    }
}

/// How a path is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Its metadata, or else its content (a directory's content is its
    /// list of entries); a path that is missing must stay missing.
    Content,
    /// The same, but a missing file and an empty one are the same (a journal).
    ContentOrAbsent,
    /// The running program: as it was when the build started (its metadata
    /// then), not subject to the racy rule; then by content.
    Binary(FileStat),
}

impl Watch {
    fn code(&self) -> char {
        match self {
            Watch::Content => 'c',
            Watch::ContentOrAbsent => 'a',
            Watch::Binary(_) => 'b',
        }
    }
}

/// The content hash of a path: a file's bytes, a directory's sorted entry
/// names and types; `-` when missing (or, with `absent_is_empty`, the hash
/// of nothing).
fn content_hash(path: &Path, absent_is_empty: bool) -> String {
    match fs::metadata(path) {
        Ok(m) if m.is_file() => match fs::read(path) {
            Ok(b) => blake3::hash(&b).to_hex().to_string(),
            Err(_) => "?".into(),
        },
        Ok(m) if m.is_dir() => {
            let Ok(rd) = fs::read_dir(path) else {
                return "?".into();
            };
            let mut names: Vec<(std::ffi::OsString, bool)> = rd
                .flatten()
                .map(|e| (e.file_name(), e.file_type().is_ok_and(|t| t.is_dir())))
                .collect();
            names.sort();
            let mut h = blake3::Hasher::new();
            for (n, dir) in names {
                h.update(n.as_encoded_bytes());
                h.update(if dir { b"/\n" } else { b"\n" });
            }
            h.finalize().to_hex().to_string()
        }
        Ok(_) => "?".into(),
        Err(_) if absent_is_empty => blake3::hash(b"").to_hex().to_string(),
        Err(_) => "-".into(),
    }
}

/// One recorded path.
struct Entry {
    mode: char,
    stat: FileStat,
    hash: String,
    path: String,
}

impl Entry {
    fn line(&self, out: &mut String) {
        out.push(self.mode);
        out.push(' ');
        self.stat.encode(out);
        out.push(' ');
        out.push_str(&self.hash);
        out.push('\t');
        out.push_str(&self.path);
        out.push('\n');
    }

    fn parse(line: &str) -> Option<Entry> {
        let (meta, path) = line.split_once('\t')?;
        let (mode, rest) = meta.split_once(' ')?;
        let (stat, hash) = rest.rsplit_once(' ')?;
        let mode = mode.chars().next().filter(|c| "cab".contains(*c))?;
        Some(Entry {
            mode,
            stat: FileStat::decode(stat)?,
            hash: hash.to_string(),
            path: path.to_string(),
        })
    }
}

/// A no-op stamp for one key.
#[derive(Debug, Clone)]
pub struct Stamp {
    path: PathBuf,
    key: blake3::Hash,
}

impl Stamp {
    /// The stamp for `key` under `dir` (`.csis/cache/`).
    pub fn new(dir: &Path, key: blake3::Hash) -> Stamp {
        let hex = key.to_hex();
        Stamp {
            path: dir.join(format!("noop-{}", &hex[..16])),
            key,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The payload, when the stamp exists, is for this key, has not expired
    /// at `now`, the environment variables it names have their values, and
    /// every recorded path has its recorded metadata or, failing that, its
    /// recorded content. When only metadata moved (a fresh checkout, a
    /// restored cache, `touch`), the stamp is rewritten with the new
    /// metadata, so that the next check is `stat` alone again.
    pub fn check(&self, now: SystemTime) -> Option<Vec<u8>> {
        let bytes = fs::read(&self.path).ok()?;
        let (head, payload) = split_payload(&bytes)?;
        let head = std::str::from_utf8(head).ok()?;
        let mut lines = head.lines();
        if lines.next()? != MAGIC {
            return None;
        }
        if lines.next()?.strip_prefix("key ")? != self.key.to_hex().as_str() {
            return None;
        }
        let until_line = lines.next()?;
        let until = until_line.strip_prefix("until ")?;
        if until != "-" {
            let secs: u64 = until.parse().ok()?;
            if now >= UNIX_EPOCH + Duration::from_secs(secs) {
                return None;
            }
        }
        let env_line = lines.next()?;
        let (count, hash) = env_line.strip_prefix("env ")?.split_once(' ')?;
        let count: usize = count.parse().ok()?;
        let names: Vec<&str> = (0..count).map(|_| lines.next()).collect::<Option<_>>()?;
        if env_hash(&names).to_hex().as_str() != hash {
            return None;
        }
        let n: usize = lines.next()?.strip_prefix("paths ")?.parse().ok()?;
        let mut entries = Vec::with_capacity(n);
        let mut moved = false;
        for _ in 0..n {
            let mut e = Entry::parse(lines.next()?)?;
            let p = Path::new(&e.path);
            let now_stat = FileStat::of(p);
            if now_stat != e.stat {
                if content_hash(p, e.mode == 'a') != e.hash {
                    return None;
                }
                e.stat = now_stat;
                moved = true;
            }
            entries.push(e);
        }
        if moved && !entries.iter().any(|e| e.mode != 'b' && e.stat.is_racy(now)) {
            let bytes = self.encode(until_line, env_line, &names, &entries, payload);
            let _ = crate::write_atomic(&self.path, &bytes);
        }
        Some(payload.to_vec())
    }

    /// Write the stamp: `paths` must hold every path the answer depends on,
    /// `env` every environment variable it depends on (their values are
    /// hashed, not stored); `started` is when the build began reading them.
    /// Answers `Ok(false)` (and writes nothing, removing an older stamp)
    /// when a path is racy (or the binary changed during the build) or a
    /// path or name cannot be written down (a newline or tab in it).
    pub fn write(
        &self,
        env: &[String],
        paths: &[(PathBuf, Watch)],
        started: SystemTime,
        valid_until: Option<SystemTime>,
        payload: &[u8],
    ) -> io::Result<bool> {
        let refuse = || {
            self.remove();
            Ok(false)
        };
        let until_line = match valid_until {
            None => "until -".to_string(),
            Some(t) => {
                let secs = t
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                format!("until {secs}")
            }
        };
        if env.iter().any(|n| n.is_empty() || n.contains(['\n', '\t'])) {
            return refuse();
        }
        let names: Vec<&str> = env.iter().map(String::as_str).collect();
        let env_line = format!("env {} {}", names.len(), env_hash(&names).to_hex());
        let mut entries = Vec::with_capacity(paths.len());
        for (p, watch) in paths {
            let Some(s) = p.to_str().filter(|s| !s.contains(['\n', '\t'])) else {
                return refuse();
            };
            let st = FileStat::of(p);
            let fresh = match watch {
                Watch::Binary(at_start) => st != *at_start,
                _ => st.is_racy(started),
            };
            if fresh {
                return refuse();
            }
            entries.push(Entry {
                mode: watch.code(),
                stat: st,
                hash: content_hash(p, *watch == Watch::ContentOrAbsent),
                path: s.to_string(),
            });
        }
        let bytes = self.encode(&until_line, &env_line, &names, &entries, payload);
        if let Some(dir) = self.path.parent() {
            fs::create_dir_all(dir)?;
        }
        crate::write_atomic(&self.path, &bytes)?;
        Ok(true)
    }

    /// The stamp's bytes: header, environment names, entries, payload.
    fn encode(
        &self,
        until_line: &str,
        env_line: &str,
        names: &[&str],
        entries: &[Entry],
        payload: &[u8],
    ) -> Vec<u8> {
        let mut text = String::with_capacity(128 + entries.len() * 160);
        let _ = writeln!(text, "{MAGIC}");
        let _ = writeln!(text, "key {}", self.key.to_hex());
        let _ = writeln!(text, "{until_line}");
        let _ = writeln!(text, "{env_line}");
        for n in names {
            let _ = writeln!(text, "{n}");
        }
        let _ = writeln!(text, "paths {}", entries.len());
        for e in entries {
            e.line(&mut text);
        }
        text.push_str("payload\n");
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(payload);
        bytes
    }

    /// Forget the stamp (a build that did something, or a racy tree).
    pub fn remove(&self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// The hash of the current values of these environment variables.
fn env_hash(names: &[&str]) -> blake3::Hash {
    use std::os::unix::ffi::OsStrExt;
    let mut h = blake3::Hasher::new();
    for n in names {
        h.update(n.as_bytes());
        match std::env::var_os(n) {
            Some(v) => {
                h.update(b"\0=");
                h.update(v.as_bytes());
            }
            None => {
                h.update(b"\0-");
            }
        }
        h.update(b"\0");
    }
    h.finalize()
}

/// Split at the `payload\n` line.
fn split_payload(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    const MARK: &[u8] = b"\npayload\n";
    let at = bytes.windows(MARK.len()).position(|w| w == MARK)?;
    Some((&bytes[..at + 1], &bytes[at + MARK.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(p: &Path) {
        let t = SystemTime::now() - Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(p)
            .or_else(|_| fs::File::open(p))
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    fn setup() -> (tempfile::TempDir, Vec<(PathBuf, Watch)>, Stamp) {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.yml");
        let sub = d.path().join("images");
        fs::write(&a, "x: 1\n").unwrap();
        fs::create_dir(&sub).unwrap();
        age(&a);
        age(&sub);
        let gone = d.path().join("not-there.yml");
        let stamp = Stamp::new(&d.path().join(".csis/cache"), blake3::hash(b"k"));
        let paths = [a, sub, gone]
            .into_iter()
            .map(|p| (p, Watch::Content))
            .collect();
        (d, paths, stamp)
    }

    #[test]
    fn a_stamp_holds_until_any_path_changes() {
        let (d, paths, stamp) = setup();
        let now = SystemTime::now();
        assert_eq!(stamp.check(now), None, "no stamp yet");
        assert!(stamp.write(&[], &paths, now, None, b"out\nput").unwrap());
        assert_eq!(stamp.check(now).as_deref(), Some(&b"out\nput"[..]));

        // A different key does not see it.
        let other = Stamp::new(&d.path().join(".csis/cache"), blake3::hash(b"other"));
        assert_eq!(other.check(now), None);

        // Content change of the same size (mtime/ctime move).
        fs::write(&paths[0].0, "x: 2\n").unwrap();
        assert_eq!(stamp.check(now), None);
    }

    #[test]
    fn a_new_file_in_a_listed_directory_or_a_missing_path_appearing_breaks_it() {
        let (_d, paths, stamp) = setup();
        let now = SystemTime::now();
        assert!(stamp.write(&[], &paths, now, None, b"p").unwrap());
        fs::write(paths[1].0.join("new.yml"), "").unwrap();
        assert_eq!(stamp.check(now), None);

        let (_d, paths, stamp) = setup();
        assert!(stamp.write(&[], &paths, now, None, b"p").unwrap());
        fs::write(&paths[2].0, "").unwrap();
        assert_eq!(stamp.check(now), None);
    }

    #[test]
    fn racy_paths_are_not_stamped_and_stamps_expire() {
        let (_d, paths, stamp) = setup();
        let now = SystemTime::now();
        fs::write(&paths[0].0, "x: 3\n").unwrap(); // fresh: racy
        assert!(!stamp.write(&[], &paths, now, None, b"p").unwrap());
        assert_eq!(stamp.check(now), None);

        age(&paths[0].0);
        let until = now + Duration::from_secs(60);
        assert!(stamp.write(&[], &paths, now, Some(until), b"p").unwrap());
        assert!(stamp.check(now).is_some());
        assert_eq!(stamp.check(until + Duration::from_secs(1)), None);
    }

    #[test]
    fn an_environment_variable_read_by_the_tree_is_part_of_the_stamp() {
        let (_d, paths, stamp) = setup();
        let now = SystemTime::now();
        let name = "CSIS_STAMP_TEST_VAR_7F3A";
        std::env::set_var(name, "one");
        assert!(stamp
            .write(&[name.to_string()], &paths, now, None, b"p")
            .unwrap());
        assert!(stamp.check(now).is_some());
        std::env::set_var(name, "two");
        assert_eq!(stamp.check(now), None);
        std::env::set_var(name, "one");
        assert!(stamp.check(now).is_some());
        std::env::remove_var(name);
        assert_eq!(stamp.check(now), None);
    }

    #[test]
    fn a_damaged_stamp_does_not_hold() {
        let (_d, paths, stamp) = setup();
        let now = SystemTime::now();
        assert!(stamp.write(&[], &paths, now, None, b"p").unwrap());
        let text = fs::read_to_string(stamp.path()).unwrap();
        fs::write(stamp.path(), text.replace("paths 3", "paths 9")).unwrap();
        assert_eq!(stamp.check(now), None);
        fs::write(stamp.path(), &text[..text.len() / 2]).unwrap();
        assert_eq!(stamp.check(now), None);
    }

    #[test]
    fn same_content_under_new_metadata_holds_and_the_stamp_takes_the_new_metadata() {
        let (_d, paths, stamp) = setup();
        let now = SystemTime::now();
        assert!(stamp.write(&[], &paths, now, None, b"p").unwrap());
        // A fresh checkout: the same bytes in a new file (new inode, times).
        let a = &paths[0].0;
        fs::remove_file(a).unwrap();
        fs::write(a, "x: 1\n").unwrap();
        age(a);
        let before = fs::read_to_string(stamp.path()).unwrap();
        assert!(stamp.check(now).is_some());
        let after = fs::read_to_string(stamp.path()).unwrap();
        assert_ne!(before, after, "the new metadata was taken");
        let mut st = String::new();
        FileStat::of(a).encode(&mut st);
        assert!(after.contains(&st), "{after}");
        assert!(stamp.check(now).is_some());
        // A directory listed again with the same entries holds too.
        fs::remove_dir(&paths[1].0).unwrap();
        fs::create_dir(&paths[1].0).unwrap();
        assert!(stamp.check(now).is_some());
        fs::write(paths[1].0.join("x.yml"), "").unwrap();
        assert_eq!(stamp.check(now), None);
    }

    #[test]
    fn an_absent_journal_is_an_empty_one_and_the_binary_is_checked_against_its_start() {
        let (d, mut paths, stamp) = setup();
        let now = SystemTime::now();
        let journal = d.path().join("journal");
        paths.push((journal.clone(), Watch::ContentOrAbsent));
        assert!(stamp.write(&[], &paths, now, None, b"p").unwrap());
        fs::write(&journal, "").unwrap();
        assert!(stamp.check(now).is_some(), "empty = absent");
        fs::write(&journal, "record\n").unwrap();
        assert_eq!(stamp.check(now), None);
        fs::remove_file(&journal).unwrap();
        assert!(stamp.check(now).is_some());

        // The binary: fresh is fine, as long as it is the one that started.
        let bin = d.path().join("csis");
        fs::write(&bin, "v1").unwrap();
        let at_start = FileStat::of(&bin);
        paths.push((bin.clone(), Watch::Binary(at_start)));
        assert!(stamp.write(&[], &paths, now, None, b"p").unwrap());
        fs::write(&bin, "v2").unwrap();
        assert_eq!(stamp.check(now), None, "another binary");
        assert!(
            !stamp.write(&[], &paths, now, None, b"p").unwrap(),
            "the binary changed during the build"
        );
    }
}
