//! [`WorkQueue`] on SQLite with SQS standard-queue semantics: delays,
//! visibility timeouts, a fresh receipt per delivery, long polling and a
//! dead-letter table in place of a redrive queue.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::queue::MAX_DELAY;
use baton_core::{Delivery, Millis, QueueError, WorkQueue};
use rusqlite::{params, Connection, TransactionBehavior};
use tokio::time::Instant;

use crate::db::{limit_to_sql, Database, DbError, Durability, OpenError};

/// The largest message body, in bytes (SQS's classic limit).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// A long poll re-checks the database at least this often even when
/// nothing woke it, so messages sent by another process (another handle on
/// the same file) are still picked up.
const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Queue settings (the SQS queue attributes and redrive policy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// How long a received message stays invisible before it is delivered
    /// again, unless deleted or extended (at least 1 ms).
    pub visibility_timeout: Duration,
    /// A message already received this many times is moved to the
    /// dead-letter table instead of being delivered again (SQS's
    /// `maxReceiveCount`). 0 turns dead-lettering off.
    pub max_receive_count: u32,
}

impl Default for QueueConfig {
    /// SQS's defaults: 30 s visibility, and the 5 receives Baton's template
    /// sets on its redrive policy.
    fn default() -> Self {
        QueueConfig {
            visibility_timeout: Duration::from_secs(30),
            max_receive_count: 5,
        }
    }
}

/// A message that was received too often and will not be delivered again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    pub message_id: String,
    pub body: String,
    /// How many times it was delivered.
    pub receive_count: u32,
}

/// The embedded work queue, stored in the shared database
/// (`queue_messages`, `queue_dead_letters`). Visibility deadlines are
/// wall-clock milliseconds, so after a restart an in-flight message becomes
/// visible when its deadline passes, not earlier (and is never lost).
#[derive(Debug)]
pub struct EmbeddedQueue {
    db: Database,
    config: QueueConfig,
}

fn queue_err(e: DbError) -> QueueError {
    QueueError::Unavailable(e.to_string())
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn count_to_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// One pass of `receive`: what was delivered, and when to look again.
struct Pass {
    deliveries: Vec<Delivery>,
    dead_lettered: usize,
    /// The earliest `visible_at` of the messages left, when nothing was
    /// delivered.
    next_visible_at: Option<Millis>,
}

fn receive_now(
    conn: &mut Connection,
    now: Millis,
    max: usize,
    config: &QueueConfig,
) -> Result<Pass, DbError> {
    // At least 1 ms, so a message just delivered is never picked up again
    // by the loop below (it selects `visible_at <= now`).
    let invisible_until = now.saturating_add(duration_ms(config.visibility_timeout).max(1));
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut deliveries = Vec::new();
    let mut dead_lettered = 0;
    {
        let mut select = tx.prepare_cached(
            "SELECT seq, message_id, body, receive_count, sent_at FROM queue_messages \
             WHERE visible_at <= ?1 ORDER BY visible_at, seq LIMIT ?2",
        )?;
        let mut deliver = tx.prepare_cached(
            "UPDATE queue_messages SET receive_count = receive_count + 1, receipt = ?2, \
             visible_at = ?3 WHERE seq = ?1",
        )?;
        let mut bury = tx.prepare_cached(
            "INSERT OR REPLACE INTO queue_dead_letters \
             (message_id, body, receive_count, sent_at, dead_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        let mut remove = tx.prepare_cached("DELETE FROM queue_messages WHERE seq = ?1")?;
        // Repeats only when dead-lettering left room in the batch.
        while deliveries.len() < max {
            let want = max - deliveries.len();
            let rows = select
                .query_map(params![now, limit_to_sql(want)], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            if rows.is_empty() {
                break;
            }
            for (seq, message_id, body, count, sent_at) in rows {
                let count = count_to_u32(count);
                if config.max_receive_count > 0 && count >= config.max_receive_count {
                    tracing::warn!(
                        %message_id,
                        receive_count = count,
                        "queue message received too often; moved to dead letters"
                    );
                    bury.execute(params![message_id, body, count, sent_at, now])?;
                    remove.execute(params![seq])?;
                    dead_lettered += 1;
                    continue;
                }
                let receipt = uuid::Uuid::new_v4().simple().to_string();
                deliver.execute(params![seq, receipt, invisible_until])?;
                deliveries.push(Delivery {
                    message_id,
                    receipt,
                    body,
                    receive_count: count.saturating_add(1),
                });
            }
        }
    }
    let next_visible_at = if deliveries.is_empty() {
        tx.query_row("SELECT MIN(visible_at) FROM queue_messages", [], |r| {
            r.get::<_, Option<i64>>(0)
        })?
    } else {
        None
    };
    tx.commit()?;
    Ok(Pass {
        deliveries,
        dead_lettered,
        next_visible_at,
    })
}

fn read_dead_letters(conn: &Connection) -> Result<Vec<DeadLetter>, DbError> {
    let mut stmt = conn.prepare_cached(
        "SELECT message_id, body, receive_count FROM queue_dead_letters ORDER BY seq",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(DeadLetter {
            message_id: r.get(0)?,
            body: r.get(1)?,
            receive_count: count_to_u32(r.get(2)?),
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

impl EmbeddedQueue {
    /// Opens the queue in `{data_dir}/baton.sqlite3` with
    /// [`Durability::Process`]. Blocking; call it at startup.
    pub fn open(data_dir: impl AsRef<Path>, config: QueueConfig) -> Result<Self, OpenError> {
        Ok(Self::with_database(
            Database::open(data_dir, Durability::Process)?,
            config,
        ))
    }

    /// The queue on an already open database (shared with the table).
    /// Use one queue handle per database: long polls are woken by sends on
    /// the same [`Database`] handle (others are seen within a couple of
    /// seconds).
    pub fn with_database(db: Database, config: QueueConfig) -> Self {
        EmbeddedQueue { db, config }
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Messages in the queue: visible, delayed and in flight (not dead
    /// letters).
    pub async fn len(&self) -> Result<usize, QueueError> {
        self.count("SELECT COUNT(*) FROM queue_messages", None)
            .await
    }

    /// Whether [`len`](Self::len) is 0.
    pub async fn is_empty(&self) -> Result<bool, QueueError> {
        Ok(self.len().await? == 0)
    }

    /// Messages received and not yet deleted whose visibility timeout has
    /// not passed.
    pub async fn in_flight(&self) -> Result<usize, QueueError> {
        self.count(
            "SELECT COUNT(*) FROM queue_messages WHERE receipt IS NOT NULL AND visible_at > ?1",
            Some(baton_core::now_ms()),
        )
        .await
    }

    async fn count(&self, sql: &'static str, now: Option<Millis>) -> Result<usize, QueueError> {
        self.db
            .call(move |conn| {
                let mut stmt = conn.prepare_cached(sql)?;
                let n: i64 = match now {
                    Some(now) => stmt.query_row(params![now], |r| r.get(0))?,
                    None => stmt.query_row([], |r| r.get(0))?,
                };
                Ok(usize::try_from(n).unwrap_or(0))
            })
            .await
            .map_err(queue_err)
    }

    /// The dead letters, oldest first, left in place.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        self.db
            .call(|conn| read_dead_letters(conn))
            .await
            .map_err(queue_err)
    }

    /// Removes the dead letter `message_id` once it was handled (the task
    /// marked failed, the user told or given up on), as a DLQ consumer
    /// deletes what it handled; `Ok(false)` when it was already gone.
    pub async fn delete_dead_letter(&self, message_id: &str) -> Result<bool, QueueError> {
        let id = message_id.to_owned();
        self.db
            .call(move |conn| {
                Ok(conn.execute(
                    "DELETE FROM queue_dead_letters WHERE message_id = ?1",
                    [&id],
                )? > 0)
            })
            .await
            .map_err(queue_err)
    }

    /// Deletes the message if `receipt` is from its latest delivery;
    /// `Ok(false)` when the receipt is stale (the message was delivered
    /// again since, or is already gone) and nothing was deleted.
    pub async fn delete_checked(&self, receipt: &str) -> Result<bool, QueueError> {
        let receipt = receipt.to_owned();
        self.db
            .call(move |conn| {
                let n = conn
                    .prepare_cached("DELETE FROM queue_messages WHERE receipt = ?1")?
                    .execute(params![receipt])?;
                Ok(n > 0)
            })
            .await
            .map_err(queue_err)
    }

    /// Makes the message invisible for `visibility` from now if `receipt`
    /// is from its latest delivery; `Ok(false)` when the receipt is stale.
    /// A receipt stays current until the message is delivered again, even
    /// after its visibility timeout passed. `Duration::ZERO` hands the
    /// message back at once.
    pub async fn extend_checked(
        &self,
        receipt: &str,
        visibility: Duration,
    ) -> Result<bool, QueueError> {
        let receipt = receipt.to_owned();
        let until = baton_core::now_ms().saturating_add(duration_ms(visibility));
        let changed = self
            .db
            .call(move |conn| {
                let n = conn
                    .prepare_cached("UPDATE queue_messages SET visible_at = ?2 WHERE receipt = ?1")?
                    .execute(params![receipt, until])?;
                Ok(n > 0)
            })
            .await
            .map_err(queue_err)?;
        // A shorter (or zero) visibility may have made it receivable.
        self.db.queue_notify().notify_waiters();
        Ok(changed)
    }
}

#[async_trait]
impl WorkQueue for EmbeddedQueue {
    async fn send(&self, body: &str, delay: Duration) -> Result<(), QueueError> {
        if body.len() > MAX_BODY_BYTES {
            return Err(QueueError::TooLarge(body.len()));
        }
        if delay > MAX_DELAY {
            return Err(QueueError::InvalidDelay(delay));
        }
        let body = body.to_owned();
        let message_id = uuid::Uuid::new_v4().hyphenated().to_string();
        let now = baton_core::now_ms();
        let visible_at = now.saturating_add(duration_ms(delay));
        self.db
            .call(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO queue_messages (message_id, body, sent_at, visible_at) \
                     VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![message_id, body, now, visible_at])?;
                Ok(())
            })
            .await
            .map_err(queue_err)?;
        // Wakes long polls: to take the message, or (when delayed) to
        // re-plan their sleep around its visibility.
        self.db.queue_notify().notify_waiters();
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        // `Instant + Duration::MAX` would overflow; a year is forever here.
        let deadline = Instant::now() + wait.min(Duration::from_secs(365 * 24 * 3600));
        loop {
            // Registered before looking, so a send between the look and the
            // sleep still wakes us.
            let notified = self.db.queue_notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            let config = self.config.clone();
            let now = baton_core::now_ms();
            let pass = self
                .db
                .call(move |conn| receive_now(conn, now, max, &config))
                .await
                .map_err(queue_err)?;
            if pass.dead_lettered > 0 {
                tracing::debug!(count = pass.dead_lettered, "dead-lettered queue messages");
            }
            if !pass.deliveries.is_empty() {
                return Ok(pass.deliveries);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            let mut nap = left.min(POLL_INTERVAL);
            if let Some(at) = pass.next_visible_at {
                let until_visible = at.saturating_sub(baton_core::now_ms()).max(1);
                nap = nap.min(Duration::from_millis(
                    u64::try_from(until_visible).unwrap_or(u64::MAX),
                ));
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(nap) => {}
            }
        }
    }

    /// Acknowledges a delivery. A stale receipt deletes nothing (the
    /// message was delivered again and belongs to its new receiver).
    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        if !self.delete_checked(receipt).await? {
            tracing::debug!("queue delete with a stale receipt ignored");
        }
        Ok(())
    }

    /// Changes the visibility of a delivery. A stale receipt changes
    /// nothing.
    async fn extend(&self, receipt: &str, visibility: Duration) -> Result<(), QueueError> {
        if !self.extend_checked(receipt, visibility).await? {
            tracing::warn!("queue visibility extension with a stale receipt ignored");
        }
        Ok(())
    }
}
