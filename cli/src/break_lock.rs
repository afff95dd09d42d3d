//! `break`: an operator removes a stuck lock's holds (what would go, without `--yes`).

use cluster_rwlock::LockClient;

use crate::args::BreakArgs;
use crate::clock::secs;
use crate::fail;
use crate::inspect::lock_and_state;
use crate::shown::escaped;

/// `break`: what would go (without `--yes`), or the break itself.
pub async fn break_lock(client: &LockClient, a: &BreakArgs) -> i32 {
    let (_, s) = match lock_and_state(client, &a.name).await {
        Ok(found) => found,
        Err(code) => return code,
    };
    let going: Vec<_> = s
        .holders
        .iter()
        .filter(|h| a.owner.as_deref().is_none_or(|o| o == h.owner))
        .collect();
    let whose = a
        .owner
        .as_deref()
        .map_or(String::new(), |o| format!(" of owner {}", escaped(o)));
    if going.is_empty() {
        say!("nothing to break: {} has no hold{whose}", escaped(&a.name));
        return crate::code::NOTHING_HELD;
    }
    if !a.yes {
        say!(
            "would remove {} hold(s) of {} owner(s) of {} (run again with --yes):",
            going.iter().map(|h| h.count).sum::<u32>(),
            going.len(),
            escaped(&a.name)
        );
        for h in going {
            say!(
                "  {}  {}  {}  held {}  lease left {}",
                escaped(h.client_name().unwrap_or("-")),
                escaped(&h.owner),
                h.mode.as_str(),
                secs(h.held_for),
                secs(h.lease_left)
            );
        }
        return 0;
    }
    match client.force_release(&a.name, a.owner.as_deref()).await {
        // (its holds ran out or were released since the look above)
        Ok(r) if r.holds_removed == 0 => {
            say!(
                "nothing to break: {} had no hold{whose}{}",
                escaped(&a.name),
                r.fence
                    .map_or(String::new(), |f| format!(" (its fence is now {f})"))
            );
            crate::code::NOTHING_HELD
        }
        Ok(r) => {
            say!(
                "broke {}: {} hold(s) removed, fence raised to {}; the holders learn it at their next renewal",
                escaped(&a.name),
                r.holds_removed,
                r.fence.map_or("-".into(), |f| f.to_string())
            );
            0
        }
        Err(e) => fail(&format!("cannot break {}", a.name), &e),
    }
}
