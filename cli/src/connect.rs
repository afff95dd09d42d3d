//! From the URL a user typed to a lock client: any node of a cluster works as a seed.

use cluster_rwlock::{LockClient, LockConfig};

use crate::args::Cli;

/// The configuration for `cli`: `redis-cluster://` is a cluster; `redis://` is a cluster
/// seed when the node says so, else one node.
pub async fn config(cli: &Cli) -> Result<LockConfig, Box<dyn std::error::Error>> {
    // `redis://` of a cluster node means the cluster: the library asks the node
    let base = LockConfig::from_url(cli.url.as_str())?;
    let base = match &cli.name {
        Some(name) => base.client_name(name.as_str()),
        None => base,
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
