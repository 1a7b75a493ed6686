//! Secret tokens (callback URLs, Connect links' states, API tokens): what
//! is stored of one, and how one is compared without the time telling an
//! attacker where it differs.

use sha2::{Digest, Sha256};

/// The hex SHA-256 of `token`: what is stored and looked up instead of it.
pub fn hash_token(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Equality in time independent of where the bytes first differ (only
/// the lengths may tell).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_only_when_every_byte_is() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert_eq!(hash_token("t").len(), 64);
    }
}
