//! Seeded mutation fuzzing of every parser of outside input (stable Rust: no cargo-fuzz).
//! Each target starts from a corpus of real inputs (`tests/fixtures/fuzz/<target>/`, plus the
//! shipped sweeps and invalid fixtures), mutates them with a seeded generator (byte flips,
//! inserts of KDL/JSON/SSE/CSV tokens, deletions, duplications, truncations, splices), and
//! feeds each case to the parser: it must return, never panic. A panicking case is written
//! to `tests/fixtures/fuzz/crashers/` and fails the test; every crasher committed there is
//! replayed first, as a regression fixture. (A stack overflow aborts the process instead —
//! input bounds exist so that none can; `scripts/fuzz.sh` keeps the case in flight when the
//! process aborts, as a crasher.) Besides byte and token edits, the mutator works on lines
//! (duplicate, delete, swap, repeat a line hundreds of times) and, for sweep files, builds the
//! hostile shapes that once crashed or stalled the parser: an unclosed quote followed by deep
//! nesting, thousands of unclosed multi-line and raw strings or comments, problems past
//! column 65,535 of a line. The sweep target renders every diagnostic it gets, as the CLI does.
//!
//! A case that takes over a second is kept under `tests/fixtures/fuzz/slow/` and reported; it
//! fails only `scripts/fuzz.sh` (a benchmark), never `cargo test`, whose verdicts must not
//! depend on the machine's speed.
//!
//! `cargo test` runs `BENCH360_FUZZ_CASES` cases per target (default 300);
//! `scripts/fuzz.sh N` runs N per target in a release build.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::record::rng::SplitMix64;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> usize {
    std::env::var("BENCH360_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn seed() -> u64 {
    std::env::var("BENCH360_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x00be_0360)
}

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"\"",
    b"\\",
    b"#",
    b"##\"",
    b"\"\"\"",
    b"/*",
    b"*/",
    b"//",
    b"/-",
    b";",
    b"\n",
    b"\r\n",
    b"\0",
    b"\xff",
    b"\xe2\x82",
    b"=",
    b",",
    b":",
    b"[",
    b"]",
    b"data: ",
    b"data: [DONE]\n\n",
    b"\n\n",
    b"null",
    b"true",
    b"-1",
    b"0",
    b"1e309",
    b"-1e309",
    b"NaN",
    b"+Inf",
    b"18446744073709551616",
    b"9223372036854775807",
    b"#inf",
    b"#nan",
    b"${X}",
    b"choices",
    b"delta",
    b"usage",
    b"\"t\"",
    b"PAR1",
    b"'",
    b"\t",
];

/// One mutation of `base` (and sometimes a splice with `other`).
fn mutate(rng: &mut SplitMix64, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let at = if v.is_empty() {
            0
        } else {
            rng.below(v.len() + 1)
        };
        match rng.below(9) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 | 2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
            3 if !v.is_empty() => {
                let end = (at + 1 + rng.below(64)).min(v.len());
                if at < end {
                    v.drain(at..end);
                }
            }
            4 if !v.is_empty() => {
                let start = rng.below(v.len());
                let end = (start + 1 + rng.below(256)).min(v.len());
                let piece: Vec<u8> = v[start..end].to_vec();
                let times = 1 + rng.below(8);
                for _ in 0..times {
                    v.splice(at..at, piece.iter().copied());
                }
            }
            5 => v.truncate(at),
            6 if !other.is_empty() => {
                let start = rng.below(other.len());
                let end = (start + 1 + rng.below(512)).min(other.len());
                v.splice(at..at, other[start..end].iter().copied());
            }
            7 => mutate_lines(rng, &mut v, other),
            _ => {
                let b = (rng.next_u64() & 0xff) as u8;
                v.insert(at, b);
            }
        }
    }
    v
}

/// The line operators: duplicate, delete or swap lines, repeat one many times, or put in a
/// line of `other`.
fn mutate_lines(rng: &mut SplitMix64, v: &mut Vec<u8>, other: &[u8]) {
    let lines = |b: &[u8]| -> Vec<Vec<u8>> {
        b.split_inclusive(|&c| c == b'\n')
            .map(<[u8]>::to_vec)
            .collect()
    };
    let mut ls = lines(v);
    if ls.is_empty() {
        ls.push(Vec::new());
    }
    let i = rng.below(ls.len());
    match rng.below(5) {
        0 => {
            let l = ls[i].clone();
            ls.insert(i, l);
        }
        1 => {
            ls.remove(i);
        }
        2 => {
            let j = rng.below(ls.len());
            ls.swap(i, j);
        }
        3 => {
            let l = ls[i].clone();
            let times = 1 + rng.below(500);
            for _ in 0..times {
                ls.insert(i, l.clone());
            }
        }
        _ => {
            let o = lines(other);
            if !o.is_empty() {
                ls.insert(i, o[rng.below(o.len())].clone());
            }
        }
    }
    *v = ls.concat();
}

/// The hostile shapes of sweep input, put in at a random line start of `v`.
fn mutate_kdl(rng: &mut SplitMix64, v: &mut Vec<u8>) {
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(
            v.iter()
                .enumerate()
                .filter(|(_, &c)| c == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let at = line_starts[rng.below(line_starts.len())];
    let piece: Vec<u8> = match rng.below(5) {
        // A lexical error (an unclosed quote or raw quote, a multi-line string whose lines
        // break its indentation), then nesting deep enough to overflow a parser that reads
        // on past the error.
        0 => {
            let quote: &[u8] = [
                &b"x \"open\n"[..],
                b"x \"esc\\\"\n",
                b"x #\"raw\n",
                b"\"\n",
                b"    t #\"\"\"\nx\n",
                b"    t \"\"\"\nx \\q\n",
                b"t \"\"\"x\n",
            ][rng.below(7)];
            let opener: &[u8] = [&b"a {"[..], b"{", b"a { /- b {"][rng.below(3)];
            let depth = 1_000 + rng.below(100_000);
            let close: &[u8] = [&b""[..], b"\n    \"\"\"#\n", b"\n    \"\"\"\n"][rng.below(3)];
            [quote.to_vec(), opener.repeat(depth), close.to_vec()].concat()
        }
        // A chain of slashdashes (the parser's time grows with the square of its length).
        4 => [&b"a "[..], &b"/- ".repeat(100 + rng.below(5_000)), b"b\n"].concat(),
        // Thousands of openers of things that run to the end of the file when never closed.
        1 => {
            let opener: &[u8] = [
                &b"template #\"\"\"\n"[..],
                b"t ##\"\"\"\n",
                b"t \"\"\"\n",
                b"t #\"\n",
                b"t \"\n",
                b"/*\n",
                b"/* /*\n",
            ][rng.below(7)];
            opener.repeat(100 + rng.below(3_000))
        }
        // A line long enough that a problem on it lies past column 65,535.
        2 => {
            let fill: &[u8] = [&b"a"[..], b"\xc3\xa9", b" ", b"\t"][rng.below(4)];
            let tail: &[u8] = [&b"\"{"[..], b"{", b" =", b"}", b"\"", b" #"][rng.below(6)];
            let head: &[u8] = [&b";&\""[..], b"a \"", b"", b"a "][rng.below(4)];
            [
                head.to_vec(),
                fill.repeat(60_000 + rng.below(10_000)),
                tail.to_vec(),
            ]
            .concat()
        }
        // Many duplicate entries (huge duplicate sets in one block).
        _ => {
            let entry: &[u8] = [
                &b"  users 1 1 1 1 1 1 1 1\n"[..],
                b"  model \"m\" { }\n",
                b"  k=1 k=1 k=1\n",
            ][rng.below(3)];
            [
                b"scenario \"s\" {\n".to_vec(),
                entry.repeat(100 + rng.below(5_000)),
                b"}\n".to_vec(),
            ]
            .concat()
        }
    };
    v.splice(at..at, piece);
}

fn corpus(target: &str, extra: &[PathBuf]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let dir = root().join("tests/fixtures/fuzz").join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.extend(extra.iter().cloned());
    paths.sort();
    for p in paths {
        if let Ok(b) = std::fs::read(&p) {
            out.push(b);
        }
    }
    assert!(!out.is_empty(), "no corpus for {target}");
    out
}

fn crashers(target: &str) -> Vec<Vec<u8>> {
    let dir = root().join("tests/fixtures/fuzz/crashers");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{target}-")))
                })
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// A case slower than this is kept under `tests/fixtures/fuzz/slow/` and reported.
const SLOW: Duration = Duration::from_secs(1);

fn keep(dir: &str, target: &str, input: &[u8]) -> String {
    let name = format!("{target}-{}", &blake3::hash(input).to_hex()[..16]);
    let dir = root().join("tests/fixtures/fuzz").join(dir);
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(&name);
    let _ = std::fs::write(&path, input);
    path.display().to_string()
}

/// Runs `check` on every committed crasher of `target`, then on `cases()` mutants of the
/// corpus (`kdl`: with the sweep-file shapes too). Returns how many cases ran.
fn fuzz(target: &str, extra: &[PathBuf], kdl: bool, check: &dyn Fn(&[u8])) -> usize {
    quiet_panics_on_fuzz_threads();
    // BENCH360_FUZZ_INFLIGHT=DIR: each case is written there before it runs, so a case that
    // aborts the process (a stack overflow cannot be caught) is left behind for fuzz.sh.
    let inflight = std::env::var_os("BENCH360_FUZZ_INFLIGHT")
        .map(|d| PathBuf::from(d).join(format!("{target}-inflight")));
    let mut failures = Vec::new();
    let mut slow: Vec<(String, Duration)> = Vec::new();
    let mut run = |input: &[u8], failures: &mut Vec<String>| {
        if let Some(p) = &inflight {
            let _ = std::fs::write(p, input);
        }
        let t = Instant::now();
        let panicked = catch_unwind(AssertUnwindSafe(|| check(input))).is_err();
        let took = t.elapsed();
        if panicked {
            failures.push(keep("crashers", target, input));
        } else if took > SLOW {
            slow.push((keep("slow", target, input), took));
        }
    };
    let regressions = crashers(target);
    for c in &regressions {
        run(c, &mut failures);
    }
    let seeds = corpus(target, extra);
    let mut rng = SplitMix64::derive(seed(), target);
    let n = cases();
    for _ in 0..n {
        let base = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())];
        let mut input = mutate(&mut rng, base, other);
        if kdl && rng.below(4) == 0 {
            mutate_kdl(&mut rng, &mut input);
        }
        run(&input, &mut failures);
    }
    if let Some(p) = &inflight {
        let _ = std::fs::remove_file(p);
    }
    for (path, took) in &slow {
        eprintln!("fuzz {target}: a case took {took:.2?} (kept as {path})");
    }
    assert!(
        failures.is_empty(),
        "{target}: {} input(s) made a parser panic (saved): {failures:?}",
        failures.len()
    );
    // Time is a benchmark's verdict (scripts/fuzz.sh sets this), never a test's.
    if std::env::var_os("BENCH360_FUZZ_SLOW_FAILS").is_some() {
        assert!(
            slow.is_empty(),
            "{target}: {} case(s) took over {SLOW:?} (kept under tests/fixtures/fuzz/slow/)",
            slow.len()
        );
    }
    regressions.len() + n
}

/// Panics of fuzz cases are expected and caught: keep them off the output, on the fuzz
/// tests' own threads only (test threads are named after their test).
fn quiet_panics_on_fuzz_threads() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let fuzzing = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("fuzz::"));
            if !fuzzing {
                default(info);
            }
        }));
    });
}

fn sweep_files() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for d in ["sweeps", "tests/fixtures/invalid"] {
        if let Ok(rd) = std::fs::read_dir(root().join(d)) {
            v.extend(
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "kdl")),
            );
        }
    }
    v
}

#[test]
fn sweep_files_never_crash_the_parser() {
    let n = fuzz("sweep", &sweep_files(), true, &|b| {
        let text = String::from_utf8_lossy(b);
        if let Err(e) = crate::sweep::parse(
            "fuzz.kdl",
            &text,
            Path::new("/fuzz"),
            &|_| Some("/x".to_string()),
            &Default::default(),
        ) {
            // Rendered as the CLI renders it, in both themes.
            let _ = crate::sweep::diag::render(&e, false);
            let _ = crate::sweep::diag::render(&e, true);
        }
    });
    assert!(n >= cases());
}

#[test]
fn sse_streams_never_crash_the_client() {
    fuzz("sse", &[], false, &|b| {
        let mut dec = crate::client::sse::SseDecoder::default();
        let mut rec = crate::record::RequestRecord::default();
        let mut chunks = Vec::new();
        // In two pieces, as a network would deliver them.
        let cut = b.len() / 2;
        let mut payloads = dec.push(&b[..cut]);
        payloads.extend(dec.push(&b[cut..]));
        payloads.extend(dec.finish());
        for (i, p) in payloads.iter().enumerate() {
            let _ = crate::client::apply_event(&mut rec, &mut chunks, p, i as i64);
        }
    });
}

#[test]
fn prometheus_text_never_crashes_the_scraper() {
    fuzz("prom", &[], false, &|b| {
        let text = String::from_utf8_lossy(b);
        let samples = crate::telemetry::prom::parse(&text);
        let _ = crate::telemetry::prom::gauges(&samples);
    });
}

fn with_file(name: &str, bytes: &[u8], f: impl Fn(&Path)) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).expect("write");
    f(&p);
}

#[test]
fn dataset_files_never_crash_their_readers() {
    let data = root().join("datasets");
    let extra = [
        data.join("squad_v2/dev_subset.jsonl"),
        data.join("mmlu/dev.jsonl"),
    ];
    // Only the first few KB of big seeds: mutations near the start matter most.
    fuzz("jsonl", &extra, false, &|b| {
        let b = &b[..b.len().min(64 << 10)];
        with_file("d.jsonl", b, |p| {
            let _ = crate::task::custom::read_rows(p);
            let _: Result<Vec<serde_json::Value>, _> = crate::task::read_jsonl(p);
        });
    });
    fuzz("csv", &[], false, &|b| {
        with_file("d.csv", b, |p| {
            let _ = crate::task::custom::read_rows(p);
        });
        with_file("d.tsv", b, |p| {
            let _ = crate::task::custom::read_rows(p);
        });
    });
}

/// A small Parquet file of the kind datasets and traces come in.
fn parquet_seed() -> Vec<u8> {
    use crate::trace::Cell;
    let dir = tempfile::tempdir().expect("tempdir");
    let (p, c) = (dir.path().join("s.parquet"), dir.path().join("s.csv"));
    let rows: Vec<Vec<(&'static str, Cell)>> = (0..20)
        .map(|i| {
            vec![
                ("t", Cell::F64(Some(i as f64 * 0.5))),
                ("output_tokens", Cell::I64(Some(16 + i))),
                ("question", Cell::Str(Some(format!("q{i}")))),
                ("answer", Cell::Str(Some("A".into()))),
            ]
        })
        .collect();
    crate::trace::write_rows(&p, &c, &rows).expect("parquet");
    std::fs::read(p).expect("read")
}

#[test]
fn parquet_files_never_crash_their_readers() {
    let seed_dir = tempfile::tempdir().expect("tempdir");
    let seed_path = seed_dir.path().join("seed.parquet");
    std::fs::write(&seed_path, parquet_seed()).expect("write");
    fuzz("parquet", &[seed_path], false, &|b| {
        with_file("d.parquet", b, |p| {
            let _ = crate::task::custom::read_rows(p);
            let _ = crate::workload::load_trace(p);
        });
    });
}

#[test]
fn replay_traces_never_crash_the_reader() {
    fuzz("trace", &[], false, &|b| {
        for ext in ["jsonl", "csv"] {
            with_file(&format!("t.{ext}"), b, |p| {
                let _ = crate::workload::load_trace(p);
            });
        }
    });
}

#[test]
fn mutations_are_seeded() {
    let mut a = SplitMix64::new(7);
    let mut b = SplitMix64::new(7);
    let base = b"sweep \"s\" { seed 1; }".to_vec();
    for _ in 0..50 {
        assert_eq!(mutate(&mut a, &base, &base), mutate(&mut b, &base, &base));
    }
}
