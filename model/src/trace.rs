//! A counterexample as a reader follows it: each step, the calls it made and their
//! replies, then who believes what and what each node's copy of the lock says.

use stateright::{Model, Path};

use crate::system::{describe_hash, owner, Action, Phase, State, System, TICK_MS};

/// Prints `path` step by step (each step's calls replayed with the trace on).
pub fn print(model: &System, path: Path<State, Action>) {
    let steps = path.into_vec();
    println!(
        "    counterexample, {} steps:",
        steps.len().saturating_sub(1)
    );
    for (n, (state, action)) in steps.iter().enumerate() {
        let Some(action) = action else { break };
        let (next, lines) = System::traced(|| model.next_state(state, action.clone()));
        println!(
            "  {:>3}. t={} ms  {}",
            n + 1,
            state.ticks as u64 * TICK_MS,
            name(action)
        );
        for line in lines {
            println!("{line}");
        }
        if let Some(next) = next {
            print_state(&next);
        }
    }
}

fn name(a: &Action) -> String {
    match a {
        Action::Attempt(c) => format!("client {c} attempts"),
        Action::WaitAcked(c) => format!("client {c}'s WAIT: acknowledged"),
        Action::WaitShort(c) => format!("client {c}'s WAIT: short (timeout or connection gone)"),
        Action::Renew(c) => format!("client {c} renews"),
        Action::GuardedWrite(c) => format!("client {c} writes through a guarded call"),
        Action::Release(c) => format!("client {c} releases"),
        Action::GiveUp(c) => format!("client {c} gives up and withdraws"),
        Action::Crash(c) => format!("client {c} crashes"),
        Action::Vouch(c) => format!(
            "client {c}'s WAIT fell short: it asks the other masters when they last heard the master"
        ),
        Action::Isolate => "the master is cut off from the other masters".into(),
        Action::Tick => "time passes".into(),
        Action::Failover(n) => {
            format!("FAILOVER: the master dies, the replica is promoted with {n} more write(s) of the stream")
        }
        Action::Break(None) => "an operator breaks the lock (force_release of every owner)".into(),
        Action::Break(Some(c)) => {
            format!("an operator breaks client {c} (force_release, by client name)")
        }
        Action::DropReplica => {
            "the master stops listing its replica (repl-timeout); the replica lives on".into()
        }
    }
}

fn print_state(s: &State) {
    let now = s.ticks as u64 * TICK_MS;
    for (i, c) in s.clients.iter().enumerate() {
        let what = match &c.phase {
            Phase::Idle => "idle".to_string(),
            Phase::Waiting => "waiting".to_string(),
            Phase::Confirming { fence, .. } => format!("granted fence {fence}, WAIT out"),
            Phase::Holding { fence, until } | Phase::Renewing { fence, until, .. } => {
                if now < *until {
                    format!("BELIEVES fence {fence} until {until} ms")
                } else {
                    format!("held fence {fence}, belief ended at {until} ms")
                }
            }
            Phase::Done => "done".to_string(),
            Phase::Dead => "dead".to_string(),
        };
        let excused = if c.excused {
            " (broken by the operator)"
        } else {
            ""
        };
        println!(
            "        client {i} ({}, {}): {what}{excused}",
            c.mode as char,
            owner(i as u8).split('/').next().unwrap_or("")
        );
    }
    if !s.stream.is_empty() {
        println!("        {} write(s) not yet on the replica", s.stream.len());
    }
    for (i, node) in s.nodes.iter().enumerate() {
        let role = if i as u8 == s.master {
            "master"
        } else if s.replica == Some(i as u8) {
            "replica"
        } else {
            "down"
        };
        println!("        node {i} ({role}): {}", describe_hash(&node.keys));
    }
}
