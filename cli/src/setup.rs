//! `setup`: load (or upgrade) the lock's function library on every master, once, as a
//! user allowed `FUNCTION LOAD`, for clients whose user may only call it.

use cluster_rwlock::LockClient;

use crate::args::Cli;

/// Loads the library where it is missing or older, and prints what each master had.
pub async fn setup(cli: &Cli) -> i32 {
    let config = match crate::connect::config(cli).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cluster-rwlock: {}", crate::shown::escaped(&e.to_string()));
            return crate::code::USAGE;
        }
    };
    match LockClient::setup(&config).await {
        Ok(found) => {
            // (the loading is done: a closed pipe ends the listing, status 0)
            for (master, setup) in found {
                say!("{master}: {setup}");
            }
            0
        }
        Err(e) => crate::code::fail("setup", &e),
    }
}
