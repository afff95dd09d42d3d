//! The lock's model checker: every interleaving of a small system (one lock, a master
//! and its replica, two or three clients, an operator, crashes, a failover) explored
//! breadth first, each function call running the shipped library in an embedded Lua 5.1.
//! docs/MODEL.md says what is modelled, the bounds and how to go deeper.
//!
//! With no arguments: the clean model at CI's bounds (exit 1 if a property fails or a
//! reachability goal is never met). `--seeded`: every seeded bug, each of which must be
//! caught (exit 1 if one is not). `--bug NAME`: one of them.

mod bugs;
mod lua;
mod properties;
mod redis;
mod system;
mod trace;

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use stateright::{Checker, Expectation, HasDiscoveries, Model};

use bugs::Bug;
use system::{Bounds, System};

#[derive(Parser, Debug)]
#[command(
    name = "cluster-rwlock-model",
    about = "Model-checks the lock's function library"
)]
struct Args {
    /// Run every seeded bug; each must be caught by the property it breaks.
    #[arg(long)]
    seeded: bool,
    /// Check the limits: configurations the protocol does not make safe; each must be
    /// found unsafe.
    #[arg(long)]
    limits: bool,
    /// Run one seeded bug (believe-before-wait, handoff-keeps-fence,
    /// renew-without-owner-check, place-never-lapses, guarded-without-hold,
    /// vouch-ignores-age).
    #[arg(long)]
    bug: Option<String>,
    /// Check only this scenario (failover, dead, break, readers, silent).
    #[arg(long)]
    scenario: Option<String>,
    /// Each client's mode, one letter per client: w (write) or r (read).
    #[arg(long)]
    modes: Option<String>,
    /// Holds each client takes in turn.
    #[arg(long)]
    cycles: Option<u8>,
    /// The model's time, in ticks of 500 ms.
    #[arg(long)]
    ticks: Option<u8>,
    /// Clients that may crash.
    #[arg(long)]
    crashes: Option<u8>,
    /// Failovers that may happen.
    #[arg(long)]
    failovers: Option<u8>,
    /// Forced releases an operator may make.
    #[arg(long)]
    breaks: Option<u8>,
    /// Holders make guarded writes (a scenario may have them already).
    #[arg(long)]
    writes: bool,
    /// The replica's clock minus the master's, ms.
    #[arg(long, allow_hyphen_values = true)]
    skew: Option<i64>,
    /// Checker threads (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,
}

impl Args {
    /// A scenario's bounds with the flags given on top.
    fn bounds(&self, scenario: &str) -> Result<Bounds, String> {
        let mut b = Bounds::scenario(scenario).ok_or_else(|| {
            format!(
                "no scenario {scenario:?}; there are: {}",
                Bounds::scenarios()
                    .iter()
                    .map(|s| s.0)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        if let Some(m) = &self.modes {
            if m.is_empty() || !m.bytes().all(|c| c == b'w' || c == b'r') {
                return Err(format!("--modes takes letters w and r, not {m:?}"));
            }
            b.modes = m.as_bytes().to_vec();
        }
        b.cycles = self.cycles.unwrap_or(b.cycles);
        b.ticks = self.ticks.unwrap_or(b.ticks);
        b.crashes = self.crashes.unwrap_or(b.crashes);
        b.failovers = self.failovers.unwrap_or(b.failovers);
        b.breaks = self.breaks.unwrap_or(b.breaks);
        b.replica_skew_ms = self.skew.unwrap_or(b.replica_skew_ms);
        b.writes |= self.writes;
        if b.replica_skew_ms.unsigned_abs() >= system::MARGIN_MS && scenario != "skew" {
            eprintln!(
                "note: a clock difference of {} ms is not below the lease margin ({} ms): \
                 the protocol promises nothing then",
                b.replica_skew_ms,
                system::MARGIN_MS
            );
        }
        Ok(b)
    }
}

/// What one check found.
struct Outcome {
    violated: Vec<&'static str>,
    unreached: Vec<&'static str>,
}

/// Checks `bounds`; `expect_failure` (with the seeded bug, if any) ends the run at the
/// first counterexample.
fn check(
    bounds: &Bounds,
    expect_failure: Option<Option<Bug>>,
    threads: usize,
) -> Result<Outcome, String> {
    let model = System::new(bounds.clone(), expect_failure.flatten())?;
    let properties = model.properties();
    let started = Instant::now();
    let mut checker = model.checker().threads(threads);
    if expect_failure.is_some() {
        // a seeded bug's run ends at its first counterexample (the shortest: breadth first)
        checker = checker.finish_when(HasDiscoveries::AnyFailures);
    }
    let checker = checker.spawn_bfs().join();
    let took = started.elapsed();
    println!(
        "  {} states ({} unique), depth {}, {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        took.as_secs_f64()
    );
    let mut outcome = Outcome {
        violated: vec![],
        unreached: vec![],
    };
    for p in &properties {
        let found = checker.discovery(p.name);
        match (p.expectation.clone(), found) {
            (Expectation::Always, None) => println!("  holds:    {}", p.name),
            (Expectation::Always, Some(path)) => {
                println!("  VIOLATED: {}", p.name);
                trace::print(checker.model(), path);
                outcome.violated.push(p.name);
            }
            (Expectation::Sometimes, Some(_)) => println!("  reached:  {}", p.name),
            (Expectation::Sometimes, None) => {
                println!("  NEVER REACHED: {}", p.name);
                outcome.unreached.push(p.name);
            }
            (Expectation::Eventually, _) => {}
        }
    }
    Ok(outcome)
}

fn describe(bounds: &Bounds) -> String {
    format!(
        "clients {}, {} hold(s) each, {} ticks of {} ms, lease {} ms (margin {}), {} crash(es), \
         {} failover(s), {} break(s), replica clock {:+} ms{}",
        String::from_utf8_lossy(&bounds.modes),
        bounds.cycles,
        bounds.ticks,
        system::TICK_MS,
        system::LEASE_MS,
        system::MARGIN_MS,
        bounds.crashes,
        bounds.failovers,
        bounds.breaks,
        bounds.replica_skew_ms,
        if bounds.writes {
            ", guarded writes"
        } else {
            ""
        },
    ) + &if bounds.detector {
        format!(
            ", failure detector (node timeout {} ms, election {} ms), vouches",
            system::NODE_TIMEOUT_MS,
            system::ELECTION_MS
        )
    } else {
        String::new()
    }
}

fn run(args: Args) -> Result<bool, String> {
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let bugs: Vec<Bug> = match (&args.bug, args.seeded) {
        (Some(_), true) => return Err("--bug and --seeded: one or the other".into()),
        (Some(name), false) => vec![Bug::parse(name).ok_or_else(|| {
            format!(
                "no seeded bug {name:?}; there are: {}",
                Bug::ALL.map(Bug::name).join(", ")
            )
        })?],
        (None, true) => Bug::ALL.to_vec(),
        (None, false) => vec![],
    };
    let started = Instant::now();
    if args.limits {
        let mut all_found = true;
        for (name, what, _, breaks) in Bounds::limits() {
            let bounds = args.bounds(name)?;
            println!("limit {name} ({what}): {}", describe(&bounds));
            let o = check(&bounds, Some(None), threads)?;
            let found = o.violated.contains(&breaks);
            println!(
                "  {name}: {}",
                if found {
                    format!("unsafe, as documented ({breaks})")
                } else {
                    format!("NOT FOUND UNSAFE (expected: {breaks})")
                }
            );
            all_found &= found;
        }
        return Ok(all_found);
    }
    if bugs.is_empty() {
        let names: Vec<&str> = match &args.scenario {
            Some(n) => vec![n.as_str()],
            None => Bounds::scenarios().iter().map(|s| s.0).collect(),
        };
        let mut ok = true;
        for name in names {
            let bounds = args.bounds(name)?;
            println!("clean model, scenario {name}: {}", describe(&bounds));
            let o = check(&bounds, None, threads)?;
            ok &= o.violated.is_empty() && o.unreached.is_empty();
        }
        println!(
            "{} ({:.1} s in all)",
            if ok {
                "clean model: every property held, every goal was reached"
            } else {
                "clean model: FAILED"
            },
            started.elapsed().as_secs_f64()
        );
        return Ok(ok);
    }
    let mut all_caught = true;
    for bug in bugs {
        let name = args.scenario.as_deref().unwrap_or(bug.scenario());
        let bounds = args.bounds(name)?;
        println!(
            "seeded bug {}, scenario {name}: {}",
            bug.name(),
            describe(&bounds)
        );
        let o = check(&bounds, Some(Some(bug)), threads)?;
        let caught = o.violated.contains(&bug.breaks());
        println!(
            "  {}: {}",
            bug.name(),
            if caught {
                format!("caught ({})", bug.breaks())
            } else {
                format!("NOT CAUGHT (expected: {})", bug.breaks())
            }
        );
        all_caught &= caught;
    }
    println!(
        "{} ({:.1} s in all)",
        if all_caught {
            "seeded bugs: every one caught"
        } else {
            "seeded bugs: FAILED"
        },
        started.elapsed().as_secs_f64()
    );
    Ok(all_caught)
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
