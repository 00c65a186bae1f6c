//! How the comparison shows a value, a change and the tables.

use super::{Change, Matched};

/// A relative change in per cent, signed; – when there is none.
pub(super) fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{:+.1}%", x * 100.0))
        .unwrap_or_else(|| "–".into())
}

/// A change as the tables and verdicts show it: the error rate's, an absolute change, in
/// points; every other metric's, relative, in per cent.
pub(crate) fn shown(metric: &str, v: Option<f64>) -> String {
    match v {
        Some(x) if metric == "error_rate" => format!("{:+.1} pt", x * 100.0),
        _ => pct(v),
    }
}

/// A metric's value: the error rate in per cent, every other with as many digits as its
/// size needs.
pub(super) fn value(metric: &str, v: Option<f64>) -> String {
    match v {
        Some(x) if metric == "error_rate" => format!("{:.1}%", x * 100.0),
        _ => num(v),
    }
}

/// A value with as many digits as its size needs.
fn num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 1.0 => format!("{x:.2}"),
        Some(x) => format!("{x:.4}"),
        None => "–".into(),
    }
}

/// The comparison for a terminal: per configuration, the metrics in aligned columns.
pub(crate) fn terminal(matched: &[Matched], only_a: &[String], only_b: &[String]) -> String {
    let mut out = String::new();
    for m in matched {
        let rows: Vec<[String; 6]> = m.changes.iter().map(cells).collect();
        let head = HEADER.map(String::from);
        let mut w = [0usize; 6];
        for r in rows.iter().chain(std::iter::once(&head)) {
            for (i, cell) in r.iter().enumerate() {
                w[i] = w[i].max(cell.chars().count());
            }
        }
        out.push_str(&format!("{}\n", m.label));
        if let Some(l) = hardware_line(m) {
            out.push_str(&format!("  {l}\n"));
        }
        for r in std::iter::once(&head).chain(rows.iter()) {
            let pad = |i: usize| {
                let fill = " ".repeat(w[i] - r[i].chars().count());
                if i == 0 {
                    format!("{}{fill}", r[i])
                } else {
                    format!("{fill}{}", r[i])
                }
            };
            out.push_str(&format!(
                "  {}  {}  {}  {}  {}  {}\n",
                pad(0),
                pad(1),
                pad(2),
                pad(3),
                pad(4),
                pad(5)
            ));
        }
        out.push('\n');
    }
    if !matched.is_empty() {
        out.push_str(SCOPE);
    }
    out.push_str(&unmatched(only_a, only_b));
    out
}

const HEADER: [&str; 6] = ["metric", "A", "B", "change", "95 % CI", "n"];

/// One change as shown, in [`HEADER`]'s order (`n`: requests per side, the smaller — or each
/// side's requests and what they are worth, `A/B (worth a/b)`, where requests moved together
/// in time; for quality the items, paired, with McNemar's p for pass/fail metrics).
pub(super) fn cells(c: &Change) -> [String; 6] {
    [
        c.metric.to_string(),
        value(c.metric, c.a),
        value(c.metric, c.b),
        shown(c.metric, c.change),
        c.ci.map(|(lo, hi)| {
            format!(
                "{} … {}",
                shown(c.metric, Some(lo)),
                shown(c.metric, Some(hi))
            )
        })
        .unwrap_or_else(|| "–".into()),
        match (c.n, c.p) {
            (Some(n), Some(p)) => format!("{n} (McNemar p {})", crate::report::answer::fmt_p(p)),
            (Some(n), None) => match (c.groups, c.effective) {
                (Some(g), _) => format!("{n} in {g} batches"),
                (None, Some(e)) => {
                    format!("{}/{} (worth {}/{})", e.a.n, e.b.n, e.a.worth, e.b.worth)
                }
                (None, None) => n.to_string(),
            },
            _ => "–".into(),
        },
    ]
}

/// What the intervals cover, said under the tables.
const SCOPE: &str = "Intervals resample each run's requests (a batch's as one; `A/B (worth a/b)`: each side's requests, which moved together in time, and the independent ones they are worth): they cover the noise between requests within a run, not a change of the machine between the runs; declare repeats to see how much runs vary.\n";

/// The configurations only one side ran.
fn unmatched(only_a: &[String], only_b: &[String]) -> String {
    let mut out = String::new();
    if !only_a.is_empty() {
        out.push_str(&format!("Only in A: {}\n", only_a.join(", ")));
    }
    if !only_b.is_empty() {
        out.push_str(&format!("Only in B: {}\n", only_b.join(", ")));
    }
    out
}

/// The comparison as Markdown: one table per configuration.
pub(crate) fn markdown(matched: &[Matched], only_a: &[String], only_b: &[String]) -> String {
    let mut out = String::new();
    for m in matched {
        out.push_str(&format!("### {}\n\n", md_text(&m.label)));
        if let Some(l) = hardware_line(m) {
            out.push_str(&format!("{}\n\n", md_text(&l)));
        }
        out.push_str(&format!(
            "| {} |\n|---|---|---|---|---|---|\n",
            HEADER.join(" | ")
        ));
        for c in &m.changes {
            out.push_str(&format!("| {} |\n", cells(c).join(" | ")));
        }
        out.push('\n');
    }
    if !matched.is_empty() {
        out.push_str(SCOPE);
    }
    out.push_str(&unmatched(only_a, only_b));
    out
}

/// Text as Markdown shows it literally: every character Markdown could read as markup
/// (emphasis, code, links, HTML, a table's `|`) escaped — CPU models, host names and labels
/// come from the machines and the sweep.
fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(
            c,
            '\\' | '*' | '_' | '`' | '[' | ']' | '<' | '>' | '|' | '#' | '~'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The machines' difference shown under a configuration's table: only other hardware (the
/// lesser differences, which repeat under every table on CI runners, are one grouped note).
fn hardware_line(m: &Matched) -> Option<String> {
    m.machine
        .hardware_differs()
        .then(|| m.machine.line())
        .flatten()
}

#[cfg(test)]
mod tests {
    #[test]
    fn markdown_text_shows_machine_names_literally() {
        assert_eq!(
            super::md_text("CPU: Xeon_8480 *ES* → EPYC|9654 <lab> [x] `y` #1 ~z~ \\"),
            "CPU: Xeon\\_8480 \\*ES\\* → EPYC\\|9654 \\<lab\\> \\[x\\] \\`y\\` \\#1 \\~z\\~ \\\\"
        );
        assert_eq!(super::md_text("plain 1.5b@vllm"), "plain 1.5b@vllm");
    }

    #[test]
    fn requests_that_moved_together_show_what_each_side_is_worth() {
        use super::super::{Change, Effective, Worth};
        let c = Change {
            metric: "ttft_p50",
            a: Some(40.0),
            b: Some(44.0),
            change: Some(0.1),
            ci: Some((0.02, 0.2)),
            n: Some(300),
            p: None,
            interval_from: Some(12),
            groups: None,
            effective: Some(Effective {
                a: Worth {
                    n: 1000,
                    worth: 240,
                },
                b: Worth { n: 300, worth: 300 },
            }),
            lacking: Vec::new(),
        };
        assert_eq!(super::cells(&c)[5], "1000/300 (worth 240/300)");
    }
}
