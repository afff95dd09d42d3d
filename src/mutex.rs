//! A leaf: the one lock helper every module uses.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, whatever a panic elsewhere left: every value behind these mutexes is
/// whole after each statement that changes it, so a poisoned lock is still sound.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use crate::mutex::lock;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_poisoned_lock_is_still_taken() {
        let m = Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poisons the lock");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
