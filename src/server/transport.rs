//! What a connection reads from and writes to: a plain TCP socket or a TLS
//! session over one. The connection loop (`connection`) is generic over
//! [`Transport`], so each kind gets its own compiled copy of the loop and
//! the plain one pays nothing for TLS.

use std::future::Future;
use std::io::{self, Read};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// A client's byte stream, as the connection loop uses it.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Whether written bytes may wait inside the transport (TLS records
    /// not yet on the socket) until it is flushed.
    const BUFFERS_WRITES: bool;

    /// The TCP socket underneath (addresses, options, descriptor).
    fn tcp(&self) -> &TcpStream;

    /// Writes what the transport takes without waiting; `WouldBlock` when
    /// it takes nothing.
    fn try_write_now(&mut self, buf: &[u8]) -> io::Result<usize>;

    /// Waits until the transport takes some of `buf`, and says how much.
    /// Cancel-safe: dropped before it finishes, it took nothing.
    fn write_some<'a>(
        &'a mut self,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a;

    /// Reads from the socket now, without waiting and past tokio's
    /// readiness (which may not have seen a close yet): `Ok(0)` when the
    /// peer has closed, `WouldBlock` when nothing can be said or read.
    fn read_now(&mut self, chunk: &mut [u8]) -> io::Result<usize>;

    /// The socket, let go by this worker's driver, for another worker's
    /// to take (`TcpStream::from_std`). A TLS session does not move.
    fn detach(self) -> io::Result<std::net::TcpStream>;
}

impl Transport for TcpStream {
    const BUFFERS_WRITES: bool = false;

    fn tcp(&self) -> &TcpStream {
        self
    }

    fn try_write_now(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.try_write(buf)
    }

    async fn write_some<'a>(&'a mut self, buf: &'a [u8]) -> io::Result<usize> {
        loop {
            self.writable().await?;
            match self.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
        }
    }

    fn read_now(&mut self, chunk: &mut [u8]) -> io::Result<usize> {
        let sock = socket2::SockRef::from(&*self);
        (&*sock).read(chunk)
    }

    fn detach(self) -> io::Result<std::net::TcpStream> {
        self.into_std()
    }
}

impl Transport for TlsStream<TcpStream> {
    const BUFFERS_WRITES: bool = true;

    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }

    fn try_write_now(&mut self, buf: &[u8]) -> io::Result<usize> {
        // One poll with a waker that does nothing: whatever waits after
        // this is polled again, with the task's own waker, by
        // `write_some` or the flush.
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match Pin::new(&mut *self).poll_write(&mut cx, buf) {
            Poll::Ready(r) => {
                let _ = Pin::new(&mut *self).poll_flush(&mut cx);
                r
            }
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn write_some<'a>(
        &'a mut self,
        buf: &'a [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        // tokio-rustls answers Pending only when its buffer took nothing.
        self.write(buf)
    }

    fn read_now(&mut self, _chunk: &mut [u8]) -> io::Result<usize> {
        // The socket's bytes are TLS records for rustls to read: only
        // look whether the peer has closed.
        let sock = socket2::SockRef::from(self.tcp());
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        match sock.peek(&mut probe)? {
            0 => Ok(0),
            _ => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn detach(self) -> io::Result<std::net::TcpStream> {
        // rustls's session state lives beside the socket: it stays where
        // it is (TLS connections get no seat).
        Err(io::ErrorKind::Unsupported.into())
    }
}
