//! `deploy/compose.yaml`.

use super::*;

// ---------------------------------------------------------------------------
// compose.yaml

/// A compose `environment`, in map or `KEY=VALUE` list form.
fn compose_env(service: &Yaml, name: &str) -> BTreeMap<String, String> {
    let env = &service["environment"];
    match env {
        Yaml::Hash(_) => string_map(env, &format!("{name}.environment")),
        Yaml::Array(items) => items
            .iter()
            .map(|i| {
                let s = str_at(i, &format!("{name}.environment item"));
                let (k, v) = s
                    .split_once('=')
                    .unwrap_or_else(|| panic!("{name}.environment item {s:?} has no ="));
                (k.to_owned(), v.to_owned())
            })
            .collect(),
        Yaml::BadValue => BTreeMap::new(),
        other => panic!("{name}.environment should be a map or a list, found {other:?}"),
    }
}

#[test]
fn compose_runs_three_replicas_on_one_postgres() {
    let compose_path = deploy_dir().join("compose.yaml");
    let compose = one_doc(&compose_path);
    let services = compose["services"]
        .as_hash()
        .expect("compose.yaml has services");

    let postgres = &compose["services"]["postgres"];
    assert!(!postgres.is_badvalue(), "compose has no postgres service");
    assert!(
        str_at(&postgres["image"], "postgres image").starts_with("postgres:15"),
        "compose's postgres should be postgres:15"
    );
    assert!(
        !postgres["healthcheck"]["test"].is_badvalue(),
        "compose's postgres has no healthcheck"
    );

    let replicas: Vec<(&str, &Yaml)> = services
        .iter()
        .map(|(k, v)| (str_at(k, "a compose service name"), v))
        .filter(|(name, _)| name.starts_with("inquest"))
        .collect();
    let names: Vec<&str> = replicas.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        ["inquest-1", "inquest-2", "inquest-3"],
        "compose should run inquest-1..3"
    );

    let mut replica_ids = BTreeSet::new();
    let mut host_ports = BTreeSet::new();
    for (name, service) in replicas {
        let build = &service["build"];
        let context =
            deploy_dir().join(str_at(&build["context"], &format!("{name}.build.context")));
        let dockerfile = str_at(&build["dockerfile"], &format!("{name}.build.dockerfile"));
        assert!(
            context.join(dockerfile).is_file(),
            "{name} builds from {}, which does not exist",
            context.join(dockerfile).display()
        );
        assert_eq!(
            context
                .join(dockerfile)
                .canonicalize()
                .expect("the Dockerfile resolves"),
            deploy_dir()
                .join("Dockerfile")
                .canonicalize()
                .expect("deploy/Dockerfile resolves"),
            "{name} should build from deploy/Dockerfile"
        );
        assert_eq!(
            str_at(
                &service["depends_on"]["postgres"]["condition"],
                &format!("{name}.depends_on.postgres.condition")
            ),
            "service_healthy",
            "{name} must wait for a healthy postgres"
        );

        let env = compose_env(service, name);
        let id = env
            .get("INQUEST_REPLICA_ID")
            .unwrap_or_else(|| panic!("{name} has no INQUEST_REPLICA_ID"));
        assert!(
            replica_ids.insert(id.clone()),
            "INQUEST_REPLICA_ID {id} is used twice"
        );
        let url = env
            .get("DATABASE_URL")
            .unwrap_or_else(|| panic!("{name} has no DATABASE_URL"));
        assert!(
            url.starts_with("postgres://") && url.contains("@postgres:5432/"),
            "{name}'s DATABASE_URL should point at the postgres service: {url}"
        );

        // The config the image's CMD reads, mounted from the repository.
        let config_target = "/etc/inquest/inquest.toml";
        let mount = vec_at(&service["volumes"], &format!("{name}.volumes"))
            .iter()
            .map(|v| str_at(v, &format!("{name} volume")))
            .find_map(|v| {
                let mut parts = v.splitn(3, ':');
                let (source, target) = (parts.next()?, parts.next()?);
                (target == config_target).then(|| source.to_owned())
            })
            .unwrap_or_else(|| panic!("{name} mounts nothing at {config_target}"));
        let source = deploy_dir().join(&mount);
        assert!(
            source.is_file(),
            "{name} mounts {mount}, which is not a file in the repository"
        );

        // What the replica listens on: that file, then its environment,
        // through the server's own layering.
        let mut config = Config::from_toml(&read(&source))
            .unwrap_or_else(|e| panic!("{name}'s mounted config does not load: {e}"));
        config
            .apply_env(|k| env.get(k).cloned())
            .unwrap_or_else(|e| panic!("{name}'s environment is invalid: {e}"));
        config
            .validate()
            .unwrap_or_else(|e| panic!("{name}'s config is invalid: {e}"));
        assert!(
            config.listen.ip().is_unspecified(),
            "{name} listens on {}: unreachable through a published port",
            config.listen
        );
        assert_eq!(config.database_url.as_deref(), Some(url.as_str()));

        let ports = vec_at(&service["ports"], &format!("{name}.ports"));
        assert_eq!(ports.len(), 1, "{name} should publish one port");
        let published = str_at(&ports[0], &format!("{name} port"));
        let parts: Vec<&str> = published.split(':').collect();
        let [ip, host, container] = parts.as_slice() else {
            panic!("{name} should publish as 127.0.0.1:HOST:CONTAINER, not {published:?}");
        };
        assert_eq!(*ip, "127.0.0.1", "{name} must publish on 127.0.0.1 only");
        let container: u16 = container.parse().expect("container port is a number");
        assert_eq!(
            container,
            config.listen.port(),
            "{name} publishes {container}, but listens on {}",
            config.listen
        );
        let host: u16 = host.parse().expect("host port is a number");
        assert!(
            host_ports.insert(host),
            "host port {host} is published twice"
        );
    }
}
