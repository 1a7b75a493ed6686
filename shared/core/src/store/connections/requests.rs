//! Pending Connect links: recorded by the worker when a call needs a
//! connection; at `GET /connect/{state}` the browser is asked to prove it
//! is the link's person's (a [`BrowserCheck`]: Sign in with Slack, or a
//! confirmation page); once it did, the flow is started (PKCE verifier,
//! browser), and claimed once at `GET /oauth/callback` (released again if
//! the code exchange failed). Keyed by the state's hash, so the state
//! itself is never stored.

use super::{corrupt, ConnectRefused, ConnectionError, ConnectionStore, MAX_RETRIES};
use crate::clock::{self, Instant};
use crate::store::table::{Condition, Item, Key, TableError, Write};
use crate::task::connection::ConnectRequest;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Connect request items are kept this long after their link expires, so
/// a late click reads "expired", not "unknown".
const KEPT_AFTER_EXPIRY: Duration = Duration::from_secs(24 * 3600);

/// What `GET /connect/{state}` started: the flow's secrets and binding.
#[derive(Clone, Debug)]
pub struct ConnectFlow {
    /// The PKCE verifier (sealed at rest).
    pub pkce_verifier: SecretString,
    /// A hash of the cookie set in the browser that opened the link: the
    /// callback must come from that browser.
    pub browser: String,
    /// The callback is refused after this (10 minutes after `/connect`).
    pub flow_expires_at: Instant,
}

/// What the browser that opened a Connect link must show before its flow
/// starts: that it is the browser that opened it (`browser`, the hash of
/// its cookie) and that its person is the link's (`challenge`: Sign in
/// with Slack's nonce, or the hash of the confirmation page's form token).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrowserCheck {
    pub browser: String,
    pub challenge: String,
    #[serde(with = "clock::as_millis")]
    pub expires_at: Instant,
}

/// A connect request as stored, without its secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingConnect {
    pub request: ConnectRequest,
    /// The browser check asked for at `/connect`, until the flow starts.
    pub check: Option<BrowserCheck>,
    /// The browser hash, once `/connect` started the flow.
    pub browser: Option<String>,
    pub flow_expires_at: Option<Instant>,
    /// When the callback claimed it; a claimed request is never used again.
    pub used_at: Option<Instant>,
}

/// What the one successful claim of a request gets.
#[derive(Clone, Debug)]
pub struct ClaimedConnect {
    pub request: ConnectRequest,
    pub pkce_verifier: SecretString,
}

#[derive(Clone, Serialize, Deserialize)]
struct FlowData {
    /// base64 of the sealed verifier.
    pkce_verifier: String,
    browser: String,
    #[serde(with = "clock::as_millis")]
    flow_expires_at: Instant,
}

#[derive(Clone, Serialize, Deserialize)]
struct RequestData {
    request: ConnectRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    flow: Option<FlowData>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    check: Option<BrowserCheck>,
    #[serde(default, with = "clock::as_millis_opt")]
    used_at: Option<Instant>,
}

fn request_key(state_hash: &str) -> Key {
    Key::new(format!("CONNECT#{state_hash}"), "CONNECT")
}

fn verifier_context(state_hash: &str) -> String {
    format!("connect/{state_hash}")
}

impl ConnectionStore {
    async fn read_request(&self, key: &Key) -> Result<Option<(RequestData, u64)>, ConnectionError> {
        self.read_item(key).await
    }

    async fn write_request(
        &self,
        key: Key,
        data: &RequestData,
        version: u64,
        condition: Condition,
    ) -> Result<(), ConnectionError> {
        let body = serde_json::to_string(data).map_err(|e| corrupt(&key, e))?;
        let expires_at = data
            .request
            .expires_at
            .saturating_add(KEPT_AFTER_EXPIRY)
            .unix_secs();
        let item = Item {
            key,
            version,
            data: body,
            index: None,
            expires_at: Some(expires_at),
            listing: None,
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

    /// Records a new Connect link under the hash of its state (hex
    /// SHA-256). A hash taken already is [`ConnectionError::Changed`].
    pub async fn record_connect_request(
        &self,
        state_hash: &str,
        request: &ConnectRequest,
    ) -> Result<(), ConnectionError> {
        let data = RequestData {
            request: request.clone(),
            flow: None,
            check: None,
            used_at: None,
        };
        self.write_request(request_key(state_hash), &data, 1, Condition::NotExists)
            .await
    }

    /// The connect request whose state hashes to `state_hash`.
    pub async fn connect_request(
        &self,
        state_hash: &str,
    ) -> Result<Option<PendingConnect>, ConnectionError> {
        let Some((data, _)) = self.read_request(&request_key(state_hash)).await? else {
            return Ok(None);
        };
        Ok(Some(PendingConnect {
            check: data.check.clone(),
            browser: data.flow.as_ref().map(|f| f.browser.clone()),
            flow_expires_at: data.flow.as_ref().map(|f| f.flow_expires_at),
            request: data.request,
            used_at: data.used_at,
        }))
    }

    /// Reads the request under `key`, lets `change` edit it (`None` when
    /// there is none) and writes it back under its version, again from a
    /// fresh read when another writer got there first. `change` answers
    /// `false` to leave it unwritten, an error to refuse; the request as
    /// written, if it was.
    async fn change_request(
        &self,
        key: &Key,
        mut change: impl FnMut(Option<&mut RequestData>) -> Result<bool, ConnectionError>,
    ) -> Result<Option<RequestData>, ConnectionError> {
        for _ in 0..MAX_RETRIES {
            let Some((mut data, version)) = self.read_request(key).await? else {
                change(None)?;
                return Ok(None);
            };
            if !change(Some(&mut data))? {
                return Ok(None);
            }
            match self
                .write_request(
                    key.clone(),
                    &data,
                    version + 1,
                    Condition::VersionIs(version),
                )
                .await
            {
                Ok(()) => return Ok(Some(data)),
                Err(ConnectionError::Changed) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ConnectionError::Changed)
    }

    /// `GET /connect/{state}`: binds the request to `flow` (a second visit
    /// before the callback starts the flow again, replacing the first
    /// one's verifier and browser). Refused when unknown, used or expired
    /// at `now`; the request on success.
    pub async fn start_connect_flow(
        &self,
        state_hash: &str,
        flow: ConnectFlow,
        now: Instant,
    ) -> Result<ConnectRequest, ConnectionError> {
        let sealed = self
            .seal(
                flow.pkce_verifier.expose_secret().as_bytes(),
                &verifier_context(state_hash),
            )
            .await?;
        let written = self
            .change_request(&request_key(state_hash), |data| {
                let data = open_at(data, now)?;
                data.flow = Some(FlowData {
                    pkce_verifier: sealed.clone(),
                    browser: flow.browser.clone(),
                    flow_expires_at: flow.flow_expires_at,
                });
                // The check is passed: it is not passed twice.
                data.check = None;
                Ok(true)
            })
            .await?;
        written
            .map(|d| d.request)
            .ok_or_else(|| ConnectRefused::Unknown.into())
    }

    /// `GET /connect/{state}`: asks the browser to prove it is the link's
    /// person's before the flow starts (a second visit replaces the
    /// check; a flow started already is left as it is). Refused when
    /// unknown, used or expired at `now`; the request on success.
    pub async fn begin_browser_check(
        &self,
        state_hash: &str,
        check: BrowserCheck,
        now: Instant,
    ) -> Result<ConnectRequest, ConnectionError> {
        let written = self
            .change_request(&request_key(state_hash), |data| {
                open_at(data, now)?.check = Some(check.clone());
                Ok(true)
            })
            .await?;
        written
            .map(|d| d.request)
            .ok_or_else(|| ConnectRefused::Unknown.into())
    }

    /// After a claim whose code exchange failed: the link is usable again
    /// until it expires (its flow forgotten: the person opens the link
    /// again). A request not claimed is left as it is.
    pub async fn release_connect(&self, state_hash: &str) -> Result<(), ConnectionError> {
        self.change_request(&request_key(state_hash), |data| {
            let Some(data) = data.filter(|d| d.used_at.is_some()) else {
                return Ok(false);
            };
            data.used_at = None;
            data.flow = None;
            data.check = None;
            Ok(true)
        })
        .await
        .map(|_| ())
    }

    /// `GET /oauth/callback`: claims the request once, from the browser
    /// that started its flow (`browser`, the same hash), before the flow
    /// and the link expire. Refused (and nothing changed) otherwise; a
    /// second claim is [`ConnectRefused::Used`].
    pub async fn claim_connect(
        &self,
        state_hash: &str,
        browser: &str,
        now: Instant,
    ) -> Result<ClaimedConnect, ConnectionError> {
        let key = request_key(state_hash);
        let written = self
            .change_request(&key, |data| {
                let data = data.ok_or(ConnectRefused::Unknown)?;
                if data.used_at.is_some() {
                    return Err(ConnectRefused::Used.into());
                }
                let flow = data.flow.as_ref().ok_or(ConnectRefused::Foreign)?;
                if !crate::token::constant_time_eq(flow.browser.as_bytes(), browser.as_bytes()) {
                    return Err(ConnectRefused::Foreign.into());
                }
                if now >= flow.flow_expires_at || now >= data.request.expires_at {
                    return Err(ConnectRefused::Expired.into());
                }
                data.used_at = Some(now);
                Ok(true)
            })
            .await?;
        let data = written.ok_or(ConnectRefused::Unknown)?;
        let flow = data.flow.ok_or(ConnectRefused::Foreign)?;
        let verifier = self
            .open(&flow.pkce_verifier, &verifier_context(state_hash))
            .await?;
        let verifier = String::from_utf8(verifier)
            .map_err(|_| corrupt(&key, "the opened verifier is not text"))?;
        Ok(ClaimedConnect {
            request: data.request,
            pkce_verifier: SecretString::from(verifier),
        })
    }
}

/// A request a browser may still go on with at `now`: known, unused and
/// unexpired.
fn open_at(
    data: Option<&mut RequestData>,
    now: Instant,
) -> Result<&mut RequestData, ConnectionError> {
    let data = data.ok_or(ConnectRefused::Unknown)?;
    if data.used_at.is_some() {
        return Err(ConnectRefused::Used.into());
    }
    if now >= data.request.expires_at {
        return Err(ConnectRefused::Expired.into());
    }
    Ok(data)
}
