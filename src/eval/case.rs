//! An eval case file: JSONL, one case per line, read whole and checked
//! before anything runs, so a typo stops the run instead of failing (or
//! silently passing) one case.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

/// One case as written (the contract of docs/evals.md).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Case {
    #[serde(default)]
    pub(crate) id: Option<String>,
    pub(crate) input: String,
    /// Files given with the input, as `POST /tasks` takes them
    /// (`{"name", "media_type"?, "data_base64"}`); the API checks them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) attachments: Vec<Value>,
    #[serde(default)]
    pub(crate) expect: Expect,
    /// A rated answer (from `baton eval export`), shown to the judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reference: Option<String>,
    /// The task the case was exported from (`--replay` forks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
}

/// What a case's answer must satisfy; every field optional.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Expect {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) contains: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) not_contains: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) regex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool_called: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_steps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) judge: Option<String>,
}

/// A case ready to run: its id (given, or `line-N`), and its regex
/// compiled.
#[derive(Clone, Debug)]
pub(crate) struct LoadedCase {
    pub(crate) id: String,
    pub(crate) case: Case,
    pub(crate) regex: Option<regex::Regex>,
}

/// Why a case file cannot be run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CaseError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: no cases (one JSON object per line)")]
    Empty { path: String },
    #[error("{path} line {line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
}

/// Longest case id kept (ids end up in file names of no one, but in
/// every report line).
const MAX_ID_CHARS: usize = 200;

/// Reads and checks every case of `path`.
pub(crate) fn load(path: &Path) -> Result<Vec<LoadedCase>, CaseError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| CaseError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&text, &shown)
}

/// The cases of `text` (a file's contents; `path` names it in errors).
/// Blank lines are skipped; anything else must be a case.
pub(crate) fn parse(text: &str, path: &str) -> Result<Vec<LoadedCase>, CaseError> {
    let mut cases = Vec::new();
    let mut ids = HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let bad = |message: String| CaseError::Line {
            path: path.to_owned(),
            line,
            message,
        };
        if raw.trim().is_empty() {
            continue;
        }
        let case: Case = serde_json::from_str(raw).map_err(|e| bad(e.to_string()))?;
        if case.input.trim().is_empty() {
            return Err(bad("`input` is empty".into()));
        }
        let id = case.id.clone().unwrap_or_else(|| format!("line-{line}"));
        if id.trim().is_empty() || id.chars().count() > MAX_ID_CHARS {
            return Err(bad(format!("`id` must be 1 to {MAX_ID_CHARS} characters")));
        }
        if !ids.insert(id.clone()) {
            return Err(bad(format!("`id` {id:?} is used twice")));
        }
        let regex = match &case.expect.regex {
            Some(r) => Some(
                regex::Regex::new(r).map_err(|e| bad(format!("`expect.regex` is invalid: {e}")))?,
            ),
            None => None,
        };
        if let Some(j) = &case.expect.judge {
            if j.trim().is_empty() {
                return Err(bad("`expect.judge` is empty".into()));
            }
        }
        cases.push(LoadedCase { id, case, regex });
    }
    if cases.is_empty() {
        return Err(CaseError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, "cases.jsonl").unwrap_err().to_string()
    }

    #[test]
    fn cases_are_read_with_every_check() {
        let text = r#"{"id": "greet", "input": "hi", "expect": {"contains": ["Hi"], "not_contains": ["bye"], "regex": "^h", "tool_called": "current_time", "max_steps": 3, "judge": "polite"}}

{"input": "two", "attachments": [{"name": "a.txt", "data_base64": "aGk="}], "reference": "ok", "task_id": "t1"}
"#;
        let cases = parse(text, "c").unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[0].id, "greet");
        assert_eq!(cases[0].case.expect.max_steps, Some(3));
        assert!(cases[0].regex.as_ref().unwrap().is_match("hello"));
        // No id: the line it is on (blank lines count).
        assert_eq!(cases[1].id, "line-3");
        assert_eq!(cases[1].case.task_id.as_deref(), Some("t1"));
        assert_eq!(cases[1].case.attachments.len(), 1);
    }

    #[test]
    fn a_bad_line_is_named() {
        let e = err("{\"input\": \"a\"}\n{\"input\": \"b\"\n");
        assert!(e.starts_with("cases.jsonl line 2:"), "{e}");
        let e = err("{\"input\": \"a\", \"expected\": {}}");
        assert!(
            e.contains("line 1") && e.contains("unknown field `expected`"),
            "{e}"
        );
        let e = err("{\"input\": \"a\", \"expect\": {\"contain\": [\"x\"]}}");
        assert!(e.contains("unknown field `contain`"), "{e}");
        let e = err("{\"input\": \"a\", \"expect\": {\"regex\": \"(\"}}");
        assert!(e.contains("line 1: `expect.regex` is invalid"), "{e}");
        let e = err("{\"id\": \"x\", \"input\": \"a\"}\n{\"id\": \"x\", \"input\": \"b\"}");
        assert!(e.contains("line 2") && e.contains("used twice"), "{e}");
        let e = err("{\"input\": \"  \"}");
        assert!(e.contains("`input` is empty"), "{e}");
        let e = err("[1, 2]");
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn an_empty_file_is_refused() {
        assert_eq!(err(""), "cases.jsonl: no cases (one JSON object per line)");
        assert!(err("\n  \n").contains("no cases"));
    }
}
