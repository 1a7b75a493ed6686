//! The worker Lambda of a deployment with `word_count`: Baton's worker,
//! with `word_count` among the tools its agents may call.

#[tokio::main]
async fn main() -> Result<(), baton_runtime::BoxError> {
    baton_example_custom_tool::app().run_worker_lambda().await
}
