//! The ingest Lambda of a deployment with `word_count`: Baton's ingest
//! handler, with `word_count` known to the agents file.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), baton_runtime::BoxError> {
    baton_example_custom_tool::app().run_ingest_lambda().await
}
