//! `csis init`'s refusal for people.

use csis_ops::init::InitRefusal;

/// Why `csis init` wrote nothing more, in one line.
pub fn refusal(r: &InitRefusal) -> String {
    match r {
        InitRefusal::HasCfg { dir } => format!(
            "{} already holds a cfg/ directory; csis init writes a new tree and overwrites nothing",
            dir.display()
        ),
        InitRefusal::Exists { path } => format!(
            "{} already exists; csis init overwrites nothing",
            path.display()
        ),
    }
}
