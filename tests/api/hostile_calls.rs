//! Hostile calls: every RPC of `inquest.v1.Investigations`, swept with
//! seeded-random hostile requests through the generated client, as a
//! client would send them. Values: empty text, NUL (one, inside, a
//! thousand), long text (4 KiB; rarely 70 KB, 1 MiB and 5 MiB, the last
//! over `limits.max_request_bytes`), SQL and LIKE metacharacters, bidi and
//! zero-width characters, emoji, the store's escape character, malformed,
//! upper-case, braced, URN and nil UUIDs, extreme integers and unknown
//! enum values. Ids are real ones from earlier in the run 60% of the time
//! (and mangled real ones some more), so calls reach past validation.
//!
//! Asserted:
//! - every answer is OK or a code a client can act on (INVALID_ARGUMENT,
//!   NOT_FOUND, FAILED_PRECONDITION, OUT_OF_RANGE, ALREADY_EXISTS,
//!   PERMISSION_DENIED, RESOURCE_EXHAUSTED), never INTERNAL, UNKNOWN,
//!   UNAVAILABLE, DEADLINE_EXCEEDED, ..., and comes within a guard;
//! - every refusal carries an Inquest `google.rpc.ErrorInfo` whose reason
//!   is one the proto's table gives that code;
//! - the sweep called every RPC of the service (read from the descriptor
//!   set, so a new RPC fails this test until the sweep calls it), each at
//!   least [`MIN_CALLS_PER_RPC`] times;
//! - afterwards every session the sweep started settles, none `failed`;
//!   the happy path and the health check still answer; shutdown is clean.
//!
//! A second run does the same with `[auth] mode = "required"` as an admin
//! of one tenant, with another tenant's incidents, sessions, token and
//! page tokens mixed into the ids it sends. Also asserted there: no
//! answer (nor any watch event) the sweep is given OK carries an id of
//! the other tenant, and that tenant's sessions, incidents and token are
//! as they were before the sweep.
//!
//! The seed is printed; `INQUEST_HOSTILE_SEED=<u64>` replays a run and
//! `INQUEST_HOSTILE_CALLS=<n>` sweeps longer (default [`CALLS`]). Watch
//! streams are read for [`WATCH_WINDOW`]; one still open then is fine.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use inquest_auth::Role;
use inquest_core::Tenant;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_server::edge::auth::AuthMode;
use inquest_server::reason::{ErrorReason, Reason};
use inquest_testkit::fake::{FakeProvider, Flavor};
use inquest_tests::{TestApp, spawn_app_with};
use prost::Message;
use tonic::{
    Code, Request, Status,
    metadata::AsciiMetadataValue,
    service::{Interceptor, interceptor::InterceptedService},
    transport::Channel,
};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use tonic_types::StatusExt;

use crate::agent_support::{self, HANG_GUARD, RPCS, evidence_tools};

/// Sends `authorization: Bearer <token>` on every call (nothing when
/// `None`).
#[derive(Clone)]
struct Bearer(Option<AsciiMetadataValue>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

type Client = InvestigationsClient<InterceptedService<Channel, Bearer>>;

/// A client of `app` sending `token`; a hostile client sends what it
/// likes (5 MiB here).
async fn client(app: &TestApp, token: Option<&str>) -> Client {
    let bearer = token.map(|t| format!("Bearer {t}").parse().expect("a token is ASCII"));
    InvestigationsClient::with_interceptor(app.channel().await, Bearer(bearer))
        .max_encoding_message_size(usize::MAX)
}

/// The id a delete the server accepted actually removed: it reads
/// `{…}`, `urn:uuid:…`, upper case and surrounding blanks as the same
/// UUID, so the sweep must forget the canonical spelling.
fn canonical(id: &str) -> String {
    uuid::Uuid::try_parse(id.trim()).map_or_else(|_| id.to_owned(), |u| u.to_string())
}

async fn get_session(client: &mut Client, id: &str) -> pb::Session {
    client
        .get_session(pb::GetSessionRequest {
            session_id: id.into(),
        })
        .await
        .expect("get session")
        .into_inner()
}

/// Polls `id` until it is neither pending nor running (or the guard ends).
async fn settled(client: &mut Client, id: &str) -> pb::Session {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    let active = [pb::SessionStatus::Pending, pb::SessionStatus::Running];
    loop {
        let s = get_session(client, id).await;
        if !active.contains(&s.status()) || tokio::time::Instant::now() >= deadline {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a session on a new incident; (incident id, session id).
async fn start(client: &mut Client, message: &str) -> (String, String) {
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "hostile calls".into(),
            description: "checkout is slow".into(),
        })
        .await
        .expect("create incident")
        .into_inner();
    let session = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id.clone(),
            message: message.into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("start session")
        .into_inner();
    (incident.id, session.id)
}

/// Another tenant's data, seen by its own admin: mixed into the sweep's
/// ids, and checked unchanged afterwards.
struct Foreign {
    client: Client,
    incidents: Vec<String>,
    sessions: Vec<String>,
    tokens: Vec<String>,
    webhooks: Vec<String>,
    pages: Vec<String>,
    /// GetIncident and GetSession of each, before the sweep.
    before: Vec<String>,
}

impl Foreign {
    /// Two settled sessions of tenant `red`, on two incidents.
    async fn seed(app: &TestApp) -> Self {
        let issued = app
            .store
            .create_token(
                "red-admin",
                &Tenant::parse("red").expect("a tenant name"),
                Role::Admin,
                None,
            )
            .await
            .expect("a token of tenant red");
        let mut client = client(app, Some(&issued.secret)).await;
        let mut foreign = Self {
            client: client.clone(),
            incidents: Vec::new(),
            sessions: Vec::new(),
            tokens: vec![issued.token.id.to_string()],
            webhooks: Vec::new(),
            pages: Vec::new(),
            before: Vec::new(),
        };
        for _ in 0..2 {
            let (incident, session) = start(&mut client, "what happened?").await;
            let s = settled(&mut client, &session).await;
            assert_eq!(s.status(), pb::SessionStatus::Completed, "{s:?}");
            foreign.incidents.push(incident);
            foreign.sessions.push(session);
        }
        let incidents = client
            .list_incidents(pb::ListIncidentsRequest {
                page_size: 1,
                page_token: String::new(),
                source: 0,
            })
            .await
            .expect("red lists its incidents")
            .into_inner();
        let sessions = client
            .list_sessions(pb::ListSessionsRequest {
                incident_id: String::new(),
                page_size: 1,
                page_token: String::new(),
                statuses: Vec::new(),
                queued_only: false,
            })
            .await
            .expect("red lists its sessions")
            .into_inner();
        foreign.pages = [incidents.next_page_token, sessions.next_page_token]
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect();
        let hook = client
            .create_webhook(pb::CreateWebhookRequest {
                url: format!("https://127.0.0.1:{}/red", CLOSED_PORT),
                ..Default::default()
            })
            .await
            .expect("red creates a webhook")
            .into_inner();
        foreign.webhooks.extend(hook.webhook.map(|w| w.id));
        foreign.before = foreign.state().await;
        foreign
    }

    /// What its own admin reads of it now.
    async fn state(&mut self) -> Vec<String> {
        let mut state = Vec::new();
        for id in &self.incidents {
            let incident = self
                .client
                .get_incident(pb::GetIncidentRequest {
                    incident_id: id.clone(),
                })
                .await
                .expect("the other tenant can still read its incident")
                .into_inner();
            state.push(format!("{incident:?}"));
        }
        for id in &self.sessions {
            let s = get_session(&mut self.client, id).await;
            state.push(format!("{s:?}"));
        }
        let tokens = self
            .client
            .list_tokens(pb::ListTokensRequest { limit: 0 })
            .await
            .expect("the other tenant's token still works")
            .into_inner();
        state.push(format!("{tokens:?}"));
        let webhooks = self
            .client
            .list_webhooks(pb::ListWebhooksRequest {})
            .await
            .expect("the other tenant's webhooks still list")
            .into_inner();
        // Its delivery counters move with its own events; what the sweep
        // must not change is which webhooks it has, where they send, and
        // what they send.
        for w in &webhooks.webhooks {
            state.push(format!(
                "{} {} {:?} {}",
                w.id, w.url, w.event_types, w.description
            ));
        }
        state
    }
}

/// A loopback port nothing listens on: where the sweep's webhooks send.
const CLOSED_PORT: u16 = 9;

/// Calls per run (about 3 s in a debug build).
const CALLS: usize = 600;
/// Every RPC is called at least this often (uniform picks: about 35 each).
const MIN_CALLS_PER_RPC: usize = 5;
/// How long a unary call (or a watch's opening) may take before it counts
/// as hung.
const CALL_GUARD: Duration = Duration::from_secs(20);
/// How long a watch stream is read; still open after it is fine.
const WATCH_WINDOW: Duration = Duration::from_secs(2);
/// Events read from one watch stream at most.
const MAX_WATCH_EVENTS: usize = 200;
const MIB: usize = 1024 * 1024;

/// The codes a refusal of a hostile request may have: all say "your
/// request", none "the server".
const ALLOWED: [Code; 7] = [
    Code::InvalidArgument,
    Code::NotFound,
    Code::FailedPrecondition,
    Code::OutOfRange,
    Code::AlreadyExists,
    Code::PermissionDenied,
    Code::ResourceExhausted,
];

/// The codes the proto's reason table gives `reason`.
fn codes_of(reason: Reason) -> &'static [Code] {
    match reason {
        Reason::InvalidId
        | Reason::InvalidInput
        | Reason::InvalidCursor
        | Reason::InvalidPageToken
        | Reason::MalformedRequest => &[Code::InvalidArgument],
        Reason::LimitExceeded => &[Code::InvalidArgument, Code::ResourceExhausted],
        Reason::SessionNotFound
        | Reason::IncidentNotFound
        | Reason::ReportNotFound
        | Reason::TokenNotFound
        | Reason::WebhookNotFound
        | Reason::UnknownService => &[Code::NotFound],
        Reason::SessionRunning
        | Reason::AwaitingConfirmation
        | Reason::SessionCancelled
        | Reason::NotCancellable
        | Reason::NoModelProvider
        | Reason::NothingToConfirm
        | Reason::HistoryNotResumable
        | Reason::SessionStateChanged
        | Reason::AwaitingApproval
        | Reason::ApprovalNotPending => &[Code::FailedPrecondition],
        Reason::CursorBeyondHead => &[Code::OutOfRange],
        Reason::WatcherLagged | Reason::LeaseLost => &[Code::Aborted],
        Reason::TurnsLost => &[Code::DataLoss],
        Reason::ShuttingDown | Reason::StoreUnavailable => &[Code::Unavailable],
        Reason::WriteOutcomeUnknown => &[Code::DeadlineExceeded],
        Reason::IdempotencyKeyReused => &[Code::AlreadyExists],
        Reason::Unauthenticated => &[Code::Unauthenticated],
        Reason::PermissionDenied | Reason::HostNotAllowed => &[Code::PermissionDenied],
        Reason::TenantBurstLimit | Reason::TokenBudgetExhausted => &[Code::ResourceExhausted],
        Reason::Internal => &[Code::Internal],
    }
}

/// xorshift64*: small, seeded, good enough to pick test values.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // splitmix64 of the seed: any seed (0 too) gives a non-zero state.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    fn uuid(&mut self) -> uuid::Uuid {
        let bytes = (u128::from(self.next()) << 64 | u128::from(self.next())).to_le_bytes();
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }
}

/// A u64 from the environment (decimal, or hex with `0x`), if set.
fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={text:?} is not a number")))
}

/// A request field as the failure report shows it: short, escaped.
fn show(text: &str) -> String {
    if text.len() <= 48 {
        format!("{text:?}")
    } else {
        let head: String = text.chars().take(24).collect();
        format!("{head:?}…({} bytes)", text.len())
    }
}

/// How a call ended.
enum Answer<T> {
    Ok(T),
    Refused(Status),
    /// No answer within the guard.
    Hung,
}

async fn unary<T>(call: impl Future<Output = Result<tonic::Response<T>, Status>>) -> Answer<T> {
    match tokio::time::timeout(CALL_GUARD, call).await {
        Ok(Ok(response)) => Answer::Ok(response.into_inner()),
        Ok(Err(status)) => Answer::Refused(status),
        Err(_) => Answer::Hung,
    }
}

/// The sweep's state: the PRNG, ids and tokens seen so far, and the tally.
struct Sweep {
    seed: u64,
    rng: Rng,
    incidents: Vec<String>,
    sessions: Vec<String>,
    tokens: Vec<String>,
    keys: Vec<String>,
    incident_pages: Vec<String>,
    session_pages: Vec<String>,
    audit_pages: Vec<String>,
    /// Sessions StartSession created (each is waited for at the end,
    /// unless the sweep deleted it).
    started: BTreeSet<String>,
    /// The incident of each session the sweep made, so deleting an
    /// incident takes its sessions off `started`.
    incident_of: BTreeMap<String, String>,
    /// Per RPC, answers by code name.
    tally: BTreeMap<&'static str, BTreeMap<String, usize>>,
    /// Every wrong answer: call number, RPC, request, what was wrong.
    bad: Vec<String>,
    /// Another tenant's incidents, sessions, tokens and page tokens.
    foreign_incidents: Vec<String>,
    foreign_sessions: Vec<String>,
    foreign_tokens: Vec<String>,
    foreign_webhooks: Vec<String>,
    webhooks: Vec<String>,
    foreign_pages: Vec<String>,
}

impl Sweep {
    fn new(seed: u64) -> Self {
        Self {
            seed,
            rng: Rng::new(seed),
            incidents: Vec::new(),
            sessions: Vec::new(),
            tokens: Vec::new(),
            keys: Vec::new(),
            incident_pages: Vec::new(),
            session_pages: Vec::new(),
            audit_pages: Vec::new(),
            started: BTreeSet::new(),
            incident_of: BTreeMap::new(),
            tally: BTreeMap::new(),
            bad: Vec::new(),
            foreign_incidents: Vec::new(),
            foreign_sessions: Vec::new(),
            foreign_tokens: Vec::new(),
            foreign_webhooks: Vec::new(),
            webhooks: Vec::new(),
            foreign_pages: Vec::new(),
        }
    }

    fn foreign(&self, pool: Pool) -> &[String] {
        match pool {
            Pool::Incident => &self.foreign_incidents,
            Pool::Session => &self.foreign_sessions,
            Pool::Token => &self.foreign_tokens,
            Pool::Webhook => &self.foreign_webhooks,
            Pool::IncidentPage | Pool::SessionPage | Pool::AuditPage => &self.foreign_pages,
        }
    }

    /// An answer given OK must not show another tenant's id.
    fn leaks(&mut self, n: usize, rpc: &str, req: &str, shown: &str) {
        let leaked: Vec<&String> = self
            .foreign_incidents
            .iter()
            .chain(&self.foreign_sessions)
            .chain(&self.foreign_tokens)
            .chain(&self.foreign_webhooks)
            .filter(|id| shown.contains(id.as_str()))
            .collect();
        if !leaked.is_empty() {
            self.bad.push(format!(
                "#{n} {rpc} {req}: answered another tenant's {leaked:?}"
            ));
        }
    }

    /// Hostile text. Long ones are rare: 10 KB (over a 16 KiB header
    /// list if echoed in a status) 2%, 70 KB 2%, 1 MiB 0.7%, 5 MiB (over
    /// `limits.max_request_bytes`) 0.3%.
    fn text(&mut self) -> String {
        match self.rng.below(1000) {
            0..3 => return "x".repeat(5 * MIB),
            3..10 => return "y".repeat(MIB),
            10..30 => return "z".repeat(70_000),
            30..50 => return "v".repeat(10_000),
            _ => {}
        }
        let uuid = self.rng.uuid();
        match self.rng.below(34) {
            0 => String::new(),
            1 => "\0".into(),
            2 => "a\0b".into(),
            3 => "\0".repeat(1000),
            4 => "x".repeat(10),
            5 => "w".repeat(4096),
            6 => "' OR 1=1 --".into(),
            7 => "%_\\".into(),
            8 => "'); DROP TABLE sessions; --".into(),
            9 => "\u{202e}\u{200b}\u{feff}".into(),
            10 => "🔥".repeat(500),
            11 => "\n\r\t".into(),
            12 => " ".into(),
            13 => "null".into(),
            14 => "{}".into(),
            15 => "[]".into(),
            16 => uuid.to_string(),
            17 => uuid.to_string().to_uppercase(),
            18 => uuid.braced().to_string(),
            19 => uuid.urn().to_string(),
            20 => uuid::Uuid::nil().to_string(),
            21 => "-1".into(),
            22 => "9".repeat(40),
            23 => "\\u0000".into(),
            24 => "\x7f\x01\x1b[31m".into(),
            25 => "a".repeat(37),
            26 => "ｆｕｌｌ".into(),
            27 => "\u{d7ff}\u{10ffff}".into(),
            // The store's escape character, alone and as it escapes NUL.
            28 => "\u{E000}".into(),
            29 => "\u{E000}0 \u{E000}\0".into(),
            30 => "what happened to checkout?".into(),
            31 => "é".repeat(201),
            32 => "%".repeat(201),
            _ => "\u{0301}\u{0000}\u{FFFD}".into(),
        }
    }

    /// An id: a real one of `pool` 60% of the time, else a mangled real
    /// one or hostile text.
    fn id(&mut self, pool: Pool) -> String {
        let foreign = self.foreign(pool).to_vec();
        if !foreign.is_empty() && self.rng.chance(20) {
            return self.rng.pick(&foreign);
        }
        let ids = self.pool(pool).to_vec();
        if !ids.is_empty() && self.rng.chance(60) {
            return self.rng.pick(&ids);
        }
        let mangle = self.rng.chance(50);
        let real = self
            .incidents
            .iter()
            .chain(&self.sessions)
            .chain(&self.tokens)
            .chain(&self.webhooks)
            .cloned()
            .collect::<Vec<_>>();
        if !mangle || real.is_empty() {
            return self.text();
        }
        let id = self.rng.pick(&real);
        match self.rng.below(10) {
            0 => id.to_uppercase(),
            1 => format!("{{{id}}}"),
            2 => format!("urn:uuid:{id}"),
            3 => id.replace('-', ""),
            4 => format!("{id}\0"),
            5 => format!(" {id}\t"),
            6 => id[..id.len() - 1].to_owned(),
            7 => format!("{id}x"),
            // Another real-looking id: NOT_FOUND, past validation.
            8 => {
                let last = if id.ends_with('0') { "1" } else { "0" };
                format!("{}{last}", &id[..id.len() - 1])
            }
            _ => format!("{id}%"),
        }
    }

    fn pool(&self, pool: Pool) -> &[String] {
        match pool {
            Pool::Incident => &self.incidents,
            Pool::Session => &self.sessions,
            Pool::Token => &self.tokens,
            Pool::Webhook => &self.webhooks,
            Pool::IncidentPage => &self.incident_pages,
            Pool::SessionPage => &self.session_pages,
            Pool::AuditPage => &self.audit_pages,
        }
    }

    /// A page token: a real one 40% of the time, else hostile.
    fn page_token(&mut self, pool: Pool) -> String {
        let foreign = self.foreign(pool).to_vec();
        if !foreign.is_empty() && self.rng.chance(15) {
            return self.rng.pick(&foreign);
        }
        let real = self.pool(pool).to_vec();
        if !real.is_empty() && self.rng.chance(40) {
            return self.rng.pick(&real);
        }
        match self.rng.below(4) {
            0 => String::new(),
            1 => self.rng.pick(&[
                "-1".to_owned(),
                "0".to_owned(),
                i64::MAX.to_string(),
                i64::MIN.to_string(),
                "99999999999999999999".to_owned(),
                " 5".to_owned(),
                "1e3".to_owned(),
            ]),
            _ => self.id(Pool::Session),
        }
    }

    /// An idempotency key: none, one used before, or hostile.
    fn key(&mut self) -> String {
        if self.rng.chance(30) {
            return String::new();
        }
        if !self.keys.is_empty() && self.rng.chance(40) {
            let keys = self.keys.clone();
            return self.rng.pick(&keys);
        }
        let key = self.text();
        if key.len() <= 300 && self.keys.len() < 64 {
            self.keys.push(key.clone());
        }
        key
    }

    fn seq(&mut self) -> i64 {
        // Mostly cursors a session can have, so watches and pages run.
        self.rng.pick(&[
            0,
            0,
            0,
            1,
            1,
            2,
            3,
            -1,
            7,
            100,
            1 << 31,
            i64::MIN,
            i64::MAX,
            1 << 40,
            -(1 << 40),
        ])
    }

    fn count(&mut self) -> u32 {
        self.rng
            .pick(&[0, 1, 2, 3, 50, 500, 501, 1000, 1001, 1 << 20, u32::MAX])
    }

    /// Records the answer to call `n` of `rpc`; the value if OK.
    fn check<T: std::fmt::Debug>(
        &mut self,
        n: usize,
        rpc: &'static str,
        req: &str,
        answer: Answer<T>,
    ) -> Option<T> {
        let value = self.check_unscanned(n, rpc, req, answer)?;
        self.leaks(n, rpc, req, &format!("{value:?}"));
        Some(value)
    }

    /// [`Sweep::check`] without looking for the other tenant's ids in the
    /// answer (the caller checks it).
    fn check_unscanned<T>(
        &mut self,
        n: usize,
        rpc: &'static str,
        req: &str,
        answer: Answer<T>,
    ) -> Option<T> {
        let code = match &answer {
            Answer::Ok(_) => "OK".to_owned(),
            Answer::Refused(status) => format!("{:?}", status.code()),
            Answer::Hung => "NO ANSWER".to_owned(),
        };
        *self.tally.entry(rpc).or_default().entry(code).or_default() += 1;
        match answer {
            Answer::Ok(value) => Some(value),
            Answer::Refused(status) => {
                self.refusal(n, rpc, req, &status);
                None
            }
            Answer::Hung => {
                self.bad
                    .push(format!("#{n} {rpc} {req}: no answer within {CALL_GUARD:?}"));
                None
            }
        }
    }

    /// Checks a refusal's code and its ErrorInfo.
    fn refusal(&mut self, n: usize, rpc: &str, req: &str, status: &Status) {
        let code = status.code();
        let mut wrong = Vec::new();
        if !ALLOWED.contains(&code) {
            wrong.push("not a refusal of the request".to_owned());
        }
        match ErrorReason::of(status) {
            Some(reason) if codes_of(reason.reason).contains(&code) => {}
            Some(reason) => wrong.push(format!("reason {} is not one of this code", reason.reason)),
            None => wrong.push(format!(
                "no Inquest ErrorInfo (ErrorInfo: {:?})",
                status.get_details_error_info()
            )),
        }
        if !wrong.is_empty() {
            self.bad.push(format!(
                "#{n} {rpc} {req}: {code:?} {}: {}",
                show(status.message()),
                wrong.join("; ")
            ));
        }
    }
}

#[derive(Clone, Copy)]
enum Pool {
    Incident,
    Session,
    Token,
    Webhook,
    IncidentPage,
    SessionPage,
    AuditPage,
}

/// The RPCs of `inquest.v1.Investigations`, read from the descriptor set
/// the server's reflection serves (only the fields needed are decoded).
fn service_rpcs() -> BTreeSet<String> {
    #[derive(Clone, PartialEq, prost::Message)]
    struct FileSet {
        #[prost(message, repeated, tag = "1")]
        file: Vec<File>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct File {
        #[prost(string, optional, tag = "2")]
        package: Option<String>,
        #[prost(message, repeated, tag = "6")]
        service: Vec<Service>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct Service {
        #[prost(string, optional, tag = "1")]
        name: Option<String>,
        #[prost(message, repeated, tag = "2")]
        method: Vec<Method>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct Method {
        #[prost(string, optional, tag = "1")]
        name: Option<String>,
    }
    let set = FileSet::decode(inquest_proto::FILE_DESCRIPTOR_SET).expect("the descriptor set");
    set.file
        .iter()
        .filter(|f| f.package.as_deref() == Some("inquest.v1"))
        .flat_map(|f| &f.service)
        .filter(|s| s.name.as_deref() == Some("Investigations"))
        .flat_map(|s| &s.method)
        .filter_map(|m| m.name.clone())
        .collect()
}

#[tokio::test]
async fn every_rpc_answers_hostile_calls_with_a_proper_status_and_stays_healthy() {
    hostile_sweep(false).await;
}

#[tokio::test]
async fn one_tenants_hostile_calls_never_reach_another_tenants_data() {
    hostile_sweep(true).await;
}

/// The sweep; with `tenants`, authenticated as tenant `blue`'s admin with
/// tenant `red`'s ids mixed in.
async fn hostile_sweep(tenants: bool) {
    let listed: BTreeSet<String> = RPCS.iter().map(|r| (*r).to_owned()).collect();
    assert_eq!(
        service_rpcs(),
        listed,
        "the sweep must call every RPC of inquest.v1.Investigations"
    );
    let seed = env_number("INQUEST_HOSTILE_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let calls = env_number("INQUEST_HOSTILE_CALLS").map_or(CALLS, |n| n as usize);
    // Both wire formats' strict fakes, one per seed.
    let flavor = if seed.is_multiple_of(2) {
        Flavor::OpenAi
    } else {
        Flavor::Anthropic
    };
    println!(
        "hostile_calls: seed {seed} ({calls} calls, {flavor:?} fake{}); replay with \
         INQUEST_HOSTILE_SEED={seed}",
        if tenants {
            ", as one of two tenants"
        } else {
            ""
        }
    );
    let fake = FakeProvider::start(flavor)
        .await
        .expect("starting the fake provider");
    let entry = agent_support::provider(&fake, flavor, "fake");
    let app = spawn_app_with(|c| {
        c.providers = vec![entry];
        evidence_tools(c);
        if tenants {
            c.auth.mode = AuthMode::Required;
        }
        // Webhooks the sweep makes send to a closed port on loopback,
        // never off this host.
        c.webhooks.allow_private_targets = true;
        c.webhooks.allow_http = true;
    })
    .await;
    let mut sweep = Sweep::new(seed);
    let (mut client, mut foreign) = if tenants {
        let foreign = Foreign::seed(&app).await;
        sweep.foreign_incidents = foreign.incidents.clone();
        sweep.foreign_sessions = foreign.sessions.clone();
        sweep.foreign_tokens = foreign.tokens.clone();
        sweep.foreign_webhooks = foreign.webhooks.clone();
        sweep.foreign_pages = foreign.pages.clone();
        let blue = app
            .store
            .create_token(
                "blue-admin",
                &Tenant::parse("blue").expect("a tenant name"),
                Role::Admin,
                None,
            )
            .await
            .expect("a token of tenant blue");
        (client(&app, Some(&blue.secret)).await, Some(foreign))
    } else {
        (client(&app, None).await, None)
    };
    let began = Instant::now();

    for n in 0..calls {
        let rpc = RPCS[sweep.rng.below(RPCS.len())];
        match rpc {
            "CreateIncident" => {
                let (title, description) = (sweep.text(), sweep.text());
                let req = format!("title={} description={}", show(&title), show(&description));
                let call = client.create_incident(pb::CreateIncidentRequest { title, description });
                if let Some(incident) = sweep.check(n, rpc, &req, unary(call).await) {
                    sweep.incidents.push(incident.id);
                }
            }
            "GetIncident" => {
                let incident_id = sweep.id(Pool::Incident);
                let req = format!("incident_id={}", show(&incident_id));
                let call = client.get_incident(pb::GetIncidentRequest { incident_id });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "ListIncidents" => {
                let page_size = sweep.count();
                let page_token = sweep.page_token(Pool::IncidentPage);
                let req = format!("page_size={page_size} page_token={}", show(&page_token));
                let call = client.list_incidents(pb::ListIncidentsRequest {
                    page_size,
                    page_token,
                    source: 0,
                });
                if let Some(page) = sweep.check(n, rpc, &req, unary(call).await)
                    && !page.next_page_token.is_empty()
                {
                    sweep.incident_pages.push(page.next_page_token);
                }
            }
            "StartSession" => {
                let incident_id = sweep.id(Pool::Incident);
                let message = sweep.text();
                let idempotency_key = sweep.key();
                let req = format!(
                    "incident_id={} message={} idempotency_key={}",
                    show(&incident_id),
                    show(&message),
                    show(&idempotency_key)
                );
                let call = client.start_session(pb::StartSessionRequest {
                    incident_id,
                    message,
                    idempotency_key,
                });
                if let Some(session) = sweep.check(n, rpc, &req, unary(call).await)
                    && sweep.started.insert(session.id.clone())
                {
                    sweep
                        .incident_of
                        .insert(session.id.clone(), session.incident_id);
                    sweep.sessions.push(session.id);
                }
            }
            "GetSession" => {
                let session_id = sweep.id(Pool::Session);
                let req = format!("session_id={}", show(&session_id));
                let call = client.get_session(pb::GetSessionRequest { session_id });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "ListSessions" => {
                let incident_id = if sweep.rng.chance(30) {
                    String::new()
                } else {
                    sweep.id(Pool::Incident)
                };
                let page_size = sweep.count();
                let page_token = sweep.page_token(Pool::SessionPage);
                // Known statuses two times in three.
                let statuses: Vec<i32> = (0..sweep.rng.below(4))
                    .map(|_| match sweep.rng.below(3) {
                        0 => sweep.rng.pick(&[0, 8, 99, -1, i32::MIN, i32::MAX]),
                        _ => sweep.rng.pick(&[1, 2, 3, 4, 5, 6, 7]),
                    })
                    .collect();
                let req = format!(
                    "incident_id={} page_size={page_size} page_token={} statuses={statuses:?}",
                    show(&incident_id),
                    show(&page_token)
                );
                let call = client.list_sessions(pb::ListSessionsRequest {
                    incident_id,
                    page_size,
                    page_token,
                    statuses,
                    queued_only: false,
                });
                if let Some(page) = sweep.check(n, rpc, &req, unary(call).await)
                    && !page.next_page_token.is_empty()
                {
                    sweep.session_pages.push(page.next_page_token);
                }
            }
            "ListTurns" => {
                let session_id = sweep.id(Pool::Session);
                let (after_seq, limit) = (sweep.seq(), sweep.count());
                let req = format!(
                    "session_id={} after_seq={after_seq} limit={limit}",
                    show(&session_id)
                );
                let call = client.list_turns(pb::ListTurnsRequest {
                    session_id,
                    after_seq,
                    before_seq: 0,
                    limit,
                });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "SendMessage" => {
                let session_id = sweep.id(Pool::Session);
                let message = sweep.text();
                let idempotency_key = sweep.key();
                let req = format!(
                    "session_id={} message={} idempotency_key={}",
                    show(&session_id),
                    show(&message),
                    show(&idempotency_key)
                );
                let call = client.send_message(pb::SendMessageRequest {
                    session_id,
                    message,
                    idempotency_key,
                    if_running: 0,
                });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "ForkSession" => {
                let session_id = sweep.id(Pool::Session);
                let at_seq = sweep.seq();
                let message = sweep.rng.chance(50).then(|| sweep.text());
                let idempotency_key = sweep.key();
                let req = format!(
                    "session_id={} at_seq={at_seq} message={} idempotency_key={}",
                    show(&session_id),
                    message.as_deref().map_or("unset".to_owned(), show),
                    show(&idempotency_key)
                );
                let call = client.fork_session(pb::ForkSessionRequest {
                    session_id,
                    at_seq,
                    message,
                    idempotency_key,
                });
                if let Some(fork) = sweep.check(n, rpc, &req, unary(call).await)
                    && sweep.started.insert(fork.id.clone())
                {
                    sweep.incident_of.insert(fork.id.clone(), fork.incident_id);
                    sweep.sessions.push(fork.id);
                }
            }
            "WatchSession" => {
                let session_id = sweep.id(Pool::Session);
                let after_seq = sweep.seq();
                let req = format!("session_id={} after_seq={after_seq}", show(&session_id));
                let call = client.watch_session(pb::WatchSessionRequest {
                    session_id,
                    after_seq,
                    after_committed_at: None,
                });
                let Some(mut stream) = sweep.check(n, rpc, &req, unary(call).await) else {
                    continue;
                };
                let mut events = 0;
                let mut shown = Vec::new();
                let read = async {
                    while events < MAX_WATCH_EVENTS {
                        match stream.message().await {
                            Ok(Some(event)) => {
                                events += 1;
                                shown.push(format!("{event:?}"));
                            }
                            Ok(None) => return Ok(()),
                            Err(status) => return Err(status),
                        }
                    }
                    Ok(())
                };
                let ending = match tokio::time::timeout(WATCH_WINDOW, read).await {
                    Ok(Ok(())) => "stream ended OK".to_owned(),
                    Ok(Err(status)) => {
                        sweep.refusal(n, "WatchSession (stream end)", &req, &status);
                        format!("stream ended {:?}", status.code())
                    }
                    Err(_) => "stream still open".to_owned(),
                };
                for event in &shown {
                    sweep.leaks(n, "WatchSession (event)", &req, event);
                }
                *sweep
                    .tally
                    .entry(rpc)
                    .or_default()
                    .entry(ending)
                    .or_default() += 1;
            }
            "CancelSession" => {
                let session_id = sweep.id(Pool::Session);
                let req = format!("session_id={}", show(&session_id));
                let call = client.cancel_session(pb::CancelSessionRequest { session_id });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "DeleteSession" => {
                let session_id = sweep.id(Pool::Session);
                let force = sweep.rng.chance(50);
                let req = format!("session_id={} force={force}", show(&session_id));
                let call = client.delete_session(pb::DeleteSessionRequest {
                    session_id: session_id.clone(),
                    force,
                });
                if sweep.check(n, rpc, &req, unary(call).await).is_some() {
                    sweep.started.remove(&canonical(&session_id));
                }
            }
            "DeleteIncident" => {
                let incident_id = sweep.id(Pool::Incident);
                let force = sweep.rng.chance(50);
                let req = format!("incident_id={} force={force}", show(&incident_id));
                let call = client.delete_incident(pb::DeleteIncidentRequest {
                    incident_id: incident_id.clone(),
                    force,
                });
                if sweep.check(n, rpc, &req, unary(call).await).is_some() {
                    let (of, incident_id) = (&sweep.incident_of, canonical(&incident_id));
                    sweep
                        .started
                        .retain(|s| of.get(s).is_none_or(|i| *i != incident_id));
                }
            }
            "GetReport" => {
                let session_id = sweep.id(Pool::Session);
                let burst =
                    sweep
                        .rng
                        .pick(&[0, 0, 1, 2, 3, 1000, (1 << 31) - 1, 1 << 31, u32::MAX]);
                let req = format!("session_id={} burst={burst}", show(&session_id));
                let call = client.get_report(pb::GetReportRequest { session_id, burst });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "ContinueSession" => {
                let session_id = sweep.id(Pool::Session);
                let req = format!("session_id={}", show(&session_id));
                let call = client.continue_session(pb::ContinueSessionRequest { session_id });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "DecideToolCalls" => {
                let session_id = sweep.id(Pool::Session);
                let count = sweep.rng.pick(&[0usize, 1, 1, 2, 40]);
                let decisions: Vec<pb::ToolCallDecision> = (0..count)
                    .map(|_| pb::ToolCallDecision {
                        call_id: sweep.text(),
                        verdict: sweep.rng.pick(&[0, 1, 2, 3, -1, i32::MAX]),
                        comment: sweep.text(),
                    })
                    .collect();
                let idempotency_key = sweep.key();
                let req = format!(
                    "session_id={} decisions={} key={}",
                    show(&session_id),
                    decisions.len(),
                    show(&idempotency_key)
                );
                let call = client.decide_tool_calls(pb::DecideToolCallsRequest {
                    session_id,
                    decisions,
                    idempotency_key,
                });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "GetRecoveryPlan" => {
                let session_id = sweep.id(Pool::Session);
                let req = format!("session_id={}", show(&session_id));
                let call = client.get_recovery_plan(pb::GetRecoveryPlanRequest { session_id });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "CreateToken" => {
                let name = if sweep.rng.chance(30) {
                    String::new()
                } else {
                    sweep.text()
                };
                let role = match sweep.rng.below(10) {
                    0..6 => sweep.rng.pick(&["admin", "operator", "viewer"]).to_owned(),
                    6 => "Admin".to_owned(),
                    7 => " viewer".to_owned(),
                    8 => String::new(),
                    _ => sweep.text(),
                };
                let ten_years = 10 * 366 * 86_400;
                let expires_in_seconds = sweep.rng.pick(&[
                    0,
                    0,
                    0,
                    1,
                    3600,
                    ten_years,
                    ten_years + 1,
                    1 << 62,
                    i64::MAX as u64,
                    i64::MAX as u64 + 1,
                    u64::MAX,
                ]);
                let tenant = match sweep.rng.below(4) {
                    0 | 1 => String::new(),
                    2 => inquest_core::Tenant::default_tenant().as_str().to_owned(),
                    _ => sweep.text(),
                };
                let req = format!(
                    "name={} role={} expires_in_seconds={expires_in_seconds} tenant={}",
                    show(&name),
                    show(&role),
                    show(&tenant)
                );
                let call = client.create_token(pb::CreateTokenRequest {
                    name,
                    role,
                    expires_in_seconds,
                    tenant,
                });
                if let Some(created) = sweep.check(n, rpc, &req, unary(call).await)
                    && let Some(token) = created.token
                {
                    sweep.tokens.push(token.id);
                }
            }
            "ListEvents" => {
                let session_id = if sweep.rng.chance(40) {
                    String::new()
                } else {
                    sweep.id(Pool::Session)
                };
                let after_id = match sweep.rng.below(4) {
                    0 => -1,
                    1 => i64::MAX,
                    _ => i64::from(sweep.count()),
                };
                let types = if sweep.rng.chance(50) {
                    Vec::new()
                } else {
                    let junk = sweep.text();
                    vec![sweep.rng.pick(&["report.ready".to_owned(), junk])]
                };
                let page_size = sweep.count();
                let req = format!(
                    "session_id={} after_id={after_id} types={:?} page_size={page_size}",
                    show(&session_id),
                    types.iter().map(|t| show(t)).collect::<Vec<_>>()
                );
                let call = client.list_events(pb::ListEventsRequest {
                    after_id,
                    types,
                    session_id,
                    page_size,
                });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "ListSchedules" => {
                let call = client.list_schedules(pb::ListSchedulesRequest {});
                sweep.check(n, rpc, "", unary(call).await);
            }
            "ListTokens" => {
                let limit = sweep.count();
                let req = format!("limit={limit}");
                let call = client.list_tokens(pb::ListTokensRequest { limit });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "RevokeToken" => {
                let token_id = sweep.id(Pool::Token);
                let req = format!("token_id={}", show(&token_id));
                let call = client.revoke_token(pb::RevokeTokenRequest { token_id });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "ListAuditEvents" => {
                let session_id = if sweep.rng.chance(40) {
                    String::new()
                } else {
                    sweep.id(Pool::Session)
                };
                let page_size = sweep.count();
                let page_token = sweep.page_token(Pool::AuditPage);
                let req = format!(
                    "session_id={} page_size={page_size} page_token={}",
                    show(&session_id),
                    show(&page_token)
                );
                let call = client.list_audit_events(pb::ListAuditEventsRequest {
                    session_id,
                    page_size,
                    page_token,
                });
                // The caller's own trail names the ids it sent, the other
                // tenant's among them; those calls were refused.
                let Some(page) = sweep.check_unscanned(n, rpc, &req, unary(call).await) else {
                    continue;
                };
                for event in &page.events {
                    if !sweep.foreign_sessions.is_empty() && event.tenant != "blue" {
                        sweep.bad.push(format!(
                            "#{n} {rpc} {req}: another tenant's event {event:?}"
                        ));
                    } else if event.code == "OK" {
                        sweep.leaks(n, rpc, &req, &format!("{event:?}"));
                    }
                }
                if !page.next_page_token.is_empty() {
                    sweep.audit_pages.push(page.next_page_token);
                }
            }
            "CreateWebhook" => {
                let url = match sweep.rng.below(8) {
                    0..3 => format!("https://127.0.0.1:{CLOSED_PORT}/hook"),
                    3 => format!("http://[::1]:{CLOSED_PORT}/"),
                    4 => format!("ftp://127.0.0.1:{CLOSED_PORT}/"),
                    5 => format!("https://u:p@127.0.0.1:{CLOSED_PORT}/"),
                    _ => sweep.text(),
                };
                let event_types = match sweep.rng.below(4) {
                    0 | 1 => Vec::new(),
                    2 => vec!["report.ready".to_owned(), "report.ready".to_owned()],
                    _ => vec![sweep.text()],
                };
                let description = sweep.text();
                let format = sweep
                    .rng
                    .pick(&["", "", "standard", "slack", "Standard"])
                    .to_owned();
                let req = format!(
                    "url={} event_types={:?} description={} format={format:?}",
                    show(&url),
                    event_types.iter().map(|t| show(t)).collect::<Vec<_>>(),
                    show(&description)
                );
                let call = client.create_webhook(pb::CreateWebhookRequest {
                    url,
                    event_types,
                    description,
                    format,
                });
                if let Some(created) = sweep.check(n, rpc, &req, unary(call).await)
                    && let Some(hook) = created.webhook
                {
                    sweep.webhooks.push(hook.id);
                }
            }
            "ListWebhooks" => {
                let call = client.list_webhooks(pb::ListWebhooksRequest {});
                if let Some(list) = sweep.check(n, rpc, "", unary(call).await)
                    && list
                        .webhooks
                        .iter()
                        .any(|w| !sweep.webhooks.contains(&w.id))
                {
                    sweep
                        .bad
                        .push(format!("#{n} {rpc}: a webhook the sweep did not make"));
                }
            }
            "DeleteWebhook" => {
                let webhook_id = sweep.id(Pool::Webhook);
                let req = format!("webhook_id={}", show(&webhook_id));
                let call = client.delete_webhook(pb::DeleteWebhookRequest { webhook_id });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "RotateWebhookSecret" => {
                let webhook_id = sweep.id(Pool::Webhook);
                let req = format!("webhook_id={}", show(&webhook_id));
                let call =
                    client.rotate_webhook_secret(pb::RotateWebhookSecretRequest { webhook_id });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "ListWebhookDeliveries" => {
                let webhook_id = sweep.id(Pool::Webhook);
                let page_size = sweep.count();
                let page_token = sweep.page_token(Pool::AuditPage);
                let req = format!(
                    "webhook_id={} page_size={page_size} page_token={}",
                    show(&webhook_id),
                    show(&page_token)
                );
                let call = client.list_webhook_deliveries(pb::ListWebhookDeliveriesRequest {
                    webhook_id,
                    page_size,
                    page_token,
                });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            "RedeliverEvent" => {
                let webhook_id = sweep.id(Pool::Webhook);
                let event_id = match sweep.rng.below(5) {
                    0 => -1,
                    1 => i64::MAX,
                    2 => 0,
                    _ => i64::from(sweep.rng.pick(&[1u32, 2, 3, 5, 8, 13])),
                };
                let req = format!("webhook_id={} event_id={event_id}", show(&webhook_id));
                let call = client.redeliver_event(pb::RedeliverEventRequest {
                    webhook_id,
                    event_id,
                });
                sweep.check(n, rpc, &req, unary(call).await);
            }
            other => unreachable!("{other} is in RPCS but the sweep has no request for it"),
        }
    }
    let swept = began.elapsed();

    println!("hostile_calls: {calls} calls in {swept:.1?}; answers per RPC:");
    for (rpc, codes) in &sweep.tally {
        println!("  {rpc:<16} {codes:?}");
    }
    println!(
        "hostile_calls: {} sessions started, {} incidents, {} tokens",
        sweep.started.len(),
        sweep.incidents.len(),
        sweep.tokens.len()
    );

    // Every session the sweep started settles, and none failed: a hostile
    // request never fails a session.
    let active = [pb::SessionStatus::Pending, pb::SessionStatus::Running];
    for id in &sweep.started {
        let settled = settled(&mut client, id).await;
        if active.contains(&settled.status()) {
            sweep.bad.push(format!(
                "session {id} never settled: {:?}",
                settled.status()
            ));
        } else if settled.status() == pb::SessionStatus::Failed {
            sweep.bad.push(format!(
                "session {id} failed (exit reason {:?})",
                settled.exit_reason
            ));
        }
    }

    // Every RPC was called (a shorter sweep asks for less).
    let least = MIN_CALLS_PER_RPC.min(calls / RPCS.len());
    for rpc in RPCS {
        let made: usize = sweep.tally.get(rpc).map_or(0, |codes| {
            codes
                .iter()
                .filter(|(code, _)| !code.starts_with("stream "))
                .map(|(_, n)| n)
                .sum()
        });
        if made < least {
            sweep
                .bad
                .push(format!("{rpc} was called {made} times, fewer than {least}"));
        }
    }

    // The other tenant's data is as it was.
    if let Some(foreign) = &mut foreign {
        let after = foreign.state().await;
        for (before, after) in foreign.before.iter().zip(&after) {
            if before != after {
                sweep.bad.push(format!(
                    "another tenant's data changed:\n  before {before}\n  after  {after}"
                ));
            }
        }
    }

    assert!(
        sweep.bad.is_empty(),
        "{} wrong answers in {calls} hostile calls (seed {}; replay with \
         INQUEST_HOSTILE_SEED={}):\n{}",
        sweep.bad.len(),
        sweep.seed,
        sweep.seed,
        sweep.bad.join("\n")
    );

    // The happy path and the health check still answer.
    let (_, id) = start(&mut client, "what happened?").await;
    let s = settled(&mut client, &id).await;
    // The fake's default reply is text without tool calls: the model is
    // done.
    assert_eq!(
        s.status(),
        pb::SessionStatus::Completed,
        "seed {seed}: {s:?}"
    );
    assert_eq!(s.exit_reason, "completed", "seed {seed}");
    let mut health = HealthClient::new(app.channel().await);
    let serving = health
        .check(HealthCheckRequest {
            service: "inquest.v1.Investigations".into(),
        })
        .await
        .expect("health check after the sweep")
        .into_inner()
        .status();
    assert_eq!(serving, ServingStatus::Serving, "seed {seed}");
    // An unknown service name, however long, is named back short enough
    // to fit the response headers.
    for len in [7_000, 70_000, MIB] {
        let status = health
            .check(HealthCheckRequest {
                service: "z".repeat(len),
            })
            .await
            .expect_err("a health check of an unknown service");
        assert_eq!(status.code(), Code::NotFound, "{len}-byte name: {status:?}");
        let reason = ErrorReason::of(&status).map(|r| r.reason);
        assert_eq!(reason, Some(Reason::UnknownService), "{len}-byte name");
    }
    app.stop().await.expect("a clean shutdown after the sweep");
    println!("hostile_calls: seed {seed} done in {:.1?}", began.elapsed());
}
