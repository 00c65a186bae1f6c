//! `bench360 metric rouge|squad|sql|mmlu [FILE]`: score predictions outside any sweep.

use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

pub(crate) fn run(
    metric: &str,
    file: Option<&Path>,
    sql_timeout: f64,
    split_sentences: bool,
) -> anyhow::Result<u8> {
    let input: Box<dyn BufRead> = match file {
        Some(f) => Box::new(std::io::BufReader::new(
            std::fs::File::open(f)
                .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", f.display()))?,
        )),
        None => Box::new(std::io::stdin().lock()),
    };
    crate::task::metric_cli(
        metric,
        input,
        &mut std::io::stdout().lock(),
        Duration::from_secs_f64(sql_timeout),
        split_sentences,
    )?;
    Ok(0)
}
