//! The web dashboard: the front end built from `dashboard/` (Preact, Vite),
//! embedded at compile time and served by the API server at `/dashboard/`.
//!
//! The assets are public (no authentication, like `/version`); the page is
//! only a client of the API: every request it makes carries the user's own
//! bearer token, so RBAC limits what it sees and does.
#![forbid(unsafe_code)]

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// Where the dashboard is served.
pub const PREFIX: &str = "/dashboard";

/// A static response: status, content type, cache policy and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    pub status: u16,
    pub content_type: &'static str,
    pub cache_control: &'static str,
    pub body: &'static [u8],
}

/// Whether a request path is the dashboard's.
pub fn is_dashboard_path(path: &str) -> bool {
    path == PREFIX || path.starts_with("/dashboard/")
}

/// The content type of a file, by its extension.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json" | "map") => "application/json",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn lookup(rel: &str) -> Option<&'static [u8]> {
    ASSETS.iter().find(|(p, _)| *p == rel).map(|(_, b)| *b)
}

/// The response for a dashboard path: a built file under `/dashboard/assets/`
/// (content-hashed names: cached for a year, immutable), `index.html` for
/// `/dashboard/` and any other sub-path (the page routes on the client), and
/// 404 for a missing hashed asset (a stale page asking for an old build). `None`
/// when the path is not the dashboard's. `/dashboard` itself redirects (301) to
/// `/dashboard/` so relative asset URLs resolve.
pub fn serve(path: &str) -> Option<Asset> {
    if !is_dashboard_path(path) {
        return None;
    }
    if path == PREFIX {
        return Some(Asset {
            status: 301,
            content_type: "text/plain; charset=utf-8",
            cache_control: "no-cache",
            body: b"/dashboard/",
        });
    }
    let rel = path.trim_start_matches("/dashboard/");
    if rel.starts_with("assets/") {
        return Some(match lookup(rel) {
            Some(body) => Asset {
                status: 200,
                content_type: content_type(rel),
                cache_control: "public, max-age=31536000, immutable",
                body,
            },
            None => Asset {
                status: 404,
                content_type: "text/plain; charset=utf-8",
                cache_control: "no-cache",
                body: b"404 page not found\n",
            },
        });
    }
    if let Some(body) = (!rel.is_empty() && rel != "index.html")
        .then(|| lookup(rel))
        .flatten()
    {
        return Some(Asset {
            status: 200,
            content_type: content_type(rel),
            cache_control: "no-cache",
            body,
        });
    }
    Some(Asset {
        status: 200,
        content_type: "text/html; charset=utf-8",
        // The page names the hashed assets of this build: always revalidate it.
        cache_control: "no-cache",
        body: lookup("index.html")
            .unwrap_or(b"dashboard assets missing: run npm ci && npm run build in dashboard/\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_assets_content_types_and_cache_policy() {
        let js = ASSETS
            .iter()
            .find(|(p, _)| p.starts_with("assets/") && p.ends_with(".js"))
            .map(|(p, _)| format!("/dashboard/{p}"))
            .expect("a built script in dashboard/dist/assets");
        // (path, status, content type prefix, cache control)
        let cases: &[(&str, u16, &str, &str)] = &[
            ("/dashboard", 301, "text/plain", "no-cache"),
            ("/dashboard/", 200, "text/html", "no-cache"),
            (
                "/dashboard/pods/default/web-1",
                200,
                "text/html",
                "no-cache",
            ),
            ("/dashboard/index.html", 200, "text/html", "no-cache"),
            (
                &js,
                200,
                "text/javascript",
                "public, max-age=31536000, immutable",
            ),
            (
                "/dashboard/assets/gone-123.js",
                404,
                "text/plain",
                "no-cache",
            ),
        ];
        for (path, status, ct, cc) in cases {
            let a = serve(path).expect("a dashboard path");
            assert_eq!(a.status, *status, "{path}");
            assert!(a.content_type.starts_with(ct), "{path}: {}", a.content_type);
            assert_eq!(a.cache_control, *cc, "{path}");
        }
        let index = serve("/dashboard/").expect("index");
        assert!(
            std::str::from_utf8(index.body)
                .expect("utf-8")
                .contains("<div id=\"app\"")
        );
        assert_eq!(serve("/api/v1/pods"), None);
        assert_eq!(serve("/dashboards"), None);
    }

    #[test]
    fn content_types_by_extension() {
        let cases = [
            ("a.html", "text/html; charset=utf-8"),
            ("a.js", "text/javascript; charset=utf-8"),
            ("a.css", "text/css; charset=utf-8"),
            ("a.svg", "image/svg+xml"),
            ("noext", "application/octet-stream"),
        ];
        for (p, ct) in cases {
            assert_eq!(content_type(p), ct, "{p}");
        }
    }
}
