//! `watch`: a live view of one lock: its release messages and its state when it changes.

use std::time::{Duration, Instant, SystemTime};

use cluster_rwlock::operator::{Heard, LockState, ReleaseMessage, ReleaseMessages};
use cluster_rwlock::{LockClient, Mode};
use serde_json::json;

use crate::args::WatchArgs;
use crate::clock::{self, secs};
use crate::code::{self, fail};
use crate::shown::escaped;
use crate::state::state_json;

/// How long a change seen in the state waits for the messages that may have caused it
/// (a release's message reaches the watcher about when it reaches the waiter it wakes,
/// whose grant the look may see first): they are printed first.
const CAUSES: Duration = Duration::from_millis(25);
/// At most this many release messages are printed as lines each second (text only: a
/// busy lock hands over hundreds a second); the others are counted in one line.
const MESSAGE_LINES_PER_SECOND: u32 = 10;

/// What has been told so far: the newest fence (a look at the state that finds an older
/// one is older news, and is not told), and the release messages of this second.
#[derive(Debug)]
struct Told {
    newest: Option<u64>,
    second: Instant,
    lines: u32,
    held_back: u32,
}

impl Told {
    fn new() -> Told {
        Told {
            newest: None,
            second: Instant::now(),
            lines: 0,
            held_back: 0,
        }
    }

    fn saw_fence(&mut self, fence: Option<u64>) {
        self.newest = self.newest.max(fence);
    }

    /// Whether a look that found `fence` is news: not older than a fence already told.
    fn is_news(&self, fence: Option<u64>) -> bool {
        fence >= self.newest
    }

    /// Tells release message `m`, heard at `at`, unless this second's lines are spent
    /// (then it is counted, and told by [`flush`](Self::flush)).
    fn message(&mut self, out: &Out, at: SystemTime, m: &ReleaseMessage) {
        self.saw_fence(match m {
            ReleaseMessage::HandedOver { fence, .. } | ReleaseMessage::Broken { fence, .. } => {
                Some(*fence)
            }
            _ => None,
        });
        self.flush(out);
        if out.json || self.lines < MESSAGE_LINES_PER_SECOND {
            self.lines += 1;
            out.event_at(at, &m.to_string(), None);
        } else {
            self.held_back += 1;
        }
    }

    /// Once a second: the count of the messages held back in the second that ended.
    fn flush(&mut self, out: &Out) {
        if self.second.elapsed() < Duration::from_secs(1) {
            return;
        }
        if self.held_back > 0 {
            let newest = self
                .newest
                .map_or(String::new(), |f| format!(", newest fence {f}"));
            out.event(
                &format!(
                    "... and {} more release messages in that second{newest}",
                    self.held_back
                ),
                None,
            );
        }
        self.second = Instant::now();
        self.lines = 0;
        self.held_back = 0;
    }
}

/// Where the lines go: text, or one JSON object per line (`--json`).
struct Out {
    json: bool,
}

impl Out {
    /// An event seen now: a line of text, or `{"at", "event", "state"?}`.
    fn event(&self, text: &str, state: Option<serde_json::Value>) {
        self.event_at(SystemTime::now(), text, state);
    }

    /// An event seen at `at`.
    fn event_at(&self, at: SystemTime, text: &str, state: Option<serde_json::Value>) {
        if self.json {
            let mut line = json!({ "at": clock::utc(at), "event": text });
            if let Some(state) = state {
                line["state"] = state;
            }
            say!("{line}");
        } else {
            // names in it are the applications' own: escaped (our words need none)
            say!("{} {}", clock::time_of_day(at), escaped(text));
        }
    }
}

/// The lock as the first look finds it: a state, not an event (a hold taken before the
/// watch began is not a new grant).
fn now_line(s: &LockState) -> String {
    let fence = match s.fence {
        None => return "now: free (no grant in the last minute)".into(),
        Some(f) => match clock::fence_time(f) {
            Some(t) => format!("fence {f}, granted {}", clock::time_of_day(t)),
            None => format!("fence {f}"),
        },
    };
    let waiting = match (s.waiting_writers.len(), s.waiting_readers.len()) {
        (0, 0) => String::new(),
        (w, 0) => format!("; {w} writer(s) waiting"),
        (w, r) => format!("; {w} writer(s) and {r} reader(s) waiting"),
    };
    match s.mode {
        None => format!("now: free ({fence}){waiting}"),
        Some(m) => {
            let holders: Vec<String> = s
                .holders
                .iter()
                .map(|h| {
                    format!(
                        "{} for {}",
                        h.client_name().unwrap_or(&h.owner),
                        secs(h.held_for)
                    )
                })
                .collect();
            format!(
                "now: {} held by {} ({fence}){waiting}",
                m.as_str(),
                holders.join(", ")
            )
        }
    }
}

/// A release message (`None`: a gap, which the next look at the state covers).
fn said(heard: Heard) -> Option<ReleaseMessage> {
    match heard {
        Heard::Message(m) => Some(m),
        _ => None,
    }
}

/// The messages already on their way, read until none comes for `CAUSES`, each with
/// when it came.
async fn causes(messages: Option<&mut ReleaseMessages>) -> Vec<(SystemTime, ReleaseMessage)> {
    let mut out = Vec::new();
    if let Some(rx) = messages {
        while let Ok(heard) = tokio::time::timeout(CAUSES, rx.next()).await {
            if let Some(m) = said(heard) {
                out.push((SystemTime::now(), m));
            }
        }
    }
    out
}

/// `watch` until the first SIGINT or SIGTERM, wherever it is (a look at the state, a
/// wait for messages): its listeners are made once, before anything else, so that no
/// signal falls between two of them. Ends with status 0, as a watch is meant to end.
pub async fn watch(client: &LockClient, a: &WatchArgs) -> i32 {
    let (mut interrupt, mut terminate) = match crate::signals::stop_signals() {
        Ok(listeners) => listeners,
        Err(code) => return code,
    };
    tokio::select! {
        status = watch_until_stopped(client, a) => status,
        _ = interrupt.recv() => 0,
        _ = terminate.recv() => 0,
    }
}

async fn watch_until_stopped(client: &LockClient, a: &WatchArgs) -> i32 {
    let lock = match client.rwlock(&a.name) {
        Ok(l) => l,
        Err(e) => return fail("bad lock name", &e),
    };
    // the library's own subscription to the lock's release messages (it follows the
    // slot through failovers and slot moves)
    let mut messages = match lock.release_messages().await {
        Ok(m) => Some(m),
        Err(e) => {
            eprintln!("cluster-rwlock: no release messages ({e}); polling the state only");
            None
        }
    };
    let out = Out { json: a.json };
    let mut told = Told::new();
    let mut last: Option<Seen> = None;
    let mut tick = tokio::time::interval(a.every.max(Duration::from_millis(10)));
    if !a.json {
        say!(
            "{} watching {} ({}), Ctrl-C to stop",
            clock::now(),
            escaped(&a.name),
            escaped(lock.key())
        );
    }
    loop {
        // a message is told as it comes; the state is looked at every tick, and after
        // a gap in the messages
        tokio::select! {
            _ = tick.tick() => {}
            heard = async {
                match messages.as_mut() {
                    Some(rx) => rx.next().await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some(m) = said(heard) {
                    told.message(&out, SystemTime::now(), &m);
                    continue;
                }
            }
        }
        told.flush(&out);
        match lock.state().await {
            Ok(s) => {
                let seen = Seen::of(&s);
                if last.as_ref() == Some(&seen) {
                    continue;
                }
                let state = a.json.then(|| state_json(client, &lock, &s));
                match &last {
                    None => out.event(&now_line(&s), state),
                    Some(before) => {
                        let mut seen_at = SystemTime::now();
                        for (at, m) in causes(messages.as_mut()).await {
                            told.message(&out, at, &m);
                            // the change is told after its causes, and not as earlier
                            // (a message may come a moment after the look that saw
                            // what it caused)
                            seen_at = seen_at.max(at);
                        }
                        match seen.since(Some(before)) {
                            // a look older than what a message told: old news
                            Some(_) if !told.is_news(seen.fence) => {}
                            Some(event) => out.event_at(seen_at, &event, state),
                            // (a queued writer came or went: only the JSON says it)
                            None if a.json => out.event_at(seen_at, "changed", state),
                            None => {}
                        }
                    }
                }
                told.saw_fence(seen.fence);
                last = Some(seen);
            }
            Err(e) => {
                eprintln!("cluster-rwlock: {}", escaped(&e.to_string()));
                if messages.is_none() {
                    return code::UNAVAILABLE;
                }
            }
        }
    }
}

/// What one look at the lock saw, as far as `watch` tells changes apart.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    mode: Option<Mode>,
    fence: Option<u64>,
    holders: Vec<String>,
    waiting: Vec<String>,
}

impl Seen {
    fn of(s: &LockState) -> Seen {
        let mut holders: Vec<String> = s
            .holders
            .iter()
            .map(|h| h.client_name().unwrap_or(&h.owner).to_string())
            .collect();
        holders.sort();
        Seen {
            mode: s.mode,
            fence: s.fence,
            holders,
            waiting: s.waiting_writers.clone(),
        }
    }

    /// The grant or release between `before` and this look, in words. Every grant moves
    /// the fence (kept a minute after the last release), so a grant is seen even when it
    /// was released before this look.
    fn since(&self, before: Option<&Seen>) -> Option<String> {
        let before_fence = before.and_then(|b| b.fence);
        let granted = self.fence.is_some() && self.fence != before_fence;
        let fence = self.fence.map_or("-".into(), |f| f.to_string());
        let who = self.holders.join(", ");
        match (granted, self.mode, before.and_then(|b| b.mode)) {
            (true, Some(m), _) => Some(format!("granted: {} to {who} (fence {fence})", m.as_str())),
            (true, None, _) => Some(format!(
                "granted and released since the last look (fence {fence}): free"
            )),
            (false, None, Some(_)) => Some(format!("released (fence {fence}): free")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(mode: Option<Mode>, fence: Option<u64>, holders: &[&str]) -> Seen {
        Seen {
            mode,
            fence,
            holders: holders.iter().map(|h| h.to_string()).collect(),
            waiting: Vec::new(),
        }
    }

    #[test]
    fn a_look_older_than_a_message_is_not_news() {
        let out = Out { json: false };
        let mut told = Told::new();
        let handed = ReleaseMessage::HandedOver {
            owner: "w".into(),
            hold: 1,
            fence: 123,
        };
        told.message(&out, SystemTime::now(), &handed);
        assert!(!told.is_news(Some(120)), "a look from before the hand-off");
        assert!(told.is_news(Some(123)) && told.is_news(Some(124)));
    }

    #[test]
    fn a_busy_second_is_told_in_ten_lines_and_a_count() {
        let out = Out { json: false };
        let mut told = Told::new();
        for fence in 0..50 {
            let m = ReleaseMessage::HandedOver {
                owner: "w".into(),
                hold: 1,
                fence,
            };
            told.message(&out, SystemTime::now(), &m);
        }
        assert_eq!((told.lines, told.held_back), (10, 40));
        told.second -= Duration::from_secs(1);
        told.flush(&out);
        assert_eq!((told.lines, told.held_back), (0, 0));
        // JSON is for programs: every message
        let json = Out { json: true };
        let mut told = Told::new();
        for _ in 0..50 {
            told.message(&json, SystemTime::now(), &ReleaseMessage::Free);
        }
        assert_eq!(told.held_back, 0);
    }

    #[test]
    fn looks_are_told_as_grants_and_releases() {
        let free = seen(None, Some(5), &[]);
        let held = seen(Some(Mode::Write), Some(7), &["a@h"]);
        assert_eq!(
            held.since(Some(&free)).unwrap(),
            "granted: write to a@h (fence 7)"
        );
        assert_eq!(held.since(None).unwrap(), "granted: write to a@h (fence 7)");
        let after = seen(None, Some(7), &[]);
        assert_eq!(
            after.since(Some(&held)).unwrap(),
            "released (fence 7): free"
        );
        let brief = seen(None, Some(9), &[]);
        assert_eq!(
            brief.since(Some(&after)).unwrap(),
            "granted and released since the last look (fence 9): free"
        );
        // another reader joins under a new fence: a grant; the same look again: nothing
        let more = seen(Some(Mode::Read), Some(11), &["a@h", "b@h"]);
        assert!(more
            .since(Some(&held))
            .unwrap()
            .starts_with("granted: read to a@h, b@h"));
        assert_eq!(free.since(Some(&free)), None);
        assert_eq!(seen(None, None, &[]).since(None), None);
    }
}
