//! What every benchmark shares: the run's settings and report, percentiles, arguments,
//! and direct connections to the masters.

use std::time::Duration;

use cluster_rwlock::{LockClient, LockConfig};
use fred::prelude::*;
use fred::types::{ClusterHash, CustomCommand};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub(crate) struct Bench {
    pub(crate) seeds: Vec<String>,
    pub(crate) smoke: Option<u64>,
    pub(crate) rows: Vec<(String, String, String, String)>,
}

impl Bench {
    pub(crate) fn secs(&self, full: u64) -> Duration {
        Duration::from_secs(self.smoke.unwrap_or(full).min(full))
    }
    pub(crate) fn count(&self, full: usize) -> usize {
        if self.smoke.is_some() {
            (full / 10).max(5)
        } else {
            full
        }
    }
    pub(crate) fn report(
        &mut self,
        bench: &str,
        metric: &str,
        value: f64,
        unit: &str,
        target: &str,
    ) {
        println!(
            r#"{{"bench":"{bench}","metric":"{metric}","value":{value:.4},"unit":"{unit}","target":"{target}"}}"#
        );
        self.rows.push((
            bench.into(),
            metric.into(),
            format!("{} {unit}", pretty(value)),
            target.into(),
        ));
    }
    pub(crate) async fn client(
        &self,
        prefix: &str,
        tune: impl FnOnce(LockConfig) -> LockConfig,
    ) -> Result<LockClient, BoxError> {
        Ok(
            LockClient::connect(tune(LockConfig::cluster(self.seeds.clone()).prefix(prefix)))
                .await?,
        )
    }
}

pub(crate) fn pretty(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Nearest-rank percentile of sorted values.
pub(crate) fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

pub(crate) fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// `(host, port)` of every master, from CLUSTER NODES.
pub(crate) async fn masters(client: &Client) -> Result<Vec<(String, u16)>, BoxError> {
    let cmd = CustomCommand::new_static("CLUSTER", ClusterHash::Random, false);
    let nodes: String = client.custom(cmd, vec!["NODES"]).await?;
    Ok(nodes
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 8 && f[2].contains("master") && !f[2].contains("fail") {
                let addr = f[1].split('@').next()?;
                let (h, p) = addr.rsplit_once(':')?;
                Some((h.to_string(), p.parse().ok()?))
            } else {
                None
            }
        })
        .collect())
}

pub(crate) async fn node_client(host: &str, port: u16) -> Result<Client, BoxError> {
    let c = Builder::from_config(Config::from_url(&format!("redis://{host}:{port}"))?).build()?;
    c.init().await?;
    Ok(c)
}

/// FCALL calls recorded by every master.
pub(crate) async fn function_calls(client: &Client) -> Result<u64, BoxError> {
    command_calls(client, "fcall").await
}

/// Calls of `command` (lower case, as `INFO commandstats` names it) recorded by every
/// master.
pub(crate) async fn command_calls(client: &Client, command: &str) -> Result<u64, BoxError> {
    let prefix = format!("cmdstat_{command}:");
    let mut total = 0;
    for (h, p) in masters(client).await? {
        let c = node_client(&h, p).await?;
        let info: String = c.info(Some(fred::types::InfoKind::CommandStats)).await?;
        total += info
            .lines()
            .find(|l| l.starts_with(&prefix))
            .and_then(|l| {
                l.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0);
        c.quit().await?;
    }
    Ok(total)
}
