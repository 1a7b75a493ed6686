//! SDK clients built at their first use.

use std::fmt;
use std::sync::{Arc, OnceLock};

/// An SDK client built the first time it is needed, then kept. Building
/// one (its configuration, runtime plugins and endpoint resolver) is work
/// a fresh Lambda process does before its first response; the ingest's
/// first request needs DynamoDB and SQS only, so its S3 and EventBridge
/// Scheduler clients wait until a request uses them. Cheap to clone (the
/// clones share the client).
pub(crate) struct LazyClient<C>(Arc<Inner<C>>);

struct Inner<C> {
    client: OnceLock<C>,
    make: Box<dyn Fn() -> C + Send + Sync>,
}

impl<C> Clone for LazyClient<C> {
    fn clone(&self) -> Self {
        LazyClient(self.0.clone())
    }
}

impl<C: Clone + Send + Sync + 'static> LazyClient<C> {
    /// A client `make` builds at the first [`LazyClient::get`].
    pub(crate) fn new(make: impl Fn() -> C + Send + Sync + 'static) -> Self {
        LazyClient(Arc::new(Inner {
            client: OnceLock::new(),
            make: Box::new(make),
        }))
    }

    /// A client already built.
    pub(crate) fn ready(client: C) -> Self {
        let built = OnceLock::new();
        let _ = built.set(client.clone());
        LazyClient(Arc::new(Inner {
            client: built,
            make: Box::new(move || client.clone()),
        }))
    }

    /// The client, built now if this is its first use.
    pub(crate) fn get(&self) -> &C {
        self.0.client.get_or_init(|| (self.0.make)())
    }
}

impl<C> fmt::Debug for LazyClient<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyClient")
            .field("built", &self.0.client.get().is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::LazyClient;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn builds_once_at_first_use_and_clones_share_it() {
        let built = Arc::new(AtomicUsize::new(0));
        let counter = built.clone();
        let lazy = LazyClient::new(move || counter.fetch_add(1, Ordering::SeqCst) + 1);
        let other = lazy.clone();
        assert_eq!(built.load(Ordering::SeqCst), 0, "not built before use");
        assert_eq!(*lazy.get(), 1);
        assert_eq!(*other.get(), 1);
        assert_eq!(built.load(Ordering::SeqCst), 1);
        assert_eq!(*LazyClient::ready(7).get(), 7);
    }
}
