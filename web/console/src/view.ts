// The session view's state, without the DOM: which turns were shown (by
// seq, each once, in order), the state of each tool call, and the text
// being streamed. main.ts renders it; view.test.ts tests it.

import { type SessionTurn, type TextDelta, type ToolCallStart, TurnRole } from "./proto";

/**
 * requested: in an assistant turn, not started yet; running: a
 * ToolCallStart was seen; done / error: its result turn arrived; failed:
 * a recovery notice repaired it or listed it as interrupted (it will get
 * no real result).
 */
export type CallState = "requested" | "running" | "done" | "error" | "failed";

export interface CallView {
  id: string;
  name: string;
  assistantSeq: number;
  state: CallState;
}

export interface Streaming {
  turnSeq: number;
  attempt: number;
  /** The text so far, as UTF-8 bytes (deltas are placed by byte offset). */
  bytes: Uint8Array;
}

export interface TurnOutcome {
  /** False for a seq already shown (a replay after a reconnect). */
  added: boolean;
  /** Calls whose state changed. */
  changed: CallView[];
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class Timeline {
  /** The last seq shown: the cursor a reconnect resumes after. */
  lastSeq = 0;
  readonly turns: SessionTurn[] = [];
  readonly calls = new Map<string, CallView>();
  streaming: Streaming | null = null;
  /** Seqs that arrived after a gap (never expected: the server fills gaps). */
  readonly gaps: Array<[number, number]> = [];

  /**
   * Starts the stream's cursor at `seq`: the turns up to it were read by
   * page (ListTurns), not by the stream, and are not kept here.
   */
  startAt(seq: number): void {
    if (seq > this.lastSeq) this.lastSeq = seq;
  }

  applyTurn(turn: SessionTurn): TurnOutcome {
    if (turn.seq <= this.lastSeq) return { added: false, changed: [] };
    if (turn.seq !== this.lastSeq + 1) this.gaps.push([this.lastSeq, turn.seq]);
    this.lastSeq = turn.seq;
    this.turns.push(turn);
    return { added: true, changed: this.track(turn) };
  }

  /**
   * A turn read by page, older than the cursor (a window moved back or
   * forth over a long session): only what it says of its tool calls.
   */
  applyHistory(turn: SessionTurn): CallView[] {
    return this.track(turn);
  }

  private track(turn: SessionTurn): CallView[] {
    const changed: CallView[] = [];
    const set = (id: string, state: CallState, name = "", assistantSeq = 0) => {
      const known = this.calls.get(id);
      const view = known ?? { id, name, assistantSeq, state };
      if (!known) this.calls.set(id, view);
      if (known && known.state === state) return;
      view.state = state;
      changed.push(view);
    };
    if (turn.role === TurnRole.ASSISTANT) {
      for (const c of turn.toolCalls) {
        const known = this.calls.get(c.id);
        // A start that raced ahead of its turn keeps its state.
        if (!known) set(c.id, "requested", c.name, turn.seq);
        else {
          known.name = c.name;
          known.assistantSeq = turn.seq;
        }
      }
    } else if (turn.role === TurnRole.TOOL && turn.toolCallId) {
      set(turn.toolCallId, turn.isError ? "error" : "done", turn.toolName);
    } else if (turn.role === TurnRole.NOTICE && turn.recoveryPlan) {
      const ids = [
        ...turn.recoveryPlan.repairedCallIds,
        ...turn.recoveryPlan.interruptedCalls.map((c) => c.callId),
      ];
      for (const id of ids) {
        const known = this.calls.get(id);
        if (known && (known.state === "done" || known.state === "error")) continue;
        set(id, "failed");
      }
    }
    // The committed turn supersedes the text streamed for it.
    if (this.streaming && this.streaming.turnSeq <= turn.seq) this.streaming = null;
    return changed;
  }

  /** A ToolCallStart; the call's view when it changed. */
  applyStart(start: ToolCallStart): CallView | null {
    const known = this.calls.get(start.callId);
    if (known && known.state !== "requested") return null;
    const view = known ?? {
      id: start.callId,
      name: start.toolName,
      assistantSeq: start.assistantSeq,
      state: "running" as CallState,
    };
    view.state = "running";
    this.calls.set(start.callId, view);
    return view;
  }

  /** A TextDelta; true when the streamed text changed. */
  applyDelta(delta: TextDelta): boolean {
    // Already committed: the turn is what counts.
    if (delta.turnSeq <= this.lastSeq) return false;
    const s = this.streaming;
    const attempt = Math.max(delta.attempt, 1);
    if (!s || delta.turnSeq > s.turnSeq || attempt > s.attempt) {
      // A new turn, or a retry that restarts the answer: start over.
      this.streaming = { turnSeq: delta.turnSeq, attempt, bytes: new Uint8Array(0) };
    } else if (delta.turnSeq < s.turnSeq || attempt < s.attempt) {
      return false;
    }
    const cur = this.streaming as Streaming;
    const piece = encoder.encode(delta.text);
    if (delta.offset > cur.bytes.length) {
      // A hole (a delta lost): wait for the next snapshot at offset 0 or
      // the committed turn rather than show text out of place.
      return false;
    }
    const end = delta.offset + piece.length;
    if (end <= cur.bytes.length) {
      // Wholly a replay of what is shown (a rejoin's snapshot): nothing new,
      // unless it disagrees, in which case the newer bytes win.
      const same = cur.bytes.subarray(delta.offset, end).every((b, i) => b === piece[i]);
      if (same) return false;
    }
    const next = new Uint8Array(Math.max(end, delta.offset + piece.length));
    next.set(cur.bytes.subarray(0, delta.offset), 0);
    next.set(piece, delta.offset);
    cur.bytes = next;
    return true;
  }

  streamingText(): string {
    return this.streaming ? decoder.decode(this.streaming.bytes) : "";
  }

  seqs(): number[] {
    return this.turns.map((t) => t.seq);
  }
}

/**
 * The messages a session read names as queued that are still queued now.
 * The read may predate user turns the watch has delivered since (`turns`
 * past its `headSeq`): each such turn consumed the first queued message
 * with its text, in queue order.
 */
export function stillQueued<Q extends { text: string }>(
  queued: readonly Q[],
  headSeq: number,
  turns: readonly SessionTurn[],
): Q[] {
  const since = turns.filter((t) => t.seq > headSeq && t.role === TurnRole.USER).map((t) => t.content);
  return queued.filter((q) => {
    const i = since.indexOf(q.text);
    if (i < 0) return true;
    since.splice(i, 1);
    return false;
  });
}
