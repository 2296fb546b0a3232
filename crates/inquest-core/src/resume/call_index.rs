//! Which call a tool result answers, and whether a call's id was used
//! before: the rebuild's bookkeeping (see `rebuild.rs` for the rules).
//!
//! Two tiers. A healthy history (every id fresh, every result right after
//! its call) needs to remember nothing but one 64-bit keyed hash per call
//! id ([`super::id_hash`]) and which calls of the open assistant message
//! are answered: the fast tier, ~12 bytes per call. The first time that is
//! not enough (an id whose hash was seen, or a result that does not
//! answer a call of the open message: a duplicate id, a moved, duplicate
//! or orphan result) the exact tier is built once from the messages so far
//! and used from then on: interned ids, per-call records and per-id lists
//! of waiting calls, so every later match is O(1) whatever the session's
//! length. Both tiers give the same answers; the switch only costs one
//! pass over the messages so far. A hash collision between two different
//! ids (unlikely with a random 64-bit key, see `id_hash`) only makes the
//! switch happen early.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use super::id_hash::IdHashBuilder;
use super::message::Message;
use super::message_calls::MessageCall;

/// No call: the end of a list.
const NONE: u32 = u32::MAX;

fn index(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(NONE - 1)
}

/// One call of the transcript (see [`Exact`]).
#[derive(Clone, Copy)]
struct Call {
    /// Its interned stored id.
    id: u32,
    /// Its assistant message, and the message its result goes in.
    block: u32,
    slot: u32,
    /// Its neighbours in its id's list of calls still without a result.
    prev: u32,
    next: u32,
    answered: bool,
    /// The assistant turn's seq.
    seq: u64,
}

/// The exact tier: every call of the transcript by number, in order of
/// appearance (one record per call in one vector), and one intern-map
/// entry per distinct stored id, with the list of its calls still
/// waiting for a result.
struct Exact<'a> {
    /// Stored id → interned number (see `id_hash` on the hasher).
    ids: HashMap<Cow<'a, str>, u32, IdHashBuilder>,
    /// Per interned id: its stored text, and the first and last of its
    /// calls still without a result.
    id_text: Vec<Cow<'a, str>>,
    waiting: Vec<(u32, u32)>,
    calls: Vec<Call>,
}

impl<'a> Exact<'a> {
    /// Room for about `expected` calls before anything grows.
    fn with_capacity(expected: usize) -> Self {
        Exact {
            ids: HashMap::with_capacity_and_hasher(expected, IdHashBuilder::new()),
            id_text: Vec::with_capacity(expected),
            waiting: Vec::with_capacity(expected),
            calls: Vec::with_capacity(expected),
        }
    }

    fn len(&self) -> usize {
        self.calls.len()
    }

    fn answered(&self, n: usize) -> bool {
        self.calls.get(n).is_none_or(|c| c.answered)
    }

    fn slot(&self, n: usize) -> u32 {
        self.calls.get(n).map_or(NONE, |c| c.slot)
    }

    /// Adds a call of the assistant message `block`, whose result goes in
    /// message `slot`, with stored id `stored`; false when the id was used
    /// by an earlier call.
    // The `Cow` itself is cloned into the map, so a borrowed id stays
    // borrowed (a `&str` would lose `'a`).
    #[allow(clippy::ptr_arg)]
    fn push(&mut self, stored: &Cow<'a, str>, block: usize, slot: usize, seq: u64) -> bool {
        let n = index(self.calls.len());
        let next_ix = index(self.id_text.len());
        let (ix, fresh) = match self.ids.entry(stored.clone()) {
            std::collections::hash_map::Entry::Occupied(e) => (*e.get(), false),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(next_ix);
                self.id_text.push(stored.clone());
                self.waiting.push((NONE, NONE));
                (next_ix, true)
            }
        };
        let (first, last) = self
            .waiting
            .get(ix as usize)
            .copied()
            .unwrap_or((NONE, NONE));
        if let Some(l) = self.calls.get_mut(last as usize) {
            l.next = n;
        }
        self.calls.push(Call {
            id: ix,
            block: index(block),
            slot: index(slot),
            prev: last,
            next: NONE,
            answered: false,
            seq,
        });
        let first = if first == NONE { n } else { first };
        if let Some(w) = self.waiting.get_mut(ix as usize) {
            *w = (first, n);
        }
        fresh
    }

    /// The stored id of call `n`.
    fn stored_id(&self, n: usize) -> &str {
        self.calls
            .get(n)
            .and_then(|c| self.id_text.get(c.id as usize))
            .map_or("", |s| s.as_ref())
    }

    /// Marks call `n` answered, taking it out of its id's waiting list.
    fn answer(&mut self, n: u32) {
        let Some(call) = self.calls.get_mut(n as usize) else {
            return;
        };
        call.answered = true;
        let Call { prev, next, id, .. } = *call;
        if let Some(p) = self.calls.get_mut(prev as usize) {
            p.next = next;
        }
        if let Some(q) = self.calls.get_mut(next as usize) {
            q.prev = prev;
        }
        if let Some(w) = self.waiting.get_mut(id as usize) {
            if w.0 == n {
                w.0 = next;
            }
            if w.1 == n {
                w.1 = prev;
            }
        }
    }

    /// The call a result for stored id `id` answers, with whether it is
    /// one of the open message's (see the module docs); `Err(known)` when
    /// none waits, `known` saying whether a call with that id exists.
    fn target(&self, id: &str, open: Option<usize>) -> Result<(u32, bool), bool> {
        let Some(&ix) = self.ids.get(id) else {
            return Err(false);
        };
        let (_, last) = self
            .waiting
            .get(ix as usize)
            .copied()
            .unwrap_or((NONE, NONE));
        if last == NONE {
            return Err(true);
        }
        // The open message's calls are the newest, so its waiting calls are
        // the end of the list: the first of them is the one answered.
        let open = open.map(index);
        let mut in_open = None;
        let mut n = last;
        while let Some(call) = self.calls.get(n as usize)
            && Some(call.block) == open
        {
            in_open = Some(n);
            n = call.prev;
        }
        Ok(match in_open {
            Some(n) => (n, true),
            None => (last, false),
        })
    }
}

/// A hasher for keys that already are keyed hashes: passes them through.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed with it; fold anything else anyway.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The assistant message results answer right now: no user or assistant
/// turn came after it.
#[derive(Clone, Copy)]
struct Open {
    /// Its index in the transcript, its first call's number, its number
    /// of calls and its turn's seq.
    at: usize,
    first: usize,
    count: usize,
    seq: u64,
}

/// A call still without a result when its message closed (fast tier).
#[derive(Clone, Copy)]
struct Unanswered {
    n: usize,
    slot: usize,
    seq: u64,
}

/// See the module docs.
pub(super) struct CallIndex<'a> {
    open: Option<Open>,
    /// Calls so far.
    count: usize,
    /// Expected calls in all (sizes the exact tier).
    expected: usize,
    /// The fast tier: the keyed hash of every call id so far, whether each
    /// call of the open message is answered, and the calls of closed
    /// messages that never were. `None` once the exact tier took over.
    fast: Option<Fast>,
    exact: Option<Exact<'a>>,
}

struct Fast {
    hasher: IdHashBuilder,
    seen: HashSet<u64, BuildHasherDefault<PassThrough>>,
    open_answered: Vec<bool>,
    unanswered: Vec<Unanswered>,
}

/// What a tool result answers.
pub(super) struct Answer {
    /// The message its content goes in.
    pub slot: usize,
    /// Whether the call is one of the open message's (else the result was
    /// moved back to it).
    pub in_open: bool,
}

impl<'a> CallIndex<'a> {
    /// An index for about `expected` calls.
    pub(super) fn with_capacity(expected: usize) -> Self {
        CallIndex {
            open: None,
            count: 0,
            expected,
            fast: Some(Fast {
                hasher: IdHashBuilder::new(),
                seen: HashSet::with_capacity_and_hasher(expected, Default::default()),
                open_answered: Vec::new(),
                unanswered: Vec::new(),
            }),
            exact: None,
        }
    }

    /// A user or assistant turn came: the open message closes.
    pub(super) fn close(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        if let Some(fast) = &mut self.fast {
            for (k, done) in fast.open_answered.iter().enumerate() {
                if !done {
                    fast.unanswered.push(Unanswered {
                        n: open.first + k,
                        slot: open.at + 1 + k,
                        seq: open.seq,
                    });
                }
            }
            fast.open_answered.clear();
        }
    }

    /// Adds the calls of the assistant message about to be pushed at
    /// `at` (after [`CallIndex::close`]); their results go right after it,
    /// in call order. Returns the indexes of the calls whose id an earlier
    /// call (of this or an earlier message) used.
    pub(super) fn add_calls(
        &mut self,
        messages: &[Message<'a>],
        at: usize,
        seq: u64,
        calls: &[MessageCall<'a>],
    ) -> Vec<usize> {
        let first = self.count;
        if let Some(fast) = &mut self.fast {
            let all_fresh = calls
                .iter()
                .all(|c| fast.seen.insert(fast.hasher.hash_one(c.id.as_ref())));
            if all_fresh {
                fast.open_answered.clear();
                fast.open_answered.resize(calls.len(), false);
            } else {
                self.switch_to_exact(messages);
            }
        }
        let mut reused = Vec::new();
        if let Some(exact) = &mut self.exact {
            for (k, call) in calls.iter().enumerate() {
                if !exact.push(&call.id, at, at + 1 + k, seq) {
                    reused.push(k);
                }
            }
        }
        self.count += calls.len();
        if !calls.is_empty() {
            self.open = Some(Open {
                at,
                first,
                count: calls.len(),
                seq,
            });
        }
        reused
    }

    /// The call a result for stored id `call_id` answers (see the module
    /// docs of `rebuild.rs`), now marked answered; `Err(known)` when none
    /// waits, `known` saying whether a call with that id exists.
    pub(super) fn answer(
        &mut self,
        messages: &[Message<'a>],
        call_id: &str,
    ) -> Result<Answer, bool> {
        if let Some(fast) = &mut self.fast {
            // With no renames yet, a call's stored id is its message's id.
            let near = self.open.and_then(|open| match messages.get(open.at) {
                Some(Message::Assistant { tool_calls, .. }) => tool_calls
                    .iter()
                    .zip(&fast.open_answered)
                    .position(|(c, done)| !done && c.id == call_id)
                    .map(|k| (open, k)),
                _ => None,
            });
            if let Some((open, k)) = near {
                if let Some(done) = fast.open_answered.get_mut(k) {
                    *done = true;
                }
                return Ok(Answer {
                    slot: open.at + 1 + k,
                    in_open: true,
                });
            }
            self.switch_to_exact(messages);
        }
        let Some(exact) = &mut self.exact else {
            return Err(false);
        };
        // The common case, without a lookup: the first waiting call of the
        // open message with this id.
        let near = self.open.and_then(|open| {
            (open.first..open.first + open.count)
                .find(|&n| !exact.answered(n) && exact.stored_id(n) == call_id)
        });
        let (n, in_open) = match near {
            Some(n) => (index(n), true),
            None => exact.target(call_id, self.open.map(|o| o.at))?,
        };
        exact.answer(n);
        Ok(Answer {
            slot: exact.slot(n as usize) as usize,
            in_open,
        })
    }

    /// Every call never answered, in transcript order: its stored id, the
    /// message of its synthetic result and its assistant turn's seq (after
    /// the last [`CallIndex::close`]).
    pub(super) fn unanswered<'m>(
        &'m self,
        messages: &'m [Message<'a>],
    ) -> Vec<(&'m str, usize, u64)> {
        if let Some(fast) = &self.fast {
            return fast
                .unanswered
                .iter()
                .map(|u| {
                    let id = match messages.get(u.slot) {
                        Some(Message::ToolResult { call_id, .. }) => call_id.as_ref(),
                        _ => "",
                    };
                    (id, u.slot, u.seq)
                })
                .collect();
        }
        let Some(exact) = &self.exact else {
            return Vec::new();
        };
        (0..exact.len())
            .filter(|&n| !exact.answered(n))
            .map(|n| {
                (
                    exact.stored_id(n),
                    exact.slot(n) as usize,
                    exact.calls.get(n).map_or(0, |c| c.seq),
                )
            })
            .collect()
    }

    /// Builds the exact tier from the messages so far (every call in them
    /// went through the fast tier, so its id is its stored id and all ids
    /// are distinct) and the fast tier's answered state.
    fn switch_to_exact(&mut self, messages: &[Message<'a>]) {
        let Some(fast) = self.fast.take() else {
            return;
        };
        let mut exact = Exact::with_capacity(self.expected.max(self.count));
        for (at, message) in messages.iter().enumerate() {
            if let Message::Assistant { tool_calls, .. } = message {
                for (k, call) in tool_calls.iter().enumerate() {
                    exact.push(&call.id, at, at + 1 + k, 0);
                }
            }
        }
        let mut waiting: Vec<Unanswered> = fast.unanswered;
        if let Some(open) = self.open {
            waiting.extend(
                fast.open_answered
                    .iter()
                    .enumerate()
                    .filter(|(_, done)| !**done)
                    .map(|(k, _)| Unanswered {
                        n: open.first + k,
                        slot: open.at + 1 + k,
                        seq: open.seq,
                    }),
            );
        }
        let mut next = waiting.iter().peekable();
        for n in 0..exact.len() {
            match next.peek() {
                Some(u) if u.n == n => {
                    if let Some(call) = exact.calls.get_mut(n) {
                        call.seq = u.seq;
                    }
                    next.next();
                }
                _ => exact.answer(index(n)),
            }
        }
        self.exact = Some(exact);
    }
}
