//! An exposed agent's A2A agent card, and the deployment's own URL it
//! names, read off the request.

use crate::response::ApiError;
use baton_settings::AgentConfig;
use http::HeaderMap;
use serde_json::{json, Value};

/// The protocol version this endpoint speaks.
pub(super) const PROTOCOL_VERSION: &str = "1.0";

/// The name of the card's security scheme.
const SCHEME: &str = "bearer";

/// The path of an agent's JSON-RPC endpoint, under the deployment's URL.
pub(super) fn rpc_path(agent: &str) -> String {
    format!("/a2a/{agent}")
}

/// One header's first value, trimmed (`X-Forwarded-*` may list a value
/// per proxy: the first is the client's).
fn first_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The URL the client reached the deployment at: `X-Forwarded-Proto` and
/// `X-Forwarded-Host` (API Gateway, a load balancer) or `Host`. Only a
/// plain host (and port) is taken: a header that is anything else is
/// refused, so no client can make the card name another place.
pub(super) fn base_url(headers: &HeaderMap) -> Result<String, ApiError> {
    let host = first_value(headers, "x-forwarded-host")
        .or_else(|| first_value(headers, "host"))
        .ok_or_else(|| ApiError::bad_request("a Host header is needed to name the agent's URL"))?;
    let plain = host.len() <= 255
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-.:[]_".contains(c));
    if !plain {
        return Err(ApiError::bad_request("the Host header is not a host name"));
    }
    let scheme = match first_value(headers, "x-forwarded-proto") {
        None => "http",
        Some(p) if p.eq_ignore_ascii_case("https") => "https",
        Some(p) if p.eq_ignore_ascii_case("http") => "http",
        Some(_) => {
            return Err(ApiError::bad_request(
                "X-Forwarded-Proto must be http or https",
            ))
        }
    };
    Ok(format!("{scheme}://{host}"))
}

/// The agent card of `agent`, whose JSON-RPC endpoint is under `base`.
pub(super) fn card(agent: &AgentConfig, base: &str) -> Value {
    let description = agent
        .description
        .clone()
        .unwrap_or_else(|| format!("The Baton agent `{}`.", agent.name));
    json!({
        "name": agent.name,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{base}{}", rpc_path(&agent.name)),
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "securitySchemes": {SCHEME: {"httpAuthSecurityScheme": {
            "scheme": "Bearer",
            "description": "The deployment's API token (BATON_API_TOKEN), as for its HTTP API.",
        }}},
        "securityRequirements": [{"schemes": {SCHEME: {"list": []}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": agent.name,
            "name": agent.name,
            "description": description,
            "tags": ["baton"],
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_base_url_comes_from_the_forwarded_headers_or_the_host() {
        assert_eq!(
            base_url(&headers(&[("host", "127.0.0.1:8080")])).unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            base_url(&headers(&[
                ("host", "internal"),
                ("x-forwarded-host", "api.example.com, proxy"),
                ("x-forwarded-proto", "https"),
            ]))
            .unwrap(),
            "https://api.example.com"
        );
        for hostile in [
            &[("host", "evil.com/path")][..],
            &[("host", "a b")][..],
            &[("host", "x"), ("x-forwarded-proto", "javascript")][..],
            &[][..],
        ] {
            let e = base_url(&headers(hostile)).unwrap_err();
            assert_eq!(e.status, http::StatusCode::BAD_REQUEST, "{hostile:?}");
        }
    }
}
