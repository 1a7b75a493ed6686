//! Where the settings come from and how a bad one is refused: the
//! [`Source`] of values (the process environment over the secrets stored
//! in SSM) and the [`SettingsError`] that every part of the settings
//! loads with.

use baton_settings::ConfigFileError;
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{name}: {message}")]
    Invalid { name: &'static str, message: String },
    #[error("{0} is required")]
    Missing(&'static str),
    /// The message holds the file's error, which is therefore not also
    /// its `source`: a chain printed whole (`{:#}`) would say it twice.
    #[error("agents file: {0}")]
    Agents(ConfigFileError),
    /// A tool added with [`crate::AppBuilder::tool`] that cannot be used.
    #[error("custom tool `{name}`: {message}")]
    CustomTool { name: String, message: String },
}

impl From<ConfigFileError> for SettingsError {
    fn from(e: ConfigFileError) -> Self {
        SettingsError::Agents(e)
    }
}

pub(crate) fn invalid(name: &'static str, message: impl Into<String>) -> SettingsError {
    SettingsError::Invalid {
        name,
        message: message.into(),
    }
}

/// Where configuration values come from: the process environment, with
/// secrets loaded from SSM Parameter Store layered underneath.
pub(crate) struct Source<'a> {
    pub(crate) secrets: &'a HashMap<String, String>,
}

impl Source<'_> {
    /// A variable's value, with unset and empty treated alike. The process
    /// environment wins over a stored secret of the same name.
    pub(crate) fn var(&self, name: &str) -> Option<String> {
        std::env::var(name)
            .ok()
            .or_else(|| self.secrets.get(name).cloned())
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// `true` or `false`; `None` when unset.
    pub(crate) fn flag(&self, name: &'static str) -> Result<Option<bool>, SettingsError> {
        match self.var(name).as_deref() {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => Err(invalid(name, format!("`{other}` is not `true` or `false`"))),
        }
    }

    pub(crate) fn num<T: std::str::FromStr>(
        &self,
        name: &'static str,
    ) -> Result<Option<T>, SettingsError> {
        self.var(name)
            .map(|v| {
                v.parse::<T>()
                    .map_err(|_| invalid(name, format!("`{v}` is not a valid number")))
            })
            .transpose()
    }
}
