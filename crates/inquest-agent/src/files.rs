//! Built-in read-only tools over a directory of evidence (logs, metric
//! dumps, deploy notes): `list_files`, `read_file` and `search`. They let
//! the example investigation run with real tools and no MCP server to
//! install. Every path is confined to the root.
//!
//! Reads are bounded: no tool holds more than `limits.max_tool_result_bytes`
//! of a file in memory, a long line is read through without being kept, and
//! every cut leaves a marker saying what was cut and how much. A file whose
//! first 8 KiB are binary ([`limit::is_binary`]: a NUL byte, or more than a
//! tenth invalid UTF-8 or control characters) is shown as `binary file, N
//! bytes; first 256 bytes escaped: ...` by `read_file` and skipped by
//! `search`; invalid UTF-8 in a text file is replaced with U+FFFD, and the
//! result says so.

use std::{
    borrow::Cow,
    collections::BTreeMap,
    fs::File,
    io::{BufRead, BufReader},
    path::PathBuf,
};

use inquest_core::{SessionId, ToolArguments, ToolCall};
use serde_json::{Value, json};

use crate::{
    ToolSpec,
    beneath::Root,
    limit::{self, ToolLimits},
    sink::{BoxFuture, ToolOutcome, ToolRunner},
};

/// Most matches `search` returns.
const MAX_MATCHES: usize = 200;
/// Longest line `search` looks into (and shows); the rest of a longer line
/// is read through unsearched.
const SEARCH_LINE_BYTES: usize = 4 * 1024;
/// Most files `list_files` lists and `search` looks into.
const MAX_FILES: usize = 10_000;
/// Once `search` has read this many bytes it opens no further file.
const SEARCH_SCAN_BYTES: u64 = 256 * 1024 * 1024;

/// The built-in tools, served as one "server" named `server`.
#[derive(Debug, Clone)]
pub struct FileTools {
    server: String,
    root: PathBuf,
    limits: ToolLimits,
}

/// A file opened for reading, its size, and whether its head is binary.
struct Opened {
    reader: BufReader<File>,
    size: u64,
}

impl FileTools {
    pub fn new(server: impl Into<String>, root: impl Into<PathBuf>) -> Self {
        Self {
            server: server.into(),
            root: root.into(),
            limits: ToolLimits::default(),
        }
    }

    /// Results are cut at `limits.max_result_bytes`.
    pub fn with_limits(mut self, limits: ToolLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The root, opened for this call: every path is resolved beneath it
    /// (`beneath.rs`), so `..`, absolute paths and links out are refused.
    fn root(&self) -> Result<Root, String> {
        Root::open(&self.root)
            .map_err(|e| format!("cannot open the evidence root {}: {e}", self.root.display()))
    }

    fn open(root: &Root, path: &str) -> Result<Opened, String> {
        let file = root.open_file(path).map_err(|e| e.to_string())?;
        let size = file
            .metadata()
            .map_err(|e| format!("cannot read {path}: {e}"))?
            .len();
        Ok(Opened {
            reader: BufReader::with_capacity(limit::SNIFF_BYTES, file),
            size,
        })
    }

    /// Lines `start..start + count` of `path`, numbered, within the cap.
    fn read_file(&self, path: &str, start: u64, count: u64) -> Result<String, String> {
        let cannot = |e: std::io::Error| format!("cannot read {path}: {e}");
        let mut file = Self::open(&self.root()?, path)?;
        let head = file.reader.fill_buf().map_err(cannot)?;
        if limit::is_binary(head) {
            return Ok(limit::describe_binary(file.size, head));
        }
        let cap = self.limits.max_result_bytes;
        let mut out = String::new();
        let mut kept = Vec::new();
        let mut line_no: u64 = 0;
        let mut pos: u64 = 0;
        let mut lossy = false;
        let mut shown: u64 = 0;
        while shown < count {
            let Some(read) =
                limit::read_line_capped_sync(&mut file.reader, cap, &mut kept).map_err(cannot)?
            else {
                break;
            };
            line_no += 1;
            let line_start = pos;
            pos += read.total + u64::from(read.terminated);
            if line_no < start {
                continue;
            }
            let raw = kept.strip_suffix(b"\r").unwrap_or(&kept);
            let text = String::from_utf8_lossy(raw);
            lossy |= matches!(text, Cow::Owned(_));
            let numbered = format!("{line_no:>5}  {text}");
            let sep = usize::from(!out.is_empty());
            if out.len() + sep + numbered.len() <= cap && read.dropped(&kept) == 0 {
                if sep == 1 {
                    out.push('\n');
                }
                out.push_str(&numbered);
                shown += 1;
                continue;
            }
            // It does not fit: stop before it, or show the part of a first
            // line that does.
            let (rest, next) = if out.is_empty() {
                let cut = limit::floor_char_boundary(&numbered, cap);
                out.push_str(&numbered[..cut]);
                let content_shown = cut.saturating_sub(numbered.len() - text.len()) as u64;
                (line_start + content_shown, line_no + 1)
            } else {
                (line_start, line_no)
            };
            let what = format!(
                "{path} ({} bytes) over limits.max_tool_result_bytes = {cap}; read on with \
                 start_line = {next}",
                file.size
            );
            out.push('\n');
            out.push_str(&limit::marker(file.size.saturating_sub(rest), &what));
            break;
        }
        if out.is_empty() && line_no < start {
            return Ok(format!(
                "{path} has {line_no} lines; there is nothing from start_line = {start}"
            ));
        }
        if lossy {
            out.push_str(&format!(
                "\n[{path} is not valid UTF-8 throughout: invalid bytes are shown as U+FFFD]"
            ));
        }
        Ok(out)
    }

    /// Case-insensitive substring search over the text files.
    fn search(&self, pattern: &str, only: Option<&str>) -> Result<String, String> {
        let mut hits = Vec::new();
        let mut binary = Vec::new();
        let mut kept = Vec::new();
        let mut scanned: u64 = 0;
        let root = self.root()?;
        let walked = root.walk(MAX_FILES).map_err(|e| e.to_string())?;
        'files: for file in walked.files {
            if only.is_some_and(|p| p != file) {
                continue;
            }
            let Ok(mut opened) = Self::open(&root, &file) else {
                continue;
            };
            if scanned >= SEARCH_SCAN_BYTES {
                hits.push(format!(
                    "[stopped after searching {SEARCH_SCAN_BYTES} bytes; name a file with `path`]"
                ));
                break;
            }
            scanned += opened.size;
            match opened.reader.fill_buf() {
                Ok(head) if limit::is_binary(head) => {
                    binary.push(file);
                    continue;
                }
                Ok(_) => {}
                Err(_) => continue,
            }
            let mut line_no = 0u64;
            while let Ok(Some(read)) =
                limit::read_line_capped_sync(&mut opened.reader, SEARCH_LINE_BYTES, &mut kept)
            {
                line_no += 1;
                let raw = kept.strip_suffix(b"\r").unwrap_or(&kept);
                let line = String::from_utf8_lossy(raw);
                if line.to_lowercase().contains(pattern) {
                    let more = match read.dropped(&kept) {
                        0 => String::new(),
                        n => format!(" …[{n} more bytes of this line]"),
                    };
                    hits.push(format!("{file}:{line_no}: {line}{more}"));
                    if hits.len() == MAX_MATCHES {
                        hits.push(format!("[stopped at {MAX_MATCHES} matches]"));
                        break 'files;
                    }
                }
            }
        }
        let mut out = if hits.is_empty() {
            format!("no line matches {pattern:?}")
        } else {
            hits.join("\n")
        };
        if !binary.is_empty() {
            out.push_str(&format!(
                "\n[binary files not searched: {}]",
                binary.join(", ")
            ));
        }
        Ok(out)
    }

    /// Every file under the root, at most [`MAX_FILES`], with a marker
    /// line when there are more.
    fn list(&self) -> Result<String, String> {
        let walked = self.root()?.walk(MAX_FILES).map_err(|e| e.to_string())?;
        let mut out = walked.files.join("\n");
        if walked.truncated {
            out.push_str(&format!(
                "\n[listing stopped at {MAX_FILES} files; search or read by path]"
            ));
        }
        Ok(out)
    }

    fn run(&self, name: &str, args: &serde_json::Map<String, Value>) -> Result<String, String> {
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        match name {
            "list_files" => self.list(),
            "read_file" => {
                let path = text("path").ok_or("read_file needs a string `path`")?;
                let start = args
                    .get("start_line")
                    .and_then(Value::as_u64)
                    .unwrap_or(1)
                    .max(1);
                let count = args.get("max_lines").and_then(Value::as_u64).unwrap_or(200);
                self.read_file(&path, start, count)
            }
            "search" => {
                let pattern = text("pattern")
                    .ok_or("search needs a string `pattern`")?
                    .to_lowercase();
                if pattern.is_empty() {
                    return Err("search needs a non-empty `pattern`".into());
                }
                let only = text("path");
                self.search(&pattern, only.as_deref())
            }
            other => Err(format!("unknown tool {other:?}")),
        }
    }
}

impl ToolRunner for FileTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "list_files".into(),
                description: "List the evidence files (logs, metrics, deploy notes).".into(),
                input_schema: json!({"type": "object", "properties": {}}),
            },
            ToolSpec {
                name: "read_file".into(),
                description: "Read lines of one evidence file.".into(),
                input_schema: json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "start_line": {"type": "integer", "minimum": 1},
                    "max_lines": {"type": "integer", "minimum": 1}
                }, "required": ["path"]}),
            },
            ToolSpec {
                name: "search".into(),
                description: "Case-insensitive substring search over the evidence files.".into(),
                input_schema: json!({"type": "object", "properties": {
                    "pattern": {"type": "string"},
                    "path": {"type": "string", "description": "only this file"}
                }, "required": ["pattern"]}),
            },
        ]
    }

    fn server_map(&self) -> BTreeMap<String, String> {
        self.specs()
            .into_iter()
            .map(|s| (s.name, self.server.clone()))
            .collect()
    }

    fn available(&self) -> bool {
        self.root.is_dir()
    }

    /// Every built-in file tool only reads.
    fn side_effect(&self, tool: &str) -> inquest_core::SideEffect {
        if self.specs().iter().any(|s| s.name == tool) {
            inquest_core::SideEffect::ReadOnly
        } else {
            inquest_core::SideEffect::Mutating
        }
    }

    fn call<'a>(&'a self, _session: SessionId, call: &'a ToolCall) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            if !self.specs().iter().any(|s| s.name == call.name) {
                return ToolOutcome::refused(format!("unknown tool {:?}", call.name));
            }
            let ToolArguments::Json(args) = &call.arguments else {
                return ToolOutcome::refused(format!(
                    "the arguments of {} were not a JSON object: {}",
                    call.name,
                    call.arguments.as_sent()
                ));
            };
            // File reads block: they run on the blocking pool, never on
            // the async runtime's workers.
            let (tools, name, args) = (self.clone(), call.name.clone(), args.clone());
            let ran = tokio::task::spawn_blocking(move || tools.run(&name, &args))
                .await
                .unwrap_or_else(|e| Err(format!("the file tool stopped: {e}")));
            let (content, is_error) = match ran {
                // `read_file` cuts itself (its marker says where to read on);
                // the others are cut here.
                Ok(text) if call.name == "read_file" => (text, false),
                Ok(text) => {
                    let cap = self.limits.max_result_bytes;
                    let what = self.limits.result_what();
                    (limit::cut_lines(&text, cap, 0, &what).into_owned(), false)
                }
                Err(text) => (text, true),
            };
            ToolOutcome {
                content,
                is_error,
                server: Some(self.server.clone()),
                reached_server: true,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: ToolArguments::from_model(args),
        }
    }

    #[tokio::test]
    async fn reads_searches_and_stays_inside_the_root() {
        let dir = std::env::temp_dir().join(format!("inquest-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        std::fs::write(dir.join("logs/app.log"), "ok\nERROR pool exhausted\nok\n").unwrap();
        let tools = FileTools::new("evidence", &dir);
        let s = SessionId::new();
        let listed = tools.call(s, &call("list_files", "{}")).await;
        assert_eq!(listed.content, "logs/app.log");
        let found = tools
            .call(s, &call("search", r#"{"pattern": "pool"}"#))
            .await;
        assert_eq!(found.content, "logs/app.log:2: ERROR pool exhausted");
        let read = tools
            .call(
                s,
                &call(
                    "read_file",
                    r#"{"path": "logs/app.log", "start_line": 2, "max_lines": 1}"#,
                ),
            )
            .await;
        assert!(!read.is_error && read.content.ends_with("ERROR pool exhausted"));
        let escape = tools
            .call(s, &call("read_file", r#"{"path": "../etc/passwd"}"#))
            .await;
        assert!(escape.is_error && escape.reached_server);
        let unknown = tools.call(s, &call("rm", "{}")).await;
        assert!(unknown.is_error && !unknown.reached_server);
        let bad_json = tools.call(s, &call("search", "{pattern")).await;
        assert!(bad_json.is_error && !bad_json.reached_server);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What a new user tries first: a link in the evidence to a directory
    /// outside it, then a FIFO. Neither leaks nor hangs.
    #[tokio::test]
    async fn a_symlink_out_of_the_root_and_a_fifo_are_refused() {
        let base = std::env::temp_dir().join(format!("inquest-files-l-{}", std::process::id()));
        std::fs::create_dir_all(base.join("evidence")).unwrap();
        std::fs::create_dir_all(base.join("some/dir")).unwrap();
        std::fs::write(base.join("some/dir/secret.txt"), "TOPSECRET\n").unwrap();
        std::os::unix::fs::symlink(base.join("some/dir"), base.join("evidence/outside")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            base.join("evidence/pipe"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let tools = FileTools::new("evidence", base.join("evidence"));
        let s = SessionId::new();
        for args in [
            r#"{"path": "outside/secret.txt"}"#,
            r#"{"path": "pipe"}"#,
            r#"{"path": "/etc/passwd"}"#,
        ] {
            let out = tools.call(s, &call("read_file", args)).await;
            assert!(out.is_error, "{args}: {}", out.content);
            assert!(!out.content.contains("TOPSECRET"));
        }
        for (name, args) in [
            ("search", r#"{"pattern": "topsecret"}"#),
            ("list_files", "{}"),
        ] {
            let out = tools.call(s, &call(name, args)).await;
            assert!(!out.is_error, "{name}: {}", out.content);
            assert!(!out.content.contains("TOPSECRET") && !out.content.contains("secret.txt"));
        }
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[tokio::test]
    async fn binary_long_and_invalid_utf8_files_are_shown_bounded() {
        let dir = std::env::temp_dir().join(format!("inquest-files-b-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut padded = b"12:00 ERROR crashed\n".to_vec();
        padded.extend(std::iter::repeat_n(0u8, 100_000));
        std::fs::write(dir.join("padded.log"), &padded).unwrap();
        let long: String = (1..=1000)
            .map(|i| format!("line {i:04} {}\n", "y".repeat(90)))
            .collect();
        std::fs::write(dir.join("long.log"), &long).unwrap();
        let mut one_line = vec![b'z'; 1_000_000];
        one_line.extend_from_slice(b"\nafter\n");
        std::fs::write(dir.join("one.log"), &one_line).unwrap();
        std::fs::write(dir.join("latin.log"), b"user Jos\xe9 logged in\nok ERROR\n").unwrap();
        let limits = ToolLimits {
            max_result_bytes: 1000,
            ..ToolLimits::default()
        };
        let tools = FileTools::new("evidence", &dir).with_limits(limits);
        let s = SessionId::new();
        let read =
            |path: &str, extra: &str| call("read_file", &format!(r#"{{"path": "{path}"{extra}}}"#));

        let bin = tools.call(s, &read("padded.log", "")).await;
        assert!(!bin.is_error);
        assert!(
            bin.content.starts_with(
                "binary file, 100020 bytes; first 256 bytes escaped: 12:00 ERROR crashed\\n\\x00\\x00"
            ),
            "{}",
            bin.content
        );
        assert!(bin.content.len() < 2000);

        let cut = tools.call(s, &read("long.log", "")).await;
        // 9 whole lines fit in 1000 bytes (each 108 with its number), then
        // the marker: the rest of the file from line 10 (101 bytes a line).
        assert!(
            cut.content.starts_with("    1  line 0001 yyy"),
            "{}",
            cut.content
        );
        assert!(cut.content.contains("    9  line 0009"));
        assert!(!cut.content.contains("line 0010"));
        let rest = long.len() - 9 * 101;
        assert!(
            cut.content.ends_with(&format!(
                "…[cut by inquest: {rest} more bytes of long.log ({} bytes) over \
                 limits.max_tool_result_bytes = 1000; read on with start_line = 10]",
                long.len()
            )),
            "{}",
            cut.content
        );
        let on = tools
            .call(
                s,
                &read("long.log", r#", "start_line": 10, "max_lines": 2"#),
            )
            .await;
        assert!(
            on.content.starts_with("   10  line 0010") && on.content.contains("   11  line 0011")
        );
        let past = tools
            .call(s, &read("long.log", r#", "start_line": 5000"#))
            .await;
        assert_eq!(
            past.content,
            "long.log has 1000 lines; there is nothing from start_line = 5000"
        );

        let one = tools.call(s, &read("one.log", "")).await;
        assert!(one.content.starts_with("    1  zzz"));
        assert!(
            one.content.ends_with(&format!(
                "…[cut by inquest: {} more bytes of one.log (1000007 bytes) over \
                 limits.max_tool_result_bytes = 1000; read on with start_line = 2]",
                1_000_007 - 993
            )),
            "{}",
            &one.content[one.content.len() - 200..]
        );
        assert!(one.content.len() < 1200);

        let latin = tools.call(s, &read("latin.log", "")).await;
        assert!(
            latin
                .content
                .starts_with("    1  user Jos\u{fffd} logged in\n    2  ok ERROR\n[")
        );
        assert!(
            latin
                .content
                .ends_with("invalid bytes are shown as U+FFFD]")
        );

        let found = tools
            .call(s, &call("search", r#"{"pattern": "error"}"#))
            .await;
        assert_eq!(
            found.content,
            "latin.log:2: ok ERROR\n[binary files not searched: padded.log]"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
