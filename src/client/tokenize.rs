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
        // No idle connections kept: synthetic prompts are written several conversations at
        // once, and a server that gives each open connection a thread of a small pool
        // (llama-server's HTTP threads, as many as its CPUs) would hold requests on a new
        // connection until an idle one timed out (5 s stalls, measured on 2 CPUs).
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(0)
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
            for s in [
                TokenizeApi::LlamaCpp,
                TokenizeApi::Vllm,
                TokenizeApi::Lmdeploy,
            ] {
                t.style = s;
                match t.tokenize("probe").await {
                    Ok(ids) if !ids.is_empty() => return Ok(t),
                    Ok(_) => causes.push(format!("{s:?}: no tokens")),
                    Err(e) => causes.push(format!("{s:?}: {}", e.cause)),
                }
            }
            return Err(TokenizeError {
                endpoint: format!("{} (/tokenize, /v1/encode)", t.base),
                cause: format!(
                    "the server has no tokenize endpoint bench360 knows ({}); synthetic prompts need one (llama.cpp, vLLM, SGLang and LMDeploy serve one)",
                    causes.join("; ")
                ),
            });
        }
        Ok(t)
    }

    /// A tokenizer of `style` on a server that is never called (tests of what it reads and
    /// which path it takes).
    #[cfg(test)]
    pub(crate) fn offline(style: TokenizeApi) -> Self {
        ServerTokenizer {
            http: reqwest::Client::new(),
            base: "http://127.0.0.1:9".into(),
            model: "m".into(),
            api_key: None,
            style,
        }
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

    /// LMDeploy's `/v1/encode` answer: `{input_ids, length}`.
    fn encoded(&self, v: &Value) -> Result<Vec<u32>, TokenizeError> {
        v.get("input_ids")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .map(|t| t.as_u64().and_then(|t| u32::try_from(t).ok()))
                    .collect::<Option<Vec<u32>>>()
            })
            .ok_or_else(|| TokenizeError {
                endpoint: format!("{}/v1/encode", self.base),
                cause: format!(
                    "no `input_ids` list in the answer: {}",
                    v.to_string().chars().take(200).collect::<String>()
                ),
            })
    }

    /// The text of a `/detokenize` answer: vLLM names it `prompt`, SGLang `text`.
    fn detokenized(v: &Value) -> Option<String> {
        ["prompt", "text"]
            .iter()
            .find_map(|f| v.get(*f).and_then(Value::as_str))
            .map(str::to_string)
    }

    /// Whether the server turns token ids back into text (LMDeploy does not): without it,
    /// synthetic prompts are cut at word boundaries and counted again.
    pub fn detokenizes(&self) -> bool {
        self.style != TokenizeApi::Lmdeploy
    }

    /// Token ids of plain text, without special tokens.
    pub async fn tokenize(&self, text: &str) -> Result<Vec<u32>, TokenizeError> {
        let v = match self.style {
            TokenizeApi::Lmdeploy => {
                let v = self
                    .post("/v1/encode", json!({"input": text, "add_bos": false}))
                    .await?;
                return self.encoded(&v);
            }
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
        let endpoint = format!("{}/detokenize", self.base);
        let text = match self.style {
            TokenizeApi::LlamaCpp => {
                let v = self.post("/detokenize", json!({"tokens": ids})).await?;
                v.get("content").and_then(Value::as_str).map(str::to_string)
            }
            TokenizeApi::Vllm => {
                let v = self
                    .post("/detokenize", json!({"model": self.model, "tokens": ids}))
                    .await?;
                Self::detokenized(&v)
            }
            TokenizeApi::Lmdeploy => {
                return Err(TokenizeError {
                    endpoint,
                    cause: "LMDeploy serves no detokenize endpoint".into(),
                })
            }
        };
        text.ok_or_else(|| TokenizeError {
            endpoint,
            cause: "no text (`content`, `prompt` or `text`) in the answer".into(),
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
            (TokenizeApi::Lmdeploy, api) => {
                // `/v1/encode` applies LMDeploy's chat template to one user message
                // (`do_preprocess`) and adds the BOS as a new session does; it takes no
                // system prompt or earlier turns.
                if p.system.is_some() || !p.history.is_empty() {
                    return Err(TokenizeError {
                        endpoint: format!("{}/v1/encode", self.base),
                        cause: "LMDeploy's encode endpoint counts one user message: a synthetic task with a system prompt or earlier turns cannot be sized exactly there".into(),
                    });
                }
                let body = match api {
                    Api::Chat => json!({"input": p.prompt, "do_preprocess": true, "add_bos": true}),
                    Api::Completion => json!({
                        "input": super::completion_prompt(p.system, p.prompt),
                        "do_preprocess": false,
                        "add_bos": true,
                    }),
                };
                let v = self.post("/v1/encode", body).await?;
                Ok(self.encoded(&v)?.len())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detokenized_text_is_read_from_vllm_and_sglang_answers() {
        // vLLM 0.26 answers {"prompt": …}; SGLang 0.5.17's DetokenizeResponse is {"text": …}
        // (the SGLang rows of the 2026-12-02 hold failed on reading only `prompt`).
        let vllm = json!({"prompt": " time year"});
        let sglang = json!({"text": " time year"});
        assert_eq!(
            ServerTokenizer::detokenized(&vllm).as_deref(),
            Some(" time year")
        );
        assert_eq!(
            ServerTokenizer::detokenized(&sglang).as_deref(),
            Some(" time year")
        );
        assert_eq!(ServerTokenizer::detokenized(&json!({"tokens": [1]})), None);
    }

    #[test]
    fn lmdeploy_encode_answers_are_read_and_it_is_known_not_to_detokenize() {
        // LMDeploy 0.18's EncodeResponse: {"input_ids": [...], "length": n}.
        let t = ServerTokenizer::offline(TokenizeApi::Lmdeploy);
        let v = json!({"input_ids": [882, 1042, 1251], "length": 3});
        assert_eq!(t.encoded(&v).unwrap(), vec![882, 1042, 1251]);
        let e = t.encoded(&json!({"detail": "Not Found"})).unwrap_err();
        assert!(e.cause.contains("no `input_ids`"), "{}", e.cause);
        assert_eq!(e.endpoint, "http://127.0.0.1:9/v1/encode");
        assert!(!t.detokenizes());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let e = rt.block_on(t.detokenize(&[1, 2])).unwrap_err();
        assert!(e.cause.contains("no detokenize"), "{}", e.cause);
        let v = ServerTokenizer::offline(TokenizeApi::Vllm);
        assert!(v.detokenizes());
    }
}
