//! Per-person OAuth connections at rest: the tokens of each (person,
//! provider), sealed by a [`Sealer`]; the pending Connect links; the OAuth
//! clients Baton registered at each provider. All over the [`Table`] port,
//! so both backends store them alike:
//!
//! | item | pk | sk | what |
//! | --- | --- | --- | --- |
//! | connection | `CONN#{workspace}#{user}` | `{provider}` | the sealed tokens; in clear what `baton connections list` shows (connected_at, refreshed_at, expires_at, scopes) and the refresh lease |
//! | connect request | `CONNECT#{sha256 of state, hex}` | `CONNECT` | a [`crate::connection::ConnectRequest`], then the flow started at `/connect` (sealed PKCE verifier, browser hash, flow expiry), then when it was used |
//! | OAuth client | `OAUTHCLIENT#{provider}` | `CLIENT#{redirect URL}` | the client id, sealed client secret, the redirect URL it was registered for (one per URL, never overwritten) |
//!
//! A person's connections share one partition, bounded by the number of
//! providers. The operators' listing of everyone's connections reads the
//! table's sorted listing index, sharded: a connection sits under
//! `connections#NN` (NN = FNV-1a of the person modulo
//! [`LISTING_SHARDS`]) with the sort key `{person}#{provider}`, so no index
//! partition takes more than its share, and a page merges the shards
//! (as the task listing does). Connection items never expire; connect
//! requests expire a day after their link does.

mod clients;
mod requests;

pub use clients::OAuthClient;
pub use requests::{BrowserCheck, ClaimedConnect, ConnectFlow, PendingConnect};

use crate::clock::{self, Instant};
use crate::store::table::{shard_of, Condition, Item, Key, ListingKey, Table, TableError, Write};
use crate::task::connection::{ConnectionSummary, PersonKey, SealError, Sealer, Tokens};
use base64::Engine;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// Why a deployment cannot keep per-person connections: said at start-up
/// and to whoever needs one.
pub const NOT_CONFIGURED: &str = "per-person connections are not available: this deployment has no key to seal their tokens with (set BATON_CONNECTIONS_KEY to a KMS key id, ARN or alias; the SAM stack sets it)";

/// Shards of the connections listing. Part of stored keys: never change.
pub const LISTING_SHARDS: u32 = 16;
/// The most connections one listing page holds.
pub const MAX_PAGE: usize = 100;
/// Attempts of a write that lost a race with another writer of its item.
const MAX_RETRIES: usize = 5;

/// Why a Connect link (`/connect/{state}`, `/oauth/callback`) is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectRefused {
    #[error("this connection link is not known")]
    Unknown,
    #[error("this connection link was used already")]
    Used,
    #[error("this connection link has expired")]
    Expired,
    #[error("this connection link was opened in another browser")]
    Foreign,
}

/// What the connection store can fail with. Never holds a token.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Seal(#[from] SealError),
    #[error("stored connection data unreadable: {0}")]
    Corrupt(String),
    /// A conditional write found the item changed (another writer won) or
    /// (for [`PutCondition::Absent`]) present.
    #[error("the connection changed meanwhile")]
    Changed,
    /// A connect request that cannot be started or claimed.
    #[error(transparent)]
    Refused(#[from] ConnectRefused),
    /// A person or provider name that cannot be part of a key (empty, or
    /// with `#`, which separates the parts of keys).
    #[error("`{0}` cannot name a connection")]
    InvalidName(String),
}

/// When [`ConnectionStore::put`] applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutCondition {
    /// Always: a new connection (`connected_at` = now), replacing any.
    Replace,
    /// Only if the person has no connection to the provider.
    Absent,
    /// Only if the stored item still has this version: tokens refreshed
    /// (`connected_at` kept, `refreshed_at` = now, the lease released).
    Version(u64),
}

/// A person's connection as stored: the tokens opened, what may be shown,
/// the item's version (for [`PutCondition::Version`] and
/// [`ConnectionStore::begin_refresh`]) and the refresh lease if one is held.
#[derive(Clone, Debug)]
pub struct StoredConnection {
    pub tokens: Tokens,
    pub summary: ConnectionSummary,
    pub version: u64,
    pub refreshing_until: Option<Instant>,
}

/// One page of everyone's connections ([`ConnectionStore::list_all`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionPage {
    pub connections: Vec<ConnectionSummary>,
    /// Where the next page starts (pass as `after`); `None` at the end.
    pub next: Option<String>,
}

/// The connection item's body.
#[derive(Serialize, Deserialize)]
struct ConnectionData {
    person: PersonKey,
    provider: String,
    /// base64 of the sealed [`SealedTokens`].
    sealed: String,
    #[serde(with = "clock::as_millis")]
    connected_at: Instant,
    #[serde(default, with = "clock::as_millis_opt")]
    refreshed_at: Option<Instant>,
    #[serde(default, with = "clock::as_millis_opt")]
    expires_at: Option<Instant>,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default, with = "clock::as_millis_opt")]
    refreshing_until: Option<Instant>,
}

/// What is sealed: the tokens only.
#[derive(Serialize, Deserialize)]
struct SealedTokens {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
}

/// The tokens and Connect links of every person, sealed at rest.
#[derive(Clone)]
pub struct ConnectionStore {
    table: Arc<dyn Table>,
    sealer: Arc<dyn Sealer>,
}

fn connection_key(person: &PersonKey, provider: &str) -> Key {
    Key::new(
        format!("CONN#{}#{}", person.workspace, person.user),
        provider,
    )
}

/// What the sealed tokens are bound to: an item copied under another
/// person or provider does not open.
fn connection_context(person: &PersonKey, provider: &str) -> String {
    format!("connection/{person}/{provider}")
}

fn listing_key(person: &PersonKey, provider: &str) -> ListingKey {
    let person = person.to_string();
    ListingKey {
        partition: listing_partition(shard_of(&person, LISTING_SHARDS)),
        sort: format!("{person}#{provider}"),
    }
}

fn listing_partition(shard: u32) -> String {
    format!("connections#{shard:02}")
}

fn corrupt(key: &Key, e: impl std::fmt::Display) -> ConnectionError {
    ConnectionError::Corrupt(format!("{}/{}: {e}", key.pk, key.sk))
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

impl ConnectionStore {
    pub fn new(table: Arc<dyn Table>, sealer: Arc<dyn Sealer>) -> Self {
        ConnectionStore { table, sealer }
    }

    fn table(&self) -> &dyn Table {
        self.table.as_ref()
    }

    async fn seal(&self, plaintext: &[u8], context: &str) -> Result<String, ConnectionError> {
        Ok(b64().encode(self.sealer.seal(plaintext, context).await?))
    }

    async fn open(&self, sealed: &str, context: &str) -> Result<Vec<u8>, ConnectionError> {
        let bytes = b64().decode(sealed).map_err(|_| SealError {
            action: "open",
            reason: "the sealed value is not base64".into(),
        })?;
        Ok(self.sealer.open(&bytes, context).await?)
    }

    async fn read(&self, key: &Key) -> Result<Option<(ConnectionData, u64)>, ConnectionError> {
        self.read_item(key).await
    }

    /// An item's JSON body and version, if it exists.
    async fn read_item<T: serde::de::DeserializeOwned>(
        &self,
        key: &Key,
    ) -> Result<Option<(T, u64)>, ConnectionError> {
        match self.table().get(key).await? {
            None => Ok(None),
            Some(item) => {
                let data = serde_json::from_str(&item.data).map_err(|e| corrupt(key, e))?;
                Ok(Some((data, item.version)))
            }
        }
    }

    /// Writes a connection item; `Changed` when `condition` fails.
    async fn write(
        &self,
        data: &ConnectionData,
        version: u64,
        condition: Condition,
    ) -> Result<(), ConnectionError> {
        let key = connection_key(&data.person, &data.provider);
        let body = serde_json::to_string(data).map_err(|e| corrupt(&key, e))?;
        let item = Item {
            key,
            version,
            data: body,
            index: None,
            expires_at: None,
            listing: Some(listing_key(&data.person, &data.provider)),
        };
        match self
            .table()
            .transact(vec![Write::Put { item, condition }])
            .await
        {
            Ok(()) => Ok(()),
            Err(TableError::ConditionFailed { .. }) => Err(ConnectionError::Changed),
            Err(e) => Err(e.into()),
        }
    }

    fn summary(data: &ConnectionData) -> ConnectionSummary {
        ConnectionSummary {
            person: data.person.clone(),
            provider: data.provider.clone(),
            connected_at: data.connected_at,
            refreshed_at: data.refreshed_at,
            expires_at: data.expires_at,
            scopes: data.scopes.clone(),
        }
    }

    /// What is known of `person`'s connection to `provider`, without
    /// opening its tokens (the reaper asks whether a person connected).
    pub async fn summary_of(
        &self,
        person: &PersonKey,
        provider: &str,
    ) -> Result<Option<ConnectionSummary>, ConnectionError> {
        let key = connection_key(person, provider);
        Ok(self.read(&key).await?.map(|(data, _)| Self::summary(&data)))
    }

    /// `person`'s tokens for `provider`, opened, with the item's version.
    pub async fn get(
        &self,
        person: &PersonKey,
        provider: &str,
    ) -> Result<Option<StoredConnection>, ConnectionError> {
        let key = connection_key(person, provider);
        let Some((data, version)) = self.read(&key).await? else {
            return Ok(None);
        };
        let plain = self
            .open(&data.sealed, &connection_context(person, provider))
            .await?;
        let sealed: SealedTokens = serde_json::from_slice(&plain)
            .map_err(|_| corrupt(&key, "the opened tokens are not valid"))?;
        Ok(Some(StoredConnection {
            tokens: Tokens {
                access_token: SecretString::from(sealed.access_token),
                refresh_token: sealed.refresh_token.map(SecretString::from),
                expires_at: data.expires_at,
                scopes: data.scopes.clone(),
            },
            summary: Self::summary(&data),
            version,
            refreshing_until: data.refreshing_until,
        }))
    }

    /// Stores `person`'s tokens for `provider` when `condition` holds
    /// (else [`ConnectionError::Changed`]); the new version.
    pub async fn put(
        &self,
        person: &PersonKey,
        provider: &str,
        tokens: &Tokens,
        condition: PutCondition,
        now: Instant,
    ) -> Result<u64, ConnectionError> {
        // `#` separates key parts: ("a#b", "c") and ("a", "b#c") would
        // share a partition.
        for name in [&person.workspace, &person.user, &provider.to_owned()] {
            if name.is_empty() || name.contains('#') {
                return Err(ConnectionError::InvalidName(name.clone()));
            }
        }
        let plain = serde_json::to_vec(&SealedTokens {
            access_token: tokens.access_token.expose_secret().to_owned(),
            refresh_token: tokens
                .refresh_token
                .as_ref()
                .map(|t| t.expose_secret().to_owned()),
        })
        .map_err(|e| corrupt(&connection_key(person, provider), e))?;
        let sealed = self
            .seal(&plain, &connection_context(person, provider))
            .await?;
        let mut data = ConnectionData {
            person: person.clone(),
            provider: provider.to_owned(),
            sealed,
            connected_at: now,
            refreshed_at: None,
            expires_at: tokens.expires_at,
            scopes: tokens.scopes.clone(),
            refreshing_until: None,
        };
        let key = connection_key(person, provider);
        match condition {
            PutCondition::Absent => {
                self.write(&data, 1, Condition::NotExists).await?;
                Ok(1)
            }
            PutCondition::Version(v) => {
                let Some((old, stored)) = self.read(&key).await? else {
                    return Err(ConnectionError::Changed);
                };
                if stored != v {
                    return Err(ConnectionError::Changed);
                }
                data.connected_at = old.connected_at;
                data.refreshed_at = Some(now);
                self.write(&data, v + 1, Condition::VersionIs(v)).await?;
                Ok(v + 1)
            }
            PutCondition::Replace => {
                for _ in 0..MAX_RETRIES {
                    let (version, cond) = match self.table().get(&key).await? {
                        None => (1, Condition::NotExists),
                        Some(i) => (i.version + 1, Condition::VersionIs(i.version)),
                    };
                    match self.write(&data, version, cond).await {
                        Ok(()) => return Ok(version),
                        Err(ConnectionError::Changed) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(ConnectionError::Changed)
            }
        }
    }

    /// Forgets `person`'s connection to `provider` (revoke, `disconnect`,
    /// a rejected token that cannot be refreshed). `false` when there was
    /// none.
    pub async fn delete(
        &self,
        person: &PersonKey,
        provider: &str,
    ) -> Result<bool, ConnectionError> {
        let key = connection_key(person, provider);
        for _ in 0..MAX_RETRIES {
            let Some(item) = self.table().get(&key).await? else {
                return Ok(false);
            };
            let write = Write::Delete {
                key: key.clone(),
                condition: Condition::VersionIs(item.version),
            };
            match self.table().transact(vec![write]).await {
                Ok(()) => return Ok(true),
                Err(TableError::ConditionFailed { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ConnectionError::Changed)
    }

    /// Takes the refresh lease of `person`'s connection to `provider` when
    /// it is still at `version` and no other refresher holds an unexpired
    /// lease: `Some(new version)` (pass it to [`PutCondition::Version`]
    /// with the refreshed tokens), or `None` when another refresher runs or
    /// ran (re-read after a short wait). A lease not released (its holder
    /// died) may be taken again after `lease_for`.
    pub async fn begin_refresh(
        &self,
        person: &PersonKey,
        provider: &str,
        version: u64,
        now: Instant,
        lease_for: Duration,
    ) -> Result<Option<u64>, ConnectionError> {
        let key = connection_key(person, provider);
        let Some((mut data, stored)) = self.read(&key).await? else {
            return Ok(None);
        };
        if stored != version || data.refreshing_until.is_some_and(|until| until > now) {
            return Ok(None);
        }
        data.refreshing_until = Some(now.saturating_add(lease_for));
        match self
            .write(&data, version + 1, Condition::VersionIs(version))
            .await
        {
            Ok(()) => Ok(Some(version + 1)),
            Err(ConnectionError::Changed) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `person`'s connections, by provider name.
    pub async fn list_for(
        &self,
        person: &PersonKey,
    ) -> Result<Vec<ConnectionSummary>, ConnectionError> {
        let pk = connection_key(person, "").pk;
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let items = self
                .table()
                .query(&pk, "", after.as_deref(), MAX_PAGE)
                .await?;
            let full = items.len() == MAX_PAGE;
            for item in &items {
                let data: ConnectionData =
                    serde_json::from_str(&item.data).map_err(|e| corrupt(&item.key, e))?;
                out.push(Self::summary(&data));
            }
            match items.last() {
                Some(last) if full => after = Some(last.key.sk.clone()),
                _ => return Ok(out),
            }
        }
    }

    /// Everyone's connections, for operators: a page of at most `limit`
    /// (capped at [`MAX_PAGE`]) in descending `{person}#{provider}` order,
    /// starting after the position `after` a previous page returned.
    pub async fn list_all(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<ConnectionPage, ConnectionError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let mut entries = Vec::new();
        for shard in 0..LISTING_SHARDS {
            let partition = listing_partition(shard);
            entries.extend(self.table().query_listing(&partition, after, limit).await?);
        }
        entries.sort_by(|a, b| b.sort.cmp(&a.sort));
        let more = entries.len() > limit;
        entries.truncate(limit);
        let keys: Vec<Key> = entries.iter().map(|e| e.key.clone()).collect();
        let items = self.table().get_many(&keys).await?;
        let mut connections = Vec::with_capacity(items.len());
        for item in items.into_iter().flatten() {
            let data: ConnectionData =
                serde_json::from_str(&item.data).map_err(|e| corrupt(&item.key, e))?;
            connections.push(Self::summary(&data));
        }
        let next = if more {
            entries.last().map(|e| e.sort.clone())
        } else {
            None
        };
        Ok(ConnectionPage { connections, next })
    }
}

#[cfg(test)]
mod tests;
