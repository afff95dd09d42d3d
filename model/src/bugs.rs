//! Seeded bugs: each one a change the checker must catch, with the property it must
//! find broken. A bug in the functions is a patch of the library's text (each of its
//! replacements must match exactly once, so that a change of the shipped text that
//! moves the patched lines fails loudly instead of checking an unpatched library); a bug
//! in the client is a flag the model's client reads.

/// A seeded bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// The client believes a grant as soon as the function answers, before its `WAIT`
    /// (rule 3 of "What a client must do").
    BelieveBeforeWait,
    /// A release that hands the lock to a queued writer gives it the last fence instead
    /// of raising it.
    HandoffKeepsFence,
    /// A renewal answers every hold it is asked about as still held, without looking at
    /// the owner's entry (a hold broken or run out is "renewed").
    RenewWithoutOwnerCheck,
    /// A hand-off's claim window never lapses (the dead-waiter defect of revision 7: a
    /// waiter that died holds the lock for its place's lease).
    PlaceNeverLapses,
    /// A guarded call runs its commands whether or not the caller's hold is there.
    GuardedWithoutHold,
    /// A vouch counts from the moment the majority is asked, not from when it last heard
    /// from the master (a master cut off a while ago looks as good as one heard now).
    VouchIgnoresAge,
}

impl Bug {
    /// Every seeded bug.
    pub const ALL: [Bug; 6] = [
        Bug::BelieveBeforeWait,
        Bug::HandoffKeepsFence,
        Bug::RenewWithoutOwnerCheck,
        Bug::PlaceNeverLapses,
        Bug::GuardedWithoutHold,
        Bug::VouchIgnoresAge,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Bug::BelieveBeforeWait => "believe-before-wait",
            Bug::HandoffKeepsFence => "handoff-keeps-fence",
            Bug::RenewWithoutOwnerCheck => "renew-without-owner-check",
            Bug::PlaceNeverLapses => "place-never-lapses",
            Bug::GuardedWithoutHold => "guarded-without-hold",
            Bug::VouchIgnoresAge => "vouch-ignores-age",
        }
    }

    /// The bug of that name.
    pub fn parse(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The property the checker must find broken.
    pub fn breaks(self) -> &'static str {
        match self {
            Bug::BelieveBeforeWait => crate::properties::EXCLUSION,
            Bug::HandoffKeepsFence => crate::properties::FENCE_ORDER,
            Bug::RenewWithoutOwnerCheck => crate::properties::EXCLUSION,
            Bug::PlaceNeverLapses => crate::properties::NO_NEEDLESS_WAIT,
            Bug::GuardedWithoutHold => crate::properties::GUARDED_UNDER_HOLD,
            Bug::VouchIgnoresAge => crate::properties::FENCE_ORDER,
        }
    }

    /// The scenario that gives it the faults it needs to show.
    pub fn scenario(self) -> &'static str {
        match self {
            Bug::BelieveBeforeWait => "failover",
            Bug::HandoffKeepsFence => "dead",
            Bug::RenewWithoutOwnerCheck => "break",
            Bug::PlaceNeverLapses => "dead",
            Bug::GuardedWithoutHold => "break",
            Bug::VouchIgnoresAge => "silent",
        }
    }

    /// The replacements it makes in the library's text: (what, by what).
    fn patches(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Bug::BelieveBeforeWait | Bug::VouchIgnoresAge => &[],
            Bug::HandoffKeepsFence => &[
                (
                    "local function next_fence()\n  fence = fence_after(fence, now_us)",
                    "local HANDING = false\nlocal function next_fence()\n  if HANDING then return fmt(fence or 0) end\n  fence = fence_after(fence, now_us)",
                ),
                (
                    "      local f = grant(o, nil, 'w', q.id, math.min(q.lease, q.deadline - now))",
                    "      HANDING = true\n      local f = grant(o, nil, 'w', q.id, math.min(q.lease, q.deadline - now))\n      HANDING = false",
                ),
                // the release's fast path hands over as well (fast_release.lua)
                (
                    "  local f = fmt(fence_after(fence + 0, now_us))",
                    "  local f = fmt(fence + 0)",
                ),
            ],
            Bug::RenewWithoutOwnerCheck => &[(
                "      if e == nil then\n        out[i] = ''",
                "      if e == nil then\n        local all = {}\n        for id in pairs(named[i]) do all[#all + 1] = id end\n        out[i] = table.concat(all, ' ')",
            )],
            Bug::PlaceNeverLapses => &[(
                "\nlocal CLAIM_MS = 1000\n",
                "\nlocal CLAIM_MS = 1000000000\n",
            )],
            Bug::GuardedWithoutHold => &[(
                "  if hold == nil then return {2} end\n",
                "  if hold == nil then hold = {'w', id, '0', now, 0} end\n",
            )],
        }
    }

    /// Whether the model's client skips the `WAIT` before believing.
    pub fn client_skips_wait(bug: Option<Bug>) -> bool {
        bug == Some(Bug::BelieveBeforeWait)
    }

    /// Whether the model's client takes the majority's word as if it had heard from
    /// the master just now.
    pub fn vouch_ignores_age(bug: Option<Bug>) -> bool {
        bug == Some(Bug::VouchIgnoresAge)
    }
}

/// The library's text with `bug`'s patches (the shipped text when `None`).
pub fn library_text(bug: Option<Bug>) -> Result<String, String> {
    let mut text = cluster_rwlock::operator::library::TEXT.to_string();
    for (from, to) in bug.map(Bug::patches).unwrap_or(&[]) {
        let found = text.matches(from).count();
        if found != 1 {
            return Err(format!(
                "seeded bug {}: its patch matches {found} times, not once: {from:?}",
                bug.map(Bug::name).unwrap_or("-")
            ));
        }
        text = text.replacen(from, to, 1);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_patch_applies_and_the_library_loads() {
        for bug in Bug::ALL {
            let text = library_text(Some(bug)).unwrap();
            crate::lua::Engine::load(&text).unwrap_or_else(|e| panic!("{}: {e}", bug.name()));
            assert_eq!(Bug::parse(bug.name()), Some(bug));
        }
        assert_eq!(
            library_text(None).unwrap(),
            cluster_rwlock::operator::library::TEXT
        );
    }
}
