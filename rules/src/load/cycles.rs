//! `source_image` cycles: an image chain must end at an OS builder; a
//! cycle is refused at its first image, printed in full.

use super::Loader;
use crate::tree::{Parent, Tree};
use csis_schema::yaml::join_path;

impl Loader<'_> {
    /// Refuse `source_image` cycles, printing the cycle.
    pub(super) fn check_cycles(&mut self, t: &Tree) {
        // 0 = unvisited, 1 = on the current path, 2 = done
        let mut state = vec![0u8; t.images.len()];
        for start in 0..t.images.len() {
            if state[start] != 0 {
                continue;
            }
            let mut pathv: Vec<usize> = Vec::new();
            let mut cur = Some(start);
            while let Some(c) = cur {
                match state[c] {
                    2 => break,
                    1 => {
                        let pos = pathv.iter().position(|&x| x == c).expect("on path");
                        let cyc = &pathv[pos..];
                        let mut names: Vec<&str> =
                            cyc.iter().map(|&x| t.images[x].display.as_str()).collect();
                        names.push(&t.images[c].display);
                        let first = &t.images[cyc[0]];
                        self.d.error_hint(
                            first.origin.field("source_image"),
                            &join_path(&first.origin.path, "source_image"),
                            format!("source_image cycle: {}", names.join(" -> ")),
                            "a chain must end at an OS builder",
                        );
                        break;
                    }
                    _ => {
                        state[c] = 1;
                        pathv.push(c);
                        cur = match &t.images[c].parent {
                            Parent::Image(p) => t.images_by_name.map.get(p).copied(),
                            Parent::Os(_) => None,
                        };
                    }
                }
            }
            for x in pathv {
                state[x] = 2;
            }
        }
    }
}
