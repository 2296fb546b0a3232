//! The Kubernetes manifests and the ConfigMap's config.

use super::*;

// ---------------------------------------------------------------------------
// Kubernetes

#[test]
fn every_manifest_parses_and_names_itself() {
    let files = kube_yaml_files();
    assert!(!files.is_empty(), "deploy/kubernetes has no manifests");
    for file in &files {
        let path = kube_dir().join(file);
        for doc in yaml_docs(&path) {
            let what = format!("deploy/kubernetes/{file}");
            str_at(&doc["apiVersion"], &format!("{what} apiVersion"));
            let kind = str_at(&doc["kind"], &format!("{what} kind"));
            if kind != "Kustomization" {
                str_at(&doc["metadata"]["name"], &format!("{what} metadata.name"));
            }
        }
    }
    one_doc(&deploy_dir().join("compose.yaml"));
}

/// `kubectl apply -k` must apply every manifest here, and only those that
/// exist. `*.example.yaml` files hold placeholders and must not be applied.
#[test]
fn kustomization_lists_exactly_the_manifests() {
    let k = kube("kustomization.yaml");
    assert_eq!(str_at(&k["kind"], "kustomization kind"), "Kustomization");
    let listed: Vec<String> = vec_at(&k["resources"], "kustomization resources")
        .iter()
        .map(|r| str_at(r, "a kustomization resource").to_owned())
        .collect();
    let listed_set: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(
        listed.len(),
        listed_set.len(),
        "kustomization lists a file twice: {listed:?}"
    );
    let manifests: BTreeSet<String> = kube_yaml_files()
        .into_iter()
        .filter(|f| f != "kustomization.yaml" && !f.contains(".example."))
        .collect();
    assert_eq!(
        listed_set, manifests,
        "kustomization.yaml resources must be exactly the manifests in deploy/kubernetes \
         (other than kustomization.yaml and *.example.yaml)"
    );
    for f in &listed_set {
        assert!(
            kube_dir().join(f).is_file(),
            "kustomization lists {f}, which does not exist"
        );
    }
    for required in [
        "configmap.yaml",
        "deployment.yaml",
        "service.yaml",
        "pdb.yaml",
    ] {
        assert!(
            listed_set.contains(required),
            "kustomization does not list {required}"
        );
    }
}

#[test]
fn deployment_runs_three_replicas_rolling_one_at_a_time() {
    let d = deployment();
    let spec = &d["spec"];
    assert_eq!(int_at(&spec["replicas"], "Deployment replicas"), 3);
    assert_eq!(
        str_at(&spec["strategy"]["type"], "Deployment strategy.type"),
        "RollingUpdate"
    );
    let rolling = &spec["strategy"]["rollingUpdate"];
    assert_eq!(int_at(&rolling["maxUnavailable"], "maxUnavailable"), 1);
    assert_eq!(int_at(&rolling["maxSurge"], "maxSurge"), 1);
    assert_selects(
        &string_map(&spec["selector"]["matchLabels"], "Deployment selector"),
        &pod_labels(&d),
        "Deployment selector",
    );
}

/// The gRPC port is one number everywhere: the ConfigMap's `listen`, the
/// container port, the Service's target and the Dockerfile's
/// EXPOSE.
#[test]
fn the_grpc_port_agrees_everywhere() {
    let d = deployment();
    let c = container(&d);
    let port_number = grpc_container_port(c);

    let config = configmap_config_without_lease();
    assert_eq!(
        config.listen.port(),
        port_number,
        "the ConfigMap's listen port is not the container's grpc port"
    );
    assert!(
        config.listen.ip().is_unspecified(),
        "the ConfigMap must listen on all interfaces (0.0.0.0), not {}: probes and the Service \
         reach the pod on its own IP",
        config.listen
    );

    // The gRPC port serves TLS, which the kubelet's grpc probe cannot
    // speak: the probes are HTTP on the admin listener, at the paths it
    // serves, on the container port the ConfigMap's [admin] listen names.
    let admin_port = config.admin.listen.port();
    assert!(
        config.admin.enabled && config.admin.listen.ip().is_unspecified(),
        "the probes need the admin listener on all interfaces"
    );
    assert!(
        config.tls.is_some(),
        "the ConfigMap serves gRPC without TLS"
    );
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        let p = &c[probe];
        if probe == "startupProbe" && p.is_badvalue() {
            continue;
        }
        assert!(!p.is_badvalue(), "the container has no {probe}");
        let http = &p["httpGet"];
        assert!(
            !http.is_badvalue(),
            "{probe} should be an httpGet probe on the admin listener: {p:?}"
        );
        let probe_port = match &http["port"] {
            Yaml::String(name) => {
                let named = vec_at(&c["ports"], "container ports")
                    .iter()
                    .find(|p| p["name"].as_str() == Some(name.as_str()))
                    .unwrap_or_else(|| panic!("{probe} port {name:?} names no container port"));
                port(&named["containerPort"], "containerPort")
            }
            other => port(other, &format!("{probe}.httpGet.port")),
        };
        assert_eq!(
            probe_port, admin_port,
            "{probe} checks another port than the admin listener's"
        );
        let path = str_at(&http["path"], &format!("{probe}.httpGet.path"));
        let want = if probe == "livenessProbe" {
            "/healthz"
        } else {
            "/readyz"
        };
        assert_eq!(path, want, "{probe} path");
    }

    let s = kube("service.yaml");
    assert_eq!(str_at(&s["kind"], "service.yaml kind"), "Service");
    let ty = &s["spec"]["type"];
    if !ty.is_badvalue() {
        assert_eq!(str_at(ty, "Service type"), "ClusterIP");
    }
    let ports = vec_at(&s["spec"]["ports"], "Service ports");
    let grpc = ports
        .iter()
        .find(|p| p["name"].as_str() == Some("grpc"))
        .expect("the Service has a port named grpc");
    assert_eq!(
        str_at(&grpc["appProtocol"], "Service port appProtocol"),
        "grpc"
    );
    let target = match &grpc["targetPort"] {
        Yaml::BadValue => port(&grpc["port"], "Service port"),
        Yaml::Integer(_) => port(&grpc["targetPort"], "Service targetPort"),
        Yaml::String(name) => {
            let named = vec_at(&c["ports"], "container ports")
                .iter()
                .find(|p| p["name"].as_str() == Some(name.as_str()))
                .unwrap_or_else(|| panic!("Service targetPort {name:?} names no container port"));
            port(&named["containerPort"], "containerPort")
        }
        other => panic!("Service targetPort should be a number or a name, found {other:?}"),
    };
    assert_eq!(
        target, port_number,
        "the Service targets another port than grpc"
    );

    let runtime = dockerfile_stages().pop().expect("Dockerfile has a stage");
    let exposed: Vec<&str> = runtime
        .all("EXPOSE")
        .flat_map(str::split_whitespace)
        .collect();
    assert!(
        exposed
            .iter()
            .any(|p| p.trim_end_matches("/tcp") == port_number.to_string()),
        "the Dockerfile does not EXPOSE {port_number}: {exposed:?}"
    );
}

#[test]
fn the_pod_gets_its_replica_id_and_database_url() {
    let d = deployment();
    let env = vec_at(&container(&d)["env"], "container env");
    let var = |name: &str| {
        let found: Vec<&Yaml> = env
            .iter()
            .filter(|e| e["name"].as_str() == Some(name))
            .collect();
        assert_eq!(found.len(), 1, "env {name} should be set exactly once");
        found[0]
    };
    let replica = var("INQUEST_REPLICA_ID");
    assert_eq!(
        str_at(
            &replica["valueFrom"]["fieldRef"]["fieldPath"],
            "INQUEST_REPLICA_ID valueFrom.fieldRef.fieldPath"
        ),
        "metadata.name",
        "INQUEST_REPLICA_ID must be the pod's name (downward API)"
    );
    // A pod name of this Deployment's shape (name, ReplicaSet hash, random
    // suffix) passes the server's own replica id check.
    let pod_name = format!(
        "{}-5d8c7b9f6d-x2x7k",
        str_at(&d["metadata"]["name"], "Deployment name")
    );
    let mut config = Config::default();
    config
        .apply_env(|k| (k == "INQUEST_REPLICA_ID").then(|| pod_name.clone()))
        .expect("the replica id is read from the environment");
    config
        .validate()
        .unwrap_or_else(|e| panic!("pod name {pod_name:?} is not a valid replica id: {e}"));
    let db = var("DATABASE_URL");
    let secret_ref = &db["valueFrom"]["secretKeyRef"];
    str_at(&secret_ref["name"], "DATABASE_URL secretKeyRef.name");
    assert!(
        db["value"].is_badvalue(),
        "DATABASE_URL must come from the Secret, not a literal value"
    );
    assert_ne!(
        secret_ref["optional"].as_bool(),
        Some(true),
        "DATABASE_URL must not be optional: without it the server starts an embedded PostgreSQL"
    );
}

/// Every Secret the Deployment reads (name and key) is in
/// secret.example.yaml, so the example shows everything to fill in.
#[test]
fn referenced_secrets_exist_in_the_example() {
    let secret = kube("secret.example.yaml");
    assert_eq!(
        str_at(&secret["kind"], "secret.example.yaml kind"),
        "Secret"
    );
    let secret_name = str_at(&secret["metadata"]["name"], "Secret name").to_owned();
    let mut keys = BTreeSet::new();
    for section in ["stringData", "data"] {
        if !secret[section].is_badvalue() {
            keys.extend(string_map(&secret[section], section).into_keys());
        }
    }

    let d = deployment();
    let c = container(&d);
    let mut referenced = 0;
    for e in vec_at(&c["env"], "container env") {
        let r = &e["valueFrom"]["secretKeyRef"];
        if r.is_badvalue() {
            continue;
        }
        referenced += 1;
        let name = str_at(&r["name"], "secretKeyRef.name");
        let key = str_at(&r["key"], "secretKeyRef.key");
        assert_eq!(
            name, secret_name,
            "env {:?} reads Secret {name:?}, not the example's {secret_name:?}",
            e["name"]
        );
        assert!(
            keys.contains(key),
            "env {:?} reads key {key:?}, which secret.example.yaml does not have ({keys:?})",
            e["name"]
        );
    }
    if let Some(from) = c["envFrom"].as_vec() {
        for f in from {
            if let Some(name) = f["secretRef"]["name"].as_str() {
                referenced += 1;
                assert_eq!(name, secret_name, "envFrom reads Secret {name:?}");
            }
        }
    }
    assert!(referenced > 0, "the Deployment reads no Secret");
    assert!(
        keys.contains("DATABASE_URL"),
        "secret.example.yaml has no DATABASE_URL"
    );
}

#[test]
fn the_pod_is_locked_down_and_bounded() {
    let d = deployment();
    let pod = &d["spec"]["template"]["spec"];
    let c = container(&d);
    let run_as_non_root = c["securityContext"]["runAsNonRoot"]
        .as_bool()
        .or_else(|| pod["securityContext"]["runAsNonRoot"].as_bool());
    assert_eq!(run_as_non_root, Some(true), "runAsNonRoot must be true");
    assert_eq!(
        c["securityContext"]["readOnlyRootFilesystem"].as_bool(),
        Some(true),
        "readOnlyRootFilesystem must be true"
    );
    for kind in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                !c["resources"][kind][resource].is_badvalue(),
                "the container has no resources.{kind}.{resource}"
            );
        }
    }
}

/// The config file the image's CMD names is the ConfigMap's `inquest.toml`,
/// mounted where the CMD looks.
#[test]
fn the_configmap_is_mounted_where_the_server_reads_it() {
    let d = deployment();
    let c = container(&d);
    let runtime = dockerfile_stages().pop().expect("Dockerfile has a stage");
    let args: Vec<String> = match c["args"].as_vec() {
        Some(args) => args
            .iter()
            .map(|a| str_at(a, "container args").to_owned())
            .collect(),
        None => runtime.exec_form("CMD"),
    };
    assert!(
        c["command"].is_badvalue(),
        "the container must keep the image's ENTRYPOINT"
    );
    let config_path =
        PathBuf::from(flag_value(&args, "--config").expect("the server is started with --config"));
    let dir = config_path.parent().expect("--config has a directory");
    let file = config_path
        .file_name()
        .and_then(|f| f.to_str())
        .expect("--config names a file");

    let cm = configmap();
    let cm_name = str_at(&cm["metadata"]["name"], "ConfigMap name");
    assert!(
        !cm["data"][file].is_badvalue(),
        "--config reads {file}, which the ConfigMap does not hold"
    );
    let volumes = vec_at(&d["spec"]["template"]["spec"]["volumes"], "pod volumes");
    let volume = volumes
        .iter()
        .find(|v| v["configMap"]["name"].as_str() == Some(cm_name))
        .unwrap_or_else(|| panic!("no volume mounts ConfigMap {cm_name}"));
    assert!(
        volume["configMap"]["items"].is_badvalue(),
        "mount the whole ConfigMap, so files the config names (mcp.json) can sit beside it"
    );
    let volume_name = str_at(&volume["name"], "volume name");
    let mount = vec_at(&c["volumeMounts"], "volumeMounts")
        .iter()
        .find(|m| m["name"].as_str() == Some(volume_name))
        .unwrap_or_else(|| panic!("volume {volume_name} is not mounted"));
    assert_eq!(
        Path::new(str_at(&mount["mountPath"], "mountPath")),
        dir,
        "the ConfigMap is not mounted where --config looks"
    );
}

/// SIGTERM → preStop delay, then `[shutdown] grace` for in-flight calls and
/// the turn writes in flight: the kubelet must not SIGKILL before that.
#[test]
fn termination_grace_covers_the_shutdown() {
    let d = deployment();
    let pod = &d["spec"]["template"]["spec"];
    let termination = Duration::from_secs(
        u64::try_from(int_at(
            &pod["terminationGracePeriodSeconds"],
            "terminationGracePeriodSeconds",
        ))
        .expect("terminationGracePeriodSeconds is not negative"),
    );
    let config = configmap_config_without_lease();
    assert!(
        termination > config.shutdown.grace,
        "terminationGracePeriodSeconds ({termination:?}) must be longer than [shutdown] grace ({:?})",
        config.shutdown.grace
    );
    let pre_stop = &container(&d)["lifecycle"]["preStop"];
    let pre_stop_delay = if let Some(command) = pre_stop["exec"]["command"].as_vec() {
        match command.as_slice() {
            [cmd, secs] if cmd.as_str() == Some("sleep") => Duration::from_secs(
                str_at(secs, "preStop sleep")
                    .parse()
                    .expect("sleep seconds"),
            ),
            _ => Duration::ZERO,
        }
    } else if let Some(secs) = pre_stop["sleep"]["seconds"].as_i64() {
        Duration::from_secs(u64::try_from(secs).expect("preStop sleep seconds"))
    } else {
        Duration::ZERO
    };
    let needed = pre_stop_delay + config.shutdown.grace + config.store.turn_write_timeout;
    assert!(
        termination > needed,
        "terminationGracePeriodSeconds ({termination:?}) must exceed preStop ({pre_stop_delay:?}) \
         + shutdown grace + turn write timeout = {needed:?}"
    );
}

#[test]
fn service_and_pdb_select_the_deployments_pods() {
    let d = deployment();
    let labels = pod_labels(&d);
    let s = kube("service.yaml");
    assert_selects(
        &string_map(&s["spec"]["selector"], "Service selector"),
        &labels,
        "Service",
    );

    let pdb = kube("pdb.yaml");
    assert_eq!(str_at(&pdb["kind"], "pdb.yaml kind"), "PodDisruptionBudget");
    assert_eq!(str_at(&pdb["apiVersion"], "pdb apiVersion"), "policy/v1");
    assert_selects(
        &string_map(&pdb["spec"]["selector"]["matchLabels"], "PDB selector"),
        &labels,
        "PodDisruptionBudget",
    );
    let replicas = int_at(&d["spec"]["replicas"], "replicas");
    let min_available = pdb["spec"]["minAvailable"].as_i64();
    let max_unavailable = pdb["spec"]["maxUnavailable"].as_i64();
    match (min_available, max_unavailable) {
        (Some(min), None) => assert!(
            (2..replicas).contains(&min),
            "PDB minAvailable {min} should keep at least 2 of {replicas} and still allow a drain"
        ),
        (None, Some(max)) => assert_eq!(max, 1, "PDB maxUnavailable should be 1"),
        _ => panic!("the PDB needs exactly one of minAvailable / maxUnavailable, as a number"),
    }
}

// ---------------------------------------------------------------------------
// The ConfigMap's config file

/// The whole ConfigMap config through the server's loader, `[lease]`
/// included. Needs the `[lease]` section in `inquest_server::config`.
#[test]
fn configmap_config_loads_with_the_server_loader() {
    let text = configmap_toml();
    let config = Config::from_toml(&text).unwrap_or_else(|e| {
        panic!("the ConfigMap's inquest.toml does not load with Config::from_toml: {e}")
    });
    config
        .validate()
        .expect("the ConfigMap's inquest.toml is valid");
    assert!(config.listen.ip().is_unspecified());
    assert!(
        config.database_url.is_none(),
        "the database URL comes from the Secret (DATABASE_URL), not the ConfigMap"
    );
}

/// Replicas share sessions through leases: the ConfigMap sets the lease
/// ttl explicitly, as a duration the server's parser reads.
#[test]
fn configmap_sets_the_lease_ttl() {
    let table: toml::Table =
        toml::from_str(&configmap_toml()).expect("the ConfigMap's inquest.toml is valid TOML");
    let lease = table
        .get("lease")
        .and_then(toml::Value::as_table)
        .expect("the ConfigMap's inquest.toml has a [lease] table");
    let ttl = lease
        .get("ttl")
        .and_then(toml::Value::as_str)
        .expect("[lease] has ttl as a duration string");
    assert_eq!(config_duration(ttl), Duration::from_secs(30));
    assert!(
        !table.contains_key("database_url"),
        "the database URL comes from the Secret"
    );
}
