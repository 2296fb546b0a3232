//! `[tls]`: gRPC over TLS with certificates made here (rcgen), mutual TLS
//! with `client_ca`, clear startup errors for unusable files, and a
//! certificate renewed on disk reaching new connections without a restart.

use std::time::Duration;

use inquest_proto::v1 as pb;
use inquest_proto::v1::investigations_client::InvestigationsClient;
use inquest_server::edge::tls::TlsSection;
use inquest_tests::{
    spawn_app_with,
    tls::{Ca, Files},
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

async fn tls_client(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    identity: Option<(&str, &str)>,
) -> Result<InvestigationsClient<Channel>, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let channel = Channel::from_shared(format!("https://127.0.0.1:{}", addr.port()))
        .unwrap()
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await?;
    Ok(InvestigationsClient::new(channel))
}

async fn create(client: &mut InvestigationsClient<Channel>) -> Result<String, tonic::Status> {
    client
        .create_incident(pb::CreateIncidentRequest {
            title: "over tls".into(),
            description: String::new(),
        })
        .await
        .map(|r| r.into_inner().id)
}

#[tokio::test]
async fn serves_over_tls_refuses_plaintext_and_picks_up_a_renewed_certificate() {
    let files = Files::new();
    let ca = Ca::new("inquest test CA");
    let (cert, key) = ca.leaf();
    let section = TlsSection {
        cert: files.write("server.crt", &cert),
        key: files.write("server.key", &key),
        client_ca: None,
    };
    let app = spawn_app_with(|c| c.tls = Some(section.clone())).await;

    let mut client = tls_client(app.addr, &ca.pem, None).await.unwrap();
    let id = create(&mut client).await.unwrap();
    assert_eq!(app.count("incidents").await, 1, "{id}");

    // Plaintext HTTP/2 to the TLS port gets no answer from the service.
    if let Ok(channel) = Channel::from_shared(app.endpoint())
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5))
        .connect()
        .await
    {
        let refused = create(&mut InvestigationsClient::new(channel)).await;
        assert!(refused.is_err(), "plaintext reached the service");
    }
    assert_eq!(app.count("incidents").await, 1, "plaintext wrote nothing");

    // Renewed under a new CA: new connections get it without a restart.
    let renewed = Ca::new("renewed CA");
    let (cert2, key2) = renewed.leaf();
    files.write("server.key", &key2);
    files.write("server.crt", &cert2);
    let mut reached = false;
    for _ in 0..60 {
        if let Ok(mut c) = tls_client(app.addr, &renewed.pem, None).await
            && create(&mut c).await.is_ok()
        {
            reached = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(reached, "the renewed certificate was never served");
    let old = match tls_client(app.addr, &ca.pem, None).await {
        Ok(mut c) => create(&mut c).await.is_ok(),
        Err(_) => false,
    };
    assert!(!old, "new connections still get the old certificate");
    // The connection made before the renewal still works.
    create(&mut client).await.unwrap();
}

#[tokio::test]
async fn client_ca_requires_a_client_certificate_it_signed() {
    let files = Files::new();
    let ca = Ca::new("server CA");
    let clients = Ca::new("client CA");
    let stranger = Ca::new("stranger CA");
    let (cert, key) = ca.leaf();
    let section = TlsSection {
        cert: files.write("server.crt", &cert),
        key: files.write("server.key", &key),
        client_ca: Some(files.write("clients.crt", &clients.pem)),
    };
    let app = spawn_app_with(|c| c.tls = Some(section.clone())).await;

    let (ccert, ckey) = clients.leaf();
    let mut ok = tls_client(app.addr, &ca.pem, Some((&ccert, &ckey)))
        .await
        .unwrap();
    create(&mut ok).await.unwrap();

    for identity in [None, Some(stranger.leaf())] {
        let who = if identity.is_some() {
            "a stranger's certificate"
        } else {
            "no certificate"
        };
        let id = identity.as_ref().map(|(c, k)| (c.as_str(), k.as_str()));
        if let Ok(mut c) = tls_client(app.addr, &ca.pem, id).await {
            assert!(create(&mut c).await.is_err(), "{who} was let in");
        }
    }
    assert_eq!(app.count("incidents").await, 1);
}

#[tokio::test]
async fn unusable_tls_files_stop_startup_with_the_file_named() {
    let files = Files::new();
    let ca = Ca::new("ca");
    let (cert, key) = ca.leaf();
    let (_, other_key) = ca.leaf();
    let cert_path = files.write("server.crt", &cert);
    let key_path = files.write("server.key", &key);
    let other_key = files.write("other.key", &other_key);
    let garbage = files.write("garbage.crt", "not a certificate\n");
    let missing = files.dir.join("missing.crt");
    let database = inquest_tests::fresh_database().await;
    let db_url = database.url.clone();
    for (section, expect) in [
        (
            TlsSection {
                cert: missing.clone(),
                key: key_path.clone(),
                client_ca: None,
            },
            missing.display().to_string(),
        ),
        (
            TlsSection {
                cert: garbage.clone(),
                key: key_path.clone(),
                client_ca: None,
            },
            "holds no PEM certificate".to_owned(),
        ),
        (
            TlsSection {
                cert: cert_path.clone(),
                key: other_key.clone(),
                client_ca: None,
            },
            "does not match".to_owned(),
        ),
    ] {
        let config = inquest_server::config::Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            database_url: Some(db_url.clone()),
            tls: Some(section),
            ..Default::default()
        };
        let err = match inquest_server::startup::Application::build(&config, &db_url).await {
            Ok(_) => panic!("started with unusable TLS files (expected {expect:?})"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains(&expect), "{err:?} should say {expect:?}");
    }
}
