//! Fixed-size messages with file descriptors attached (`SCM_RIGHTS`) over a Unix stream
//! socket, through rustix's safe `sendmsg`/`recvmsg`.
//!
//! A stream socket has no message boundaries, so every message is exactly
//! [`MESSAGE_BYTES`] long and is read to its end; descriptors arrive with the message's first
//! bytes (the kernel never merges data carrying descriptors with data before it).

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// Bytes of every message.
pub(crate) const MESSAGE_BYTES: usize = 256;
/// The most descriptors one message carries.
pub(crate) const MAX_FDS: usize = 64;

pub(crate) type Message = [u8; MESSAGE_BYTES];

/// Sends `message` with `fds` attached. Blocks until all of it is written.
pub(crate) fn send(
    stream: &UnixStream,
    message: &Message,
    fds: &[BorrowedFd<'_>],
) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::other(format!(
            "{} file descriptors in one message; at most {MAX_FDS}",
            fds.len()
        )));
    }
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len().max(1)))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other(
            "file descriptors do not fit the control buffer",
        ));
    }
    let mut sent = 0;
    while sent < MESSAGE_BYTES {
        let iov = [IoSlice::new(&message[sent..])];
        let n = if sent == 0 {
            sendmsg(stream, &iov, &mut control, SendFlags::NOSIGNAL)
        } else {
            sendmsg(
                stream,
                &iov,
                &mut SendAncillaryBuffer::default(),
                SendFlags::NOSIGNAL,
            )
        }?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        sent += n;
    }
    Ok(())
}

/// What [`receive`] found.
pub(crate) enum Received {
    /// A whole message and the descriptors that came with it.
    Message(Box<Message>, Vec<OwnedFd>),
    /// Nothing waiting (only when not blocking).
    Nothing,
    /// The other end closed the socket.
    Closed,
}

/// Receives one message. Without `block`, returns [`Received::Nothing`] if none has begun to
/// arrive; a message that has begun is always read to its end.
pub(crate) fn receive(stream: &UnixStream, block: bool) -> io::Result<Received> {
    let mut message = Box::new([0u8; MESSAGE_BYTES]);
    let mut fds = Vec::new();
    let mut got = 0;
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    while got < MESSAGE_BYTES {
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut iov = [IoSliceMut::new(&mut message[got..])];
        let mut flags = RecvFlags::CMSG_CLOEXEC;
        if !block && got == 0 {
            flags |= RecvFlags::DONTWAIT;
        }
        let n = match recvmsg(stream, &mut iov, &mut control, flags) {
            Ok(received) => received.bytes,
            Err(rustix::io::Errno::AGAIN) if !block && got == 0 => return Ok(Received::Nothing),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        for ancillary in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = ancillary {
                fds.extend(received);
            }
        }
        if n == 0 {
            return if got == 0 {
                Ok(Received::Closed)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the socket closed {got} bytes into a {MESSAGE_BYTES}-byte message"),
                ))
            };
        }
        got += n;
    }
    Ok(Received::Message(message, fds))
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn messages_carry_descriptors_across_a_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = tempfile_with(b"sluice");
        let mut message = [0u8; MESSAGE_BYTES];
        message[0] = 42;
        send(&a, &message, &[file.as_fd(), file.as_fd()]).unwrap();
        send(&a, &[7; MESSAGE_BYTES], &[]).unwrap();
        let Received::Message(got, fds) = receive(&b, true).unwrap() else {
            panic!("no message")
        };
        assert_eq!(got[0], 42);
        assert_eq!(fds.len(), 2);
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::fs::File::from(fds.into_iter().next().unwrap()),
            &mut text,
        )
        .unwrap();
        assert_eq!(text, "sluice");
        let Received::Message(got, fds) = receive(&b, false).unwrap() else {
            panic!("no second message")
        };
        assert_eq!((got[5], fds.len()), (7, 0));
        assert!(matches!(receive(&b, false).unwrap(), Received::Nothing));
        drop(a);
        assert!(matches!(receive(&b, true).unwrap(), Received::Closed));
    }

    fn tempfile_with(bytes: &[u8]) -> std::fs::File {
        let path = std::env::temp_dir().join(format!("sluice-fd-passing-{}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }
}
