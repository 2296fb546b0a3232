//! Active time: how long the agent was working, summed over bursts.

use time::Duration;

use crate::{Role, Turn};

/// The sum over bursts of the time each burst was working.
///
/// A burst starts at a user turn and runs to the last turn before the next
/// user turn; it contributes `last.created_at - user.created_at`. The idle
/// gap between a burst's last turn and the next user turn never counts.
/// `notice` turns are ignored (a recovery notice may be written long after
/// the burst stopped), as are turns before the first user turn. A negative
/// span (clock skew between replicas) counts as zero. Turns are taken in the
/// order given.
///
/// From a compaction that carries counters, the opening is
/// left out, the first turn after it starts a span (the turns before it
/// are the carried part), and the carried active time is added.
pub fn active_time(turns: &[Turn]) -> Duration {
    match crate::compaction::carried_view(turns) {
        None => walk(turns.iter(), false),
        Some(view) => walk(view.rest.into_iter(), true).saturating_add(Duration::milliseconds(
            i64::try_from(view.carried.active_ms).unwrap_or(i64::MAX),
        )),
    }
}

fn walk<'a>(turns: impl Iterator<Item = &'a Turn>, mut first_starts: bool) -> Duration {
    let mut total = Duration::ZERO;
    let mut burst: Option<(&Turn, &Turn)> = None;
    for turn in turns.filter(|t| t.role != Role::Notice) {
        let starts = std::mem::take(&mut first_starts) || turn.role == Role::User;
        if starts {
            if let Some((start, end)) = burst {
                total = total.saturating_add(span(start, end));
            }
            burst = Some((turn, turn));
        } else if let Some((_, end)) = burst.as_mut() {
            *end = turn;
        }
    }
    if let Some((start, end)) = burst {
        total = total.saturating_add(span(start, end));
    }
    total
}

fn span(start: &Turn, end: &Turn) -> Duration {
    let d = end.created_at - start.created_at;
    if d.is_negative() { Duration::ZERO } else { d }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume::testing::*;

    #[test]
    fn idle_gaps_between_bursts_do_not_count() {
        let turns = vec![
            at(user(1, "a"), 0),
            at(assistant(2, "b", &[("c", "t")]), 10),
            at(tool(3, "c", "t", "r"), 25),
            at(assistant(4, "done", &[]), 30),
            at(notice(5, "late notice"), 5000),
            at(user(6, "again"), 7200),
            at(assistant(7, "ok", &[]), 7205),
        ];
        assert_eq!(active_time(&turns), Duration::seconds(35));
    }

    #[test]
    fn skew_and_stray_turns_count_nothing() {
        let turns = vec![
            at(assistant(1, "before any user", &[]), 0),
            at(user(2, "a"), 100),
            at(assistant(3, "skewed", &[]), 90),
            at(user(4, "b"), 200),
        ];
        assert_eq!(active_time(&turns), Duration::ZERO);
        assert_eq!(active_time(&[]), Duration::ZERO);
    }
}
