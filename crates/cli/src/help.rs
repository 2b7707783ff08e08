//! Help that wraps its prose to the terminal and never breaks an example.
//!
//! clap wraps everything it prints, the text after the options included, so a config snippet
//! or a command line in it comes out cut in two on a narrow terminal, and pasted it fails.
//! Each command's after-help text is therefore taken out of clap's hands and printed here:
//! its paragraphs (lines that start at the margin) wrapped to the terminal, its indented
//! lines (examples, settings tables) as written.

use clap::{Command, CommandFactory};
use std::collections::BTreeMap;

use crate::args::Cli;

/// Width when standard output is not a terminal and COLUMNS is unset (clap's default).
const DEFAULT_WIDTH: usize = 100;

/// The command-line definition, without after-help texts, and those texts by command path
/// (`pgcompress archive push`).
pub fn command() -> (Command, BTreeMap<String, String>) {
    let mut texts = BTreeMap::new();
    let cmd = take_after_help(Cli::command(), "pgcompress".to_owned(), &mut texts);
    (cmd, texts)
}

fn take_after_help(cmd: Command, path: String, texts: &mut BTreeMap<String, String>) -> Command {
    if let Some(text) = cmd.get_after_help() {
        texts.insert(path.clone(), text.to_string());
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    let mut cmd = cmd.after_help(clap::builder::Resettable::<clap::builder::StyledStr>::Reset);
    for name in names {
        let sub_path = format!("{path} {name}");
        cmd = cmd.mut_subcommand(name, |s| take_after_help(s, sub_path, texts));
    }
    cmd
}

/// The command the arguments name, `pgcompress archive get` (also for `pgcompress help
/// archive get`): the subcommand words, as far as they name one.
pub fn command_path() -> String {
    let root = Cli::command();
    let mut cmd = &root;
    let mut path = String::from("pgcompress");
    let words = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    for (i, word) in words.enumerate() {
        if i == 0 && word == "help" {
            continue;
        }
        match cmd.find_subcommand(&word) {
            Some(sub) => {
                path.push(' ');
                path.push_str(sub.get_name());
                cmd = sub;
            }
            None => break,
        }
    }
    path
}

/// Prints the help clap rendered, then the command's after-help text wrapped here.
pub fn print(e: &clap::Error, texts: &BTreeMap<String, String>) {
    let _ = e.print();
    let Some(text) = texts.get(&command_path()) else {
        return;
    };
    let text = format!("\n{}", wrap(text, width()));
    if e.use_stderr() {
        eprintln!("{text}");
    } else {
        outln!("{text}");
    }
}

/// The terminal's width, as clap finds it: standard output's terminal, else COLUMNS.
fn width() -> usize {
    terminal_size::terminal_size()
        .map(|(w, _)| usize::from(w.0))
        .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
        .filter(|w| *w > 0)
        .unwrap_or(DEFAULT_WIDTH)
}

/// Wraps the lines of `text` that start at the margin (prose) to `width`; indented lines
/// (examples, tables) and blank ones stay as they are.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / width.max(1));
    for line in text.lines() {
        if !out.is_empty() {
            out.push('\n');
        }
        if line.starts_with(char::is_whitespace) || line.chars().count() <= width {
            out.push_str(line);
            continue;
        }
        let mut used = 0;
        for word in line.split(' ').filter(|w| !w.is_empty()) {
            let len = word.chars().count();
            if used > 0 && used + 1 + len > width {
                out.push('\n');
                used = 0;
            } else if used > 0 {
                out.push(' ');
                used += 1;
            }
            out.push_str(word);
            used += len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_wraps_and_examples_do_not() {
        let text = "one two three four five six\n  pgcompress archive push --repo /backup/wal %p\n\nseven eight";
        assert_eq!(
            wrap(text, 10),
            "one two\nthree four\nfive six\n  pgcompress archive push --repo /backup/wal %p\n\nseven\neight"
        );
        assert_eq!(wrap(text, 200), text);
    }

    #[test]
    fn every_after_help_is_taken_out_of_clap() {
        let (cmd, texts) = command();
        assert!(texts.contains_key("pgcompress archive"));
        assert!(texts.contains_key("pgcompress archive get"));
        assert!(cmd.get_after_help().is_none());
        let archive = cmd.find_subcommand("archive").expect("archive");
        assert!(archive.get_after_help().is_none());
        assert!(archive
            .find_subcommand("get")
            .expect("get")
            .get_after_help()
            .is_none());
    }
}
