//! The embedded cluster accepts only its owner: a connection without the
//! superuser's password, or with a wrong one, is refused over TCP, and a
//! cluster an older version created with `trust` is switched to passwords
//! at its next start. Needs the PostgreSQL server binaries, as the whole
//! suite does (`cargo xtask test` installs them): it fails, never skips,
//! without them.

use std::path::PathBuf;

use inquest_store::embedded::{EmbeddedOptions, EmbeddedPostgres, find_binaries};

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start(dir: &std::path::Path) -> EmbeddedPostgres {
    assert!(
        find_binaries().is_some(),
        "PostgreSQL server binaries are missing: run the suite with `cargo xtask test`"
    );
    let mut options = EmbeddedOptions::new(dir);
    options.database = "inquest".into();
    EmbeddedPostgres::start(&options).unwrap_or_else(|e| panic!("starting the cluster: {e}"))
}

async fn connects(url: &str) -> Result<(), String> {
    match tokio_postgres::connect(url, tokio_postgres::NoTls).await {
        Ok((client, connection)) => {
            let task = tokio::spawn(connection);
            let row = client
                .query_one("SELECT 1", &[])
                .await
                .map_err(|e| e.to_string())?;
            assert_eq!(row.get::<_, i32>(0), 1);
            drop(client);
            let _ = task.await;
            Ok(())
        }
        Err(e) => Err(format!(
            "{e} ({:?}): {:?}",
            std::error::Error::source(&e).map(|s| s.to_string()),
            e.as_db_error().map(|d| d.code().code())
        )),
    }
}

fn refused(result: Result<(), String>) -> bool {
    // 28P01: invalid_password (scram-sha-256 refused the attempt).
    matches!(result, Err(e) if e.contains("28P01") || e.contains("password"))
}

#[tokio::test]
async fn only_the_password_holder_connects_and_old_trusting_clusters_are_closed() {
    let dir = Dir(std::env::temp_dir().join(format!("inquest-embedded-{}", uuid::Uuid::new_v4())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let pg = start(&dir.0);
    connects(&pg.url()).await.expect("the owner connects");
    let stranger = connects(&pg.url_without_password("inquest")).await;
    assert!(refused(stranger.clone()), "no password: {stranger:?}");
    let wrong = pg
        .url_without_password("inquest")
        .replace("inquest@", "inquest:not-the-password@");
    let wrong = connects(&wrong).await;
    assert!(refused(wrong.clone()), "wrong password: {wrong:?}");
    let file = dir.0.join("superuser.password");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o077, 0, "the password file is private");

    // A cluster as an older version left it: trust everywhere, no file.
    pg.stop().unwrap();
    let hba = dir.0.join("pgdata/pg_hba.conf");
    let text = std::fs::read_to_string(&hba).unwrap();
    let trusting: String = text
        .lines()
        .map(|l| format!("{}\n", l.replace("scram-sha-256", "trust")))
        .collect();
    std::fs::write(&hba, trusting).unwrap();
    std::fs::remove_file(&file).unwrap();
    let pg = start(&dir.0);
    connects(&pg.url())
        .await
        .expect("the owner connects after the switch");
    let stranger = connects(&pg.url_without_password("inquest")).await;
    assert!(
        refused(stranger.clone()),
        "no password after the switch: {stranger:?}"
    );
    pg.stop().unwrap();
}
