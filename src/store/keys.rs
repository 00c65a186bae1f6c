//! Node keys: blake3 over a canonical serialization of a node's key inputs (a sorted map of
//! names to values), under a format version. The same map is stored in the node's record,
//! so `plan` can say which input changed and `explain` can show them all.

use std::collections::BTreeMap;

/// Bump when the meaning of a key input changes: every key changes with it.
pub(crate) const KEY_FORMAT: &str = "bench360-key/1";

pub(crate) type KeyInputs = BTreeMap<String, String>;

pub(crate) fn key_of(inputs: &KeyInputs) -> String {
    // The bytes laid out in one buffer and hashed at once (the same hash as feeding them
    // piece by piece, without a hasher call per piece).
    let len: usize = inputs.iter().map(|(k, v)| 16 + k.len() + v.len()).sum();
    let mut buf = Vec::with_capacity(KEY_FORMAT.len() + 1 + len);
    buf.extend_from_slice(KEY_FORMAT.as_bytes());
    buf.push(0);
    // Length-prefixed entries: no separator inside a value can make two maps collide.
    for (k, v) in inputs {
        buf.extend_from_slice(&(k.len() as u64).to_le_bytes());
        buf.extend_from_slice(k.as_bytes());
        buf.extend_from_slice(&(v.len() as u64).to_le_bytes());
        buf.extend_from_slice(v.as_bytes());
    }
    blake3::hash(&buf).to_hex()[..32].to_string()
}

/// A changed input, for "why will this run".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub input: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = |v: &Option<String>| match v {
            None => "(none)".to_string(),
            Some(s) if s.len() > 40 => format!(
                "{}…",
                &s[..s.char_indices().nth(16).map_or(s.len(), |(i, _)| i)]
            ),
            Some(s) => s.clone(),
        };
        write!(
            f,
            "{}: {} → {}",
            self.input,
            short(&self.before),
            short(&self.after)
        )
    }
}

pub(crate) fn diff(before: &KeyInputs, after: &KeyInputs) -> Vec<Change> {
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| Change {
            input: k.clone(),
            before: before.get(k).cloned(),
            after: after.get(k).cloned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(pairs: &[(&str, &str)]) -> KeyInputs {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn same_inputs_same_key_regardless_of_insertion_order() {
        let a = inputs(&[("a", "1"), ("b", "2")]);
        let b = inputs(&[("b", "2"), ("a", "1")]);
        assert_eq!(key_of(&a), key_of(&b));
        assert_eq!(key_of(&a).len(), 32);
    }

    #[test]
    fn entries_cannot_collide_by_concatenation() {
        assert_ne!(
            key_of(&inputs(&[("a", "bc")])),
            key_of(&inputs(&[("ab", "c")]))
        );
    }

    #[test]
    fn diff_names_changed_added_and_removed_inputs() {
        let before = inputs(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let after = inputs(&[("a", "1"), ("b", "5"), ("d", "4")]);
        let d: Vec<String> = diff(&before, &after)
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(d, vec!["b: 2 → 5", "c: 3 → (none)", "d: (none) → 4"]);
    }
}
