//! The real `inquest` binary as a separate OS process, for the process
//! tests: start it on a free port, wait until it listens, talk to it, stop
//! it with SIGTERM and check it exits 0.

#![allow(dead_code)] // each test binary uses its own part of this

use std::{
    net::{TcpListener, TcpStream},
    process::{Child, Command, Stdio},
    time::Duration,
};

use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};

pub type Client = InvestigationsClient<tonic::transport::Channel>;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `inquest serve`.
pub struct Server {
    child: Child,
    pub port: u16,
}

impl Server {
    /// Runs `inquest serve --listen 127.0.0.1:<free port> ARGS` and returns
    /// once it accepts connections. The suite's `DATABASE_URL` is not passed
    /// on: a server meant to use its embedded default must not see it.
    pub async fn start(args: &[&str]) -> Server {
        let port = free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_inquest"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env_remove("DATABASE_URL")
            .env_remove("INQUEST_DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        for _ in 0..1200 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Server { child, port };
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("server exited before listening: {status}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("server never listened on {port}");
    }

    pub async fn client(&self) -> Client {
        InvestigationsClient::connect(format!("http://127.0.0.1:{}", self.port))
            .await
            .unwrap()
    }

    /// SIGTERM, then waits: the server must exit 0.
    pub async fn stop(self) {
        let mut child = self.child;
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(exit.success(), "exit status {exit}");
    }
}

pub async fn create_incident(c: &mut Client, title: &str) -> pb::Incident {
    c.create_incident(pb::CreateIncidentRequest {
        title: title.into(),
        description: String::new(),
    })
    .await
    .unwrap()
    .into_inner()
}

pub async fn start_session(
    c: &mut Client,
    incident_id: &str,
    message: &str,
) -> Result<pb::Session, tonic::Status> {
    c.start_session(pb::StartSessionRequest {
        incident_id: incident_id.into(),
        message: message.into(),
        idempotency_key: String::new(),
    })
    .await
    .map(tonic::Response::into_inner)
}

/// Polls until the session is neither pending nor running.
pub async fn settled(c: &mut Client, id: &str) -> pb::Session {
    for _ in 0..1000 {
        let s = c
            .get_session(pb::GetSessionRequest {
                session_id: id.into(),
            })
            .await
            .unwrap()
            .into_inner();
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
