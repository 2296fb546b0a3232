//! The web console: static assets served on the gRPC port, next
//! to the `inquest.v1.Investigations` service the page calls over gRPC-Web.
//!
//! Why the gRPC port and not the admin listener: the page then calls the
//! very same service, behind the same layers (`Measured`, `Authenticated`,
//! the request-size check) and the same TLS, from the same origin (no
//! CORS), with the caller's own API token as `authorization: Bearer`. The
//! admin listener is for probes and scrapes, often bound to loopback or a
//! cluster-internal port, and has no auth.
//!
//! The assets are built from `web/console/` (TypeScript, esbuild; `npm ci
//! && npm run build` writes `web/console/dist/`) and the built files are
//! committed, so `cargo build` needs no node; they are embedded here with
//! `include_bytes!`. They need no token: everything they show comes from
//! calls the service authenticates.

use axum::{
    body::Body,
    http::{HeaderValue, Method, Request, Response, StatusCode, header},
};

/// Where the console is served (also `/`).
pub const PATH: &str = "/console/";

const INDEX_HTML: &[u8] = include_bytes!("../../../web/console/dist/index.html");
const CONSOLE_JS: &[u8] = include_bytes!("../../../web/console/dist/console.js");
const CONSOLE_CSS: &[u8] = include_bytes!("../../../web/console/dist/console.css");

/// One embedded file by request path.
fn asset(path: &str) -> Option<(&'static [u8], &'static str)> {
    match path {
        "/" | "/console" | "/console/" | "/console/index.html" => {
            Some((INDEX_HTML, "text/html; charset=utf-8"))
        }
        "/console/console.js" => Some((CONSOLE_JS, "text/javascript; charset=utf-8")),
        "/console/console.css" => Some((CONSOLE_CSS, "text/css; charset=utf-8")),
        _ => None,
    }
}

/// The router's fallback: every path no gRPC service claimed. A gRPC call
/// to an unknown service answers UNIMPLEMENTED as tonic's own fallback
/// does; a GET (or HEAD) of a console path gets its file; anything else is
/// 404.
pub async fn fallback(request: Request<Body>) -> Response<Body> {
    let grpc = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if grpc {
        let (parts, ()) = tonic::Status::unimplemented("")
            .into_http::<()>()
            .into_parts();
        return Response::from_parts(parts, Body::empty());
    }
    let method = request.method();
    if method != Method::GET && method != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    let Some((bytes, content_type)) = asset(request.uri().path()) else {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the console is at /console/\n",
        );
    };
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        Body::from(bytes)
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The assets change with the binary; a stale cached bundle against a
    // newer server is worse than a re-fetch of a few KiB.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_console_path_has_its_file_and_others_none() {
        assert_eq!(asset("/").map(|a| a.1), Some("text/html; charset=utf-8"));
        assert_eq!(asset("/console/").map(|a| a.0), Some(INDEX_HTML));
        assert_eq!(asset("/console/console.js").map(|a| a.0), Some(CONSOLE_JS));
        assert_eq!(asset("/console/../etc/passwd"), None);
        assert_eq!(asset("/inquest.v1.Investigations/GetSession"), None);
        // The page loads the bundle from where it is served.
        let index = std::str::from_utf8(INDEX_HTML).unwrap();
        assert!(index.contains("/console/console.js"), "{index}");
        assert!(index.contains("/console/console.css"), "{index}");
    }

    /// `web/console/build.mjs` records the hash of what it built from in
    /// `dist/SOURCES.sha256`; a source edited without `npm run build`
    /// (or a stale `dist/`) fails here, in the suite CI runs, without node.
    #[test]
    fn the_built_console_matches_its_sources() {
        use sha2::{Digest, Sha256};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web/console");
        let mut files: Vec<String> = [
            "build.mjs",
            "package.json",
            "package-lock.json",
            "tsconfig.json",
        ]
        .map(str::to_owned)
        .into();
        for entry in std::fs::read_dir(root.join("src")).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            files.push(format!("src/{name}"));
        }
        // JavaScript's default sort: by UTF-16 code units, the same as
        // bytes for these ASCII names.
        files.sort();
        let mut hash = Sha256::new();
        for f in &files {
            let bytes = std::fs::read(root.join(f)).unwrap();
            hash.update(format!("{f}\0{}\0", bytes.len()).as_bytes());
            hash.update(&bytes);
        }
        let actual: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let recorded = std::fs::read_to_string(root.join("dist/SOURCES.sha256")).unwrap();
        assert_eq!(
            recorded.trim(),
            actual,
            "web/console/dist/ is stale: run `npm ci && npm run build` in web/console and commit dist/"
        );
    }
}
