//! Tool arguments: parsed from the model's JSON with errors that name the
//! offending field, and described by a schema derived from the same type.

use baton_core::ToolOutput;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;

/// The JSON Schema of `T`, as a tool's `input_schema`.
pub fn input_schema<T: JsonSchema>() -> serde_json::Value {
    let mut schema = schemars::schema_for!(T);
    // The meta-schema URI is noise to a model and costs tokens on every call.
    schema.remove("$schema");
    schema.to_value()
}

/// Deserialises a tool's arguments; the error says which field is wrong, in
/// words the model can act on. `null` counts as `{}`: models omit arguments
/// for tools whose fields are all optional.
pub fn parse_args<T: DeserializeOwned>(
    tool: &str,
    arguments: serde_json::Value,
) -> Result<T, String> {
    let arguments = match arguments {
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        other => other,
    };
    serde_path_to_error::deserialize(arguments).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." {
            format!("invalid arguments for {tool}: {inner}")
        } else {
            format!("invalid arguments for {tool}: field `{path}`: {inner}")
        }
    })
}

/// `arguments` as `T` reads them, written back: defaults filled in,
/// aliases resolved, `null` as `{}` ([`baton_core::Tool::normalise`]).
/// Unchanged when `T` does not read them: the call then fails as it would.
pub(crate) fn normalised<T>(arguments: serde_json::Value) -> serde_json::Value
where
    T: DeserializeOwned + Serialize,
{
    let given = match &arguments {
        serde_json::Value::Null => serde_json::Value::Object(serde_json::Map::new()),
        other => other.clone(),
    };
    serde_json::from_value::<T>(given)
        .ok()
        .and_then(|args| serde_json::to_value(args).ok())
        .unwrap_or(arguments)
}

/// One tool call: parses the arguments as `T`, runs `op` on them, and turns
/// either failure into an error result the model can read.
pub(crate) async fn run<T, F, Fut>(tool: &str, arguments: serde_json::Value, op: F) -> ToolOutput
where
    T: DeserializeOwned,
    F: FnOnce(T) -> Fut,
    Fut: Future<Output = Result<String, String>>,
{
    let args = match parse_args::<T>(tool, arguments) {
        Ok(args) => args,
        Err(e) => return ToolOutput::error(e),
    };
    match op(args).await {
        Ok(s) => ToolOutput::ok(s),
        Err(e) => ToolOutput::error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::normalised;
    use crate::schedule::ScheduleCreateArgs;
    use crate::time::CurrentTimeArgs;
    use serde_json::json;

    /// A tool's arguments as its type reads them: what the schema leaves
    /// out is written out, and a second pass changes nothing; arguments
    /// the type refuses are left for the tool to refuse.
    #[test]
    fn arguments_are_what_the_type_reads() {
        let n = normalised::<ScheduleCreateArgs>(json!({
            "expression": "rate(1 hour)", "instruction": "check", "kind": "heartbeat"
        }));
        assert_eq!(
            n,
            json!({"expression": "rate(1 hour)", "timezone": null, "instruction": "check",
                   "kind": "heartbeat", "post_to": null})
        );
        assert_eq!(normalised::<ScheduleCreateArgs>(n.clone()), n);
        assert_eq!(normalised::<CurrentTimeArgs>(json!(null)), json!({}));
        for bad in [json!({"expression": 1}), json!({"x": 1}), json!("text")] {
            assert_eq!(normalised::<ScheduleCreateArgs>(bad.clone()), bad);
        }
    }
}
