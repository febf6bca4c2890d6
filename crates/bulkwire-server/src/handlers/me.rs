//! `GET /v1/me`: who the request's credentials name and what they may do,
//! for a page to show who is signed in and an application to show a user
//! their usage:
//!
//! ```json
//! {"name": "alice", "scopes": ["upload", "read", "delete"], "role": "author",
//!  "via": "user", "everyone": false,
//!  "usage": {"bytes": 1234, "items": 3}, "quota": {"bytes": 10737418240, "items": null}}
//! ```
//!
//! `name` is the owner of what the principal makes; `role` is a user's
//! (null for tokens and JWTs); `everyone` says whether it reaches every
//! owner's items; a `quota` part is null when there is no limit. For a
//! stored token, `token` is the first 8 hex digits of its id (as `bulkwire
//! token list` shows it).

use crate::error::ApiError;
use crate::principal::{Principal, Via};
use crate::response::{self, Response};
use crate::state::AppState;
use http::StatusCode;
use std::sync::Arc;

/// The answer for `p`, with its owner's usage read now.
pub async fn answer(state: &Arc<AppState>, p: &Principal) -> Result<Response, ApiError> {
    let usage = state.meta.usage(&p.name).await?;
    Ok(response::json(StatusCode::OK, &body(p, usage)))
}

fn body(p: &Principal, usage: crate::store::Usage) -> serde_json::Value {
    let role = match &p.via {
        Via::User { role } => Some(role.as_str()),
        _ => None,
    };
    let token = match &p.via {
        Via::Token { id } => Some(id.get(..8).unwrap_or(id)),
        _ => None,
    };
    serde_json::json!({
        "name": p.name,
        "scopes": p.scopes.names(),
        "role": role,
        "via": p.via.kind(),
        "token": token,
        "everyone": p.everyone,
        "usage": {"bytes": usage.bytes, "items": usage.items},
        "quota": {"bytes": p.quota.bytes, "items": p.quota.items},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::{Role, Scopes, UploadRules};

    #[test]
    fn a_user_and_a_token_as_shown() {
        let mut a = Principal::user("alice", Role::Author);
        a.quota.bytes = Some(10);
        let u = crate::store::Usage { bytes: 4, items: 1 };
        let j = body(&a, u);
        assert_eq!(j["name"], "alice");
        assert_eq!(j["role"], "author");
        assert_eq!(j["scopes"], serde_json::json!(["upload", "read", "delete"]));
        assert_eq!(j["usage"]["bytes"], 4);
        assert_eq!(j["quota"], serde_json::json!({"bytes": 10, "items": null}));
        let via = Via::Token {
            id: "0123456789abcdef".into(),
        };
        let t = Principal::scoped("cam", Scopes::UPLOAD, via, UploadRules::default());
        let j = body(&t, u);
        assert_eq!(
            (j["name"].as_str(), j["token"].as_str()),
            (Some("cam"), Some("01234567"))
        );
        assert!(j["role"].is_null() && j["everyone"] == false);
    }
}
