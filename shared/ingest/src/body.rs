//! What a route answers with: a whole body, or a stream of chunks sent as
//! they are made (server-sent events), and what the caller can deliver.
//!
//! API Gateway's buffered integration can only take a whole body, so
//! [`Ingest::handle`](crate::Ingest::handle) collects a stream;
//! `baton dev` and a streaming Lambda function URL pass it on as it comes
//! ([`Ingest::serve`](crate::Ingest::serve)).

use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, StreamExt};
use std::fmt;
use std::time::Duration;

/// A response body.
pub enum Body {
    /// All of it, at once.
    Full(Bytes),
    /// Chunks, each sent as soon as it is made. The stream ends itself
    /// (by [`Delivery::within`] at the latest).
    Stream(BoxStream<'static, Bytes>),
}

impl Body {
    /// The whole body: a stream read to its end.
    pub async fn collect(self) -> Bytes {
        match self {
            Body::Full(b) => b,
            Body::Stream(mut s) => {
                let mut all = BytesMut::new();
                while let Some(chunk) = s.next().await {
                    all.extend_from_slice(&chunk);
                }
                all.freeze()
            }
        }
    }

    /// Whether this is a stream.
    pub fn is_stream(&self) -> bool {
        matches!(self, Body::Stream(_))
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Self {
        Body::Full(b)
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Full(b) => write!(f, "Body::Full({} bytes)", b.len()),
            Body::Stream(_) => f.write_str("Body::Stream"),
        }
    }
}

/// A whole-body response as a [`Body`] one.
pub(crate) fn full(r: http::Response<Bytes>) -> http::Response<Body> {
    r.map(Body::Full)
}

/// What the caller of [`Ingest::serve`](crate::Ingest::serve) can deliver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Whether chunks reach the client as they are made (`baton dev`, a
    /// streaming function URL), or only once the body is whole (API
    /// Gateway's buffered integration).
    pub streaming: bool,
    /// How long a streamed answer may stay open: the caller's own limit.
    /// A stream ends by then, and its client reconnects.
    pub within: Duration,
}

impl Delivery {
    /// API Gateway's HTTP API gives up on an integration after 30 s; a
    /// buffered stream ends well before, so its client has the answer.
    pub const BUFFERED: Delivery = Delivery {
        streaming: false,
        within: Duration::from_secs(25),
    };

    /// A caller that streams chunks as they come, for at most `within`.
    pub fn streaming(within: Duration) -> Self {
        Delivery {
            streaming: true,
            within,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stream_is_collected_whole_and_in_order() {
        let chunks = vec![Bytes::from("a"), Bytes::from("bc"), Bytes::from("")];
        let body = Body::Stream(futures::stream::iter(chunks).boxed());
        assert!(body.is_stream());
        assert_eq!(body.collect().await, Bytes::from("abc"));
        assert_eq!(
            Body::from(Bytes::from("x")).collect().await,
            Bytes::from("x")
        );
    }
}
