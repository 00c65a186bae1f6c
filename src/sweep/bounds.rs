//! Bounds on sweep input, checked before the KDL parser sees it: the file's kind and size,
//! and how deep blocks nest (the parser recurses once per level, so a hostile file could
//! otherwise exhaust the stack). The depth scan knows KDL's strings (quoted, multi-line,
//! raw with `#`s) and comments (line, nested block), so braces inside them do not count.

use std::io::Read;
use std::path::Path;

use miette::SourceSpan;

use super::diag::Problem;

/// Deepest nesting of `{ … }` blocks a sweep may have (real sweeps use 3).
pub(crate) const MAX_DEPTH: usize = 32;
/// Largest sweep file read (real sweeps are a few KB).
pub(crate) const MAX_SWEEP_BYTES: u64 = 4 << 20;
/// Most problems rendered for one file; the rest are counted.
pub(crate) const MAX_SHOWN: usize = 50;

/// Reads a regular file of at most `max` bytes: a device (`/dev/zero`), a FIFO or a
/// directory is refused, and so is a file past the limit, without reading it all.
pub(crate) fn read_bounded(path: &Path, max: u64, what: &str) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read {what} {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{what} {} is not a regular file", path.display()));
    }
    if meta.len() > max {
        return Err(format!(
            "{what} {} has {} bytes, more than the {max} allowed",
            path.display(),
            meta.len()
        ));
    }
    let f = std::fs::File::open(path)
        .map_err(|e| format!("cannot read {what} {}: {e}", path.display()))?;
    let mut buf = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read {what} {}: {e}", path.display()))?;
    if buf.len() as u64 > max {
        return Err(format!(
            "{what} {} grew past {max} bytes while read",
            path.display()
        ));
    }
    Ok(buf)
}

/// The first place where blocks nest deeper than [`MAX_DEPTH`], as a problem.
pub(crate) fn check_depth(text: &str) -> Option<Problem> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut nest = 1;
                i += 2;
                while i < b.len() && nest > 0 {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        nest += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        nest -= 1;
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
                continue;
            }
            b'#' => {
                let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
                let q = i + hashes;
                if b.get(q) == Some(&b'"') {
                    // Raw string: ends at `"` (or `"""`) followed by the same number of `#`.
                    let multi = b[q..].starts_with(b"\"\"\"");
                    let mut close = if multi {
                        b"\"\"\"".to_vec()
                    } else {
                        b"\"".to_vec()
                    };
                    close.extend(std::iter::repeat_n(b'#', hashes));
                    let start = q + if multi { 3 } else { 1 };
                    i = find(b, start, &close).map_or(b.len(), |e| e + close.len());
                    continue;
                }
                i += hashes;
                continue;
            }
            b'"' => {
                let multi = b[i..].starts_with(b"\"\"\"");
                let mut j = i + if multi { 3 } else { 1 };
                while j < b.len() {
                    if b[j] == b'\\' {
                        j += 2;
                    } else if multi && b[j..].starts_with(b"\"\"\"") {
                        j += 3;
                        break;
                    } else if !multi && b[j] == b'"' {
                        j += 1;
                        break;
                    } else {
                        j += 1;
                    }
                }
                i = j;
                continue;
            }
            b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(
                        Problem::new(
                            SourceSpan::from(i..i + 1),
                            format!("blocks nest deeper than {MAX_DEPTH} levels"),
                            "too deep",
                        )
                        .with_help("a sweep nests at most a few levels: sweep, model, engine, scenario, matrix blocks"),
                    );
                }
            }
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

fn find(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from >= hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Keeps the first [`MAX_SHOWN`] problems and counts the rest in one last problem.
pub(crate) fn cap(mut problems: Vec<Problem>) -> (Vec<Problem>, usize) {
    let total = problems.len();
    if total > MAX_SHOWN {
        let next = problems[MAX_SHOWN].span;
        problems.truncate(MAX_SHOWN);
        problems.push(Problem::new(
            SourceSpan::from(next.offset()..next.offset()),
            format!(
                "{} more problems not shown (the first {MAX_SHOWN} are above)",
                total - MAX_SHOWN
            ),
            "the next one is here",
        ));
    }
    (problems, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_nesting_is_a_problem_not_a_crash() {
        let text = format!("sweep \"s\" {{\n}}\n{}", "a {".repeat(1500));
        let p = check_depth(&text).expect("too deep");
        // The 33rd "a {" (the sweep block before it is closed).
        assert_eq!(p.span.offset(), 14 + 3 * MAX_DEPTH + 2);
    }

    #[test]
    fn braces_in_strings_and_comments_do_not_count() {
        let deep = "{".repeat(100);
        for text in [
            format!("a \"{deep}\""),
            format!("a #\"{deep}\"#"),
            format!("a ##\"x\"# {deep}\"##"),
            format!("a \"\"\"\n{deep}\n\"\"\""),
            format!("// {deep}\n"),
            format!("/* /* {deep} */ {deep} */"),
            format!("a \"\\\"{deep}\""),
        ] {
            assert!(check_depth(&text).is_none(), "{text}");
        }
        assert!(check_depth(&format!("a {{ {deep}")).is_some());
    }

    #[test]
    fn non_regular_and_huge_files_are_refused_unread() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20, "sweep file").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.kdl");
        std::fs::write(&big, vec![b' '; 2000]).unwrap();
        let e = read_bounded(&big, 1000, "sweep file").unwrap_err();
        assert!(e.contains("more than the 1000 allowed"), "{e}");
        assert_eq!(read_bounded(&big, 2000, "x").unwrap().len(), 2000);
    }
}
