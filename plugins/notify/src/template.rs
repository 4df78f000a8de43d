//! The generic webhook's body template: text with `{{Placeholder}}`s (as
//! aws-node-termination-handler's webhook template), parsed once, rendered per notice.

use thiserror::Error;

/// One value a template can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    EventId,
    EventType,
    EventStatus,
    NotBefore,
    Resources,
    Description,
    EventSource,
    DurationInSeconds,
    Transition,
    VmName,
    Message,
    Verdict,
    MeasuredImpact,
}

impl Field {
    /// Every field, in the order the README documents them.
    pub(crate) const ALL: [Field; 13] = [
        Field::EventId,
        Field::EventType,
        Field::EventStatus,
        Field::NotBefore,
        Field::Resources,
        Field::Description,
        Field::EventSource,
        Field::DurationInSeconds,
        Field::Transition,
        Field::VmName,
        Field::Message,
        Field::Verdict,
        Field::MeasuredImpact,
    ];

    /// The placeholder's name, as written between the braces.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Field::EventId => "EventId",
            Field::EventType => "EventType",
            Field::EventStatus => "EventStatus",
            Field::NotBefore => "NotBefore",
            Field::Resources => "Resources",
            Field::Description => "Description",
            Field::EventSource => "EventSource",
            Field::DurationInSeconds => "DurationInSeconds",
            Field::Transition => "Transition",
            Field::VmName => "VmName",
            Field::Message => "Message",
            Field::Verdict => "Verdict",
            Field::MeasuredImpact => "MeasuredImpact",
        }
    }

    fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|field| field.name() == name)
    }
}

/// Why a template cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum TemplateError {
    /// Placeholders that name no field.
    #[error("unknown placeholder(s) {}; the known ones are {}", braced(.names), known_names())]
    Unknown { names: Vec<String> },
    /// A `{{` with no `}}` after it.
    #[error("the `{{{{` at byte {at} is never closed with `}}}}`")]
    Unclosed { at: usize },
}

fn braced(names: &[String]) -> String {
    let shown: Vec<String> = names.iter().map(|name| format!("{{{{{name}}}}}")).collect();
    shown.join(", ")
}

fn known_names() -> String {
    let names: Vec<String> = Field::ALL.iter().map(|f| f.name().to_owned()).collect();
    braced(&names)
}

/// A piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Field(Field),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    pieces: Vec<Piece>,
}

/// The default template: every field, as a flat JSON object.
pub(crate) const DEFAULT_TEMPLATE: &str = concat!(
    r#"{"transition":"{{Transition}}","vm_name":"{{VmName}}","event_id":"{{EventId}}","#,
    r#""event_type":"{{EventType}}","event_status":"{{EventStatus}}","not_before":"{{NotBefore}}","#,
    r#""resources":"{{Resources}}","description":"{{Description}}","#,
    r#""event_source":"{{EventSource}}","duration_in_seconds":{{DurationInSeconds}},"#,
    r#""message":"{{Message}}","verdict":"{{Verdict}}","measured_impact":"{{MeasuredImpact}}"}"#
);

impl Template {
    /// Parses `text`; placeholders are `{{Name}}` (spaces inside the braces are allowed).
    pub(crate) fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut pieces = Vec::new();
        let mut unknown = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or(TemplateError::Unclosed {
                at: text.len() - rest.len() + open,
            })?;
            push_literal(&mut pieces, &rest[..open]);
            let name = after[..close].trim();
            match Field::from_name(name) {
                Some(field) => pieces.push(Piece::Field(field)),
                None => unknown.push(name.to_owned()),
            }
            rest = &after[close + 2..];
        }
        push_literal(&mut pieces, rest);
        if !unknown.is_empty() {
            return Err(TemplateError::Unknown { names: unknown });
        }
        Ok(Template { pieces })
    }

    /// The text with each placeholder replaced by `value(field)`, JSON-escaped (the
    /// template puts the quotes where it wants them).
    pub(crate) fn render(&self, value: impl Fn(Field) -> String) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => out.push_str(text),
                Piece::Field(field) => out.push_str(&json_escaped(&value(*field))),
            }
        }
        out
    }
}

fn push_literal(pieces: &mut Vec<Piece>, text: &str) {
    if !text.is_empty() {
        pieces.push(Piece::Literal(text.to_owned()));
    }
}

/// `text` as a JSON string, quotes included.
pub(crate) fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// `text` escaped for the inside of a JSON string (no quotes around it).
fn json_escaped(text: &str) -> String {
    let quoted = json_string(text);
    quoted[1..quoted.len() - 1].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(field: Field) -> String {
        match field {
            Field::EventId => "E-1".into(),
            Field::Description => "say \"hi\"\\\nnow".into(),
            Field::DurationInSeconds => "-1".into(),
            other => other.name().to_lowercase(),
        }
    }

    #[test]
    fn placeholders_are_replaced_and_escaped() {
        let template = Template::parse(r#"{"id":"{{EventId}}","d":"{{ Description }}"}"#).unwrap();
        assert_eq!(
            template.render(sample),
            r#"{"id":"E-1","d":"say \"hi\"\\\nnow"}"#
        );
    }

    #[test]
    fn numbers_can_stand_unquoted() {
        let template = Template::parse(r#"{"s":{{DurationInSeconds}}}"#).unwrap();
        assert_eq!(template.render(sample), r#"{"s":-1}"#);
    }

    #[test]
    fn text_without_placeholders_is_kept() {
        let template = Template::parse("plain { text }").unwrap();
        assert_eq!(template.render(sample), "plain { text }");
    }

    #[test]
    fn unknown_placeholders_are_all_named() {
        let error = Template::parse("{{EventID}} {{VmName}} {{Foo}}").unwrap_err();
        assert_eq!(
            error,
            TemplateError::Unknown {
                names: vec!["EventID".into(), "Foo".into()]
            }
        );
        let text = error.to_string();
        assert!(
            text.starts_with("unknown placeholder(s) {{EventID}}, {{Foo}}; the known ones are {{EventId}}, {{EventType}}"),
            "{text}"
        );
    }

    #[test]
    fn an_unclosed_placeholder_is_an_error() {
        let error = Template::parse(r#"{"a":"{{EventId"}"#).unwrap_err();
        assert_eq!(error, TemplateError::Unclosed { at: 6 });
        assert_eq!(
            error.to_string(),
            "the `{{` at byte 6 is never closed with `}}`"
        );
    }

    #[test]
    fn the_default_template_is_valid_json_once_rendered() {
        let template = Template::parse(DEFAULT_TEMPLATE).unwrap();
        let rendered = template.render(sample);
        let parsed: serde_json::Value = serde_json::from_str(&rendered).unwrap();
        assert_eq!(parsed["description"], "say \"hi\"\\\nnow");
        assert_eq!(parsed["duration_in_seconds"], -1);
        assert_eq!(parsed["message"], "message");
    }
}
