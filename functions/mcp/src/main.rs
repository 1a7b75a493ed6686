//! The MCP server Lambda: `/mcp` (docs/integrations.md#mcp-clients) behind
//! the same API as the ingest, handled by the same code
//! ([`baton_runtime::AppBuilder::run_ingest_lambda`]) built with its MCP
//! server. A function of its own so that the ingest, which answers Slack
//! within its 3 s, does not carry rmcp (docs/performance.md).

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), baton_runtime::BoxError> {
    baton_runtime::AppBuilder::new().run_ingest_lambda().await
}
