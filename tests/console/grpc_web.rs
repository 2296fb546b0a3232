//! gRPC-Web on the gRPC port, without a browser: over HTTP/1.1 (as a
//! browser on `http://` speaks it), a call reaches the same service behind
//! the same layers: authenticated (UNAUTHENTICATED without a token),
//! size-checked (INVALID_ARGUMENT over `limits.max_request_bytes`, on the
//! frame header), counted by `Measured` under its method and final code,
//! and answered. The console's assets are served without a token; plain
//! gRPC keeps working on the same port.

use inquest_auth::Role;
use inquest_proto::v1 as pb;
use inquest_server::edge::auth::AuthMode;
use prost::Message;

use crate::webdriver::HANG_GUARD;

fn http() -> reqwest::Client {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .timeout(HANG_GUARD)
        .build()
        .unwrap()
}

/// A gRPC-Web call's outcome: status code, message, response messages.
#[derive(Debug)]
struct Answer {
    http: u16,
    code: Option<i32>,
    messages: Vec<Vec<u8>>,
}

async fn call(base: &str, method: &str, body: Vec<u8>, token: Option<&str>) -> Answer {
    call_with(base, method, body, token, &[]).await
}

/// [`call`] with more request headers (`Host`, `Origin`).
async fn call_with(
    base: &str,
    method: &str,
    body: Vec<u8>,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> Answer {
    let mut request = http()
        .post(format!("{base}/inquest.v1.Investigations/{method}"))
        .header("content-type", "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .body(body);
    if let Some(t) = token {
        request = request.header("authorization", format!("Bearer {t}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.version(), reqwest::Version::HTTP_11);
    let http = response.status().as_u16();
    let header_code = response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let bytes = response.bytes().await.unwrap().to_vec();
    let (mut messages, mut code) = (Vec::new(), header_code);
    let mut rest = &bytes[..];
    while rest.len() >= 5 {
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        let body = rest[5..5 + len].to_vec();
        if rest[0] & 0x80 != 0 {
            let text = String::from_utf8(body).unwrap();
            code = text
                .lines()
                .find_map(|l| l.strip_prefix("grpc-status:"))
                .and_then(|v| v.trim().parse().ok());
        } else {
            messages.push(body);
        }
        rest = &rest[5 + len..];
    }
    Answer {
        http,
        code,
        messages,
    }
}

fn framed(message: &impl Message) -> Vec<u8> {
    let body = message.encode_to_vec();
    let mut f = vec![0];
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend(body);
    f
}

/// `inquest_rpc_requests_total{method,code}` on the admin listener.
async fn counted(admin: std::net::SocketAddr, method: &str, code: &str) -> u64 {
    let text = http()
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("inquest_rpc_requests_total{"))
        .filter(|l| {
            l.contains(&format!("method=\"{method}\"")) && l.contains(&format!("code=\"{code}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[tokio::test]
async fn grpc_web_calls_are_authenticated_size_checked_counted_and_answered() {
    let app = inquest_tests::spawn_app_with(|c| c.auth.mode = AuthMode::Required).await;
    let base = app.endpoint();
    let admin = app.admin_addr.expect("admin listener");
    let token = app
        .store
        .create_token(
            "web",
            &inquest_core::Tenant::default_tenant(),
            Role::Operator,
            None,
        )
        .await
        .unwrap()
        .secret;
    let get = pb::GetIncidentRequest {
        incident_id: uuid::Uuid::now_v7().to_string(),
    };

    // No token: refused before the service, counted.
    let before = counted(admin, "GetIncident", "UNAUTHENTICATED").await;
    let a = call(&base, "GetIncident", framed(&get), None).await;
    assert_eq!((a.http, a.code), (200, Some(16)), "{a:?}");
    assert!(a.messages.is_empty());
    assert_eq!(
        counted(admin, "GetIncident", "UNAUTHENTICATED").await,
        before + 1
    );

    // With the token: the service answers (NOT_FOUND in the trailers
    // frame), counted under its final code.
    let before = counted(admin, "GetIncident", "NOT_FOUND").await;
    let a = call(&base, "GetIncident", framed(&get), Some(&token)).await;
    assert_eq!(a.code, Some(5), "{a:?}");
    assert_eq!(counted(admin, "GetIncident", "NOT_FOUND").await, before + 1);

    // A frame over the limit is refused on its header.
    let mut huge = vec![0];
    huge.extend_from_slice(&(64u32 * 1024 * 1024).to_be_bytes());
    huge.extend_from_slice(&[0x0a, 0x01, b'x']);
    let a = call(&base, "CreateIncident", huge, Some(&token)).await;
    assert_eq!(a.code, Some(3), "{a:?}");
    assert_eq!(app.count("incidents").await, 0);

    // A write through gRPC-Web, read back through plain gRPC on the same port.
    let a = call(
        &base,
        "CreateIncident",
        framed(&pb::CreateIncidentRequest {
            title: "from the web".into(),
            description: String::new(),
        }),
        Some(&token),
    )
    .await;
    assert_eq!(a.code, Some(0), "{a:?}");
    let made = pb::Incident::decode(&a.messages[0][..]).unwrap();
    let mut request = tonic::Request::new(pb::GetIncidentRequest {
        incident_id: made.id.clone(),
    });
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let read = app
        .client()
        .await
        .get_incident(request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.title, "from the web");

    // The console's files need no token; other paths are not found, and a
    // gRPC call to an unknown service is UNIMPLEMENTED as before.
    for (path, kind) in [
        ("/", "text/html"),
        ("/console/", "text/html"),
        ("/console/console.js", "text/javascript"),
        ("/console/console.css", "text/css"),
    ] {
        let r = http().get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(ct.starts_with(kind), "{path}: {ct}");
    }
    let r = http()
        .get(format!("{base}/console/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let a = call(&base, "../Other/Nope", framed(&get), Some(&token)).await;
    assert!(a.code == Some(12) || a.http == 404, "{a:?}");
}

/// DNS rebinding: a page whose own name resolves to 127.0.0.1 makes the
/// browser send its name as `Host` (and `Origin`). A loopback server
/// without authentication answers it PERMISSION_DENIED (HOST_NOT_ALLOWED)
/// and writes nothing; its own names, and a page it served, still work.
#[tokio::test]
async fn a_rebound_host_is_refused_by_a_loopback_server_without_authentication() {
    let app = inquest_tests::spawn_app().await;
    let base = app.endpoint();
    let own = base.trim_start_matches("http://").to_owned();
    let create = framed(&pb::CreateIncidentRequest {
        title: "from a web page".into(),
        description: String::new(),
    });
    for headers in [
        vec![("host", "rebind.attacker.example:50051")],
        vec![
            ("host", "rebind.attacker.example"),
            ("origin", "http://rebind.attacker.example"),
        ],
        vec![
            ("host", own.as_str()),
            ("origin", "http://rebind.attacker.example"),
        ],
    ] {
        let refused = call_with(&base, "CreateIncident", create.clone(), None, &headers).await;
        assert_eq!(refused.code, Some(7), "{headers:?}: {refused:?}");
        assert_eq!(app.count("incidents").await, 0, "{headers:?} wrote");
    }
    let origin = format!("http://{own}");
    let served = call_with(
        &base,
        "CreateIncident",
        create,
        None,
        &[("host", own.as_str()), ("origin", origin.as_str())],
    )
    .await;
    assert_eq!(served.code, Some(0), "{served:?}");
    assert_eq!(app.count("incidents").await, 1);
    app.stop().await.expect("stop");
}
