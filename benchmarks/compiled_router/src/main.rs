//! The least a per-request RSocket frame router does, compiled: the feasibility
//! reference for a compiled data plane (docs/FIELD-NOTES.md, "Where lblab's balancer
//! spends its CPU").
//!
//! `lblab-compiled-router HOST:PORT [HOST:PORT ...]` connects once to each backend (with
//! its own SETUP), listens on a free loopback port, prints `lblab-ready {"role": ...,
//! "port": N}`, and does the routing work of `benchmarks/frame_router.py`, on one thread
//! over epoll (mio): each client request frame goes to the next backend in turn with its
//! stream id rewritten, remembered under the backend's stream id; each answer frame goes
//! back the same way and ends the stream. Unlike the Python router, which writes each
//! frame at once, writes are batched as lblab's outbox batches them: every destination
//! gets one `write` per poll iteration. Nothing else: no checks, no lifecycle, no
//! deadlines, no replay copy, no fragments, keepalives or errors.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(usize::MAX);
const READ_CHUNK: usize = 256 * 1024;
const MAX_FRAME: usize = 16 * 1024 * 1024;

struct Conn {
    sock: TcpStream,
    /// Received bytes in `inbuf[..end]`; the rest is room for the next read.
    inbuf: Vec<u8>,
    end: usize,
    out: Vec<u8>,
    out_pos: usize,
    dirty: bool,
    wants_write: bool,
    backend: bool,
    /// A backend's open streams: its stream id -> (client token, client stream id).
    streams: HashMap<u32, (usize, u32)>,
    next_sid: u32,
}

impl Conn {
    fn new(sock: TcpStream, backend: bool) -> Conn {
        Conn {
            sock,
            inbuf: vec![0; READ_CHUNK],
            end: 0,
            out: Vec::with_capacity(READ_CHUNK),
            out_pos: 0,
            dirty: false,
            wants_write: false,
            backend,
            streams: HashMap::new(),
            next_sid: 1,
        }
    }
}

enum Reading {
    /// The buffer filled: the socket may hold more.
    More,
    /// A short read or nothing: the socket is empty (edge-triggered: wait for the next event).
    Drained,
    Closed,
}

struct Router {
    poll: Poll,
    conns: Vec<Option<Conn>>,
    backends: Vec<usize>,
    turn: usize,
    dirty: Vec<usize>,
}

/// The SETUP every backend connection opens with: version 1.0, keepalive 30 s, max
/// lifetime 120 s, metadata composite, data JSON, no payload.
fn setup_frame() -> Vec<u8> {
    let metadata_mime = b"message/x.rsocket.composite-metadata.v0";
    let data_mime = b"application/json";
    let mut body = Vec::new();
    body.extend_from_slice(&0u32.to_be_bytes()); // stream 0
    body.extend_from_slice(&((0x01u16) << 10).to_be_bytes()); // SETUP, no flags
    body.extend_from_slice(&1u16.to_be_bytes());
    body.extend_from_slice(&0u16.to_be_bytes());
    body.extend_from_slice(&30_000u32.to_be_bytes());
    body.extend_from_slice(&120_000u32.to_be_bytes());
    body.push(metadata_mime.len() as u8);
    body.extend_from_slice(metadata_mime);
    body.push(data_mime.len() as u8);
    body.extend_from_slice(data_mime);
    let mut frame = Vec::with_capacity(body.len() + 3);
    let n = body.len() as u32;
    frame.extend_from_slice(&n.to_be_bytes()[1..]);
    frame.extend_from_slice(&body);
    frame
}

fn push_rewritten(out: &mut Vec<u8>, frame: &[u8], sid: u32) {
    out.extend_from_slice(&frame[..3]);
    out.extend_from_slice(&sid.to_be_bytes());
    out.extend_from_slice(&frame[7..]);
}

impl Router {
    fn conn(&mut self, token: usize) -> Option<&mut Conn> {
        self.conns.get_mut(token).and_then(|c| c.as_mut())
    }

    /// Register a connection for reads; its token is its index in `conns`.
    fn add(&mut self, mut sock: TcpStream, backend: bool) -> usize {
        let token = self.conns.len();
        self.poll
            .registry()
            .register(&mut sock, Token(token), Interest::READABLE)
            .expect("register");
        self.conns.push(Some(Conn::new(sock, backend)));
        token
    }

    fn mark(&mut self, token: usize) {
        if let Some(c) = self.conn(token)
            && !c.dirty
        {
            c.dirty = true;
            self.dirty.push(token);
        }
    }

    /// One read into the free end of the buffer (grown when a partial frame fills it).
    fn read_once(&mut self, token: usize) -> Reading {
        let Some(c) = self.conn(token) else {
            return Reading::Closed;
        };
        if c.end == c.inbuf.len() {
            let grown = c.inbuf.len() * 2;
            c.inbuf.resize(grown, 0);
        }
        loop {
            match c.sock.read(&mut c.inbuf[c.end..]) {
                Ok(0) => return Reading::Closed,
                Ok(n) => {
                    c.end += n;
                    return if c.end < c.inbuf.len() {
                        Reading::Drained
                    } else {
                        Reading::More
                    };
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Reading::Drained,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Reading::Closed,
            }
        }
    }

    /// Walk the complete frames in `token`'s buffer and route each.
    fn route(&mut self, token: usize) -> bool {
        let (inbuf, end, backend) = match self.conn(token) {
            Some(c) => (std::mem::take(&mut c.inbuf), c.end, c.backend),
            None => return false,
        };
        let mut pos = 0;
        let mut ok = true;
        while end - pos >= 9 {
            let length = (usize::from(inbuf[pos]) << 16)
                | (usize::from(inbuf[pos + 1]) << 8)
                | usize::from(inbuf[pos + 2]);
            if !(6..=MAX_FRAME).contains(&length) {
                ok = false;
                break;
            }
            if end - pos < 3 + length {
                break;
            }
            let frame = &inbuf[pos..pos + 3 + length];
            let sid = u32::from_be_bytes([frame[3], frame[4], frame[5], frame[6]]) & 0x7fff_ffff;
            if sid != 0 {
                if backend {
                    self.answer(token, frame, sid);
                } else {
                    self.request(token, frame, sid);
                }
            }
            pos += 3 + length;
        }
        let mut rest = inbuf;
        if pos > 0 {
            rest.copy_within(pos..end, 0); // the partial frame left, moved once
        }
        if let Some(c) = self.conn(token) {
            c.inbuf = rest;
            c.end = end - pos;
        }
        ok
    }

    fn request(&mut self, client: usize, frame: &[u8], client_sid: u32) {
        let target = self.backends[self.turn % self.backends.len()];
        self.turn += 1;
        let Some(b) = self.conn(target) else { return };
        let sid = b.next_sid;
        b.next_sid = if sid + 2 <= 0x7fff_ffff { sid + 2 } else { 1 };
        b.streams.insert(sid, (client, client_sid));
        push_rewritten(&mut b.out, frame, sid);
        self.mark(target);
    }

    fn answer(&mut self, backend: usize, frame: &[u8], sid: u32) {
        let Some(b) = self.conn(backend) else { return };
        let Some((client, client_sid)) = b.streams.remove(&sid) else {
            return;
        };
        let Some(c) = self.conn(client) else { return };
        push_rewritten(&mut c.out, frame, client_sid);
        self.mark(client);
    }

    /// Write what is queued; false when the peer is gone.
    fn flush(&mut self, token: usize) -> bool {
        let registry = self.poll.registry();
        let Some(c) = self.conns.get_mut(token).and_then(|c| c.as_mut()) else {
            return true;
        };
        c.dirty = false;
        while c.out_pos < c.out.len() {
            match c.sock.write(&c.out[c.out_pos..]) {
                Ok(n) => c.out_pos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        if c.out_pos == c.out.len() {
            c.out.clear();
            c.out_pos = 0;
        }
        let pending = !c.out.is_empty();
        if pending != c.wants_write {
            c.wants_write = pending;
            let interest = if pending {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            registry
                .reregister(&mut c.sock, Token(token), interest)
                .expect("reregister");
        }
        true
    }

    fn close(&mut self, token: usize) {
        if let Some(c) = self.conns.get_mut(token).and_then(|c| c.take())
            && c.backend
        {
            eprintln!("backend connection {token} closed; stopping");
            std::process::exit(1);
        }
    }
}

fn resolve(arg: &str) -> SocketAddr {
    arg.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| {
            eprintln!("not a HOST:PORT: {arg}");
            std::process::exit(2)
        })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: lblab-compiled-router HOST:PORT [HOST:PORT ...]");
        std::process::exit(2);
    }
    let poll = Poll::new().expect("epoll");
    let mut router = Router {
        poll,
        conns: Vec::new(),
        backends: Vec::new(),
        turn: 0,
        dirty: Vec::new(),
    };
    let setup = setup_frame();
    for arg in &args {
        let stream = std::net::TcpStream::connect(resolve(arg)).unwrap_or_else(|e| {
            eprintln!("cannot connect to {arg}: {e}");
            std::process::exit(1)
        });
        stream.set_nodelay(true).expect("nodelay");
        (&stream).write_all(&setup).expect("setup");
        stream.set_nonblocking(true).expect("nonblocking");
        let token = router.add(TcpStream::from_std(stream), true);
        router.backends.push(token);
    }
    let mut listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    router
        .poll
        .registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .expect("register");
    let port = listener.local_addr().expect("addr").port();
    println!(
        "lblab-ready {{\"role\": \"compiled-router\", \"pid\": {}, \"port\": {port}}}",
        std::process::id()
    );
    std::io::stdout().flush().expect("stdout");

    let mut events = Events::with_capacity(1024);
    loop {
        if let Err(e) = router.poll.poll(&mut events, None) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            panic!("poll: {e}");
        }
        for event in events.iter() {
            if event.token() == LISTENER {
                while let Ok((sock, _)) = listener.accept() {
                    sock.set_nodelay(true).expect("nodelay");
                    router.add(sock, false);
                }
                continue;
            }
            let token = event.token().0;
            if event.is_writable() && !router.flush(token) {
                router.close(token);
                continue;
            }
            if event.is_readable() || event.is_read_closed() {
                loop {
                    let read = router.read_once(token);
                    if !router.route(token) || matches!(read, Reading::Closed) {
                        router.close(token);
                        break;
                    }
                    if matches!(read, Reading::Drained) {
                        break;
                    }
                }
            }
        }
        let dirty = std::mem::take(&mut router.dirty);
        for token in dirty {
            if !router.flush(token) {
                router.close(token);
            }
        }
    }
}
