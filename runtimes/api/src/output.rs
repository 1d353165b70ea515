//! A child process's output, streamed line by line into a bake's log (the
//! progress line shows the last one), with the last lines kept for the
//! error message when the process fails.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Child;
use tokio::task::JoinHandle;

use crate::LogSink;

/// The streaming of one child's stdout and stderr; see [`stream_output`].
pub struct OutputStream {
    tasks: Vec<JoinHandle<()>>,
    tail: Arc<Mutex<VecDeque<String>>>,
}

/// Stream the piped stdout and stderr of `child` into `log`, keeping the
/// last `keep` lines. Call [`OutputStream::finish`] after the child exits.
pub fn stream_output(child: &mut Child, log: Arc<dyn LogSink>, keep: usize) -> OutputStream {
    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(keep)));
    let mut tasks = Vec::new();
    if let Some(out) = child.stdout.take() {
        tasks.push(pipe(out, log.clone(), tail.clone(), keep));
    }
    if let Some(err) = child.stderr.take() {
        tasks.push(pipe(err, log, tail.clone(), keep));
    }
    OutputStream { tasks, tail }
}

fn pipe<R: AsyncRead + Unpin + Send + 'static>(
    r: R,
    log: Arc<dyn LogSink>,
    tail: Arc<Mutex<VecDeque<String>>>,
    keep: usize,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = BufReader::new(r).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            log.line(&line);
            if keep > 0 {
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                if t.len() == keep {
                    t.pop_front();
                }
                t.push_back(line);
            }
        }
    })
}

impl OutputStream {
    /// Wait until both streams are drained; the last lines, oldest first.
    pub async fn finish(self) -> Vec<String> {
        for t in self.tasks {
            let _ = t.await;
        }
        let t = self.tail.lock().unwrap_or_else(|p| p.into_inner());
        t.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Lines(Mutex<Vec<String>>);
    impl LogSink for Lines {
        fn line(&self, line: &str) {
            self.0.lock().unwrap().push(line.to_string());
        }
    }

    #[tokio::test]
    async fn every_line_reaches_the_log_and_the_tail_keeps_the_last() {
        let mut child = tokio::process::Command::new("sh")
            .args([
                "-c",
                "for i in 1 2 3 4 5; do echo out$i; done; echo err >&2",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Lines(Mutex::new(Vec::new())));
        let s = stream_output(&mut child, log.clone(), 2);
        child.wait().await.unwrap();
        let tail = s.finish().await;
        let mut all = log.0.lock().unwrap().clone();
        all.sort();
        assert_eq!(all, ["err", "out1", "out2", "out3", "out4", "out5"]);
        assert_eq!(tail.len(), 2);
    }
}
