//! One source for session statuses: `SessionStatus::ALL` in the domain.
//! The database's `session_status` domain, the proto enum (with the
//! server's conversion both ways) and the web console's list each name
//! exactly those; the CLI's spelling is checked beside its parser.

use std::collections::BTreeSet;

use inquest_core::SessionStatus;
use inquest_proto::v1 as pb;
use inquest_server::convert;

fn domain() -> BTreeSet<String> {
    SessionStatus::ALL
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect()
}

/// The proto name's lowercase tail (`SESSION_STATUS_AWAITING_CONFIRMATION`
/// → `awaiting_confirmation`), as the CLI and the console spell it.
fn wire_name(status: pb::SessionStatus) -> String {
    status
        .as_str_name()
        .trim_start_matches("SESSION_STATUS_")
        .to_lowercase()
}

#[tokio::test]
async fn the_database_domain_allows_exactly_the_domain_statuses() {
    let app = inquest_tests::spawn_app().await;
    let db = inquest_tests::connect(&app.db_url).await;
    let column: String = db
        .query_one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 'sessions'::regclass AND attname = 'status'",
            &[],
        )
        .await
        .expect("sessions.status")
        .get(0);
    assert_eq!(column, "session_status", "sessions.status is the domain");
    let checks = db
        .query(
            "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c \
             JOIN pg_type t ON t.oid = c.contypid WHERE t.typname = 'session_status'",
            &[],
        )
        .await
        .expect("the domain's constraints");
    assert_eq!(checks.len(), 1, "one CHECK on session_status");
    let check: String = checks[0].get(0);
    // The quoted literals of `CHECK (VALUE = ANY (ARRAY['pending'::text, …]))`.
    let allowed: BTreeSet<String> = check
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    assert_eq!(allowed, domain(), "{check}");
    app.stop().await.expect("stop");
}

#[test]
fn the_proto_enum_names_exactly_the_domain_statuses_and_converts_both_ways() {
    let wire: Vec<pb::SessionStatus> = (0..=i32::from(u8::MAX))
        .filter_map(|n| pb::SessionStatus::try_from(n).ok())
        .filter(|s| *s != pb::SessionStatus::Unspecified)
        .collect();
    let names: BTreeSet<String> = wire.iter().map(|s| wire_name(*s)).collect();
    assert_eq!(names, domain());
    for status in SessionStatus::ALL {
        let on_wire = convert::status(status);
        assert_eq!(wire_name(on_wire), status.as_str());
        assert_eq!(convert::status_from_wire(on_wire as i32), Some(status));
    }
    assert_eq!(
        convert::status_from_wire(pb::SessionStatus::Unspecified as i32),
        None
    );
}

#[test]
fn the_console_names_exactly_the_proto_statuses() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/console/src/proto.ts");
    let source = std::fs::read_to_string(&path).expect("the console's proto.ts");
    let block = |start: &str, end: &str| -> Vec<String> {
        let from = source
            .find(start)
            .unwrap_or_else(|| panic!("{start:?} in proto.ts"));
        let rest = &source[from + start.len()..];
        let to = rest.find(end).expect("the block's end");
        rest[..to]
            .lines()
            .map(|l| l.trim().trim_end_matches(',').to_owned())
            .filter(|l| !l.is_empty())
            .collect()
    };
    // `export const SessionStatus = { PENDING: 1, … }`: each number is the
    // proto's.
    let mut numbered = BTreeSet::new();
    for entry in block("export const SessionStatus = {", "}") {
        let (name, number) = entry.split_once(':').expect("NAME: number");
        let number: i32 = number.trim().parse().expect("a number");
        let proto = pb::SessionStatus::from_str_name(&format!("SESSION_STATUS_{}", name.trim()))
            .unwrap_or_else(|| panic!("the console's {name} is not in the proto"));
        assert_eq!(proto as i32, number, "{name}");
        if proto != pb::SessionStatus::Unspecified {
            numbered.insert(wire_name(proto));
        }
    }
    assert_eq!(numbered, domain(), "the console's SessionStatus");
    // `STATUS_NAMES[n]` spells status n.
    let names = block("const STATUS_NAMES = [", "];");
    for (n, name) in names.iter().enumerate().skip(1) {
        let proto = i32::try_from(n)
            .ok()
            .and_then(|n| pb::SessionStatus::try_from(n).ok())
            .unwrap_or_else(|| panic!("STATUS_NAMES[{n}] = {name} has no proto status"));
        assert_eq!(
            name.trim_matches('"'),
            wire_name(proto),
            "STATUS_NAMES[{n}]"
        );
    }
    assert_eq!(
        names.len(),
        domain().len() + 1,
        "STATUS_NAMES covers every status"
    );
}
