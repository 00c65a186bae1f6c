//! What counts as within noise in the answer — ties per objective, the paired interval of a
//! per-correct-answer ratio — and how differences are written. Pure.

use super::*;

/// A difference in quality as points of the metric's scale.
pub(super) fn fmt_delta(d: f64) -> String {
    format!("{:+.1} pt", d * 100.0)
        .replace("+0.0 pt", "0.0 pt")
        .trim_start_matches('+')
        .to_string()
}

/// "Δ −3.0 pt [−6.5, +0.5] over 200 items, McNemar p = 0.09".
pub(crate) fn describe(p: &Paired) -> String {
    let ci =
        p.ci.map(|(lo, hi)| format!(" [{:+.1}, {:+.1}]", lo * 100.0, hi * 100.0))
            .unwrap_or_default();
    let m = p
        .mcnemar
        .map(|m| match fmt_p(m.p) {
            p if p.starts_with('<') => format!(", McNemar p {p}"),
            p => format!(", McNemar p = {p}"),
        })
        .unwrap_or_default();
    format!("Δ {:+.1} pt{ci} over {} items{m}", p.delta * 100.0, p.items)
}

pub(crate) fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// Three significant digits ("0.0123", "4.56", "1230").
pub(crate) fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

fn overlap(a: Option<(f64, f64)>, b: Option<(f64, f64)>) -> Option<bool> {
    let ((al, ah), (bl, bh)) = (a?, b?);
    Some(al <= bh && bl <= ah)
}

/// Whether `g` is within noise of the winner `w` on `o`: Some(true/false), or None when no
/// interval can tell.
pub(super) fn tied(rows: &[Row], o: Objective, w: &Group, g: &Group) -> Option<bool> {
    if o == Objective::Quality {
        return pair(w, g).map(|p| !p.detectable());
    }
    if matches!(o, Objective::JPerCorrect | Objective::CostPerCorrect) {
        // Within the noise of the answers alone: tied. Beyond it, the energy's own run-to-run
        // noise decides, which only repeats measure.
        let (vw, vg) = (value(rows, w, o)?.0, value(rows, g, o)?.0);
        if per_correct_ratio_ci(w, g, vg / vw).is_some_and(|(lo, hi)| lo <= 1.0 && 1.0 <= hi) {
            return Some(true);
        }
        if w.rows.len() < 2 || g.rows.len() < 2 {
            return None;
        }
    }
    overlap(value(rows, w, o)?.1, value(rows, g, o)?.1)
}

/// The 95 % interval of (g's per-correct figure) / (w's), paired: the items both scored are
/// resampled together and each side's correct share recomputed, the totals (energy, cost)
/// held fixed — so two configurations that answered alike differ by their totals alone.
fn per_correct_ratio_ci(w: &Group, g: &Group, ratio: f64) -> Option<(f64, f64)> {
    let pairs = paired::common(w.hits.as_ref()?, g.hits.as_ref()?);
    let (sw, sg) = (
        pairs.iter().map(|p| p.0).sum::<f64>(),
        pairs.iter().map(|p| p.1).sum::<f64>(),
    );
    if pairs.len() < 2 || sw == 0.0 || sg == 0.0 {
        return None;
    }
    let mut rng = crate::record::rng::SplitMix64::new(seed_of(&w.label, &g.label) ^ 7);
    // J/correct ∝ 1 / share: g's / w's scales by (share_g / share_g*) · (share_w* / share_w).
    paired::paired_sums_ci(&pairs, paired::ROUNDS, &mut rng, |a, b| {
        (a > 0.0 && b > 0.0).then(|| ratio * (sg / b) * (a / sw))
    })
}
