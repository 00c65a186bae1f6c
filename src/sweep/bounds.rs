//! Bounds on sweep input, checked before the KDL parser sees it: the file's kind and size,
//! and how deep blocks nest (the parser recurses once per level, so a hostile file could
//! otherwise exhaust the stack). The depth scan knows KDL's strings (quoted, multi-line,
//! raw with `#`s) and comments (line, nested block), so braces inside them do not count.

use std::io::Read;
use std::path::Path;

use miette::SourceSpan;

use super::diag::Problem;
use super::InputError;

/// Deepest nesting of `{ … }` blocks a sweep may have (real sweeps use 3).
pub(crate) const MAX_DEPTH: usize = 32;
/// Largest sweep file read (real sweeps are a few KB). The KDL parser reads about 1.2 MB/s
/// (measured: a valid 4 MB sweep of 8,000 blocks in 3.4 s in a release build), so a larger
/// bound could not answer in about a second.
pub(crate) const MAX_SWEEP_BYTES: u64 = 1 << 20;
/// Most problems rendered for one file; the rest are counted.
pub(crate) const MAX_SHOWN: usize = 50;

/// Reads a regular file of at most `max` bytes: a device (`/dev/zero`), a FIFO or a
/// directory is refused, and so is a file past the limit, without reading it all.
pub(crate) fn read_bounded(
    path: &Path,
    max: u64,
    what: &'static str,
) -> Result<Vec<u8>, InputError> {
    let p = || path.to_path_buf();
    let unreadable = |source| InputError::Unreadable {
        what,
        path: p(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(InputError::NotRegular { what, path: p() });
    }
    if meta.len() > max {
        return Err(InputError::TooLarge {
            what,
            path: p(),
            size: meta.len(),
            max,
        });
    }
    let f = std::fs::File::open(path).map_err(unreadable)?;
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf).map_err(unreadable)?;
    if buf.len() as u64 > max {
        return Err(InputError::Grew {
            what,
            path: p(),
            max,
        });
    }
    Ok(buf)
}

/// How deep `/* … */` comments may nest (KDL allows nesting; real sweeps nest none).
pub(crate) const MAX_COMMENT_DEPTH: usize = 32;
/// Most `{` and `/*` a sweep file may hold in all, wherever they stand (real sweeps hold a few
/// dozen). The parser cannot recurse deeper than their number, whatever it makes of the rest
/// of the file, and its thread's stack holds that many levels (src/sweep/mod.rs): so no file
/// can overflow it, even one that check_before_parse misreads.
pub(crate) const MAX_OPENERS: usize = 8192;

/// The byte length of a KDL newline at `i` (CRLF, CR, LF, NEL, FF, LS, PS), if one starts there.
fn newline_at(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'\r' if b.get(i + 1) == Some(&b'\n') => Some(2),
        b'\r' | b'\n' | 0x0c => Some(1),
        0xc2 if b.get(i + 1) == Some(&0x85) => Some(2),
        0xe2 if b.get(i + 1) == Some(&0x80) && matches!(b.get(i + 2), Some(0xa8 | 0xa9)) => Some(3),
        _ => None,
    }
}

/// The byte length of KDL whitespace (unicode-space) at `i`, if any starts there.
fn space_at(b: &[u8], i: usize) -> Option<usize> {
    let c = char_at(b, i)?;
    matches!(
        c,
        '\t' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
    .then(|| c.len_utf8())
}

/// The character starting at byte `i`, if a whole one does.
fn char_at(b: &[u8], i: usize) -> Option<char> {
    let end = (i + 4).min(b.len());
    let s = match std::str::from_utf8(&b[i..end]) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&b[i..i + e.valid_up_to()]).ok()?,
    };
    s.chars().next()
}

/// The length of the UTF-8 character at `i` (1 for a stray byte).
fn char_len(b: &[u8], i: usize) -> usize {
    char_at(b, i).map_or(1, char::len_utf8)
}

fn problem(at: usize, len: usize, message: String, label: &str, help: String) -> Problem {
    Problem::new(SourceSpan::from(at..at + len), message, label).with_help(help)
}

/// Where the line that `i` is on ends (its newline, or the end of the text).
fn line_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && newline_at(b, i).is_none() {
        i += 1;
    }
    i
}

/// A `/* … */` comment (KDL's nest) scanned from its opening `/*` at `open`.
struct BlockComment {
    /// Just past its last `*/`; None when it is never closed.
    end: Option<usize>,
    /// The first `/*` that nests it deeper than [`MAX_COMMENT_DEPTH`].
    too_deep_at: Option<usize>,
}

fn block_comment(b: &[u8], open: usize) -> BlockComment {
    let mut nest = 1;
    let mut too_deep_at = None;
    let mut i = open + 2;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            nest += 1;
            if nest > MAX_COMMENT_DEPTH && too_deep_at.is_none() {
                too_deep_at = Some(i);
            }
            i += 2;
        } else if b[i..].starts_with(b"*/") {
            nest -= 1;
            i += 2;
            if nest == 0 {
                return BlockComment {
                    end: Some(i),
                    too_deep_at,
                };
            }
        } else {
            i += 1;
        }
    }
    BlockComment {
        end: None,
        too_deep_at,
    }
}

/// The first byte at or after `i` that is not whitespace, a newline, a line continuation
/// (`\`) or a comment; None at the end of the text or in an unclosed block comment.
fn after_space_and_comments(b: &[u8], mut i: usize) -> Option<usize> {
    while i < b.len() {
        if let Some(n) = space_at(b, i).or_else(|| newline_at(b, i)) {
            i += n;
        } else if b[i] == b'\\' {
            i += 1;
        } else if b[i..].starts_with(b"//") {
            i = line_end(b, i);
        } else if b[i..].starts_with(b"/*") {
            i = block_comment(b, i).end?;
        } else {
            return Some(i);
        }
    }
    None
}

/// KDL's rule for the lines of a multi-line string (content from `start`, closing quotes at
/// `close`): the closing quotes stand on a line of their own after whitespace only, and every
/// line before them that is not blank begins with that same whitespace. (Past a break of this
/// rule the parser's recovery reads the string's lines as code.)
fn check_dedent(b: &[u8], start: usize, close: usize) -> Option<Problem> {
    let mut lines = Vec::new();
    let mut at = start;
    let mut k = start;
    while k < close {
        if let Some(n) = newline_at(b, k) {
            lines.push((at, k));
            k += n;
            at = k;
        } else {
            k += 1;
        }
    }
    let is_space = |from: usize, to: usize| {
        let mut x = from;
        while x < to {
            match space_at(b, x) {
                Some(n) => x += n,
                None => return false,
            }
        }
        true
    };
    // The closing line is `at..close`.
    if !is_space(at, close) {
        return Some(problem(
            close,
            3,
            "the closing quotes of a multi-line string must be on a line of their own".into(),
            "here",
            "end the text with a newline, and put the closing `\"\"\"` on the next line".into(),
        ));
    }
    let indent = &b[at..close];
    for (from, to) in lines {
        if !is_space(from, to) && !b[from..to].starts_with(indent) {
            return Some(problem(
                from,
                1,
                "this line of a multi-line string does not begin with the whitespace of its closing line".into(),
                "this line",
                format!(
                    "every line of a multi-line string that is not blank begins with the whitespace \
                     before its closing quotes ({} bytes here), which is removed from each line",
                    indent.len()
                ),
            ));
        }
    }
    None
}

/// A single-line string (or raw string) that reaches the end of its line unclosed.
fn unclosed_on_line(at: usize, len: usize, what: &str) -> Problem {
    problem(
        at,
        len,
        format!("this {what} is not closed on its line"),
        "opened here",
        "a quoted string ends on the line it starts: close it there, end a line with `\\` to \
         continue it, or write a multi-line string between `\"\"\"` lines"
            .into(),
    )
}

/// A `"""` (or `#"""`) that does not end its line.
fn multi_line_opener(at: usize, len: usize) -> Problem {
    problem(
        at,
        len,
        "a multi-line string's opening quotes must be followed by a newline".into(),
        "here",
        "put the text on the lines after `\"\"\"`, and the closing `\"\"\"` on a line of its own"
            .into(),
    )
}

/// Checks what the KDL parser must not see: blocks nested deeper than [`MAX_DEPTH`] (the
/// parser recurses once per level), block comments nested deeper than [`MAX_COMMENT_DEPTH`],
/// multi-line strings, raw strings and block comments that are never closed (each one makes
/// the parser scan to the end of the file again: thousands take quadratic time), and every
/// other error of where a string starts or ends: a single-line string or raw string not
/// closed on its line, a `"""` not followed by a newline. A file with such an error is
/// refused here, never parsed: past a lexical error, the parser's recovery could read as code
/// what this pass read as string, and recurse into nesting it did not count.
/// One linear pass that follows KDL 2.0's lexical rules: a single-line string ends at its
/// closing quote (a backslash before whitespace or a newline continues it on the next line),
/// a raw string at its quote and as many `#` as it opened with, comments at their ends;
/// braces inside strings and comments do not count.
///
/// Long on purpose: one hand-written lexer loop whose states (string, raw string, comment,
/// multi-line string) share the position and the nesting counters; split apart, each piece
/// would have to hand all of them back and forth.
pub(crate) fn check_before_parse(text: &str) -> Option<Problem> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'-') => {
                // Two slashdashes in a row are not KDL, and the parser takes quadratic time
                // over a chain of them.
                if let Some(next) = after_space_and_comments(b, i + 2) {
                    if b[next..].starts_with(b"/-") {
                        return Some(problem(
                            next,
                            2,
                            "a slashdash follows a slashdash".into(),
                            "second `/-`",
                            "`/-` comments out the one node, argument or block after it: write \
                             one `/-` before each thing to leave out"
                                .into(),
                        ));
                    }
                }
                i += 2;
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let comment = block_comment(b, i);
                if let Some(at) = comment.too_deep_at {
                    return Some(problem(
                        at,
                        2,
                        format!("block comments nest deeper than {MAX_COMMENT_DEPTH} levels"),
                        "too deep",
                        "close the comments (`*/`) or use `//` line comments".into(),
                    ));
                }
                let Some(end) = comment.end else {
                    return Some(problem(
                        i,
                        2,
                        "this block comment is never closed".into(),
                        "opened here",
                        "close it with `*/` (block comments nest: every `/*` needs its own `*/`)"
                            .into(),
                    ));
                };
                i = end;
                continue;
            }
            b'#' => {
                let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
                let q = i + hashes;
                if b.get(q) == Some(&b'"') {
                    // Raw string: ends at `"` (or `"""`) followed by the same number of `#`.
                    let multi = b[q..].starts_with(b"\"\"\"");
                    let quote: &[u8] = if multi { b"\"\"\"" } else { b"\"" };
                    let mut close = quote.to_vec();
                    close.extend(std::iter::repeat_n(b'#', hashes));
                    let mut j = q + quote.len();
                    if multi && newline_at(b, j).is_none() {
                        return Some(multi_line_opener(i, hashes + 3));
                    }
                    let mut closed = false;
                    while j < b.len() {
                        if b[j..].starts_with(&close) {
                            j += close.len();
                            closed = true;
                            break;
                        }
                        if !multi && newline_at(b, j).is_some() {
                            break;
                        }
                        j += 1;
                    }
                    if !multi && !closed {
                        return Some(unclosed_on_line(i, hashes + 1, "raw string"));
                    }
                    if multi && !closed {
                        return Some(problem(
                            i,
                            hashes + 3,
                            "this multi-line raw string is never closed".into(),
                            "opened here",
                            format!(
                                "close it with `\"\"\"{}` on a line of its own",
                                "#".repeat(hashes)
                            ),
                        ));
                    }
                    if multi {
                        let content = q + 3 + newline_at(b, q + 3).unwrap_or(0);
                        if let Some(p) = check_dedent(b, content, j - close.len()) {
                            return Some(p);
                        }
                    }
                    i = j;
                    continue;
                }
                i += hashes;
                continue;
            }
            b'"' => {
                let open = i;
                let multi = b[i..].starts_with(b"\"\"\"");
                let mut j = i + if multi { 3 } else { 1 };
                if multi && newline_at(b, j).is_none() {
                    return Some(multi_line_opener(i, 3));
                }
                let mut closed = false;
                while j < b.len() {
                    if b[j] == b'\\' {
                        j += 1;
                        // A whitespace escape runs over spaces and newlines; any other escape
                        // is one character (the braces of `\u{…}` are text, never a block).
                        let mut ws = false;
                        while let Some(n) = (j < b.len())
                            .then(|| space_at(b, j).or_else(|| newline_at(b, j)))
                            .flatten()
                        {
                            j += n;
                            ws = true;
                        }
                        if !ws && j < b.len() {
                            j += char_len(b, j);
                        }
                    } else if multi && b[j..].starts_with(b"\"\"\"") {
                        j += 3;
                        closed = true;
                        break;
                    } else if !multi && b[j] == b'"' {
                        j += 1;
                        closed = true;
                        break;
                    } else if !multi && newline_at(b, j).is_some() {
                        break;
                    } else {
                        j += 1;
                    }
                }
                if !multi && !closed {
                    return Some(unclosed_on_line(open, 1, "string"));
                }
                if multi && !closed {
                    return Some(problem(
                        open,
                        3,
                        "this multi-line string is never closed".into(),
                        "opened here",
                        "close it with `\"\"\"` on a line of its own".into(),
                    ));
                }
                if multi {
                    let content = open + 3 + newline_at(b, open + 3).unwrap_or(0);
                    if let Some(p) = check_dedent(b, content, j - 3) {
                        return Some(p);
                    }
                }
                i = j;
                continue;
            }
            b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(problem(
                        i,
                        1,
                        format!("blocks nest deeper than {MAX_DEPTH} levels"),
                        "too deep",
                        "a sweep nests at most a few levels: sweep, model, engine, scenario, matrix blocks".into(),
                    ));
                }
            }
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    let openers =
        b.iter().filter(|&&c| c == b'{').count() + b.windows(2).filter(|w| w == b"/*").count();
    if openers > MAX_OPENERS {
        let first = b.iter().position(|&c| c == b'{').unwrap_or(0);
        return Some(problem(
            first,
            1,
            format!(
                "the file holds {openers} `{{` and `/*` in all, more than the {MAX_OPENERS} a sweep file may hold"
            ),
            "the first is here",
            "a sweep declares a few dozen blocks; generate several sweep files, or use axes \
             (several values of one field) instead of repeated blocks"
                .into(),
        ));
    }
    None
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
        let p = check_before_parse(&text).expect("too deep");
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
            assert!(check_before_parse(&text).is_none(), "{text}");
        }
        assert!(check_before_parse(&format!("a {{ {deep}")).is_some());
    }

    #[test]
    fn a_single_line_string_ends_at_its_line_as_in_kdl() {
        // An unclosed quote is refused before the parser, whose recovery could read the
        // nesting after it as blocks; so are one whose line ends in an escaped quote, a raw
        // one, one at the end of the file, and `"""` with text after it.
        let text = format!("a \"open\n{}", "a {".repeat(100_000));
        let p = check_before_parse(&text).expect("unclosed");
        assert_eq!(p.message, "this string is not closed on its line");
        assert_eq!(p.span.offset(), 2);
        let p = check_before_parse(&format!("a \"x\\\"\n{}", "{".repeat(40))).unwrap();
        assert_eq!(p.message, "this string is not closed on its line");
        let p = check_before_parse(&format!("a #\"x\n{}", "{".repeat(40))).unwrap();
        assert_eq!(p.message, "this raw string is not closed on its line");
        assert!(check_before_parse("a \"x").is_some());
        for t in ["a \"\"\"x\n\"\"\"", "a \"\"\"#\n", "a #\"\"\" \n\"\"\"#"] {
            let p = check_before_parse(t).unwrap();
            assert!(
                p.message.contains("must be followed by a newline"),
                "{t}: {}",
                p.message
            );
        }
        // A backslash before whitespace and a newline continues the string on the next line.
        let deep = "{".repeat(40);
        assert!(check_before_parse(&format!("a \"x \\   \n  {deep}\"")).is_none());
        assert!(check_before_parse(&format!("a \"x \\\n{deep}\"")).is_none());
        // Every KDL newline ends a line comment.
        for nl in ["\r", "\u{85}", "\u{2028}", "\u{2029}", "\u{c}"] {
            assert!(
                check_before_parse(&format!("// c{nl}{deep}")).is_some(),
                "{nl:?}"
            );
        }
    }

    #[test]
    fn unclosed_multi_line_strings_and_comments_are_refused_before_the_parser() {
        let many = "template #\"\"\"\n".repeat(2000);
        let p = check_before_parse(&many).expect("never closed");
        assert_eq!(p.message, "this multi-line raw string is never closed");
        assert_eq!((p.span.offset(), p.span.len()), (9, 4));
        let p = check_before_parse("a \"\"\"\nx\n").unwrap();
        assert_eq!(p.message, "this multi-line string is never closed");
        let p = check_before_parse("a 1 /* x /* y */").unwrap();
        assert_eq!(p.message, "this block comment is never closed");
        assert_eq!(p.span.offset(), 4);
        let p = check_before_parse(&"/* ".repeat(100)).unwrap();
        assert!(
            p.message.starts_with("block comments nest deeper"),
            "{}",
            p.message
        );
        // Closed ones are fine, with the right number of `#`.
        assert!(check_before_parse("a ##\"\"\"\nx \"\"\"# y\n\"\"\"##\nb { }").is_none());
        assert!(check_before_parse("a \"\"\"\n{ \\\"\"\" \n\"\"\"\n").is_none());
    }

    #[test]
    fn multi_line_strings_keep_their_indentation_rule() {
        let ok =
            "t #\"\"\"\n    a {\n\n      b\n    \"\"\"#\nu \"\"\"\n  x\n  \"\"\"\nv \"\"\"\n\"\"\"";
        assert!(
            check_before_parse(ok).is_none(),
            "{:?}",
            check_before_parse(ok)
        );
        // 2,000 openers closed by one far closing line whose indentation they lack.
        let many = format!(
            "{}t #\"\"\"\n  x\n  \"\"\"#\n",
            "template #\"\"\"\n".repeat(2000)
        );
        let p = check_before_parse(&many).unwrap();
        assert!(
            p.message.contains("does not begin with the whitespace"),
            "{}",
            p.message
        );
        assert_eq!(p.span.offset(), 14);
        let p = check_before_parse("t \"\"\"\n  x\n  y \"\"\"\n").unwrap();
        assert!(
            p.message.contains("on a line of their own"),
            "{}",
            p.message
        );
    }

    #[test]
    fn slashdash_chains_and_too_many_openers_are_refused() {
        let p = check_before_parse(&format!("a {}b", "/- ".repeat(2000))).unwrap();
        assert_eq!(p.message, "a slashdash follows a slashdash");
        assert_eq!(p.span.offset(), 5);
        let p = check_before_parse("a /- // c\n /* d */ \\\n /- b").unwrap();
        assert_eq!(p.message, "a slashdash follows a slashdash");
        // One before each thing is fine.
        assert!(check_before_parse("a /- 1 /- 2 /- { } b\n/- c\nd").is_none());
        // Openers anywhere count, even inside strings: the bound holds whatever is misread.
        let p = check_before_parse(&format!("a \"{}\"", "{".repeat(MAX_OPENERS + 1))).unwrap();
        assert!(p.message.contains("more than the 8192"), "{}", p.message);
        let ok = format!("a \"{}\"", "{".repeat(MAX_OPENERS));
        assert!(check_before_parse(&ok).is_none());
    }

    #[test]
    fn non_regular_and_huge_files_are_refused_unread() {
        let e = read_bounded(Path::new("/dev/zero"), 1 << 20, "sweep file").unwrap_err();
        assert!(matches!(e, InputError::NotRegular { .. }), "{e}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.kdl");
        std::fs::write(&big, vec![b' '; 2000]).unwrap();
        let e = read_bounded(&big, 1000, "sweep file").unwrap_err();
        assert!(e.to_string().contains("more than the 1000 allowed"), "{e}");
        assert_eq!(read_bounded(&big, 2000, "x").unwrap().len(), 2000);
    }
}
