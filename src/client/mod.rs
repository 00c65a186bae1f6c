//! OpenAI-compatible streaming client. Every request is streamed and timed on the run's one
//! monotonic clock: sent, first byte, first content token, every chunk, last token. Token
//! counts come from the server's `usage`. A failed request is recorded with its cause and
//! never retried.

pub(crate) mod sse;
pub(crate) mod tokenize;

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::record::{ChunkKind, ChunkRecord, RequestRecord, RunClock};
use crate::spec::{Api, Sampling};

#[derive(Debug, Clone)]
pub(crate) struct GenRequest {
    pub id: u32,
    pub user: Option<u32>,
    pub sample: usize,
    pub sample_id: String,
    pub system: Option<String>,
    /// Earlier turns (user, assistant) sent before `prompt` (chat only).
    pub history: Vec<(String, String)>,
    pub prompt: String,
    /// Overrides the sampling's max tokens for this request (replayed traces, synthetic
    /// output lengths).
    pub max_tokens: Option<u32>,
}

/// Something that can stream one generation request. The real one speaks HTTP.
pub(crate) trait InferenceClient: Send + Sync + 'static {
    fn stream(
        &self,
        req: GenRequest,
        scheduled: Instant,
        clock: RunClock,
    ) -> impl Future<Output = (RequestRecord, Vec<ChunkRecord>)> + Send;
}

#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    http: reqwest::Client,
    url: String,
    api: Api,
    model: String,
    sampling: Sampling,
    timeout: Duration,
    api_key: Option<String>,
    /// Fields merged into every request body (output control, the sweep's `extra-body`).
    extra: serde_json::Map<String, Value>,
    /// Send each request's id as `x-request-id` (selfbench: the scripted server logs it).
    request_ids: bool,
}

/// The request fields of output control for an engine: `ignore-eos` and `min-tokens` under
/// the engine's own names, then the sweep's `extra-body` (which may override them).
pub(crate) fn extra_fields(
    sampling: &Sampling,
    entry: &crate::spec::catalog::CatalogEntry,
) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    if sampling.ignore_eos {
        if let Some(f) = entry.ignore_eos_field {
            m.insert(f.to_string(), Value::Bool(true));
        }
    }
    if let (Some(n), Some(f)) = (sampling.min_tokens, entry.min_tokens_field) {
        m.insert(f.to_string(), json!(n));
    }
    for (k, v) in &sampling.extra_body {
        m.insert(k.clone(), v.clone());
    }
    m
}

impl HttpClient {
    /// `base` is the server root (`http://127.0.0.1:8080`). With `reuse_connections` false
    /// (the default of a run) every request opens its own connection.
    pub fn new(
        base: &str,
        api: Api,
        model: &str,
        sampling: Sampling,
        timeout: Duration,
        api_key: Option<String>,
        reuse_connections: bool,
    ) -> Result<Self, reqwest::Error> {
        let mut b = reqwest::Client::builder().connect_timeout(Duration::from_secs(10));
        if !reuse_connections {
            b = b.pool_max_idle_per_host(0);
        }
        let path = match api {
            Api::Chat => "/v1/chat/completions",
            Api::Completion => "/v1/completions",
        };
        Ok(HttpClient {
            http: b.build()?,
            url: format!("{}{path}", base.trim_end_matches('/')),
            api,
            model: model.to_string(),
            sampling,
            timeout,
            api_key,
            extra: serde_json::Map::new(),
            request_ids: false,
        })
    }

    /// Sends each request's id in an `x-request-id` header.
    pub fn with_request_ids(mut self) -> Self {
        self.request_ids = true;
        self
    }

    /// Fields merged into every request body ([`extra_fields`]).
    pub fn with_extra(mut self, extra: serde_json::Map<String, Value>) -> Self {
        self.extra = extra;
        self
    }

    fn body(&self, req: &GenRequest) -> Value {
        let mut body = json!({
            "model": self.model,
            "max_tokens": req.max_tokens.unwrap_or(self.sampling.max_tokens),
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !self.sampling.stop.is_empty() {
            body["stop"] = json!(self.sampling.stop);
        }
        // Output control, under the engine's own field names, then the sweep's extra body.
        for (k, v) in &self.extra {
            body[k.as_str()] = v.clone();
        }
        match self.api {
            Api::Chat => {
                body["messages"] = messages(req.system.as_deref(), &req.history, &req.prompt);
            }
            Api::Completion => {
                body["prompt"] = json!(completion_prompt(req.system.as_deref(), &req.prompt));
            }
        }
        body
    }
}

/// The chat messages of one request: the system prompt, the earlier turns, the new message.
pub(crate) fn messages(system: Option<&str>, history: &[(String, String)], prompt: &str) -> Value {
    let mut m = Vec::with_capacity(2 + 2 * history.len());
    if let Some(s) = system {
        m.push(json!({"role": "system", "content": s}));
    }
    for (u, a) in history {
        m.push(json!({"role": "user", "content": u}));
        m.push(json!({"role": "assistant", "content": a}));
    }
    m.push(json!({"role": "user", "content": prompt}));
    Value::Array(m)
}

/// The plain prompt of a completion request.
pub(crate) fn completion_prompt(system: Option<&str>, prompt: &str) -> String {
    match system {
        Some(s) => format!("{s}\n\n{prompt}"),
        None => prompt.to_string(),
    }
}

/// A stream event that cannot be read: the request fails with this cause.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct EventError(pub String);

impl From<String> for EventError {
    fn from(s: String) -> Self {
        EventError(s)
    }
}

impl From<EventError> for String {
    fn from(e: EventError) -> Self {
        e.0
    }
}

/// Applies one SSE data payload to the request being recorded.
pub(crate) fn apply_event(
    rec: &mut RequestRecord,
    chunks: &mut Vec<ChunkRecord>,
    payload: &str,
    t_ns: i64,
) -> Result<bool, EventError> {
    if payload.trim() == "[DONE]" {
        return Ok(true);
    }
    let p = match serde_json::from_str::<fast::Event>(payload) {
        Ok(e) => fast::Parsed::from(e),
        // Anything the typed reading does not take (a content that is not a string, say) is
        // read as plain JSON, with the same meaning.
        Err(_) => {
            let v: Value = serde_json::from_str(payload).map_err(|e| {
                format!("unparseable stream event ({e}): {}", truncate(payload, 200))
            })?;
            fast::Parsed::from_value(&v)
        }
    };
    if let Some(err) = p.error {
        return Err(EventError(format!(
            "server error in stream: {}",
            truncate(&err, 300)
        )));
    }
    rec.chunks += 1;
    // The answer position's log-probabilities (`logprobs` scoring): that position is the
    // first token, whatever its text (an end of sequence has none).
    if rec.top_logprobs.is_none() && payload.contains("\"top_logprobs\"") {
        if let Some(top) = first_top_logprobs(payload) {
            rec.top_logprobs = Some(top);
            rec.first_token_ns.get_or_insert(t_ns);
            rec.last_token_ns.get_or_insert(t_ns);
        }
    }
    let text: &str = &p.text;
    let reasoning: &str = &p.reasoning;
    if let Some(f) = p.finish_reason {
        rec.finish_reason = Some(f);
    }
    let before = rec.completion_tokens;
    if let Some((prompt, completion)) = p.usage {
        rec.prompt_tokens = prompt;
        rec.completion_tokens = completion;
    }
    if p.reasoning_tokens.is_some() {
        rec.reasoning_tokens = p.reasoning_tokens;
    }
    // A server that reports usage on every chunk (vLLM's continuous usage stats) tells how
    // many tokens each chunk carried.
    let chunk_tokens = match (p.usage, rec.completion_tokens) {
        (Some(_), Some(now)) if !text.is_empty() => Some(now.saturating_sub(before.unwrap_or(0))),
        _ => None,
    };
    let kind = if !text.is_empty() {
        rec.content_chunks += 1;
        rec.output.push_str(text);
        rec.first_token_ns.get_or_insert(t_ns);
        rec.last_token_ns = Some(t_ns);
        ChunkKind::Content
    } else if !reasoning.is_empty() {
        // Reasoning is generated tokens too: it ends where the last token is, but it is never
        // the answer (`output` holds the content only).
        rec.first_reasoning_ns.get_or_insert(t_ns);
        rec.last_token_ns = Some(t_ns);
        ChunkKind::Reasoning
    } else {
        ChunkKind::Empty
    };
    chunks.push(ChunkRecord {
        request_id: rec.id,
        index: chunks.len() as u32,
        t_ns,
        kind,
        chars: (text.chars().count() + reasoning.chars().count()) as u32,
        tokens: chunk_tokens,
    });
    Ok(false)
}

/// The top log-probabilities of the first position an event carries, as JSON
/// `[[token, logprob], …]`, from either form a completions server streams: llama.cpp's
/// `logprobs.content[0].top_logprobs` (a list of `{token, logprob}`) or the OpenAI legacy
/// form of vLLM and SGLang, `logprobs.top_logprobs[0]` (an object `{token: logprob}`). None
/// when the event has none.
pub(crate) fn first_top_logprobs(payload: &str) -> Option<String> {
    let v: Value = serde_json::from_str(payload).ok()?;
    let lp = v.pointer("/choices/0/logprobs")?;
    let pairs: Vec<(String, f64)> = if let Some(list) = lp
        .pointer("/content/0/top_logprobs")
        .and_then(Value::as_array)
    {
        list.iter()
            .filter_map(|t| Some((t["token"].as_str()?.to_string(), t["logprob"].as_f64()?)))
            .collect()
    } else if let Some(obj) = lp.pointer("/top_logprobs/0").and_then(Value::as_object) {
        obj.iter()
            .filter_map(|(k, x)| Some((k.clone(), x.as_f64()?)))
            .collect()
    } else {
        return None;
    };
    (!pairs.is_empty()).then(|| serde_json::to_string(&pairs).expect("serializable"))
}

fn truncate(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl InferenceClient for HttpClient {
    async fn stream(
        &self,
        req: GenRequest,
        scheduled: Instant,
        clock: RunClock,
    ) -> (RequestRecord, Vec<ChunkRecord>) {
        let mut rec = RequestRecord {
            id: req.id,
            user: req.user,
            sample: req.sample,
            sample_id: req.sample_id.clone(),
            max_tokens: req.max_tokens,
            scheduled_ns: clock.ns(scheduled),
            ..Default::default()
        };
        let mut chunks = Vec::new();
        let body = self.body(&req);
        let fut = async {
            let mut rb = self.http.post(&self.url).json(&body);
            if let Some(k) = &self.api_key {
                rb = rb.bearer_auth(k);
            }
            if self.request_ids {
                rb = rb.header("x-request-id", req.id.to_string());
            }
            rec.sent_ns = Some(clock.ns(Instant::now()));
            let resp = rb
                .send()
                .await
                .map_err(|e| format!("request failed: {}", error_chain(&e)))?;
            rec.http_status = Some(resp.status().as_u16());
            if !resp.status().is_success() {
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                return Err(format!("HTTP {status}: {}", truncate(text.trim(), 300)));
            }
            let mut stream = resp.bytes_stream();
            let mut dec = sse::SseDecoder::default();
            let mut done = false;
            while let Some(item) = stream.next().await {
                let bytes = item.map_err(|e| format!("stream broke: {}", error_chain(&e)))?;
                let t = clock.ns(Instant::now());
                rec.first_byte_ns.get_or_insert(t);
                for payload in dec.push(&bytes) {
                    if apply_event(&mut rec, &mut chunks, &payload, t)? {
                        done = true;
                    }
                }
            }
            let t = clock.ns(Instant::now());
            for payload in dec.finish() {
                if apply_event(&mut rec, &mut chunks, &payload, t)? {
                    done = true;
                }
            }
            if !done && rec.finish_reason.is_none() {
                return Err("stream ended without [DONE] or a finish reason".to_string());
            }
            Ok(())
        };
        let result = match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "timed out after {:.1} s",
                self.timeout.as_secs_f64()
            )),
        };
        rec.end_ns = clock.ns(Instant::now());
        if let Err(e) = result {
            rec.error = Some(e);
        }
        (rec, chunks)
    }
}

/// The stream event read into borrowed fields (no JSON tree per event: the client handles
/// one event per token at thousands of tokens per second).
mod fast {
    use std::borrow::Cow;

    use serde::Deserialize;
    use serde_json::Value;

    #[derive(Deserialize)]
    pub(super) struct Event<'a> {
        #[serde(default, borrow)]
        choices: Option<Vec<Choice<'a>>>,
        #[serde(default)]
        usage: Option<Usage>,
        #[serde(default)]
        error: Option<Value>,
    }

    #[derive(Deserialize)]
    struct Choice<'a> {
        #[serde(default, borrow)]
        delta: Option<Delta<'a>>,
        #[serde(default, borrow)]
        text: Option<Cow<'a, str>>,
        #[serde(default, borrow)]
        finish_reason: Option<Cow<'a, str>>,
    }

    #[derive(Deserialize)]
    struct Delta<'a> {
        #[serde(default, borrow)]
        content: Option<Cow<'a, str>>,
        #[serde(default, borrow)]
        reasoning_content: Option<Cow<'a, str>>,
        #[serde(default, borrow)]
        reasoning: Option<Cow<'a, str>>,
    }

    #[derive(Deserialize)]
    struct Usage {
        #[serde(default)]
        prompt_tokens: Option<u64>,
        #[serde(default)]
        completion_tokens: Option<u64>,
        #[serde(default)]
        completion_tokens_details: Option<Details>,
    }

    /// OpenAI's breakdown of the completion tokens (vLLM and others send it for reasoning
    /// models).
    #[derive(Deserialize)]
    struct Details {
        #[serde(default)]
        reasoning_tokens: Option<u64>,
    }

    /// What an event says, however it was read.
    pub(super) struct Parsed<'a> {
        pub text: Cow<'a, str>,
        pub reasoning: Cow<'a, str>,
        pub finish_reason: Option<String>,
        /// (prompt tokens, completion tokens) when the event carries usage.
        pub usage: Option<(Option<u32>, Option<u32>)>,
        /// Of the completion tokens, those spent reasoning, when the usage says.
        pub reasoning_tokens: Option<u32>,
        pub error: Option<String>,
    }

    impl<'a> From<Event<'a>> for Parsed<'a> {
        fn from(e: Event<'a>) -> Self {
            let choice = e.choices.and_then(|c| c.into_iter().next());
            let (text, reasoning, finish_reason) = match choice {
                Some(c) => {
                    let (content, r1, r2) = match c.delta {
                        Some(d) => (d.content, d.reasoning_content, d.reasoning),
                        None => (None, None, None),
                    };
                    (
                        content.or(c.text).unwrap_or_default(),
                        r1.or(r2).unwrap_or_default(),
                        c.finish_reason.map(Cow::into_owned),
                    )
                }
                None => (Cow::Borrowed(""), Cow::Borrowed(""), None),
            };
            Parsed {
                text,
                reasoning,
                finish_reason,
                reasoning_tokens: e
                    .usage
                    .as_ref()
                    .and_then(|u| u.completion_tokens_details.as_ref())
                    .and_then(|d| d.reasoning_tokens)
                    .map(|x| x as u32),
                usage: e.usage.map(|u| {
                    (
                        u.prompt_tokens.map(|x| x as u32),
                        u.completion_tokens.map(|x| x as u32),
                    )
                }),
                error: e.error.filter(|v| !v.is_null()).map(|v| v.to_string()),
            }
        }
    }

    impl Parsed<'static> {
        /// The same reading over a JSON tree (events the typed reading refused).
        pub fn from_value(v: &Value) -> Self {
            let choice = v.get("choices").and_then(|c| c.get(0));
            let s =
                |x: Option<&Value>| Cow::Owned(x.and_then(Value::as_str).unwrap_or("").to_string());
            let text = s(choice.and_then(|c| {
                c.get("delta")
                    .and_then(|d| d.get("content"))
                    .filter(|x| !x.is_null())
                    .or_else(|| c.get("text"))
            }));
            let reasoning = s(choice.and_then(|c| c.get("delta")).and_then(|d| {
                d.get("reasoning_content")
                    .filter(|x| !x.is_null())
                    .or_else(|| d.get("reasoning"))
            }));
            let usage = v.get("usage").filter(|u| !u.is_null()).map(|u| {
                let n = |k: &str| u.get(k).and_then(Value::as_u64).map(|x| x as u32);
                (n("prompt_tokens"), n("completion_tokens"))
            });
            let reasoning_tokens = v
                .pointer("/usage/completion_tokens_details/reasoning_tokens")
                .and_then(Value::as_u64)
                .map(|x| x as u32);
            Parsed {
                text,
                reasoning,
                reasoning_tokens,
                finish_reason: choice
                    .and_then(|c| c.get("finish_reason"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                usage,
                error: v
                    .get("error")
                    .filter(|e| !e.is_null())
                    .map(|e| e.to_string()),
            }
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests;
