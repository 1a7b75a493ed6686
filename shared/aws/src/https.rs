//! Baton's HTTPS client for the AWS SDK: hyper's HTTP/1.1 client over
//! rustls with the *ring* crypto provider, trusting Mozilla's root
//! certificates compiled into the binary (webpki-roots).
//!
//! The SDK's default client (`default-https-client`) links aws-lc (a C
//! crypto library) and HTTP/2, builds a TLS configuration for every client
//! it serves, and reads and parses the system's CA certificates
//! (`/etc/ssl/certs`) at start-up: a few ms of every Lambda cold start and
//! about 2 MiB of binary (docs/performance-lambda.md). This one builds one
//! TLS configuration from roots that need no parsing, and one connection
//! pool that every SDK client shares.
//!
//! What it trusts: the roots of Mozilla's CA program (the set browsers and
//! most Linux distributions ship). Every AWS endpoint's certificate chains
//! to Amazon Trust Services' roots (Amazon Root CA 1-4, Starfield Services
//! Root CA G2), which are in that set. The system's store is not read, so
//! a private CA added to it is not trusted here; `baton` on a workstation
//! (behind a TLS-inspecting proxy, say) uses the SDK's default client
//! instead (the `workstation` feature), which also honours `HTTPS_PROXY`.
//! This client connects directly.
//!
//! Like the SDK's client it applies the connect and read timeouts of
//! [`HttpConnectorSettings`], classifies errors for the SDK's retries, and
//! lets the SDK poison a connection after a transient error.

use aws_smithy_runtime_api::client::connection::{CaptureSmithyConnection, ConnectionMetadata};
use aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::retry::ErrorKind;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{
    capture_connection, CaptureConnection, HttpConnector as TcpConnector, HttpInfo,
};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

#[cfg(test)]
mod tests;

type BoxError = Box<dyn Error + Send + Sync>;

/// The HTTPS client every SDK client of a process shares (see the module
/// docs): set it on the configuration loader
/// (`aws_config::ConfigLoader::http_client`).
pub fn client() -> SharedHttpClient {
    SharedHttpClient::new(BatonHttpClient::new(mozilla_roots()))
}

/// Mozilla's roots, as webpki-roots compiles them in: already parsed into
/// trust anchors, so building the store copies a table and parses nothing.
fn mozilla_roots() -> rustls::RootCertStore {
    rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// The TLS configuration of every connection: *ring*, TLS 1.2 and 1.3,
/// `roots`.
fn tls_config(roots: rustls::RootCertStore) -> Result<rustls::ClientConfig, rustls::Error> {
    // The provider is named, not taken from the process default, so the
    // choice does not depend on which rustls features a build unifies.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The connect and read timeouts a connector was built for: the SDK asks
/// for a connector per setting, so there is one pool per distinct pair
/// (in practice one per process).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Timeouts {
    connect: Option<Duration>,
    read: Option<Duration>,
}

pub(crate) struct BatonHttpClient {
    tls: Result<rustls::ClientConfig, rustls::Error>,
    connectors: Mutex<Vec<(Timeouts, SharedHttpConnector)>>,
}

impl fmt::Debug for BatonHttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatonHttpClient").finish_non_exhaustive()
    }
}

impl BatonHttpClient {
    /// A client trusting `roots` (tests use their own).
    pub(crate) fn new(roots: rustls::RootCertStore) -> Self {
        BatonHttpClient {
            tls: tls_config(roots),
            connectors: Mutex::new(Vec::new()),
        }
    }

    fn connector(&self, timeouts: Timeouts) -> SharedHttpConnector {
        let tls = match &self.tls {
            Ok(tls) => tls.clone(),
            // Never with ring's provider, which has TLS 1.2 and 1.3 suites;
            // should it happen, every request says so.
            Err(e) => return SharedHttpConnector::new(Broken(e.to_string())),
        };
        let mut tcp = TcpConnector::new();
        tcp.enforce_http(false);
        // As the SDK's client: small requests are not held back (Nagle).
        tcp.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            // Plain HTTP too: IMDS, ECS credentials, local emulators.
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let client = Client::builder(TokioExecutor::new())
            // Without a timer, idle pooled connections never expire.
            .pool_timer(TokioTimer::new())
            .build(ConnectTimeout {
                inner: https,
                timeout: timeouts.connect,
            });
        SharedHttpConnector::new(Connector {
            client,
            read_timeout: timeouts.read,
        })
    }
}

impl HttpClient for BatonHttpClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        let timeouts = Timeouts {
            connect: settings.connect_timeout(),
            read: settings.read_timeout(),
        };
        // A poisoned lock only means another thread panicked while pushing;
        // the list is still usable.
        let mut connectors = self
            .connectors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, c)) = connectors.iter().find(|(t, _)| *t == timeouts) {
            return c.clone();
        }
        let connector = self.connector(timeouts);
        connectors.push((timeouts, connector.clone()));
        connector
    }

    fn connector_metadata(&self) -> Option<ConnectorMetadata> {
        Some(ConnectorMetadata::new("hyper", Some("1.x".into())))
    }
}

/// A connector that fails every request, naming why.
#[derive(Debug)]
struct Broken(String);

impl HttpConnector for Broken {
    fn call(&self, _request: HttpRequest) -> HttpConnectorFuture {
        HttpConnectorFuture::ready(Err(ConnectorError::other(
            format!("no TLS configuration: {}", self.0).into(),
            None,
        )))
    }
}

type HyperClient = Client<ConnectTimeout<HttpsConnector<TcpConnector>>, SdkBody>;

struct Connector {
    client: HyperClient,
    read_timeout: Option<Duration>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("read_timeout", &self.read_timeout)
            .finish_non_exhaustive()
    }
}

impl HttpConnector for Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let mut request = match request.try_into_http1x() {
            Ok(r) => r,
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e.into()))),
        };
        // The SDK's retry strategy asks for the connection of a failed
        // attempt to poison it, so that it is not reused.
        let capture = capture_connection(&mut request);
        if let Some(smithy) = request.extensions().get::<CaptureSmithyConnection>() {
            smithy.set_connection_retriever(move || connection_metadata(&capture));
        }
        let response = self.client.request(request);
        let read_timeout = self.read_timeout;
        HttpConnectorFuture::new(async move {
            let response = match read_timeout {
                Some(limit) => match tokio::time::timeout(limit, response).await {
                    Ok(r) => r,
                    Err(_) => {
                        return Err(ConnectorError::timeout(Box::new(TimedOut {
                            what: "HTTP read",
                            after: limit,
                        })))
                    }
                },
                None => response.await,
            };
            match response {
                Ok(response) => HttpResponse::try_from(response.map(SdkBody::from_body_1_x))
                    .map_err(|e| ConnectorError::other(e.into(), None)),
                Err(e) => Err(classify(e)),
            }
        })
    }
}

fn connection_metadata(capture: &CaptureConnection) -> Option<ConnectionMetadata> {
    let connected = capture.connection_metadata();
    let connected = connected.as_ref()?;
    let mut extras = http::Extensions::new();
    connected.get_extras(&mut extras);
    let info = extras.get::<HttpInfo>();
    let poison = capture.clone();
    let mut metadata = ConnectionMetadata::builder()
        .proxied(false)
        .poison_fn(move || {
            if let Some(c) = poison.connection_metadata().as_ref() {
                c.poison();
            }
        });
    metadata
        .set_remote_addr(info.map(HttpInfo::remote_addr))
        .set_local_addr(info.map(HttpInfo::local_addr));
    Some(metadata.build())
}

/// How the SDK's retries should see a failed request, as its own client
/// classifies them: timeouts and I/O errors (refused, reset, closed) are
/// transient, a response cut short too; a request hyper refused to send is
/// the caller's error.
fn classify(error: hyper_util::client::legacy::Error) -> ConnectorError {
    let is_connect = error.is_connect();
    let error: BoxError = Box::new(error);
    if find::<TimedOut>(&*error).is_some() {
        return ConnectorError::timeout(error);
    }
    if let Some(h) = find::<hyper::Error>(&*error) {
        if h.is_timeout() {
            return ConnectorError::timeout(error);
        }
        if h.is_user() {
            return ConnectorError::user(error);
        }
        if h.is_incomplete_message() {
            return ConnectorError::other(error, Some(ErrorKind::TransientError));
        }
        if h.is_closed() || h.is_canceled() {
            return ConnectorError::io(error);
        }
    }
    if is_connect || find::<std::io::Error>(&*error).is_some() {
        return ConnectorError::io(error);
    }
    ConnectorError::other(error, None)
}

/// The first error of type `E` in `error`'s chain.
fn find<'a, E: Error + 'static>(error: &'a (dyn Error + 'static)) -> Option<&'a E> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        next = e.source();
    }
    None
}

/// A connect (TCP and TLS) or read timeout.
#[derive(Debug)]
struct TimedOut {
    what: &'static str,
    after: Duration,
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} timed out after {:?}", self.what, self.after)
    }
}

impl Error for TimedOut {}

/// Bounds the whole connection set-up, TCP and TLS handshake, as the SDK's
/// connect timeout does.
#[derive(Clone)]
struct ConnectTimeout<C> {
    inner: C,
    timeout: Option<Duration>,
}

impl<C> tower_service::Service<http::Uri> for ConnectTimeout<C>
where
    C: tower_service::Service<http::Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let timeout = self.timeout;
        Box::pin(async move {
            match timeout {
                Some(limit) => match tokio::time::timeout(limit, connecting).await {
                    Ok(r) => r.map_err(Into::into),
                    Err(_) => Err(Box::new(TimedOut {
                        what: "connect",
                        after: limit,
                    }) as BoxError),
                },
                None => connecting.await.map_err(Into::into),
            }
        })
    }
}
