//! Markdown (what LLMs write) to Slack's `mrkdwn`, and Slack markup back to
//! readable plain text.
//!
//! Slack's format differs from Markdown: `*bold*`, `_italic_`, `~strike~`,
//! `<url|label>` links, no headings, no list syntax, and `&`, `<`, `>` must be
//! escaped as entities. [`from_markdown`] parses with pulldown-cmark and
//! renders each construct the closest way Slack can show it.

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag};

/// Containers nested deeper than this are flattened into their parent, so
/// hostile input (thousands of `>`) cannot exhaust the stack when rendering.
const MAX_DEPTH: usize = 48;
/// Indent for continuation lines and nested lists inside a list item.
const LIST_INDENT: &str = "    ";
/// Slack has no horizontal rule.
const RULE: &str = "───";

/// Converts Markdown to Slack mrkdwn. Never fails: anything Markdown allows
/// renders as something (at worst as escaped text).
pub fn from_markdown(md: &str) -> String {
    let tree = build_tree(md);
    let lines = render_blocks(&tree, false);
    let mut out = lines.join("\n");
    let trimmed_len = out.trim_end().len();
    out.truncate(trimmed_len);
    out
}

/// Escapes text for mrkdwn: `&`, `<`, `>` become `&amp;`, `&lt;`, `&gt;`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// Turns Slack message markup into readable text (for an LLM or a log):
/// `<url|label>` → `label (url)`, `<url>` → `url`, `<#C1|general>` →
/// `#general`, `<!here>` → `@here`, `<!subteam^S1|@team>` → `@team`, and
/// entities decoded. User mentions `<@U123>` stay as they are so a reply can
/// mention the user back.
pub fn to_plain_text(slack: &str) -> String {
    let mut out = String::with_capacity(slack.len());
    let mut rest = slack;
    while let Some(start) = rest.find('<') {
        out.push_str(&decode_entities(&rest[..start]));
        let after = &rest[start + 1..];
        let Some(end) = after.find('>') else {
            // Unbalanced: keep the remainder verbatim.
            out.push_str(&decode_entities(&rest[start..]));
            return out;
        };
        let inner = &after[..end];
        let (target, label) = match inner.split_once('|') {
            Some((t, l)) => (t, Some(l)),
            None => (inner, None),
        };
        let label = label.map(decode_entities);
        if target.starts_with('@') {
            out.push('<');
            out.push_str(inner);
            out.push('>');
        } else if let Some(chan) = target.strip_prefix('#') {
            out.push('#');
            out.push_str(label.as_deref().unwrap_or(chan));
        } else if let Some(special) = target.strip_prefix('!') {
            match label {
                Some(l) => out.push_str(&l),
                None => {
                    out.push('@');
                    out.push_str(special);
                }
            }
        } else {
            let url = decode_entities(target);
            let shown = url.strip_prefix("mailto:").unwrap_or(&url);
            match label {
                Some(l) if l != shown && l != url => {
                    out.push_str(&l);
                    out.push_str(" (");
                    out.push_str(shown);
                    out.push(')');
                }
                _ => out.push_str(shown),
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(&decode_entities(rest));
    out
}

fn decode_entities(s: &str) -> String {
    // `&amp;` last so `&amp;lt;` decodes to `&lt;`, not `<`.
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A small document tree: pulldown-cmark gives a flat event stream, and
/// block rendering (prefixing quote and list lines) is simplest on a tree.
#[derive(Debug)]
enum Node<'a> {
    Elem(Tag<'a>, Vec<Node<'a>>),
    Text(CowStr<'a>),
    Code(CowStr<'a>),
    Html(CowStr<'a>),
    InlineHtml(CowStr<'a>),
    SoftBreak,
    HardBreak,
    Rule,
    TaskMarker(bool),
}

fn build_tree(md: &str) -> Vec<Node<'_>> {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut root: Vec<Node<'_>> = Vec::new();
    let mut stack: Vec<(Tag<'_>, Vec<Node<'_>>)> = Vec::new();
    // Starts beyond MAX_DEPTH that were not opened; their ends are skipped.
    let mut skipped = 0usize;

    fn push<'a>(root: &mut Vec<Node<'a>>, stack: &mut [(Tag<'a>, Vec<Node<'a>>)], n: Node<'a>) {
        match stack.last_mut() {
            Some((_, children)) => children.push(n),
            None => root.push(n),
        }
    }

    for event in Parser::new_ext(md, options) {
        match event {
            Event::Start(tag) => {
                if stack.len() >= MAX_DEPTH {
                    skipped += 1;
                } else {
                    stack.push((tag, Vec::new()));
                }
            }
            Event::End(_) => {
                if skipped > 0 {
                    skipped -= 1;
                } else if let Some((tag, children)) = stack.pop() {
                    push(&mut root, &mut stack, Node::Elem(tag, children));
                }
            }
            Event::Text(t) => push(&mut root, &mut stack, Node::Text(t)),
            Event::Code(t) => push(&mut root, &mut stack, Node::Code(t)),
            Event::InlineMath(t) | Event::DisplayMath(t) => {
                push(&mut root, &mut stack, Node::Code(t))
            }
            Event::Html(t) => push(&mut root, &mut stack, Node::Html(t)),
            Event::InlineHtml(t) => push(&mut root, &mut stack, Node::InlineHtml(t)),
            Event::FootnoteReference(t) => {
                push(&mut root, &mut stack, Node::Text(format!("[{t}]").into()))
            }
            Event::SoftBreak => push(&mut root, &mut stack, Node::SoftBreak),
            Event::HardBreak => push(&mut root, &mut stack, Node::HardBreak),
            Event::Rule => push(&mut root, &mut stack, Node::Rule),
            Event::TaskListMarker(done) => push(&mut root, &mut stack, Node::TaskMarker(done)),
        }
    }
    // Events are balanced, but close anything left open rather than lose it.
    while let Some((tag, children)) = stack.pop() {
        push(&mut root, &mut stack, Node::Elem(tag, children));
    }
    root
}

fn is_inline(node: &Node<'_>) -> bool {
    match node {
        Node::Text(_)
        | Node::Code(_)
        | Node::InlineHtml(_)
        | Node::SoftBreak
        | Node::HardBreak
        | Node::TaskMarker(_) => true,
        Node::Html(_) | Node::Rule => false,
        Node::Elem(tag, _) => matches!(
            tag,
            Tag::Emphasis
                | Tag::Strong
                | Tag::Strikethrough
                | Tag::Superscript
                | Tag::Subscript
                | Tag::Link { .. }
                | Tag::Image { .. }
        ),
    }
}

/// Renders a sequence of blocks (with stray inline runs treated as a
/// paragraph, as in tight list items) to lines. `tight` joins blocks without
/// the blank line used between paragraphs.
fn render_blocks(nodes: &[Node<'_>], tight: bool) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut run_start: Option<usize> = None;
    let add = |lines: &mut Vec<String>, block: Vec<String>| {
        if block.is_empty() {
            return;
        }
        if !lines.is_empty() && !tight {
            lines.push(String::new());
        }
        lines.extend(block);
    };
    for (i, node) in nodes.iter().enumerate() {
        if is_inline(node) {
            run_start.get_or_insert(i);
            continue;
        }
        if let Some(start) = run_start.take() {
            add(&mut lines, paragraph(&nodes[start..i]));
        }
        add(&mut lines, render_block(node));
    }
    if let Some(start) = run_start {
        add(&mut lines, paragraph(&nodes[start..]));
    }
    lines
}

fn paragraph(nodes: &[Node<'_>]) -> Vec<String> {
    let text = render_inline(nodes, Style::default());
    if text.trim().is_empty() {
        return Vec::new();
    }
    text.split('\n').map(str::to_owned).collect()
}

fn render_block(node: &Node<'_>) -> Vec<String> {
    let (tag, children) = match node {
        Node::Rule => return vec![RULE.to_string()],
        Node::Html(h) => return text_lines(&escape(h)),
        Node::Elem(tag, children) => (tag, children),
        // Inline nodes are handled by `paragraph`.
        _ => return paragraph(std::slice::from_ref(node)),
    };
    match tag {
        Tag::Paragraph => paragraph(children),
        Tag::Heading { .. } => {
            let style = Style {
                bold: true,
                ..Style::default()
            };
            let text = render_inline(children, style).replace('\n', " ");
            let text = text.trim();
            if text.is_empty() {
                Vec::new()
            } else {
                vec![format!("*{text}*")]
            }
        }
        Tag::BlockQuote(_) => render_blocks(children, false)
            .into_iter()
            .map(|l| {
                if l.is_empty() {
                    ">".to_string()
                } else {
                    format!("> {l}")
                }
            })
            .collect(),
        // The language tag is dropped: Slack does not highlight.
        Tag::CodeBlock(_) => {
            let mut code = String::new();
            collect_text(children, &mut code);
            let code = code.strip_suffix('\n').unwrap_or(&code);
            let mut lines = vec!["```".to_string()];
            lines.extend(code.split('\n').map(escape));
            lines.push("```".to_string());
            lines
        }
        Tag::HtmlBlock => {
            let mut html = String::new();
            collect_text(children, &mut html);
            text_lines(&escape(&html))
        }
        Tag::List(start) => render_list(*start, children),
        _ => render_blocks(children, false),
    }
}

fn text_lines(text: &str) -> Vec<String> {
    let text = text.trim_end_matches('\n');
    if text.trim().is_empty() {
        return Vec::new();
    }
    text.split('\n').map(str::to_owned).collect()
}

fn render_list(start: Option<u64>, items: &[Node<'_>]) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let marker = match start {
            Some(n) => format!("{}. ", n.saturating_add(i as u64)),
            None => "• ".to_string(),
        };
        let body = match item {
            Node::Elem(Tag::Item, children) => render_blocks(children, true),
            other => render_blocks(std::slice::from_ref(other), true),
        };
        let mut body = body.into_iter();
        match body.next() {
            Some(first) => lines.push(format!("{marker}{first}")),
            None => lines.push(marker.trim_end().to_string()),
        }
        lines.extend(body.map(|l| {
            if l.is_empty() {
                l
            } else {
                format!("{LIST_INDENT}{l}")
            }
        }));
    }
    lines
}

fn collect_text(nodes: &[Node<'_>], out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(t) | Node::Code(t) | Node::Html(t) | Node::InlineHtml(t) => out.push_str(t),
            Node::SoftBreak | Node::HardBreak => out.push('\n'),
            Node::Elem(_, children) => collect_text(children, out),
            Node::Rule | Node::TaskMarker(_) => {}
        }
    }
}

/// Which markers are already open: Slack does not nest a marker inside the
/// same marker, and link labels take no formatting at all.
#[derive(Debug, Clone, Copy, Default)]
struct Style {
    bold: bool,
    italic: bool,
    strike: bool,
    plain: bool,
}

fn render_inline(nodes: &[Node<'_>], style: Style) -> String {
    let mut out = String::new();
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(&escape(t)),
            Node::Code(c) => {
                if style.plain {
                    out.push_str(&escape(c));
                } else {
                    out.push('`');
                    out.push_str(&escape(c));
                    out.push('`');
                }
            }
            Node::Html(h) | Node::InlineHtml(h) => out.push_str(&escape(h)),
            Node::SoftBreak | Node::HardBreak => {
                out.push(if style.plain { ' ' } else { '\n' });
            }
            Node::Rule => out.push_str(RULE),
            Node::TaskMarker(done) => out.push_str(if *done { "☑ " } else { "☐ " }),
            Node::Elem(tag, children) => render_inline_elem(tag, children, style, &mut out),
        }
    }
    out
}

fn wrap(marker: char, already: bool, children: &[Node<'_>], style: Style, out: &mut String) {
    let inner = render_inline(children, style);
    if already || style.plain || inner.trim().is_empty() {
        out.push_str(&inner);
    } else {
        out.push(marker);
        out.push_str(&inner);
        out.push(marker);
    }
}

fn render_inline_elem(tag: &Tag<'_>, children: &[Node<'_>], style: Style, out: &mut String) {
    match tag {
        Tag::Strong => wrap(
            '*',
            style.bold,
            children,
            Style {
                bold: true,
                ..style
            },
            out,
        ),
        Tag::Emphasis => wrap(
            '_',
            style.italic,
            children,
            Style {
                italic: true,
                ..style
            },
            out,
        ),
        Tag::Strikethrough => wrap(
            '~',
            style.strike,
            children,
            Style {
                strike: true,
                ..style
            },
            out,
        ),
        Tag::Link {
            link_type,
            dest_url,
            ..
        } => {
            let label = render_inline(
                children,
                Style {
                    plain: true,
                    ..style
                },
            );
            out.push_str(&link(*link_type, dest_url, label.trim()));
        }
        Tag::Image { dest_url, .. } => {
            let alt = render_inline(
                children,
                Style {
                    plain: true,
                    ..style
                },
            );
            out.push_str(&link(LinkType::Inline, dest_url, alt.trim()));
        }
        _ => out.push_str(&render_inline(children, style)),
    }
}

fn link(link_type: LinkType, url: &str, label: &str) -> String {
    let url = url.trim();
    if url.is_empty() {
        return label.to_string();
    }
    let is_email = matches!(link_type, LinkType::Email);
    let target = if is_email && !url.starts_with("mailto:") {
        format!("mailto:{url}")
    } else {
        url.to_string()
    };
    // Only web and mail links become Slack links: any other target would
    // be Slack markup of its own (`<!here:x|x>` pings the channel, `<@U1>`
    // mentions), and a relative one links nowhere. They stay text.
    let shown_url = escape(url);
    if !is_linkable(&target) {
        return if label.is_empty() || label == shown_url {
            shown_url
        } else {
            format!("{label} ({shown_url})")
        };
    }
    let target = escape_url(&target);
    if label.is_empty() || (label == shown_url && !is_email) {
        format!("<{target}>")
    } else {
        format!("<{target}|{label}>")
    }
}

/// Whether `target` may be the target of a Slack link: `http://`,
/// `https://` or `mailto:` (in any case).
fn is_linkable(target: &str) -> bool {
    let head: String = target
        .chars()
        .take(8)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| head.starts_with(scheme))
}

/// A URL inside `<...|...>`: entities for `&<>` and `|` percent-encoded,
/// since `|` would end the URL part.
fn escape_url(url: &str) -> String {
    escape(url).replace('|', "%7C").replace(' ', "%20")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn conversion_table() {
        let cases: &[(&str, &str)] = &[
            // Emphasis.
            ("**bold**", "*bold*"),
            ("__bold__", "*bold*"),
            ("*em*", "_em_"),
            ("_em_", "_em_"),
            ("~~strike~~", "~strike~"),
            ("***both***", "_*both*_"),
            ("**bold _and em_ here**", "*bold _and em_ here*"),
            ("**outer **inner** outer**", "*outer inner outer*"),
            ("plain text stays", "plain text stays"),
            // Links.
            (
                "[Baton](https://example.com)",
                "<https://example.com|Baton>",
            ),
            (
                "[**bold** label](https://example.com)",
                "<https://example.com|bold label>",
            ),
            ("<https://example.com/x>", "<https://example.com/x>"),
            (
                "<ada@example.com>",
                "<mailto:ada@example.com|ada@example.com>",
            ),
            ("[https://a.io](https://a.io)", "<https://a.io>"),
            (
                "[q](https://a.io/?x=1&y=2)",
                "<https://a.io/?x=1&amp;y=2|q>",
            ),
            ("[p](https://a.io/a|b)", "<https://a.io/a%7Cb|p>"),
            ("[rel](/docs/x)", "rel (/docs/x)"),
            // Targets other than web and mail links would be Slack markup.
            ("[x](!here:x)", "x (!here:x)"),
            ("[x](!everyone:y)", "x (!everyone:y)"),
            ("[me](@U123:x)", "me (@U123:x)"),
            ("[c](#C1:x)", "c (#C1:x)"),
            ("[j](javascript:alert(1))", "j (javascript:alert(1))"),
            ("[s](slack://open)", "s (slack://open)"),
            ("![i](data:image/png,x)", "i (data:image/png,x)"),
            ("[r][d]\n\n[d]: !here:x", "r (!here:x)"),
            ("<xy:!here>", "xy:!here"),
            ("[up](HTTPS://a.io)", "<HTTPS://a.io|up>"),
            ("<https://evil|safe>", "<https://evil%7Csafe>"),
            ("<@U123> <!channel>", "&lt;@U123&gt; &lt;!channel&gt;"),
            ("![chart](https://a.io/c.png)", "<https://a.io/c.png|chart>"),
            // Headings.
            ("# Title", "*Title*"),
            ("## Sub **bold** title\ntext", "*Sub bold title*\n\ntext"),
            ("Para\n\n### H3\n\nMore", "Para\n\n*H3*\n\nMore"),
            // Lists.
            ("- a\n- b", "• a\n• b"),
            ("* a\n* b", "• a\n• b"),
            ("- a\n  - b\n    - c\n- d", "• a\n    • b\n        • c\n• d"),
            ("1. one\n2. two", "1. one\n2. two"),
            ("3. three\n4. four", "3. three\n4. four"),
            ("1. one\n   - sub\n2. two", "1. one\n    • sub\n2. two"),
            ("- a\n\n- b", "• a\n• b"),
            ("- **bold** item", "• *bold* item"),
            ("- [x] done\n- [ ] todo", "• ☑ done\n• ☐ todo"),
            // Code.
            ("use `cargo test` now", "use `cargo test` now"),
            ("```rust\nfn main() {}\n```", "```\nfn main() {}\n```"),
            ("```\na < b && c\n```", "```\na &lt; b &amp;&amp; c\n```"),
            ("    indented\n    code", "```\nindented\ncode\n```"),
            ("`a<b`", "`a&lt;b`"),
            ("**`x`**", "*`x`*"),
            // Quotes.
            ("> quoted", "> quoted"),
            ("> one\n> two", "> one\n> two"),
            ("> p1\n>\n> p2", "> p1\n>\n> p2"),
            ("> - item", "> • item"),
            // Escaping.
            ("a & b < c > d", "a &amp; b &lt; c &gt; d"),
            ("AT&T", "AT&amp;T"),
            ("<b>html</b>", "&lt;b&gt;html&lt;/b&gt;"),
            ("<!here> x", "&lt;!here&gt; x"),
            // Breaks and blocks.
            ("line one\nline two", "line one\nline two"),
            ("p1\n\np2", "p1\n\np2"),
            ("a\n\n---\n\nb", "a\n\n───\n\nb"),
            ("", ""),
            ("   ", ""),
        ];
        let mut failures = Vec::new();
        for (md, want) in cases {
            let got = from_markdown(md);
            if got != *want {
                failures.push(format!("{md:?}\n   want {want:?}\n    got {got:?}"));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[test]
    fn realistic_llm_answer() {
        let md = "## Deploy status\n\nAll **3** services are up:\n\n1. `api` — healthy\n2. `worker` — healthy\n3. `web` — _degraded_, see [dashboard](https://grafana.example.com/d/abc?from=now-1h&to=now)\n\n> Note: latency > 200ms\n";
        let want = "*Deploy status*\n\nAll *3* services are up:\n\n1. `api` — healthy\n2. `worker` — healthy\n3. `web` — _degraded_, see <https://grafana.example.com/d/abc?from=now-1h&amp;to=now|dashboard>\n\n> Note: latency &gt; 200ms";
        assert_eq!(from_markdown(md), want);
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        for md in [
            ">".repeat(50_000) + " x",
            "- ".repeat(20_000) + "x",
            "*".repeat(20_000) + "x" + &"*".repeat(20_000),
            "[".repeat(20_000) + "x" + &"](u)".repeat(20_000),
        ] {
            let out = from_markdown(&md);
            assert!(out.contains('x'));
        }
    }

    #[test]
    fn plain_text_table() {
        let cases: &[(&str, &str)] = &[
            ("hello", "hello"),
            ("a &amp; b &lt;c&gt;", "a & b <c>"),
            ("&amp;lt;", "&lt;"),
            ("see <https://a.io|the docs>", "see the docs (https://a.io)"),
            ("<https://a.io>", "https://a.io"),
            ("<https://a.io|https://a.io>", "https://a.io"),
            ("<https://a.io/?x=1&amp;y=2>", "https://a.io/?x=1&y=2"),
            ("<mailto:a@b.io|a@b.io>", "a@b.io"),
            ("ask <@U123> and <@U456|bob>", "ask <@U123> and <@U456|bob>"),
            ("in <#C1|general>", "in #general"),
            ("in <#C1>", "in #C1"),
            ("<!here> ping", "@here ping"),
            ("<!subteam^S1|@oncall>", "@oncall"),
            ("<!date^1392734382^{date}|Feb 18>", "Feb 18"),
            ("unbalanced <https://a.io", "unbalanced <https://a.io"),
        ];
        for (input, want) in cases {
            assert_eq!(to_plain_text(input), *want, "{input:?}");
        }
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_input(s in any::<String>()) {
            let _ = from_markdown(&s);
            let _ = to_plain_text(&s);
        }

        #[test]
        fn never_panics_on_markdown_like_input(s in "[-*_~`#>\\[\\]()!<>&|:/ \na-c0-2\\\\]{0,300}") {
            let out = from_markdown(&s);
            // Nothing but whitespace trimming at the end.
            prop_assert_eq!(out.trim_end(), out.as_str());
            let _ = to_plain_text(&s);
        }

        #[test]
        fn plain_words_pass_through(s in "[a-z]{1,8}( [a-z]{1,8}){0,10}") {
            prop_assert_eq!(from_markdown(&s), s);
        }

        #[test]
        fn escaped_text_decodes_back(s in "[a-z &<>]{0,50}") {
            prop_assert_eq!(to_plain_text(&escape(&s)), s);
        }
    }
}
