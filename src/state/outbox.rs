//! A connection's outbound queue for messages other clients cause: Pub/Sub
//! messages today, and later keyspace events, MONITOR lines and tracking
//! invalidations. Publishers append already-encoded frames and never wait
//! on the socket; the connection task (`server::connection`) is woken and
//! writes them out. The queue is bounded by `client-output-buffer-limit`:
//! an append past the limit closes the queue, frees its memory and tells
//! the caller to disconnect the client, as Redis does.
//!
//! Not here: the replies to a client's own commands (they go straight into
//! its `protocol::Reply`), and who subscribes to what (`state::pubsub`).

use std::sync::atomic::{AtomicUsize, Ordering};
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
        let mut q = self.queue.lock();
        if q.closed {
            return Pushed::Dropped;
        }
        let used = (q.pending + 1 + body.len()) as u64;
        if limit.hard > 0 && used >= limit.hard {
            Self::close_locked(&mut q);
            self.pending.store(0, Ordering::Relaxed);
            return Pushed::OverLimit;
        }
        if limit.soft > 0 && used >= limit.soft {
            let now = Instant::now();
            match q.over_soft_since {
                None => q.over_soft_since = Some(now),
                // Like Redis: over for more than `soft_secs` whole seconds.
                Some(t) if now.duration_since(t).as_secs() > limit.soft_secs => {
                    Self::close_locked(&mut q);
                    self.pending.store(0, Ordering::Relaxed);
                    return Pushed::OverLimit;
                }
                Some(_) => {}
            }
        } else {
            q.over_soft_since = None;
        }
        let was_empty = q.buf.is_empty();
        q.buf.push(head);
        q.buf.extend_from_slice(body);
        q.pending += 1 + body.len();
        self.pending.store(q.pending, Ordering::Relaxed);
        drop(q);
        if was_empty {
            self.ready.notify_one();
        }
        Pushed::Queued
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
