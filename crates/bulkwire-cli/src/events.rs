//! `bulkwire events …`: the event outbox in the metadata store (the book:
//! docs/src/events.md). `list` reads the feed as `GET /v1/events` does,
//! or the deliveries that failed for good; `retry` makes failed deliveries
//! due again; `secret` makes a webhook or hook secret.

use crate::creds::{run, Where};
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum EventsCmd {
    /// List events in feed order (seq, id, time, type, owner, item), or
    /// with --failed the webhook deliveries given up.
    List {
        /// Deliveries that failed for good: event id, endpoint, tries,
        /// last error, type.
        #[arg(long)]
        failed: bool,
        /// Start after this seq (the feed's cursor) [default: the oldest
        /// event kept].
        #[arg(long, default_value_t = 0)]
        after: i64,
        /// At most this many lines.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Only the events of this owner's items.
        #[arg(long)]
        owner: Option<String>,
        /// One event per line as the JSON webhooks receive.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        at: Where,
    },
    /// Try failed deliveries again (every endpoint that gave up on them):
    /// the event named by its id, or every failed one.
    Retry {
        /// The event's id (from `events list --failed`).
        #[arg(required_unless_present = "all_failed", conflicts_with = "all_failed")]
        id: Option<String>,
        /// Every failed delivery.
        #[arg(long)]
        all_failed: bool,
        #[command(flatten)]
        at: Where,
    },
    /// Print a new secret for a [[webhooks]] entry or [hooks]: whsec_ and
    /// 32 random bytes in base64 (Standard Webhooks).
    Secret,
}

pub fn events(cmd: EventsCmd) -> ExitCode {
    match cmd {
        EventsCmd::Secret => {
            println!("{}", bulkwire_server::events::config::new_secret());
            ExitCode::SUCCESS
        }
        EventsCmd::List {
            failed,
            after,
            limit,
            owner,
            json,
            at,
        } => run("events list", &at, |meta| async move {
            if failed {
                for f in meta
                    .deliveries_failed(limit)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    match json {
                        true => println!("{}", f.event.to_json()),
                        false => println!(
                            "{}  endpoint={}  tries={}  type={}  time={}  error={}",
                            f.event.id, f.endpoint, f.attempts, f.event.kind, f.event.time, f.error
                        ),
                    }
                }
                return Ok(());
            }
            let got = meta
                .events(after, owner.as_deref(), limit)
                .await
                .map_err(|e| e.to_string())?;
            for s in got {
                let e = &s.event;
                match json {
                    true => println!("{}", e.to_json()),
                    false => println!(
                        "{}  {}  {}  {}  owner={}  item={}",
                        s.seq,
                        e.id,
                        e.time,
                        e.kind,
                        e.owner,
                        e.data["id"].as_str().unwrap_or("-")
                    ),
                }
            }
            Ok(())
        }),
        EventsCmd::Retry { id, at, .. } => run("events retry", &at, |meta| async move {
            let n = meta
                .deliveries_retry(id.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            match (n, id) {
                (0, Some(id)) => Err(format!("no failed delivery of event {id}")),
                (n, _) => {
                    eprintln!("{n} failed {} due again", deliveries(n));
                    Ok(())
                }
            }
        }),
    }
}

fn deliveries(n: u64) -> &'static str {
    if n == 1 {
        "delivery"
    } else {
        "deliveries"
    }
}
