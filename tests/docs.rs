//! The documentation holds together: README.md stays a front page, every page of the book in
//! docs/ is reachable from its table of contents, every relative link (and `#anchor`) in the
//! documentation points at something that exists, and the code's comments cite pages that
//! exist. (Its KDL examples and duckdb queries are run by tests/sweeps.rs and
//! tests/tasks_llama.rs.)

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, everything but letters, digits,
/// `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Headings of a Markdown text outside fenced code blocks.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of inline links `[text](target)` outside fenced code, with their line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for (page, text) in common::book() {
        let dir = root().join(&page).parent().unwrap().to_path_buf();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path: PathBuf = if file.is_empty() {
                root().join(&page)
            } else {
                dir.join(file)
            };
            if !path.exists() {
                broken.push(format!("{page}:{line}: {target}: no such file"));
                continue;
            }
            if let Some(a) = anchor {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&text).contains(a) {
                    broken.push(format!("{page}:{line}: {target}: no heading #{a}"));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: the reference belongs in docs/ (README is the front page)"
    );
    // It says how to install, the two commands, and where the reference is.
    for needed in ["scripts/quickstart.sh", "scripts/test.sh", "docs/README.md"] {
        assert!(readme.contains(needed), "README does not mention {needed}");
    }
}

#[test]
fn every_page_of_the_book_is_in_its_table_of_contents() {
    let toc = std::fs::read_to_string(root().join("docs/README.md")).unwrap();
    let linked: BTreeSet<String> = links(&toc)
        .into_iter()
        .map(|(_, t)| t.split('#').next().unwrap().to_string())
        .collect();
    let mut missing = Vec::new();
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".md") && name != "README.md" && !linked.contains(&name) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/README.md does not list {missing:?}"
    );
}

/// Comments in the code cite the page that explains them (`docs/<page>.md`); the page must
/// exist, and nothing cites the README for reference material any more.
#[test]
fn the_codes_citations_point_at_pages_that_exist() {
    let files = common::files_under(&root().join("src"), "rs");
    let cite = regex::Regex::new(r"docs/([A-Za-z0-9_./-]+\.md)").unwrap();
    let mut bad = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let rel = f.strip_prefix(root()).unwrap().display().to_string();
            if line.contains("README, \"") || line.contains("README \"") {
                bad.push(format!(
                    "{rel}:{}: cites the README; cite its docs/ page",
                    n + 1
                ));
            }
            for c in cite.captures_iter(line) {
                if !root().join("docs").join(&c[1]).exists() {
                    bad.push(format!("{rel}:{}: docs/{} does not exist", n + 1, &c[1]));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
