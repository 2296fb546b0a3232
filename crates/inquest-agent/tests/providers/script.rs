//! The script provider: replays in order, continues after a resume (a new
//! provider instance given the stored transcript), then closes.

use std::path::PathBuf;

use inquest_agent::{ChainCursor, ProviderChain, ProviderConfig, ProviderKind, script};
use inquest_core::{TokenUsage, ToolArguments};

use crate::support::{request, result, tools, user};

/// A script file removed when dropped.
struct ScriptFile(PathBuf);

impl ScriptFile {
    fn new(name: &str, text: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("inquest-agent-{}-{name}.json", std::process::id()));
        std::fs::write(&path, text).expect("script written");
        Self(path)
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const SCRIPT: &str = r#"[
  {"text": "Reading the app log.",
   "tool_calls": [{"name": "read_log", "arguments": {"file": "app.log"}},
                  {"name": "read_log", "arguments": "{\"file\": broken"}],
   "usage": {"input_tokens": 900, "output_tokens": 40}},
  {"tool_calls": [{"name": "read_log", "arguments": {"file": "db.log"}}]},
  {"text": "The connection pool was exhausted."}
]"#;

fn chain(file: &ScriptFile) -> ProviderChain {
    let config = ProviderConfig {
        script: Some(file.0.clone()),
        ..ProviderConfig::new(ProviderKind::Script)
    };
    ProviderChain::from_config_with_env(&[config], |_| None).expect("script chain builds")
}

#[tokio::test]
async fn script_replays_in_order_and_continues_after_resume() {
    let file = ScriptFile::new("replay", SCRIPT);
    let tools = tools();
    let mut transcript = vec![user("checkout is slow")];

    let first = chain(&file);
    let mut cursor = ChainCursor::new();
    let a = first
        .complete(&mut cursor, &request(&transcript, &tools))
        .await
        .unwrap();
    assert_eq!(a.provider, "script");
    let c = a.completion;
    assert_eq!(c.text, "Reading the app log.");
    assert_eq!(c.usage, TokenUsage::new(900, 40));
    assert_eq!(c.tool_calls.len(), 2);
    assert_eq!(
        c.tool_calls[1].arguments,
        ToolArguments::Raw("{\"file\": broken".into())
    );
    let ids: Vec<String> = c.tool_calls.iter().map(|t| t.id.clone()).collect();
    transcript.push(inquest_core::Message::Assistant {
        text: c.text.into(),
        tool_calls: c.tool_calls.into_iter().map(Into::into).collect(),
    });
    for id in &ids {
        transcript.push(result(id, "ok", false));
    }

    let b = first
        .complete(&mut cursor, &request(&transcript, &tools))
        .await
        .unwrap()
        .completion;
    assert_eq!(b.tool_calls[0].name, "read_log");
    assert_ne!(b.tool_calls[0].id, ids[0], "call ids are unique per turn");
    // No usage in the script: estimated, never zero for a real prompt.
    assert!(b.usage.input_tokens > 0);
    transcript.push(inquest_core::Message::Assistant {
        text: b.text.into(),
        tool_calls: b.tool_calls.iter().cloned().map(Into::into).collect(),
    });
    transcript.push(result(&b.tool_calls[0].id, "ok", false));
    drop(first);

    // "Restart": a new provider, the stored transcript, a new burst.
    let resumed = chain(&file);
    let mut cursor = ChainCursor::new();
    let c = resumed
        .complete(&mut cursor, &request(&transcript, &tools))
        .await
        .unwrap()
        .completion;
    assert_eq!(c.text, "The connection pool was exhausted.");
    assert!(c.tool_calls.is_empty());
    transcript.push(inquest_core::Message::Assistant {
        text: c.text.into(),
        tool_calls: vec![].into(),
    });

    // Past the end: the closing plain reply, every time.
    transcript.push(user("anything else?"));
    for _ in 0..2 {
        let d = resumed
            .complete(&mut cursor, &request(&transcript, &tools))
            .await
            .unwrap()
            .completion;
        assert_eq!(d.text, script::DEFAULT_FINAL_TEXT);
        assert!(d.tool_calls.is_empty());
    }
}

#[tokio::test]
async fn a_broken_script_fails_the_chain_build() {
    let file = ScriptFile::new("broken", r#"[{"text": "ok"}, {"text": ""}]"#);
    let config = ProviderConfig {
        script: Some(file.0.clone()),
        ..ProviderConfig::new(ProviderKind::Script)
    };
    let err = ProviderChain::from_config_with_env(&[config], |_| None)
        .err()
        .expect("empty reply rejected");
    assert!(err.to_string().contains("reply 1"), "{err}");
    let missing = ProviderConfig {
        script: Some(file.0.with_extension("missing")),
        ..ProviderConfig::new(ProviderKind::Script)
    };
    assert!(ProviderChain::from_config_with_env(&[missing], |_| None).is_err());
}

/// After a compaction the script keeps its place: the summary message's
/// count of model turns it stands in for counts, and a summary request is
/// answered without being a step of the script.
#[tokio::test]
async fn script_keeps_its_place_across_a_compaction() {
    let file = ScriptFile::new("compacted", SCRIPT);
    let chain = chain(&file);
    let mut cursor = ChainCursor::new();
    let summary = inquest_core::compaction::summary_message("earlier work", Some(2));
    let transcript = vec![user("checkout is slow"), user(&summary)];
    let c = chain
        .complete(&mut cursor, &request(&transcript, &[]))
        .await
        .unwrap()
        .completion;
    assert_eq!(c.text, "The connection pool was exhausted.");
    let mut req = request(&transcript, &[]);
    req.system = inquest_core::compaction::SUMMARY_SYSTEM;
    let s = chain.complete(&mut cursor, &req).await.unwrap().completion;
    assert_eq!(s.text, inquest_agent::script::SUMMARY_TEXT);
    assert!(s.tool_calls.is_empty());
}

/// A reply's `delay` and the entry's `delay` hold the answer back that
/// long (what makes a demo slow enough to kill the replica running it);
/// `delay` is refused on a provider that is not a script.
#[tokio::test]
async fn delays_hold_replies_back() {
    let file = ScriptFile::new(
        "delays",
        r#"[{"text": "slow", "delay": "300ms"}, {"text": "slower by default"}]"#,
    );
    let config = ProviderConfig {
        script: Some(file.0.clone()),
        delay: Some(std::time::Duration::from_millis(200)),
        ..ProviderConfig::new(ProviderKind::Script)
    };
    config.validate().expect("a script entry takes a delay");
    let chain = ProviderChain::from_config_with_env(&[config], |_| None).expect("chain builds");
    let tools = tools();
    let mut transcript = vec![user("why?")];
    let started = std::time::Instant::now();
    let a = chain
        .complete(&mut ChainCursor::new(), &request(&transcript, &tools))
        .await
        .unwrap();
    assert_eq!(a.completion.text, "slow");
    let first = started.elapsed();
    assert!(first >= std::time::Duration::from_millis(300), "{first:?}");
    transcript.push(inquest_core::Message::Assistant {
        text: "slow".into(),
        tool_calls: Default::default(),
    });
    let started = std::time::Instant::now();
    let b = chain
        .complete(&mut ChainCursor::new(), &request(&transcript, &tools))
        .await
        .unwrap();
    assert_eq!(b.completion.text, "slower by default");
    let second = started.elapsed();
    assert!(
        second >= std::time::Duration::from_millis(200),
        "{second:?}"
    );

    let mut openai = ProviderConfig::new(ProviderKind::OpenAi);
    openai.model = Some("m".into());
    openai.delay = Some(std::time::Duration::from_secs(1));
    assert!(openai.validate().is_err(), "delay on a real model");
}
