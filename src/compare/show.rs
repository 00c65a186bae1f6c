//! How the comparison shows a value and a change.

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
