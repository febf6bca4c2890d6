//! `bulkwire token …` and `bulkwire user …`: credentials in the metadata
//! store, so that every node sharing it accepts the same ones (see
//! `bulkwire_server::auth` for how they are kept).
//!
//! A token is printed once, alone on stdout, when it is created: a script
//! can capture it (`TOKEN=$(bulkwire token create)`). A password is read
//! from a prompt without echo, or from the first line of stdin when stdin
//! is not a terminal, never from the command line (where `ps` and shell
//! history would show it).

use crate::serve::base_config;
use bulkwire_server::auth::{new_token, set_user, token_digest};
use bulkwire_server::principal::{Role, Scopes};
use bulkwire_server::store::{token_id, MetaStore, NewToken, Quota, UserSet};
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Which metadata store: the same `--config`, `--data` and `--meta` as
/// `bulkwire serve`.
#[derive(clap::Args, Clone)]
pub struct Where {
    /// TOML file (its `data` and `meta` keys are used).
    #[arg(long, env = "BULKWIRE_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory of the embedded store [default: ./bulkwire-data].
    #[arg(long, env = "BULKWIRE_DATA")]
    data: Option<PathBuf>,
    /// Metadata store: postgres://USER[:PASSWORD]@HOST:PORT/DB or
    /// sqlite:PATH [default: SQLite in the data directory].
    #[arg(long, env = "BULKWIRE_META")]
    meta: Option<String>,
    /// Create a new, empty embedded store when there is none yet (without
    /// it, a directory that holds no store is an error: the server's data
    /// is probably elsewhere).
    #[arg(long)]
    init: bool,
}

#[cfg(test)]
mod tests {
    /// Rough edge 11 of the first hour: `token list` showed
    /// `20261128T00:40:15` (XML-RPC's date format).
    #[test]
    fn token_list_dates_are_rfc_3339() {
        assert_eq!(super::rfc3339(1_795_826_415), "2026-11-28T00:40:15Z");
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
    }
}

#[derive(clap::Subcommand)]
pub enum TokenCmd {
    /// Create a token and print it, alone, on stdout (the only time it is
    /// shown; the store keeps its SHA-256).
    Create {
        /// A note shown by `list` (who or what the token is for).
        #[arg(long, default_value = "")]
        label: String,
        /// Who owns what the token makes (a user's name, or any name the
        /// application uses); without the admin scope it reaches only that
        /// owner's items.
        #[arg(long, default_value = "admin")]
        owner: String,
        /// What it may do: upload, read, delete, admin, comma-separated.
        #[arg(long, default_value = "admin", value_parser = scopes)]
        scope: Scopes,
        /// How long it is valid (`30d`, `12h`) [default: until revoked].
        #[arg(long, value_parser = secs)]
        ttl: Option<u64>,
        #[command(flatten)]
        at: Where,
    },
    /// List tokens: id, owner, scopes, created, expires, last use, label
    /// (never the token).
    List {
        #[command(flatten)]
        at: Where,
    },
    /// Revoke a token, named by its id (from `list`) or by the token
    /// itself; nodes stop accepting it within `auth_cache_ms`.
    Revoke {
        /// The token's id (from `bulkwire token list`) or the token itself.
        id: String,
        #[command(flatten)]
        at: Where,
    },
}

#[derive(clap::Subcommand)]
pub enum LinkCmd {
    /// Replace the key that signs media links: every link handed out so far
    /// stops working (403) on every node within `auth_cache_ms`; new ones
    /// are signed with the new key.
    Rotate {
        #[command(flatten)]
        at: Where,
    },
}

#[derive(clap::Subcommand)]
pub enum UserCmd {
    /// Add a user (HTTP Basic, XML-RPC and SOAP logins); the password is
    /// read from a prompt or stdin.
    Add {
        /// The login name (no `:`).
        name: String,
        /// author (their own items), editor (everybody's items) or admin
        /// (everything, credentials too), as WordPress's roles.
        #[arg(long, default_value = "author", value_parser = role)]
        role: Role,
        #[command(flatten)]
        at: Where,
    },
    /// Change a user's role (author, editor, admin).
    Role {
        /// The user's login name.
        name: String,
        /// The new role.
        #[arg(value_parser = role)]
        role: Role,
        #[command(flatten)]
        at: Where,
    },
    /// Set a user's own quota (before their role's); `none` clears a part.
    Quota {
        /// The user's login name.
        name: String,
        /// Bytes their items may hold (`10GiB`), or `none`.
        #[arg(long, value_parser = opt_size)]
        bytes: Option<Limit>,
        /// Items they may have, or `none`.
        #[arg(long, value_parser = opt_count)]
        items: Option<Limit>,
        #[command(flatten)]
        at: Where,
    },
    /// Change a user's password (read from a prompt or stdin).
    Passwd {
        /// The user's login name.
        name: String,
        #[command(flatten)]
        at: Where,
    },
    /// Remove a user.
    Remove {
        /// The user's login name.
        name: String,
        #[command(flatten)]
        at: Where,
    },
    /// List users: name, role, creation time and own quota.
    List {
        #[command(flatten)]
        at: Where,
    },
}

pub fn token(cmd: TokenCmd) -> ExitCode {
    let (at, what) = match &cmd {
        TokenCmd::Create { at, .. } => (at, "token create"),
        TokenCmd::List { at } => (at, "token list"),
        TokenCmd::Revoke { at, .. } => (at, "token revoke"),
    };
    let at = at.clone();
    run(what, &at, |meta| async move {
        match cmd {
            TokenCmd::Create {
                label,
                owner,
                scope,
                ttl,
                ..
            } => {
                let t = new_token();
                let new = NewToken {
                    label,
                    owner,
                    scopes: scope.to_string(),
                    expires: ttl.map(|s| now().saturating_add(s as i64)),
                };
                meta.token_add(token_digest(&t), new)
                    .await
                    .map_err(|e| e.to_string())?;
                println!("{t}");
            }
            TokenCmd::List { .. } => {
                for t in meta.tokens().await.map_err(|e| e.to_string())? {
                    let when = |v: Option<i64>| v.map_or("never".to_string(), rfc3339);
                    println!(
                        "{}  owner={}  scopes={}  created={}  expires={}  last_used={}  {}",
                        t.id,
                        t.owner,
                        t.scopes,
                        rfc3339(t.created),
                        when(t.expires),
                        when(t.last_used),
                        t.label
                    );
                }
            }
            TokenCmd::Revoke { id, .. } => {
                // A whole token is 64 hex digits; its id is 16.
                let id = if id.len() == 64 {
                    token_id(&token_digest(&id))
                } else {
                    id
                };
                if !meta.token_revoke(&id).await.map_err(|e| e.to_string())? {
                    return Err(format!("no token with id {id}"));
                }
                eprintln!("revoked token {id}");
            }
        }
        Ok(())
    })
}

pub fn link(cmd: LinkCmd) -> ExitCode {
    let LinkCmd::Rotate { at } = cmd;
    run("link rotate", &at, |meta| async move {
        let key = bulkwire_server::links::Links::fresh_key();
        meta.secret_set(bulkwire_server::links::KEY_NAME, key)
            .await
            .map_err(|e| e.to_string())?;
        eprintln!("rotated the link key: earlier links are revoked");
        Ok(())
    })
}

pub fn user(cmd: UserCmd) -> ExitCode {
    let (at, what) = match &cmd {
        UserCmd::Add { at, .. } => (at, "user add"),
        UserCmd::Role { at, .. } => (at, "user role"),
        UserCmd::Quota { at, .. } => (at, "user quota"),
        UserCmd::Passwd { at, .. } => (at, "user passwd"),
        UserCmd::Remove { at, .. } => (at, "user remove"),
        UserCmd::List { at } => (at, "user list"),
    };
    let at = at.clone();
    run(what, &at, |meta| async move {
        match cmd {
            UserCmd::Add { name, role, .. } => {
                let pw = password(&name)?;
                if !set_user(&*meta, &name, pw.as_bytes(), UserSet::Create, role).await? {
                    return Err(format!(
                        "user {name:?} exists (`bulkwire user passwd` changes the password)"
                    ));
                }
                eprintln!("added user {name:?} ({role})");
            }
            UserCmd::Role { name, role, .. } => {
                if !meta
                    .user_role(&name, role.as_str())
                    .await
                    .map_err(|e| e.to_string())?
                {
                    return Err(format!("no user {name:?}"));
                }
                eprintln!("{name:?} is now {role} (nodes apply it within auth_cache_ms)");
            }
            UserCmd::Quota {
                name, bytes, items, ..
            } => {
                let have = meta
                    .user_get(&name)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("no user {name:?}"))?;
                let keep = |new: Option<Limit>, old: Option<u64>| new.map_or(old, |l| l.0);
                let q = Quota {
                    bytes: keep(bytes, have.info.quota.bytes),
                    items: keep(items, have.info.quota.items),
                };
                meta.user_quota(&name, q).await.map_err(|e| e.to_string())?;
                eprintln!("{name:?}: quota {}", show_quota(q));
            }
            UserCmd::Passwd { name, .. } => {
                let pw = password(&name)?;
                if !set_user(&*meta, &name, pw.as_bytes(), UserSet::Update, Role::Author).await? {
                    return Err(format!("no user {name:?}"));
                }
                eprintln!("changed the password of {name:?}");
            }
            UserCmd::Remove { name, .. } => {
                if !meta.user_remove(&name).await.map_err(|e| e.to_string())? {
                    return Err(format!("no user {name:?}"));
                }
                eprintln!("removed user {name:?}");
            }
            UserCmd::List { .. } => {
                for u in meta.users().await.map_err(|e| e.to_string())? {
                    println!(
                        "{}  {}  {}  quota {}",
                        u.name,
                        u.role,
                        rfc3339(u.created),
                        show_quota(u.quota)
                    );
                }
            }
        }
        Ok(())
    })
}

/// A quota part as set on the command line: a value, or `none` (`.0` is
/// `None`).
#[derive(Clone, Copy, Debug)]
pub struct Limit(Option<u64>);

fn opt_size(s: &str) -> Result<Limit, String> {
    match s {
        "none" => Ok(Limit(None)),
        _ => bulkwire_units::parse_size(s).map(|v| Limit(Some(v))),
    }
}

fn opt_count(s: &str) -> Result<Limit, String> {
    match s {
        "none" => Ok(Limit(None)),
        _ => s
            .parse::<u64>()
            .map(|v| Limit(Some(v)))
            .map_err(|_| format!("{s:?}: a whole number, or none")),
    }
}

fn scopes(s: &str) -> Result<Scopes, String> {
    Scopes::parse(s)
}

fn role(s: &str) -> Result<Role, String> {
    Role::parse(s)
}

fn secs(s: &str) -> Result<u64, String> {
    Ok(bulkwire_units::parse_duration(s)?.as_secs())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// `10 GiB, 5000 items` (`none` for a part not set).
fn show_quota(q: Quota) -> String {
    let bytes = q.bytes.map_or("none".into(), bulkwire_units::format_size);
    let items = q.items.map_or("none".into(), |i| format!("{i} items"));
    format!("{bytes}, {items}")
}

/// Seconds since the epoch as an RFC 3339 time in UTC
/// (`2026-11-28T00:40:15Z`), as people and scripts read times.
fn rfc3339(secs: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Opens the metadata store `at` names and runs `f` on it.
pub(crate) fn run<F, Fut>(what: &str, at: &Where, f: F) -> ExitCode
where
    F: FnOnce(Arc<dyn MetaStore>) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let go = async {
        let mut c = base_config(at.config.as_ref(), at.data.clone())?;
        if at.meta.is_some() {
            c.meta.clone_from(&at.meta);
        }
        refuse_a_missing_store(&c, at.init)?;
        eprintln!(
            "bulkwire {what}: metadata store: {}",
            bulkwire_server::stores::meta_summary(&c)
        );
        let meta = bulkwire_server::stores::open_meta(&c).await?;
        f(meta).await
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let r = match rt {
        Ok(rt) => rt.block_on(go),
        Err(e) => Err(format!("tokio runtime: {e}")),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bulkwire {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A credential made in a directory that holds no store would go to a new
/// empty one that no server reads, and the token printed would be refused
/// with 401: unless `--init` asks for a new store, that is an error saying
/// where the command looked and how to point it at the server's store.
fn refuse_a_missing_store(c: &bulkwire_server::Config, init: bool) -> Result<(), String> {
    use bulkwire_server::stores::MetaUrl;
    let Ok(MetaUrl::Sqlite(path)) = MetaUrl::parse(c) else {
        return Ok(());
    };
    if init || path.exists() {
        return Ok(());
    }
    let shown = std::path::absolute(&path).unwrap_or(path);
    Err(format!(
        "no metadata store at {}: run this where `bulkwire serve` runs, or point it at the \
         server's store with --data DIR (or --meta URL, --config FILE); --init creates a new, \
         empty store there",
        shown.display()
    ))
}

/// The new password: typed twice at a prompt without echo, or the first
/// line of stdin when it is not a terminal.
fn password(name: &str) -> Result<String, String> {
    let pw = if std::io::stdin().is_terminal() {
        let a = rpassword::prompt_password(format!("password for {name}: "))
            .map_err(|e| format!("reading the password: {e}"))?;
        let b = rpassword::prompt_password("again: ")
            .map_err(|e| format!("reading the password: {e}"))?;
        if a != b {
            return Err("the two passwords differ".into());
        }
        a
    } else {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| format!("reading the password from stdin: {e}"))?;
        line.trim_end_matches(['\n', '\r']).to_string()
    };
    if pw.is_empty() {
        return Err("the password is empty".into());
    }
    Ok(pw)
}
