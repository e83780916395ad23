//! When seasonal boards (issue 17) are due to roll over: the server's
//! timer reads this and rolls each due board with `LB.RESET key UNTIL
//! now` (so the roll is logged like any write). Entries are hints: a
//! board deleted or renamed since leaves an entry that rolls nothing, and
//! a board whose timer entry was lost still rolls on its next write and
//! is read as rolled (the commands check the boundary on every access).

use std::collections::BTreeSet;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::engine::leaderboard::Leaderboard;

/// Boundaries to act on: (unix ms, database, key).
#[derive(Debug, Default)]
pub struct SeasonTimers {
    due: Mutex<BTreeSet<(u64, usize, Bytes)>>,
}

impl SeasonTimers {
    /// Asks for board `key` of database `db` to be rolled at `at`.
    pub fn arm(&self, at: u64, db: usize, key: &[u8]) {
        self.due
            .lock()
            .insert((at, db, Bytes::copy_from_slice(key)));
    }

    /// Arms the timer for `board`'s next boundary (nothing for a board
    /// without a season or whose period never ends). Every path that makes
    /// or changes a seasonal board calls this one: LB.CREATE, LB.CONFIG,
    /// LB.RESET and the roll, an RDB load, RESTORE.
    pub fn arm_board(&self, board: &Leaderboard, db: usize, key: &[u8]) {
        if let Some(end) = board.season().and_then(|s| s.end()) {
            self.arm(end, db, key);
        }
    }

    /// Removes and returns the boards due at `now` (at most `max`).
    pub fn take_due(&self, now: u64, max: usize) -> Vec<(usize, Bytes)> {
        let mut due = self.due.lock();
        let mut out = Vec::new();
        while out.len() < max {
            match due.first() {
                Some((at, _, _)) if *at <= now => {}
                _ => break,
            }
            if let Some((_, db, key)) = due.pop_first() {
                out.push((db, key));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_boards_come_out_in_time_order() {
        let t = SeasonTimers::default();
        t.arm(30, 0, b"c");
        t.arm(10, 1, b"a");
        t.arm(20, 0, b"b");
        assert!(t.take_due(9, 10).is_empty());
        let got = t.take_due(25, 10);
        assert_eq!(
            got,
            vec![(1, Bytes::from_static(b"a")), (0, Bytes::from_static(b"b"))]
        );
        assert_eq!(t.take_due(100, 10).len(), 1);
        assert!(t.take_due(100, 10).is_empty());
    }
}
