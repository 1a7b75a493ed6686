//! [`Table`] on a single DynamoDB table.
//!
//! Attribute layout (see [`crate::bootstrap`] for the table definition):
//!
//! | attribute | type | meaning |
//! | --- | --- | --- |
//! | `pk` | S | partition key ([`Key::pk`]) |
//! | `sk` | S | sort key ([`Key::sk`]) |
//! | `v` | N | [`Item::version`] |
//! | `data` | S | [`Item::data`] (JSON) |
//! | `gsi1pk` | S | [`Item::index`], only when `Some` (sparse, keys-only index `gsi2`) |
//! | `gsi3pk`, `gsi3sk` | S | [`Item::listing`], only when `Some` (sparse, keys-only index `gsi3`) |
//! | `ttl` | N | [`Item::expires_at`], only when `Some` (DynamoDB TTL) |

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, KeysAndAttributes, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use baton_core::table::validate;
use baton_core::table::{ListingEntry, ListingKey};
use baton_core::{Condition, Item, Key, Table, TableError, Write};
use std::collections::HashMap;

/// The sparse global secondary index [`Table::query_index`] reads: hash
/// key `gsi1pk`, range key `pk`, keys only, so a write that keeps an item's
/// index value costs the index nothing.
pub const GSI_KEYS: &str = "gsi2";
/// The index of releases before 0.2 (same keys, every attribute
/// projected): no longer read; kept by the template while a deployment
/// upgrades (docs/scale.md, "Upgrading"), then dropped.
pub const GSI1_LEGACY: &str = "gsi1";
/// The sorted listing index [`Table::query_listing`] reads: hash key
/// `gsi3pk`, range key `gsi3sk`, keys only.
pub const GSI_LISTING: &str = "gsi3";
/// Keys per `BatchGetItem` request (DynamoDB's limit).
const BATCH_GET_KEYS: usize = 100;
/// How often unprocessed keys of a batch read are asked for again.
const BATCH_GET_TRIES: u32 = 8;
/// Partition key attribute.
pub const ATTR_PK: &str = "pk";
/// Sort key attribute.
pub const ATTR_SK: &str = "sk";
/// Version attribute.
pub const ATTR_VERSION: &str = "v";
/// JSON body attribute.
pub const ATTR_DATA: &str = "data";
/// Sparse index key attribute.
pub const ATTR_GSI1PK: &str = "gsi1pk";
/// Listing index partition key attribute.
pub const ATTR_GSI3PK: &str = "gsi3pk";
/// Listing index sort key attribute.
pub const ATTR_GSI3SK: &str = "gsi3sk";
/// TTL attribute (seconds since the epoch).
pub const ATTR_TTL: &str = "ttl";

pub use baton_core::table::MAX_TRANSACTION_WRITES;

const COND_NOT_EXISTS: &str = "attribute_not_exists(pk)";
const COND_VERSION_IS: &str = "v = :v";

/// A [`Table`] backed by one DynamoDB table. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DynamoTable {
    client: Client,
    table_name: String,
    /// Upper bound on items per Query page; DynamoDB also stops a page at 1 MB.
    page_size: i32,
}

impl DynamoTable {
    /// Adapter for the table `table_name` (which must have the layout that
    /// [`crate::bootstrap::bootstrap`] creates).
    pub fn new(client: Client, table_name: impl Into<String>) -> Self {
        DynamoTable {
            client,
            table_name: table_name.into(),
            page_size: 1000,
        }
    }

    /// Caps the number of items fetched per Query page (at least 1). Mostly
    /// for tests that want to exercise pagination with few items.
    pub fn with_page_size(mut self, page_size: usize) -> Self {
        self.page_size = i32::try_from(page_size.max(1)).unwrap_or(i32::MAX);
        self
    }

    /// The DynamoDB table name.
    pub fn table_name(&self) -> &str {
        &self.table_name
    }

    /// Runs one Query (following `LastEvaluatedKey`) and collects what
    /// `map` keeps of each raw item, up to `limit`.
    async fn run_query<T>(
        &self,
        spec: QuerySpec,
        limit: usize,
        map: impl Fn(&HashMap<String, AttributeValue>) -> Result<Option<T>, TableError>,
    ) -> Result<Vec<T>, TableError> {
        let mut out = Vec::new();
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            // Ask for what is still missing, plus slack for the few items the
            // client-side filter may drop (bound items of a BETWEEN).
            let want = limit.saturating_sub(out.len()).saturating_add(2);
            let page_limit = i32::try_from(want).unwrap_or(i32::MAX).min(self.page_size);
            let mut req = self
                .client
                .query()
                .table_name(&self.table_name)
                .key_condition_expression(&spec.key_condition)
                .set_expression_attribute_values(Some(spec.values.clone()))
                .limit(page_limit)
                .set_exclusive_start_key(start.take());
            if spec.descending {
                req = req.scan_index_forward(false);
            }
            match &spec.index {
                Some(index) => req = req.index_name(index),
                // Strongly consistent: the task protocol reads its own writes.
                None => req = req.consistent_read(true),
            }
            let resp = req.send().await.map_err(|e| unavailable("Query", e))?;
            for raw in resp.items() {
                if let Some(kept) = map(raw)? {
                    out.push(kept);
                    if out.len() >= limit {
                        return Ok(out);
                    }
                }
            }
            match resp.last_evaluated_key() {
                Some(lek) if !lek.is_empty() => start = Some(lek.clone()),
                _ => return Ok(out),
            }
        }
    }

    /// One `BatchGetItem` (strongly consistent) of at most
    /// [`BATCH_GET_KEYS`] keys, asking again for the keys DynamoDB leaves
    /// unprocessed (throttling) with a short backoff.
    async fn batch_get(&self, keys: &[Key]) -> Result<Vec<Item>, TableError> {
        let mut pending: Vec<HashMap<String, AttributeValue>> =
            keys.iter().map(key_attrs).collect();
        let mut out = Vec::with_capacity(keys.len());
        for attempt in 0..BATCH_GET_TRIES {
            if attempt > 0 {
                let ms = (20u64 << attempt.min(6)).min(1000);
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            }
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .consistent_read(true)
                .build()
                .map_err(|e| TableError::Unavailable(format!("building BatchGetItem: {e}")))?;
            let resp = self
                .client
                .batch_get_item()
                .request_items(&self.table_name, request)
                .send()
                .await
                .map_err(|e| unavailable("BatchGetItem", e))?;
            if let Some(items) = resp.responses().and_then(|r| r.get(&self.table_name)) {
                for raw in items {
                    out.push(decode(raw)?);
                }
            }
            match resp
                .unprocessed_keys()
                .and_then(|u| u.get(&self.table_name))
                .map(|k| k.keys().to_vec())
            {
                Some(left) if !left.is_empty() => pending = left,
                _ => return Ok(out),
            }
        }
        Err(TableError::Unavailable(format!(
            "DynamoDB BatchGetItem: {} keys still unprocessed after {BATCH_GET_TRIES} tries",
            pending.len()
        )))
    }
}

/// A key condition with its placeholder values.
struct QuerySpec {
    index: Option<String>,
    /// Greatest sort key first.
    descending: bool,
    key_condition: String,
    values: HashMap<String, AttributeValue>,
}

/// The smallest string greater than every string starting with `prefix`, or
/// `None` when there is none (empty prefix, or only `char::MAX`s). UTF-8
/// byte order equals code-point order, which is how DynamoDB compares `S`.
fn prefix_successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last as u32 + 1 {
            // Skip the surrogate range, which is not valid in a char.
            0xD800 => Some('\u{E000}'),
            n => char::from_u32(n),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
        // `last` was char::MAX: carry to the left.
    }
    None
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn encode(item: &Item) -> HashMap<String, AttributeValue> {
    let mut m = HashMap::with_capacity(6);
    m.insert(ATTR_PK.to_owned(), s(&item.key.pk));
    m.insert(ATTR_SK.to_owned(), s(&item.key.sk));
    m.insert(
        ATTR_VERSION.to_owned(),
        AttributeValue::N(item.version.to_string()),
    );
    m.insert(ATTR_DATA.to_owned(), s(&item.data));
    if let Some(index) = &item.index {
        m.insert(ATTR_GSI1PK.to_owned(), s(index));
    }
    if let Some(listing) = &item.listing {
        m.insert(ATTR_GSI3PK.to_owned(), s(&listing.partition));
        m.insert(ATTR_GSI3SK.to_owned(), s(&listing.sort));
    }
    if let Some(ttl) = item.expires_at {
        m.insert(ATTR_TTL.to_owned(), AttributeValue::N(ttl.to_string()));
    }
    m
}

fn key_attrs(key: &Key) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (ATTR_PK.to_owned(), s(&key.pk)),
        (ATTR_SK.to_owned(), s(&key.sk)),
    ])
}

fn get_s<'a>(raw: &'a HashMap<String, AttributeValue>, name: &str) -> Result<&'a str, TableError> {
    match raw.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        Some(_) => Err(TableError::Corrupt(format!(
            "attribute {name} is not a string"
        ))),
        None => Err(TableError::Corrupt(format!("attribute {name} missing"))),
    }
}

fn get_n<T: std::str::FromStr>(
    raw: &HashMap<String, AttributeValue>,
    name: &str,
) -> Result<Option<T>, TableError> {
    match raw.get(name) {
        Some(AttributeValue::N(v)) => v
            .parse()
            .map(Some)
            .map_err(|_| TableError::Corrupt(format!("attribute {name} is not an integer: {v}"))),
        Some(_) => Err(TableError::Corrupt(format!(
            "attribute {name} is not a number"
        ))),
        None => Ok(None),
    }
}

fn decode(raw: &HashMap<String, AttributeValue>) -> Result<Item, TableError> {
    let index = match raw.get(ATTR_GSI1PK) {
        None => None,
        Some(_) => Some(get_s(raw, ATTR_GSI1PK)?.to_owned()),
    };
    let listing = match raw.get(ATTR_GSI3PK) {
        None => None,
        Some(_) => Some(ListingKey {
            partition: get_s(raw, ATTR_GSI3PK)?.to_owned(),
            sort: get_s(raw, ATTR_GSI3SK)?.to_owned(),
        }),
    };
    Ok(Item {
        key: Key::new(get_s(raw, ATTR_PK)?, get_s(raw, ATTR_SK)?),
        version: get_n(raw, ATTR_VERSION)?
            .ok_or_else(|| TableError::Corrupt(format!("attribute {ATTR_VERSION} missing")))?,
        data: get_s(raw, ATTR_DATA)?.to_owned(),
        index,
        expires_at: get_n(raw, ATTR_TTL)?,
        listing,
    })
}

/// The condition expression and its values for a write.
fn condition_expr(c: Condition) -> Option<(&'static str, Option<AttributeValue>)> {
    match c {
        Condition::None => None,
        Condition::NotExists => Some((COND_NOT_EXISTS, None)),
        Condition::VersionIs(v) => Some((COND_VERSION_IS, Some(AttributeValue::N(v.to_string())))),
    }
}

fn unavailable<E, R>(op: &str, e: SdkError<E, R>) -> TableError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    TableError::Unavailable(format!("DynamoDB {op}: {}", DisplayErrorContext(&e)))
}

/// Maps the cancellation reasons of a failed TransactWriteItems. A failed
/// condition is reported in preference to a conflict: it reflects stored
/// state, so retrying would not help.
fn cancellation_to_error(codes: &[Option<&str>]) -> TableError {
    if let Some(index) = codes
        .iter()
        .position(|c| *c == Some("ConditionalCheckFailed"))
    {
        return TableError::ConditionFailed { index };
    }
    if codes.contains(&Some("TransactionConflict")) {
        return TableError::Contention;
    }
    let reasons: Vec<&str> = codes.iter().map(|c| c.unwrap_or("?")).collect();
    TableError::Unavailable(format!(
        "DynamoDB TransactWriteItems cancelled: [{}]",
        reasons.join(", ")
    ))
}

impl DynamoTable {
    async fn single_write(&self, write: Write) -> Result<(), TableError> {
        match write {
            Write::Put { item, condition } => {
                let mut req = self
                    .client
                    .put_item()
                    .table_name(&self.table_name)
                    .set_item(Some(encode(&item)));
                if let Some((expr, value)) = condition_expr(condition) {
                    req = req.condition_expression(expr);
                    if let Some(value) = value {
                        req = req.expression_attribute_values(":v", value);
                    }
                }
                match req.send().await {
                    Ok(_) => Ok(()),
                    Err(e) => Err(match e.as_service_error() {
                        Some(se) if se.is_conditional_check_failed_exception() => {
                            TableError::ConditionFailed { index: 0 }
                        }
                        Some(se) if se.is_transaction_conflict_exception() => {
                            TableError::Contention
                        }
                        _ => unavailable("PutItem", e),
                    }),
                }
            }
            Write::Delete { key, condition } => {
                let mut req = self
                    .client
                    .delete_item()
                    .table_name(&self.table_name)
                    .set_key(Some(key_attrs(&key)));
                if let Some((expr, value)) = condition_expr(condition) {
                    req = req.condition_expression(expr);
                    if let Some(value) = value {
                        req = req.expression_attribute_values(":v", value);
                    }
                }
                match req.send().await {
                    Ok(_) => Ok(()),
                    Err(e) => Err(match e.as_service_error() {
                        Some(se) if se.is_conditional_check_failed_exception() => {
                            TableError::ConditionFailed { index: 0 }
                        }
                        Some(se) if se.is_transaction_conflict_exception() => {
                            TableError::Contention
                        }
                        _ => unavailable("DeleteItem", e),
                    }),
                }
            }
        }
    }

    fn transact_item(&self, write: Write) -> Result<TransactWriteItem, TableError> {
        let build_err = |e: aws_sdk_dynamodb::error::BuildError| {
            TableError::Unavailable(format!("building transaction: {e}"))
        };
        Ok(match write {
            Write::Put { item, condition } => {
                let mut put = Put::builder()
                    .table_name(&self.table_name)
                    .set_item(Some(encode(&item)));
                if let Some((expr, value)) = condition_expr(condition) {
                    put = put.condition_expression(expr);
                    if let Some(value) = value {
                        put = put.expression_attribute_values(":v", value);
                    }
                }
                TransactWriteItem::builder()
                    .put(put.build().map_err(build_err)?)
                    .build()
            }
            Write::Delete { key, condition } => {
                let mut del = Delete::builder()
                    .table_name(&self.table_name)
                    .set_key(Some(key_attrs(&key)));
                if let Some((expr, value)) = condition_expr(condition) {
                    del = del.condition_expression(expr);
                    if let Some(value) = value {
                        del = del.expression_attribute_values(":v", value);
                    }
                }
                TransactWriteItem::builder()
                    .delete(del.build().map_err(build_err)?)
                    .build()
            }
        })
    }
}

#[async_trait]
impl Table for DynamoTable {
    async fn get(&self, key: &Key) -> Result<Option<Item>, TableError> {
        let resp = self
            .client
            .get_item()
            .table_name(&self.table_name)
            .set_key(Some(key_attrs(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable("GetItem", e))?;
        resp.item().map(decode).transpose()
    }

    async fn query(
        &self,
        pk: &str,
        sk_prefix: &str,
        after_sk: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Item>, TableError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut values = HashMap::from([(":pk".to_owned(), s(pk))]);
        // DynamoDB takes one sort-key condition, so "starts with the prefix
        // and is after `after_sk`" is expressed as the tightest single range;
        // the client-side check below drops the bounds themselves.
        let after = after_sk.filter(|a| !a.is_empty() && *a >= sk_prefix);
        let key_condition = match after {
            // Nothing with the prefix can be greater than `after`.
            Some(a) if !a.starts_with(sk_prefix) => return Ok(Vec::new()),
            Some(a) => {
                values.insert(":lo".to_owned(), s(a));
                match prefix_successor(sk_prefix) {
                    Some(hi) => {
                        values.insert(":hi".to_owned(), s(&hi));
                        "pk = :pk AND sk BETWEEN :lo AND :hi"
                    }
                    None => "pk = :pk AND sk > :lo",
                }
            }
            // An empty string is not a valid key-condition value.
            None if sk_prefix.is_empty() => "pk = :pk",
            None => {
                values.insert(":prefix".to_owned(), s(sk_prefix));
                "pk = :pk AND begins_with(sk, :prefix)"
            }
        };
        let spec = QuerySpec {
            index: None,
            descending: false,
            key_condition: key_condition.to_owned(),
            values,
        };
        self.run_query(spec, limit, |raw| {
            let item = decode(raw)?;
            let keep = item.key.sk.starts_with(sk_prefix)
                && after_sk.is_none_or(|a| item.key.sk.as_str() > a);
            Ok(keep.then_some(item))
        })
        .await
    }

    async fn query_index(&self, index: &str, limit: usize) -> Result<Vec<Item>, TableError> {
        if limit == 0 || index.is_empty() {
            // An empty name is never stored (not a valid index key value).
            return Ok(Vec::new());
        }
        let spec = QuerySpec {
            index: Some(GSI_KEYS.to_owned()),
            descending: false,
            key_condition: "gsi1pk = :i".to_owned(),
            values: HashMap::from([(":i".to_owned(), s(index))]),
        };
        // The index holds keys; the items come from the table, strongly
        // consistent, and an item that left the index since (a task that
        // ended) is left out.
        let keys = self
            .run_query(spec, limit, |raw| {
                Ok(Some(Key::new(get_s(raw, ATTR_PK)?, get_s(raw, ATTR_SK)?)))
            })
            .await?;
        let items = self.get_many(&keys).await?;
        Ok(items
            .into_iter()
            .flatten()
            .filter(|i| i.index.as_deref() == Some(index))
            .collect())
    }

    async fn query_listing(
        &self,
        partition: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ListingEntry>, TableError> {
        // Empty strings are never stored (not valid index key values).
        if limit == 0 || partition.is_empty() || before == Some("") {
            return Ok(Vec::new());
        }
        let mut values = HashMap::from([(":p".to_owned(), s(partition))]);
        let key_condition = match before {
            Some(b) => {
                values.insert(":b".to_owned(), s(b));
                "gsi3pk = :p AND gsi3sk < :b"
            }
            None => "gsi3pk = :p",
        };
        let spec = QuerySpec {
            index: Some(GSI_LISTING.to_owned()),
            descending: true,
            key_condition: key_condition.to_owned(),
            values,
        };
        // Keys only: the caller reads the items it keeps.
        self.run_query(spec, limit, |raw| {
            Ok(Some(ListingEntry {
                sort: get_s(raw, ATTR_GSI3SK)?.to_owned(),
                key: Key::new(get_s(raw, ATTR_PK)?, get_s(raw, ATTR_SK)?),
            }))
        })
        .await
    }

    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Item>>, TableError> {
        let mut found: HashMap<Key, Item> = HashMap::with_capacity(keys.len());
        let mut unique: Vec<Key> = keys.to_vec();
        unique.sort();
        unique.dedup();
        for chunk in unique.chunks(BATCH_GET_KEYS) {
            for item in self.batch_get(chunk).await? {
                found.insert(item.key.clone(), item);
            }
        }
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), TableError> {
        validate(&writes)?;
        if writes.len() <= 1 {
            return match writes.into_iter().next() {
                Some(w) => self.single_write(w).await,
                None => Ok(()),
            };
        }
        let items = writes
            .into_iter()
            .map(|w| self.transact_item(w))
            .collect::<Result<Vec<_>, _>>()?;
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) => Err(match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(tc)) => {
                    let codes: Vec<Option<&str>> =
                        tc.cancellation_reasons().iter().map(|r| r.code()).collect();
                    cancellation_to_error(&codes)
                }
                Some(TransactWriteItemsError::TransactionInProgressException(_)) => {
                    TableError::Contention
                }
                _ => unavailable("TransactWriteItems", e),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
