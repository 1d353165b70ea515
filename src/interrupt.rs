//! Ctrl-C during `csis build`: the first cancels the run (nothing new
//! starts, running bakes are stopped, finished ones stay recorded), the
//! second ends the process at once with `exit::INTERRUPTED`. The operations
//! only see the cancellation token; the process's signal handling is here.

use csis_ops::build::CancellationToken;
use tokio::signal::unix::{signal, SignalKind};

/// A token cancelled by the first SIGINT from now on; `on_first` is called
/// then (to tell people). The handler is in place when this returns.
pub fn cancel_on_ctrl_c(
    on_first: impl Fn() + Send + 'static,
) -> std::io::Result<CancellationToken> {
    let token = CancellationToken::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut sigint = {
        let _in = rt.enter();
        signal(SignalKind::interrupt())?
    };
    let cancel = token.clone();
    std::thread::Builder::new()
        .name("csis-ctrl-c".into())
        .spawn(move || {
            rt.block_on(async move {
                if sigint.recv().await.is_some() {
                    on_first();
                    cancel.cancel();
                    if sigint.recv().await.is_some() {
                        std::process::exit(i32::from(csis_ops::exit::INTERRUPTED));
                    }
                }
            })
        })?;
    Ok(token)
}
