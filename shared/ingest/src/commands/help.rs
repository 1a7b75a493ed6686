//! `help`: the commands.

use super::Command;

/// Lists every command with what it does.
pub(super) fn answer() -> String {
    let mut out = String::from(
        "Send me one of these words (mentioning me, in a direct message, or as `/baton WORD`); \
         I answer it myself, without starting a task:\n",
    );
    for c in Command::ALL {
        out.push_str(&format!("• `{}`: {}\n", c.usage(), c.summary()));
    }
    out.push_str("Anything else starts a task (`/baton` followed by what you want, too).");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn help_lists_every_command() {
        let text = super::answer();
        for c in super::Command::ALL {
            assert!(text.contains(&format!("`{}`", c.usage())), "{text}");
        }
    }
}
