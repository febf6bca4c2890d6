//! Listing media rows: what [`MediaStore::list`](crate::MediaStore::list) is
//! asked ([`ListQuery`]), the keys a row is found by, and the one statement
//! both SQL backends run for it.
//!
//! Pages are keyset pages on `seq` (insertion order, never reused): a page
//! is the rows past a position in the chosen order, never an OFFSET, so a
//! row inserted or deleted meanwhile shifts no later page (nothing is shown
//! twice or skipped because another row came or went).
//!
//! The name search and the type filter compare keys computed here, in Rust,
//! when a row is inserted (columns `name_fold`, `type_key`, `type_top`), so
//! that "case-insensitive" means the same on every backend: SQLite's
//! `lower()` and `LIKE` fold ASCII only, and PostgreSQL's fold follows the
//! database's locale (`C` folds ASCII only). A substring search cannot use
//! a B-tree index: it walks `seq` in order until the page is full (a search
//! that matches little reads the whole table); the type filter walks the
//! index `(type_top, seq)`.

/// Which way a listing walks the insertion order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Latest insertion first (`seq` descending).
    #[default]
    NewestFirst,
    /// Insertion order (`seq` ascending).
    OldestFirst,
}

/// Which media types a listing keeps: compared with the stored type's
/// essence (RFC 9110 §8.3.1: type/subtype, without parameters), lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeFilter {
    /// One type (`image/png`).
    Exact(String),
    /// Every subtype of a top-level type (`image/*` is `Top("image")`).
    Top(String),
}

impl TypeFilter {
    /// `type/subtype` or `type/*` (tokens, RFC 9110 §5.6.2), any case;
    /// `None` for anything else (parameters, `*/*`, `image/p*`, a bare
    /// `image`).
    pub fn parse(s: &str) -> Option<TypeFilter> {
        let (top, sub) = s.split_once('/')?;
        if !is_token(top) {
            return None;
        }
        let top = top.to_ascii_lowercase();
        if sub == "*" {
            return Some(TypeFilter::Top(top));
        }
        is_token(sub).then(|| TypeFilter::Exact(format!("{top}/{}", sub.to_ascii_lowercase())))
    }

    /// The top-level type the filter is within (`image`).
    fn top(&self) -> &str {
        match self {
            TypeFilter::Exact(t) => t.split('/').next().unwrap_or(t),
            TypeFilter::Top(t) => t,
        }
    }
}

/// A token (RFC 9110 §5.6.2) without `*`, which no registered type has
/// and which would read as a wildcard here.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'+-.^_`|~".contains(&b))
}

/// What [`MediaStore::list`](crate::MediaStore::list) returns: up to `limit`
/// rows past `after` in `order` that pass every filter given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub order: Order,
    /// Only rows strictly past this `seq` in `order` (the previous page's
    /// last row); `None` from the start (the newest or the oldest row).
    pub after: Option<i64>,
    pub limit: usize,
    /// Only rows whose file name contains this, compared as [`fold_name`]
    /// folds both; taken literally (`%`, `_`, `\` are characters, not
    /// wildcards). Rows without a file name never match.
    pub name: Option<String>,
    pub media_type: Option<TypeFilter>,
    /// Only this owner's rows; `None` for every owner's.
    pub owner: Option<String>,
}

impl ListQuery {
    /// The first `limit` rows in `order`, unfiltered.
    pub fn new(order: Order, limit: usize) -> ListQuery {
        ListQuery {
            order,
            after: None,
            limit,
            name: None,
            media_type: None,
            owner: None,
        }
    }

    /// The same query from past `seq`.
    pub fn after(self, seq: i64) -> ListQuery {
        ListQuery {
            after: Some(seq),
            ..self
        }
    }
}

/// The search key of a file name: each character's Unicode lower case
/// (`É` → `é`, `Σ` → `σ`), and the final sigma `ς` as `σ` (a word's last
/// `Σ` lowers to either, depending on the rule applied).
pub fn fold_name(s: &str) -> String {
    s.chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c == 'ς' { 'σ' } else { c })
        .collect()
}

/// The type keys of a stored content type: its essence in lower case and
/// the top-level type (`Image/PNG; q=1` → `image/png`, `image`).
pub fn type_keys(content_type: &str) -> (String, String) {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let top = essence.split('/').next().unwrap_or("").trim().to_string();
    (essence, top)
}

/// A value bound to a listing's statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Arg {
    Int(i64),
    Text(String),
}

/// The `LIKE` escape character: not `\`, which PostgreSQL would also read
/// as its default escape and string literals as an escape of their own.
const ESCAPE: char = '!';

/// `%text%` for `LIKE … ESCAPE '!'`, every wildcard in `text` escaped.
fn contains_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for c in fold_name(text).chars() {
        if matches!(c, '%' | '_' | ESCAPE) {
            p.push(ESCAPE);
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// What follows `SELECT … FROM media` for `q`, with numbered placeholders
/// (`?1` in SQLite, `$1` in PostgreSQL: `mark`), and their values in order.
pub(crate) fn where_order_limit(q: &ListQuery, mark: char) -> (String, Vec<Arg>) {
    let (cmp, dir, start) = match q.order {
        Order::NewestFirst => ('<', "DESC", i64::MAX),
        Order::OldestFirst => ('>', "ASC", i64::MIN),
    };
    let mut args = vec![Arg::Int(q.after.unwrap_or(start))];
    let mut sql = format!("WHERE seq {cmp} {mark}1");
    let mut push = |sql: &mut String, cond: &str, a: Arg| {
        args.push(a);
        sql.push_str(&format!(" AND {cond} {mark}{}", args.len()));
    };
    if let Some(o) = &q.owner {
        push(&mut sql, "owner =", Arg::Text(o.clone()));
    }
    if let Some(t) = &q.media_type {
        push(&mut sql, "type_top =", Arg::Text(t.top().to_string()));
        if let TypeFilter::Exact(e) = t {
            push(&mut sql, "type_key =", Arg::Text(e.clone()));
        }
    }
    if let Some(n) = &q.name {
        push(&mut sql, "name_fold LIKE", Arg::Text(contains_pattern(n)));
        sql.push_str(&format!(" ESCAPE '{ESCAPE}'"));
    }
    let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
    args.push(Arg::Int(limit));
    sql.push_str(&format!(" ORDER BY seq {dir} LIMIT {mark}{}", args.len()));
    (sql, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_filters_parse_types_and_top_level_wildcards_only() {
        use TypeFilter::*;
        assert_eq!(
            TypeFilter::parse("image/png"),
            Some(Exact("image/png".into()))
        );
        assert_eq!(
            TypeFilter::parse("Image/PNG"),
            Some(Exact("image/png".into()))
        );
        assert_eq!(TypeFilter::parse("image/*"), Some(Top("image".into())));
        assert_eq!(
            TypeFilter::parse("application/vnd.ms-excel"),
            Some(Exact("application/vnd.ms-excel".into()))
        );
        for bad in [
            "",
            "image",
            "image/",
            "/png",
            "*/*",
            "*/png",
            "image/png; q=1",
            "image/png/x",
            "im age/png",
            "image/p*",
            "é/png",
        ] {
            assert_eq!(TypeFilter::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn keys_fold_case_beyond_ascii_and_drop_parameters() {
        assert_eq!(fold_name("Éclair ΣΟΦΙΑΣ.JPG"), "éclair σοφιασ.jpg");
        assert_eq!(fold_name("σοφιας"), "σοφιασ");
        assert_eq!(
            type_keys(" Text/Plain ; charset=UTF-8"),
            ("text/plain".into(), "text".into())
        );
        assert_eq!(type_keys("image/png"), ("image/png".into(), "image".into()));
    }

    #[test]
    fn wildcards_are_escaped_and_the_statement_is_numbered_in_order() {
        assert_eq!(contains_pattern("100%_a\\B!"), "%100!%!_a\\b!!%");
        let q = ListQuery {
            name: Some("x".into()),
            media_type: Some(TypeFilter::Exact("image/png".into())),
            ..ListQuery::new(Order::NewestFirst, 10).after(7)
        };
        let (sql, args) = where_order_limit(&q, '$');
        assert_eq!(
            sql,
            "WHERE seq < $1 AND type_top = $2 AND type_key = $3 AND name_fold LIKE $4 \
             ESCAPE '!' ORDER BY seq DESC LIMIT $5"
        );
        assert_eq!(
            args,
            [
                Arg::Int(7),
                Arg::Text("image".into()),
                Arg::Text("image/png".into()),
                Arg::Text("%x%".into()),
                Arg::Int(10)
            ]
        );
        let (sql, args) = where_order_limit(&ListQuery::new(Order::OldestFirst, 3), '?');
        assert_eq!(sql, "WHERE seq > ?1 ORDER BY seq ASC LIMIT ?2");
        assert_eq!(args, [Arg::Int(i64::MIN), Arg::Int(3)]);
    }
}
