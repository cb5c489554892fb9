//! The earlier forms of mode `tls`, kept runnable so that the book's New Order journey
//! can show each step's real report (`TPCC_JOURNEY`, read when a database is opened).
//!
//! The shipped form tracks each row the loops write as a location of its own and has no
//! checkpoint. A DBMS that tracks its pages instead, as hardware speculation tracks
//! cache lines and as a first port of a page-based engine would, sees two New Order
//! items conflict whenever their rows share a page: above all the order lines, which
//! every item inserts into the same page of its order. The journey's steps:
//!
//! | `TPCC_JOURNEY` | tracking | New Order's loop |
//! | --- | --- | --- |
//! | `pages` | by page: every read of a row also reads its page's version, every write also writes it | as shipped |
//! | `pages,checkpoint` | by page | a `checkpoint!()` before the order-line insert |
//! | `rows` (default) | by row | as shipped |
//! | `rows,checkpoint` | by row | with the checkpoint, to see what it costs where nothing needs it |
//!
//! A "page" here is 16 consecutive keys of a table (the key with the low 4 bits of its
//! last byte cleared): about what one 4 KB leaf holds of stock rows, and all the lines
//! of one order. Every step gives the sequential answers (`tests/journey.rs`); only
//! the time differs.

use anyhow::{Result, bail};

/// How finely the overlay tracks the rows a loop reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grain {
    /// Each row is a location of its own (the shipped form).
    Row,
    /// Each row access is also an access to its page (see the module docs).
    Page,
}

/// One step of the journey: how rows are tracked, and whether New Order's loop has a
/// checkpoint before its order-line insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Journey {
    /// Tracking granularity.
    pub grain: Grain,
    /// A `checkpoint!()` before New Order's order-line insert.
    pub checkpoint: bool,
}

impl Default for Journey {
    /// The shipped form: rows, no checkpoint.
    fn default() -> Self {
        Journey {
            grain: Grain::Row,
            checkpoint: false,
        }
    }
}

/// The environment variable that picks a step.
pub const JOURNEY_VAR: &str = "TPCC_JOURNEY";

impl Journey {
    /// Parses `rows` or `pages`, optionally followed by `,checkpoint`.
    pub fn parse(text: &str) -> Result<Journey> {
        let mut parts = text.split(',').map(str::trim);
        let grain = match parts.next() {
            Some("rows") => Grain::Row,
            Some("pages") => Grain::Page,
            other => bail!(
                "{JOURNEY_VAR}={text:?}: expected `rows` or `pages`, optionally followed by \
                 `,checkpoint` (got {:?} first)",
                other.unwrap_or("")
            ),
        };
        let checkpoint = match parts.next() {
            None => false,
            Some("checkpoint") => true,
            Some(other) => {
                bail!(
                    "{JOURNEY_VAR}={text:?}: {other:?} is not a step; the only option is `checkpoint`"
                )
            }
        };
        if let Some(extra) = parts.next() {
            bail!("{JOURNEY_VAR}={text:?}: nothing may follow `checkpoint` (got {extra:?})");
        }
        Ok(Journey { grain, checkpoint })
    }

    /// The step `TPCC_JOURNEY` names; the shipped form when it is unset or empty.
    pub fn from_env() -> Result<Journey> {
        match std::env::var(JOURNEY_VAR) {
            Ok(v) if !v.trim().is_empty() => Journey::parse(&v),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(Journey::default()),
            Err(std::env::VarError::NotUnicode(_)) => {
                bail!("{JOURNEY_VAR} is not valid UTF-8")
            }
        }
    }
}

/// The key of the page that holds `key` (see the module docs), in `buf`.
pub(super) fn page_key<'b>(key: &[u8], buf: &'b mut [u8; 64]) -> &'b [u8] {
    let n = key.len().min(buf.len());
    buf[..n].copy_from_slice(&key[..n]);
    if let Some(last) = buf[..n].last_mut() {
        *last &= !0x0f;
    }
    &buf[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_parse_and_bad_ones_say_why() {
        assert_eq!(Journey::parse("rows").unwrap(), Journey::default());
        let p = Journey::parse("pages, checkpoint").unwrap();
        assert_eq!((p.grain, p.checkpoint), (Grain::Page, true));
        for bad in ["page", "rows,check", "rows,checkpoint,x", ""] {
            let e = Journey::parse(bad).unwrap_err().to_string();
            assert!(e.contains(JOURNEY_VAR), "{e}");
        }
    }

    #[test]
    fn a_page_is_sixteen_consecutive_keys() {
        let mut a = [0; 64];
        let mut b = [0; 64];
        assert_eq!(
            page_key(&[1, 2, 0x31], &mut a),
            page_key(&[1, 2, 0x3f], &mut b)
        );
        assert_ne!(
            page_key(&[1, 2, 0x31], &mut a),
            page_key(&[1, 2, 0x41], &mut b)
        );
        assert_eq!(page_key(&[], &mut a), &[] as &[u8]);
    }
}
