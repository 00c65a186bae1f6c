//! Raw, spanned view of a KDL sweep file: every name and value keeps the byte span it came
//! from, so validation (and even plan-time checks) can point at the exact place in the file.
//! No I/O here: the parser takes text.

use miette::SourceSpan;

use crate::spec::Spanned;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RawValue {
    Str(String),
    Int(i128),
    Float(f64),
    Bool(bool),
    Null,
}

impl RawValue {
    pub fn type_name(&self) -> &'static str {
        match self {
            RawValue::Str(_) => "a string",
            RawValue::Int(_) => "an integer",
            RawValue::Float(_) => "a number",
            RawValue::Bool(_) => "a boolean",
            RawValue::Null => "null",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct RawNode {
    pub name: Spanned<String>,
    pub args: Vec<Spanned<RawValue>>,
    pub props: Vec<(Spanned<String>, Spanned<RawValue>)>,
    pub children: Vec<RawNode>,
    pub span: SourceSpan,
}

fn convert_value(v: &kdl::KdlValue) -> RawValue {
    match v {
        kdl::KdlValue::String(s) => RawValue::Str(s.clone()),
        kdl::KdlValue::Integer(i) => RawValue::Int(*i),
        kdl::KdlValue::Float(f) => RawValue::Float(*f),
        kdl::KdlValue::Bool(b) => RawValue::Bool(*b),
        kdl::KdlValue::Null => RawValue::Null,
    }
}

fn convert_node(node: &kdl::KdlNode) -> RawNode {
    let mut args = Vec::new();
    let mut props = Vec::new();
    for entry in node.entries() {
        let value = Spanned::new(convert_value(entry.value()), entry.span());
        match entry.name() {
            Some(name) => props.push((Spanned::new(name.value().to_string(), name.span()), value)),
            None => args.push(value),
        }
    }
    RawNode {
        name: Spanned::new(node.name().value().to_string(), node.name().span()),
        args,
        props,
        children: node
            .children()
            .map(|doc| doc.nodes().iter().map(convert_node).collect())
            .unwrap_or_default(),
        span: node.span(),
    }
}

/// Parses KDL (v2) text into raw spanned nodes.
pub(crate) fn parse_kdl(text: &str) -> Result<Vec<RawNode>, kdl::KdlError> {
    let doc: kdl::KdlDocument = kdl::KdlDocument::parse_v2(text)?;
    Ok(doc.nodes().iter().map(convert_node).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_spans_of_names_and_values() {
        let text = "model \"m\" {\n  path \"/x.gguf\"\n}\n";
        let nodes = parse_kdl(text).unwrap();
        assert_eq!(nodes.len(), 1);
        let m = &nodes[0];
        assert_eq!(m.name.value, "model");
        assert_eq!(
            &text[m.args[0].span.offset()..][..m.args[0].span.len()],
            "\"m\""
        );
        let path = &m.children[0];
        assert_eq!(path.args[0].value, RawValue::Str("/x.gguf".into()));
        assert_eq!(
            &text[path.args[0].span.offset()..][..path.args[0].span.len()],
            "\"/x.gguf\""
        );
    }
}
