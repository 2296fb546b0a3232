//! `deploy/kubernetes/cloudnative-pg`: Inquest on a CloudNativePG
//! `Cluster`. Its kustomization layers on the base manifests; these checks
//! keep the two consistent (the patched env entry, the Secret and Service
//! names the operator derives from the Cluster's name, the database and
//! owner, connections enough for every replica) and the replication
//! synchronous, which is what makes a failover lose no turn.

use super::*;

fn cnpg_dir() -> PathBuf {
    kube_dir().join("cloudnative-pg")
}

fn cluster() -> Yaml {
    let c = one_doc(&cnpg_dir().join("cluster.yaml"));
    assert_eq!(str_at(&c["kind"], "cluster.yaml kind"), "Cluster");
    assert_eq!(
        str_at(&c["apiVersion"], "cluster.yaml apiVersion"),
        "postgresql.cnpg.io/v1"
    );
    c
}

/// The patch's JSON-patch operations (the `patch` text is YAML itself).
fn deployment_patch() -> Vec<Yaml> {
    let k = one_doc(&cnpg_dir().join("kustomization.yaml"));
    let patches = vec_at(&k["patches"], "cloudnative-pg kustomization patches");
    assert_eq!(patches.len(), 1, "one patch, of the Deployment");
    let target = &patches[0]["target"];
    assert_eq!(str_at(&target["kind"], "patch target kind"), "Deployment");
    assert_eq!(
        str_at(&target["name"], "patch target name"),
        str_at(&deployment()["metadata"]["name"], "Deployment name"),
        "the patch must target the base Deployment"
    );
    let text = str_at(&patches[0]["patch"], "patch text");
    let mut docs = YamlLoader::load_from_str(text).expect("the patch is YAML");
    vec_at(&docs.remove(0), "patch operations").to_vec()
}

#[test]
fn the_kustomization_adds_the_cluster_to_the_base_in_its_namespace() {
    let k = one_doc(&cnpg_dir().join("kustomization.yaml"));
    let resources: Vec<&str> = vec_at(&k["resources"], "resources")
        .iter()
        .map(|r| str_at(r, "a resource"))
        .collect();
    assert_eq!(resources, ["..", "cluster.yaml"]);
    let base = kube("kustomization.yaml");
    let namespace = str_at(&base["namespace"], "base namespace");
    assert_eq!(str_at(&k["namespace"], "namespace"), namespace);
    assert_eq!(
        str_at(&cluster()["metadata"]["namespace"], "Cluster namespace"),
        namespace
    );
}

#[test]
fn the_cluster_replicates_synchronously_with_a_standby_to_fail_over_to() {
    let c = cluster();
    let spec = &c["spec"];
    assert!(
        int_at(&spec["instances"], "instances") >= 2,
        "a failover needs a standby"
    );
    let sync = &spec["postgresql"]["synchronous"];
    assert!(
        int_at(&sync["number"], "synchronous.number") >= 1,
        "at least one synchronous standby: an asynchronous failover loses turns \
         (docs/reliability.md)"
    );
    assert_eq!(
        str_at(&sync["dataDurability"], "synchronous.dataDurability"),
        "required",
        "\"preferred\" goes on unreplicated while no standby is up"
    );
}

/// DATABASE_URL names the Cluster's `-rw` Service, its database and owner,
/// with the password from the operator's `<cluster>-app` Secret, taken
/// into the env entry before it; and the base env entry the patch replaces
/// is the base's DATABASE_URL.
#[test]
fn database_url_is_the_clusters_rw_service_with_its_app_secret() {
    let c = cluster();
    let name = str_at(&c["metadata"]["name"], "Cluster name");
    let namespace = str_at(&c["metadata"]["namespace"], "Cluster namespace");
    let initdb = &c["spec"]["bootstrap"]["initdb"];
    let (database, owner) = (
        str_at(&initdb["database"], "initdb.database"),
        str_at(&initdb["owner"], "initdb.owner"),
    );
    let d = deployment();
    let base_env = vec_at(&container(&d)["env"], "base env");
    let ops = deployment_patch();
    let mut env = base_env.to_vec();
    for op in &ops {
        let path = str_at(&op["path"], "patch path");
        let index: usize = path
            .strip_prefix("/spec/template/spec/containers/0/env/")
            .and_then(|i| i.parse().ok())
            .unwrap_or_else(|| panic!("the patch edits only env entries, not {path}"));
        match str_at(&op["op"], "patch op") {
            "replace" => {
                assert_eq!(
                    str_at(&env[index]["name"], "replaced env name"),
                    "DATABASE_URL",
                    "the patch replaces the base's DATABASE_URL entry"
                );
                env[index] = op["value"].clone();
            }
            "add" => env.insert(index, op["value"].clone()),
            other => panic!("unexpected patch op {other}"),
        }
    }
    let url_at = env
        .iter()
        .position(|e| e["name"].as_str() == Some("DATABASE_URL"))
        .expect("DATABASE_URL in the patched env");
    assert_eq!(
        env.iter()
            .filter(|e| e["name"].as_str() == Some("DATABASE_URL"))
            .count(),
        1
    );
    let url = str_at(&env[url_at]["value"], "DATABASE_URL value");
    let rest = url
        .strip_prefix(&format!("postgres://{owner}:$("))
        .unwrap_or_else(|| panic!("{url} is not postgres://{owner}:$(VAR)@…"));
    let (var, rest) = rest.split_once(")@").expect("$(VAR)@host");
    assert_eq!(
        rest,
        format!("{name}-rw.{namespace}.svc:5432/{database}"),
        "DATABASE_URL must name the Cluster's -rw Service (the primary, moved on failover)"
    );
    let password_at = env
        .iter()
        .position(|e| e["name"].as_str() == Some(var))
        .unwrap_or_else(|| panic!("no env entry {var} for DATABASE_URL"));
    assert!(
        password_at < url_at,
        "$({var}) is only expanded from an entry before DATABASE_URL"
    );
    let secret = &env[password_at]["valueFrom"]["secretKeyRef"];
    assert_eq!(
        str_at(&secret["name"], "secret name"),
        format!("{name}-app")
    );
    assert_eq!(str_at(&secret["key"], "secret key"), "password");
}

/// Every replica at once, one more during a rolling update, each with its
/// API and burst pools and a LISTEN connection, fits the database's
/// `max_connections` with room for the operator's own.
#[test]
fn the_cluster_takes_every_replicas_connections() {
    let c = cluster();
    let max: usize = str_at(
        &c["spec"]["postgresql"]["parameters"]["max_connections"],
        "max_connections",
    )
    .parse()
    .expect("max_connections is a number");
    let d = deployment();
    let replicas = int_at(&d["spec"]["replicas"], "replicas")
        + int_at(
            &d["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
            "maxSurge",
        );
    let config = configmap_config_without_lease();
    let per_replica = config.store.max_connections + config.store.burst_connections + 1;
    let needed = usize::try_from(replicas).expect("replicas") * per_replica;
    assert!(
        needed + 10 <= max,
        "{replicas} replicas x {per_replica} connections = {needed}, plus 10 for the \
         operator and superuser, exceed max_connections {max}"
    );
}
