//! From the URL a user typed to a lock client: any node of a cluster works as a seed.

use cluster_rwlock::{LockClient, LockConfig};
use fred::prelude::*;

use crate::args::Cli;

/// Whether the node at `url` runs in cluster mode (`INFO cluster`).
async fn is_cluster_node(url: &str) -> Result<bool, Box<dyn std::error::Error>> {
    let node = Builder::from_config(Config::from_url(url)?)
        .with_connection_config(|c| c.connection_timeout = std::time::Duration::from_secs(5))
        .build()?;
    node.init().await?;
    let cmd =
        fred::types::CustomCommand::new_static("INFO", fred::types::ClusterHash::FirstKey, false);
    let info: String = node.custom(cmd, vec!["cluster"]).await?;
    let _ = node.quit().await;
    Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1"))
}

/// The configuration for `cli`: `redis-cluster://` is a cluster; `redis://` is a cluster
/// seed when the node says so, else one node.
pub async fn config(cli: &Cli) -> Result<LockConfig, Box<dyn std::error::Error>> {
    let url = cli.url.as_str();
    let base = if url.starts_with("redis-cluster://") || url.starts_with("rediss-cluster://") {
        LockConfig::from_url(url)?
    } else if is_cluster_node(url).await? {
        LockConfig::cluster([url])
    } else {
        LockConfig::from_url(url)?
    };
    let config = base.prefix(cli.prefix.as_str()).lease(cli.lease);
    // `run` tells its command the lease is lost, then kills it after `--grace`: the
    // command must be gone before the server's lease can end
    let config = match &cli.command {
        crate::args::Command::Run(a) if a.on_lost == crate::args::OnLost::Term => {
            let margin = config.margin() + a.grace;
            if margin > cli.lease / 2 {
                return Err(format!(
                    "--grace {:?} is too long for --lease {:?}: the command is told at lease/4 + grace before the lease ends, which must be at most half the lease",
                    a.grace, cli.lease
                )
                .into());
            }
            config.clock_margin(margin)
        }
        _ => config,
    };
    Ok(config)
}

/// A connected lock client.
pub async fn client(cli: &Cli) -> Result<LockClient, Box<dyn std::error::Error>> {
    Ok(LockClient::connect(config(cli).await?).await?)
}
