//! Health checking answers from the database; reflection lists the service.

use inquest_tests::spawn_app;
use tokio_stream::StreamExt;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use tonic_reflection::pb::v1::{
    ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
    server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
};

/// Asks until the answer is `want` (or 100 checks, 10 s, went by): the
/// last answer.
async fn status_becomes(
    health: &mut HealthClient<tonic::transport::Channel>,
    want: ServingStatus,
) -> ServingStatus {
    let mut last = ServingStatus::Unknown;
    for _ in 0..100 {
        last = health
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .unwrap()
            .into_inner()
            .status();
        if last == want {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    last
}

#[tokio::test]
async fn health_follows_the_database() {
    let app = spawn_app().await;
    let mut health = HealthClient::new(app.channel().await);
    for service in ["", "inquest.v1.Investigations"] {
        let r = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status(), ServingStatus::Serving, "service {service:?}");
    }
    let unknown = health
        .check(HealthCheckRequest {
            service: "nope.Svc".into(),
        })
        .await;
    crate::error_details::assert_reason(
        &unknown.unwrap_err(),
        tonic::Code::NotFound,
        inquest_server::reason::Reason::UnknownService,
        &[],
    );

    // The answer comes from a probe taken at most once a second: it
    // follows the database within a few probes.
    app.take_database_down().await;
    assert_eq!(
        status_becomes(&mut health, ServingStatus::NotServing).await,
        ServingStatus::NotServing
    );
    app.bring_database_up().await;
    assert_eq!(
        status_becomes(&mut health, ServingStatus::Serving).await,
        ServingStatus::Serving
    );
    app.stop().await.unwrap();
}

#[tokio::test]
async fn reflection_lists_services_and_describes_them() {
    let app = spawn_app().await;
    let mut reflection = ServerReflectionClient::new(app.channel().await);
    let requests = tokio_stream::iter(vec![
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        },
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::FileContainingSymbol(
                "inquest.v1.Investigations".into(),
            )),
        },
    ]);
    let mut responses = reflection
        .server_reflection_info(requests)
        .await
        .unwrap()
        .into_inner();
    let Some(Ok(first)) = responses.next().await else {
        panic!("no list_services response");
    };
    let Some(MessageResponse::ListServicesResponse(list)) = first.message_response else {
        panic!("unexpected response {first:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for expected in ["inquest.v1.Investigations", "grpc.health.v1.Health"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    let Some(Ok(second)) = responses.next().await else {
        panic!("no file_containing_symbol response");
    };
    let Some(MessageResponse::FileDescriptorResponse(files)) = second.message_response else {
        panic!("unexpected response {second:?}");
    };
    assert!(!files.file_descriptor_proto.is_empty());
    app.stop().await.unwrap();
}
