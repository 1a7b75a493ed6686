//! `baton connections list|revoke`: the operators' connection routes
//! (docs/api.md#connections). Never shows a token: the API has none to
//! show.

use super::{percent_encode, query_string, Api, ApiArgs};
use clap::Subcommand;
use serde_json::Value;

#[derive(Subcommand)]
pub(crate) enum ConnectionCommand {
    /// List per-person connections: everyone's, or one person's with
    /// --user (a table; --json for the API's JSON).
    List {
        /// Only this person's: WORKSPACE:USER (a Slack team and user id,
        /// `T123:U456`, or `api:ID` for a person an HTTP client named).
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a person's connection: its stored tokens are deleted, so
    /// their next call that needs it asks them to connect again.
    Revoke {
        /// WORKSPACE:USER, as `list` shows it.
        person: String,
        /// The provider (`[mcp.NAME]` or `[oauth.NAME]`).
        provider: String,
    },
}

pub(crate) async fn run_connections(
    args: ApiArgs,
    command: ConnectionCommand,
) -> anyhow::Result<()> {
    let api = Api::new(&args)?;
    match command {
        ConnectionCommand::List { user, json } => {
            let all = list(&api, user.as_deref()).await?;
            if json {
                let v = serde_json::json!({ "connections": all });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!("{}", render_table(&all));
            }
        }
        ConnectionCommand::Revoke { person, provider } => {
            api.call(
                reqwest::Method::DELETE,
                &format!(
                    "/connections/{}/{}",
                    percent_encode(&person),
                    percent_encode(&provider)
                ),
                None,
                None,
            )
            .await?;
            println!("revoked {person}'s connection to {provider}");
        }
    }
    Ok(())
}

/// Every page of the listing.
async fn list(api: &Api, user: Option<&str>) -> anyhow::Result<Vec<Value>> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if let Some(u) = user {
            pairs.push(("user", u));
        }
        if let Some(c) = cursor.as_deref() {
            pairs.push(("cursor", c));
        }
        let path = if pairs.is_empty() {
            "/connections".to_owned()
        } else {
            format!("/connections?{}", query_string(&pairs))
        };
        let v = api.call(reqwest::Method::GET, &path, None, None).await?;
        all.extend(v["connections"].as_array().cloned().unwrap_or_default());
        match v["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(all),
        }
    }
}

/// Connections as a table: person, provider, connected, refreshed,
/// expires, scopes.
fn render_table(connections: &[Value]) -> String {
    if connections.is_empty() {
        return "no connections\n".to_owned();
    }
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let rows: Vec<[String; 6]> = connections
        .iter()
        .map(|c| {
            let scopes: Vec<&str> = c["scopes"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            [
                text(&c["person"]),
                text(&c["provider"]),
                text(&c["connected_at"]),
                text(&c["refreshed_at"]),
                text(&c["expires_at"]),
                scopes.join(" "),
            ]
        })
        .collect();
    let header = [
        "PERSON",
        "PROVIDER",
        "CONNECTED",
        "REFRESHED",
        "EXPIRES",
        "SCOPES",
    ];
    super::columns(header, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_table_of_connections() {
        let t = render_table(&[json!({"person": "T1:U1", "provider": "github",
            "connected_at": "2026-01-01T00:00:00.000Z", "scopes": ["repo", "read:org"]})]);
        assert_eq!(
            t.lines().collect::<Vec<_>>(),
            [
                "PERSON  PROVIDER  CONNECTED                 REFRESHED  EXPIRES  SCOPES",
                "T1:U1   github    2026-01-01T00:00:00.000Z  -          -        repo read:org"
            ]
        );
        assert_eq!(render_table(&[]), "no connections\n");
    }
}
