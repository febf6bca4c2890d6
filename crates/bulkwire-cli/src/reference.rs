//! The configuration reference (`docs/src/configuration.md`) against the code, both ways: every
//! key the configuration file takes, every `serve` flag and every `BULKWIRE_*` variable the
//! binary reads is on the page, and the page names nothing else; a default written there as a
//! value is the code's.
//!
//! The page's tables say what they list in their first header cell: `key (top level)`,
//! ``key in `[s3]` `` (one table per TOML section), `flag` (with the variable in the second
//! column), `variable`. A row's first code span is its key.
//!
//! Where the keys come from, so that none can slip past: the TOML parser itself (its error for
//! an unknown key lists every key the section accepts, aliases included) and `Config` serialised
//! to JSON (every field, `None` as `null`, with one user so that `[[users]]` has its keys).

use crate::Cli;
use bulkwire_server::{Config, User};
use clap::CommandFactory;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

const PAGE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/src/configuration.md"
));

/// A markdown table: its header cells, and each row's line number and cells.
struct Table {
    header: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

/// The cells of a table line; a `|` inside a code span is text.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let (mut out, mut cell, mut code) = (Vec::new(), String::new(), false);
    for c in inner.chars() {
        match c {
            '`' => {
                code = !code;
                cell.push(c);
            }
            '|' if !code => out.push(std::mem::take(&mut cell).trim().to_string()),
            _ => cell.push(c),
        }
    }
    out.push(cell.trim().to_string());
    out
}

fn tables(md: &str) -> Vec<Table> {
    let mut out: Vec<Table> = Vec::new();
    let mut prev_was_table = false;
    for (i, line) in md.lines().enumerate() {
        let is_table = line.trim_start().starts_with('|');
        if is_table && !prev_was_table {
            out.push(Table {
                header: cells(line),
                rows: Vec::new(),
            });
        } else if is_table && !line.contains("---") {
            out.last_mut().unwrap().rows.push((i + 1, cells(line)));
        }
        prev_was_table = is_table;
    }
    out
}

/// The code spans of a cell, in order.
fn spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The TOML section a key table documents: `""` for the top level, else the name in
/// `` `[name]` `` or `` `[[name]]` ``; `None` for a table of something else.
fn section(header: &[String]) -> Option<String> {
    let first = header.first()?;
    if first == "key (top level)" {
        return Some(String::new());
    }
    first.strip_prefix("key in ")?;
    let name = spans(first).first()?.trim_matches(['[', ']']).to_string();
    Some(name)
}

/// Documented keys: (section, key, default cell, line).
fn documented_keys(md: &str) -> Vec<(String, String, String, usize)> {
    let mut out = Vec::new();
    for t in tables(md) {
        let Some(sec) = section(&t.header) else {
            continue;
        };
        for (line, row) in t.rows {
            let key = spans(&row[0])
                .first()
                .unwrap_or_else(|| panic!("line {line}: a key row without a `key`"))
                .to_string();
            let default = row.get(2).cloned().unwrap_or_default();
            out.push((sec.clone(), key, default, line));
        }
    }
    out
}

/// `Config::default()` as JSON, with one user so that `[[users]]` shows its keys, and one
/// webhook given only its required keys (the others take their defaults).
fn defaults() -> Value {
    let mut c = Config::default();
    c.users.push(User {
        name: "n".into(),
        password: "p".into(),
    });
    let secret = bulkwire_server::events::config::new_secret();
    let hook = format!("[[webhooks]]\nurl = \"http://127.0.0.1:9/\"\nsecret = \"{secret}\"\n");
    c.webhooks = Config::from_toml_str(&hook).unwrap().webhooks;
    serde_json::to_value(&c).unwrap()
}

/// Every (section, key) of the serialised configuration: objects and arrays of objects are
/// sections, anything else a key of the top level.
fn serialised_keys(v: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (k, val) in v.as_object().unwrap() {
        let table = match val {
            Value::Array(a) => a.first().and_then(Value::as_object),
            other => other.as_object(),
        };
        match table {
            Some(m) => out.extend(m.keys().map(|k2| (k.clone(), k2.clone()))),
            None => {
                out.insert((String::new(), k.clone()));
            }
        }
    }
    out
}

/// What the parser takes in a section: the list its error for an unknown key gives.
fn accepted_keys(sec: &str) -> BTreeSet<String> {
    let toml = match sec {
        "" => "zz_not_a_key = 0\n".to_string(),
        s => format!("[{s}]\nzz_not_a_key = 0\n"),
    };
    let err = Config::from_toml_str(&toml).unwrap_err();
    let expected = err
        .split_once("expected")
        .unwrap_or_else(|| panic!("no list of keys in {err:?}"))
        .1;
    let keys: BTreeSet<String> = spans(expected).into_iter().map(String::from).collect();
    assert!(keys.len() > 1, "no list of keys in {err:?}");
    keys
}

/// The default a key's TOML value gives: `VALUE` parsed as `key = VALUE` in its section.
fn parsed_default(sec: &str, key: &str, value: &str) -> Result<Value, String> {
    let toml = match sec {
        "" => format!("{key} = {value}\n"),
        s => format!("[{s}]\n{key} = {value}\n"),
    };
    let v = serde_json::to_value(Config::from_toml_str(&toml)?).unwrap();
    Ok(match sec {
        "" => v[key].clone(),
        s => v[s][key].clone(),
    })
}

#[test]
fn every_configuration_key_is_documented_and_every_documented_key_exists() {
    let defaults = defaults();
    let code = serialised_keys(&defaults);
    let doc = documented_keys(PAGE);
    let documented: BTreeSet<(String, String)> = doc
        .iter()
        .map(|(s, k, _, _)| (s.clone(), k.clone()))
        .collect();
    assert_eq!(doc.len(), documented.len(), "a key documented twice");
    let missing: Vec<_> = code.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&code).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "configuration.md lacks {missing:?} and names {unknown:?}, which the code does not have"
    );

    // What the parser accepts is documented too: each key as a row (a table as its own
    // section's table, compared above), an alias in its row.
    let sections: BTreeSet<&String> = code.iter().map(|(s, _)| s).collect();
    for &sec in &sections {
        // `[[users]]` entries are not parsed with `deny_unknown_fields`: there is no list to
        // ask for, and their keys are the serialised ones, compared above.
        if defaults[sec.as_str()].is_array() {
            continue;
        }
        let rows: Vec<_> = doc.iter().filter(|(s, ..)| s == sec).collect();
        for key in accepted_keys(sec) {
            let as_row = rows.iter().any(|(_, k, ..)| *k == key)
                || (sec.is_empty() && sections.contains(&key));
            let in_a_row = PAGE.lines().any(|l| {
                l.starts_with('|')
                    && rows
                        .iter()
                        .any(|(_, k, ..)| l.contains(&format!("| `{k}` |")))
                    && spans(l).contains(&key.as_str())
            });
            assert!(
                as_row || in_a_row,
                "the parser takes `{key}` in [{sec}], which configuration.md does not name"
            );
        }
    }
}

#[test]
fn every_documented_default_is_the_code_default() {
    let defaults = defaults();
    for (sec, key, cell, line) in documented_keys(PAGE) {
        let code = match sec.as_str() {
            "" => &defaults[key.as_str()],
            s => &defaults[s][key.as_str()],
        };
        let value = cell
            .strip_prefix('`')
            .and_then(|c| c.strip_suffix('`'))
            .filter(|v| !v.contains('`'));
        let array = defaults[sec.as_str()].is_array();
        match value {
            // An entry of a list of tables: its default, a TOML value that is JSON too
            // (`["*"]`).
            Some(v) if array => {
                let parsed: Value = serde_json::from_str(v)
                    .unwrap_or_else(|e| panic!("line {line}: `{v}` does not parse: {e}"));
                let code = &defaults[sec.as_str()][0][key.as_str()];
                assert_eq!(&parsed, code, "line {line}: [[{sec}]] {key}");
            }
            Some(v) => {
                let parsed = parsed_default(&sec, &key, v)
                    .unwrap_or_else(|e| panic!("line {line}: `{key} = {v}` does not parse: {e}"));
                assert_eq!(
                    &parsed, code,
                    "line {line}: [{sec}] {key}: the page says {v}, the code {code}"
                );
            }
            // A key of a `[[users]]` or `[[webhooks]]` entry said in words must be given.
            None if array => {
                assert_eq!(cell, "required", "line {line}: [[{sec}]] {key}")
            }
            // Said in words: the code has no value either (an absent `Option`).
            None => assert!(
                code.is_null(),
                "line {line}: [{sec}] {key}: the page says {cell:?}, the code {code}"
            ),
        }
    }
}

/// The rows of the tables whose first header cell is `first`.
fn rows_of<'a>(ts: &'a [Table], first: &str) -> Vec<&'a (usize, Vec<String>)> {
    ts.iter()
        .filter(|t| t.header.first().is_some_and(|h| h == first))
        .flat_map(|t| &t.rows)
        .collect()
}

/// A variable's name when the cell's first code span is one.
fn variable(cell: &str) -> Option<String> {
    spans(cell)
        .first()
        .filter(|s| s.starts_with("BULKWIRE_"))
        .map(|s| s.to_string())
}

#[test]
fn every_serve_flag_and_its_variable_is_documented_and_nothing_else() {
    let cli = Cli::command();
    let serve = cli.find_subcommand("serve").unwrap();
    let code: BTreeSet<(String, Option<String>)> = serve
        .get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        // Hidden ones are not flags (`--port` exists only to answer with a
        // tip to use `--listen`; the page says so in words).
        .filter(|a| !a.is_hide_set())
        .map(|a| {
            let long = a.get_long().expect("a serve flag without a long name");
            let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
            (format!("--{long}"), env)
        })
        .collect();
    let ts = tables(PAGE);
    let doc: BTreeSet<(String, Option<String>)> = rows_of(&ts, "flag")
        .into_iter()
        .map(|(line, row)| {
            let flag = spans(&row[0])
                .first()
                .and_then(|s| s.split_whitespace().next())
                .unwrap_or_else(|| panic!("line {line}: a flag row without a `--flag`"))
                .to_string();
            (flag, variable(&row[1]))
        })
        .collect();
    assert!(code.len() > 5, "serve has only {code:?}");
    assert_eq!(
        doc, code,
        "configuration.md's serve flags against the code's"
    );
}

/// Every `"BULKWIRE_…"` string in the sources of the crates the binary is built from.
fn variables_in_sources() -> BTreeSet<String> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = BTreeSet::new();
    for name in [
        "bulkwire-cli",
        "bulkwire-server",
        "bulkwire-store",
        "bulkwire-load",
        "bulkwire-units",
        "bulkwire-multipart",
        "bulkwire-xml",
        "bulkwire-xmlrpc",
        "bulkwire-xop",
    ] {
        let mut files = Vec::new();
        rust_files(&crates.join(name).join("src"), &mut files);
        for f in files
            .iter()
            .filter(|f| !f.ends_with("bulkwire-cli/src/reference.rs"))
        {
            let text = std::fs::read_to_string(f).unwrap();
            for piece in text.split("\"BULKWIRE_").skip(1) {
                let end = piece
                    .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                    .unwrap_or(piece.len());
                if end > 0 && piece[end..].starts_with('"') {
                    out.insert(format!("BULKWIRE_{}", &piece[..end]));
                }
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_variable_the_binary_reads_is_documented_and_nothing_else() {
    let code = variables_in_sources();
    let ts = tables(PAGE);
    let mut doc: BTreeSet<String> = rows_of(&ts, "flag")
        .into_iter()
        .filter_map(|(_, row)| variable(&row[1]))
        .collect();
    doc.extend(
        rows_of(&ts, "variable")
            .into_iter()
            .filter_map(|(_, row)| variable(&row[0])),
    );
    assert!(code.contains("BULKWIRE_LOG"), "found only {code:?}");
    assert_eq!(
        doc, code,
        "configuration.md's variables against the sources'"
    );
}

#[test]
fn tables_cells_and_sections_are_read_as_written() {
    let md = "text\n\n| key in `[limits]` | type | default | what |\n|---|---|---|---|\n\
              | `parts` | count | `256` | a `a|b` cell |\n\n| flag | variable |\n|---|---|\n\
              | `--listen ADDR` | `BULKWIRE_LISTEN` (comma-separated) |\n";
    let ts = tables(md);
    assert_eq!(ts.len(), 2);
    assert_eq!(section(&ts[0].header).as_deref(), Some("limits"));
    assert_eq!(section(&ts[1].header), None);
    assert_eq!(
        ts[0].rows[0],
        (
            5,
            vec![
                "`parts`".into(),
                "count".into(),
                "`256`".into(),
                "a `a|b` cell".into()
            ]
        )
    );
    assert_eq!(
        documented_keys(md),
        [(
            "limits".to_string(),
            "parts".to_string(),
            "`256`".to_string(),
            5
        )]
    );
    assert_eq!(
        variable(&ts[1].rows[0].1[1]).as_deref(),
        Some("BULKWIRE_LISTEN")
    );
    let users = ["key in `[[users]]`".to_string()];
    assert_eq!(section(&users).as_deref(), Some("users"));
    assert_eq!(
        section(&["key (top level)".to_string()]).as_deref(),
        Some("")
    );
}
