//! Keeps `deploy/` valid: the Kubernetes manifests, the compose file and the
//! Dockerfile parse, agree with each other (ports, labels, secret names,
//! config paths) and with the server itself (the ConfigMap's `inquest.toml`
//! goes through the real config loader).
//!
//! These read files only: no cluster, no Docker, no database.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    time::Duration,
};

use inquest_server::Config;
use yaml_rust2::{Yaml, YamlLoader};

// ---------------------------------------------------------------------------
// Files

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deploy_dir() -> PathBuf {
    repo_root().join("deploy")
}

fn kube_dir() -> PathBuf {
    deploy_dir().join("kubernetes")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every YAML document in the file, empty ones (a trailing `---`) left out.
fn yaml_docs(path: &Path) -> Vec<Yaml> {
    let docs = YamlLoader::load_from_str(&read(path))
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The file's only document.
fn one_doc(path: &Path) -> Yaml {
    let mut docs = yaml_docs(path);
    assert_eq!(
        docs.len(),
        1,
        "{} should hold exactly one YAML document",
        path.display()
    );
    docs.remove(0)
}

fn kube(file: &str) -> Yaml {
    let doc = one_doc(&kube_dir().join(file));
    assert!(
        doc["kind"].as_str().is_some(),
        "deploy/kubernetes/{file} has no kind"
    );
    doc
}

fn kube_yaml_files() -> BTreeSet<String> {
    std::fs::read_dir(kube_dir())
        .expect("listing deploy/kubernetes")
        .map(|e| {
            e.expect("reading a deploy/kubernetes entry")
                .file_name()
                .into_string()
                .expect("file names in deploy/kubernetes are UTF-8")
        })
        .filter(|name| name.ends_with(".yaml") || name.ends_with(".yml"))
        .collect()
}

// ---------------------------------------------------------------------------
// YAML access with messages that name what is missing

fn str_at<'a>(y: &'a Yaml, what: &str) -> &'a str {
    y.as_str()
        .unwrap_or_else(|| panic!("{what} should be a string, found {y:?}"))
}

fn int_at(y: &Yaml, what: &str) -> i64 {
    y.as_i64()
        .unwrap_or_else(|| panic!("{what} should be an integer, found {y:?}"))
}

fn vec_at<'a>(y: &'a Yaml, what: &str) -> &'a [Yaml] {
    y.as_vec()
        .unwrap_or_else(|| panic!("{what} should be a list, found {y:?}"))
}

/// A string-to-string mapping (labels, selectors, compose environment in
/// map form).
fn string_map(y: &Yaml, what: &str) -> BTreeMap<String, String> {
    let hash = y
        .as_hash()
        .unwrap_or_else(|| panic!("{what} should be a mapping, found {y:?}"));
    hash.iter()
        .map(|(k, v)| {
            let key = str_at(k, what).to_owned();
            let value = match v {
                Yaml::String(s) => s.clone(),
                Yaml::Integer(i) => i.to_string(),
                Yaml::Boolean(b) => b.to_string(),
                Yaml::Real(r) => r.clone(),
                other => panic!("{what}.{key} should be a scalar, found {other:?}"),
            };
            (key, value)
        })
        .collect()
}

/// `selector ⊆ labels`, and the selector is not empty (an empty selector
/// selects everything).
fn assert_selects(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
    who: &str,
) {
    assert!(!selector.is_empty(), "{who}: selector is empty");
    for (k, v) in selector {
        assert_eq!(
            labels.get(k),
            Some(v),
            "{who}: selector {k}={v} does not match the Deployment's pod labels {labels:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// The Deployment's one container and the config it runs

fn deployment() -> Yaml {
    let d = kube("deployment.yaml");
    assert_eq!(str_at(&d["kind"], "deployment.yaml kind"), "Deployment");
    d
}

fn container(deployment: &Yaml) -> &Yaml {
    let containers = vec_at(
        &deployment["spec"]["template"]["spec"]["containers"],
        "Deployment containers",
    );
    assert_eq!(
        containers.len(),
        1,
        "the Deployment should run exactly one container"
    );
    &containers[0]
}

fn pod_labels(deployment: &Yaml) -> BTreeMap<String, String> {
    string_map(
        &deployment["spec"]["template"]["metadata"]["labels"],
        "Deployment pod template labels",
    )
}

/// The container's port named `grpc`.
fn grpc_container_port(container: &Yaml) -> u16 {
    let ports = vec_at(&container["ports"], "container ports");
    let grpc: Vec<&Yaml> = ports
        .iter()
        .filter(|p| p["name"].as_str() == Some("grpc"))
        .collect();
    assert_eq!(
        grpc.len(),
        1,
        "the container should expose exactly one port named grpc: {ports:?}"
    );
    port(&grpc[0]["containerPort"], "containerPort of port grpc")
}

fn port(y: &Yaml, what: &str) -> u16 {
    u16::try_from(int_at(y, what)).unwrap_or_else(|_| panic!("{what} is not a port number"))
}

fn configmap() -> Yaml {
    let c = kube("configmap.yaml");
    assert_eq!(str_at(&c["kind"], "configmap.yaml kind"), "ConfigMap");
    c
}

fn configmap_toml() -> String {
    str_at(
        &configmap()["data"]["inquest.toml"],
        "ConfigMap data.inquest.toml",
    )
    .to_owned()
}

/// The ConfigMap's config through the server's loader, minus `[lease]`:
/// for the checks that do not depend on the lease section (ports, grace),
/// so they hold whether or not the loader knows `[lease]` yet.
/// `configmap_config_loads_with_the_server_loader` loads the whole text.
fn configmap_config_without_lease() -> Config {
    let mut table: toml::Table =
        toml::from_str(&configmap_toml()).expect("the ConfigMap's inquest.toml is valid TOML");
    table.remove("lease");
    let text = toml::to_string(&table).expect("re-serializing the ConfigMap's TOML");
    let config = Config::from_toml(&text).expect("the ConfigMap's inquest.toml loads");
    config
        .validate()
        .expect("the ConfigMap's inquest.toml is valid");
    config
}

/// A duration in the config's syntax, read by the server's own parser.
fn config_duration(text: &str) -> Duration {
    let toml_text = format!("[shutdown]\ngrace = {}", toml::Value::from(text));
    Config::from_toml(&toml_text)
        .unwrap_or_else(|e| panic!("{text:?} is not a config duration: {e}"))
        .shutdown
        .grace
}

// ---------------------------------------------------------------------------
// Dockerfile, read line by line

/// One build stage: its `FROM` line's image and alias, and its instructions
/// (keyword upper-cased, continuation lines joined).
struct Stage {
    image: String,
    alias: Option<String>,
    instructions: Vec<(String, String)>,
}

fn dockerfile_stages() -> Vec<Stage> {
    let text = read(&deploy_dir().join("Dockerfile"));
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if trimmed.starts_with('#') {
            continue; // a comment inside a continued instruction
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    assert!(
        current.is_empty(),
        "Dockerfile ends inside a continued line"
    );

    let mut stages: Vec<Stage> = Vec::new();
    for line in logical {
        let (keyword, rest) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let keyword = keyword.to_ascii_uppercase();
        let rest = rest.trim().to_owned();
        if keyword == "FROM" {
            let words: Vec<&str> = rest
                .split_whitespace()
                .filter(|w| !w.starts_with("--"))
                .collect();
            let alias = match words.as_slice() {
                [_] => None,
                [_, as_, alias] if as_.eq_ignore_ascii_case("as") => Some((*alias).to_owned()),
                _ => panic!("Dockerfile: cannot read FROM {rest}"),
            };
            stages.push(Stage {
                image: words[0].to_owned(),
                alias,
                instructions: Vec::new(),
            });
        } else {
            let stage = stages
                .last_mut()
                .unwrap_or_else(|| panic!("Dockerfile: {keyword} before the first FROM"));
            stage.instructions.push((keyword, rest));
        }
    }
    stages
}

impl Stage {
    fn all(&self, keyword: &str) -> impl Iterator<Item = &str> {
        self.instructions
            .iter()
            .filter(move |(k, _)| k == keyword)
            .map(|(_, v)| v.as_str())
    }

    /// The last `keyword` instruction (the one that counts for ENTRYPOINT,
    /// CMD, USER), in exec (JSON) form.
    fn exec_form(&self, keyword: &str) -> Vec<String> {
        let value = self
            .all(keyword)
            .last()
            .unwrap_or_else(|| panic!("Dockerfile: the final stage has no {keyword}"));
        serde_json::from_str(value)
            .unwrap_or_else(|e| panic!("Dockerfile: {keyword} should be in exec (JSON) form: {e}"))
    }
}

/// The value after `flag` in an argument list (`--config PATH` or
/// `--config=PATH`).
fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let prefixed = format!("{flag}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix(&prefixed).map(str::to_owned)
        }
    })
}

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
/// container port, every probe, the Service's target and the Dockerfile's
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

    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        let p = &c[probe];
        if probe == "startupProbe" && p.is_badvalue() {
            continue;
        }
        assert!(!p.is_badvalue(), "the container has no {probe}");
        let grpc = &p["grpc"];
        assert!(
            !grpc.is_badvalue(),
            "{probe} should be a native grpc probe (grpc.health.v1.Health): {p:?}"
        );
        assert_eq!(
            port(&grpc["port"], &format!("{probe}.grpc.port")),
            port_number,
            "{probe} checks another port than the container's grpc port"
        );
        let service = &grpc["service"];
        if !service.is_badvalue() {
            let name = str_at(service, &format!("{probe}.grpc.service"));
            assert!(
                ["", "inquest.v1.Investigations"].contains(&name),
                "{probe} asks for health service {name:?}, which the server does not report"
            );
        }
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

// ---------------------------------------------------------------------------
// Dockerfile

#[test]
fn dockerfile_builds_inquest_and_runs_it_unprivileged() {
    let stages = dockerfile_stages();
    assert!(stages.len() >= 2, "the Dockerfile should be multi-stage");
    let build = &stages[0];
    assert!(
        build.image.starts_with("rust:") && build.image.ends_with("-bookworm"),
        "the build stage should be rust:*-bookworm, not {}",
        build.image
    );
    let cargo_build: Vec<&str> = build
        .all("RUN")
        .filter(|r| r.contains("cargo build"))
        .collect();
    assert_eq!(
        cargo_build.len(),
        1,
        "the build stage should run cargo build once"
    );
    let words: Vec<&str> = cargo_build[0].split_whitespace().collect();
    let package = words
        .windows(2)
        .find_map(|w| (w[0] == "-p" || w[0] == "--package").then_some(w[1]))
        .or_else(|| words.iter().find_map(|w| w.strip_prefix("--package=")));
    assert_eq!(
        package,
        Some("inquest"),
        "cargo build must build package inquest"
    );
    for flag in ["--release", "--locked"] {
        assert!(words.contains(&flag), "cargo build must use {flag}");
    }

    let runtime = stages.last().expect("a final stage");
    assert!(
        runtime.image.starts_with("debian:bookworm"),
        "the runtime stage should be debian:bookworm-slim, not {}",
        runtime.image
    );
    let build_alias = build
        .alias
        .as_deref()
        .expect("the build stage is named (AS ...)");
    assert!(
        runtime
            .all("COPY")
            .map(|c| c.split_whitespace().collect::<Vec<_>>())
            .any(
                |words| words.contains(&format!("--from={build_alias}").as_str())
                    && words.last().is_some_and(|dest| dest.ends_with("/inquest"))
            ),
        "the final stage copies the inquest binary from the build stage ({build_alias})"
    );
    assert!(
        runtime.all("RUN").any(|r| r.contains("ca-certificates")),
        "the final stage installs ca-certificates"
    );
    assert_eq!(runtime.exec_form("ENTRYPOINT"), ["inquest"]);
    let cmd = runtime.exec_form("CMD");
    assert_eq!(cmd.first().map(String::as_str), Some("serve"));
    assert_eq!(
        flag_value(&cmd, "--config").as_deref(),
        Some("/etc/inquest/inquest.toml")
    );
    let user = runtime
        .all("USER")
        .last()
        .expect("the final stage sets USER");
    let uid = user.split(':').next().unwrap_or(user);
    assert!(
        !["root", "0"].contains(&uid),
        "the final stage must not run as root"
    );
    // runAsNonRoot can only verify a numeric user.
    assert!(
        uid.parse::<u32>().is_ok(),
        "USER should be numeric (runAsNonRoot checks it): {user}"
    );

    // The listen address when no config says otherwise is the port the
    // image exposes.
    let default_port = Config::default().listen.port().to_string();
    assert!(
        runtime
            .all("EXPOSE")
            .flat_map(str::split_whitespace)
            .any(|p| p.trim_end_matches("/tcp") == default_port),
        "the Dockerfile should EXPOSE the server's default port {default_port}"
    );
}

#[test]
fn dockerignore_keeps_the_build_context_small() {
    let text = read(&repo_root().join(".dockerignore"));
    let patterns: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    for dir in ["target", ".git"] {
        assert!(
            patterns
                .iter()
                .any(|p| p.trim_start_matches('/').trim_end_matches('/') == dir),
            ".dockerignore should leave out {dir}/"
        );
    }
}
