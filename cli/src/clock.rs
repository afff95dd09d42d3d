//! Times as people read them: UTC, to the millisecond.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Fences from 10^15 µs on (September 2001) are taken for server times: every fence this
/// library grants is the server's time in µs at the grant, or one more than the last.
const FIRST_TIME_FENCE: u64 = 1_000_000_000_000_000;

/// `2026-11-25T23:58:12.110Z`
pub fn utc(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// `23:58:12.110`: the time of day of `t`, in UTC.
pub fn time_of_day(t: SystemTime) -> String {
    let full = utc(t);
    // "YYYY-MM-DDTHH:MM:SS.mmmZ": the part between 'T' and 'Z'
    full.get(11..23).unwrap_or(&full).to_string()
}

/// The time of day now, in UTC.
pub fn now() -> String {
    time_of_day(SystemTime::now())
}

/// When a grant under `fence` was made, by the server's clock: `None` for a fence that
/// is not a time (a lock of the test bed's, or of a master whose clock was reset).
pub fn fence_time(fence: u64) -> Option<SystemTime> {
    (fence >= FIRST_TIME_FENCE).then(|| UNIX_EPOCH + Duration::from_micros(fence))
}

/// `1.5 s`
pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_utc_to_the_millisecond() {
        let t = UNIX_EPOCH + Duration::from_micros(1_795_627_472_110_192);
        assert_eq!(utc(t), "2026-11-25T17:24:32.110Z");
        assert_eq!(time_of_day(t), "17:24:32.110");
        assert_eq!(fence_time(1_795_627_472_110_192), Some(t));
        assert_eq!(fence_time(17), None);
        assert_eq!(secs(Duration::from_millis(1_550)), "1.6 s");
        assert_eq!(now().len(), "00:00:00.000".len());
    }
}
