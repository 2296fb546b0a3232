//! TLS to PostgreSQL: `sslmode` in the database URL does what libpq says
//! (`require` encrypts, `verify-ca` checks the chain, `verify-full` the
//! chain and the host name), for the pools and the `LISTEN` connection,
//! against a real cluster of this test's own with `ssl = on` and a
//! certificate made here.

use std::path::Path;

use inquest_server::{config::Config, startup::Application};
use inquest_store::embedded::{EmbeddedOptions, EmbeddedPostgres};
use inquest_tests::tls::{Ca, Files};

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Puts `cert`/`key` in the cluster's data directory and turns `ssl` on
/// (takes effect at the next start).
fn enable_ssl(pgdata: &Path, cert: &str, key: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(pgdata.join("server.crt"), cert).unwrap();
    std::fs::write(pgdata.join("server.key"), key).unwrap();
    std::fs::set_permissions(
        pgdata.join("server.key"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let conf = pgdata.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
    std::fs::write(&conf, text).unwrap();
    if is_root() {
        let ok = std::process::Command::new("chown")
            .args(["postgres:", "server.crt", "server.key", "postgresql.conf"])
            .current_dir(pgdata)
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

async fn builds(url: &str) -> Result<(), String> {
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        database_url: Some(url.to_owned()),
        ..Default::default()
    };
    let mut config = config;
    config.admin.enabled = false;
    config.store.connect_timeout = std::time::Duration::from_secs(5);
    Application::build(&config, url)
        .await
        .map(|_| ())
        .map_err(|e| format!("{e:#}"))
}

#[tokio::test]
async fn sslmode_require_verify_ca_and_verify_full_do_what_they_say() {
    let files = Files::new();
    let data_dir = files.dir.join("cluster");
    std::fs::create_dir_all(&data_dir).unwrap();
    let options = EmbeddedOptions::new(&data_dir);
    let pg = tokio::task::spawn_blocking({
        let options = options.clone();
        move || EmbeddedPostgres::start(&options)
    })
    .await
    .unwrap()
    .expect("starting this test's own cluster");
    pg.stop().unwrap();
    let ca = Ca::new("database CA");
    // Named for another host: verify-ca accepts it, verify-full must not.
    let (cert, key) = ca.leaf_for(&["db.internal"]);
    enable_ssl(
        &data_dir.canonicalize().unwrap().join("pgdata"),
        &cert,
        &key,
    );
    let pg = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&options))
        .await
        .unwrap()
        .expect("restarting with ssl = on");
    let ca_file = files.write("ca.pem", &ca.pem);
    let other = files.write("other.pem", &Ca::new("other CA").pem);
    let base = pg.url();
    let with = |q: String| format!("{base}?{q}");

    builds(&with("sslmode=require".into()))
        .await
        .expect("require");
    builds(&with(format!(
        "sslmode=verify-ca&sslrootcert={}",
        ca_file.display()
    )))
    .await
    .expect("verify-ca with the right CA");
    let err = builds(&with(format!(
        "sslmode=verify-full&sslrootcert={}",
        ca_file.display()
    )))
    .await
    .expect_err("verify-full against a certificate for another name");
    assert!(
        !err.contains(&base),
        "the URL (with its password) leaked: {err}"
    );
    builds(&with(format!(
        "sslmode=verify-ca&sslrootcert={}",
        other.display()
    )))
    .await
    .expect_err("verify-ca with a CA that did not sign it");
    let err = builds(&with("sslmode=verify-full".into()))
        .await
        .expect_err("verify-full without a root certificate");
    assert!(err.contains("sslrootcert"), "{err}");

    // What ran above really was encrypted: the pool's connections and the
    // LISTEN connection, as the server sees them.
    let (client, conn) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let url = with("sslmode=verify-ca&application_name=inquest-ssl-check&sslrootcert=".to_owned())
        + &ca_file.display().to_string();
    let store =
        inquest_store::Store::connect(&inquest_store::StoreConfig::new(url.clone())).unwrap();
    store.migrate().await.unwrap();
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let stop = tokio_util::sync::CancellationToken::new();
    let listener = tokio::spawn(inquest_store::run_listener(
        inquest_store::ListenerConfig::new(url, "ssl_check"),
        stop.clone(),
        move |e| {
            let _ = tx.send(e);
        },
    ));
    assert_eq!(
        events.recv().await,
        Some(inquest_store::ListenEvent::Listening),
        "the LISTEN connection came up over TLS"
    );
    let rows = client
        .query(
            "SELECT a.application_name, s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name IN ('inquest-ssl-check', 'inquest-listen')",
            &[],
        )
        .await
        .unwrap();
    let names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert!(names.iter().any(|n| n == "inquest-ssl-check"), "{names:?}");
    assert!(names.iter().any(|n| n == "inquest-listen"), "{names:?}");
    assert!(
        rows.iter().all(|r| r.get::<_, bool>(1)),
        "every connection is encrypted"
    );
    stop.cancel();
    listener.await.unwrap();
    drop(store);
    pg.stop().unwrap();
}
