//! Retries of transient provider failures.

use async_trait::async_trait;
use baton_core::{Completion, CompletionRequest, DeltaSink, LlmError, LlmProvider};
use rand::Rng;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How a [`Retrying`] provider retries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in all, the first included (1 = no retry).
    pub max_attempts: u32,
    /// The first backoff; it doubles with every retry.
    pub base_delay: Duration,
    /// The longest computed backoff.
    pub max_delay: Duration,
    /// The longest wait honoured when the provider sends `retry-after`.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (1-based) after `error`: the
    /// provider's `retry-after` when it sent one (capped), otherwise
    /// exponential backoff with jitter in `[backoff/2, backoff]`, so that
    /// many workers that failed together do not retry together.
    pub fn delay(&self, retry: u32, error: &LlmError) -> Duration {
        if let Some(wait) = error.retry_after() {
            return wait.min(self.max_retry_after);
        }
        let exp = 2u32.saturating_pow(retry.saturating_sub(1));
        let backoff = self.base_delay.saturating_mul(exp).min(self.max_delay);
        let half = backoff / 2;
        let jitter_ms = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
        let jitter = if jitter_ms == 0 {
            0
        } else {
            rand::rng().random_range(0..=jitter_ms)
        };
        half + Duration::from_millis(jitter)
    }
}

/// Wraps a provider and retries its retryable errors
/// ([`LlmError::is_retryable`]) according to a [`RetryPolicy`].
pub struct Retrying<P> {
    inner: P,
    policy: RetryPolicy,
}

impl<P: LlmProvider> Retrying<P> {
    /// Retries `inner` with `policy`.
    pub fn new(inner: P, policy: RetryPolicy) -> Self {
        Retrying { inner, policy }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

#[async_trait]
impl<P: LlmProvider> LlmProvider for Retrying<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
        let attempts = self.policy.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            match self.inner.complete(request).await {
                Ok(c) => return Ok(c),
                Err(e) if e.is_retryable() && attempt < attempts => {
                    self.wait(attempt, &e).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Retries like `complete`. An attempt that failed after streaming
    /// some text is followed by [`DeltaSink::restart`] before the retry,
    /// so the text shown is always that of one attempt.
    async fn complete_streaming(
        &self,
        request: &CompletionRequest,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, LlmError> {
        let attempts = self.policy.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let tracked = Tracked {
                sink,
                wrote: AtomicBool::new(false),
            };
            match self.inner.complete_streaming(request, &tracked).await {
                Ok(c) => return Ok(c),
                Err(e) if e.is_retryable() && attempt < attempts => {
                    if tracked.wrote.load(Ordering::SeqCst) {
                        // Before the wait: stale text is not shown meanwhile.
                        sink.restart();
                    }
                    self.wait(attempt, &e).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl<P: LlmProvider> Retrying<P> {
    /// Logs the failure of attempt `attempt` and waits before the next.
    async fn wait(&self, attempt: u32, error: &LlmError) {
        let wait = self.policy.delay(attempt, error);
        tracing::warn!(
            provider = self.inner.name(),
            attempt,
            wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            error = %error,
            "LLM call failed; retrying"
        );
        tokio::time::sleep(wait).await;
    }
}

/// A sink that notes whether the attempt wrote anything to it.
struct Tracked<'a> {
    sink: &'a dyn DeltaSink,
    wrote: AtomicBool,
}

impl DeltaSink for Tracked<'_> {
    fn text(&self, delta: &str) {
        if !delta.is_empty() {
            self.wrote.store(true, Ordering::SeqCst);
        }
        self.sink.text(delta);
    }

    fn restart(&self) {
        self.sink.restart();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Mutex;

    /// Answers with a scripted list of results, then succeeds.
    struct Flaky {
        errors: Mutex<Vec<LlmError>>,
        calls: AtomicU32,
        model: &'static str,
    }

    impl Flaky {
        fn new(model: &'static str, errors: Vec<LlmError>) -> Self {
            Flaky {
                errors: Mutex::new(errors),
                calls: AtomicU32::new(0),
                model,
            }
        }
    }

    #[async_trait]
    impl LlmProvider for Flaky {
        fn name(&self) -> &str {
            "flaky"
        }
        async fn complete(&self, request: &CompletionRequest) -> Result<Completion, LlmError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let mut errors = self.errors.lock().unwrap();
            if errors.is_empty() {
                Ok(Completion {
                    content: "ok".into(),
                    model: if request.model.is_empty() {
                        self.model.to_string()
                    } else {
                        request.model.clone()
                    },
                    ..Completion::default()
                })
            } else {
                Err(errors.remove(0))
            }
        }
    }

    /// Streams "par" then fails with each error in turn, then streams
    /// "ok" in two pieces.
    struct Breaking {
        errors: Mutex<Vec<LlmError>>,
    }

    #[async_trait]
    impl LlmProvider for Breaking {
        fn name(&self) -> &str {
            "breaking"
        }
        async fn complete(&self, _: &CompletionRequest) -> Result<Completion, LlmError> {
            unreachable!("only streamed")
        }
        async fn complete_streaming(
            &self,
            _: &CompletionRequest,
            sink: &dyn DeltaSink,
        ) -> Result<Completion, LlmError> {
            let error = {
                let mut errors = self.errors.lock().unwrap();
                (!errors.is_empty()).then(|| errors.remove(0))
            };
            if let Some(e) = error {
                sink.text("par");
                return Err(e);
            }
            sink.text("o");
            sink.text("k");
            Ok(Completion {
                content: "ok".into(),
                ..Completion::default()
            })
        }
    }

    /// Records what a sink is told, restarts as `|`.
    #[derive(Default)]
    struct Log(Mutex<String>);

    impl DeltaSink for Log {
        fn text(&self, delta: &str) {
            self.0.lock().unwrap().push_str(delta);
        }
        fn restart(&self) {
            self.0.lock().unwrap().push('|');
        }
    }

    #[tokio::test]
    async fn a_retry_after_streamed_text_restarts_the_sink() {
        let p = Retrying::new(
            Breaking {
                errors: Mutex::new(vec![LlmError::Transport("reset".into()); 2]),
            },
            fast(),
        );
        let log = Log::default();
        let c = p.complete_streaming(&request(), &log).await.unwrap();
        assert_eq!(c.content, "ok");
        assert_eq!(*log.0.lock().unwrap(), "par|par|ok");

        // A final error is the caller's to handle: no restart after it.
        let bad = LlmError::Decode("garbled".into());
        let p = Retrying::new(
            Breaking {
                errors: Mutex::new(vec![bad.clone()]),
            },
            fast(),
        );
        let log = Log::default();
        assert_eq!(p.complete_streaming(&request(), &log).await, Err(bad));
        assert_eq!(*log.0.lock().unwrap(), "par");
    }

    #[tokio::test]
    async fn a_retry_after_nothing_streamed_does_not_restart() {
        let p = Retrying::new(Flaky::new("m", vec![rate_limited()]), fast());
        let log = Log::default();
        let c = p.complete_streaming(&request(), &log).await.unwrap();
        assert_eq!(c.content, "ok");
        assert_eq!(*log.0.lock().unwrap(), "ok");
        assert_eq!(p.inner().calls.load(Ordering::SeqCst), 2);
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            max_retry_after: Duration::from_millis(5),
        }
    }

    fn request() -> CompletionRequest {
        CompletionRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![],
            tools: vec![],
            max_tokens: 10,
            tool_choice: baton_core::ToolChoice::Auto,
        }
    }

    fn rate_limited() -> LlmError {
        LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(3600)),
        }
    }

    #[tokio::test]
    async fn retries_transient_errors_until_success() {
        let p = Retrying::new(
            Flaky::new(
                "m",
                vec![rate_limited(), LlmError::Transport("reset".into())],
            ),
            fast(),
        );
        // retry-after of an hour is capped to 5 ms by the policy.
        let c = p.complete(&request()).await.unwrap();
        assert_eq!(c.content, "ok");
        assert_eq!(p.inner().calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn gives_up_after_max_attempts() {
        let errors = (0..10).map(|_| rate_limited()).collect();
        let p = Retrying::new(Flaky::new("m", errors), fast());
        assert!(matches!(
            p.complete(&request()).await,
            Err(LlmError::RateLimited { .. })
        ));
        assert_eq!(p.inner().calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn does_not_retry_rejections() {
        let bad = LlmError::Rejected {
            status: 400,
            message: "bad".into(),
        };
        let p = Retrying::new(Flaky::new("m", vec![bad.clone()]), fast());
        assert_eq!(p.complete(&request()).await, Err(bad));
        assert_eq!(p.inner().calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn delay_honours_retry_after_and_caps_backoff() {
        let policy = RetryPolicy::default();
        let e = LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
        };
        assert_eq!(policy.delay(1, &e), Duration::from_secs(7));
        let e = LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(600)),
        };
        assert_eq!(policy.delay(1, &e), Duration::from_secs(60));
        let e = LlmError::Transport("x".into());
        for retry in 1..=3 {
            let full = Duration::from_millis(500) * 2u32.pow(retry - 1);
            let d = policy.delay(retry, &e);
            assert!(d >= full / 2 && d <= full, "retry {retry}: {d:?}");
        }
        let d = policy.delay(30, &e);
        assert!(
            d >= Duration::from_secs(10) && d <= Duration::from_secs(20),
            "{d:?}"
        );
    }
}
