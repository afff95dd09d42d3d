//! B1 in turns: the uncontended cycle of this lock (both durabilities), rslock's and
//! the floors' (on connections set as the lock's are, and the plain floor once more
//! with fred's default socket, Nagle's algorithm on), each client connected once, then
//! run in short slices taken in turns (the first of each round rotating), so that every
//! row sees the same minutes of a machine whose speed drifts; the rows of the main table
//! each run once, a minute apart from some of the others. A row's figures are the sums
//! over its slices; the ratio of this lock to the floor is also given round by round
//! (its spread is the noise left).

use std::time::Duration;

use cluster_rwlock::config::DEFAULT_DURABILITY;
use cluster_rwlock::Durability;
use fred::prelude::ClientLike;

use crate::drive::{run_for, Run};
use crate::probe::{Probe, Sample};
use crate::uncontended::{
    cluster_client_with, floor_once, load_floor, ours_locks, ours_once, rslock_names, rslock_once,
    Socket,
};
use crate::{BoxError, TASKS};

/// The rows, in the order of the first round.
const ROWS: [&str; 6] = [
    "cluster-rwlock, default",
    "cluster-rwlock, MasterOnly",
    "rslock 0.7",
    "floor",
    "floor, confirmed",
    "floor, Nagle",
];
const DEFAULT: usize = 0;
const MASTER_ONLY: usize = 1;
const RSLOCK: usize = 2;
const FLOOR: usize = 3;
const FLOOR_CONFIRMED: usize = 4;
const FLOOR_NAGLE: usize = 5;

/// What a row's slices added up to.
#[derive(Default, Clone, Copy)]
struct Sums {
    /// Cycles counted when the slices were told to stop, and the time until then.
    counted: u64,
    secs: f64,
    /// Every cycle the slices ran (those that ended after the stop too), and what the
    /// servers and this process spent meanwhile.
    cycles: u64,
    command_us: f64,
    server_cpu_us: f64,
    client_cpu_us: f64,
}

impl Sums {
    fn add(&mut self, run: &Run, before: &Sample, after: &Sample) {
        self.counted += run.at_stop;
        self.secs += run.took.as_secs_f64();
        self.cycles += run.total;
        self.command_us += after.command_us - before.command_us;
        self.server_cpu_us += after.server_cpu_us - before.server_cpu_us;
        self.client_cpu_us += after.client_cpu_us - before.client_cpu_us;
    }

    fn rate(&self) -> f64 {
        self.counted as f64 / self.secs.max(1e-9)
    }

    /// Redis command time, Redis CPU and client CPU per cycle (µs).
    fn per_cycle(&self) -> (f64, f64, f64) {
        let n = self.cycles.max(1) as f64;
        (
            self.command_us / n,
            self.server_cpu_us / n,
            self.client_cpu_us / n,
        )
    }
}

/// Runs the rows in `rounds` turns of `slice` each and prints their table.
pub(crate) async fn b1_in_turns(
    seeds: &[String],
    probe: &Probe,
    tag: &str,
    rounds: usize,
    slice: Duration,
) -> Result<(), BoxError> {
    let (default_client, default_locks) =
        ours_locks(seeds, &format!("{tag}td"), TASKS, DEFAULT_DURABILITY).await?;
    let (master_only_client, master_only_locks) =
        ours_locks(seeds, &format!("{tag}tm"), TASKS, Durability::MasterOnly).await?;
    let rslock = std::sync::Arc::new(rslock_names(seeds, &format!("{tag}tr"), TASKS).await?);
    let fred = cluster_client_with(&seeds[0], Socket::LockLike).await?;
    load_floor(&fred).await?;
    let nagle = cluster_client_with(&seeds[0], Socket::Nagle).await?;
    let mut sums = [Sums::default(); ROWS.len()];
    // this lock's rate over the floor's, round by round
    let mut ratios = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let mut rates = [0.0; ROWS.len()];
        for k in 0..ROWS.len() {
            let row = (round + k) % ROWS.len();
            let before = probe.sample().await;
            let run = match row {
                DEFAULT | MASTER_ONLY => {
                    let locks = if row == DEFAULT {
                        default_locks.clone()
                    } else {
                        master_only_locks.clone()
                    };
                    run_for(TASKS, slice, move |i| {
                        let locks = locks.clone();
                        async move { ours_once(&locks[i]).await }
                    })
                    .await
                }
                RSLOCK => {
                    let names = rslock.clone();
                    run_for(TASKS, slice, move |i| {
                        let names = names.clone();
                        async move { rslock_once(&names[i]).await }
                    })
                    .await
                }
                _ => {
                    let confirmed = row == FLOOR_CONFIRMED;
                    let client = if row == FLOOR_NAGLE {
                        nagle.clone()
                    } else {
                        fred.clone()
                    };
                    let prefix = format!("{tag}tf{row}");
                    run_for(TASKS, slice, move |i| {
                        let (fred, key) = (client.clone(), format!("{prefix}:{{n{i}}}"));
                        async move { floor_once(&fred, key, i, confirmed).await }
                    })
                    .await
                }
            };
            let after = probe.sample().await;
            sums[row].add(&run, &before, &after);
            rates[row] = run.at_stop as f64 / run.took.as_secs_f64().max(1e-9);
        }
        ratios.push((
            rates[MASTER_ONLY] / rates[FLOOR].max(1e-9),
            rates[DEFAULT] / rates[FLOOR_CONFIRMED].max(1e-9),
        ));
    }
    default_client.close().await;
    master_only_client.close().await;
    let _ = fred.quit().await;
    let _ = nagle.quit().await;
    print_table(&sums, &ratios, rounds, slice);
    Ok(())
}

fn print_table(sums: &[Sums; ROWS.len()], ratios: &[(f64, f64)], rounds: usize, slice: Duration) {
    println!(
        "\n| B1 in turns, {TASKS} tasks, {rounds} rounds of {} ms a row | cycles/s | x the floor | Redis command µs/cycle | Redis CPU µs/cycle | client CPU µs/cycle (x the floor's) |\n|---|---|---|---|---|---|",
        slice.as_millis()
    );
    let floor = &sums[FLOOR];
    for (row, s) in sums.iter().enumerate() {
        let (cmd, cpu, client) = s.per_cycle();
        println!(
            "| {} | {:.0} | {:.2} | {cmd:.1} | {cpu:.1} | {client:.1} ({:.2}) |",
            ROWS[row],
            s.rate(),
            s.rate() / floor.rate().max(1e-9),
            client / floor.per_cycle().2.max(1e-9)
        );
        println!(
            r#"{{"bench":"B1-turns","who":"{}","cycles_per_s":{:.1},"redis_cmd_us":{cmd:.2},"redis_cpu_us":{cpu:.2},"client_cpu_us":{client:.2}}}"#,
            ROWS[row],
            s.rate()
        );
    }
    let range = |f: fn(&(f64, f64)) -> f64| {
        let (lo, hi, median) = spread(ratios.iter().map(f).collect());
        format!("{lo:.2}-{hi:.2} (median {median:.2})")
    };
    println!(
        "\nRound by round: `MasterOnly` / the floor {}; default / the confirmed floor {}.",
        range(|r| r.0),
        range(|r| r.1)
    );
}

/// The lowest, the highest and the median (the upper one of an even count) of `values`;
/// zeros when there are none.
fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    match (values.first(), values.last()) {
        (Some(lo), Some(hi)) => (*lo, *hi, values[values.len() / 2]),
        _ => (0.0, 0.0, 0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_is_its_extremes_and_its_middle() {
        assert_eq!(spread(vec![0.9, 0.7, 1.1]), (0.7, 1.1, 0.9));
        assert_eq!(spread(vec![0.8, 0.6, 1.0, 0.9]), (0.6, 1.0, 0.9));
        assert_eq!(spread(Vec::new()), (0.0, 0.0, 0.0));
    }

    #[test]
    fn a_rows_sums_give_its_rate_and_its_costs_per_cycle() {
        let mut sums = Sums::default();
        let before = Sample::default();
        let after = Sample {
            command_us: 300.0,
            server_cpu_us: 600.0,
            client_cpu_us: 900.0,
        };
        let run = |at_stop, total| Run {
            at_stop,
            took: Duration::from_millis(500),
            total,
            cycle_ms: Vec::new(),
        };
        sums.add(&run(40, 50), &before, &after);
        sums.add(&run(60, 70), &before, &after);
        // 100 cycles counted in 1 s; 120 run in all (those that ended after the stop
        // too), which the costs are divided by
        assert_eq!(sums.rate(), 100.0);
        assert_eq!(sums.per_cycle(), (5.0, 10.0, 15.0));
        // a row that never ran costs nothing per cycle, and has no rate
        assert_eq!(Sums::default().per_cycle(), (0.0, 0.0, 0.0));
        assert_eq!(Sums::default().rate(), 0.0);
    }
}
