//! Prompt text in the agents file: an agent's instructions
//! (`system_prompt` or `system_prompt_file`) and a prompt module's
//! (`prompt` or `prompt_file`), inline or read from a file relative to the
//! agents file, never empty.

use super::checker::Checker;
use super::schema::AgentSpec;

impl Checker<'_> {
    /// An agent table's instructions; a `system_prompt_file` is replaced
    /// by the file's text.
    pub(super) fn check_prompt(&mut self, at: &str, spec: &mut AgentSpec) {
        let file = spec.system_prompt_file.take();
        let inline = spec.system_prompt.as_deref();
        if let Some(text) = self.prompt_text(at, "system_prompt", inline, file.as_deref(), false) {
            spec.system_prompt = Some(text);
        }
    }

    /// Text given inline as `AT.KEY` or in a file as `AT.KEY_file`: not
    /// both (and one of them when `required`), never empty. The text, when
    /// it is good.
    pub(super) fn prompt_text(
        &mut self,
        at: &str,
        key: &str,
        inline: Option<&str>,
        file: Option<&str>,
        required: bool,
    ) -> Option<String> {
        match (inline, file) {
            (Some(_), Some(_)) => {
                self.add(
                    format!("{at}.{key}_file"),
                    format!("set {key} or {key}_file, not both"),
                );
                None
            }
            (None, None) => {
                if required {
                    self.add(at, format!("required: `{key}` or `{key}_file`"));
                }
                None
            }
            (Some(text), None) if text.trim().is_empty() => {
                self.add(format!("{at}.{key}"), "must not be empty");
                None
            }
            (Some(text), None) => Some(text.to_owned()),
            (None, Some(file)) => {
                let path = self.base_dir.join(file);
                let at = format!("{at}.{key}_file");
                match std::fs::read_to_string(&path) {
                    Ok(text) if text.trim().is_empty() => {
                        self.add(at, format!("{} is empty", path.display()));
                        None
                    }
                    Ok(text) => Some(text),
                    Err(e) => {
                        self.add(at, format!("cannot read {}: {e}", path.display()));
                        None
                    }
                }
            }
        }
    }
}
