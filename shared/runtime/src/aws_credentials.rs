//! AWS credentials for the Bedrock provider: the default chain of
//! `aws-config`, loaded on first use.

use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{future, ProvideCredentials, SharedCredentialsProvider};
use baton_llm::AwsCredentials;
use std::fmt;
use tokio::sync::OnceCell;

/// Loads `aws_config::defaults` (with Baton's HTTPS client,
/// [`baton_aws::config_loader`]) on the first request for credentials and
/// then asks its provider: environment variables (in Lambda, the function
/// role's credentials), then profiles, web identity, ECS and IMDS.
/// Configuration is read synchronously at start-up and only `bedrock`
/// needs AWS credentials, so nothing is loaded for the other providers.
/// The Bedrock provider caches what this returns until near expiry.
#[derive(Default)]
struct DefaultChain {
    loaded: OnceCell<Option<SharedCredentialsProvider>>,
}

impl fmt::Debug for DefaultChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DefaultChain")
    }
}

impl ProvideCredentials for DefaultChain {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            let provider = self
                .loaded
                .get_or_init(|| async {
                    baton_aws::config_loader()
                        .load()
                        .await
                        .credentials_provider()
                })
                .await;
            match provider {
                Some(p) => p.provide_credentials().await,
                None => Err(CredentialsError::not_loaded(
                    "no AWS credentials provider is configured",
                )),
            }
        })
    }
}

/// The default AWS credential chain, for `LlmConfig::Bedrock`.
pub(crate) fn default_chain() -> AwsCredentials {
    AwsCredentials::new(DefaultChain::default())
}
