//! Which browser origins may call `/mcp` (docs/integrations.md#mcp-clients).
//! The MCP specification requires an HTTP server to validate `Origin`
//! against DNS rebinding: a page of another site, its name made to
//! resolve to this server, must not reach it with a visitor's browser. A
//! request with an `Origin` that is not allowed is refused (403) before
//! anything else, its bearer included; one without (a client that is not
//! a browser) goes on. Allowed: the deployment's own origin (its public
//! URL's) and those the operator lists (`BATON_MCP_ALLOWED_ORIGINS`),
//! compared as RFC 6454 origins: scheme, host and port, the scheme's
//! default port when none is written.

use http::{header, HeaderMap};
use std::sync::Arc;
use url::{Origin, Url};

/// The origins `/mcp` answers browsers of; none by default.
#[derive(Clone, Debug, Default)]
pub struct McpOrigins(Arc<[Origin]>);

/// Why a configured origin is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{given}` is not an origin ({why}); write scheme://host or scheme://host:port, e.g. https://app.example.com")]
pub struct OriginError {
    pub given: String,
    pub why: &'static str,
}

impl McpOrigins {
    /// The origin of `own` (the deployment's public URL, any path) and
    /// `listed`, each `scheme://host[:port]` (a trailing `/` allowed).
    pub fn new(own: Option<&str>, listed: &[String]) -> Result<Self, OriginError> {
        let mut origins = Vec::with_capacity(listed.len() + 1);
        if let Some(own) = own {
            origins.push(origin_of(own, false)?);
        }
        for entry in listed {
            origins.push(origin_of(entry, true)?);
        }
        Ok(McpOrigins(origins.into()))
    }

    /// Whether a request with `headers` may go on: it has no `Origin`, or
    /// exactly one, of an allowed origin. `Origin: null` (a sandboxed or
    /// local page) never is.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        let mut given = headers.get_all(header::ORIGIN).iter();
        let (Some(value), None) = (given.next(), given.next()) else {
            return headers.get(header::ORIGIN).is_none();
        };
        let Some(origin) = value
            .to_str()
            .ok()
            .and_then(|v| Url::parse(v.trim()).ok())
            .map(|u| u.origin())
        else {
            return false;
        };
        origin.is_tuple() && self.0.contains(&origin)
    }
}

/// The origin `text` names; with `bare`, nothing but an origin may be
/// written (no path, query, fragment or user).
fn origin_of(text: &str, bare: bool) -> Result<Origin, OriginError> {
    let refuse = |why| OriginError {
        given: text.to_owned(),
        why,
    };
    let url = Url::parse(text.trim()).map_err(|_| refuse("not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(refuse("not http or https with a host"));
    }
    let extra = url.path() != "/"
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some();
    if bare && extra {
        return Err(refuse("it has more than scheme, host and port"));
    }
    Ok(url.origin())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with_origin(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ORIGIN, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_own_and_listed_origins_pass_others_do_not() {
        let o = McpOrigins::new(
            Some("https://api.example.com/prod"),
            &[
                "http://localhost:5173".into(),
                "https://App.Example.org/".into(),
            ],
        )
        .unwrap();
        for ok in [
            &[][..],
            &["https://api.example.com"],
            &["https://API.example.com:443"],
            &["http://localhost:5173"],
            &["https://app.example.org"],
        ] {
            assert!(o.allows(&with_origin(ok)), "{ok:?}");
        }
        for refused in [
            &["https://evil.example"][..],
            &["http://api.example.com"],
            &["https://api.example.com:8443"],
            &["http://localhost:5174"],
            &["null"],
            &["not an origin"],
            &["https://api.example.com", "https://evil.example"],
        ] {
            assert!(!o.allows(&with_origin(refused)), "{refused:?}");
        }
        // None by default: only requests without an Origin.
        let none = McpOrigins::default();
        assert!(none.allows(&HeaderMap::new()));
        assert!(!none.allows(&with_origin(&["https://api.example.com"])));
    }

    #[test]
    fn a_listed_origin_is_only_an_origin() {
        for bad in [
            "app.example.com",
            "ftp://app.example.com",
            "https://app.example.com/path",
            "https://app.example.com/?q",
            "https://user@app.example.com",
        ] {
            let e = McpOrigins::new(None, &[bad.to_owned()]).expect_err(bad);
            assert_eq!(e.given, bad);
        }
    }
}
