//! `synthetic` tasks: prompts of exact token counts, as serving benchmarks send them.
//!
//! Two steps. [`plan`] (pure, at load time) draws each request's token targets with the
//! sweep's seed: conversations × turns, input and output lengths, prefix groups. The
//! placeholders it returns have no text. [`materialize`] (at run time, with the engine up)
//! writes the text with the engine's own tokenizer: a seeded stream of common words is
//! tokenized, cut to a number of tokens and detokenized, and the cut is moved until the
//! server's own count of the whole request (chat template, system prompt, earlier turns)
//! equals the target. Every prompt is checked that way; a target that cannot be met exactly
//! is an error, never an approximation.
//!
//! - **Shared prefix**: the first `shared-prefix` tokens of every prompt of a prefix group
//!   are the same text (exactly that many tokens on their own); prompt i is in group
//!   i mod `prefix-groups`.
//! - **Turns**: turn t of a conversation sends turns 1…t−1 (each user message and a reply of
//!   the drawn output length, made of the same word stream) before its new message; its
//!   target is the previous turn's prompt + that reply + its own input draw. The replies are
//!   fixed text, not the model's answers, so every run sends the same prompts.
//! - **Quality**: synthetic prompts have no reference; every output is unscorable.

use std::collections::BTreeMap;

use crate::client::tokenize::{PromptParts, ServerTokenizer, TokenizeError};
use crate::record::rng::SplitMix64;
use crate::record::{Sample, Score};
use crate::spec::{Api, Lengths, Synthetic};

/// Version of the text recipe (word list, streams, adjustment): part of the prompt identity.
pub(crate) const RECIPE: &str = "synthetic-v1";

/// Common English words; the text of every synthetic prompt is drawn from them.
const WORDS: &[&str] = &[
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "community",
    "name",
    "president",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "information",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "river",
    "garden",
    "window",
    "paper",
    "music",
    "market",
    "table",
    "letter",
    "light",
    "voice",
    "road",
    "field",
    "story",
    "plant",
    "tree",
    "stone",
    "bread",
    "train",
    "open",
    "small",
    "large",
    "green",
    "quiet",
    "early",
    "simple",
    "strong",
    "bright",
    "warm",
    "cold",
    "new",
    "old",
    "good",
    "great",
    "little",
    "long",
    "high",
    "different",
    "local",
    "make",
    "take",
    "come",
    "see",
    "know",
    "give",
    "find",
    "think",
    "tell",
    "become",
    "leave",
    "feel",
    "bring",
    "begin",
    "keep",
    "hold",
    "write",
    "stand",
    "hear",
    "let",
    "mean",
    "set",
    "meet",
    "run",
    "pay",
    "sit",
    "speak",
    "lie",
    "lead",
    "read",
    "grow",
    "lose",
    "fall",
    "send",
    "build",
    "stay",
    "cut",
    "reach",
    "kill",
    "remain",
    "suggest",
    "raise",
    "pass",
    "sell",
    "require",
    "report",
    "decide",
    "pull",
    "walk",
    "carry",
    "drive",
    "break",
    "wait",
    "serve",
    "and",
    "the",
    "of",
    "to",
    "in",
    "with",
    "for",
    "on",
    "at",
    "from",
    "by",
    "about",
    "over",
];

/// Draws one length.
pub(crate) fn draw(l: &Lengths, rng: &mut SplitMix64) -> u32 {
    match l {
        Lengths::Fixed { tokens } => *tokens,
        Lengths::Uniform { min, max } => min + rng.below((max - min) as usize + 1) as u32,
        Lengths::Normal {
            mean,
            stddev,
            min,
            max,
        } => {
            let x = (mean + stddev * rng.normal()).round();
            (x.max(f64::from(*min)).min(f64::from(*max))) as u32
        }
        Lengths::Histogram { bins } => {
            let total: f64 = bins.iter().map(|b| b.1).sum();
            let mut u = rng.next_f64() * total;
            for (t, w) in bins {
                if u < *w {
                    return *t;
                }
                u -= w;
            }
            bins.iter()
                .rev()
                .find(|b| b.1 > 0.0)
                .map(|b| b.0)
                .unwrap_or(1)
        }
    }
}

fn get(s: &Sample, k: &str) -> u32 {
    s.extra.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The placeholders: `conversations` × `turns` samples, conversation-major, with their token
/// targets in `extra` (`target_prompt_tokens`, `input_tokens`, `output_tokens`,
/// `conversation`, `turn`, `prefix_group`) and the output length as `max_tokens`.
/// `default_output` is the task's or sweep's max tokens (reply length of earlier turns when
/// the task draws no output lengths).
pub(crate) fn plan(
    syn: &Synthetic,
    conversations: usize,
    system: Option<&str>,
    default_output: u32,
    seed: u64,
) -> Vec<Sample> {
    let mut inputs = SplitMix64::derive(seed, "synthetic/input");
    let mut outputs = SplitMix64::derive(seed, "synthetic/output");
    let mut out = Vec::with_capacity(conversations * syn.turns as usize);
    for c in 0..conversations {
        let group = c as u32 % syn.prefix_groups;
        let mut target = 0u64;
        let mut last_reply = 0u64;
        for t in 1..=syn.turns {
            let input = draw(&syn.input, &mut inputs);
            let output = syn.output.as_ref().map(|o| draw(o, &mut outputs).max(1));
            target += last_reply + u64::from(input);
            last_reply = u64::from(output.unwrap_or(default_output));
            let mut extra = BTreeMap::new();
            extra.insert("target_prompt_tokens".into(), target.to_string());
            extra.insert("input_tokens".into(), input.to_string());
            extra.insert(
                "output_tokens".into(),
                output.unwrap_or(default_output).to_string(),
            );
            extra.insert("conversation".into(), c.to_string());
            extra.insert("turn".into(), t.to_string());
            extra.insert("prefix_group".into(), group.to_string());
            let mut groups = BTreeMap::new();
            if syn.turns > 1 {
                groups.insert("turn".into(), t.to_string());
            }
            if syn.shared_prefix > 0 && syn.prefix_groups > 1 {
                groups.insert("prefix_group".into(), group.to_string());
            }
            out.push(Sample {
                id: if syn.turns > 1 {
                    format!("c{c}-t{t}")
                } else {
                    format!("s{c}")
                },
                system: system.map(str::to_string),
                groups,
                extra,
                max_tokens: output,
                ..Default::default()
            });
        }
    }
    out
}

/// Every output is unscorable: synthetic prompts have no reference.
pub(crate) fn score(n: usize) -> Vec<Score> {
    (0..n)
        .map(|_| Score {
            unscorable: true,
            ..Default::default()
        })
        .collect()
}

/// A seeded word stream: its words and their token ids, at least `n` of them.
struct Stream {
    words: Vec<&'static str>,
    ids: Vec<u32>,
}

impl Stream {
    /// How many units `text` can cut: tokens where the server detokenizes, else words.
    fn len(&self, tok: &ServerTokenizer) -> usize {
        if tok.detokenizes() {
            self.ids.len()
        } else {
            self.words.len()
        }
    }

    /// The text of the stream's first `k` tokens, through the server's detokenizer; on a
    /// server without one (LMDeploy), of its first `k` words — one token each, by the choice of
    /// [`vocabulary`] — which the callers count again and move `k` until it fits.
    async fn text(&self, tok: &ServerTokenizer, k: usize) -> Result<String, TokenizeError> {
        let k = k.min(self.len(tok));
        if tok.detokenizes() {
            tok.detokenize(&self.ids[..k]).await
        } else {
            Ok(self.words[..k].iter().map(|w| format!(" {w}")).collect())
        }
    }
}

/// The words a stream draws from: all of them where the server detokenizes; where it does
/// not (LMDeploy), those that are one token each with their leading space, so that a cut after
/// k words is k tokens (a word-level pre-tokenizer never merges across words; the count is
/// checked again anyway).
async fn vocabulary(tok: &ServerTokenizer) -> Result<Vec<&'static str>, TokenizeError> {
    if tok.detokenizes() {
        return Ok(WORDS.to_vec());
    }
    let mut out = Vec::new();
    for w in WORDS {
        if tok.tokenize(&format!(" {w}")).await?.len() == 1 {
            out.push(*w);
        }
    }
    if out.is_empty() {
        return Err(TokenizeError {
            endpoint: "tokenize".into(),
            cause: "no word of the synthetic stream is a single token with this tokenizer, and the server cannot detokenize".into(),
        });
    }
    Ok(out)
}

/// The seeded word stream `name`, at least `n` tokens long, drawn from `vocab`.
async fn stream(
    tok: &ServerTokenizer,
    vocab: &[&'static str],
    seed: u64,
    name: &str,
    n: usize,
) -> Result<Stream, TokenizeError> {
    let mut rng = SplitMix64::derive(seed, name);
    let mut words = n + 16;
    loop {
        let w: Vec<&'static str> = (0..words).map(|_| vocab[rng.below(vocab.len())]).collect();
        let text: String = w.iter().map(|w| format!(" {w}")).collect();
        let ids = tok.tokenize(&text).await?;
        if ids.len() > n {
            return Ok(Stream { words: w, ids });
        }
        words *= 2;
    }
}

/// Why a synthetic task's prompts could not be written with the engine's tokenizer (no
/// approximation: the run fails with this cause).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyntheticError {
    #[error(transparent)]
    Tokenizer(#[from] TokenizeError),
    #[error("a synthetic task with `turns` needs chat requests (mode \"chat\"), not completions")]
    TurnsNeedChat,
    #[error("could not make text of exactly {tokens} tokens with this tokenizer")]
    NoExactText { tokens: usize },
    #[error("request {id}: its target of {target} prompt tokens is not above the {overhead} that {what} already take")]
    TargetTooSmall {
        id: String,
        target: usize,
        overhead: usize,
        what: String,
    },
    #[error("request {id}: no prompt of exactly {target} tokens found with this tokenizer")]
    NoExactPrompt { id: String, target: usize },
    /// A part of a request (its shared prefix, its reply) that could not be written.
    #[error("{part}: {source}")]
    Part {
        part: String,
        source: Box<SyntheticError>,
    },
}

/// Text of exactly `n` tokens on its own (re-tokenized), from the stream `name`.
async fn exact_text(
    tok: &ServerTokenizer,
    vocab: &[&'static str],
    seed: u64,
    name: &str,
    n: usize,
) -> Result<String, SyntheticError> {
    if n == 0 {
        return Ok(String::new());
    }
    let st = stream(tok, vocab, seed, name, n + 8).await?;
    let mut k = n;
    for _ in 0..8 {
        let text = st.text(tok, k).await?;
        let got = tok.tokenize(&text).await?.len();
        if got == n {
            return Ok(text);
        }
        k = (k as i64 + n as i64 - got as i64).clamp(1, st.len(tok) as i64) as usize;
    }
    Err(SyntheticError::NoExactText { tokens: n })
}

/// A request whose target leaves no room for text after what the template, the shared prefix
/// and the earlier turns already take.
fn too_small(
    p: &Sample,
    target: usize,
    overhead: usize,
    prefix: bool,
    history: bool,
) -> SyntheticError {
    SyntheticError::TargetTooSmall {
        id: p.id.clone(),
        target,
        overhead,
        what: format!(
            "the chat template{}{}",
            if prefix { ", the shared prefix" } else { "" },
            if history {
                " and the earlier turns"
            } else {
                ""
            },
        ),
    }
}

/// Conversations written at once: each is a few tokenizer calls per request, one after the
/// other, so a run's 1024 prompts cost 1024 × those calls' latency when written in turn — ~20 s
/// a run on the GPU machine — and a few seconds side by side (the order, and so every prompt,
/// is the same either way).
const CONVERSATIONS_AT_ONCE: usize = 8;

/// The template's, system prompt's and shared prefix's own tokens, by (system, prefix): counted
/// once for all the conversations (two that count the same one at once both count it).
type Overheads = std::sync::Mutex<BTreeMap<(Option<String>, String), usize>>;

/// Writes the text of the placeholders from [`plan`] with the engine's tokenizer: every
/// request's prompt tokens, as the server counts them, equal its `target_prompt_tokens`.
pub(crate) async fn materialize(
    syn: &Synthetic,
    api: Api,
    placeholders: &[Sample],
    tok: &ServerTokenizer,
    seed: u64,
) -> Result<Vec<Sample>, SyntheticError> {
    use futures_util::{StreamExt, TryStreamExt};
    if syn.turns > 1 && api == Api::Completion {
        return Err(SyntheticError::TurnsNeedChat);
    }
    let vocab = vocabulary(tok).await?;
    // The shared prefixes, one per group, before the requests that only read them.
    let mut prefixes: BTreeMap<u32, String> = BTreeMap::new();
    if syn.shared_prefix > 0 {
        for p in placeholders.iter().filter(|p| get(p, "turn") == 1) {
            let group = get(p, "prefix_group");
            if prefixes.contains_key(&group) {
                continue;
            }
            let text = exact_text(
                tok,
                &vocab,
                seed,
                &format!("synthetic/prefix/{group}"),
                syn.shared_prefix as usize,
            )
            .await
            .map_err(|e| SyntheticError::Part {
                part: format!("shared prefix of group {group}"),
                source: Box::new(e),
            })?;
            prefixes.insert(group, text);
        }
    }
    let at = Written {
        syn,
        api,
        tok,
        vocab: &vocab,
        seed,
        prefixes: &prefixes,
        overheads: Overheads::default(),
    };
    let conversations =
        placeholders.chunk_by(|a, b| get(a, "conversation") == get(b, "conversation"));
    let written: Vec<Vec<Sample>> =
        futures_util::stream::iter(conversations.map(|c| at.conversation(c)))
            .buffered(CONVERSATIONS_AT_ONCE)
            .try_collect()
            .await?;
    Ok(written.into_iter().flatten().collect())
}

/// What every conversation of a run is written with.
struct Written<'a> {
    syn: &'a Synthetic,
    api: Api,
    tok: &'a ServerTokenizer,
    vocab: &'a [&'static str],
    seed: u64,
    prefixes: &'a BTreeMap<u32, String>,
    overheads: Overheads,
}

impl Written<'_> {
    /// One conversation's requests, in turn: each turn's history is the earlier turns'
    /// prompts and replies.
    async fn conversation(&self, turns: &[Sample]) -> Result<Vec<Sample>, SyntheticError> {
        let (syn, api, tok, vocab, seed) = (self.syn, self.api, self.tok, self.vocab, self.seed);
        let mut out: Vec<Sample> = Vec::with_capacity(turns.len());
        let mut history: Vec<(String, String)> = Vec::new();
        let mut reply = String::new();
        for p in turns {
            let (c, t, group) = (
                get(p, "conversation"),
                get(p, "turn"),
                get(p, "prefix_group"),
            );
            if let Some(last) = out.last() {
                history.push((last.prompt.clone(), std::mem::take(&mut reply)));
            }
            let prefix = if syn.shared_prefix > 0 && t == 1 {
                self.prefixes.get(&group).cloned().unwrap_or_default()
            } else {
                String::new()
            };
            let target = get(p, "target_prompt_tokens") as usize;
            let name = format!("synthetic/text/{c}/{t}");
            let st = stream(tok, vocab, seed, &name, target + 8).await?;
            let count = |text: String| {
                let history = &history;
                let system = p.system.clone();
                async move {
                    tok.count(PromptParts {
                        api,
                        system: system.as_deref(),
                        history,
                        prompt: &text,
                    })
                    .await
                }
            };
            // The template's, system prompt's and shared prefix's own tokens: once per group.
            let key = (p.system.clone(), prefix.clone());
            let known = history
                .is_empty()
                .then(|| {
                    self.overheads
                        .lock()
                        .expect("not poisoned")
                        .get(&key)
                        .copied()
                })
                .flatten();
            let overhead = match known {
                Some(n) => n,
                None => {
                    let n = count(prefix.clone()).await?;
                    if history.is_empty() {
                        self.overheads.lock().expect("not poisoned").insert(key, n);
                    }
                    n
                }
            };
            if overhead >= target {
                return Err(too_small(
                    p,
                    target,
                    overhead,
                    !prefix.is_empty(),
                    !history.is_empty(),
                ));
            }
            // The prompt made of the prefix and the first k tokens of this request's stream.
            let cut = async |k: usize| -> Result<String, SyntheticError> {
                let text = st.text(tok, k).await?;
                Ok(format!("{prefix}{text}"))
            };
            let mut n = target - overhead;
            let mut tried = std::collections::BTreeSet::new();
            let mut found = None;
            for _ in 0..16 {
                if !tried.insert(n) {
                    break;
                }
                let text = cut(n).await?;
                let got = count(text.clone()).await?;
                if got == target {
                    found = Some(text);
                    break;
                }
                n = (n as i64 + target as i64 - got as i64).clamp(1, st.len(tok) as i64) as usize;
            }
            if found.is_none() {
                // The cut oscillates around a word that merges with its neighbour: try the
                // neighbours of the last cut.
                for d in [1i64, -1, 2, -2, 3, -3] {
                    let k = (n as i64 + d).clamp(1, st.len(tok) as i64) as usize;
                    let text = cut(k).await?;
                    if count(text.clone()).await? == target {
                        found = Some(text);
                        break;
                    }
                }
            }
            let Some(prompt) = found else {
                return Err(SyntheticError::NoExactPrompt {
                    id: p.id.clone(),
                    target,
                });
            };
            if syn.turns > 1 && t < syn.turns {
                reply = exact_text(
                    tok,
                    vocab,
                    seed,
                    &format!("synthetic/reply/{c}/{t}"),
                    get(p, "output_tokens") as usize,
                )
                .await
                .map_err(|e| SyntheticError::Part {
                    part: format!("reply of request {}", p.id),
                    source: Box::new(e),
                })?;
            }
            let mut s = p.clone();
            s.prompt = prompt;
            s.history = history.clone();
            out.push(s);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::client::tokenize::ServerTokenizer;
    use crate::spec::catalog::TokenizeApi;

    #[test]
    fn a_stream_is_cut_by_tokens_where_the_server_detokenizes_else_by_words() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let st = super::Stream {
            words: vec!["time", "year", "people"],
            ids: vec![1, 2, 3, 4],
        };
        // LMDeploy: no detokenizer, so the first k words (leading spaces as tokenized).
        let lm = ServerTokenizer::offline(TokenizeApi::Lmdeploy);
        assert_eq!(st.len(&lm), 3);
        assert_eq!(rt.block_on(st.text(&lm, 2)).unwrap(), " time year");
        assert_eq!(rt.block_on(st.text(&lm, 9)).unwrap(), " time year people");
        // vLLM: cut by token ids.
        assert_eq!(st.len(&ServerTokenizer::offline(TokenizeApi::Vllm)), 4);
    }

    use super::*;

    fn syn(input: Lengths, turns: u32) -> Synthetic {
        Synthetic {
            input,
            output: Some(Lengths::Fixed { tokens: 16 }),
            shared_prefix: 0,
            prefix_groups: 1,
            turns,
            fresh_prompts: false,
        }
    }

    #[test]
    fn fresh_prompts_enter_the_prompt_identity_only_when_on() {
        let mut s = syn(Lengths::Fixed { tokens: 64 }, 1);
        let off = serde_json::to_string(&s).unwrap();
        assert!(!off.contains("fresh"), "{off}");
        s.fresh_prompts = true;
        let on = serde_json::to_string(&s).unwrap();
        assert!(on.contains(r#""fresh_prompts":true"#), "{on}");
    }

    #[test]
    fn draws_stay_in_their_ranges_and_follow_the_weights() {
        let mut rng = SplitMix64::new(7);
        let u = Lengths::Uniform { min: 10, max: 12 };
        let mut seen = [0u32; 3];
        for _ in 0..3000 {
            let x = draw(&u, &mut rng);
            assert!((10..=12).contains(&x));
            seen[(x - 10) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 900), "{seen:?}");
        let n = Lengths::Normal {
            mean: 100.0,
            stddev: 10.0,
            min: 90,
            max: 130,
        };
        let xs: Vec<u32> = (0..4000).map(|_| draw(&n, &mut rng)).collect();
        assert!(xs.iter().all(|x| (90..=130).contains(x)));
        let mean = xs.iter().map(|&x| f64::from(x)).sum::<f64>() / xs.len() as f64;
        // Clamping at 90 lifts the mean a little above 100.
        assert!((100.0..103.0).contains(&mean), "{mean}");
        let h = Lengths::Histogram {
            bins: vec![(128, 3.0), (512, 1.0), (2048, 0.0)],
        };
        let xs: Vec<u32> = (0..8000).map(|_| draw(&h, &mut rng)).collect();
        let short = xs.iter().filter(|&&x| x == 128).count() as f64 / xs.len() as f64;
        assert!((0.72..0.78).contains(&short), "{short}");
        assert!(!xs.contains(&2048));
    }

    #[test]
    fn turns_add_the_previous_reply_and_their_own_input() {
        let s = syn(Lengths::Fixed { tokens: 100 }, 3);
        let p = plan(&s, 2, None, 64, 1);
        assert_eq!(p.len(), 6);
        let targets: Vec<u32> = p.iter().map(|x| get(x, "target_prompt_tokens")).collect();
        assert_eq!(targets, [100, 216, 332, 100, 216, 332]);
        assert_eq!(p[1].id, "c0-t2");
        assert_eq!(p[0].max_tokens, Some(16));
        // Same seed, same plan; another seed, other draws.
        let u = syn(Lengths::Uniform { min: 50, max: 500 }, 1);
        assert_eq!(plan(&u, 20, None, 64, 5), plan(&u, 20, None, 64, 5));
        assert_ne!(plan(&u, 20, None, 64, 5), plan(&u, 20, None, 64, 6));
    }

    #[test]
    fn every_output_is_unscorable() {
        assert!(score(3).iter().all(|s| s.unscorable));
    }
}
