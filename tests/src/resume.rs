//! Support for the resume tests: stored transcripts written straight into
//! PostgreSQL (fixtures included, broken ones too: the store's append path
//! would never write a seq gap), a fake model provider configured as the
//! server's only provider, and tool classes without a real MCP server.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use inquest_agent::{McpSection, ProviderConfig, ProviderKind};
use inquest_core::{IncidentId, SessionId, SideEffect, Turn};
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_server::Config;
use inquest_testkit::fake::FakeProvider;
use inquest_testkit::fixture::TranscriptFixture;
use tonic::transport::Channel;

/// Every fixture of `tests/fixtures/transcripts`, by file name.
pub fn transcript_fixtures() -> Vec<(String, TranscriptFixture)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/transcripts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("reading the fixture directory")
        .map(|e| e.expect("fixture entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("reading a fixture");
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            (
                name.unwrap_or_default(),
                TranscriptFixture::from_json(&text).expect("a fixture parses"),
            )
        })
        .collect()
}

/// Inserts a session row with `status`, its counters matching `turns`
/// (which are NOT inserted; see [`insert_turn`]), in its incident's tenant
/// (on a database migrated past V16; before it, sessions have no tenant).
pub async fn insert_session(
    db: &tokio_postgres::Client,
    incident: IncidentId,
    session: SessionId,
    status: &str,
    turns: &[Turn],
) {
    let head = turns.iter().map(|t| t.seq.as_i64()).max().unwrap_or(0);
    let has_tenants: bool = db
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns \
             WHERE table_name = 'sessions' AND column_name = 'tenant')",
            &[],
        )
        .await
        .expect("reading the schema")
        .get(0);
    let sql = if has_tenants {
        "INSERT INTO sessions (id, incident_id, status, head_seq, turn_count, tenant) \
         SELECT $1, $2, $3::text, $4::bigint, $5, tenant FROM incidents WHERE id = $2"
    } else {
        "INSERT INTO sessions (id, incident_id, status, head_seq, turn_count) \
         VALUES ($1, $2, $3::text, $4::bigint, $5)"
    };
    db.execute(
        sql,
        &[
            session.as_uuid(),
            incident.as_uuid(),
            &status,
            &head,
            &(turns.len() as i64),
        ],
    )
    .await
    .expect("inserting a session row");
}

/// Inserts one turn exactly as given (seq, timestamps, raw tool calls).
pub async fn insert_turn(
    db: &tokio_postgres::Client,
    t: &Turn,
) -> Result<(), tokio_postgres::Error> {
    db.execute(
        "INSERT INTO turns (session_id, seq, role, content, tool_calls, tool_call_id, \
         tool_name, is_error, input_tokens, output_tokens, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        &[
            t.session_id.as_uuid(),
            &t.seq.as_i64(),
            &t.role.as_str(),
            &t.content,
            &t.tool_calls_raw,
            &t.tool_call_id,
            &t.tool_name,
            &t.is_error,
            &(t.usage.input_tokens as i64),
            &(t.usage.output_tokens as i64),
            &t.created_at,
        ],
    )
    .await
    .map(|_| ())
}

/// A provider entry pointing at an OpenAI-flavoured fake: no retries.
pub fn fake_provider(fake: &FakeProvider, name: &str) -> ProviderConfig {
    let mut p = ProviderConfig::new(ProviderKind::OpenAi);
    p.name = Some(name.into());
    p.model = Some("fake-model".into());
    p.base_url = Some(fake.base_url());
    p.max_retries = Some(0);
    p.backoff = Some(Duration::from_millis(1));
    p.timeout = Some(Duration::from_secs(60));
    p
}

/// An `[mcp]` section with no servers whose overrides give `classes`: the
/// agent then classes those tools without any server running.
pub fn tool_classes(config: &mut Config, classes: &BTreeMap<String, SideEffect>) {
    let path = std::env::temp_dir().join(format!(
        "inquest-resume-mcp-{}.json",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&path, r#"{"mcpServers": {}}"#).expect("writing an MCP config");
    let mut section = McpSection::new(path);
    section.side_effects.tools = classes.clone();
    config.mcp = Some(section);
}

pub type Client = InvestigationsClient<Channel>;

pub async fn get_session(client: &mut Client, id: SessionId) -> pb::Session {
    client
        .get_session(pb::GetSessionRequest {
            session_id: id.to_string(),
        })
        .await
        .expect("GetSession")
        .into_inner()
}

/// Waits until the session is neither pending nor running.
pub async fn settled(client: &mut Client, id: SessionId) -> pb::Session {
    for _ in 0..1000 {
        let s = get_session(client, id).await;
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {id} never settled");
}

pub async fn turns(client: &mut Client, id: SessionId) -> Vec<pb::SessionTurn> {
    client
        .list_turns(pb::ListTurnsRequest {
            session_id: id.to_string(),
            after_seq: 0,
            before_seq: 0,
            limit: 1000,
        })
        .await
        .expect("ListTurns")
        .into_inner()
        .turns
}

pub async fn recovery_plan(client: &mut Client, id: SessionId) -> pb::RecoveryPlan {
    client
        .get_recovery_plan(pb::GetRecoveryPlanRequest {
            session_id: id.to_string(),
        })
        .await
        .expect("GetRecoveryPlan")
        .into_inner()
}

pub async fn send(client: &mut Client, id: SessionId, text: &str) -> Result<i64, tonic::Status> {
    client
        .send_message(pb::SendMessageRequest {
            session_id: id.to_string(),
            message: text.into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .map(|r| r.into_inner().seq)
}

pub async fn incident(client: &mut Client) -> IncidentId {
    let i = client
        .create_incident(pb::CreateIncidentRequest {
            title: "resume".into(),
            description: String::new(),
        })
        .await
        .expect("CreateIncident")
        .into_inner();
    IncidentId::parse(&i.id).expect("incident id")
}
