//! The engine's own tokenizer, through its HTTP endpoints: how many prompt tokens the server
//! will count for a request (chat template included), and text ↔ token ids. Synthetic prompts
//! are sized with it, so that a request's `usage.prompt_tokens` equals its target.

use std::time::Duration;

use serde_json::{json, Value};

use crate::spec::catalog::TokenizeApi;
use crate::spec::Api;

/// A request's prompt as the server will see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PromptParts<'a> {
    pub api: Api,
    pub system: Option<&'a str>,
    pub history: &'a [(String, String)],
    pub prompt: &'a str,
}

#[derive(Debug, Clone)]
pub(crate) struct ServerTokenizer {
    http: reqwest::Client,
    base: String,
    model: String,
    api_key: Option<String>,
    style: TokenizeApi,
}

#[derive(Debug, thiserror::Error)]
#[error("tokenizer endpoint {endpoint}: {cause}")]
pub(crate) struct TokenizeError {
    pub endpoint: String,
    pub cause: String,
}

impl ServerTokenizer {
    /// `style` from the engine's catalog entry; None: probed (llama.cpp's form, then vLLM's).
    pub async fn connect(
        base: &str,
        model: &str,
        api_key: Option<String>,
        style: Option<TokenizeApi>,
    ) -> Result<Self, TokenizeError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| TokenizeError {
                endpoint: base.to_string(),
                cause: e.to_string(),
            })?;
        let mut t = ServerTokenizer {
            http,
            base: base.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key,
            style: style.unwrap_or(TokenizeApi::LlamaCpp),
        };
        if style.is_none() {
            let mut causes = Vec::new();
            for s in [TokenizeApi::LlamaCpp, TokenizeApi::Vllm] {
                t.style = s;
                match t.tokenize("probe").await {
                    Ok(ids) if !ids.is_empty() => return Ok(t),
                    Ok(_) => causes.push(format!("{s:?}: no tokens")),
                    Err(e) => causes.push(format!("{s:?}: {}", e.cause)),
                }
            }
            return Err(TokenizeError {
                endpoint: format!("{}/tokenize", t.base),
                cause: format!(
                    "the server has no tokenize endpoint bench360 knows ({}); synthetic prompts need one (llama.cpp, vLLM and SGLang serve it)",
                    causes.join("; ")
                ),
            });
        }
        Ok(t)
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, TokenizeError> {
        let url = format!("{}{path}", self.base);
        let err = |cause: String| TokenizeError {
            endpoint: url.clone(),
            cause,
        };
        let mut req = self.http.post(&url).json(&body);
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.map_err(|e| err(e.to_string()))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| err(e.to_string()))?;
        if !status.is_success() {
            return Err(err(format!(
                "HTTP {status}: {}",
                text.chars().take(300).collect::<String>()
            )));
        }
        serde_json::from_str(&text).map_err(|e| err(format!("unreadable answer ({e})")))
    }

    fn ids(v: &Value, path: &str) -> Result<Vec<u32>, TokenizeError> {
        v.get("tokens")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    // llama.cpp answers {id, piece} objects when asked for pieces.
                    .map(|t| t.as_u64().or_else(|| t.get("id").and_then(Value::as_u64)))
                    .map(|t| t.and_then(|t| u32::try_from(t).ok()))
                    .collect::<Option<Vec<u32>>>()
            })
            .ok_or_else(|| TokenizeError {
                endpoint: path.to_string(),
                cause: format!(
                    "no `tokens` list in the answer: {}",
                    v.to_string().chars().take(200).collect::<String>()
                ),
            })
    }

    /// Token ids of plain text, without special tokens.
    pub async fn tokenize(&self, text: &str) -> Result<Vec<u32>, TokenizeError> {
        let v = match self.style {
            TokenizeApi::LlamaCpp => {
                self.post(
                    "/tokenize",
                    json!({"content": text, "add_special": false, "parse_special": false}),
                )
                .await?
            }
            TokenizeApi::Vllm => {
                self.post(
                    "/tokenize",
                    json!({"model": self.model, "prompt": text, "add_special_tokens": false}),
                )
                .await?
            }
        };
        Self::ids(&v, "/tokenize")
    }

    /// The text of token ids.
    pub async fn detokenize(&self, ids: &[u32]) -> Result<String, TokenizeError> {
        let (body, field) = match self.style {
            TokenizeApi::LlamaCpp => (json!({"tokens": ids}), "content"),
            TokenizeApi::Vllm => (json!({"model": self.model, "tokens": ids}), "prompt"),
        };
        let v = self.post("/detokenize", body).await?;
        v.get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| TokenizeError {
                endpoint: format!("{}/detokenize", self.base),
                cause: format!("no `{field}` in the answer"),
            })
    }

    /// Prompt tokens the server will count for this request (`usage.prompt_tokens`): the chat
    /// template applied, special tokens added as the server adds them.
    pub async fn count(&self, p: PromptParts<'_>) -> Result<usize, TokenizeError> {
        match (self.style, p.api) {
            (TokenizeApi::LlamaCpp, api) => {
                // The prompt text as llama-server builds it, then tokenized as it tokenizes a
                // prompt: special tokens added and parsed.
                let prompt = match api {
                    Api::Chat => {
                        let messages = super::messages(p.system, p.history, p.prompt);
                        let t = self
                            .post("/apply-template", json!({ "messages": messages }))
                            .await?;
                        t.get("prompt")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .ok_or_else(|| TokenizeError {
                                endpoint: format!("{}/apply-template", self.base),
                                cause: "no `prompt` in the answer".into(),
                            })?
                    }
                    Api::Completion => super::completion_prompt(p.system, p.prompt),
                };
                let v = self
                    .post(
                        "/tokenize",
                        json!({"content": prompt, "add_special": true, "parse_special": true}),
                    )
                    .await?;
                Ok(Self::ids(&v, "/tokenize")?.len())
            }
            (TokenizeApi::Vllm, api) => {
                let body = match api {
                    Api::Chat => json!({
                        "model": self.model,
                        "messages": super::messages(p.system, p.history, p.prompt),
                        "add_generation_prompt": true,
                    }),
                    Api::Completion => json!({
                        "model": self.model,
                        "prompt": super::completion_prompt(p.system, p.prompt),
                        "add_special_tokens": true,
                    }),
                };
                let v = self.post("/tokenize", body).await?;
                match v.get("count").and_then(Value::as_u64) {
                    Some(n) => Ok(n as usize),
                    None => Ok(Self::ids(&v, "/tokenize")?.len()),
                }
            }
        }
    }
}
