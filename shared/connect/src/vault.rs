//! [`ConnectionVault`]: the [`Credentials`] tools use, over vault's
//! [`ConnectionStore`]. A token about to expire is refreshed first, by one
//! segment only (the store's refresh lease); the others wait briefly and
//! read what it stored. A token the provider rejected is refreshed, or the
//! connection forgotten so the person is asked again.

use crate::error::ConnectError;
use crate::flow::{ClientRegistry, Connector, RegisteredClient};
use async_trait::async_trait;
use baton_core::clock::Instant;
use baton_core::connection::{CredentialError, Credentials, PersonKey};
use baton_core::store::connections::{
    ConnectionError, ConnectionStore, OAuthClient, PutCondition, StoredConnection,
};
use secrecy::{ExposeSecret, SecretString};
use std::sync::Arc;
use std::time::Duration;

/// A token expiring sooner than this is refreshed before use.
const REFRESH_AHEAD: Duration = Duration::from_secs(60);
/// How long a refresher holds the lease (a dead one's lease is retaken
/// after it).
const REFRESH_LEASE: Duration = Duration::from_secs(30);
/// How long a segment that lost the lease waits before reading again,
/// and how many times.
const WAIT_STEP: Duration = Duration::from_millis(200);
const WAIT_STEPS: u32 = 50;

/// The per-person credentials of a deployment.
pub struct ConnectionVault {
    store: ConnectionStore,
    connector: Arc<Connector>,
}

/// Registered clients kept in the connection store (`OAUTHCLIENT#`).
pub struct StoredClients(pub ConnectionStore);

fn store_error(e: ConnectionError) -> ConnectError {
    ConnectError::Store(e.to_string())
}

#[async_trait]
impl ClientRegistry for StoredClients {
    async fn registered(
        &self,
        provider: &str,
        redirect_url: &str,
    ) -> Result<Option<RegisteredClient>, ConnectError> {
        Ok(self
            .0
            .oauth_client(provider, redirect_url)
            .await
            .map_err(store_error)?
            .map(|c| RegisteredClient {
                client_id: c.client_id,
                client_secret: c.client_secret,
                redirect_url: c.redirect_uri,
            }))
    }

    async fn keep(
        &self,
        provider: &str,
        client: RegisteredClient,
    ) -> Result<RegisteredClient, ConnectError> {
        let stored = OAuthClient {
            client_id: client.client_id.clone(),
            client_secret: client.client_secret.clone(),
            redirect_uri: client.redirect_url.clone(),
            authorization_server: String::new(),
            registered_at: Instant::now(),
        };
        let kept_new = self
            .0
            .put_oauth_client(provider, &stored)
            .await
            .map_err(store_error)?;
        if kept_new {
            return Ok(client);
        }
        // Another flow registered for this URL meanwhile: its client is
        // kept (flows in progress use it).
        self.registered(provider, &client.redirect_url)
            .await?
            .ok_or_else(|| ConnectError::Store("the registered client vanished".into()))
    }
}

fn unavailable(e: impl std::fmt::Display) -> CredentialError {
    CredentialError::Unavailable(e.to_string())
}

/// What one attempt at a usable token came to.
enum Step {
    Token(SecretString),
    /// Another segment holds the refresh lease, or the item changed: read
    /// again shortly.
    Wait,
}

impl ConnectionVault {
    pub fn new(store: ConnectionStore, connector: Arc<Connector>) -> Self {
        ConnectionVault { store, connector }
    }

    pub fn connector(&self) -> &Arc<Connector> {
        &self.connector
    }

    fn not_connected(person: &PersonKey, provider: &str) -> CredentialError {
        CredentialError::NotConnected {
            person: person.clone(),
            provider: provider.to_owned(),
        }
    }

    async fn read(
        &self,
        person: &PersonKey,
        provider: &str,
    ) -> Result<StoredConnection, CredentialError> {
        self.store
            .get(person, provider)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| Self::not_connected(person, provider))
    }

    /// Forgets a connection that cannot be used any more.
    async fn forget(&self, person: &PersonKey, provider: &str) -> CredentialError {
        match self.store.delete(person, provider).await {
            Ok(_) => Self::not_connected(person, provider),
            Err(e) => unavailable(e),
        }
    }

    /// Refreshes `stored` if this segment wins the lease.
    async fn refresh(
        &self,
        person: &PersonKey,
        provider: &str,
        stored: &StoredConnection,
    ) -> Result<Step, CredentialError> {
        let Some(refresh_token) = stored.tokens.refresh_token.clone() else {
            return Err(self.forget(person, provider).await);
        };
        let now = Instant::now();
        let lease = self
            .store
            .begin_refresh(person, provider, stored.version, now, REFRESH_LEASE)
            .await;
        let Some(version) = lease.map_err(unavailable)? else {
            return Ok(Step::Wait);
        };
        let refreshed = self.connector.refresh(provider, &refresh_token).await;
        let tokens = match refreshed {
            Ok(tokens) => tokens,
            Err(ConnectError::Refused { reason, .. }) => {
                tracing::info!(provider, %reason, "refresh refused; the person must connect again");
                return Err(self.forget(person, provider).await);
            }
            Err(ConnectError::UnknownProvider(_)) => {
                return Err(self.forget(person, provider).await)
            }
            Err(e) => return Err(unavailable(e)),
        };
        let put = self
            .store
            .put(
                person,
                provider,
                &tokens,
                PutCondition::Version(version),
                Instant::now(),
            )
            .await;
        match put {
            Ok(_) => {
                tracing::info!(provider, "connection refreshed");
                Ok(Step::Token(tokens.access_token))
            }
            // Revoked or reconnected meanwhile: read what is there.
            Err(ConnectionError::Changed) => Ok(Step::Wait),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// A usable token: `force` refreshes even one not about to expire
    /// (after a rejection of `rejected`).
    async fn usable(
        &self,
        person: &PersonKey,
        provider: &str,
        rejected: Option<&SecretString>,
    ) -> Result<SecretString, CredentialError> {
        if self.connector.provider(provider).is_none() {
            return Err(unavailable(ConnectError::UnknownProvider(
                provider.to_owned(),
            )));
        }
        for _ in 0..WAIT_STEPS {
            let stored = self.read(person, provider).await?;
            let was_rejected = rejected
                .is_some_and(|r| r.expose_secret() == stored.tokens.access_token.expose_secret());
            let expiring = stored
                .tokens
                .expires_at
                .is_some_and(|at| at <= Instant::now().saturating_add(REFRESH_AHEAD));
            if !was_rejected && !expiring {
                return Ok(stored.tokens.access_token);
            }
            // Without a refresh token, a token not yet expired is used
            // to its end; then (or once rejected) the person is asked
            // again.
            let expired = stored
                .tokens
                .expires_at
                .is_some_and(|at| at <= Instant::now());
            if stored.tokens.refresh_token.is_none() && !was_rejected && !expired {
                return Ok(stored.tokens.access_token);
            }
            match self.refresh(person, provider, &stored).await? {
                Step::Token(t) => return Ok(t),
                Step::Wait => tokio::time::sleep(WAIT_STEP).await,
            }
        }
        Err(unavailable(format!(
            "the connection to `{provider}` is being refreshed elsewhere; try again"
        )))
    }
}

#[async_trait]
impl Credentials for ConnectionVault {
    async fn bearer(
        &self,
        person: &PersonKey,
        provider: &str,
    ) -> Result<SecretString, CredentialError> {
        self.usable(person, provider, None).await
    }

    async fn rejected(
        &self,
        person: &PersonKey,
        provider: &str,
        rejected: &SecretString,
    ) -> Result<SecretString, CredentialError> {
        self.usable(person, provider, Some(rejected)).await
    }
}
