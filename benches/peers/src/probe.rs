//! What a row costs: Redis time and CPU per cycle from the masters' `INFO`, and this
//! process's CPU.

use std::time::Duration;

use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

use crate::uncontended::cluster_client;
use crate::BoxError;

/// The `cmdstat_` lines of an `INFO` reply: each command's name and one of its fields
/// (`calls`, `usec`, ...) as a number.
pub(crate) fn cmdstats<'a>(
    info: &'a str,
    field: &'a str,
) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    info.lines().filter_map(move |line| {
        let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
        let value = fields
            .split(',')
            .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))?
            .parse()
            .ok()?;
        Some((name, value))
    })
}

/// Counters of the servers and of this process at one moment.
#[derive(Clone, Copy, Default)]
pub(crate) struct Sample {
    /// Sum over the masters of `INFO commandstats` usec of the commands clients send
    /// (FCALL, EVALSHA, EVAL, SET: the calls a function or script makes are inside its
    /// time).
    pub(crate) command_us: f64,
    /// Sum over the nodes of `INFO cpu` used_cpu_user + used_cpu_sys, in µs.
    pub(crate) server_cpu_us: f64,
    /// utime + stime of this process, in µs.
    pub(crate) client_cpu_us: f64,
}

/// One plain connection per node of the cluster, to read `INFO`.
pub(crate) struct Probe {
    /// (connection, is a master)
    pub(crate) nodes: Vec<(Client, bool)>,
}

impl Probe {
    /// The connections to the masters.
    pub(crate) fn masters(&self) -> Vec<Client> {
        self.nodes
            .iter()
            .filter(|(_, m)| *m)
            .map(|(c, _)| c.clone())
            .collect()
    }

    pub(crate) async fn new(seed: &str) -> Result<Probe, BoxError> {
        let fred = cluster_client(seed).await?;
        let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
        let text: String = fred.custom(cmd, vec!["NODES"]).await?;
        let _ = fred.quit().await;
        let mut nodes = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            let master = flags.contains("master");
            let addr = addr.split('@').next().unwrap_or(addr);
            let node =
                Builder::from_config(Config::from_url(&format!("redis://{addr}"))?).build()?;
            node.init().await?;
            nodes.push((node, master));
        }
        Ok(Probe { nodes })
    }

    pub(crate) async fn sample(&self) -> Sample {
        let mut s = Sample {
            client_cpu_us: client_cpu_us(),
            ..Sample::default()
        };
        for (node, master) in &self.nodes {
            let cmd = CustomCommand::new_static("INFO", ClusterHash::FirstKey, false);
            let info: String = node
                .custom(cmd, vec!["everything"])
                .await
                .unwrap_or_default();
            if *master {
                s.command_us += cmdstats(&info, "usec")
                    .filter(|(name, _)| {
                        ["fcall", "fcall_ro", "evalsha", "evalsha_ro", "eval", "set"].contains(name)
                    })
                    .map(|(_, usec)| usec)
                    .sum::<f64>();
            }
            for line in info.lines() {
                if let Some(v) = line
                    .strip_prefix("used_cpu_user:")
                    .or_else(|| line.strip_prefix("used_cpu_sys:"))
                {
                    s.server_cpu_us += v.trim().parse::<f64>().unwrap_or(0.0) * 1e6;
                }
            }
        }
        s
    }
}

/// utime + stime of this process from /proc/self/stat, in µs (100 ticks per second).
pub(crate) fn client_cpu_us() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // the fields after the command name, which is in parentheses
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ')'
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) * 10_000.0
}

pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) rate: f64,
    /// per cycle: Redis command time, Redis CPU, client CPU (µs)
    pub(crate) per_cycle: (f64, f64, f64),
}

pub(crate) async fn measured<Fut>(
    probe: &Probe,
    name: &str,
    secs: Duration,
    run: Fut,
) -> Result<Row, BoxError>
where
    Fut: std::future::Future<Output = Result<f64, BoxError>>,
{
    let before = probe.sample().await;
    let rate = run.await?;
    let after = probe.sample().await;
    let cycles = (rate * secs.as_secs_f64()).max(1.0);
    Ok(Row {
        name: name.to_string(),
        rate,
        per_cycle: (
            (after.command_us - before.command_us) / cycles,
            (after.server_cpu_us - before.server_cpu_us) / cycles,
            (after.client_cpu_us - before.client_cpu_us) / cycles,
        ),
    })
}
