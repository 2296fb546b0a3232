//! Context budgeting and compaction: the pure part.
//!
//! - [`estimate_tokens`]: how many tokens a request is likely to cost.
//! - [`legal_tail_starts`] / [`choose_tail_start`]: where the verbatim tail
//!   kept after a compaction may begin.
//! - [`render_for_summary`]: the older part of a transcript as one text the
//!   summary request carries, bounded.
//! - [`summary_message`]: how a stored summary is shown to the model.
//!
//! The loop that uses them (when to compact, the summary call, the stored
//! [`crate::NewTurn::Compaction`]) is `inquest-agent`'s `compact.rs`; the
//! rebuild that starts from the latest compaction is
//! [`crate::rebuild_messages`].

use std::collections::HashMap;

use crate::{Message, Role, Turn, cap};

/// Appears in the system prompt of every summary request, so a fake
/// provider (and a log reader) can tell one from an investigation step.
pub const COMPACTION_MARKER: &str = "[inquest:compaction-request]";

/// The system prompt of a summary request (no tools are offered).
pub const SUMMARY_SYSTEM: &str = "[inquest:compaction-request] You condense the earlier part of \
     an SRE incident investigation so it can go on within the model's context window. Keep every \
     fact that matters: the incident, what was checked with which tool and arguments, what each \
     check showed (numbers, names, timestamps, error lines), hypotheses confirmed or ruled out, and \
     what was still open. Do not invent anything. Answer with the summary only.";

/// The user message of a summary request, after the rendered transcript.
pub const SUMMARY_PROMPT: &str = "Summarise the investigation transcript above for the \
     investigator who will continue it. Plain text, at most a few hundred words.";

/// Opens the summary message of a rebuilt transcript.
pub const SUMMARY_PREFIX: &str = "[Summary by inquest of the earlier part of this investigation \
     (the transcript outgrew the model's context window; the full history is stored). Turns after \
     this summary are verbatim.]";

/// Opens the line of a summary message that says how many model turns it
/// stands in for.
pub const SUMMARISED_TURNS_LINE: &str = "[model turns summarised: ";

/// The user message that stands in for the turns a compaction covers;
/// with `model_turns` (the assistant turns it stands in for, when the
/// record carries them), a line saying so, which a provider that
/// positions itself by model turns (`script`) reads back with
/// [`summarised_model_turns`].
pub fn summary_message(summary: &str, model_turns: Option<u64>) -> String {
    match model_turns {
        Some(n) => format!("{SUMMARY_PREFIX}\n{SUMMARISED_TURNS_LINE}{n}]\n\n{summary}"),
        None => format!("{SUMMARY_PREFIX}\n\n{summary}"),
    }
}

/// The model turns a summary message says it stands in for.
pub fn summarised_model_turns(text: &str) -> Option<u64> {
    let rest = text.strip_prefix(SUMMARY_PREFIX)?.strip_prefix('\n')?;
    let line = rest.lines().next()?.strip_prefix(SUMMARISED_TURNS_LINE)?;
    line.strip_suffix(']')?.parse().ok()
}

/// Bytes per token assumed by the estimate, as a fraction: 2/7 tokens per
/// byte, i.e. 3.5 bytes a token.
///
/// Why an estimate and not a tokenizer: the chain mixes providers whose
/// tokenizers differ (and Anthropic's is not published), a BPE crate with
/// its vocabularies is heavy, and the budget only has to be conservative:
/// the provider's own "too long" answer is the ground truth, and it is
/// learned and acted on (the chain's `ContextTooLong`). English prose and
/// JSON run at about 4 bytes a token for both families; logs with many
/// numbers and punctuation nearer 3. 3.5 over the serialized request,
/// plus [`MESSAGE_OVERHEAD_TOKENS`] per message for role and framing
/// tokens, overestimates typical requests by ~10-15%, which the threshold
/// (`limits.compact_at`) leaves room for.
pub const TOKENS_PER_BYTE: (u64, u64) = (2, 7);

/// Tokens each message costs beyond its content (role, separators).
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;

/// Estimated tokens of `bytes` bytes of serialized request.
pub fn tokens_for_bytes(bytes: usize) -> u64 {
    let (num, den) = TOKENS_PER_BYTE;
    (bytes as u64).saturating_mul(num).div_ceil(den)
}

/// Bytes that hold about `tokens` tokens (the inverse of
/// [`tokens_for_bytes`], rounded down).
pub fn bytes_for_tokens(tokens: u64) -> usize {
    let (num, den) = TOKENS_PER_BYTE;
    usize::try_from(tokens.saturating_mul(den) / num).unwrap_or(usize::MAX)
}

/// Serialized size of one message, as its neutral JSON form.
pub fn message_bytes(message: &Message<'_>) -> usize {
    /// Counts what is written, keeping none of it.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, message).map_or(0, |()| count.0)
}

/// Estimated tokens of one message.
pub fn estimate_message(message: &Message<'_>) -> u64 {
    tokens_for_bytes(message_bytes(message)).saturating_add(MESSAGE_OVERHEAD_TOKENS)
}

/// Estimated tokens of a request: its system prompt, its messages and its
/// tool list (`tools_bytes`: the serialized size of the tool specs).
pub fn estimate_tokens(system: &str, messages: &[Message<'_>], tools_bytes: usize) -> u64 {
    let body: u64 = messages.iter().map(estimate_message).sum();
    tokens_for_bytes(system.len().saturating_add(tools_bytes))
        .saturating_add(MESSAGE_OVERHEAD_TOKENS)
        .saturating_add(body)
}

/// [`estimate_tokens`] of a transcript that grows at its end, counting
/// each message once: the loop asks before every model
/// call, and summing every message again made each burst quadratic in its
/// length (the serialization was ~8% of the loop bench's CPU at 8
/// sessions). The sum of the messages counted so far is kept; a call
/// counts only the messages past them. Whoever replaces or edits the
/// transcript other than by pushing calls [`RunningEstimate::reset`]
/// (a transcript shorter than the count resets by itself).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunningEstimate {
    /// Messages counted, from the start of the transcript.
    counted: usize,
    /// [`estimate_message`] summed over them.
    tokens: u64,
}

impl RunningEstimate {
    /// Forgets every message counted: the next call counts them all.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// What [`estimate_tokens`] of the same arguments returns, given that
    /// the first messages counted before are unchanged.
    pub fn tokens(&mut self, system: &str, messages: &[Message<'_>], tools_bytes: usize) -> u64 {
        if messages.len() < self.counted {
            self.reset();
        }
        let added: u64 = messages[self.counted..].iter().map(estimate_message).sum();
        self.tokens = self.tokens.saturating_add(added);
        self.counted = messages.len();
        tokens_for_bytes(system.len().saturating_add(tools_bytes))
            .saturating_add(MESSAGE_OVERHEAD_TOKENS)
            .saturating_add(self.tokens)
    }
}

/// Estimated tokens a stored turn adds to a transcript, with tool results
/// counted at most `tool_result_cap` bytes (what the transcript sends).
pub fn estimate_turn(turn: &Turn, tool_result_cap: usize) -> u64 {
    if turn.role.is_record() {
        return 0;
    }
    let content = if turn.role == Role::Tool {
        turn.content.len().min(tool_result_cap)
    } else {
        turn.content.len()
    };
    let calls = if turn.role == Role::Assistant {
        turn.tool_calls_raw.to_string().len()
    } else {
        0
    };
    tokens_for_bytes(content.saturating_add(calls).saturating_add(40))
        .saturating_add(MESSAGE_OVERHEAD_TOKENS)
}

/// The index of the first turn the transcript rebuilt from `turns` shows
/// after its opening: the latest compaction's first retained turn (the
/// compaction's own index when it kept none), or 0 without one.
pub fn view_start(turns: &[Turn]) -> usize {
    let latest = turns
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, t)| t.compaction().map(|info| (i, info)));
    match latest {
        None => 0,
        Some((at, info)) => turns
            .iter()
            .position(|t| t.seq.get() >= info.first_retained_seq)
            .unwrap_or(at)
            .min(at),
    }
}

/// A resume read from the latest compaction: the
/// opening user turn, the turns from the first retained seq of the
/// latest compaction that carries counters on (that compaction and every
/// later turn included), and those counters. `None` without such a
/// compaction: readers then use every turn. The same split is made
/// whether `turns` holds every stored turn or only what such a read
/// returns, so counters come out the same either way.
pub struct CarriedView<'a> {
    pub opening: Option<&'a Turn>,
    pub rest: Vec<&'a Turn>,
    pub carried: crate::Carried,
}

/// See [`CarriedView`].
pub fn carried_view(turns: &[Turn]) -> Option<CarriedView<'_>> {
    let (at, first_retained, carried) = turns.iter().enumerate().rev().find_map(|(i, t)| {
        let info = t.compaction()?;
        let carried = info.carried?;
        Some((i, info.first_retained_seq, carried))
    })?;
    let opening_at = turns[..at].iter().position(|t| t.role == Role::User);
    let rest = turns
        .iter()
        .enumerate()
        .filter(|(i, t)| Some(*i) != opening_at && (*i >= at || t.seq.get() >= first_retained))
        .map(|(_, t)| t)
        .collect();
    Some(CarriedView {
        opening: opening_at.and_then(|o| turns.get(o)),
        rest,
        carried,
    })
}

/// The counters a new compaction carries: everything `turns` (the
/// session as the burst holds it) plus `compaction` (the new turn, its
/// `carried` unset) add up to, less what the read from it will still
/// hold (the opening, the turns from its first retained seq, itself).
pub fn carry_for(
    turns: &[Turn],
    compaction: &Turn,
    servers: &impl crate::ToolServers,
) -> crate::Carried {
    let mut all: Vec<Turn> = Vec::with_capacity(turns.len() + 1);
    all.extend_from_slice(turns);
    all.push(compaction.clone());
    let full = crate::restore(&all, servers);
    let full_active = crate::active_time(&all);
    // The read from the new compaction, with nothing carried yet.
    let mut marked = compaction.clone();
    if let Some(mut info) = compaction.compaction() {
        info.carried = Some(crate::Carried::default());
        marked.tool_calls_raw = serde_json::to_value(info).unwrap_or_default();
    }
    let first_retained = compaction
        .compaction()
        .map_or(u64::MAX, |i| i.first_retained_seq);
    let opening = turns.iter().find(|t| t.role == Role::User);
    let mut read: Vec<Turn> = opening.cloned().into_iter().collect();
    read.extend(
        turns
            .iter()
            .filter(|t| t.seq.get() >= first_retained && Some(t.seq) != opening.map(|o| o.seq))
            .cloned(),
    );
    read.push(marked);
    let part = crate::restore(&read, servers);
    let part_active = crate::active_time(&read);
    let active = (full_active - part_active).max(time::Duration::ZERO);
    crate::Carried {
        assistant_turns: full.assistant_turns.saturating_sub(part.assistant_turns),
        user_turns: full.bursts.saturating_sub(part.bursts),
        tool_calls: full.audit.tool_calls.saturating_sub(part.audit.tool_calls),
        input_tokens: full
            .audit
            .input_tokens
            .saturating_sub(part.audit.input_tokens),
        output_tokens: full
            .audit
            .output_tokens
            .saturating_sub(part.audit.output_tokens),
        used_servers: full.used_servers,
        active_ms: u64::try_from(active.whole_milliseconds()).unwrap_or(0),
    }
}

/// Indices `i` of `turns` where a retained tail may start: `turns[i]` is a
/// user or assistant turn (what may follow the summary message), and no
/// tool result at or after `i` answers a call made before `i` (the
/// result's call is taken to be the latest earlier call with its id, as
/// the rebuild matches it). A tail starting there never separates a call
/// from its result. Ascending.
pub fn legal_tail_starts(turns: &[Turn]) -> Vec<usize> {
    // For each tool result: the index of the call it answers.
    let mut last_call: HashMap<String, usize> = HashMap::new();
    let mut answers: Vec<Option<usize>> = vec![None; turns.len()];
    for (i, turn) in turns.iter().enumerate() {
        match turn.role {
            Role::Assistant => {
                for call in crate::resume::usable_tool_calls(turn).unwrap_or_default() {
                    last_call.insert(call.id, i);
                }
            }
            Role::Tool => {
                if let Some(slot) = answers.get_mut(i) {
                    *slot = turn
                        .tool_call_id
                        .as_ref()
                        .and_then(|id| last_call.get(id).copied());
                }
            }
            _ => {}
        }
    }
    let mut starts = Vec::new();
    // The least call index answered by a result at or after `i`.
    let mut min_answered = usize::MAX;
    for i in (0..turns.len()).rev() {
        if let Some(Some(call)) = answers.get(i) {
            min_answered = min_answered.min(*call);
        }
        let starts_here = turns
            .get(i)
            .is_some_and(|t| matches!(t.role, Role::User | Role::Assistant));
        if starts_here && min_answered >= i {
            starts.push(i);
        }
    }
    starts.reverse();
    starts
}

/// The index where the retained tail of `turns` begins for a compaction
/// made now: the earliest legal start after `after` (the index of the
/// first turn the current transcript shows; at least one turn is
/// summarised) whose tail costs at most `tail_budget` tokens by `cost`.
/// `turns.len()` (keep nothing) when no legal start fits.
pub fn choose_tail_start(
    turns: &[Turn],
    after: usize,
    tail_budget: u64,
    cost: impl Fn(&Turn) -> u64,
) -> usize {
    let mut suffix = vec![0u64; turns.len() + 1];
    for i in (0..turns.len()).rev() {
        let c = turns.get(i).map_or(0, &cost);
        suffix[i] = suffix[i + 1].saturating_add(c);
    }
    legal_tail_starts(turns)
        .into_iter()
        .filter(|&i| i > after)
        .find(|&i| suffix[i] <= tail_budget)
        .unwrap_or(turns.len())
}

/// `messages` as one plain text for a summary request, at most about
/// `max_bytes` bytes: each tool result is cut to an eighth of that (at a
/// line boundary, marked), and when the whole is still longer its middle
/// is cut (the start holds the task and any earlier summary, the end the
/// latest evidence), marked too.
pub fn render_for_summary(messages: &[Message<'_>], max_bytes: usize) -> String {
    let per_result = (max_bytes / 8).max(512);
    let mut out = String::new();
    for m in messages {
        match m {
            Message::User { text } => {
                out.push_str("USER:\n");
                out.push_str(text);
            }
            Message::Assistant { text, tool_calls } => {
                out.push_str("ASSISTANT:\n");
                out.push_str(text);
                for c in tool_calls {
                    out.push_str(&format!(
                        "\n-> calls {} {}",
                        c.name,
                        cap::cut_text(&c.arguments.as_sent(), 2048, "tool-call arguments")
                    ));
                }
            }
            Message::ToolResult {
                name,
                content,
                is_error,
                ..
            } => {
                let flag = if *is_error { " (error)" } else { "" };
                out.push_str(&format!("TOOL RESULT of {name}{flag}:\n"));
                out.push_str(&cut_at_line(
                    content,
                    per_result,
                    "tool result for the summary",
                ));
            }
        }
        out.push_str("\n\n");
    }
    if out.len() <= max_bytes {
        return out;
    }
    let head_end = cap::floor_char_boundary(&out, max_bytes / 3);
    let tail_len = max_bytes.saturating_sub(head_end);
    let mut tail_start = out.len().saturating_sub(tail_len);
    while !out.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let dropped = (tail_start.saturating_sub(head_end)) as u64;
    format!(
        "{}\n{}\n{}",
        &out[..head_end],
        cap::marker(
            dropped,
            "the transcript's middle, to fit the summary request"
        ),
        &out[tail_start..]
    )
}

/// `text` cut to at most `cap_bytes` at the last line boundary before the
/// cap (at the cap itself when a line is longer than half of it), with the
/// marker of [`cap::cut_lines`] naming `what`.
pub fn cut_at_line<'a>(text: &'a str, cap_bytes: usize, what: &str) -> std::borrow::Cow<'a, str> {
    if text.len() <= cap_bytes {
        return std::borrow::Cow::Borrowed(text);
    }
    let hard = cap::floor_char_boundary(text, cap_bytes);
    let at = match text[..hard].rfind('\n') {
        Some(nl) if nl + 1 >= hard / 2 => nl + 1,
        _ => hard,
    };
    cap::cut_lines(text, at, 0, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume::testing::*;

    #[test]
    fn estimate_is_bytes_over_three_and_a_half() {
        assert_eq!(tokens_for_bytes(0), 0);
        assert_eq!(tokens_for_bytes(7), 2);
        assert_eq!(tokens_for_bytes(8), 3);
        assert_eq!(bytes_for_tokens(2), 7);
        let m = Message::User {
            text: "x".repeat(700).into(),
        };
        assert!(estimate_message(&m) >= 200);
    }

    #[test]
    fn tails_never_start_inside_a_call_and_its_results() {
        let turns = vec![
            user(1, "go"),
            assistant(2, "", &[("c1", "grep"), ("c2", "grep")]),
            tool(3, "c1", "grep", "a"),
            tool(4, "c2", "grep", "b"),
            assistant(5, "", &[("c3", "grep")]),
            tool(6, "c3", "grep", "c"),
            notice(7, "n"),
            user(8, "more"),
        ];
        assert_eq!(legal_tail_starts(&turns), vec![0, 1, 4, 7]);
        // A late result for c1 makes every start after the call illegal.
        let mut late = turns.clone();
        late.push(tool(9, "c1", "grep", "late"));
        assert_eq!(legal_tail_starts(&late), vec![0, 1]);
        let cost = |_: &Turn| 10;
        assert_eq!(choose_tail_start(&turns, 0, 45, cost), 4);
        assert_eq!(choose_tail_start(&turns, 0, 25, cost), 7);
        assert_eq!(choose_tail_start(&turns, 0, 5, cost), turns.len());
        assert_eq!(choose_tail_start(&turns, 4, 1000, cost), 7);
    }

    #[test]
    fn rendering_is_bounded_and_marked() {
        let messages = vec![
            Message::User {
                text: "the incident".into(),
            },
            Message::ToolResult {
                call_id: "c".into(),
                name: "grep".into(),
                content: "line\n".repeat(10_000).into(),
                is_error: false,
            },
        ];
        let text = render_for_summary(&messages, 4000);
        assert!(text.len() < 4400, "{}", text.len());
        assert!(text.starts_with("USER:\nthe incident"));
        assert!(text.contains("cut by inquest"));
        let cut = cut_at_line("aaaa\nbbbb\ncccc\n", 12, "x");
        assert!(cut.starts_with("aaaa\nbbbb\n…[cut by inquest"), "{cut}");
    }

    /// A message of the kind a burst appends, from a seed.
    fn some_message(kind: u8, text: &str, n: usize) -> Message<'static> {
        match kind % 3 {
            0 => Message::User {
                text: text.to_owned().into(),
            },
            1 => Message::Assistant {
                text: text.to_owned().into(),
                tool_calls: (0..n % 3)
                    .map(|i| {
                        crate::MessageCall::from(crate::ToolCall {
                            id: format!("c{n}_{i}"),
                            name: "grep".into(),
                            arguments: crate::ToolArguments::from_model(&format!(
                                "{{\"q\":{text:?}}}"
                            )),
                        })
                    })
                    .collect(),
            },
            _ => Message::ToolResult {
                call_id: format!("c{n}").into(),
                name: "grep".into(),
                content: text.to_owned().into(),
                is_error: n.is_multiple_of(2),
            },
        }
    }

    proptest::proptest! {
        /// The running estimate equals the full recomputation after every
        /// push, every replacement (reset) and every shortening.
        #[test]
        fn running_estimate_equals_the_full_recomputation(
            ops in proptest::collection::vec(
                (0u8..8, "[ -~\\n\"\\\\é\u{0}]{0,40}", 0usize..6), 1..60),
            system in "[ -~]{0,30}",
            tools in 0usize..5000,
        ) {
            let mut transcript: Vec<Message<'static>> = Vec::new();
            let mut running = RunningEstimate::default();
            for (op, text, n) in ops {
                match op {
                    // Replaced (a compaction, the fit at burst start).
                    0 => {
                        transcript = (0..n).map(|i| some_message(i as u8, &text, i)).collect();
                        running.reset();
                    }
                    // Shortened without a reset: detected by the length.
                    1 => transcript.truncate(n.min(transcript.len())),
                    _ => transcript.push(some_message(op, &text, n)),
                }
                proptest::prop_assert_eq!(
                    running.tokens(&system, &transcript, tools),
                    estimate_tokens(&system, &transcript, tools)
                );
            }
        }
    }
}
