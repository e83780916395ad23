//! A connection's outbound queue for messages other clients cause: Pub/Sub
//! messages and MONITOR lines today, and later keyspace events and
//! tracking invalidations. Publishers append already-encoded frames and never wait
//! on the socket; the connection task (`server::connection`) is woken and
//! writes them out. The queue is bounded by `client-output-buffer-limit`:
//! an append past the limit closes the queue, frees its memory and tells
//! the caller to disconnect the client, as Redis does.
//!
//! Not here: the replies to a client's own commands (they go straight into
//! its `protocol::Reply`; the connection reports how many of their bytes
//! wait, [`Outbox::set_replies`], so that the limit counts the client's
//! whole pending output, as Redis's does), and who subscribes to what
//! (`state::pubsub`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// One class of `client-output-buffer-limit`: bytes, 0 for no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputLimit {
    /// Disconnect as soon as this many bytes wait.
    pub hard: u64,
    /// Disconnect when at least this many bytes waited for longer than
    /// `soft_secs`.
    pub soft: u64,
    /// See `soft`.
    pub soft_secs: u64,
}

impl OutputLimit {
    /// Parses one class (`normal`, `slave`, `pubsub`) out of the canonical
    /// `client-output-buffer-limit` value (`class hard soft seconds ...`).
    pub fn of_class(value: &str, class: &str) -> OutputLimit {
        let words: Vec<&str> = value.split_whitespace().collect();
        for group in words.chunks(4) {
            if let [c, h, s, t] = group {
                if c.eq_ignore_ascii_case(class) {
                    return OutputLimit {
                        hard: h.parse().unwrap_or(0),
                        soft: s.parse().unwrap_or(0),
                        soft_secs: t.parse().unwrap_or(0),
                    };
                }
            }
        }
        OutputLimit::default()
    }
}

/// A hot copy of one class of `client-output-buffer-limit`, read without
/// a lock.
#[derive(Debug, Default)]
pub struct LimitCell([AtomicU64; 3]);

impl LimitCell {
    /// Stores `l`.
    pub fn set(&self, l: OutputLimit) {
        self.0[0].store(l.hard, Ordering::Relaxed);
        self.0[1].store(l.soft, Ordering::Relaxed);
        self.0[2].store(l.soft_secs, Ordering::Relaxed);
    }

    /// The stored limit.
    pub fn get(&self) -> OutputLimit {
        OutputLimit {
            hard: self.0[0].load(Ordering::Relaxed),
            soft: self.0[1].load(Ordering::Relaxed),
            soft_secs: self.0[2].load(Ordering::Relaxed),
        }
    }
}

impl OutputLimit {
    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        self.hard > 0 || self.soft > 0
    }

    /// Whether `used` bytes may be past the limit (hard, or soft, the soft
    /// one needing time as well): a cheap test before [`Outbox::over_limit`].
    pub fn may_exceed(&self, used: usize) -> bool {
        let used = used as u64;
        (self.hard > 0 && used >= self.hard) || (self.soft > 0 && used >= self.soft)
    }
}

/// What [`Outbox::push`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Queued for the connection to write.
    Queued,
    /// The queue is closed (its client is going away): dropped.
    Dropped,
    /// The frame took the queue past its limit: the queue is now closed
    /// and empty, and the caller must disconnect the client.
    OverLimit,
}

#[derive(Debug, Default)]
struct Queue {
    buf: Vec<u8>,
    /// Bytes queued or taken by the connection and not yet written.
    pending: usize,
    /// Since when `pending` has been at or above the soft limit.
    over_soft_since: Option<Instant>,
    closed: bool,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Outbox {
    queue: Mutex<Queue>,
    /// Copy of `Queue::pending`, read without the lock (CLIENT LIST omem,
    /// the connection's check for queued data).
    pending: AtomicUsize,
    /// Bytes of the client's own replies not yet written.
    replies: AtomicUsize,
    /// Signalled when the queue goes from empty to not empty.
    ready: Notify,
}

impl Outbox {
    /// An empty, open queue.
    pub fn new() -> Self {
        Outbox::default()
    }

    /// Appends one frame: the byte `head` then `body` (RESP2 and RESP3
    /// frames of a message differ only in their first byte, `*` or `>`, so
    /// a publisher encodes a message once and passes the head per reader).
    pub fn push(&self, head: u8, body: &[u8], limit: &OutputLimit) -> Pushed {
        let q = self.queue.lock();
        self.queue_locked(q, &[head], body, limit)
    }

    /// Appends `frame` as it is (a transport's frame that needs no head).
    pub fn push_frame(&self, frame: &[u8], limit: &OutputLimit) -> Pushed {
        let q = self.queue.lock();
        self.queue_locked(q, &[], frame, limit)
    }

    /// Writes `frame` straight to the socket with `write` (a write that
    /// never waits, such as `TcpStream::try_write`) when nothing is queued
    /// or being written before it, so that the connection's task is not
    /// woken; what the socket does not take (it would block, or failed:
    /// the task then finds the error) is queued as [`Outbox::push_frame`]
    /// does. The write happens under the queue's lock: it cannot land
    /// between the task's writes of what it took.
    pub fn write_or_push(
        &self,
        frame: &[u8],
        limit: &OutputLimit,
        write: impl FnOnce(&[u8]) -> std::io::Result<usize>,
    ) -> Pushed {
        let q = self.queue.lock();
        if q.closed {
            return Pushed::Dropped;
        }
        let mut rest = frame;
        if q.pending == 0 && self.replies() == 0 {
            if let Ok(n) = write(frame) {
                rest = frame.get(n..).unwrap_or_default();
            }
            if rest.is_empty() {
                return Pushed::Queued;
            }
        }
        self.queue_locked(q, &[], rest, limit)
    }

    fn queue_locked(
        &self,
        mut q: parking_lot::MutexGuard<'_, Queue>,
        head: &[u8],
        body: &[u8],
        limit: &OutputLimit,
    ) -> Pushed {
        if q.closed {
            return Pushed::Dropped;
        }
        let len = head.len() + body.len();
        let used = q.pending + self.replies() + len;
        if Self::exceeds(&mut q, used as u64, limit) {
            Self::close_locked(&mut q);
            self.pending.store(0, Ordering::Relaxed);
            return Pushed::OverLimit;
        }
        let was_empty = q.buf.is_empty();
        q.buf.extend_from_slice(head);
        q.buf.extend_from_slice(body);
        q.pending += len;
        self.pending.store(q.pending, Ordering::Relaxed);
        drop(q);
        if was_empty {
            self.ready.notify_one();
        }
        Pushed::Queued
    }

    /// Whether `used` bytes are past `limit`: the hard limit at once, the
    /// soft one once it has been reached for more than its seconds.
    fn exceeds(q: &mut Queue, used: u64, limit: &OutputLimit) -> bool {
        if limit.hard > 0 && used >= limit.hard {
            return true;
        }
        if limit.soft > 0 && used >= limit.soft {
            let now = Instant::now();
            match q.over_soft_since {
                None => q.over_soft_since = Some(now),
                // Like Redis: over for more than `soft_secs` whole seconds.
                Some(t) => return now.duration_since(t).as_secs() > limit.soft_secs,
            }
        } else {
            q.over_soft_since = None;
        }
        false
    }

    /// Records how many bytes of the client's own replies wait to be
    /// written (they count against the limit with the queue).
    pub fn set_replies(&self, n: usize) {
        self.replies.store(n, Ordering::Relaxed);
    }

    /// See [`Outbox::set_replies`].
    pub fn replies(&self) -> usize {
        self.replies.load(Ordering::Relaxed)
    }

    /// The client's whole pending output: its unwritten replies and the
    /// queue (CLIENT LIST, INFO clients).
    pub fn total(&self) -> usize {
        self.pending() + self.replies()
    }

    /// Checks the client's pending output against `limit` (the soft limit's
    /// clock starts or stops here too); when past it, closes the queue and
    /// returns true: the caller disconnects the client.
    pub fn over_limit(&self, limit: &OutputLimit) -> bool {
        let mut q = self.queue.lock();
        if q.closed {
            return false;
        }
        let used = (q.pending + self.replies()) as u64;
        if !Self::exceeds(&mut q, used, limit) {
            return false;
        }
        Self::close_locked(&mut q);
        self.pending.store(0, Ordering::Relaxed);
        true
    }

    fn close_locked(q: &mut Queue) {
        q.closed = true;
        q.buf = Vec::new();
        q.pending = 0;
        q.over_soft_since = None;
    }

    /// Closes the queue and frees what it holds; later pushes are dropped.
    pub fn close(&self) {
        Self::close_locked(&mut self.queue.lock());
        self.pending.store(0, Ordering::Relaxed);
    }

    /// Bytes queued or being written (CLIENT LIST `omem`).
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Moves the queued frames to the end of `out`; returns how many bytes.
    /// They still count against the limit until [`Outbox::written`].
    pub fn take_into(&self, out: &mut Vec<u8>) -> usize {
        let mut q = self.queue.lock();
        let n = q.buf.len();
        if n > 0 {
            if out.is_empty() && out.capacity() < n {
                std::mem::swap(out, &mut q.buf);
            } else {
                out.extend_from_slice(&q.buf);
                q.buf.clear();
            }
            // A burst's buffer is not kept for the next message.
            if q.buf.capacity() > 64 * 1024 {
                q.buf = Vec::new();
            }
        }
        n
    }

    /// `n` bytes taken with [`Outbox::take_into`] reached the socket.
    pub fn written(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut q = self.queue.lock();
        q.pending = q.pending.saturating_sub(n);
        self.pending.store(q.pending, Ordering::Relaxed);
    }

    /// Completes once frames were queued into an empty queue (or at once,
    /// if that happened since the last wait).
    pub fn ready(&self) -> Notified<'_> {
        self.ready.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_queue_in_order_and_count_until_written() {
        let o = Outbox::new();
        let none = OutputLimit::default();
        assert_eq!(o.push(b'*', b"1\r\n:1\r\n", &none), Pushed::Queued);
        assert_eq!(o.push(b'>', b"1\r\n:2\r\n", &none), Pushed::Queued);
        assert_eq!(o.pending(), 16);
        let mut out = b"+OK\r\n".to_vec();
        assert_eq!(o.take_into(&mut out), 16);
        assert_eq!(out, b"+OK\r\n*1\r\n:1\r\n>1\r\n:2\r\n");
        assert_eq!(o.pending(), 16, "taken but not yet written");
        o.written(16);
        assert_eq!(o.pending(), 0);
    }

    #[test]
    fn a_frame_is_written_straight_only_when_nothing_waits() {
        let o = Outbox::new();
        let none = OutputLimit::default();
        let mut wire = Vec::new();
        // Nothing queued: written, nothing queued.
        o.write_or_push(b"ab", &none, |b| {
            wire.extend_from_slice(b);
            Ok(b.len())
        });
        assert_eq!((wire.as_slice(), o.pending()), (&b"ab"[..], 0));
        // The socket takes one byte: the rest is queued.
        o.write_or_push(b"cd", &none, |b| {
            wire.extend_from_slice(&b[..1]);
            Ok(1)
        });
        assert_eq!((wire.as_slice(), o.pending()), (&b"abc"[..], 1));
        // Something waits: queued behind it, not written.
        o.write_or_push(b"ef", &none, |_| unreachable!());
        let mut out = Vec::new();
        assert_eq!(o.take_into(&mut out), 3);
        assert_eq!(out, b"def");
        // Taken but not yet written: still queued behind it.
        o.write_or_push(b"gh", &none, |_| unreachable!());
        o.written(3);
        out.clear();
        o.take_into(&mut out);
        assert_eq!(out, b"gh");
        o.written(2);
        // Would block: queued.
        o.write_or_push(b"ij", &none, |_| Err(std::io::ErrorKind::WouldBlock.into()));
        assert_eq!(o.pending(), 2);
    }

    #[test]
    fn hard_limit_closes_and_frees() {
        let o = Outbox::new();
        let limit = OutputLimit {
            hard: 100,
            soft: 0,
            soft_secs: 0,
        };
        let body = [b'x'; 39];
        assert_eq!(o.push(b'*', &body, &limit), Pushed::Queued);
        assert_eq!(o.push(b'*', &body, &limit), Pushed::Queued);
        assert_eq!(o.push(b'*', &body, &limit), Pushed::OverLimit);
        assert_eq!(o.pending(), 0);
        assert_eq!(o.push(b'*', b"", &limit), Pushed::Dropped);
        let mut out = Vec::new();
        assert_eq!(o.take_into(&mut out), 0);
    }

    #[test]
    fn soft_limit_needs_time_over_it() {
        let o = Outbox::new();
        let limit = OutputLimit {
            hard: 0,
            soft: 10,
            soft_secs: 1,
        };
        assert_eq!(o.push(b'*', &[b'x'; 20], &limit), Pushed::Queued);
        assert_eq!(o.push(b'*', &[b'x'; 20], &limit), Pushed::Queued);
        // Below the soft limit again: the clock restarts.
        let mut out = Vec::new();
        let n = o.take_into(&mut out);
        o.written(n);
        assert_eq!(o.push(b'*', b"1", &limit), Pushed::Queued);
        assert_eq!(o.queue.lock().over_soft_since, None);
    }

    #[test]
    fn own_replies_count_against_the_limit() {
        let o = Outbox::new();
        let limit = OutputLimit {
            hard: 100,
            soft: 0,
            soft_secs: 0,
        };
        o.set_replies(90);
        assert!(!o.over_limit(&limit));
        assert_eq!(o.total(), 90);
        assert_eq!(o.push(b'*', &[b'x'; 20], &limit), Pushed::OverLimit);
        let o = Outbox::new();
        o.set_replies(100);
        assert!(limit.may_exceed(100));
        assert!(o.over_limit(&limit));
        assert_eq!(o.push(b'*', b"", &limit), Pushed::Dropped);
    }

    #[test]
    fn soft_limit_disconnects_after_its_seconds() {
        let o = Outbox::new();
        let limit = OutputLimit {
            hard: 0,
            soft: 10,
            soft_secs: 0,
        };
        o.set_replies(20);
        assert!(!o.over_limit(&limit), "the clock starts");
        if let Some(t) = o.queue.lock().over_soft_since.as_mut() {
            *t = t
                .checked_sub(std::time::Duration::from_secs(2))
                .unwrap_or(*t);
        }
        assert!(o.over_limit(&limit));
    }

    #[test]
    fn limits_parse_from_the_config_value() {
        let v = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";
        assert_eq!(
            OutputLimit::of_class(v, "pubsub"),
            OutputLimit {
                hard: 33554432,
                soft: 8388608,
                soft_secs: 60
            }
        );
        assert_eq!(OutputLimit::of_class(v, "normal"), OutputLimit::default());
    }
}
