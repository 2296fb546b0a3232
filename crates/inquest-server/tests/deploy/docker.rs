//! `deploy/Dockerfile`.

use super::*;

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
