//! The scripted streaming server of `selfbench` (a separate bench360 process, `selfbench
//! --serve`): every request answered on a fixed schedule, every event's send time logged —
//! the truth the client's measurements are compared with — and the OS helpers both sides use.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

/// The kernel's counters of connections refused at a full accept queue
/// (`TcpExt: ListenOverflows + ListenDrops`), machine-wide.
pub(super) fn listen_drops() -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .filter(|(n, _)| *n == "ListenOverflows" || *n == "ListenDrops")
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// What the scripted server did for one request (its log line).
#[derive(Debug, Clone)]
pub(super) struct Truth {
    pub arrive_ns: i64,
    pub end_ns: i64,
    pub sends: Vec<i64>,
}

pub(super) fn read_truth(path: &std::path::Path) -> std::collections::HashMap<u32, Truth> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let id: u32 = it.next()?.parse().ok()?;
            let nums: Vec<i64> = it.map(|x| x.parse().ok()).collect::<Option<_>>()?;
            (nums.len() >= 3).then(|| {
                (
                    id,
                    Truth {
                        arrive_ns: nums[1],
                        end_ns: nums[2],
                        sends: nums[3..].to_vec(),
                    },
                )
            })
        })
        .collect()
}

pub(super) fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid out-pointer; setrlimit only raises the soft limit to the hard one.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// CLOCK_MONOTONIC in ns: the clock `Instant` reads on Linux, shared by both processes.
pub(crate) fn mono_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// One SSE event of the scripted server: a chat completion chunk with these fields.
fn event(fields: &str) -> String {
    format!("data: {{\"object\":\"chat.completion.chunk\",\"model\":\"scripted\",{fields}}}\n\n")
}

/// Pins the calling thread (and the threads it creates afterwards) to these CPUs.
pub(crate) fn pin(cpus: &[usize]) -> anyhow::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: set is a plain bit set, zeroed then filled with CPU_SET; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            anyhow::ensure!(c < libc::CPU_SETSIZE as usize, "CPU {c} out of range");
            libc::CPU_SET(c, &mut set);
        }
        anyhow::ensure!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0,
            "cannot pin to CPUs {cpus:?}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// The scripted server: runs until killed. With `log`, one line per finished request:
/// `request_id accept_ns arrive_ns end_ns send_ns_1 … send_ns_N` (CLOCK_MONOTONIC ns;
/// request_id from the `x-request-id` header or `-`; send_ns_k = when content event k was
/// handed to the kernel) — the truth the client's measurements are compared with.
pub(crate) fn serve(
    port: u16,
    tokens: u32,
    ttft_ms: f64,
    itl_ms: f64,
    log: Option<&std::path::Path>,
    cpus: &[usize],
    keep_alive: bool,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    raise_fd_limit();
    pin(cpus)?;
    let log = match log {
        // Appending: selfbench truncates the log between stream counts, and every write must
        // land at the new end, not at this process's old offset.
        Some(p) => Some(Arc::new(std::sync::Mutex::new(std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?,
        )))),
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // A deep accept queue: a burst of new connections must not meet SYN drops.
        let sock = tokio::net::TcpSocket::new_v4()?;
        sock.set_reuseaddr(true)?;
        sock.bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))?;
        let listener = sock.listen(8192)?;
        loop {
            let (mut sock, _) = listener.accept().await?;
            let accept_ns = mono_ns();
            let _ = sock.set_nodelay(true);
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf: Vec<u8> = Vec::with_capacity(4096);
                let mut tmp = [0u8; 4096];
                let mut accept_ns = accept_ns;
                loop {
                    // Read one request's head and body.
                    let mut id = String::from("-");
                    let (consumed, close) = loop {
                        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                            let len = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()))
                                .unwrap_or(0);
                            if let Some(v) = head.lines().find_map(|l| l.strip_prefix("x-request-id:")) {
                                let v = v.trim();
                                if !v.is_empty() && v.bytes().all(|b| b.is_ascii_graphic()) {
                                    id = v.to_string();
                                }
                            }
                            if buf.len() >= end + 4 + len {
                                let close = head.lines().any(|l| l.starts_with("connection:") && l.contains("close"));
                                break (end + 4 + len, close);
                            }
                        }
                        let n = match sock.read(&mut tmp).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        buf.extend_from_slice(&tmp[..n]);
                    };
                    buf.drain(..consumed);
                    // Kept alive only when asked to and the client did not ask to close; the
                    // body is then chunked (its end must be marked), else closed after.
                    let keep = keep_alive && !close;
                    let frame = |ev: &str| -> String {
                        if keep {
                            format!("{:x}\r\n{ev}\r\n", ev.len())
                        } else {
                            ev.to_string()
                        }
                    };
                    // The schedule starts when the request has fully arrived.
                    let arrive_ns = mono_ns();
                    let t0 = tokio::time::Instant::now();
                    let mut out = String::from(if keep {
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                    } else {
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                    });
                    out.push_str(&frame(&event(r#""choices":[{"index":0,"delta":{"role":"assistant"}}]"#)));
                    if sock.write_all(out.as_bytes()).await.is_err() {
                        return;
                    }
                    let ev = frame(&event(r#""choices":[{"index":0,"delta":{"content":"tok "}}]"#));
                    let mut sends = Vec::with_capacity(tokens as usize);
                    for k in 0..tokens {
                        let at = t0 + Duration::from_secs_f64((ttft_ms + k as f64 * itl_ms) / 1000.0);
                        tokio::time::sleep_until(at).await;
                        if sock.write_all(ev.as_bytes()).await.is_err() {
                            return;
                        }
                        sends.push(mono_ns());
                    }
                    let mut tail = frame(&format!(
                        "{}{}data: [DONE]\n\n",
                        event(r#""choices":[{"index":0,"delta":{},"finish_reason":"length"}]"#),
                        event(&format!(r#""choices":[],"usage":{{"prompt_tokens":8,"completion_tokens":{tokens}}}"#)),
                    ));
                    if keep {
                        tail.push_str("0\r\n\r\n");
                    }
                    let ok = sock.write_all(tail.as_bytes()).await.is_ok();
                    if !keep {
                        let _ = sock.shutdown().await;
                    }
                    let end_ns = mono_ns();
                    if let Some(log) = &log {
                        let mut line = format!("{id} {accept_ns} {arrive_ns} {end_ns}");
                        for s in &sends {
                            let _ = write!(line, " {s}");
                        }
                        line.push('\n');
                        let mut w = log.lock().unwrap_or_else(|e| e.into_inner());
                        let _ = w.write_all(line.as_bytes());
                        let _ = w.flush();
                    }
                    if !keep || !ok {
                        return;
                    }
                    // The next request on this connection: it was "accepted" as this one ended.
                    accept_ns = end_ns;
                }
            });
        }
    })
}
