//! Who a request is and what it may do (DESIGN.md "Who may do what").
//!
//! Every credential bulkwire accepts — a user with a role, a stored token,
//! a `--token`/`--user` flag, the application's own JWT — becomes one
//! [`Principal`] before a handler runs: a name (the owner of what it
//! makes), a set of [`Scopes`], and whether it reaches every owner's items
//! or only its own. Handlers take the principal and ask it, never the
//! credential:
//! - a missing scope is 403 naming the scope ([`Principal::require`]);
//! - another owner's item or upload is 404, exactly as a missing one, on
//!   every route and protocol ([`Principal::sees`]; store reads take the
//!   principal's [`Principal::owner`] filter, so a read that forgot it
//!   would not compile).
//!
//! Roles are WordPress's: an author uploads, reads and deletes their own
//! items, an editor everybody's, an administrator everything (credentials
//! too). Scopes are S3-policy-like verbs a token or JWT carries: `upload`
//! (create media and resumable uploads, and `HEAD`, `PATCH` and cancel its
//! own unfinished ones), `read` (list, download, `HEAD`, links), `delete`,
//! and `admin` (every owner's items and the server's own credentials).

use crate::error::{ApiError, Kind};
use std::fmt;

/// The owner of everything made before owners existed, and of what the
/// configured `--token`/`--user` credentials and the first-start token
/// make: they could reach everything before, and still can.
pub const ADMIN: &str = "admin";

/// A set of scopes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Hash)]
pub struct Scopes(u8);

impl Scopes {
    pub const NONE: Scopes = Scopes(0);
    pub const UPLOAD: Scopes = Scopes(1);
    pub const READ: Scopes = Scopes(2);
    pub const DELETE: Scopes = Scopes(4);
    pub const ADMIN: Scopes = Scopes(8);
    /// What an author or editor has: every verb, no administration.
    pub const MEDIA: Scopes = Scopes(1 | 2 | 4);

    const NAMES: [(Scopes, &'static str); 4] = [
        (Scopes::UPLOAD, "upload"),
        (Scopes::READ, "read"),
        (Scopes::DELETE, "delete"),
        (Scopes::ADMIN, "admin"),
    ];

    /// `admin` holds every other scope.
    pub fn has(self, s: Scopes) -> bool {
        self.0 & Scopes::ADMIN.0 != 0 || self.0 & s.0 == s.0
    }

    pub fn union(self, s: Scopes) -> Scopes {
        Scopes(self.0 | s.0)
    }

    /// Scope names separated by commas or spaces (`upload,read`, OAuth
    /// 2.0's `upload read`); an unknown name is an error naming the known
    /// ones, and none at all is too (a credential that can do nothing is a
    /// mistake).
    pub fn parse(list: &str) -> Result<Scopes, String> {
        let mut s = Scopes::NONE;
        for name in list.split([',', ' ']).filter(|n| !n.is_empty()) {
            s = s.union(Scopes::named(name).ok_or_else(|| {
                format!("unknown scope {name:?}: the scopes are upload, read, delete and admin")
            })?);
        }
        if s == Scopes::NONE {
            return Err("no scope given: the scopes are upload, read, delete and admin".into());
        }
        Ok(s)
    }

    /// One scope by name.
    pub fn named(name: &str) -> Option<Scopes> {
        Scopes::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(s, _)| *s)
    }

    /// The names, in a fixed order.
    pub fn names(self) -> Vec<&'static str> {
        Scopes::NAMES
            .iter()
            .filter(|(s, _)| self.0 & s.0 != 0)
            .map(|(_, n)| *n)
            .collect()
    }
}

/// `upload,read` (as `bulkwire token create --scope` takes it).
impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

/// A user's role, as WordPress's.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Role {
    /// Uploads, reads and deletes their own items.
    Author,
    /// Uploads, reads and deletes everybody's items; no credentials.
    Editor,
    /// Everything.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Author, Role::Editor, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Author => "author",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown role {s:?}: the roles are author, editor and admin"))
    }

    pub fn scopes(self) -> Scopes {
        match self {
            Role::Author | Role::Editor => Scopes::MEDIA,
            Role::Admin => Scopes::ADMIN.union(Scopes::MEDIA),
        }
    }

    /// True when the role reaches every owner's items.
    pub fn everyone(self) -> bool {
        self != Role::Author
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a principal proved itself (for `/v1/me` and the log).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Via {
    /// A stored token, by its id.
    Token { id: String },
    /// A stored user (HTTP Basic, XML-RPC, SOAP).
    User { role: Role },
    /// The application's JWT.
    Jwt,
    /// A `--token` or `--user` given at start (in memory only).
    Flag,
}

impl Via {
    pub fn kind(&self) -> &'static str {
        match self {
            Via::Token { .. } => "token",
            Via::User { .. } => "user",
            Via::Jwt => "jwt",
            Via::Flag => "flag",
        }
    }
}

/// What an upload by this principal may be, beyond the server's limits: a
/// JWT's `bulkwire.max_bytes` and `bulkwire.content_types` (S3's presigned
/// POST conditions), and its `bulkwire.quota_bytes`.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct UploadRules {
    pub max_bytes: Option<u64>,
    /// Patterns such as `image/*` or `application/pdf`.
    pub content_types: Option<Vec<String>>,
    pub quota_bytes: Option<u64>,
}

impl UploadRules {
    /// 413 when `size` is over `max_bytes` (named as the token's limit).
    pub fn check_size(&self, size: u64) -> Result<(), ApiError> {
        match self.max_bytes {
            Some(max) if size > max => {
                let mut e = ApiError::new(
                    Kind::Limit,
                    format!(
                        "over this token's limit bulkwire.max_bytes = {}",
                        bulkwire_units::format_size(max)
                    ),
                );
                e.limit = Some(("bulkwire.max_bytes", max));
                Err(e)
            }
            _ => Ok(()),
        }
    }

    /// 415 when `content_type` matches none of `content_types`.
    pub fn check_type(&self, content_type: &str) -> Result<(), ApiError> {
        let Some(patterns) = &self.content_types else {
            return Ok(());
        };
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if patterns.iter().any(|p| type_matches(p, &essence)) {
            return Ok(());
        }
        Err(ApiError::new(
            Kind::Unsupported,
            format!(
                "this token takes only {} (bulkwire.content_types), not {essence:?}",
                patterns.join(", ")
            ),
        ))
    }
}

/// `image/*` matches every `image/…`; `*/*` and `*` everything; else equal
/// (case-insensitive, without parameters).
fn type_matches(pattern: &str, essence: &str) -> bool {
    let p = pattern.trim().to_ascii_lowercase();
    if p == "*" || p == "*/*" {
        return true;
    }
    match p.strip_suffix("/*") {
        Some(top) => essence.split_once('/').is_some_and(|(t, _)| t == top),
        None => p == essence,
    }
}

/// Who a request is.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Principal {
    /// The owner of what it makes (a user's name, a token's owner, a JWT's
    /// `sub`).
    pub name: String,
    pub scopes: Scopes,
    /// Reaches every owner's items (the `admin` scope, or an editor).
    pub everyone: bool,
    pub via: Via,
    pub rules: UploadRules,
    /// What its items may hold together (resolved at authentication:
    /// `crate::auth`).
    pub quota: crate::store::Quota,
}

impl Principal {
    /// A stored user with their role.
    pub fn user(name: &str, role: Role) -> Principal {
        Principal {
            name: name.to_string(),
            scopes: role.scopes(),
            everyone: role.everyone(),
            via: Via::User { role },
            rules: UploadRules::default(),
            quota: Default::default(),
        }
    }

    /// A credential with scopes (a token or a JWT): it reaches everyone's
    /// items only with `admin`.
    pub fn scoped(name: &str, scopes: Scopes, via: Via, rules: UploadRules) -> Principal {
        Principal {
            name: name.to_string(),
            scopes,
            everyone: scopes.has(Scopes::ADMIN),
            via,
            rules,
            quota: Default::default(),
        }
    }

    /// A `--token` or `--user` flag, or the first-start token: `admin`.
    pub fn flag(name: &str) -> Principal {
        Principal::scoped(name, Scopes::ADMIN, Via::Flag, UploadRules::default())
    }

    /// 403 naming the scope this credential lacks.
    pub fn require(&self, s: Scopes) -> Result<(), ApiError> {
        if self.scopes.has(s) {
            return Ok(());
        }
        Err(ApiError::new(
            Kind::Forbidden,
            format!(
                "this credential lacks the {s} scope (it has: {}); ask for a token with \
                 --scope {s}",
                self.scopes
            ),
        ))
    }

    /// Whether an item or upload of `owner` exists for this principal:
    /// another owner's is answered as a missing one (404), never 403,
    /// which would tell that the id exists.
    pub fn sees(&self, owner: &str) -> bool {
        self.everyone || self.name == owner
    }

    /// The owner filter for store reads: `None` for every owner.
    pub fn owner(&self) -> Option<&str> {
        (!self.everyone).then_some(self.name.as_str())
    }

    /// Whether answers may hand this principal an item's link (a
    /// capability: whoever holds it reads the item): only with `read`, on
    /// every protocol, so that an upload-only credential (a camera, a form
    /// on another site) cannot read back what it sent, nor pass it on.
    pub fn gets_links(&self) -> bool {
        self.scopes.has(Scopes::READ)
    }

    /// True for a principal that manages the server's own credentials.
    pub fn is_admin(&self) -> bool {
        self.scopes.has(Scopes::ADMIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_commas_and_spaces_and_admin_holds_all() {
        let s = Scopes::parse("upload,read").unwrap();
        assert!(s.has(Scopes::UPLOAD) && s.has(Scopes::READ) && !s.has(Scopes::DELETE));
        assert_eq!(Scopes::parse("read upload").unwrap(), s);
        assert_eq!(s.to_string(), "upload,read");
        let a = Scopes::parse("admin").unwrap();
        assert!(a.has(Scopes::DELETE) && a.has(Scopes::UPLOAD.union(Scopes::READ)));
        assert!(Scopes::parse("write")
            .unwrap_err()
            .contains("unknown scope \"write\""));
        assert!(Scopes::parse(" , ").is_err());
    }

    #[test]
    fn roles_are_wordpress_s() {
        let author = Principal::user("a", Role::Author);
        assert!(author.sees("a") && !author.sees("b"));
        assert_eq!(author.owner(), Some("a"));
        assert!(author.require(Scopes::DELETE).is_ok());
        let e = author.require(Scopes::ADMIN).unwrap_err();
        assert_eq!(e.status(), 403);
        assert!(e.message.contains("lacks the admin scope"), "{e}");
        let editor = Principal::user("e", Role::Editor);
        assert!(editor.sees("a") && editor.owner().is_none() && !editor.is_admin());
        let admin = Principal::user("root", Role::Admin);
        assert!(admin.sees("a") && admin.is_admin());
        assert_eq!(Role::parse("editor"), Ok(Role::Editor));
        assert!(Role::parse("owner").is_err());
    }

    #[test]
    fn a_token_reaches_everyone_only_with_admin() {
        let up = Principal::scoped("cam", Scopes::UPLOAD, Via::Jwt, UploadRules::default());
        assert!(!up.sees("admin") && up.sees("cam"));
        assert!(!up.gets_links() && Principal::user("a", Role::Author).gets_links());
        assert_eq!(up.require(Scopes::READ).unwrap_err().status(), 403);
        let flag = Principal::flag(ADMIN);
        assert!(flag.sees("anyone") && flag.is_admin());
    }

    #[test]
    fn upload_rules_check_size_and_type_patterns() {
        let r = UploadRules {
            max_bytes: Some(10),
            content_types: Some(vec!["image/*".into(), "application/pdf".into()]),
            quota_bytes: None,
        };
        assert!(r.check_size(10).is_ok());
        let e = r.check_size(11).unwrap_err();
        assert_eq!(
            (e.status().as_u16(), e.limit),
            (413, Some(("bulkwire.max_bytes", 10)))
        );
        assert!(r.check_type("image/png").is_ok());
        assert!(r.check_type("IMAGE/JPEG; q=1").is_ok());
        assert!(r.check_type("application/pdf").is_ok());
        let e = r.check_type("text/html").unwrap_err();
        assert_eq!(e.status(), 415);
        assert!(e.message.contains("image/*, application/pdf"), "{e}");
        assert!(UploadRules::default().check_type("x/y").is_ok());
        assert!(type_matches("*/*", "a/b") && !type_matches("image/*", "imagex/png"));
    }
}
