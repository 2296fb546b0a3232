//! Runs every transcript fixture in `tests/fixtures/transcripts/` (format:
//! `inquest_testkit::fixture`) through rebuild, recovery and active time.

mod support;

use std::path::PathBuf;

use inquest_core::{active_time, plan_recovery, plan_recovery_rebuilt, rebuild_messages};
use inquest_testkit::fixture::TranscriptFixture;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/transcripts")
}

#[test]
fn every_fixture_matches_its_expectations() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 25, "only {} fixtures", paths.len());

    let mut failures = Vec::new();
    for path in &paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path).expect("read fixture");
        let fixture = TranscriptFixture::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let turns = fixture.turns().unwrap_or_else(|e| panic!("{name}: {e}"));
        let session = fixture.session().expect("session id");
        let expected = fixture
            .expected
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no expected"));

        let (plan, transcript) = plan_recovery_rebuilt(session, &turns, &fixture.tool_classes);
        let mut errors = Vec::new();
        if plan != plan_recovery(session, &turns, &fixture.tool_classes) {
            errors.push("plan_recovery differs from plan_recovery_rebuilt's plan".into());
        }
        if transcript != expected.messages {
            errors.push(format!(
                "messages:\n  got      {}\n  expected {}",
                serde_json::to_string(&transcript).unwrap_or_default(),
                serde_json::to_string(&expected.messages).unwrap_or_default()
            ));
        }
        if turns.iter().all(|t| t.session_id == session) {
            let rebuilt = rebuild_messages(&turns);
            if rebuilt.messages != transcript {
                errors.push("rebuild_messages differs from the plan's transcript".into());
            }
        }
        let e = &expected.plan;
        let got = (
            &plan.kind,
            &plan.repairs,
            &plan.repaired_call_ids,
            plan.can_auto_continue,
            plan.requires_confirmation,
        );
        let want = (
            &e.kind,
            &e.repairs,
            &e.repaired_call_ids,
            e.can_auto_continue,
            e.requires_confirmation,
        );
        if got != want {
            errors.push(format!("plan:\n  got      {got:?}\n  expected {want:?}"));
        }
        // Like the plan, active time is about the session's own turns.
        let own: Vec<_> = turns
            .iter()
            .filter(|t| t.session_id == session)
            .cloned()
            .collect();
        let active_ms = active_time(&own).whole_milliseconds();
        if active_ms != i128::from(expected.active_time_ms) {
            errors.push(format!(
                "active time: got {active_ms} ms, expected {}",
                expected.active_time_ms
            ));
        }
        if let Err(e) = support::check_transcript(&transcript) {
            errors.push(format!("transcript fails the provider check: {e}"));
        }
        if plan.notice_text.is_empty() || !plan.notice_text.contains(plan.kind.as_str()) {
            errors.push("notice text does not name the kind".into());
        }
        for id in &plan.repaired_call_ids {
            if !plan.notice_text.contains(id.as_str()) {
                errors.push(format!("notice text does not name repaired call {id}"));
            }
        }
        if !errors.is_empty() {
            failures.push(format!(
                "{name} ({}):\n{}",
                fixture.description,
                errors.join("\n")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} fixture(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
