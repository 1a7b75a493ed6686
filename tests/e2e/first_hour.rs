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

fn read(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The shell commands of the fenced `sh` blocks in `text` (comments and
/// blank lines left out), in order.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            inside = !inside && t == "```sh";
            continue;
        }
        if inside && !t.is_empty() && !t.starts_with('#') {
            let command = t.split(" #").next().unwrap_or(t).trim();
            out.push(command.to_owned());
        }
    }
    out
}

/// The README's deploy block is docs/deploy.md's, in the same order; the
/// guide asks for every parameter of the template, names every setting
/// read from SSM and the Rust version the workspace needs.
#[test]
fn the_readme_deploys_as_the_deploy_guide_says() {
    let readme = read("README.md");
    let guide = read("docs/deploy.md");
    let section = readme
        .split("## Deploy")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a Deploy section");
    let wanted = commands(section);
    assert!(
        wanted.iter().any(|c| c == "sam build"),
        "the README builds before it deploys: {wanted:?}"
    );
    let guide_commands = commands(&guide);
    let mut at = 0;
    for command in &wanted {
        let found = guide_commands[at..]
            .iter()
            .position(|c| c == command)
            .unwrap_or_else(|| {
                panic!(
                    "`{command}` (README) is not in docs/deploy.md after {at}: {guide_commands:?}"
                )
            });
        at += found + 1;
    }

    let template: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&read("infra/template.yaml")).unwrap();
    let parameters = template["Parameters"].as_mapping().unwrap();
    for name in parameters.keys().filter_map(|k| k.as_str()) {
        assert!(
            guide.contains(&format!("Parameter {name}"))
                || guide.contains(&format!("/ {name} |"))
                || guide.contains(&format!("/ {name} /")),
            "docs/deploy.md's `sam deploy --guided` table leaves out {name}"
        );
    }
    for name in baton_runtime::secrets::SECRET_NAMES {
        assert!(
            guide.contains(&format!("/baton/$STACK/{name}")),
            "docs/deploy.md does not name the SSM setting {name}"
        );
    }
    let manifest = read("Cargo.toml");
    let rust = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    assert!(
        guide.contains(&format!("`rust-version`, {rust} or newer")),
        "docs/deploy.md gives another Rust version than {rust}"
    );
}
