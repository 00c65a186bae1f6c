//! A fault-injecting OpenAI-compatible engine, for tests (`tests/faults.rs`) and by hand:
//! `fault_engine --port P --mode M [--after N]`. It streams chat or completion responses
//! with `usage`, and misbehaves as told:
//!
//! | mode | what it does |
//! |---|---|
//! | `ok` | answers every request ("Answer: A", 4 content chunks, usage) |
//! | `500` | HTTP 500 with a JSON error body to every generation request |
//! | `garbage` | a 200 event stream whose events are not JSON |
//! | `close-mid` | sends the first chunk, then closes the connection |
//! | `stall` | sends the first chunk, then nothing (the client's timeout ends it) |
//! | `never-healthy` | its health check answers 503 forever |
//! | `exit-mid-run` | answers `--after` requests, then the process exits (code 3) |
//! | `flaky` | every `--after`-th request gets a 500, the others are answered |
//!
//! Bound to 127.0.0.1 only; one thread per connection; `Connection: close`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--version") {
        println!("fault_engine 1");
        return;
    }
    let port: u16 = arg(&args, "--port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let mode = arg(&args, "--mode").unwrap_or_else(|| "ok".into());
    let after: u64 = arg(&args, "--after")
        .and_then(|p| p.parse().ok())
        .unwrap_or(3);
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind 127.0.0.1");
    eprintln!(
        "fault_engine: mode {mode} on {}",
        listener.local_addr().expect("address")
    );
    let served = Arc::new(AtomicU64::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let mode = mode.clone();
        let served = served.clone();
        std::thread::spawn(move || {
            let _ = handle(conn, &mode, after, &served);
        });
    }
}

fn handle(mut conn: TcpStream, mode: &str, after: u64, served: &AtomicU64) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    if request_line.starts_with("GET") {
        return match (path, mode) {
            ("/v1/models", "never-healthy") => respond(
                &mut conn,
                "503 Service Unavailable",
                "application/json",
                "{}",
            ),
            ("/v1/models", _) => respond(
                &mut conn,
                "200 OK",
                "application/json",
                r#"{"object":"list","data":[{"id":"fault","object":"model"}]}"#,
            ),
            _ => respond(&mut conn, "404 Not Found", "text/plain", "not found"),
        };
    }
    let n = served.fetch_add(1, Ordering::SeqCst) + 1;
    let chat = path.contains("chat");
    match mode {
        "500" => respond(
            &mut conn,
            "500 Internal Server Error",
            "application/json",
            r#"{"error":{"message":"injected fault"}}"#,
        ),
        "flaky" if n.is_multiple_of(after.max(1)) => respond(
            &mut conn,
            "500 Internal Server Error",
            "application/json",
            r#"{"error":{"message":"injected flaky fault"}}"#,
        ),
        "exit-mid-run" if n > after => {
            eprintln!("fault_engine: exiting after {after} requests");
            std::process::exit(3);
        }
        "garbage" => {
            head(&mut conn)?;
            conn.write_all(b"data: {this is not json\n\ndata: [DONE]\n\n")?;
            Ok(())
        }
        _ => {
            head(&mut conn)?;
            let pieces = ["Answer", ":", " A", "."];
            for (i, p) in pieces.iter().enumerate() {
                conn.write_all(event(chat, p, None).as_bytes())?;
                conn.flush()?;
                if i == 0 {
                    match mode {
                        "close-mid" => return conn.shutdown(std::net::Shutdown::Both),
                        "stall" => {
                            std::thread::sleep(Duration::from_secs(3600));
                            return Ok(());
                        }
                        _ => {}
                    }
                }
            }
            conn.write_all(event(chat, "", Some(pieces.len())).as_bytes())?;
            conn.write_all(b"data: [DONE]\n\n")?;
            conn.flush()
        }
    }
}

fn head(conn: &mut TcpStream) -> std::io::Result<()> {
    conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
    )
}

fn event(chat: bool, text: &str, finish_with_usage: Option<usize>) -> String {
    let text = serde_json::to_string(text).expect("string");
    let (finish, usage) = match finish_with_usage {
        Some(n) => (
            r#""stop""#.to_string(),
            format!(
                r#","usage":{{"prompt_tokens":7,"completion_tokens":{n},"total_tokens":{}}}"#,
                7 + n
            ),
        ),
        None => ("null".to_string(), String::new()),
    };
    if chat {
        format!(
            "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{text}}},\"finish_reason\":{finish}}}]{usage}}}\n\n"
        )
    } else {
        format!(
            "data: {{\"id\":\"x\",\"object\":\"text_completion\",\"choices\":[{{\"index\":0,\"text\":{text},\"finish_reason\":{finish}}}]{usage}}}\n\n"
        )
    }
}

fn respond(conn: &mut TcpStream, status: &str, kind: &str, body: &str) -> std::io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    conn.flush()
}
