//! Resolving the `values` part of a sweep file (see the parent module).

use super::*;

pub(super) struct Ctx<'e> {
    pub(super) problems: Vec<Problem>,
    pub(super) env: &'e dyn Fn(&str) -> Option<String>,
}

impl Ctx<'_> {
    pub(super) fn err(
        &mut self,
        span: SourceSpan,
        msg: impl Into<String>,
        label: impl Into<String>,
    ) {
        self.problems.push(Problem::new(span, msg, label));
    }

    pub(super) fn err_help(
        &mut self,
        span: SourceSpan,
        msg: impl Into<String>,
        label: impl Into<String>,
        help: impl Into<String>,
    ) {
        self.problems
            .push(Problem::new(span, msg, label).with_help(help));
    }

    /// Children of a block, checked against the allowed names; duplicates of non-repeatable
    /// fields are reported.
    pub(super) fn fields<'n>(
        &mut self,
        node: &'n RawNode,
        allowed: &[&str],
        repeatable: &[&str],
    ) -> BTreeMap<&'n str, Vec<&'n RawNode>> {
        let mut out: BTreeMap<&str, Vec<&RawNode>> = BTreeMap::new();
        for child in &node.children {
            let name = child.name.value.as_str();
            if !allowed.contains(&name) {
                let help = did_you_mean(name, allowed.iter().copied())
                    .unwrap_or_else(|| known_list(allowed.iter().copied()));
                self.err_help(
                    child.name.span,
                    format!("unknown field `{name}` in `{}`", node.name.value),
                    "not a field of this block",
                    help,
                );
                continue;
            }
            let seen = out.entry(name).or_default();
            if !seen.is_empty() && !repeatable.contains(&name) {
                self.err(
                    child.name.span,
                    format!("duplicate field `{name}`"),
                    "already set above",
                );
                continue;
            }
            seen.push(child);
        }
        out
    }

    pub(super) fn no_children(&mut self, node: &RawNode) {
        if let Some(first) = node.children.first() {
            self.err(
                first.span,
                format!("`{}` takes no block", node.name.value),
                "unexpected block",
            );
        }
    }

    pub(super) fn no_props(&mut self, node: &RawNode) {
        for (k, _) in &node.props {
            self.err(
                k.span,
                format!("`{}` takes no properties", node.name.value),
                "unexpected property",
            );
        }
    }

    pub(super) fn expand_env(&mut self, s: &Spanned<String>) -> String {
        let mut out = String::new();
        let mut rest = s.value.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                self.err(s.span, "unclosed `${` in string", "missing `}`");
                return s.value.clone();
            };
            let var = &after[..end];
            match (self.env)(var) {
                Some(v) => out.push_str(&v),
                None => {
                    self.err_help(
                        s.span,
                        format!("environment variable `{var}` is not set"),
                        "referenced here",
                        format!("set `{var}` before running bench360 (the quickstart's come from `eval \"$(scripts/install-engine.sh)\"`)"),
                    );
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The node's single argument, as a string.
    /// One `#true` / `#false`.
    pub(super) fn one_bool(&mut self, node: &RawNode) -> Option<bool> {
        match node.args.as_slice() {
            [v] => match &v.value {
                RawValue::Bool(b) => Some(*b),
                other => {
                    self.err(
                        v.span,
                        format!(
                            "`{}` expects #true or #false, got {}",
                            node.name.value,
                            other.type_name()
                        ),
                        "not a boolean",
                    );
                    None
                }
            },
            _ => {
                self.err(
                    node.name.span,
                    format!("`{}` takes one value (#true or #false)", node.name.value),
                    "here",
                );
                None
            }
        }
    }

    /// A block as a JSON object: each child `name value` is a field; several values make an
    /// array; a child with its own block is a nested object.
    pub(super) fn json_object(
        &mut self,
        node: &RawNode,
    ) -> std::collections::BTreeMap<String, serde_json::Value> {
        let mut out = std::collections::BTreeMap::new();
        if !node.args.is_empty() {
            self.err(
                node.args[0].span,
                format!("`{}` takes a block, not values", node.name.value),
                "unexpected value",
            );
        }
        for c in &node.children {
            let value = |v: &RawValue| -> serde_json::Value {
                match v {
                    RawValue::Str(s) => serde_json::Value::String(s.clone()),
                    RawValue::Int(i) => serde_json::json!(*i as i64),
                    RawValue::Float(f) => serde_json::json!(f),
                    RawValue::Bool(b) => serde_json::Value::Bool(*b),
                    RawValue::Null => serde_json::Value::Null,
                }
            };
            let v = if !c.children.is_empty() {
                serde_json::Value::Object(self.json_object(c).into_iter().collect())
            } else {
                match c.args.as_slice() {
                    [] => serde_json::Value::Null,
                    [one] => value(&one.value),
                    many => {
                        serde_json::Value::Array(many.iter().map(|a| value(&a.value)).collect())
                    }
                }
            };
            if out.insert(c.name.value.clone(), v).is_some() {
                self.err(
                    c.name.span,
                    format!("`{}` is given twice", c.name.value),
                    "again here",
                );
            }
        }
        out
    }

    pub(super) fn one_str(&mut self, node: &RawNode) -> Option<Spanned<String>> {
        self.no_props(node);
        self.no_children(node);
        match node.args.as_slice() {
            [v] => match &v.value {
                RawValue::Str(s) => Some(Spanned::new(s.clone(), v.span)),
                other => {
                    self.err(
                        v.span,
                        format!("`{}` expects a string", node.name.value),
                        format!("this is {}", other.type_name()),
                    );
                    None
                }
            },
            [] => {
                self.err(
                    node.span,
                    format!("`{}` needs a value", node.name.value),
                    "missing value",
                );
                None
            }
            [_, extra @ ..] => {
                self.err(
                    extra[0].span,
                    format!("`{}` takes exactly one value", node.name.value),
                    "extra value",
                );
                None
            }
        }
    }

    pub(super) fn strs(&mut self, node: &RawNode) -> Vec<Spanned<String>> {
        self.no_props(node);
        self.no_children(node);
        if node.args.is_empty() {
            self.err(
                node.span,
                format!("`{}` needs at least one value", node.name.value),
                "missing value",
            );
        }
        let mut out = Vec::new();
        for v in &node.args {
            match &v.value {
                RawValue::Str(s) => out.push(Spanned::new(s.clone(), v.span)),
                other => self.err(
                    v.span,
                    format!("`{}` expects strings", node.name.value),
                    format!("this is {}", other.type_name()),
                ),
            }
        }
        out
    }

    pub(super) fn num(&mut self, node: &RawNode, v: &Spanned<RawValue>) -> Option<f64> {
        match v.value {
            RawValue::Int(i) => Some(i as f64),
            RawValue::Float(f) => Some(f),
            ref other => {
                self.err(
                    v.span,
                    format!("`{}` expects a number", node.name.value),
                    format!("this is {}", other.type_name()),
                );
                None
            }
        }
    }

    pub(super) fn int(
        &mut self,
        node: &RawNode,
        v: &Spanned<RawValue>,
        min: u64,
        max: u64,
    ) -> Option<u64> {
        match v.value {
            RawValue::Int(i) if i >= min as i128 && i <= max as i128 => Some(i as u64),
            RawValue::Int(_) => {
                self.err(
                    v.span,
                    format!("`{}` must be between {min} and {max}", node.name.value),
                    "out of range",
                );
                None
            }
            ref other => {
                self.err(
                    v.span,
                    format!("`{}` expects a whole number", node.name.value),
                    format!("this is {}", other.type_name()),
                );
                None
            }
        }
    }

    pub(super) fn ints(&mut self, node: &RawNode, min: u64, max: u64) -> Vec<u64> {
        self.no_props(node);
        self.no_children(node);
        if node.args.is_empty() {
            self.err(
                node.span,
                format!("`{}` needs at least one value", node.name.value),
                "missing value",
            );
        }
        let mut out = Vec::new();
        // A set beside the list: an axis of 50,000 values is checked in linear time.
        let mut seen = std::collections::HashSet::with_capacity(node.args.len());
        for v in &node.args {
            if let Some(i) = self.int(node, v, min, max) {
                if !seen.insert(i) {
                    self.err(
                        v.span,
                        format!("`{}` lists {i} twice", node.name.value),
                        "duplicate value",
                    );
                } else {
                    out.push(i);
                }
            }
        }
        out
    }

    pub(super) fn one_int(&mut self, node: &RawNode, min: u64, max: u64) -> Option<u64> {
        let v = self.ints(node, min, max);
        if node.args.len() > 1 {
            self.err(
                node.args[1].span,
                format!("`{}` takes exactly one value", node.name.value),
                "extra value",
            );
            return None;
        }
        v.first().copied()
    }

    pub(super) fn nums(&mut self, node: &RawNode, min: f64, max: f64) -> Vec<f64> {
        self.no_props(node);
        self.no_children(node);
        if node.args.is_empty() {
            self.err(
                node.span,
                format!("`{}` needs at least one value", node.name.value),
                "missing value",
            );
        }
        let mut out: Vec<f64> = Vec::new();
        let mut seen = std::collections::HashSet::with_capacity(node.args.len());
        for v in &node.args {
            if let Some(x) = self.num(node, v) {
                if !(min..=max).contains(&x) {
                    self.err(
                        v.span,
                        format!("`{}` must be between {min} and {max}", node.name.value),
                        "out of range",
                    );
                } else if !seen.insert(x.to_bits()) {
                    self.err(
                        v.span,
                        format!("`{}` lists {x} twice", node.name.value),
                        "duplicate value",
                    );
                } else {
                    out.push(x);
                }
            }
        }
        out
    }

    pub(super) fn one_num(&mut self, node: &RawNode, min: f64, max: f64) -> Option<f64> {
        let v = self.nums(node, min, max);
        if node.args.len() > 1 {
            self.err(
                node.args[1].span,
                format!("`{}` takes exactly one value", node.name.value),
                "extra value",
            );
            return None;
        }
        v.first().copied()
    }

    /// `model "name" { … }`: the block's name argument.
    pub(super) fn block_name(&mut self, node: &RawNode) -> Option<Spanned<String>> {
        self.no_props(node);
        match node.args.as_slice() {
            [v] => match &v.value {
                RawValue::Str(s) if !s.is_empty() && !s.contains('/') => {
                    Some(Spanned::new(s.clone(), v.span))
                }
                RawValue::Str(_) => {
                    self.err(
                        v.span,
                        format!("invalid {} name", node.name.value),
                        "names must be non-empty and contain no `/`",
                    );
                    None
                }
                other => {
                    self.err(
                        v.span,
                        format!("{} name must be a string", node.name.value),
                        format!("this is {}", other.type_name()),
                    );
                    None
                }
            },
            [] => {
                self.err_help(
                    node.name.span,
                    format!("`{}` needs a name", node.name.value),
                    "missing name",
                    format!("write `{} \"my-name\" {{ … }}`", node.name.value),
                );
                None
            }
            [_, extra @ ..] => {
                self.err(
                    extra[0].span,
                    format!("`{}` takes one name", node.name.value),
                    "extra value",
                );
                None
            }
        }
    }

    pub(super) fn first<'n>(
        fields: &BTreeMap<&str, Vec<&'n RawNode>>,
        name: &str,
    ) -> Option<&'n RawNode> {
        fields.get(name).and_then(|v| v.first().copied())
    }
}
