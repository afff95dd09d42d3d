//! `top` as an operator uses it: in a pseudo-terminal, its screen read as a terminal
//! would draw it (vt100), keys typed; and `--once` / `--json` for scripts.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fred::prelude::*;
use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use serde_json::Value as Json;

use crate::common::{client, client_with, cluster, prefix};
use crate::{cli, output, text, BIN};

/// `top` in a pseudo-terminal of 140 x 30, its screen kept up to date by a reader thread.
struct Screen {
    parser: Arc<Mutex<vt100::Parser>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Screen {
    fn start(url: &str, prefix: &str) -> Screen {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 30,
                cols: 140,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("a pseudo-terminal");
        let mut cmd = CommandBuilder::new(BIN);
        cmd.args(["--url", url, "--prefix", prefix, "top", "--every", "300ms"]);
        let child = pty.slave.spawn_command(cmd).expect("top runs");
        let mut reader = pty.master.try_clone_reader().expect("a reader");
        let writer = pty.master.take_writer().expect("a writer");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(30, 140, 0)));
        let feed = parser.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                feed.lock().unwrap().process(&buf[..n]);
            }
        });
        Screen {
            parser,
            writer,
            child,
        }
    }

    fn contents(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Waits up to `within` for the screen to satisfy `ok`: the screen then.
    async fn until(&self, within: Duration, ok: impl Fn(&str) -> bool) -> String {
        let began = Instant::now();
        loop {
            let shown = self.contents();
            if ok(&shown) {
                return shown;
            }
            assert!(
                began.elapsed() < within,
                "the screen never showed it:\n{shown}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn keys(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }
}

/// The first line of the table under its header.
fn first_row(shown: &str) -> String {
    let mut lines = shown.lines().skip_while(|l| !l.contains("NAME"));
    lines.next();
    lines.next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_puts_the_contended_lock_on_top_flags_the_frozen_holder_and_breaks_it() {
    let cluster = cluster().await;
    let prefix = prefix("cli-top");
    let client = client(cluster, &prefix).await;
    let waiting = client_with(cluster, |c| c.prefix(&prefix).client_name("queued@b")).await;
    // a holder that stopped renewing: a bare grant of a 4 s lease, which nothing renews
    let hot = client.rwlock("hot:{1}").unwrap();
    let token = format!("frozen@a/{}:1", "0f".repeat(16));
    let granted: Value = client
        .redis()
        .fcall(
            "rwlock4_acquire",
            vec![hot.key()],
            vec!["w", token.as_str(), "1", "4000", "0"],
        )
        .await
        .unwrap();
    assert!(matches!(&granted, Value::Array(p) if p[0].as_i64() == Some(1)));
    // two writers wait for it; a calm lock is held with nobody waiting
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let lock = waiting.rwlock("hot:{1}").unwrap();
            tokio::spawn(async move { lock.write().await.unwrap().release().await })
        })
        .collect();
    let calm = client.rwlock("calm:{2}").unwrap().read().await.unwrap();

    let mut screen = Screen::start(&cluster.seed_urls()[0], &prefix);
    let shown = screen
        .until(Duration::from_secs(15), |s| {
            s.contains("hot:{1}") && s.contains("calm:{2}") && s.contains("OVERDUE")
        })
        .await;
    let top = first_row(&shown);
    assert!(
        top.starts_with("hot:{1}"),
        "the contended lock first:\n{shown}"
    );
    assert!(
        top.contains("frozen@a") && top.contains("OVERDUE"),
        "{shown}"
    );
    assert!(shown.contains("2 locks, 2 held, 2 waiting"), "{shown}");
    // `b` then `y` breaks the selected lock: the waiters get it
    screen.keys("b");
    screen
        .until(Duration::from_secs(5), |s| s.contains("break hot:{1}?"))
        .await;
    screen.keys("y");
    screen
        .until(Duration::from_secs(5), |s| {
            s.contains("broke hot:{1}: 1 hold(s) removed")
        })
        .await;
    for w in waiters {
        tokio::time::timeout(Duration::from_secs(5), w)
            .await
            .expect("a waiter is granted after the break")
            .unwrap()
            .unwrap();
    }
    // `/` filters by name
    screen.keys("/calm\r");
    let shown = screen
        .until(Duration::from_secs(5), |s| s.contains("filter: calm"))
        .await;
    assert!(first_row(&shown).starts_with("calm:{2}"), "{shown}");
    screen.keys("q");
    let began = Instant::now();
    loop {
        if let Some(status) = screen.child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(5), "q did not quit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    calm.release().await.unwrap();
    let _: i64 = client.redis().del(hot.key()).await.unwrap_or(0);
    waiting.close().await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_once_and_json_print_for_scripts() {
    let cluster = cluster().await;
    let prefix = prefix("cli-top-once");
    let client = client(cluster, &prefix).await;
    let held = client.rwlock("report").unwrap().write().await.unwrap();
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["top", "--once"]);
    let out = output(cmd).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.starts_with("NAME"), "{shown}");
    assert!(
        shown.contains("report") && shown.contains("write"),
        "{shown}"
    );
    assert!(shown.contains("1 locks, 1 held"), "{shown}");
    let mut cmd = cli(cluster, &prefix);
    cmd.args(["top", "--once", "--json"]);
    let out = output(cmd).await;
    let j: Json = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(j["rows"][0]["name"], "report", "{j}");
    assert_eq!(j["rows"][0]["holders"][0]["owner"], held.owner(), "{j}");
    assert!(j["cost"]["summaries"].as_u64() >= Some(1), "{j}");
    held.release().await.unwrap();
    client.close().await;
}
