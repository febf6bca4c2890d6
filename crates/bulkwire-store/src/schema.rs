//! The metadata schema: one list of steps for every SQL backend, so that
//! a schema version means the same on SQLite and on PostgreSQL.
//!
//! Step `n` (counting from 1) takes a store from schema version `n - 1` to
//! `n`. Each backend's `schema.rs` runs the steps a store has not had yet,
//! in order, in one transaction with the version it records: SQLite's
//! statements there, PostgreSQL's here, side by side, so that a step cannot
//! reach one backend and not the other (a [`Step`] without both halves
//! does not compile, and `every_step_is_the_same_step_on_both_backends`
//! checks that the halves create and alter the same tables, columns and
//! indexes). A step whose new columns need values computed in Rust for the
//! rows of before names a [`Backfill`]: each backend matches on it
//! exhaustively, so a new one does not compile until both backends run it.
//!
//! To change the schema, append a step (with a backfill if the rows of
//! before need one). Never edit a step that was released: databases at
//! that version ran it already, and will not run it again.

/// One schema step: what it runs on each backend.
pub(crate) struct Step {
    /// SQLite's statements (one batch).
    pub sqlite: &'static str,
    /// PostgreSQL's statements (one batch).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub postgres: &'static str,
    /// Values to compute in Rust for the rows of before, in the same
    /// transaction, once the step's statements have run.
    pub backfill: Option<Backfill>,
}

/// What a step fills in, in Rust, for the rows that were there before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backfill {
    /// The listing's keys of media rows that have none (`name_fold`,
    /// `type_key`, `type_top`: see [`list`](crate::list)).
    ListKeys,
}

/// The schema, by version.
pub(crate) const STEPS: &[Step] = &[
    // 1: the media table of the first release. SQLite's was
    // created without a version, hence `IF NOT EXISTS` there.
    Step {
        sqlite: "CREATE TABLE IF NOT EXISTS media (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        id           TEXT NOT NULL UNIQUE,
        field        TEXT,
        filename     TEXT,
        content_type TEXT NOT NULL,
        size         INTEGER NOT NULL,
        sha256       TEXT NOT NULL,
        created      INTEGER NOT NULL
    );",
        postgres: "CREATE TABLE media (
        seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id           TEXT NOT NULL UNIQUE,
        field        TEXT,
        filename     TEXT,
        content_type TEXT NOT NULL,
        size         BIGINT NOT NULL CHECK (size >= 0),
        sha256       TEXT NOT NULL,
        created      TIMESTAMPTZ NOT NULL DEFAULT now()
    );",
        backfill: None,
    },
    // 2: credentials, and the leases with their nodes' heartbeats.
    Step {
        sqlite: "CREATE TABLE tokens (
        id      TEXT PRIMARY KEY,
        digest  BLOB NOT NULL UNIQUE,
        label   TEXT NOT NULL,
        created INTEGER NOT NULL
    );
    CREATE TABLE users (
        name    TEXT PRIMARY KEY,
        hash    TEXT NOT NULL,
        created INTEGER NOT NULL
    );
    CREATE TABLE pending (
        id      TEXT PRIMARY KEY,
        node    TEXT NOT NULL,
        handle  TEXT,
        started INTEGER NOT NULL
    );
    CREATE INDEX pending_node ON pending (node);
    CREATE TABLE nodes (
        node      TEXT PRIMARY KEY,
        heartbeat INTEGER NOT NULL
    );",
        postgres: "CREATE TABLE tokens (
        id      TEXT PRIMARY KEY,
        digest  BYTEA NOT NULL UNIQUE,
        label   TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE TABLE users (
        name    TEXT PRIMARY KEY,
        hash    TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE TABLE pending (
        id      TEXT PRIMARY KEY,
        node    TEXT NOT NULL,
        handle  TEXT,
        started TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE INDEX pending_node ON pending (node);
    CREATE TABLE nodes (
        node      TEXT PRIMARY KEY,
        heartbeat TIMESTAMPTZ NOT NULL
    );",
        backfill: None,
    },
    // 3: resumable uploads.
    Step {
        sqlite: "CREATE TABLE uploads (
        id      TEXT PRIMARY KEY,
        owner   TEXT NOT NULL,
        expires INTEGER NOT NULL,
        gen     INTEGER NOT NULL,
        open    INTEGER NOT NULL,
        state   TEXT NOT NULL
    );
    CREATE INDEX uploads_open_owner ON uploads (owner) WHERE open = 1;
    CREATE INDEX uploads_expires ON uploads (expires);",
        postgres: "CREATE TABLE uploads (
        id      TEXT PRIMARY KEY,
        owner   TEXT NOT NULL,
        expires BIGINT NOT NULL,
        gen     BIGINT NOT NULL,
        open    BOOLEAN NOT NULL,
        state   TEXT NOT NULL
    );
    CREATE INDEX uploads_open_owner ON uploads (owner) WHERE open;
    CREATE INDEX uploads_expires ON uploads (expires);",
        backfill: None,
    },
    // 4: secrets (the key that signs media links).
    Step {
        sqlite: "CREATE TABLE secrets (
        name    TEXT PRIMARY KEY,
        value   BLOB NOT NULL,
        created INTEGER NOT NULL
    );",
        postgres: "CREATE TABLE secrets (
        name    TEXT PRIMARY KEY,
        value   BYTEA NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );",
        backfill: None,
    },
    // 5: the listing's keys (`list.rs`), filled in Rust for the rows of
    // before. PostgreSQL's `IF NOT EXISTS` lets the step run again on a
    // database that has the columns (its migration test does).
    Step {
        sqlite: "ALTER TABLE media ADD COLUMN name_fold TEXT;
    ALTER TABLE media ADD COLUMN type_key TEXT NOT NULL DEFAULT '';
    ALTER TABLE media ADD COLUMN type_top TEXT NOT NULL DEFAULT '';
    CREATE INDEX IF NOT EXISTS media_type_top ON media (type_top, seq);",
        postgres: "ALTER TABLE media
        ADD COLUMN IF NOT EXISTS name_fold TEXT,
        ADD COLUMN IF NOT EXISTS type_key TEXT NOT NULL DEFAULT '',
        ADD COLUMN IF NOT EXISTS type_top TEXT NOT NULL DEFAULT '';
    CREATE INDEX IF NOT EXISTS media_type_top ON media (type_top, seq);",
        backfill: Some(Backfill::ListKeys),
    },
    // 6: owners. Every row of before was made by a credential that could
    // reach everything: its owner is `admin`, as are users and tokens of
    // before (a role or scopes narrow them later). Usage per owner, for
    // quotas checked in the transaction that commits a row. PostgreSQL's
    // `IF NOT EXISTS` and `ON CONFLICT` let the step run again.
    Step {
        sqlite: "ALTER TABLE media ADD COLUMN owner TEXT NOT NULL DEFAULT 'admin';
    CREATE INDEX IF NOT EXISTS media_owner ON media (owner, seq);
    UPDATE uploads SET owner = 'admin';
    ALTER TABLE users ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
    ALTER TABLE users ADD COLUMN quota_bytes INTEGER;
    ALTER TABLE users ADD COLUMN quota_items INTEGER;
    ALTER TABLE tokens ADD COLUMN owner TEXT NOT NULL DEFAULT 'admin';
    ALTER TABLE tokens ADD COLUMN scopes TEXT NOT NULL DEFAULT 'admin';
    ALTER TABLE tokens ADD COLUMN expires INTEGER;
    ALTER TABLE tokens ADD COLUMN last_used INTEGER;
    CREATE TABLE IF NOT EXISTS usage (
        owner TEXT PRIMARY KEY,
        bytes INTEGER NOT NULL,
        items INTEGER NOT NULL
    );
    INSERT OR IGNORE INTO usage (owner, bytes, items)
        SELECT owner, COALESCE(SUM(size), 0), COUNT(*) FROM media GROUP BY owner;",
        postgres: "ALTER TABLE media ADD COLUMN IF NOT EXISTS owner TEXT NOT NULL DEFAULT 'admin';
    CREATE INDEX IF NOT EXISTS media_owner ON media (owner, seq);
    UPDATE uploads SET owner = 'admin';
    ALTER TABLE users
        ADD COLUMN IF NOT EXISTS role TEXT NOT NULL DEFAULT 'admin',
        ADD COLUMN IF NOT EXISTS quota_bytes BIGINT,
        ADD COLUMN IF NOT EXISTS quota_items BIGINT;
    ALTER TABLE tokens
        ADD COLUMN IF NOT EXISTS owner TEXT NOT NULL DEFAULT 'admin',
        ADD COLUMN IF NOT EXISTS scopes TEXT NOT NULL DEFAULT 'admin',
        ADD COLUMN IF NOT EXISTS expires TIMESTAMPTZ,
        ADD COLUMN IF NOT EXISTS last_used TIMESTAMPTZ;
    CREATE TABLE IF NOT EXISTS usage (
        owner TEXT PRIMARY KEY,
        bytes BIGINT NOT NULL CHECK (bytes >= 0),
        items BIGINT NOT NULL CHECK (items >= 0)
    );
    INSERT INTO usage (owner, bytes, items)
        SELECT owner, COALESCE(SUM(size), 0), COUNT(*) FROM media GROUP BY owner
        ON CONFLICT (owner) DO NOTHING;",
        backfill: None,
    },
    // 7: the event outbox (`meta/events.rs`): events in commit order,
    // each endpoint's mark of how far it planned deliveries, and the
    // deliveries, leased by whichever node sends them.
    Step {
        sqlite: "CREATE TABLE IF NOT EXISTS events (
        seq     INTEGER PRIMARY KEY AUTOINCREMENT,
        id      TEXT NOT NULL UNIQUE,
        kind    TEXT NOT NULL,
        owner   TEXT NOT NULL,
        item    TEXT NOT NULL,
        body    TEXT NOT NULL,
        created INTEGER NOT NULL
    );
    CREATE INDEX IF NOT EXISTS events_owner ON events (owner, seq);
    CREATE TABLE IF NOT EXISTS event_scans (
        endpoint TEXT PRIMARY KEY,
        seq      INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS deliveries (
        endpoint    TEXT NOT NULL,
        seq         INTEGER NOT NULL,
        item        TEXT NOT NULL,
        state       TEXT NOT NULL,
        attempts    INTEGER NOT NULL,
        next_at     INTEGER NOT NULL,
        lease_node  TEXT,
        lease_until INTEGER,
        error       TEXT,
        PRIMARY KEY (endpoint, seq)
    );
    CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (endpoint, state, next_at);
    CREATE INDEX IF NOT EXISTS deliveries_item ON deliveries (endpoint, item, seq);",
        postgres: "CREATE TABLE IF NOT EXISTS events (
        seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id      TEXT NOT NULL UNIQUE,
        kind    TEXT NOT NULL,
        owner   TEXT NOT NULL,
        item    TEXT NOT NULL,
        body    TEXT NOT NULL,
        created TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    CREATE INDEX IF NOT EXISTS events_owner ON events (owner, seq);
    CREATE TABLE IF NOT EXISTS event_scans (
        endpoint TEXT PRIMARY KEY,
        seq      BIGINT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS deliveries (
        endpoint    TEXT NOT NULL,
        seq         BIGINT NOT NULL,
        item        TEXT NOT NULL,
        state       TEXT NOT NULL,
        attempts    INTEGER NOT NULL,
        next_at     TIMESTAMPTZ NOT NULL,
        lease_node  TEXT,
        lease_until TIMESTAMPTZ,
        error       TEXT,
        PRIMARY KEY (endpoint, seq)
    );
    CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (endpoint, state, next_at);
    CREATE INDEX IF NOT EXISTS deliveries_item ON deliveries (endpoint, item, seq);",
        backfill: None,
    },
    // 8: an image's width and height in pixels as it is shown (EXIF
    // orientation applied), read from its header at upload; NULL for
    // anything else and for the rows of before (nothing is decoded to
    // fill them: a variant reads the header again when it is made).
    Step {
        sqlite: "ALTER TABLE media ADD COLUMN width INTEGER;
    ALTER TABLE media ADD COLUMN height INTEGER;",
        postgres: "ALTER TABLE media
        ADD COLUMN IF NOT EXISTS width INTEGER CHECK (width > 0),
        ADD COLUMN IF NOT EXISTS height INTEGER CHECK (height > 0);",
        backfill: None,
    },
];

/// The schema version this build writes, on every backend.
pub(crate) const SCHEMA_VERSION: usize = STEPS.len();

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The tables, columns and indexes a batch creates or adds, as
    /// `table t`, `column t.c`, `index i`: what must be the same on both
    /// backends, whatever the types and syntax.
    fn objects(sql: &str) -> BTreeSet<String> {
        let spaced = sql
            .replace('(', " ( ")
            .replace(')', " ) ")
            .replace([',', ';'], " , ");
        let words: Vec<&str> = spaced.split_whitespace().collect();
        let mut out = BTreeSet::new();
        let (mut table, mut i) = (String::new(), 0);
        // The word after `at`, past any `IF NOT EXISTS`.
        let name = |at: usize| match words[at..] {
            ["IF", "NOT", "EXISTS", n, ..] => (n.to_string(), at + 4),
            [n, ..] => (n.to_string(), at + 1),
            [] => panic!("a name is missing in {sql}"),
        };
        while i < words.len() {
            match words[i..] {
                ["CREATE", "TABLE", ..] => {
                    let (t, next) = name(i + 2);
                    out.insert(format!("table {t}"));
                    // Each definition's first word, at the outer depth.
                    let (mut depth, mut first) = (0, false);
                    i = next;
                    while i < words.len() {
                        match words[i] {
                            "(" => {
                                depth += 1;
                                first = depth == 1;
                            }
                            ")" if depth == 1 => break,
                            ")" => depth -= 1,
                            "," if depth == 1 => first = true,
                            w if first => {
                                out.insert(format!("column {t}.{w}"));
                                first = false;
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                }
                ["CREATE", "INDEX", ..] => {
                    let (n, next) = name(i + 2);
                    out.insert(format!("index {n}"));
                    i = next;
                }
                ["ALTER", "TABLE", ..] => {
                    let (t, next) = name(i + 2);
                    table = t;
                    i = next;
                }
                ["ADD", "COLUMN", ..] => {
                    let (c, next) = name(i + 2);
                    out.insert(format!("column {table}.{c}"));
                    i = next;
                }
                _ => i += 1,
            }
        }
        out
    }

    #[test]
    fn every_step_is_the_same_step_on_both_backends() {
        for (i, step) in STEPS.iter().enumerate() {
            let (lite, pg) = (objects(step.sqlite), objects(step.postgres));
            assert!(!lite.is_empty(), "step {} creates nothing", i + 1);
            assert_eq!(lite, pg, "step {}: SQLite's and PostgreSQL's", i + 1);
        }
    }

    #[test]
    fn the_comparison_sees_a_column_on_one_backend_only() {
        let a = "CREATE TABLE t (a TEXT, b INTEGER CHECK (b >= 0), c TEXT NOT NULL);
                 CREATE INDEX IF NOT EXISTS t_a ON t (a);";
        let b = "CREATE TABLE t (a TEXT, b BIGINT CHECK (b >= 0));
                 CREATE INDEX IF NOT EXISTS t_a ON t (a);";
        assert!(objects(a).contains("column t.c"), "{:?}", objects(a));
        assert_ne!(objects(a), objects(b));
        let lite = "ALTER TABLE t ADD COLUMN x TEXT; ALTER TABLE t ADD COLUMN y TEXT;";
        let pg = "ALTER TABLE t ADD COLUMN IF NOT EXISTS x TEXT, ADD COLUMN IF NOT EXISTS y TEXT;";
        assert_eq!(objects(lite), objects(pg));
        assert!(objects(pg).contains("column t.y"));
    }
}
