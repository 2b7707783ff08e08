//! One style for every error the command prints, usage or runtime: `pgcompress: error: ...`,
//! each cause said once, and at most one hint line.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use std::fmt::Display;

/// Prints `pgcompress: error: MESSAGE`.
pub fn print(message: impl Display) {
    eprintln!("pgcompress: error: {message}");
}

/// The error and its causes on one line, `a: b: c`, leaving out a cause whose text is already
/// there: many errors print their source in their own message, and saying it twice reads as
/// two failures.
pub fn chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// A command line that clap refused, in the one style: the message, then a hint (clap's tip
/// when it has one, else where the help is). `path` is the command, `pgcompress archive get`.
pub fn print_usage(e: &clap::Error, path: &str) {
    let rendered = e.render().to_string();
    let message = match (e.kind(), std::error::Error::source(e)) {
        (ErrorKind::ValueValidation, Some(source)) => value_message(e, &source.to_string()),
        _ => first_paragraph(&rendered),
    };
    print(message);
    let tip = rendered
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("tip: "));
    match tip {
        Some(tip) => eprintln!("pgcompress: hint: {tip}"),
        None => eprintln!("pgcompress: hint: see '{path} --help'"),
    }
}

/// `--flag: why`, naming the value only when the reason does not already.
fn value_message(e: &clap::Error, reason: &str) -> String {
    let text = |k| match e.get(k) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    let arg = text(ContextKind::InvalidArg);
    // `--method <SPEC>` -> `--method`.
    let flag = arg.split(' ').next().unwrap_or_default();
    let value = text(ContextKind::InvalidValue);
    if value.is_empty() || reason.contains(&value) {
        format!("{flag}: {reason}")
    } else {
        format!("{flag}: invalid value \"{value}\": {reason}")
    }
}

/// clap's message without its `error: ` prefix, usage and tips: the lines before the first
/// blank one, joined.
fn first_paragraph(rendered: &str) -> String {
    let body = rendered.strip_prefix("error: ").unwrap_or(rendered);
    body.lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose message already holds its source's, as many library errors do.
    #[derive(Debug)]
    struct Repeats {
        path: &'static str,
        source: std::io::Error,
    }

    impl std::fmt::Display for Repeats {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.path, self.source)
        }
    }

    impl std::error::Error for Repeats {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_already_said_is_not_said_again() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(Repeats {
            path: "/x",
            source: io,
        })
        .context("reading WAL");
        assert_eq!(chain(&e), "reading WAL: /x: no such file");
    }

    #[test]
    fn clap_paragraphs_become_one_line() {
        let rendered = "error: the following required arguments were not provided:\n  <PATH>\n\n\
                        Usage: pgcompress archive get <NAME> <PATH>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            first_paragraph(rendered),
            "the following required arguments were not provided: <PATH>"
        );
    }
}
