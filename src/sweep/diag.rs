//! Diagnostics of a sweep file: every problem points at a span, and all problems of a file
//! are reported together under one error.

use miette::{Diagnostic, NamedSource, SourceSpan};
use thiserror::Error;

#[derive(Debug, Clone, Error, Diagnostic)]
#[error("{message}")]
pub(crate) struct Problem {
    pub message: String,
    #[label("{label}")]
    pub span: SourceSpan,
    pub label: String,
    #[help]
    pub help: Option<String>,
}

impl Problem {
    pub fn new(span: SourceSpan, message: impl Into<String>, label: impl Into<String>) -> Self {
        Problem {
            message: message.into(),
            span,
            label: label.into(),
            help: None,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

#[derive(Debug, Error, Diagnostic)]
#[error("{} in sweep file {}", plural(*.total), .src.name())]
#[diagnostic(code(bench360::sweep))]
pub(crate) struct SweepError {
    #[source_code]
    pub src: NamedSource<String>,
    /// The problems shown (the first ones, and a last one counting the rest).
    #[related]
    pub problems: Vec<Problem>,
    /// How many problems the file has in all.
    pub total: usize,
}

fn plural(n: usize) -> String {
    if n == 1 {
        "1 problem".to_string()
    } else {
        format!("{n} problems")
    }
}

/// "did you mean" for an unknown name: the closest candidate by Jaro-Winkler similarity.
pub(crate) fn did_you_mean<'a>(
    unknown: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut best: Option<(&str, f64)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(unknown, c);
        if score > 0.7 && best.is_none_or(|(_, s)| score > s) {
            best = Some((c, score));
        }
    }
    best.map(|(c, _)| format!("did you mean `{c}`?"))
}

pub(crate) fn known_list<'a>(candidates: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<String> = candidates.into_iter().map(|c| format!("`{c}`")).collect();
    if names.is_empty() {
        "none are defined".to_string()
    } else {
        format!("known: {}", names.join(", "))
    }
}

/// Lines longer than this are clipped around the spans on them before rendering (the renderer
/// lays a line out by columns, and cannot past 65,535 of them).
const MAX_RENDERED_LINE: usize = 400;
/// Bytes kept on each side of a span's ends on a clipped line.
const CLIP_CONTEXT: usize = 60;

/// Renders a sweep's problems for a terminal (colour) or for logs and snapshots (no colour;
/// also when NO_COLOR is set), at a fixed width so output does not depend on the terminal.
/// Long lines are clipped around the spans first, so any file renders.
/// [`render`] for standard error: in colour on a terminal, unless `NO_COLOR` is set.
pub(crate) fn render_for_stderr(err: &SweepError) -> String {
    use std::io::IsTerminal;
    render(
        err,
        std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    )
}

/// Problems found in the files a sweep reads, shown at the sweep's spans that name them.
pub(crate) fn input_problems(sweep: &crate::spec::Sweep, mut problems: Vec<Problem>) -> SweepError {
    // In the file's order, as the sweep's own problems are.
    problems.sort_by_key(|p| p.span.offset());
    let (problems, total) = super::bounds::cap(problems);
    SweepError {
        src: NamedSource::new(&sweep.source.name, sweep.source.text.to_string()),
        problems,
        total,
    }
}

pub(crate) fn render(err: &SweepError, color: bool) -> String {
    let theme = if color {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let handler = miette::GraphicalReportHandler::new_themed(theme)
        .with_width(100)
        .with_links(false);
    let clipped;
    let diag = match clip(err) {
        Some(c) => {
            clipped = c;
            &clipped
        }
        None => err,
    };
    let mut out = String::new();
    handler
        .render_report(&mut out, diag)
        .expect("rendering into a String cannot fail");
    out
}

/// The error with every line over [`MAX_RENDERED_LINE`] bytes cut to the pieces around the
/// spans on it (joined by ` … `), spans moved to match; None when no line is that long.
fn clip(err: &SweepError) -> Option<SweepError> {
    let text = err.src.inner().as_str();
    if !text
        .split_inclusive('\n')
        .any(|l| l.len() > MAX_RENDERED_LINE)
    {
        return None;
    }
    let mut points: Vec<usize> = err
        .problems
        .iter()
        .flat_map(|p| [p.span.offset(), p.span.offset() + p.span.len()])
        .map(|o| o.min(text.len()))
        .collect();
    points.sort_unstable();
    // (old start, old end, new start) of every kept piece, in order.
    let mut pieces: Vec<(usize, usize, usize)> = Vec::new();
    let mut out = String::with_capacity(text.len().min(1 << 16));
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let line_end = line_start + line.len();
        if line.len() <= MAX_RENDERED_LINE {
            pieces.push((line_start, line_end, out.len()));
            out.push_str(line);
        } else {
            let from = points.partition_point(|&p| p < line_start);
            let to = points.partition_point(|&p| p <= line_end);
            let mut windows: Vec<(usize, usize)> = vec![(line_start, line_start + CLIP_CONTEXT)];
            for &p in &points[from..to] {
                windows.push((
                    p.saturating_sub(CLIP_CONTEXT).max(line_start),
                    p + CLIP_CONTEXT,
                ));
            }
            let mut merged: Vec<(usize, usize)> = Vec::new();
            for (a, z) in windows {
                let a = floor_char(text, a);
                let z = ceil_char(text, z.min(line_end));
                match merged.last_mut() {
                    Some(last) if a <= last.1 => last.1 = last.1.max(z),
                    _ => merged.push((a, z)),
                }
            }
            for (k, &(a, z)) in merged.iter().enumerate() {
                if k > 0 {
                    out.push_str(" … ");
                }
                pieces.push((a, z, out.len()));
                out.push_str(&text[a..z]);
            }
            if merged.last().is_some_and(|&(_, z)| z < line_end) {
                out.push_str(" …");
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        line_start = line_end;
    }
    let map = |o: usize| -> usize {
        let k = pieces
            .partition_point(|&(a, _, _)| a <= o)
            .saturating_sub(1);
        match pieces.get(k) {
            Some(&(a, z, n)) => n + o.min(z).saturating_sub(a),
            None => 0,
        }
    };
    let problems = err
        .problems
        .iter()
        .map(|p| {
            let start = map(p.span.offset().min(text.len()));
            let end = map((p.span.offset() + p.span.len()).min(text.len())).max(start);
            Problem {
                span: SourceSpan::from(start..end),
                ..p.clone()
            }
        })
        .collect();
    Some(SweepError {
        src: NamedSource::new(err.src.name(), out),
        problems,
        total: err.total,
    })
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: String, spans: &[(usize, usize)]) -> SweepError {
        SweepError {
            src: NamedSource::new("long.kdl", text),
            problems: spans
                .iter()
                .map(|&(a, z)| Problem::new(SourceSpan::from(a..z), "bad", "this"))
                .collect(),
            total: spans.len(),
        }
    }

    #[test]
    fn spans_past_column_65535_render_clipped() {
        // One line of 200,000 bytes with problems near its end and in its middle.
        let mut text = format!("a \"{}\" {{\n", "é".repeat(100_000));
        let far = text.len() - 2; // the `{`
        text.push_str("b 1\n");
        let e = error(
            text.clone(),
            &[
                (far, far + 1),
                (100_001, 100_003),
                (text.len() - 4, text.len() - 1),
            ],
        );
        let out = render(&e, false);
        assert!(out.contains(" … "), "{out}");
        assert!(out.contains("b 1"), "{out}");
        assert!(out.len() < 10_000, "{} bytes", out.len());
        // The span still points at the same text.
        let c = clip(&e).unwrap();
        let src = c.src.inner();
        let p = &c.problems[0];
        assert_eq!(&src[p.span.offset()..p.span.offset() + p.span.len()], "{");
        let p = &c.problems[2];
        assert_eq!(&src[p.span.offset()..p.span.offset() + p.span.len()], "b 1");
        // A span running across the cut keeps its ends.
        let e = error(text, &[(2, far + 1)]);
        assert!(render(&e, false).contains("this"));
        // Short lines are left alone.
        assert!(clip(&error("a 1\n".into(), &[(0, 1)])).is_none());
    }

    #[test]
    fn suggests_the_closest_name() {
        assert_eq!(
            did_you_mean("smolm2", ["smollm2", "llama"]).as_deref(),
            Some("did you mean `smollm2`?")
        );
        assert_eq!(did_you_mean("zzz", ["smollm2", "llama"]), None);
    }
}
