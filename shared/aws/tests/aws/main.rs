//! The AWS adapters' integration tests, one binary, against a moto server
//! on a loopback port (the unit tests beside each adapter cover the rest).

mod endpoint_env;
mod ledger;
