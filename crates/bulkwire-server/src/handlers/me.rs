//! `GET /v1/me`: who the request's credentials name, `{"name": …}`, for a
//! page to show who is signed in. A JSON object, so that later fields
//! (scopes, usage, quota) join it without breaking a client.

use crate::response::{self, Response};
use http::StatusCode;

/// The answer for an identity as [`crate::Auth::identify`] gives it.
pub fn answer(identity: &str) -> Response {
    let body = serde_json::json!({ "name": display_name(identity) });
    response::json(StatusCode::OK, &body)
}

/// What a person is shown for an identity: a user's name; for a token
/// (`token:ID`), `token ` and the first 8 hex digits of its id, which
/// tell tokens apart (`bulkwire token list` shows the ids) and reveal
/// nothing of the token itself.
pub fn display_name(identity: &str) -> String {
    if let Some(name) = identity.strip_prefix("user:") {
        return name.to_string();
    }
    match identity.strip_prefix("token:") {
        Some(id) => format!("token {}", id.get(..8).unwrap_or(id)),
        None => identity.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_shown() {
        assert_eq!(display_name("user:alice"), "alice");
        assert_eq!(
            display_name("user:token:x"),
            "token:x",
            "a user's name as it is"
        );
        assert_eq!(display_name("token:0123456789abcdef"), "token 01234567");
    }
}
