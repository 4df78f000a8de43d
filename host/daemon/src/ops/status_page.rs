//! The status page at `/` of the admin endpoint: one embedded HTML file (inline CSS and
//! JavaScript, no external assets) that polls `/status`, `/status/history` and
//! `/status/events` (each outcome record drawn as inline SVG), and `/status/fleet` when the
//! daemon has `[coordination]`.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The page, served as is.
const STATUS_PAGE_HTML: &str = include_str!("status_page.html");

/// How often the page asks for the status and the history, in milliseconds (it says so).
pub(crate) const STATUS_PAGE_REFRESH_MS: u64 = 1000;

/// `GET /`: the status page.
pub(crate) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            // Nothing but this page's own inline code, and no framing by other pages.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ),
        ],
        STATUS_PAGE_HTML.replace("__REFRESH_MS__", &STATUS_PAGE_REFRESH_MS.to_string()),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_every_documented_id_and_nothing_from_outside() {
        for id in [
            "daemon-phase",
            "vm-name",
            "readiness",
            "events",
            "past-events",
            "plugins",
            "imds",
            "coordination",
            "storage",
            "fleet",
            "fleet-vms",
        ] {
            assert!(
                STATUS_PAGE_HTML.contains(&format!("id=\"{id}\"")),
                "no #{id}"
            );
        }
        assert!(STATUS_PAGE_HTML.contains("name=\"viewport\""));
        for external in ["src=\"http", "href=\"http", "@import", "url(http"] {
            assert!(
                !STATUS_PAGE_HTML.contains(external),
                "loads from outside: {external}"
            );
        }
        assert!(STATUS_PAGE_HTML.contains("__REFRESH_MS__"));
    }
}
