//! `deploy/observability/`: the Grafana dashboard and the alert rules
//! parse, and every `inquest_*` metric they query is one the server
//! exports (named in a `metrics::counter!` / `gauge!` / `histogram!` call
//! in the sources), so a renamed metric cannot leave a dead panel or an
//! alert that never fires.

use std::collections::BTreeSet;

use yaml_rust2::YamlLoader;

use crate::{deploy_dir, read, repo_root};

/// `inquest_*` identifiers in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(found) = text[i..].find("inquest_") {
        let start = i + found;
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let mut end = start;
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase()
                || bytes[end] == b'_'
                || bytes[end].is_ascii_digit())
        {
            end += 1;
        }
        if boundary {
            out.insert(text[start..end].to_owned());
        }
        i = end.max(start + 1);
    }
    out
}

/// Metric names the server's sources register.
fn exported() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut stack = vec![repo_root().join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("reading a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if !path.ends_with("tests") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = read(&path);
                for kind in ["counter!(", "gauge!(", "histogram!("] {
                    for (at, _) in text.match_indices(kind) {
                        // rustfmt may put the name on the next line.
                        let rest = text[at + kind.len()..].trim_start();
                        if let Some(rest) = rest.strip_prefix('"')
                            && let Some(end) = rest.find('"')
                        {
                            names.insert(rest[..end].to_owned());
                        }
                    }
                }
            }
        }
    }
    names
}

/// A queried name as exported: histograms are queried by their series.
fn base(name: &str) -> &str {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

fn assert_exported(what: &str, queried: &BTreeSet<String>) {
    let exported = exported();
    assert!(
        exported.len() > 10,
        "found too few metrics in the sources: {exported:?}"
    );
    assert!(!queried.is_empty(), "{what} queries no inquest metric");
    for name in queried {
        assert!(
            exported.contains(name) || exported.contains(base(name)),
            "{what} queries {name}, which the server does not export (exported: {exported:?})"
        );
    }
}

#[test]
fn the_dashboard_queries_only_exported_metrics() {
    let text = read(&deploy_dir().join("observability/dashboard.json"));
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard.json parses");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "a dashboard of {} panels", panels.len());
    let mut queried = BTreeSet::new();
    for panel in panels {
        let targets = panel["targets"]
            .as_array()
            .expect("every panel has targets");
        for target in targets {
            queried.extend(metric_names(target["expr"].as_str().expect("an expr")));
        }
    }
    assert_exported("dashboard.json", &queried);
}

#[test]
fn the_alert_rules_query_only_exported_metrics() {
    let text = read(&deploy_dir().join("observability/alerts.yaml"));
    let docs = YamlLoader::load_from_str(&text).expect("alerts.yaml parses");
    let groups = docs[0]["groups"].as_vec().expect("groups");
    let mut queried = BTreeSet::new();
    let mut alerts = 0;
    for group in groups {
        for rule in group["rules"].as_vec().expect("rules") {
            assert!(
                rule["alert"].as_str().is_some(),
                "a rule without a name: {rule:?}"
            );
            queried.extend(metric_names(rule["expr"].as_str().expect("an expr")));
            alerts += 1;
        }
    }
    assert!(
        alerts >= 3,
        "stuck sessions, lease takeovers and store errors at least"
    );
    assert_exported("alerts.yaml", &queried);
}
