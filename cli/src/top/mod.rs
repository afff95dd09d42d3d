//! `top`: a live table of the locks under the prefix that someone holds or waits for,
//! on every master, as `top` shows processes: the most contended on top, the holders,
//! how long they have held, when they last renewed (an overdue holder flagged), the
//! waiters, and the master. `--once` prints one frame as text, `--json` one JSON
//! document per refresh; otherwise a full-screen view with keys (`s` sort, `/` filter,
//! `b` break the selected lock after a confirmation, `q` quit).

mod sample;
mod tui;
mod view;

use cluster_rwlock::LockClient;

use crate::args::{glob, TopArgs};
use crate::code;
pub use sample::Sampler;
use view::Sort;

/// `top`.
pub async fn top(client: &LockClient, prefix: &str, a: &TopArgs) -> i32 {
    let mut sampler = Sampler::new(prefix);
    let pattern = a.pattern.clone();
    let keep = move |s: &mut sample::Sample| s.rows.retain(|r| glob(&pattern, r.name()));
    if a.once || a.json {
        let (mut interrupt, mut terminate) = match crate::signals::stop_signals() {
            Ok(listeners) => listeners,
            Err(code) => return code,
        };
        loop {
            let mut s = match sampler.sample(client).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!(
                        "cluster-rwlock: top: {}",
                        crate::shown::escaped(&e.to_string())
                    );
                    return code::UNAVAILABLE;
                }
            };
            keep(&mut s);
            if a.json {
                say!("{}", view::json(client, &s, Sort::Waiters, ""));
            } else {
                say!("{}", view::text(&s, Sort::Waiters, ""));
            }
            if a.once {
                return 0;
            }
            tokio::select! {
                _ = tokio::time::sleep(a.every) => {}
                _ = interrupt.recv() => return 0,
                _ = terminate.recv() => return 0,
            }
        }
    }
    tui::run(client, sampler, keep, a.every).await
}
