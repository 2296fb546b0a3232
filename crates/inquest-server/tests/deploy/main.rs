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

mod cloudnative_pg;
mod compose;
mod docker;
mod kubernetes;
mod observability;

// ---------------------------------------------------------------------------
// Files

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn deploy_dir() -> PathBuf {
    repo_root().join("deploy")
}

pub(crate) fn kube_dir() -> PathBuf {
    deploy_dir().join("kubernetes")
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every YAML document in the file, empty ones (a trailing `---`) left out.
pub(crate) fn yaml_docs(path: &Path) -> Vec<Yaml> {
    let docs = YamlLoader::load_from_str(&read(path))
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The file's only document.
pub(crate) fn one_doc(path: &Path) -> Yaml {
    let mut docs = yaml_docs(path);
    assert_eq!(
        docs.len(),
        1,
        "{} should hold exactly one YAML document",
        path.display()
    );
    docs.remove(0)
}

pub(crate) fn kube(file: &str) -> Yaml {
    let doc = one_doc(&kube_dir().join(file));
    assert!(
        doc["kind"].as_str().is_some(),
        "deploy/kubernetes/{file} has no kind"
    );
    doc
}

pub(crate) fn kube_yaml_files() -> BTreeSet<String> {
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

pub(crate) fn str_at<'a>(y: &'a Yaml, what: &str) -> &'a str {
    y.as_str()
        .unwrap_or_else(|| panic!("{what} should be a string, found {y:?}"))
}

pub(crate) fn int_at(y: &Yaml, what: &str) -> i64 {
    y.as_i64()
        .unwrap_or_else(|| panic!("{what} should be an integer, found {y:?}"))
}

pub(crate) fn vec_at<'a>(y: &'a Yaml, what: &str) -> &'a [Yaml] {
    y.as_vec()
        .unwrap_or_else(|| panic!("{what} should be a list, found {y:?}"))
}

/// A string-to-string mapping (labels, selectors, compose environment in
/// map form).
pub(crate) fn string_map(y: &Yaml, what: &str) -> BTreeMap<String, String> {
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
pub(crate) fn assert_selects(
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

pub(crate) fn deployment() -> Yaml {
    let d = kube("deployment.yaml");
    assert_eq!(str_at(&d["kind"], "deployment.yaml kind"), "Deployment");
    d
}

pub(crate) fn container(deployment: &Yaml) -> &Yaml {
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

pub(crate) fn pod_labels(deployment: &Yaml) -> BTreeMap<String, String> {
    string_map(
        &deployment["spec"]["template"]["metadata"]["labels"],
        "Deployment pod template labels",
    )
}

/// The container's port named `grpc`.
pub(crate) fn grpc_container_port(container: &Yaml) -> u16 {
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

pub(crate) fn port(y: &Yaml, what: &str) -> u16 {
    u16::try_from(int_at(y, what)).unwrap_or_else(|_| panic!("{what} is not a port number"))
}

pub(crate) fn configmap() -> Yaml {
    let c = kube("configmap.yaml");
    assert_eq!(str_at(&c["kind"], "configmap.yaml kind"), "ConfigMap");
    c
}

pub(crate) fn configmap_toml() -> String {
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
pub(crate) fn configmap_config_without_lease() -> Config {
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
pub(crate) fn config_duration(text: &str) -> Duration {
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
pub(crate) struct Stage {
    pub(crate) image: String,
    pub(crate) alias: Option<String>,
    pub(crate) instructions: Vec<(String, String)>,
}

pub(crate) fn dockerfile_stages() -> Vec<Stage> {
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
pub(crate) fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let prefixed = format!("{flag}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix(&prefixed).map(str::to_owned)
        }
    })
}
