//! `bench360 verify`: every record and object of the cache against what was written.

use serde::Serialize;

use super::{Ctx, Outcome, Text};
use crate::store::Store;

#[derive(Debug, Serialize)]
pub(crate) struct Verified {
    pub checked: usize,
    /// (what, why)
    pub damaged: Vec<(String, String)>,
}

pub(crate) fn run(ctx: &Ctx) -> anyhow::Result<Verified> {
    let store = Store::open(&ctx.cache)?;
    let (checked, damaged) = store.verify();
    Ok(Verified { checked, damaged })
}

impl Outcome for Verified {
    fn exit_code(&self) -> u8 {
        u8::from(!self.damaged.is_empty())
    }

    fn render(&self, t: &mut Text) {
        for (what, why) in &self.damaged {
            t.out(format!("damaged  {what}: {why}"));
        }
        t.err(format!(
            "{} record(s) checked, {} damaged{}",
            self.checked,
            self.damaged.len(),
            if self.damaged.is_empty() {
                ""
            } else {
                "; `bench360 apply` reruns them"
            }
        ));
    }
}
