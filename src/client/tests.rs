//! Tests of the HTTP client: stream events, errors, log-probabilities.

use super::*;

#[test]
fn the_answer_positions_log_probabilities_are_read_in_either_servers_form() {
    // llama.cpp's /v1/completions stream, first event (an end of sequence most likely).
    let llama = r#"{"choices":[{"text":"","index":0,"logprobs":{"content":[{"id":2,"token":"","logprob":-0.57,"top_logprobs":[{"id":2,"token":"","logprob":-0.57},{"id":330,"token":" A","logprob":-2.41}]}]},"finish_reason":null}]}"#;
    assert_eq!(
        first_top_logprobs(llama).as_deref(),
        Some(r#"[["",-0.57],[" A",-2.41]]"#)
    );
    // The OpenAI legacy form (vLLM, SGLang): one object per position.
    let legacy = r#"{"choices":[{"text":" B","logprobs":{"tokens":[" B"],"token_logprobs":[-0.1],"top_logprobs":[{" B":-0.1," C":-2.5}]}}]}"#;
    let top: Vec<(String, f64)> =
        serde_json::from_str(&first_top_logprobs(legacy).unwrap()).unwrap();
    assert_eq!(top.len(), 2);
    assert!(top.contains(&(" C".to_string(), -2.5)));
    assert_eq!(
        first_top_logprobs(r#"{"choices":[{"text":"x","logprobs":null}]}"#),
        None
    );
    // Recorded once, from the first event that has them, which is the first token.
    let (mut rec, mut chunks) = (RequestRecord::default(), Vec::new());
    apply_event(&mut rec, &mut chunks, llama, 5).unwrap();
    apply_event(&mut rec, &mut chunks, legacy, 9).unwrap();
    assert_eq!(
        rec.top_logprobs.as_deref(),
        Some(r#"[["",-0.57],[" A",-2.41]]"#)
    );
    assert_eq!(rec.first_token_ns, Some(5));
}

/// The typed reading and the JSON-tree reading say the same of every event shape the
/// engines send (docs: GPU-ENGINES stream formats) and of odd ones.
#[test]
fn typed_and_tree_readings_agree() {
    let events = [
        r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Hi \"there\" \u00e9"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[{"delta":{"role":"assistant","content":null}}]}"#,
        r#"{"choices":[{"delta":{"content":"x","reasoning_content":null},"matched_stop":null}]}"#,
        r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
        r#"{"choices":[{"delta":{"reasoning":"think"}}]}"#,
        r#"{"choices":[{"text":"plain","finish_reason":"length"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":3,"total_tokens":11}}"#,
        r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":8,"completion_tokens":1}}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"timings":{"predicted_n":3}}"#,
        r#"{"error":{"message":"boom"}}"#,
        r#"{"choices":null}"#,
        r#"{}"#,
    ];
    for e in events {
        let typed = fast::Parsed::from(serde_json::from_str::<fast::Event>(e).unwrap());
        let tree = fast::Parsed::from_value(&serde_json::from_str(e).unwrap());
        assert_eq!(typed.text, tree.text, "{e}");
        assert_eq!(typed.reasoning, tree.reasoning, "{e}");
        assert_eq!(typed.finish_reason, tree.finish_reason, "{e}");
        assert_eq!(typed.usage, tree.usage, "{e}");
        assert_eq!(typed.error, tree.error, "{e}");
    }
    // A content that is not a string is not an error: read as no text, as before.
    let mut rec = RequestRecord::default();
    let mut chunks = Vec::new();
    assert!(!apply_event(
        &mut rec,
        &mut chunks,
        r#"{"choices":[{"delta":{"content":[1]}}]}"#,
        5
    )
    .unwrap());
    assert_eq!(chunks[0].kind, ChunkKind::Empty);
}

#[test]
fn records_content_usage_and_finish_from_events() {
    let mut rec = RequestRecord {
        id: 3,
        ..Default::default()
    };
    let mut chunks = Vec::new();
    let events = [
        (r#"{"choices":[{"delta":{"role":"assistant"}}]}"#, 10),
        (r#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#, 15),
        (r#"{"choices":[{"delta":{"content":"Hel"}}]}"#, 20),
        (r#"{"choices":[{"delta":{"content":"lo"}}]}"#, 30),
        (r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#, 31),
        (
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":1}}}"#,
            32,
        ),
    ];
    for (e, t) in events {
        assert!(!apply_event(&mut rec, &mut chunks, e, t).unwrap());
    }
    assert!(apply_event(&mut rec, &mut chunks, "[DONE]", 33).unwrap());
    assert_eq!(rec.output, "Hello");
    assert_eq!(rec.first_reasoning_ns, Some(15));
    assert_eq!(rec.first_token_ns, Some(20));
    assert_eq!(rec.last_token_ns, Some(30));
    assert_eq!(
        (rec.prompt_tokens, rec.completion_tokens),
        (Some(7), Some(3))
    );
    assert_eq!(rec.finish_reason.as_deref(), Some("length"));
    // The engine's breakdown of the completion tokens (vLLM's form for reasoning models).
    assert_eq!(rec.reasoning_tokens, Some(1));
    assert_eq!((rec.chunks, rec.content_chunks), (6, 2));
    let kinds: Vec<_> = chunks.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [
            ChunkKind::Empty,
            ChunkKind::Reasoning,
            ChunkKind::Content,
            ChunkKind::Content,
            ChunkKind::Empty,
            ChunkKind::Empty
        ]
    );
}

#[test]
fn a_server_error_event_fails_the_request() {
    let mut rec = RequestRecord::default();
    let err = apply_event(
        &mut rec,
        &mut Vec::new(),
        r#"{"error":{"message":"boom"}}"#,
        1,
    )
    .unwrap_err();
    assert!(err.0.contains("boom"), "{err}");
}

/// A loopback HTTP server that answers every connection with a scripted SSE body:
/// each (delay, bytes) part is written after sleeping `delay`.
async fn scripted(parts: Vec<(u64, String)>, status: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let parts = parts.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut got = Vec::new();
                // Read the request head and its body (Content-Length) before answering.
                loop {
                    let n = sock.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_string();
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let len = text[..head_end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if got.len() >= head_end + 4 + len {
                            break;
                        }
                    }
                }
                let head = format!("HTTP/1.1 {status}\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
                let _ = sock.write_all(head.as_bytes()).await;
                for (delay, bytes) in parts {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    if sock.write_all(bytes.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = sock.flush().await;
                }
            });
        }
    });
    format!("http://{addr}")
}

fn client(base: &str, timeout_ms: u64) -> HttpClient {
    let sampling = Sampling {
        max_tokens: 8,
        temperature: 0.0,
        top_p: 1.0,
        stop: vec![],
        ..Default::default()
    };
    HttpClient::new(
        base,
        Api::Chat,
        "m",
        sampling,
        Duration::from_millis(timeout_ms),
        None,
        false,
    )
    .unwrap()
}

fn request() -> GenRequest {
    GenRequest {
        id: 0,
        user: None,
        sample: 0,
        sample_id: "s".into(),
        system: None,
        history: Vec::new(),
        prompt: "hi".into(),
        max_tokens: None,
    }
}

fn ev(json: &str) -> String {
    format!("data: {json}\n\n")
}

#[tokio::test]
async fn times_a_real_stream_on_the_run_clock() {
    let base = scripted(
        vec![
            (0, ev(r#"{"choices":[{"delta":{"role":"assistant"}}]}"#)),
            (120, ev(r#"{"choices":[{"delta":{"content":"A"}}]}"#)),
            (60, ev(r#"{"choices":[{"delta":{"content":"B C"}}]}"#)),
            (
                60,
                ev(r#"{"choices":[{"delta":{"content":"D"},"finish_reason":"stop"}]}"#),
            ),
            (
                0,
                ev(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4}}"#),
            ),
            (0, "data: [DONE]\n\n".into()),
        ],
        "200 OK",
    )
    .await;
    let clock = RunClock::start();
    let (rec, chunks) = client(&base, 10_000)
        .stream(request(), Instant::now(), clock)
        .await;
    assert_eq!(rec.error, None);
    assert_eq!(rec.output, "AB CD");
    assert_eq!(rec.completion_tokens, Some(4));
    assert_eq!(rec.content_chunks, 3);
    let ttft = crate::record::stats::ttft_ms(&rec).unwrap();
    assert!((115.0..400.0).contains(&ttft), "ttft {ttft}");
    // TPOT spreads the 120 ms between first and last content over 3 token gaps.
    let tpot = crate::record::stats::tpot_ms(&rec).unwrap();
    assert!((35.0..150.0).contains(&tpot), "tpot {tpot}");
    assert!(rec.first_byte_ns.unwrap() < rec.first_token_ns.unwrap());
    let content: Vec<&ChunkRecord> = chunks
        .iter()
        .filter(|c| c.kind == ChunkKind::Content)
        .collect();
    let gap = (content[1].t_ns - content[0].t_ns) as f64 / 1e6;
    assert!((55.0..300.0).contains(&gap), "gap {gap}");
}

#[tokio::test]
async fn an_http_error_is_recorded_with_its_body() {
    let base = scripted(
        vec![(0, "model overloaded".into())],
        "503 Service Unavailable",
    )
    .await;
    let (rec, _) = client(&base, 10_000)
        .stream(request(), Instant::now(), RunClock::start())
        .await;
    assert_eq!(rec.http_status, Some(503));
    let e = rec.error.unwrap();
    assert!(e.contains("503") && e.contains("model overloaded"), "{e}");
}

#[tokio::test]
async fn a_stream_cut_short_is_a_failure_not_a_short_answer() {
    let base = scripted(
        vec![(0, ev(r#"{"choices":[{"delta":{"content":"A"}}]}"#))],
        "200 OK",
    )
    .await;
    let (rec, _) = client(&base, 10_000)
        .stream(request(), Instant::now(), RunClock::start())
        .await;
    assert!(
        rec.error.as_deref().unwrap().contains("without [DONE]"),
        "{:?}",
        rec.error
    );
    assert_eq!(rec.output, "A");
}

#[tokio::test]
async fn a_slow_stream_times_out_once_and_is_not_retried() {
    let base = scripted(
        vec![(60_000, ev(r#"{"choices":[{"delta":{"content":"A"}}]}"#))],
        "200 OK",
    )
    .await;
    let t = Instant::now();
    let (rec, _) = client(&base, 300)
        .stream(request(), Instant::now(), RunClock::start())
        .await;
    assert!(
        rec.error
            .as_deref()
            .unwrap()
            .starts_with("timed out after 0.3 s"),
        "{:?}",
        rec.error
    );
    // The event is due a minute later: returning well before it means no wait and no retry.
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn completion_api_text_is_content() {
    let mut rec = RequestRecord::default();
    apply_event(
        &mut rec,
        &mut Vec::new(),
        r#"{"choices":[{"text":" B"}]}"#,
        5,
    )
    .unwrap();
    assert_eq!(rec.output, " B");
    assert_eq!(rec.first_token_ns, Some(5));
}
