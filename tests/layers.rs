//! The layering of `src/` (docs/ARCHITECTURE.md): top-level modules import one another only
//! downward. Read from the source's own `crate::…` paths, with no extra tooling: a test fails
//! on any import cycle between top-level modules, and on any import that breaks the declared
//! layer order (a module may use modules of lower layers only).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, lowest first. A module may import modules of strictly lower layers.
const LAYERS: &[&[&str]] = &[
    &["host", "spec"],
    &["record"],
    &["store", "client", "engine", "telemetry", "trace"],
    &["task"],
    &["sweep"],
    &["plan", "workload"],
    &["report"],
    &["cli"],
    &["exec", "slurm", "selfbench", "fuzz"],
    &["app"],
    &["compare"],
    &["cmd"],
    &["main"],
];

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Strips `//` comments (line and doc) and string literals, so that prose and test data that
/// mention `crate::x` do not count as imports.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut kept = String::new();
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if !in_str && c == '/' && chars.get(i + 1) == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' && !(prev == '\'' && chars.get(i + 1) == Some(&'\'')) {
                in_str = !in_str;
            } else if !in_str {
                kept.push(c);
            }
            prev = if prev == '\\' && c == '\\' { ' ' } else { c };
            i += 1;
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

/// Top-level modules named after `crate::` in a source text (`crate::a::b`, `crate::{a, b}`).
fn imported(text: &str) -> BTreeSet<String> {
    let code = code_only(text);
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `$crate::` or `other_crate::`
        }
        let t = rest.trim_start();
        if let Some(group) = t.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = t
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    // module -> imported module -> files doing it
    let mut g: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().to_string();
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        let entry = g.entry(top.clone()).or_default();
        for m in imported(&text) {
            if m != top && m != "self" && m != "super" {
                entry.entry(m).or_default().insert(rel.clone());
            }
        }
    }
    g
}

fn layer_of(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let g = graph();
    // Depth-first search for a back edge; report the cycle's path.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
        cycles: &mut Vec<String>,
    ) {
        state.insert(m.to_string(), 1);
        stack.push(m.to_string());
        for next in g
            .get(m)
            .map(|e| e.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            match state.get(&next).copied().unwrap_or(0) {
                0 => visit(&next, g, state, stack, cycles),
                1 => {
                    let at = stack.iter().position(|s| *s == next).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(next.clone());
                    cycles.push(c.join(" → "));
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.to_string(), 2);
    }
    let mut state = BTreeMap::new();
    let mut cycles = Vec::new();
    for m in g.keys() {
        if state.get(m).copied().unwrap_or(0) == 0 {
            visit(m, &g, &mut state, &mut Vec::new(), &mut cycles);
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles among src/ modules:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn every_import_goes_down_the_layers() {
    let g = graph();
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let Some(lm) = layer_of(m) else {
            wrong.push(format!(
                "{m}: not placed in a layer (add it to LAYERS and the docs)"
            ));
            continue;
        };
        for (d, files) in deps {
            match layer_of(d) {
                Some(ld) if ld < lm => {}
                Some(_) => wrong.push(format!(
                    "{m} imports {d} (same or higher layer) in {files:?}"
                )),
                None => wrong.push(format!("{m} imports {d}, which is in no layer")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_sees_grouped_and_plain_paths_but_not_comments_or_strings() {
    let text = "use crate::a::{X};\nuse crate::{b, c::D};\n// crate::e\nlet s = \"crate::f\";\nlet y = crate::g::h();\n";
    let got: Vec<String> = imported(text).into_iter().collect();
    assert_eq!(got, ["a", "b", "c", "g"]);
}

/// The longest a source file may be without a reason written for it.
const MAX_LINES: usize = 800;

/// One file, one concern: a file of `src/` over [`MAX_LINES`] lines fails unless
/// docs/ARCHITECTURE.md lists it, under "Files over 800 lines", with its reason
/// (`- \`src/x.rs\` — why`); a listed file that is no longer long must leave the list.
#[test]
fn no_source_file_is_long_without_a_written_reason() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let arch = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let section = arch
        .split("## Files over 800 lines")
        .nth(1)
        .map(|s| s.split("\n## ").next().unwrap_or(""))
        .unwrap_or("");
    let listed: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split_once('`'))
        .filter(|(_, why)| why.trim_start_matches([' ', '—', '-', ':']).trim().len() > 10)
        .map(|(p, _)| p.to_string())
        .collect();
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    let mut problems = Vec::new();
    let mut long = BTreeSet::new();
    for f in files {
        let n = std::fs::read_to_string(&f).unwrap().lines().count();
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        if n > MAX_LINES {
            long.insert(rel.clone());
            if !listed.contains(&rel) {
                problems.push(format!(
                    "{rel} has {n} lines: split it by concern, or list it with its reason under \
                     \"Files over 800 lines\" in docs/ARCHITECTURE.md"
                ));
            }
        }
    }
    for l in listed.difference(&long) {
        problems.push(format!(
            "{l} is listed under \"Files over 800 lines\" in docs/ARCHITECTURE.md but is not: \
             take it off the list"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The source files of `src/` (path relative to the repository) with their unit tests cut:
/// files named `tests.rs`, the fuzzer (tests only) and each file's `mod tests` block.
fn sources_without_unit_tests() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    files
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(root).unwrap().display().to_string();
            if rel.ends_with("/tests.rs") || rel == "src/fuzz.rs" {
                return None;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
            Some((rel, code.to_string()))
        })
        .collect()
}

/// Errors are types, not strings: no `Result<_, String>` in the code outside the command
/// line's value parsers (`src/cli.rs`, clap's own convention) and tests. The `anyhow` edge is
/// `cmd/`, `main.rs` and `app.rs` (docs/ARCHITECTURE.md).
#[test]
fn no_function_returns_a_string_as_its_error() {
    let pattern = regex::Regex::new(r"Result<[^;{]*,\s*String>").unwrap();
    let mut found = Vec::new();
    for (rel, code) in sources_without_unit_tests() {
        if rel == "src/cli.rs" {
            continue;
        }
        for (n, line) in code.lines().enumerate() {
            if !line.trim_start().starts_with("//") && pattern.is_match(line) {
                found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "string errors (give them a thiserror type):\n{}",
        found.join("\n")
    );
}

/// `anyhow` is the command line's edge only: `main.rs`, `cmd/`, `app.rs` (the pipeline the
/// commands share) and `selfbench/` (a command of its own). Everything below them returns
/// its own error types.
#[test]
fn anyhow_stays_at_the_command_line_edge() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rs_files(&root.join("src"), &mut files);
    let mut found = Vec::new();
    for f in files {
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        if rel == "src/main.rs"
            || rel == "src/app.rs"
            || rel.starts_with("src/cmd/")
            || rel.starts_with("src/selfbench/")
        {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in code_only(&text).lines().enumerate() {
            if line.contains("anyhow") {
                found.push(format!("{rel}:{}", n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "anyhow below the edge:\n{}",
        found.join("\n")
    );
}

/// The longest a function may be without a reason written above it.
const MAX_FN_LINES: usize = 150;

/// Functions short enough to hold in one's head: one over [`MAX_FN_LINES`] lines must say
/// why in its doc comment ("Long on purpose: …"). Measured from its `fn` line to its closing
/// brace, on the code without comments, strings and character literals; unit tests (files
/// named `tests.rs`, `mod tests` blocks) are not measured.
#[test]
fn no_function_is_long_without_a_written_reason() {
    let fn_start = regex::Regex::new(r"^\s*(pub(\([^)]*\))?\s+)?(async\s+)?fn\s+(\w+)").unwrap();
    let chars = regex::Regex::new(r"'(\\.|[^'\\])'").unwrap();
    let mut long = Vec::new();
    for (rel, raw) in sources_without_unit_tests() {
        let raw = raw.as_str();
        let raw_lines: Vec<&str> = raw.lines().collect();
        let code: Vec<String> = code_only(raw)
            .lines()
            .map(|l| chars.replace_all(l, "").into_owned())
            .collect();
        for (i, line) in code.iter().enumerate() {
            let Some(m) = fn_start.captures(line) else {
                continue;
            };
            let (mut depth, mut opened, mut end) = (0i64, false, i);
            for (j, l) in code.iter().enumerate().skip(i) {
                if !opened && l.trim_end().ends_with(';') && !l.contains('{') {
                    break; // a declaration without a body
                }
                for c in l.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if opened && depth <= 0 {
                    end = j;
                    break;
                }
            }
            let n = end + 1 - i;
            if !opened || n <= MAX_FN_LINES {
                continue;
            }
            let doc: String = raw_lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    let t = l.trim_start();
                    t.starts_with("///") || t.starts_with("//") || t.starts_with("#[")
                })
                .copied()
                .collect::<Vec<_>>()
                .join("\n");
            if !doc.contains("Long on purpose") {
                long.push(format!("{rel}:{}: fn {} has {n} lines", i + 1, &m[4]));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines without a reason (split them by step, or say \
         \"Long on purpose: …\" in the doc comment):\n{}",
        long.join("\n")
    );
}
