//! The OAuth client Baton registered (or was given) at each provider's
//! authorization server, so it registers once, not per person. Kept per
//! redirect URL: a client registered for one URL is never replaced by one
//! for another (the first registration for a URL is the one kept).

use super::{corrupt, ConnectionError, ConnectionStore};
use crate::clock::{self, Instant};
use crate::store::table::{Condition, Item, Key, TableError, Write};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

/// A registered OAuth client of one provider. Debug never shows the secret.
#[derive(Clone, Debug)]
pub struct OAuthClient {
    pub client_id: String,
    pub client_secret: Option<SecretString>,
    /// The redirect URL it was registered for (re-register when Baton's
    /// public URL changed).
    pub redirect_uri: String,
    /// The authorization server it was registered at (its issuer or
    /// registration endpoint), to re-register when that changes.
    pub authorization_server: String,
    pub registered_at: Instant,
}

#[derive(Serialize, Deserialize)]
struct ClientData {
    client_id: String,
    /// base64 of the sealed secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    redirect_uri: String,
    authorization_server: String,
    #[serde(with = "clock::as_millis")]
    registered_at: Instant,
}

fn client_key(provider: &str, redirect_uri: &str) -> Key {
    Key::new(
        format!("OAUTHCLIENT#{provider}"),
        format!("CLIENT#{redirect_uri}"),
    )
}

fn secret_context(provider: &str, redirect_uri: &str) -> String {
    format!("oauthclient/{provider}/{redirect_uri}")
}

impl ConnectionStore {
    /// The client registered at `provider` for `redirect_uri`, if any.
    pub async fn oauth_client(
        &self,
        provider: &str,
        redirect_uri: &str,
    ) -> Result<Option<OAuthClient>, ConnectionError> {
        let key = client_key(provider, redirect_uri);
        let Some(item) = self.table().get(&key).await? else {
            return Ok(None);
        };
        let data: ClientData = serde_json::from_str(&item.data).map_err(|e| corrupt(&key, e))?;
        let client_secret = match &data.client_secret {
            None => None,
            Some(sealed) => {
                let plain = self
                    .open(sealed, &secret_context(provider, redirect_uri))
                    .await?;
                let text = String::from_utf8(plain)
                    .map_err(|_| corrupt(&key, "the opened secret is not text"))?;
                Some(SecretString::from(text))
            }
        };
        Ok(Some(OAuthClient {
            client_id: data.client_id,
            client_secret,
            redirect_uri: data.redirect_uri,
            authorization_server: data.authorization_server,
            registered_at: data.registered_at,
        }))
    }

    /// Keeps the client registered at `provider` for its redirect URL,
    /// unless one is kept for that URL already: `false` then (read the one
    /// kept: flows in progress use it).
    pub async fn put_oauth_client(
        &self,
        provider: &str,
        client: &OAuthClient,
    ) -> Result<bool, ConnectionError> {
        let key = client_key(provider, &client.redirect_uri);
        let context = secret_context(provider, &client.redirect_uri);
        let client_secret = match &client.client_secret {
            None => None,
            Some(s) => Some(self.seal(s.expose_secret().as_bytes(), &context).await?),
        };
        let data = ClientData {
            client_id: client.client_id.clone(),
            client_secret,
            redirect_uri: client.redirect_uri.clone(),
            authorization_server: client.authorization_server.clone(),
            registered_at: client.registered_at,
        };
        let body = serde_json::to_string(&data).map_err(|e| corrupt(&key, e))?;
        let item = Item {
            key,
            version: 1,
            data: body,
            index: None,
            expires_at: None,
            listing: None,
        };
        match self
            .table()
            .transact(vec![Write::Put {
                item,
                condition: Condition::NotExists,
            }])
            .await
        {
            Ok(()) => Ok(true),
            Err(TableError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Forgets the client of `provider` for `redirect_uri` (it was
    /// refused: register anew).
    pub async fn delete_oauth_client(
        &self,
        provider: &str,
        redirect_uri: &str,
    ) -> Result<(), ConnectionError> {
        self.table()
            .transact(vec![Write::Delete {
                key: client_key(provider, redirect_uri),
                condition: Condition::None,
            }])
            .await?;
        Ok(())
    }
}
