//! The client against local servers: TLS verified against the roots it
//! is given, and the connect and read timeouts.
//!
//! The certificates are a test CA and a `localhost` certificate it signed
//! (P-256, valid until 2126), made with:
//!
//! ```sh
//! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
//!   -out test-ca.pem -days 36500 -subj "/CN=Baton test CA" \
//!   -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign"
//! openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout localhost.key \
//!   -out localhost.csr -subj "/CN=localhost"
//! openssl x509 -req -in localhost.csr -CA test-ca.pem -CAkey ca.key -out test-localhost.pem \
//!   -days 36500 -extfile <(printf "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n")
//! openssl pkcs8 -topk8 -nocrypt -in localhost.key -out test-localhost.key
//! ```

use super::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const CA: &[u8] = include_bytes!("test-ca.pem");
const CERT: &[u8] = include_bytes!("test-localhost.pem");
const KEY: &[u8] = include_bytes!("test-localhost.key");

fn test_roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(CA).expect("test CA"))
        .expect("test CA is a trust anchor");
    roots
}

/// A TLS server for `localhost` answering every request with `200 ok`.
async fn tls_server() -> SocketAddr {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from_pem_slice(CERT).expect("test certificate")],
        PrivateKeyDer::from_pem_slice(KEY).expect("test key"),
    )
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tls
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}

/// A server that accepts connections and never says anything.
async fn silent_server() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            open.push(tcp);
        }
    });
    (addr, task)
}

fn get(url: &str) -> HttpRequest {
    HttpRequest::try_from(
        http::Request::builder()
            .uri(url)
            .body(SdkBody::empty())
            .expect("request"),
    )
    .expect("smithy request")
}

fn no_timeouts() -> Timeouts {
    Timeouts {
        connect: None,
        read: None,
    }
}

#[tokio::test]
async fn speaks_https_to_a_server_its_roots_vouch_for() {
    let addr = tls_server().await;
    let connector = BatonHttpClient::new(test_roots()).connector(no_timeouts());
    let url = format!("https://localhost:{}/", addr.port());
    let response = connector.call(get(&url)).await.expect("response");
    assert_eq!(response.status().as_u16(), 200);
    let body = aws_smithy_types::byte_stream::ByteStream::new(response.into_body())
        .collect()
        .await
        .expect("body");
    assert_eq!(&body.into_bytes()[..], b"ok");
}

#[tokio::test]
async fn refuses_a_server_mozillas_roots_do_not_vouch_for() {
    let addr = tls_server().await;
    let connector = BatonHttpClient::new(mozilla_roots()).connector(no_timeouts());
    let url = format!("https://localhost:{}/", addr.port());
    let error = connector.call(get(&url)).await.expect_err("untrusted");
    let mut chain = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        chain = format!("{chain}: {e}");
        source = e.source();
    }
    assert!(chain.contains("certificate"), "{chain}");
}

#[test]
fn mozillas_roots_include_amazons() {
    // AWS endpoints chain to Amazon Trust Services' roots.
    let subjects: Vec<String> = webpki_roots::TLS_SERVER_ROOTS
        .iter()
        .map(|a| String::from_utf8_lossy(a.subject.as_ref()).into_owned())
        .collect();
    for name in [
        "Amazon Root CA 1",
        "Amazon Root CA 2",
        "Amazon Root CA 3",
        "Amazon Root CA 4",
        "Starfield Services Root Certificate Authority - G2",
    ] {
        assert!(
            subjects.iter().any(|s| s.contains(name)),
            "{name} is not among the compiled-in roots"
        );
    }
}

#[tokio::test]
async fn a_handshake_that_never_ends_is_a_connect_timeout() {
    let (addr, _server) = silent_server().await;
    let connector = BatonHttpClient::new(test_roots()).connector(Timeouts {
        connect: Some(Duration::from_millis(200)),
        read: None,
    });
    let url = format!("https://localhost:{}/", addr.port());
    let error = connector.call(get(&url)).await.expect_err("timeout");
    assert!(error.is_timeout(), "{error:?}");
}

#[tokio::test]
async fn a_response_that_never_comes_is_a_read_timeout() {
    let (addr, _server) = silent_server().await;
    let connector = BatonHttpClient::new(test_roots()).connector(Timeouts {
        connect: Some(Duration::from_secs(5)),
        read: Some(Duration::from_millis(200)),
    });
    let url = format!("http://127.0.0.1:{}/", addr.port());
    let error = connector.call(get(&url)).await.expect_err("timeout");
    assert!(error.is_timeout(), "{error:?}");
}

#[tokio::test]
async fn a_refused_connection_is_transient_io() {
    let (addr, server) = silent_server().await;
    server.abort();
    let _ = server.await;
    let connector = BatonHttpClient::new(test_roots()).connector(no_timeouts());
    let url = format!("http://127.0.0.1:{}/", addr.port());
    let error = connector.call(get(&url)).await.expect_err("refused");
    assert!(error.is_io(), "{error:?}");
}
