//! The HTTP client of the token endpoint: the workspace's reqwest, no
//! redirects (a token request is never sent on to another host), bounded
//! response bodies, and errors that never carry a body (it may hold a
//! token).

use futures::StreamExt;
use oauth2::{HttpRequest, HttpResponse};
use std::time::Duration;

/// The largest token or metadata response read.
pub(crate) const MAX_BODY_BYTES: usize = 256 * 1024;

/// How long one OAuth HTTP request may take.
pub(crate) const HTTP_TIMEOUT: Duration = Duration::from_secs(20);

/// Why an OAuth HTTP request failed; never holds a body.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    #[error("{0}")]
    Send(String),
    #[error("the response is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
}

/// The client for token requests.
pub(crate) fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the OAuth HTTP client: {e}"))
}

/// Reads a response's body, refusing more than [`MAX_BODY_BYTES`].
pub(crate) async fn bounded_body(response: reqwest::Response) -> Result<Vec<u8>, HttpError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
    {
        return Err(HttpError::TooLarge);
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| HttpError::Send(e.without_url().to_string()))?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(HttpError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Sends one request of the oauth2 crate.
pub(crate) async fn send(
    http: &reqwest::Client,
    request: HttpRequest,
) -> Result<HttpResponse, HttpError> {
    let (parts, body) = request.into_parts();
    let response = http
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await
        .map_err(|e| HttpError::Send(e.without_url().to_string()))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = bounded_body(response).await?;
    let mut out = HttpResponse::new(body);
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    Ok(out)
}

/// The oauth2 crate's HTTP client over [`send`]. A named type (not a
/// closure) so the token request's future is `Send` for every lifetime,
/// as async_trait's boxed futures need.
pub(crate) struct OAuthHttp(pub(crate) reqwest::Client);

impl<'c> oauth2::AsyncHttpClient<'c> for OAuthHttp {
    type Error = HttpError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<HttpResponse, HttpError>> + Send + 'c>,
    >;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(send(&self.0, request))
    }
}
