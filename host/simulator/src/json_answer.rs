//! JSON answers with the right content type, shared by the IMDS endpoints and the
//! console's endpoints.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `text` (already JSON) with `status`.
pub(crate) fn json_text(status: StatusCode, text: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        text,
    )
        .into_response()
}
