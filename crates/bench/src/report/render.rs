//! The document as Markdown and as self-contained HTML.

use std::fmt::Write as _;

use super::super::chart::Chart;
use super::document::{Block, Col, Span};

pub(crate) fn md_escape(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '\\' | '*' | '`' | '[' | ']' | '<' | '|' => {
                out.push('\\');
                out.push(c);
            }
            // Inside a word (`write_bw`) an underscore is no emphasis.
            '_' => {
                let word = |j: Option<usize>| {
                    j.and_then(|j| chars.get(j))
                        .is_some_and(|c| c.is_alphanumeric())
                };
                if !(word(i.checked_sub(1)) && word(Some(i + 1))) {
                    out.push('\\');
                }
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

fn md_spans(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|s| match s {
            Span::Text(t) => md_escape(t),
            Span::Strong(t) => format!("**{}**", md_escape(t)),
            Span::Code(t) => format!("`{}`", t.replace('`', "'")),
        })
        .collect()
}

pub(super) fn to_markdown(doc: &[Block]) -> String {
    let mut out = String::new();
    for b in doc {
        match b {
            Block::Heading(level, t) => {
                let _ = writeln!(out, "{} {}\n", "#".repeat(*level as usize), md_escape(t));
            }
            Block::Para(spans) => {
                let _ = writeln!(out, "{}\n", md_spans(spans));
            }
            Block::Table(t) => {
                let head: Vec<String> = t.cols.iter().map(|(h, _)| md_escape(h)).collect();
                let _ = writeln!(out, "| {} |", head.join(" | "));
                let sep: Vec<&str> = t
                    .cols
                    .iter()
                    .map(|(_, c)| if *c == Col::Num { "---:" } else { "---" })
                    .collect();
                let _ = writeln!(out, "| {} |", sep.join(" | "));
                for row in &t.rows {
                    let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
                    let _ = writeln!(out, "| {} |", cells.join(" | "));
                }
                out.push('\n');
            }
            Block::Chart { file, title } => {
                let _ = writeln!(out, "![{}]({file})\n", md_escape(title));
            }
            Block::List(items) => {
                for i in items {
                    let _ = writeln!(out, "- {}", md_spans(i));
                }
                out.push('\n');
            }
        }
    }
    out
}

// ----------------------------------------------------------------- html

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn html_spans(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|s| match s {
            Span::Text(t) => html_escape(t),
            Span::Strong(t) => format!("<strong>{}</strong>", html_escape(t)),
            Span::Code(t) => format!("<code>{}</code>", html_escape(t)),
        })
        .collect()
}

const CSS: &str = "\
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;color:#222;background:#fff;margin:0}
main{max-width:980px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:1.6em;margin:.2em 0 .6em}
h2{font-size:1.25em;margin:1.8em 0 .5em;padding-bottom:.2em;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin:1.4em 0 .4em}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.93em}
th,td{padding:4px 10px;border-bottom:1px solid #e4e4e4;text-align:left;vertical-align:top}
th{background:#f4f4f4;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.pass{color:#006b4f;font-weight:600}
td.fail{color:#b03a00;font-weight:600}
td.inconclusive{color:#6b5a00;font-weight:600}
tbody tr:nth-child(even){background:#fafafa}
figure{margin:1em 0 1.6em}
figure svg{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#666;font-size:.9em}
code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.92em;background:#f4f4f4;padding:0 3px;border-radius:3px}
.scroll{overflow-x:auto}
";

/// The SVG as an inline element: without an XML declaration, if any.
fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => "",
    }
}

pub(super) fn to_html(doc: &[Block], scenario: &str, charts: &[Chart]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>vssd bench: {}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n<main>\n",
        html_escape(scenario)
    );
    for b in doc {
        match b {
            Block::Heading(level, t) => {
                let _ = writeln!(out, "<h{level}>{}</h{level}>", html_escape(t));
            }
            Block::Para(spans) => {
                let _ = writeln!(out, "<p>{}</p>", html_spans(spans));
            }
            Block::Table(t) => {
                let class = |c: Col, cell: &str| match c {
                    Col::Num => " class=\"num\"",
                    Col::Status if cell == "PASS" => " class=\"pass\"",
                    Col::Status if cell.starts_with("FAIL") => " class=\"fail\"",
                    Col::Status if cell.starts_with("INCONCLUSIVE") => " class=\"inconclusive\"",
                    _ => "",
                };
                out.push_str("<div class=\"scroll\"><table>\n");
                if t.cols.iter().any(|(h, _)| !h.is_empty()) {
                    out.push_str("<thead><tr>");
                    for (h, c) in &t.cols {
                        let _ = write!(out, "<th{}>{}</th>", class(*c, ""), html_escape(h));
                    }
                    out.push_str("</tr></thead>\n");
                }
                out.push_str("<tbody>\n");
                for row in &t.rows {
                    out.push_str("<tr>");
                    for (i, cell) in row.iter().enumerate() {
                        let c = t.cols.get(i).map(|c| c.1).unwrap_or(Col::Text);
                        let _ = write!(out, "<td{}>{}</td>", class(c, cell), html_escape(cell));
                    }
                    out.push_str("</tr>\n");
                }
                out.push_str("</tbody></table></div>\n");
            }
            Block::Chart { file, .. } => {
                if let Some(c) = charts.iter().find(|c| &c.file_name == file) {
                    // The title is drawn in the chart; the label is for
                    // screen readers, the caption names the file.
                    let _ = writeln!(
                        out,
                        "<figure role=\"img\" aria-label=\"{}\">\n{}\n<figcaption><code>{}</code></figcaption>\n</figure>",
                        html_escape(&c.title),
                        inline_svg(&c.svg),
                        html_escape(&c.file_name)
                    );
                }
            }
            Block::List(items) => {
                out.push_str("<ul>\n");
                for i in items {
                    let _ = writeln!(out, "<li>{}</li>", html_spans(i));
                }
                out.push_str("</ul>\n");
            }
        }
    }
    out.push_str("</main>\n</body>\n</html>\n");
    out
}
