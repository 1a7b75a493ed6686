//! Where operational metrics go (`BATON_METRICS`,
//! `BATON_METRICS_NAMESPACE`): CloudWatch embedded metric format lines on
//! stdout, or nowhere. On by default in the Lambda functions, whose stdout
//! is CloudWatch Logs; off by default in `baton dev`, whose stdout is a
//! terminal.

use crate::source::SettingsError;
use baton_core::{Metrics, NoMetrics};
use std::sync::Arc;

/// `BATON_METRICS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricsMode {
    /// Embedded metric format lines on stdout.
    Emf,
    /// None.
    Off,
}

/// The metrics settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsSettings {
    /// `BATON_METRICS`; unset means the default of the binary: `emf` in the
    /// Lambda functions, `off` in `baton dev`.
    pub mode: Option<MetricsMode>,
    /// `BATON_METRICS_NAMESPACE`: the CloudWatch namespace (default
    /// `Baton`; the SAM template gives each stack its own).
    pub namespace: String,
}

impl MetricsSettings {
    /// Reads the two variables through `var`.
    pub(crate) fn load(var: impl Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        let mode = match var("BATON_METRICS").as_deref() {
            None => None,
            Some("emf") => Some(MetricsMode::Emf),
            Some("off") => Some(MetricsMode::Off),
            Some(other) => {
                return Err(SettingsError::Invalid {
                    name: "BATON_METRICS",
                    message: format!("`{other}` is not `emf` or `off`"),
                })
            }
        };
        let namespace = var("BATON_METRICS_NAMESPACE")
            .unwrap_or_else(|| baton_aws::emf::DEFAULT_NAMESPACE.into());
        // CloudWatch's rule for namespaces; `AWS/` is reserved for AWS.
        let valid = namespace.len() <= 255
            && !namespace.starts_with("AWS/")
            && namespace
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || " .-_/#:".contains(c));
        if !valid {
            return Err(SettingsError::Invalid {
                name: "BATON_METRICS_NAMESPACE",
                message: format!(
                    "`{namespace}` is not a CloudWatch namespace (letters, digits and . - _ / # : \
                     and spaces, at most 255, not starting with AWS/)"
                ),
            });
        }
        Ok(MetricsSettings { mode, namespace })
    }

    /// The sink for `service` (`worker`, `ingest`), `default` when
    /// `BATON_METRICS` is unset.
    pub fn sink(&self, service: &str, default: MetricsMode) -> Arc<dyn Metrics> {
        match self.mode.unwrap_or(default) {
            MetricsMode::Emf => Arc::new(baton_aws::EmfMetrics::new(&self.namespace, service)),
            MetricsMode::Off => Arc::new(NoMetrics),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(pairs: &[(&str, &str)]) -> Result<MetricsSettings, SettingsError> {
        MetricsSettings::load(|name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn unset_leaves_the_choice_to_the_binary() {
        let s = load(&[]).unwrap();
        assert_eq!(s.mode, None);
        assert_eq!(s.namespace, "Baton");
        let s = load(&[
            ("BATON_METRICS", "off"),
            ("BATON_METRICS_NAMESPACE", "Baton/prod"),
        ])
        .unwrap();
        assert_eq!(s.mode, Some(MetricsMode::Off));
        assert_eq!(s.namespace, "Baton/prod");
        assert_eq!(
            load(&[("BATON_METRICS", "emf")]).unwrap().mode,
            Some(MetricsMode::Emf)
        );
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        let e = load(&[("BATON_METRICS", "cloudwatch")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "BATON_METRICS: `cloudwatch` is not `emf` or `off`"
        );
        for ns in ["AWS/Lambda", "Baton{prod}", &"x".repeat(256)] {
            let e = load(&[("BATON_METRICS_NAMESPACE", ns)]).unwrap_err();
            assert!(e.to_string().starts_with("BATON_METRICS_NAMESPACE:"), "{e}");
        }
    }
}
