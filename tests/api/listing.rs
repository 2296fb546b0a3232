//! ListIncidents, GetIncident and ListSessions across incidents by status:
//! newest first, every item exactly once across pages, filters that return
//! exactly the matching sessions, and INVALID_ARGUMENT / NOT_FOUND for bad
//! requests. Statuses are reached through the real paths: StartSession
//! (pending), a claimed burst (running), a closed burst (idle, completed,
//! awaiting_confirmation) and CancelSession (cancelled).

use inquest_core::ExitReason;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_tests::{TestApp, driver::Driver, spawn_app};
use pb::SessionStatus as S;
use tonic::{Code, transport::Channel};

type Client = InvestigationsClient<Channel>;

async fn incident(client: &mut Client, title: &str) -> pb::Incident {
    client
        .create_incident(pb::CreateIncidentRequest {
            title: title.into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
}

async fn session(client: &mut Client, incident: &str) -> String {
    client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.into(),
            message: "what is wrong?".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id
}

/// Every incident id, following page tokens; asserts each page's size.
async fn all_incidents(client: &mut Client, page_size: u32) -> Vec<String> {
    let (mut ids, mut token) = (Vec::new(), String::new());
    loop {
        let page = client
            .list_incidents(pb::ListIncidentsRequest {
                page_size,
                page_token: token,
                source: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.incidents.len() <= page_size as usize);
        ids.extend(page.incidents.into_iter().map(|i| i.id));
        if page.next_page_token.is_empty() {
            return ids;
        }
        token = page.next_page_token;
    }
}

/// Every listed session (id, status), following page tokens; asserts each
/// page's size and that a page with a next token is full.
async fn all_sessions(
    client: &mut Client,
    incident: &str,
    statuses: &[S],
    page_size: u32,
) -> Vec<(String, S)> {
    let (mut got, mut token) = (Vec::new(), String::new());
    loop {
        let page = client
            .list_sessions(pb::ListSessionsRequest {
                incident_id: incident.into(),
                page_size,
                page_token: token,
                statuses: statuses.iter().map(|&s| s as i32).collect(),
                queued_only: false,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.sessions.len() <= page_size as usize);
        let more = !page.next_page_token.is_empty();
        if more {
            assert_eq!(
                page.sessions.len(),
                page_size as usize,
                "a short page said more"
            );
        }
        got.extend(page.sessions.iter().map(|s| (s.id.clone(), s.status())));
        if !more {
            return got;
        }
        token = page.next_page_token;
    }
}

/// Sessions in each status over three incidents; running bursts are held
/// by the returned drivers.
struct Fleet {
    incidents: Vec<String>,
    /// (session, incident index, status), in creation order.
    sessions: Vec<(String, usize, S)>,
    _running: Vec<Driver>,
}

impl Fleet {
    async fn build(app: &TestApp, client: &mut Client) -> Fleet {
        let plan = [
            [S::Running, S::Pending, S::Idle],
            [S::Running, S::AwaitingConfirmation, S::Completed],
            [S::Running, S::Cancelled, S::Pending],
        ];
        let mut fleet = Fleet {
            incidents: Vec::new(),
            sessions: Vec::new(),
            _running: Vec::new(),
        };
        for (i, statuses) in plan.iter().enumerate() {
            let inc = incident(client, &format!("incident {i}")).await.id;
            for &status in statuses {
                let id = session(client, &inc).await;
                match status {
                    S::Pending => {}
                    S::Running => fleet._running.push(Driver::claim(app, &id).await),
                    S::Idle => Driver::claim(app, &id).await.finish().await,
                    S::Completed => {
                        Driver::claim(app, &id)
                            .await
                            .finish_as(ExitReason::Completed)
                            .await
                    }
                    S::AwaitingConfirmation => {
                        Driver::claim(app, &id)
                            .await
                            .finish_as(ExitReason::AwaitingConfirmation)
                            .await
                    }
                    S::Cancelled => {
                        client
                            .cancel_session(pb::CancelSessionRequest {
                                session_id: id.clone(),
                            })
                            .await
                            .unwrap();
                    }
                    other => unreachable!("not in the plan: {other:?}"),
                }
                fleet.sessions.push((id, i, status));
            }
            fleet.incidents.push(inc);
        }
        fleet
    }

    /// What a listing should return: matching sessions, newest first.
    fn expect(&self, incident: Option<usize>, statuses: &[S]) -> Vec<(String, S)> {
        self.sessions
            .iter()
            .rev()
            .filter(|(_, i, s)| {
                incident.is_none_or(|want| want == *i)
                    && (statuses.is_empty() || statuses.contains(s))
            })
            .map(|(id, _, s)| (id.clone(), *s))
            .collect()
    }
}

#[tokio::test]
async fn incidents_list_newest_first_and_page_exactly_once() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(incident(&mut client, &format!("incident {i}")).await);
    }
    let newest_first: Vec<String> = created.iter().rev().map(|i| i.id.clone()).collect();

    assert_eq!(all_incidents(&mut client, 2).await, newest_first);
    assert_eq!(all_incidents(&mut client, 1).await, newest_first);
    // page_size 0 is the default (50): one page holds all five.
    let page = client
        .list_incidents(pb::ListIncidentsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.next_page_token, "");
    assert_eq!(page.incidents.len(), 5);
    assert_eq!(page.incidents[0], created[4], "listed as created");

    let got = client
        .get_incident(pb::GetIncidentRequest {
            incident_id: created[2].id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got, created[2]);
    let unknown = client
        .get_incident(pb::GetIncidentRequest {
            incident_id: uuid::Uuid::now_v7().to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{}", unknown.message());
    let malformed = client
        .get_incident(pb::GetIncidentRequest {
            incident_id: "not-a-uuid".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(malformed.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn incident_pages_are_capped_at_500() {
    let app = spawn_app().await;
    for i in 0..501 {
        let text = inquest_core::IncidentText::parse(
            format!("incident {i}"),
            String::new(),
            &inquest_core::Limits::default(),
        )
        .unwrap();
        app.store
            .create_incident(&inquest_core::Tenant::default_tenant(), &text)
            .await
            .unwrap();
    }
    let mut client = app.client().await;
    let first = client
        .list_incidents(pb::ListIncidentsRequest {
            page_size: 10_000,
            page_token: String::new(),
            source: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.incidents.len(), 500);
    assert!(!first.next_page_token.is_empty());
    let rest = client
        .list_incidents(pb::ListIncidentsRequest {
            page_size: 10_000,
            page_token: first.next_page_token,
            source: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rest.incidents.len(), 1);
    assert_eq!(rest.next_page_token, "");
}

#[tokio::test]
async fn sessions_list_across_incidents_by_status_with_paging() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let fleet = Fleet::build(&app, &mut client).await;

    // What is running now, across incidents: exactly the three held bursts.
    let running = all_sessions(&mut client, "", &[S::Running], 2).await;
    assert_eq!(running, fleet.expect(None, &[S::Running]));
    assert_eq!(running.len(), 3);
    // Several statuses at once, paged one by one.
    let waiting = [S::Pending, S::AwaitingConfirmation];
    assert_eq!(
        all_sessions(&mut client, "", &waiting, 1).await,
        fleet.expect(None, &waiting)
    );
    // A status named twice is one filter.
    assert_eq!(
        all_sessions(&mut client, "", &[S::Running, S::Running], 2).await,
        fleet.expect(None, &[S::Running])
    );
    // No filter: every session of every incident, each once, newest first.
    let everything = all_sessions(&mut client, "", &[], 2).await;
    assert_eq!(everything, fleet.expect(None, &[]));
    assert_eq!(everything.len(), 9);
    // A status nobody is in: an empty page, no token.
    assert_eq!(all_sessions(&mut client, "", &[S::Failed], 2).await, vec![]);

    // Incident and status together.
    for (i, inc) in fleet.incidents.iter().enumerate() {
        for filter in [&[S::Running][..], &[S::Running, S::Pending], &[]] {
            assert_eq!(
                all_sessions(&mut client, inc, filter, 1).await,
                fleet.expect(Some(i), filter),
                "incident {i}, {filter:?}"
            );
        }
    }

    // The listed status is the stored one.
    for (id, status) in &everything {
        let s = client
            .get_session(pb::GetSessionRequest {
                session_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(s.status(), *status, "{id}");
    }
}

#[tokio::test]
async fn listing_refuses_bad_tokens_statuses_and_incidents() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let inc = incident(&mut client, "one").await;
    session(&mut client, &inc.id).await;

    let sessions =
        |incident_id: &str, statuses: Vec<i32>, page_token: &str| pb::ListSessionsRequest {
            incident_id: incident_id.into(),
            page_size: 0,
            page_token: page_token.into(),
            statuses,
            queued_only: false,
        };
    let unknown = uuid::Uuid::now_v7().to_string();
    let cases = [
        (
            "garbage session page token",
            Code::InvalidArgument,
            sessions("", vec![], "zzz"),
        ),
        (
            "UNSPECIFIED status",
            Code::InvalidArgument,
            sessions("", vec![S::Running as i32, S::Unspecified as i32], ""),
        ),
        (
            "unknown status value",
            Code::InvalidArgument,
            sessions(&inc.id, vec![99], ""),
        ),
        (
            "malformed incident id",
            Code::InvalidArgument,
            sessions("nope", vec![S::Running as i32], ""),
        ),
        (
            "unknown incident with a status filter",
            Code::NotFound,
            sessions(&unknown, vec![S::Pending as i32], ""),
        ),
    ];
    for (what, code, request) in cases {
        let status = client.list_sessions(request).await.unwrap_err();
        assert_eq!(status.code(), code, "{what}: {}", status.message());
    }
    let bad = client
        .list_incidents(pb::ListIncidentsRequest {
            page_size: 0,
            page_token: "zzz".into(),
            source: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{}", bad.message());
}

/// A page token is one this deployment issued: the real one pages on; the
/// same cursor edited, or given bare (the item id it carries), is refused
/// INVALID_ARGUMENT, as the proto says; a restarted server (another
/// replica of the deployment) takes the token it did not issue itself.
#[tokio::test]
async fn page_tokens_are_the_servers_own_and_outlive_the_replica() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    for title in ["a", "b", "c"] {
        incident(&mut client, title).await;
    }
    let first = client
        .list_incidents(pb::ListIncidentsRequest {
            page_size: 1,
            page_token: String::new(),
            source: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let token = first.next_page_token;
    let list = |page_token: String| {
        let mut client = client.clone();
        async move {
            client
                .list_incidents(pb::ListIncidentsRequest {
                    page_size: 1,
                    page_token,
                    source: 0,
                })
                .await
        }
    };
    let second = list(token.clone()).await.unwrap().into_inner();
    assert_eq!(second.incidents.len(), 1);
    assert_ne!(second.incidents[0].id, first.incidents[0].id);
    let (cursor, tag) = token.rsplit_once('.').expect("cursor.tag");
    let flipped = if tag.starts_with('0') { "1" } else { "0" };
    for forged in [
        cursor.to_owned(),
        format!("{cursor}.{flipped}{}", &tag[1..]),
        format!("{}.{tag}", second.incidents[0].id),
    ] {
        let refused = list(forged.clone()).await.unwrap_err();
        assert_eq!(
            refused.code(),
            Code::InvalidArgument,
            "{forged}: {refused:?}"
        );
    }
    // Another replica of the same deployment (same database) reads it.
    let other = crate::faults_support::Replica::beside(&app, "replica-b").await;
    let mut other_client =
        pb::investigations_client::InvestigationsClient::connect(format!("http://{}", other.addr))
            .await
            .unwrap();
    let again = other_client
        .list_incidents(pb::ListIncidentsRequest {
            page_size: 1,
            page_token: token,
            source: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.incidents[0].id, second.incidents[0].id);
    other.stop().await.expect("stop the other replica");
    app.stop().await.expect("stop");
}

/// Every incident of `source`, following page tokens one incident a page.
async fn incidents_from(client: &mut Client, source: pb::IncidentSource) -> Vec<pb::Incident> {
    let (mut all, mut token) = (Vec::new(), String::new());
    loop {
        let page = client
            .list_incidents(pb::ListIncidentsRequest {
                page_size: 1,
                page_token: token,
                source: source as i32,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.incidents.len() <= 1);
        all.extend(page.incidents);
        if page.next_page_token.is_empty() {
            return all;
        }
        token = page.next_page_token;
    }
}

#[tokio::test]
async fn list_incidents_filters_by_where_each_came_from() {
    use inquest_core::{IncidentText, Limits, Tenant, TenantQuota, UserMessage};
    use time::macros::datetime;

    let app = spawn_app().await;
    let mut client = app.client().await;
    // Made by a person: CreateIncident.
    let mut manual = Vec::new();
    for title in ["m1", "m2", "m3"] {
        manual.push(incident(&mut client, title).await.id);
    }
    // Made by Alertmanager notifications (loopback, no authentication:
    // the default tenant).
    let http = reqwest::Client::new();
    for key in ["{}:{alertname=\"A\"}", "{}:{alertname=\"B\"}"] {
        let body = serde_json::json!({
            "version": "4", "groupKey": key, "status": "firing", "receiver": "inquest",
            "externalURL": "http://am.test", "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "alerts": [{
                "status": "firing", "fingerprint": key, "labels": {"alertname": key},
                "annotations": {}, "startsAt": "2026-01-01T00:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
            }],
        });
        let response = http
            .post(format!("http://{}/v1/alerts/alertmanager", app.addr))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
    }
    // Made by a schedule's tick.
    let limits = Limits::default();
    app.store
        .register_schedules(&["budget".to_owned()])
        .await
        .unwrap();
    let fired = app
        .store
        .fire_schedule_tick(inquest_store::FireTick {
            schedule: "budget",
            tick: datetime!(2026-12-07 07:00 UTC),
            tenant: &Tenant::default_tenant(),
            quota: TenantQuota::UNLIMITED,
            incident: &IncidentText::parse("budget".into(), String::new(), &limits).unwrap(),
            message: &UserMessage::parse("review it".into(), &limits).unwrap(),
            skills: None,
        })
        .await
        .unwrap();
    assert!(
        matches!(fired, inquest_store::TickOutcome::Fired(_)),
        "{fired:?}"
    );

    let everything = incidents_from(&mut client, pb::IncidentSource::Unspecified).await;
    assert_eq!(everything.len(), 6);
    let manual_listed = incidents_from(&mut client, pb::IncidentSource::Manual).await;
    let mut ids: Vec<String> = manual_listed.iter().map(|i| i.id.clone()).collect();
    ids.reverse();
    assert_eq!(ids, manual, "newest first, each once");
    let alerts = incidents_from(&mut client, pb::IncidentSource::Alert).await;
    assert_eq!(alerts.len(), 2);
    let scheduled = incidents_from(&mut client, pb::IncidentSource::Schedule).await;
    assert_eq!(scheduled.len(), 1);
    assert_eq!(scheduled[0].title, "budget");
    // Each incident says where it came from, in the list and in GetIncident.
    for (list, source) in [
        (&manual_listed, pb::IncidentSource::Manual),
        (&alerts, pb::IncidentSource::Alert),
        (&scheduled, pb::IncidentSource::Schedule),
    ] {
        for i in list {
            assert_eq!(i.source, source as i32, "{i:?}");
            let got = client
                .get_incident(pb::GetIncidentRequest {
                    incident_id: i.id.clone(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(got.source, source as i32, "{got:?}");
        }
    }
    // Not a source.
    let err = client
        .list_incidents(pb::ListIncidentsRequest {
            page_size: 10,
            page_token: String::new(),
            source: 9,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    app.stop().await.unwrap();
}
