//! Moving the client listeners at run time: CONFIG SET `port` / `tls-port`
//! binds the new sockets here, where it can still refuse the change (as
//! Redis's `changeListenPort`: the new port is bound before the old one is
//! closed, and a port that can't be bound leaves the old listener serving),
//! and hands them to the server's listener task, which swaps the accept
//! loops. What accepts clients is `server`'s; this is only the hand-over.

use std::net::TcpListener;

use parking_lot::Mutex;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// Which listener a change is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `port`: plain TCP.
    Plain,
    /// `tls-port`.
    Tls,
}

/// New sockets for one kind of listener (none: close it).
pub struct Rebind {
    pub kind: Kind,
    pub sockets: Vec<TcpListener>,
}

/// The channel to the server's listener task.
#[derive(Default)]
pub struct Listeners {
    tx: Mutex<Option<UnboundedSender<Rebind>>>,
}

impl Listeners {
    /// Called once by the listener task: where changes will arrive.
    pub fn subscribe(&self) -> UnboundedReceiver<Rebind> {
        let (tx, rx) = unbounded_channel();
        *self.tx.lock() = Some(tx);
        rx
    }

    /// Moves the `kind` listener to `port` on every `bind` address (0:
    /// closes it). Fails with Redis's reason, changing nothing, when an
    /// address can't be bound (an address written `-addr` may be missing,
    /// as at start-up) or no listener task runs.
    pub fn rebind(&self, kind: Kind, binds: &[String], port: u16) -> Result<(), String> {
        let refused = "Unable to listen on this port. Check server logs.".to_string();
        let mut sockets = Vec::new();
        if port != 0 {
            for addr in binds {
                let optional = addr.starts_with('-');
                let addr = addr.trim_start_matches('-');
                match bind(addr, port) {
                    Ok(l) => sockets.push(l),
                    Err(e) if optional && e.kind() == std::io::ErrorKind::AddrNotAvailable => {}
                    Err(e) => {
                        tracing::warn!("Failed listening on port {port} (tcp), aborting: {e}");
                        return Err(refused);
                    }
                }
            }
        }
        let tx = self.tx.lock();
        match tx.as_ref().map(|tx| tx.send(Rebind { kind, sockets })) {
            Some(Ok(())) => Ok(()),
            _ => Err(refused),
        }
    }
}

fn bind(addr: &str, port: u16) -> std::io::Result<TcpListener> {
    // std sets SO_REUSEADDR on Unix, as tokio's bind does at start-up.
    let l = TcpListener::bind((addr, port))?;
    l.set_nonblocking(true)?;
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_is_refused_and_nothing_is_sent() {
        let l = Listeners::default();
        let mut rx = l.subscribe();
        let taken = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let port = taken.local_addr().expect("addr").port();
        let binds = vec!["127.0.0.1".to_string()];
        let e = l.rebind(Kind::Plain, &binds, port);
        assert_eq!(
            e,
            Err("Unable to listen on this port. Check server logs.".into())
        );
        assert!(rx.try_recv().is_err());
        assert!(l.rebind(Kind::Tls, &binds, 0).is_ok());
        let r = rx.try_recv().expect("a rebind");
        assert!(r.kind == Kind::Tls && r.sockets.is_empty());
    }
}
