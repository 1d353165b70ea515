//! A mod test (`csis test-mods`): one modification applied in a throwaway
//! container of its OS family's image, then applied again. The second
//! apply must change nothing: an ansible mod's recap says how many tasks
//! changed; a shell mod's filesystem is compared, path by path (type,
//! mode, owner, content), over what `docker diff` lists after each apply.
//! Nothing is committed; the container is removed whatever happens (a
//! killed run leaves a bake-marked container the next run removes).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use csis_runtime::recipe;
use csis_runtime::{
    BakeParent, BakeRequest, BakeStep, LogSink, ModTestOutcome, Result, RuntimeError,
};

use super::containers::{ContainerGuard, Held};
use super::exec::STAGE_DIR;
use super::DockerRuntime;
use crate::names;

/// Numbers the mod test containers of this process.
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Keeps the recap lines of ansible's output (`host : ok=2 changed=1 ...`)
/// while passing every line on.
struct Recap {
    inner: Arc<dyn LogSink>,
    changed: Mutex<Vec<u64>>,
}

impl LogSink for Recap {
    fn line(&self, line: &str) {
        if line.contains(" ok=") {
            if let Some(n) = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("changed="))
                .and_then(|n| n.parse().ok())
            {
                self.changed.lock().unwrap().push(n);
            }
        }
        self.inner.line(line);
    }
}

/// Prints one line per path read from stdin: the path, then `-` (absent),
/// `L target`, or the kind, mode, owner and group (and a regular file's
/// checksum: `cksum`, else `md5sum` or `sha256sum`, which busybox builds
/// without `cksum` have).
const STATE_SCRIPT: &str = r#"while IFS= read -r p; do
  if [ -L "$p" ]; then printf '%s\tL %s\n' "$p" "$(readlink "$p")"
  elif [ -f "$p" ]; then printf '%s\tF %s %s\n' "$p" "$(ls -ldn "$p" | awk '{print $1, $3, $4}')" "$( { cksum < "$p" || md5sum < "$p" || sha256sum < "$p"; } 2>/dev/null)"
  elif [ -e "$p" ]; then printf '%s\tO %s\n' "$p" "$(ls -ldn "$p" | awk '{print $1, $3, $4}')"
  else printf '%s\t-\n' "$p"
  fi
done
"#;

impl DockerRuntime {
    /// The paths `docker diff` lists for the container, but csis's own
    /// staging directory.
    async fn changed_paths(&self, container: &str) -> Result<Vec<String>> {
        let d = self.docker().await?;
        let changes = d
            .container_changes(container)
            .await
            .map_err(|e| self.map_err(&format!("diff of {container}"), e))?
            .unwrap_or_default();
        Ok(changes
            .into_iter()
            .map(|c| c.path)
            .filter(|p| !(p == STAGE_DIR || p.starts_with(&format!("{STAGE_DIR}/"))))
            .collect())
    }

    /// The state of each of `paths` in the container ([`STATE_SCRIPT`]).
    async fn path_states(
        &self,
        container: &str,
        paths: &[String],
    ) -> Result<BTreeMap<String, String>> {
        let mut input = String::new();
        for p in paths.iter().filter(|p| !p.contains('\n')) {
            input.push_str(p);
            input.push('\n');
        }
        let r = self
            .exec(
                container,
                vec!["/bin/sh".into(), "-c".into(), STATE_SCRIPT.into()],
                Some("0"),
                vec![],
                Some(input.into_bytes()),
                &csis_runtime::NullLog,
                true,
            )
            .await?;
        if r.exit_code != 0 {
            return Err(RuntimeError::Failed(format!(
                "reading the filesystem of {container} exited {}: {}",
                r.exit_code,
                r.stderr.trim()
            )));
        }
        Ok(r.stdout
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect())
    }

    pub(super) async fn test_mod_in_container(&self, req: &BakeRequest) -> Result<ModTestOutcome> {
        let BakeParent::Vendor(img) = &req.parent else {
            return Err(RuntimeError::Refused(format!(
                "{}: a mod test starts from an OS family's image",
                req.label
            )));
        };
        let ansible = matches!(req.steps.first(), Some(BakeStep::Ansible { .. }));
        let image = match self.inspect_image_opt(&img.id).await? {
            Some(i) => i,
            None => {
                req.log.line(&format!("==> pulling {}", img.id));
                self.pull(&img.id, None).await?;
                self.inspect_image_opt(&img.id).await?.ok_or_else(|| {
                    RuntimeError::Refused(format!(
                        "{}: image '{}' is not on the daemon",
                        req.label, img.id
                    ))
                })?
            }
        };
        let image_id = image.id.clone().unwrap_or(img.id.clone());
        let container = names::bake_container_name(
            &self.settings.name,
            &format!("{}-modtest", req.series),
            Some(&format!(
                "{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            )),
        );
        let lowered = recipe::lower_mods(req, &self.target(true))
            .map_err(|e| RuntimeError::Failed(format!("mod test {}: {e}", req.label)))?;
        lowered.write_files(&req.emit_dir).map_err(|e| {
            RuntimeError::Failed(format!(
                "mod test {}: writing under {}: {e}",
                req.label,
                req.emit_dir.display()
            ))
        })?;
        let recap = Arc::new(Recap {
            inner: req.log.clone(),
            changed: Mutex::new(Vec::new()),
        });
        let mut run = req.clone();
        run.log = recap.clone();
        let d = self.docker().await?.clone();
        match self.clear_bake_name(&container).await {
            // a live csis's of the same run id: another name at creation
            Ok(Held::Free | Held::Removed | Held::Live(_)) => {}
            Err(e) => return Err(RuntimeError::Failed(format!("{}: {e}", req.label))),
        }
        let container = self
            .create_bake_container(&container, &image_id, &run, None)
            .await?;
        req.log.line(&format!(
            "==> mod test container {container} from {}",
            img.id
        ));
        let guard = ContainerGuard::bake(d, container.clone());
        let (settle, mods) = lowered.steps.split_at(1.min(lowered.steps.len()));
        let work = async {
            self.exec_steps(&container, &run, "0", settle, 0).await?;
            req.log.line("==> first apply");
            let first = self
                .exec_steps(&container, &run, "0", mods, 1)
                .await
                .map_err(|e| e.to_string());
            let mut out = ModTestOutcome {
                container: container.clone(),
                image: img.id.clone(),
                first,
                second: None,
                changes: Vec::new(),
            };
            if out.first.is_err() {
                return Ok(out);
            }
            let paths_1 = self.changed_paths(&container).await?;
            let before = self.path_states(&container, &paths_1).await?;
            recap.changed.lock().unwrap().clear();
            req.log.line("==> second apply (it must change nothing)");
            let second = self
                .exec_steps(&container, &run, "0", mods, 1)
                .await
                .map_err(|e| e.to_string());
            let failed = second.is_err();
            out.second = Some(second);
            if failed {
                return Ok(out);
            }
            if ansible {
                let changed: u64 = recap.changed.lock().unwrap().iter().sum();
                if changed > 0 {
                    out.changes.push(format!("ansible: changed={changed}"));
                }
            } else {
                let mut paths = paths_1;
                paths.extend(self.changed_paths(&container).await?);
                paths.sort();
                paths.dedup();
                let after = self.path_states(&container, &paths).await?;
                for p in &paths {
                    let (b, a) = (before.get(p), after.get(p));
                    // a path the first apply did not touch reads as absent
                    // from the image's point of view only if the diff says so
                    if b.is_some() && b != a {
                        out.changes.push(format!("C {p}"));
                    } else if b.is_none() && a.is_some() {
                        out.changes.push(format!("A {p}"));
                    }
                }
            }
            Ok::<_, RuntimeError>(out)
        };
        let result = tokio::select! {
            r = work => r,
            _ = req.cancel.cancelled() => Err(RuntimeError::Cancelled),
        };
        let removed = guard.remove().await;
        req.log
            .line(&format!("==> removed mod test container {container}"));
        if let Err(e) = removed {
            req.log.line(&format!(
                "warning: mod test container {container} not removed: {e}"
            ));
        }
        result
    }
}
