//! Declared HTTP tools: the `[http_tools.NAME]` tables of the agents file,
//! as checked data. Their `${NAME}` references are still unresolved here;
//! the runtime resolves them from the environment (and the secrets loaded
//! from SSM) at start-up, and the tools crate builds the tool.

use std::collections::BTreeMap;
use std::time::Duration;

/// The timeout of a declared tool that sets none.
pub const DEFAULT_HTTP_TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// One `[http_tools.NAME]` table, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpToolDecl {
    /// The tool's name, as the model sees it and agents list it.
    pub name: String,
    pub description: String,
    /// Upper-case: GET, HEAD, POST, PUT, PATCH or DELETE.
    pub method: String,
    /// The URL as written, `${NAME}` references included.
    pub url: String,
    /// Header name to value as written, `${NAME}` references included.
    pub headers: BTreeMap<String, String>,
    /// The JSON Schema of the arguments (an object schema).
    pub parameters: serde_json::Value,
    pub timeout: Duration,
    /// `auth = { oauth = "NAME" }`: the person's bearer token for the
    /// `[oauth.NAME]` provider.
    pub auth: crate::connection::HttpToolAuth,
}

/// A piece of a value with `${NAME}` references.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplatePart {
    Text(String),
    /// `${NAME}`: the value of the variable NAME.
    Var(String),
}

/// Whether `name` may be a variable: letters, digits and `_`, not starting
/// with a digit.
fn valid_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Splits `text` into literal text and `${NAME}` references. `$` not
/// followed by `{` is literal; `${` must close with `}` around a variable
/// name. The error says what is wrong.
pub fn parse_template(text: &str) -> Result<Vec<TemplatePart>, String> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        literal.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("`${{` without a closing `}}` in `{text}`"));
        };
        let name = &after[..end];
        if !valid_var_name(name) {
            return Err(format!(
                "`${{{name}}}` is not a variable reference; write `${{NAME}}` with letters, digits and `_`"
            ));
        }
        if !literal.is_empty() {
            parts.push(TemplatePart::Text(std::mem::take(&mut literal)));
        }
        parts.push(TemplatePart::Var(name.to_owned()));
        rest = &after[end + 1..];
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(TemplatePart::Text(literal));
    }
    Ok(parts)
}

/// A valid HTTP header name (an RFC 9110 token).
pub(crate) fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Names of declared tools: what the model APIs accept.
pub(crate) fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_split_into_text_and_references() {
        assert_eq!(
            parse_template("Bearer ${TRACKER_TOKEN}").unwrap(),
            vec![
                TemplatePart::Text("Bearer ".into()),
                TemplatePart::Var("TRACKER_TOKEN".into())
            ]
        );
        assert_eq!(
            parse_template("${A}${B}/$x").unwrap(),
            vec![
                TemplatePart::Var("A".into()),
                TemplatePart::Var("B".into()),
                TemplatePart::Text("/$x".into())
            ]
        );
        assert_eq!(parse_template("").unwrap(), vec![]);
        assert!(parse_template("${OPEN").unwrap_err().contains("closing"));
        assert!(parse_template("${}").is_err());
        assert!(parse_template("${1A}").is_err());
        assert!(parse_template("${A-B}").is_err());
    }

    #[test]
    fn tool_and_header_names() {
        assert!(valid_tool_name("create_ticket"));
        assert!(valid_tool_name("Get-Weather2"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("a.b"));
        assert!(!valid_tool_name(&"a".repeat(65)));
        assert!(valid_header_name("X-Api-Key"));
        assert!(!valid_header_name("Bad Header"));
        assert!(!valid_header_name(""));
    }
}
