//! What a new user meets in the first hour (issue #28, items 7 and 9):
//! `baton dev` refuses to start without the key its provider needs, and
//! says on start which model answers, where its data is and where the
//! console is; the README's deploy steps are the ones docs/deploy.md gives.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_provider_without_its_key_refuses_to_start_naming_it() {
    let stderr = crate::common::refused_start("", &[("BATON_LLM_PROVIDER", "anthropic")]);
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert!(
        stderr.contains("scripted"),
        "says how to do without: {stderr}"
    );
    let stderr = crate::common::refused_start("", &[("BATON_LLM_PROVIDER", "openai")]);
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

#[test]
fn baton_dev_says_what_answers_where_its_data_is_and_where_the_console_is() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_clear()
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut printed = Vec::new();
    let started = Instant::now();
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "{printed:?}");
        printed.push(line.trim_end().to_owned());
        if line.starts_with("baton dev listening on ") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{printed:?}");
    }
    let _ = child.kill();
    let _ = child.wait();
    let all = printed.join("\n");
    assert!(all.contains("model:   the scripted model"), "{all}");
    assert!(
        all.contains(&format!("data:    {}", dir.path().display())),
        "{all}"
    );
    let url = printed
        .last()
        .unwrap()
        .trim_start_matches("baton dev listening on ")
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    assert!(all.contains(&format!("console: {url}/console")), "{all}");
}
