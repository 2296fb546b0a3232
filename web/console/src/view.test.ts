import assert from "node:assert/strict";
import { test } from "node:test";
import { type SessionTurn, TurnRole } from "./proto";
import { stillQueued, Timeline } from "./view";

function turn(seq: number, role: number, extra: Partial<SessionTurn> = {}): SessionTurn {
  return {
    sessionId: "s",
    seq,
    role,
    content: "",
    toolCalls: [],
    toolCallId: "",
    toolName: "",
    isError: false,
    createdAt: 0,
    inputTokens: 0,
    outputTokens: 0,
    recoveryPlan: null,
    costUsd: null,
    compaction: null,
    ...extra,
  };
}

const call = (id: string) => ({ id, name: "t", argumentsJson: "{}" });
const plan = (repaired: string[], interrupted: string[]) => ({
  kind: "interrupted_turn",
  repairedCallIds: repaired,
  canContinue: true,
  canAutoContinue: false,
  requiresConfirmation: true,
  noticeText: "",
  interruptedCalls: interrupted.map((callId) => ({ callId, name: "t", assistantSeq: 2, sideEffect: "mutating" })),
});

test("a replay after a reconnect shows each seq once, in order", () => {
  const t = new Timeline();
  for (const s of [1, 2, 3]) assert.equal(t.applyTurn(turn(s, TurnRole.USER)).added, true);
  // The stream is resumed from lastSeq, but a server may resend: dropped.
  for (const s of [2, 3]) assert.equal(t.applyTurn(turn(s, TurnRole.USER)).added, false);
  t.applyTurn(turn(4, TurnRole.USER));
  assert.deepEqual(t.seqs(), [1, 2, 3, 4]);
  assert.deepEqual(t.gaps, []);
  t.applyTurn(turn(6, TurnRole.USER));
  assert.deepEqual(t.gaps, [[4, 6]]);
});

test("a call goes requested, running, done; a start after its result is ignored", () => {
  const t = new Timeline();
  t.applyTurn(turn(1, TurnRole.ASSISTANT, { toolCalls: [call("c1"), call("c2")] }));
  assert.equal(t.calls.get("c1")?.state, "requested");
  assert.equal(t.applyStart({ sessionId: "s", assistantSeq: 1, callId: "c1", toolName: "t" })?.state, "running");
  const out = t.applyTurn(turn(2, TurnRole.TOOL, { toolCallId: "c1", toolName: "t" }));
  assert.deepEqual(out.changed.map((c) => [c.id, c.state]), [["c1", "done"]]);
  assert.equal(t.applyStart({ sessionId: "s", assistantSeq: 1, callId: "c1", toolName: "t" }), null);
  t.applyTurn(turn(3, TurnRole.TOOL, { toolCallId: "c2", isError: true }));
  assert.equal(t.calls.get("c2")?.state, "error");
});

test("a recovery notice settles the calls it lists as failed, never a finished one", () => {
  const t = new Timeline();
  t.applyTurn(turn(1, TurnRole.ASSISTANT, { toolCalls: [call("a"), call("b"), call("c")] }));
  t.applyStart({ sessionId: "s", assistantSeq: 1, callId: "a", toolName: "t" });
  t.applyStart({ sessionId: "s", assistantSeq: 1, callId: "b", toolName: "t" });
  t.applyTurn(turn(2, TurnRole.TOOL, { toolCallId: "c" }));
  const out = t.applyTurn(turn(3, TurnRole.NOTICE, { recoveryPlan: plan(["a"], ["b", "c"]) }));
  assert.deepEqual(out.changed.map((c) => [c.id, c.state]).sort(), [["a", "failed"], ["b", "failed"]]);
  assert.equal(t.calls.get("c")?.state, "done");
});

test("streamed text appends by byte offset, restarts on a higher attempt, ends at its turn", () => {
  const t = new Timeline();
  t.applyTurn(turn(1, TurnRole.USER));
  const d = (offset: number, text: string, attempt = 1, turnSeq = 2) => ({ sessionId: "s", turnSeq, offset, text, attempt });
  assert.equal(t.applyDelta(d(0, "hé")), true);
  assert.equal(t.applyDelta(d(3, "llo")), true);
  assert.equal(t.streamingText(), "héllo");
  // A rejoin's snapshot repeats what is shown: no change.
  assert.equal(t.applyDelta(d(0, "héllo")), false);
  // A hole is not shown out of place.
  assert.equal(t.applyDelta(d(99, "x")), false);
  // A retry restarts the answer; older attempts are then ignored.
  assert.equal(t.applyDelta(d(0, "Hi", 2)), true);
  assert.equal(t.applyDelta(d(6, "zzz", 1)), false);
  assert.equal(t.streamingText(), "Hi");
  // The committed turn supersedes the stream; late deltas for it are ignored.
  t.applyTurn(turn(2, TurnRole.ASSISTANT, { content: "Hi there" }));
  assert.equal(t.streaming, null);
  assert.equal(t.applyDelta(d(2, " there", 2)), false);
});

test("a window read by page: the cursor starts at its head, history only settles calls", () => {
  const t = new Timeline();
  t.startAt(500);
  assert.equal(t.lastSeq, 500);
  // An older page: the call is settled by its result, nothing is added.
  assert.deepEqual(t.applyHistory(turn(10, TurnRole.ASSISTANT, { toolCalls: [call("old")] })).map((c) => c.state), ["requested"]);
  assert.deepEqual(t.applyHistory(turn(11, TurnRole.TOOL, { toolCallId: "old" })).map((c) => c.state), ["done"]);
  assert.equal(t.calls.get("old")?.state, "done");
  assert.deepEqual(t.seqs(), []);
  // The stream goes on from the head, with no gap recorded.
  assert.equal(t.applyTurn(turn(400, TurnRole.USER)).added, false);
  assert.equal(t.applyTurn(turn(501, TurnRole.USER)).added, true);
  assert.deepEqual(t.gaps, []);
});

test("a session read older than the turns shown does not bring back messages they consumed", () => {
  const q = (text: string, position: number) => ({ text, position });
  const turns = [
    turn(1, TurnRole.USER, { content: "start" }),
    turn(2, TurnRole.ASSISTANT, { content: "a" }),
    turn(3, TurnRole.USER, { content: "same" }),
  ];
  // Read at head 2: "same" was queued twice; the turn at 3 consumed one.
  assert.deepEqual(stillQueued([q("same", 1), q("same", 2), q("other", 3)], 2, turns), [q("same", 2), q("other", 3)]);
  // Read at head 3: the queue it names is current.
  assert.deepEqual(stillQueued([q("same", 1)], 3, turns), [q("same", 1)]);
  // An assistant turn with the text consumes nothing.
  assert.deepEqual(stillQueued([q("a", 1)], 1, turns), [q("a", 1)]);
});
