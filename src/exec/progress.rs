//! Progress: an overall bar (nodes, with ETA) and a bar per run (requests); plain lines on
//! stderr when it is not a terminal.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub(crate) struct Progress {
    mp: MultiProgress,
    overall: ProgressBar,
    quiet: bool,
}

/// `--quiet`: no progress lines or bars for this process.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(crate) fn set_quiet(q: bool) {
    QUIET.store(q, std::sync::atomic::Ordering::Relaxed);
}

impl Progress {
    pub fn new(total: u64) -> Self {
        let quiet = QUIET.load(std::sync::atomic::Ordering::Relaxed);
        let mp = MultiProgress::with_draw_target(if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        });
        let overall = mp.add(ProgressBar::new(total));
        overall.set_style(
            ProgressStyle::with_template(
                "{spinner} nodes {pos}/{len} [{bar:30}] {elapsed_precise} (ETA {eta})",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        Progress { mp, overall, quiet }
    }

    pub fn say(&self, line: &str) {
        if self.quiet {
            return;
        }
        if self.mp.is_hidden() {
            eprintln!("{line}");
        } else {
            let _ = self.mp.println(line);
        }
    }

    pub fn node_done(&self) {
        self.overall.inc(1);
    }

    pub fn run_bar(&self, label: &str, total: u64) -> ProgressBar {
        let bar = self
            .mp
            .insert_before(&self.overall, ProgressBar::new(total));
        bar.set_style(
            ProgressStyle::with_template("  {msg} {pos}/{len} requests [{bar:25}] (ETA {eta})")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_message(label.to_string());
        bar
    }

    pub fn finish(&self) {
        self.overall.finish_and_clear();
    }
}
