//! The `current_time` tool: what time it is, in a zone the model names.

use crate::args::{input_schema, parse_args};
use async_trait::async_trait;
use baton_core::{Tool, ToolContext, ToolOutput, ToolSpec};
use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// The tool's name as the model sees it.
pub const CURRENT_TIME: &str = baton_core::tool_names::CURRENT_TIME;

/// Arguments of `current_time`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CurrentTimeArgs {
    /// IANA time zone name such as "Europe/Berlin" or "America/New_York".
    /// Defaults to UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The `current_time` tool. Its clock is injectable so tests are exact.
#[derive(Clone)]
pub struct CurrentTimeTool {
    clock: Clock,
}

impl CurrentTimeTool {
    /// Reads the system clock.
    pub fn new() -> Self {
        CurrentTimeTool::with_clock(Utc::now)
    }

    /// Reads `clock` instead of the system clock.
    pub fn with_clock(clock: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Self {
        CurrentTimeTool {
            clock: Arc::new(clock),
        }
    }

    /// The answer for `timezone`, or the error the model gets.
    fn describe(&self, timezone: Option<&str>) -> Result<String, String> {
        let name = timezone
            .map(str::trim)
            .filter(|z| !z.is_empty())
            .unwrap_or("UTC");
        let zone: Tz = match name {
            "utc" | "Z" | "z" => Tz::UTC,
            _ => name.parse().map_err(|_| {
                let shown: String = name.chars().take(100).collect();
                format!(
                    "unknown time zone `{shown}`; use an IANA name such as \"Europe/Berlin\", \
                     \"America/New_York\" or \"UTC\""
                )
            })?,
        };
        let now = (self.clock)().with_timezone(&zone);
        Ok(format!(
            "{}\nweekday: {}\ntimezone: {} ({}, UTC{})",
            now.to_rfc3339_opts(SecondsFormat::Secs, true),
            now.format("%A"),
            zone.name(),
            now.format("%Z"),
            now.format("%:z"),
        ))
    }
}

impl Default for CurrentTimeTool {
    fn default() -> Self {
        CurrentTimeTool::new()
    }
}

impl fmt::Debug for CurrentTimeTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CurrentTimeTool").finish_non_exhaustive()
    }
}

#[async_trait]
impl Tool for CurrentTimeTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: CURRENT_TIME.into(),
            description: "Get the current date and time (RFC 3339), the weekday and the zone, \
                          in a given IANA time zone (default UTC)."
                .into(),
            input_schema: input_schema::<CurrentTimeArgs>(),
        }
    }

    fn normalise(&self, arguments: serde_json::Value) -> serde_json::Value {
        crate::args::normalised::<CurrentTimeArgs>(arguments)
    }

    async fn call(&self, arguments: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        let args: CurrentTimeArgs = match parse_args(CURRENT_TIME, arguments) {
            Ok(args) => args,
            Err(message) => return ToolOutput::error(message),
        };
        match self.describe(args.timezone.as_deref()) {
            Ok(text) => ToolOutput::ok(text),
            Err(message) => ToolOutput::error(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::TaskId;
    use serde_json::json;

    fn tool() -> CurrentTimeTool {
        // 2024-07-01T12:00:00Z, a Monday.
        CurrentTimeTool::with_clock(|| {
            DateTime::from_timestamp(1_719_835_200, 0).unwrap_or_default()
        })
    }

    fn ctx() -> ToolContext {
        ToolContext::new(TaskId::generate(), 1, "call_1")
    }

    #[tokio::test]
    async fn berlin_in_summer_is_cest() {
        let out = tool()
            .call(json!({"timezone": "Europe/Berlin"}), &ctx())
            .await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            out.content,
            "2024-07-01T14:00:00+02:00\nweekday: Monday\ntimezone: Europe/Berlin (CEST, UTC+02:00)"
        );
    }

    #[tokio::test]
    async fn default_is_utc() {
        for args in [
            json!({}),
            serde_json::Value::Null,
            json!({"timezone": null}),
            json!({"timezone": ""}),
        ] {
            let out = tool().call(args, &ctx()).await;
            assert!(!out.is_error, "{}", out.content);
            assert!(
                out.content
                    .starts_with("2024-07-01T12:00:00Z\nweekday: Monday\ntimezone: UTC"),
                "{}",
                out.content
            );
        }
    }

    #[tokio::test]
    async fn date_line_crossing_changes_weekday() {
        let out = tool()
            .call(json!({"timezone": "Pacific/Kiritimati"}), &ctx())
            .await;
        assert!(
            out.content
                .starts_with("2024-07-02T02:00:00+14:00\nweekday: Tuesday"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn unknown_zone_is_named_in_the_error() {
        let out = tool()
            .call(json!({"timezone": "Mars/Olympus_Mons"}), &ctx())
            .await;
        assert!(out.is_error);
        assert!(out.content.contains("Mars/Olympus_Mons"), "{}", out.content);
    }

    #[tokio::test]
    async fn wrong_argument_type_names_the_field() {
        let out = tool().call(json!({"timezone": 5}), &ctx()).await;
        assert!(out.is_error);
        assert!(out.content.contains("`timezone`"), "{}", out.content);
        let out = tool().call(json!({"zone": "UTC"}), &ctx()).await;
        assert!(out.is_error);
        assert!(out.content.contains("zone"), "{}", out.content);
    }

    #[test]
    fn schema_is_derived() {
        let spec = tool().spec();
        assert_eq!(spec.name, CURRENT_TIME);
        assert_eq!(spec.input_schema["type"], "object");
        assert!(
            spec.input_schema["properties"]["timezone"].is_object(),
            "{}",
            spec.input_schema
        );
        assert!(spec.input_schema.get("$schema").is_none());
        assert!(tool().idempotent(&json!({})));
    }
}
