//! Bootstrap: a rendezvous at the master address where every rank
//! registers its own listen address, then one (or `streams`) TCP
//! connection(s) per pair of ranks; every connection starts with a
//! handshake that carries the join token.
//!
//! Rank 0 listens at MASTER_ADDR:MASTER_PORT. Each rank binds its data
//! listener to an explicit address: the configured one, else MASTER_ADDR's
//! address on rank 0 and, on the others, the local address of the
//! interface their connection to the master went out of.
//!
//! A listener (the master's, and each rank's data listener) reads the
//! hellos of its incoming connections concurrently, each within
//! [`HANDSHAKE_TIMEOUT`], so that a connection without the token, silent
//! or sending anything, holds no job back.

use crate::wire::{read_control, token_eq, write_control, PROTOCOL};
use crate::{Config, RtError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, ErrorKind, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How long an incoming connection has to send its whole hello.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);
/// Hellos a listener reads at once; further connections wait in the
/// kernel's backlog until a handshake ends.
pub const MAX_PENDING_HANDSHAKES: usize = 128;

#[derive(Serialize, Deserialize)]
struct Hello {
    protocol: String,
    token: String,
    rank: u32,
    world_size: u32,
    /// Rendezvous: the rank's data listen address. Data connections: unused.
    addr: String,
    /// Data connections: which stream of the pair this is.
    stream: u32,
}

#[derive(Serialize, Deserialize)]
struct Reply {
    ok: bool,
    error: String,
    addrs: Vec<String>,
}

fn refuse(s: &mut TcpStream, why: String) {
    let _ = write_control(
        s,
        &Reply {
            ok: false,
            error: why,
            addrs: vec![],
        },
    );
}

/// Checks a hello against this job, its token first; `None` when it may join.
fn check_hello(h: &Hello, cfg: &Config) -> Option<String> {
    if !token_eq(&h.token, &cfg.token) {
        return Some("wrong join token (FABRICLAB_TOKEN differs from this job's)".into());
    }
    if h.protocol != PROTOCOL {
        return Some(format!("protocol {:?} is not {PROTOCOL:?}", h.protocol));
    }
    if h.world_size != cfg.world_size {
        return Some(format!(
            "world size {} differs from this job's {}",
            h.world_size, cfg.world_size
        ));
    }
    if h.rank >= cfg.world_size {
        return Some(format!(
            "rank {} is not within 0..{}",
            h.rank, cfg.world_size
        ));
    }
    None
}

pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, RtError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| RtError::input(format!("master_addr: cannot resolve {host:?}: {e}")))?
        .next()
        .ok_or_else(|| RtError::input(format!("master_addr: {host:?} has no address")))
}

/// A connection's reads until `deadline` in all, however its bytes trickle in.
struct Until<'a> {
    s: &'a TcpStream,
    deadline: Instant,
}

impl Read for Until<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(ErrorKind::TimedOut, "handshake deadline"));
        }
        self.s.set_read_timeout(Some(left))?;
        let mut s = self.s;
        s.read(buf)
    }
}

/// Reads the hello of an incoming connection within [`HANDSHAKE_TIMEOUT`]
/// and checks it against this job: the connection and its hello when the
/// job takes it, `None` after refusing it with the reason or dropping a
/// stranger (nothing, or no hello, in time).
fn read_hello(mut s: TcpStream, cfg: &Config) -> Option<(TcpStream, Hello)> {
    s.set_nonblocking(false).ok()?;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT)).ok()?;
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let h: Hello = read_control(&mut Until { s: &s, deadline }).ok()?;
    if let Some(why) = check_hello(&h, cfg) {
        refuse(&mut s, why);
        return None;
    }
    Some((s, h))
}

/// The incoming connections of a non-blocking listener, their hellos read
/// concurrently (a thread each, at most [`MAX_PENDING_HANDSHAKES`] at once).
struct Handshakes<'a> {
    listener: &'a TcpListener,
    cfg: Arc<Config>,
    pending: usize,
    tx: Sender<Option<(TcpStream, Hello)>>,
    rx: Receiver<Option<(TcpStream, Hello)>>,
}

impl<'a> Handshakes<'a> {
    fn new(listener: &'a TcpListener, cfg: &Config) -> Self {
        let (tx, rx) = channel();
        Handshakes {
            listener,
            cfg: Arc::new(cfg.clone()),
            pending: 0,
            tx,
            rx,
        }
    }

    /// The next connection whose hello this job takes, by `deadline`
    /// (waiting for `what`, as errors say).
    fn next(&mut self, deadline: Instant, what: &str) -> Result<(TcpStream, Hello), RtError> {
        loop {
            while self.pending < MAX_PENDING_HANDSHAKES {
                match self.listener.accept() {
                    Ok((s, _)) => self.start(s)?,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => {
                        return Err(RtError::bootstrap(format!(
                            "accept while waiting for {what}: {e}"
                        )))
                    }
                }
            }
            match self.rx.recv_timeout(Duration::from_millis(5)) {
                Ok(done) => {
                    self.pending -= 1;
                    if let Some(joined) = done {
                        return Ok(joined);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("self.tx is alive"),
            }
            if Instant::now() >= deadline {
                return Err(RtError::bootstrap(format!("timed out waiting for {what}")));
            }
        }
    }

    /// Reads connection `s`'s hello on a thread of its own.
    fn start(&mut self, s: TcpStream) -> Result<(), RtError> {
        let (cfg, tx) = (self.cfg.clone(), self.tx.clone());
        thread::Builder::new()
            .name("fabriclab-handshake".into())
            .spawn(move || {
                // the receiver is gone once the listener has all it waited for
                let _ = tx.send(read_hello(s, &cfg));
            })
            .map_err(|e| RtError::bootstrap(format!("cannot start a handshake thread: {e}")))?;
        self.pending += 1;
        Ok(())
    }
}

fn connect_retry(addr: SocketAddr, deadline: Instant, what: &str) -> Result<TcpStream, RtError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(&addr, left.max(Duration::from_millis(10))) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => {
                return Err(RtError::bootstrap(format!(
                    "cannot connect to {what} at {addr}: {e}"
                )))
            }
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The rendezvous: returns every rank's data listen address, indexed by rank.
fn rendezvous(
    cfg: &Config,
    master: SocketAddr,
    deadline: Instant,
) -> Result<(TcpListener, Vec<SocketAddr>), RtError> {
    let n = cfg.world_size;
    if cfg.rank == 0 {
        let ml = TcpListener::bind(master).map_err(|e| {
            RtError::bootstrap(format!(
                "rank 0 cannot listen at master address {master}: {e}"
            ))
        })?;
        let ip = cfg.bind_addr.unwrap_or(master.ip());
        let data = bind_data(ip)?;
        ml.set_nonblocking(true).map_err(RtError::io("listen"))?;
        let mut joined: BTreeMap<u32, (TcpStream, String)> = BTreeMap::new();
        let mut hellos = Handshakes::new(&ml, cfg);
        while (joined.len() as u32) < n - 1 {
            let (mut s, h) = hellos.next(
                deadline,
                &format!(
                    "{} more rank(s) to join the rendezvous",
                    n - 1 - joined.len() as u32
                ),
            )?;
            if h.rank == 0 || joined.contains_key(&h.rank) {
                refuse(&mut s, format!("rank {} has already joined", h.rank));
                continue;
            }
            joined.insert(h.rank, (s, h.addr));
        }
        let mut addrs = vec![data
            .local_addr()
            .map_err(RtError::io("listen"))?
            .to_string()];
        addrs.extend(joined.values().map(|(_, a)| a.clone()));
        for (_, (s, _)) in joined.iter_mut() {
            write_control(
                s,
                &Reply {
                    ok: true,
                    error: String::new(),
                    addrs: addrs.clone(),
                },
            )
            .map_err(|e| RtError::bootstrap(format!("rendezvous reply: {e}")))?;
        }
        Ok((data, parse_addrs(&addrs)?))
    } else {
        let mut s = connect_retry(master, deadline, "the master (rank 0)")?;
        let ip = match cfg.bind_addr {
            Some(ip) => ip,
            None => s.local_addr().map_err(RtError::io("connect"))?.ip(),
        };
        let data = bind_data(ip)?;
        let hello = Hello {
            protocol: PROTOCOL.into(),
            token: cfg.token.clone(),
            rank: cfg.rank,
            world_size: n,
            addr: data
                .local_addr()
                .map_err(RtError::io("listen"))?
                .to_string(),
            stream: 0,
        };
        write_control(&mut s, &hello)
            .map_err(|e| RtError::bootstrap(format!("rendezvous at {master}: {e}")))?;
        let _ = s.set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(10)),
        ));
        let r: Reply = read_control(&mut s)
            .map_err(|e| RtError::bootstrap(format!("rendezvous at {master}: {e}")))?;
        if !r.ok {
            return Err(RtError::refused(format!(
                "rendezvous at {master} refused rank {}: {}",
                cfg.rank, r.error
            )));
        }
        if r.addrs.len() != n as usize {
            return Err(RtError::bootstrap(format!(
                "rendezvous returned {} addresses for {n} ranks",
                r.addrs.len()
            )));
        }
        Ok((data, parse_addrs(&r.addrs)?))
    }
}

fn bind_data(ip: IpAddr) -> Result<TcpListener, RtError> {
    TcpListener::bind((ip, 0))
        .map_err(|e| RtError::bootstrap(format!("cannot listen at {ip}: {e}")))
}

fn parse_addrs(a: &[String]) -> Result<Vec<SocketAddr>, RtError> {
    a.iter()
        .map(|s| {
            s.parse()
                .map_err(|e| RtError::bootstrap(format!("rendezvous address {s:?}: {e}")))
        })
        .collect()
}

/// One established data connection.
pub struct Link {
    pub peer: u32,
    pub stream: u32,
    pub tcp: TcpStream,
}

/// Rendezvous, then connect every pair: the higher rank connects to the
/// lower one's listener. Returns the links sorted by (peer, stream).
pub fn connect_all(cfg: &Config) -> Result<Vec<Link>, RtError> {
    let deadline = Instant::now() + cfg.connect_timeout;
    let master = resolve(&cfg.master_addr, cfg.master_port)?;
    let (listener, addrs) = rendezvous(cfg, master, deadline)?;
    let me = cfg.rank;
    let n = cfg.world_size;
    let s = cfg.streams;
    let expected = (n - 1 - me) * s;
    listener
        .set_nonblocking(true)
        .map_err(RtError::io("listen"))?;
    let acfg = cfg.clone();
    let acceptor = thread::spawn(move || -> Result<Vec<Link>, RtError> {
        let mut got: BTreeMap<(u32, u32), TcpStream> = BTreeMap::new();
        let mut hellos = Handshakes::new(&listener, &acfg);
        while (got.len() as u32) < expected {
            let (mut t, h) = hellos.next(deadline, "peers to connect")?;
            if h.rank <= acfg.rank
                || h.stream >= acfg.streams
                || got.contains_key(&(h.rank, h.stream))
            {
                let why = format!(
                    "unexpected connection from rank {} stream {}",
                    h.rank, h.stream
                );
                refuse(&mut t, why);
                continue;
            }
            write_control(
                &mut t,
                &Reply {
                    ok: true,
                    error: String::new(),
                    addrs: vec![],
                },
            )
            .map_err(|e| RtError::bootstrap(format!("handshake with rank {}: {e}", h.rank)))?;
            got.insert((h.rank, h.stream), t);
        }
        Ok(got
            .into_iter()
            .map(|((peer, stream), tcp)| Link { peer, stream, tcp })
            .collect())
    });
    let mut links = Vec::new();
    for peer in 0..me {
        for stream in 0..s {
            let mut t = connect_retry(addrs[peer as usize], deadline, &format!("rank {peer}"))?;
            let hello = Hello {
                protocol: PROTOCOL.into(),
                token: cfg.token.clone(),
                rank: me,
                world_size: n,
                addr: String::new(),
                stream,
            };
            write_control(&mut t, &hello)
                .map_err(|e| RtError::bootstrap(format!("handshake with rank {peer}: {e}")))?;
            let _ = t.set_read_timeout(Some(cfg.connect_timeout));
            let r: Reply = read_control(&mut t)
                .map_err(|e| RtError::bootstrap(format!("handshake with rank {peer}: {e}")))?;
            if !r.ok {
                return Err(RtError::refused(format!(
                    "rank {peer} refused the connection: {}",
                    r.error
                )));
            }
            links.push(Link {
                peer,
                stream,
                tcp: t,
            });
        }
    }
    let mut acc = acceptor
        .join()
        .map_err(|_| RtError::bootstrap("acceptor thread panicked".into()))??;
    links.append(&mut acc);
    // the read and write timeouts (poll intervals) are set by Conn::start
    for l in &links {
        l.tcp.set_nodelay(true).map_err(RtError::io("nodelay"))?;
    }
    links.sort_by_key(|l| (l.peer, l.stream));
    Ok(links)
}
