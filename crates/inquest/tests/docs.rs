//! The documentation against the code it documents: every key the config
//! loader accepts is in `deploy/inquest.example.toml` (set, or commented
//! out where optional), every example config in the repository loads, and
//! every `inquest …` command line in the READMEs names subcommands and
//! flags the CLI has.
//!
//! The loader's keys are read from the loader itself: a TOML document
//! with an unknown key in a section makes `Config::from_toml` answer with
//! every key that section accepts (each section refuses unknown keys).
//! The CLI's are read from the binary's `--help`.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::Command,
};

use inquest_server::{Config, Overrides};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

// ---------------------------------------------------------------------
// The loader's keys
// ---------------------------------------------------------------------

/// A key no section has.
const PROBE: &str = "zz_not_a_key";
/// A name for a map's entry (`[tenants.overrides.<name>]`).
const ENTRY: &str = "zz_entry";

/// The keys of the section `header` opens (after `before`), as the loader
/// lists them when it meets an unknown one; `None` when it does not
/// answer with a list (not a section, or a value of another shape).
fn keys_of(before: &str, header: &str) -> Option<Vec<String>> {
    let doc = format!("{before}{header}\n{PROBE} = 1\n");
    let message = match Config::from_toml(&doc) {
        Ok(_) => return None,
        Err(e) => e.to_string(),
    };
    let line = message
        .lines()
        .find(|l| l.contains(&format!("unknown field `{PROBE}`")))?;
    let listed = line.split_once(", expected")?.1;
    Some(
        listed
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect(),
    )
}

/// Every key path the loader accepts, sections joined with `.`, a map's
/// entry as `*`: `limits.max_message_bytes`, `providers.price.input_per_mtok`,
/// `tenants.overrides.*.daily_token_budget`.
fn loader_keys() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let top = keys_of("", "").expect("the top level refuses unknown keys and lists its own");
    // (path, what to write before a probe of one of its keys, its header)
    let mut stack: Vec<(Vec<String>, String, String, Vec<String>)> =
        vec![(Vec::new(), String::new(), String::new(), top)];
    while let Some((path, before, header, keys)) = stack.pop() {
        for key in keys {
            let mut inner = path.clone();
            inner.push(key.clone());
            let dotted = |p: &[String]| {
                p.iter()
                    .map(|s| if s == "*" { ENTRY } else { s.as_str() })
                    .collect::<Vec<_>>()
                    .join(".")
            };
            let table = format!("[{}]", dotted(&inner));
            let array = format!("[[{}]]", dotted(&inner));
            let mut entry = inner.clone();
            entry.push("*".into());
            let map = format!("[{}]", dotted(&entry));
            // A table inside an array of tables needs its element opened.
            let before_inner = format!("{before}{header}\n");
            if let Some(keys) = keys_of(&before_inner, &table) {
                stack.push((inner, before_inner, table, keys));
            } else if let Some(keys) = keys_of(&before_inner, &array) {
                stack.push((inner, before_inner, array, keys));
            } else if let Some(keys) = keys_of(&before_inner, &map) {
                stack.push((entry, before_inner, map, keys));
            } else {
                found.insert(inner.join("."));
            }
        }
    }
    found
}

/// The key paths the example file shows, set or commented out: every line
/// (its leading `#`s taken off) that reads as TOML on its own, under the
/// section header (set or commented) above it. Prose does not parse.
fn example_keys(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut section: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim_start_matches(|c: char| c == '#' || c.is_whitespace());
        let header = line
            .strip_prefix("[[")
            .and_then(|l| l.split_once("]]"))
            .or_else(|| line.strip_prefix('[').and_then(|l| l.split_once(']')));
        if let Some((name, rest)) = header
            && (rest.trim().is_empty() || rest.trim_start().starts_with('#'))
            && !name.contains(' ')
        {
            section = name.split('.').map(str::to_owned).collect();
            continue;
        }
        let Ok(table) = line.parse::<toml::Table>() else {
            continue;
        };
        let mut stack: Vec<(Vec<String>, &toml::Table)> = vec![(section.clone(), &table)];
        while let Some((path, table)) = stack.pop() {
            for (key, value) in table {
                let mut inner = path.clone();
                inner.push(key.clone());
                match value {
                    toml::Value::Table(t) if !t.is_empty() => stack.push((inner, t)),
                    _ => {
                        found.insert(inner.join("."));
                    }
                }
            }
        }
    }
    found
}

/// Whether the example's `shown` path stands for the loader's `key`
/// (`*` is any map entry's name). A key whose value is a map of plain
/// values (`servers = { github = "mutating" }`) is shown with an entry.
fn stands_for(shown: &str, key: &str) -> bool {
    let (shown, key): (Vec<&str>, Vec<&str>) =
        (shown.split('.').collect(), key.split('.').collect());
    shown.len() >= key.len() && shown.iter().zip(&key).all(|(s, k)| *k == "*" || s == k)
}

#[test]
fn the_loader_lists_its_keys() {
    let keys = loader_keys();
    for key in [
        "listen",
        "limits.max_message_bytes",
        "lease.ttl",
        "providers.kind",
        "providers.price.input_per_mtok",
        "providers.delay",
        "mcp.config",
        "tools.files_root",
        "agent.iteration_budget",
        "skills.prompt",
        "tenants.overrides.*.daily_token_budget",
        "auth.oidc.issuer",
        "tls.client_ca",
        "http.allowed_hosts",
    ] {
        assert!(keys.contains(key), "{key} not found among {keys:#?}");
    }
}

#[test]
fn every_key_the_loader_accepts_is_in_the_example_config() {
    let shown = example_keys(&read("deploy/inquest.example.toml"));
    let missing: Vec<String> = loader_keys()
        .into_iter()
        .filter(|key| !shown.iter().any(|s| stands_for(s, key)))
        .collect();
    assert!(
        missing.is_empty(),
        "deploy/inquest.example.toml does not show these keys (set or commented out): {missing:#?}"
    );
    // And it shows nothing the loader would refuse.
    let keys = loader_keys();
    let unknown: Vec<&String> = shown
        .iter()
        .filter(|s| !keys.iter().any(|k| stands_for(s, k)))
        .collect();
    assert!(
        unknown.is_empty(),
        "keys the loader does not know: {unknown:?}"
    );
}

/// Every section of the example uncommented on its own loads: a commented
/// example that would be refused is no example.
#[test]
fn the_example_config_loads_set_and_commented_out() {
    let text = read("deploy/inquest.example.toml");
    let config = Config::from_toml(&text).expect("deploy/inquest.example.toml parses");
    config
        .validate()
        .expect("deploy/inquest.example.toml is valid");

    // Each commented block (consecutive `# key = value` lines under one
    // header) uncommented into the file, one block at a time.
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut current: Option<usize> = None;
    for (i, line) in lines.iter().enumerate() {
        // `# # key = …` is an alternative to the line above it: part of
        // the block, left commented when the block is uncommented.
        let bare = line.trim_start_matches(|c: char| c == '#' || c.is_whitespace());
        let is_setting =
            line.starts_with('#') && bare.parse::<toml::Table>().is_ok_and(|t| !t.is_empty());
        let is_header = line.starts_with("# [") && !bare.contains(' ');
        if is_setting || is_header {
            let start = *current.get_or_insert(i);
            blocks.entry(start).or_default().push(i);
        } else {
            current = None;
        }
    }
    assert!(blocks.len() > 5, "too few commented blocks: {blocks:?}");
    for (start, block) in blocks {
        let uncommented: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                if block.contains(&i) {
                    line.strip_prefix('#')
                        .unwrap_or(line)
                        .trim_start()
                        .to_owned()
                } else {
                    (*line).to_owned()
                }
            })
            .collect();
        let doc = uncommented.join("\n");
        if let Err(e) = Config::from_toml(&doc) {
            panic!(
                "the commented block at line {} does not parse when uncommented: {e}",
                start + 1
            );
        }
    }
}

/// Every other config in the repository loads as `serve --config` would
/// load it, and the files it names exist.
#[test]
fn every_example_config_loads() {
    for path in [
        "examples/checkout-latency/inquest.toml",
        "examples/checkout-latency/slow.toml",
    ] {
        let full = repo().join(path);
        let config = Config::load(Some(&full), Overrides::default())
            .unwrap_or_else(|e| panic!("{path}: {e:#}"));
        for provider in &config.providers {
            if let Some(script) = &provider.script {
                assert!(script.is_file(), "{path}: {} is missing", script.display());
            }
        }
        if let Some(root) = &config.tools.files_root {
            assert!(root.is_dir(), "{path}: {} is missing", root.display());
        }
    }
    // The TOML blocks of the READMEs and docs parse as config.
    for doc in [
        "README.md",
        "docs/security.md",
        "examples/checkout-latency/README.md",
    ] {
        for block in fenced(&read(doc), "toml") {
            Config::from_toml(&block)
                .unwrap_or_else(|e| panic!("{doc}: a toml block: {e}\n{block}"));
        }
    }
}

/// The fenced blocks of `language` in a Markdown text.
fn fenced(text: &str, language: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for line in text.lines() {
        match &mut open {
            None if line.trim_start() == format!("```{language}") => open = Some(String::new()),
            Some(block) if line.trim_start().starts_with("```") => {
                blocks.push(std::mem::take(block));
                open = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

// ---------------------------------------------------------------------
// The README's commands
// ---------------------------------------------------------------------

/// What `inquest <path> --help` shows: its subcommands and long flags.
struct Help {
    subcommands: BTreeSet<String>,
    flags: BTreeSet<String>,
}

fn help<'a>(
    path: &[String],
    cache: &'a mut BTreeMap<Vec<String>, Option<Help>>,
) -> Option<&'a Help> {
    cache
        .entry(path.to_vec())
        .or_insert_with(|| {
            let out = Command::new(env!("CARGO_BIN_EXE_inquest"))
                .args(path)
                .arg("--help")
                .env("NO_COLOR", "1")
                .output()
                .expect("running inquest --help");
            if !out.status.success() {
                return None;
            }
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut subcommands = BTreeSet::new();
            let mut flags = BTreeSet::new();
            let mut in_commands = false;
            for line in text.lines() {
                if line.starts_with("Commands:") {
                    in_commands = true;
                    continue;
                }
                if !line.starts_with(' ') {
                    in_commands = false;
                }
                let trimmed = line.trim_start();
                if in_commands {
                    if let Some(name) = trimmed.split_whitespace().next() {
                        subcommands.insert(name.to_owned());
                    }
                } else if trimmed.starts_with('-') {
                    for part in trimmed.split([',', ' ']) {
                        if let Some(flag) = part.strip_prefix("--") {
                            let flag = flag.split(['=', '<', '[']).next().unwrap_or_default();
                            flags.insert(format!("--{flag}"));
                        }
                    }
                }
            }
            Some(Help { subcommands, flags })
        })
        .as_ref()
}

/// Shell lines of a text's `sh` blocks, continuations joined, comments
/// and `$( … )` taken apart: each string one simple command.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for block in fenced(text, "sh") {
        let joined = block.replace("\\\n", " ");
        for line in joined.lines() {
            let mut line = strip_comment(line);
            // Command substitutions are commands of their own.
            while let Some(start) = line.find("$(") {
                let Some(len) = line[start..].find(')') else {
                    break;
                };
                out.push(line[start + 2..start + len].to_owned());
                line.replace_range(start..start + len + 1, "X");
            }
            for part in line.split([';', '&']) {
                for piece in part.split(" | ").flat_map(|p| p.split("||")) {
                    out.push(piece.trim().to_owned());
                }
            }
        }
    }
    out
}

/// `line` without its shell comment (a `#` after a space, outside quotes).
fn strip_comment(line: &str) -> String {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if previous.is_whitespace() => return line[..i].to_owned(),
            _ => {}
        }
        previous = c;
    }
    line.to_owned()
}

/// Words of a command, quotes removed (a quoted string is one word).
fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut any = false;
    for c in command.chars() {
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (_, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// The `inquest` invocations of a command: the words after `inquest`,
/// when what precedes it is only environment assignments or a shell
/// keyword; a `a|b|c` word (the README's alternatives) makes one
/// invocation per alternative.
fn invocations(command: &str) -> Vec<Vec<String>> {
    let words = words(command);
    let Some(at) = words.iter().position(|w| w == "inquest") else {
        return Vec::new();
    };
    let prefix_ok = words[..at].iter().all(|w| {
        ["do", "then", "else", "time", "exec"].contains(&w.as_str())
            || w.split_once('=')
                .is_some_and(|(name, _)| name.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
    });
    if !prefix_ok {
        return Vec::new();
    }
    let mut all = vec![Vec::new()];
    for word in &words[at + 1..] {
        let word = word
            .trim_matches(|c| c == '[' || c == ']')
            .trim_end_matches("...");
        let word = word.trim_end_matches(']');
        let alternatives: Vec<&str> = if !word.starts_with('-') && word.contains('|') {
            word.split('|').collect()
        } else {
            vec![word]
        };
        all = all
            .into_iter()
            .flat_map(|prefix: Vec<String>| {
                alternatives.iter().map(move |alt| {
                    let mut next = prefix.clone();
                    next.push((*alt).to_owned());
                    next
                })
            })
            .collect();
    }
    all
}

/// What is wrong with one invocation, if anything.
fn check(args: &[String], cache: &mut BTreeMap<Vec<String>, Option<Help>>) -> Option<String> {
    let mut path: Vec<String> = Vec::new();
    let mut positional = false;
    let mut flags = Vec::new();
    for arg in args {
        if arg.starts_with("--") {
            flags.push(arg.split('=').next().unwrap_or_default().to_owned());
            continue;
        }
        if arg.starts_with('-') || arg.is_empty() {
            continue;
        }
        let Some(help) = help(&path, cache) else {
            return Some(format!("`inquest {} --help` fails", path.join(" ")));
        };
        if !positional && help.subcommands.contains(arg) {
            path.push(arg.clone());
        } else if path.is_empty() {
            return Some(format!("`{arg}` is not a subcommand"));
        } else {
            positional = true;
        }
    }
    let Some(help) = help(&path, cache) else {
        return Some(format!("`inquest {} --help` fails", path.join(" ")));
    };
    if !help.subcommands.is_empty() && !flags.iter().any(|f| f == "--help") {
        return Some(format!("`inquest {}` needs a subcommand", path.join(" ")));
    }
    flags
        .iter()
        .find(|f| !help.flags.contains(*f))
        .map(|f| format!("`inquest {}` has no flag {f}", path.join(" ")))
}

#[test]
fn the_readme_commands_name_real_subcommands_and_flags() {
    let mut cache = BTreeMap::new();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for doc in [
        "README.md",
        "examples/checkout-latency/README.md",
        "docs/security.md",
    ] {
        for command in commands(&read(doc)) {
            for args in invocations(&command) {
                checked += 1;
                if let Some(why) = check(&args, &mut cache) {
                    wrong.push(format!("{doc}: `inquest {}`: {why}", args.join(" ")));
                }
            }
        }
    }
    assert!(checked > 25, "only {checked} inquest commands found");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The checker itself catches a made-up subcommand, a made-up flag and a
/// flag of another subcommand.
#[test]
fn the_command_check_catches_what_the_cli_lacks() {
    let mut cache = BTreeMap::new();
    let args = |s: &str| invocations(s).pop().unwrap_or_default();
    assert_eq!(
        check(&args("inquest serve --listen 127.0.0.1:1"), &mut cache),
        None
    );
    assert_eq!(
        check(
            &args("INQUEST_SERVER=x inquest session get|cancel S"),
            &mut cache
        ),
        None
    );
    for bad in [
        "inquest serv --listen x",
        "inquest serve --lissen x",
        "inquest watch S --id-only",
        "inquest session",
    ] {
        assert!(check(&args(bad), &mut cache).is_some(), "{bad} passed");
    }
    assert!(invocations("kubectl -n inquest create secret").is_empty());
}
