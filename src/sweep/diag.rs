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

/// Renders a diagnostic for a terminal (colour) or for logs and snapshots (no colour; also
/// when NO_COLOR is set), at a fixed width so output does not depend on the terminal.
pub(crate) fn render(diag: &dyn Diagnostic, color: bool) -> String {
    let theme = if color {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let handler = miette::GraphicalReportHandler::new_themed(theme)
        .with_width(100)
        .with_links(false);
    let mut out = String::new();
    handler
        .render_report(&mut out, diag)
        .expect("rendering into a String cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_closest_name() {
        assert_eq!(
            did_you_mean("smolm2", ["smollm2", "llama"]).as_deref(),
            Some("did you mean `smollm2`?")
        );
        assert_eq!(did_you_mean("zzz", ["smollm2", "llama"]), None);
    }
}
