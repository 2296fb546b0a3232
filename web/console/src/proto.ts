// A small protobuf codec for exactly the messages of
// proto/inquest/v1/investigations.proto the console uses. Hand-written
// rather than generated: a dozen messages, no runtime dependency, and the
// unit tests (proto.test.ts) pin every field number against bytes prost
// produces. Unknown fields are skipped, so a newer server's additions do
// not break an older console.

// ---------- wire primitives ----------

export class Writer {
  private bytes: number[] = [];

  private varint(n: number): void {
    // Non-negative integers below 2^53 (ids, seqs, counts, enums).
    let v = Math.floor(n);
    while (v >= 0x80) {
      this.bytes.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.bytes.push(v);
  }

  private tag(field: number, wire: number): void {
    this.varint(field * 8 + wire);
  }

  uint(field: number, n: number): this {
    if (n !== 0) {
      this.tag(field, 0);
      this.varint(n);
    }
    return this;
  }

  string(field: number, s: string): this {
    if (s !== "") {
      const b = new TextEncoder().encode(s);
      this.tag(field, 2);
      this.varint(b.length);
      for (const x of b) this.bytes.push(x);
    }
    return this;
  }

  /** An embedded message (written even when empty: it is an element of a
   * repeated field, whose presence counts). */
  message(field: number, body: Uint8Array): this {
    this.tag(field, 2);
    this.varint(body.length);
    for (const x of body) this.bytes.push(x);
    return this;
  }

  /** A repeated enum, packed (as proto3 encodes it). */
  packed(field: number, values: number[]): this {
    if (values.length > 0) {
      const inner = new Writer();
      for (const v of values) inner.varint(v);
      const b = inner.finish();
      this.tag(field, 2);
      this.varint(b.length);
      for (const x of b) this.bytes.push(x);
    }
    return this;
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}

export type Field =
  | { wire: 0; value: number }
  | { wire: 1; value: Uint8Array }
  | { wire: 2; value: Uint8Array }
  | { wire: 5; value: Uint8Array };

export class DecodeError extends Error {}

/** Every field of one message, in order (repeated fields appear repeatedly). */
export function fields(buf: Uint8Array): Array<[number, Field]> {
  const out: Array<[number, Field]> = [];
  let pos = 0;
  const varint = (): number => {
    let result = 0n;
    for (let i = 0; i < 10; i++) {
      if (pos >= buf.length) throw new DecodeError("truncated varint");
      const b = buf[pos++];
      result |= BigInt(b & 0x7f) << BigInt(7 * i);
      if ((b & 0x80) === 0) {
        // A negative int64 is ten bytes of two's complement.
        return Number(BigInt.asIntN(64, result));
      }
    }
    throw new DecodeError("varint longer than 10 bytes");
  };
  const take = (n: number): Uint8Array => {
    if (n < 0 || pos + n > buf.length) throw new DecodeError("truncated field");
    const v = buf.subarray(pos, pos + n);
    pos += n;
    return v;
  };
  while (pos < buf.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (field === 0) throw new DecodeError("field number 0");
    switch (wire) {
      case 0:
        out.push([field, { wire: 0, value: varint() }]);
        break;
      case 1:
        out.push([field, { wire: 1, value: take(8) }]);
        break;
      case 2:
        out.push([field, { wire: 2, value: take(varint()) }]);
        break;
      case 5:
        out.push([field, { wire: 5, value: take(4) }]);
        break;
      default:
        throw new DecodeError(`unsupported wire type ${wire}`);
    }
  }
  return out;
}

const utf8 = new TextDecoder("utf-8", { fatal: false });

function str(f: Field): string {
  return f.wire === 2 ? utf8.decode(f.value) : "";
}
function num(f: Field): number {
  return f.wire === 0 ? f.value : 0;
}
function bool(f: Field): boolean {
  return f.wire === 0 && f.value !== 0;
}
function double(f: Field): number {
  if (f.wire !== 1) return 0;
  return new DataView(f.value.buffer, f.value.byteOffset, 8).getFloat64(0, true);
}
function sub(f: Field): Uint8Array {
  return f.wire === 2 ? f.value : new Uint8Array();
}

/** google.protobuf.Timestamp as milliseconds since the epoch (0: unset). */
function timestamp(f: Field): number {
  let seconds = 0;
  let nanos = 0;
  for (const [n, v] of fields(sub(f))) {
    if (n === 1) seconds = num(v);
    if (n === 2) nanos = num(v);
  }
  return seconds * 1000 + Math.floor(nanos / 1e6);
}

// ---------- enums ----------

export const SessionStatus = {
  UNSPECIFIED: 0,
  PENDING: 1,
  RUNNING: 2,
  IDLE: 3,
  COMPLETED: 4,
  FAILED: 5,
  CANCELLED: 6,
  AWAITING_CONFIRMATION: 7,
  AWAITING_APPROVAL: 8,
} as const;

/** Every status a session can have, in enum order (UNSPECIFIED left out). */
export const ALL_STATUSES: number[] = Object.values(SessionStatus).filter((v) => v !== 0);

const STATUS_NAMES = [
  "unspecified",
  "pending",
  "running",
  "idle",
  "completed",
  "failed",
  "cancelled",
  "awaiting_confirmation",
  "awaiting_approval",
];

/** The status as the server's config and CLI spell it (`awaiting_confirmation`). */
export function statusName(status: number): string {
  return STATUS_NAMES[status] ?? `status_${status}`;
}

/** The status named as `statusName` spells it; 0 when unknown. */
export function statusFromName(name: string): number {
  const i = STATUS_NAMES.indexOf(name);
  return i > 0 ? i : 0;
}

export const TurnRole = {
  UNSPECIFIED: 0,
  USER: 1,
  ASSISTANT: 2,
  TOOL: 3,
  NOTICE: 4,
  COMPACTION: 5,
} as const;

const ROLE_NAMES = ["unspecified", "user", "assistant", "tool", "notice", "compaction"];

export function roleName(role: number): string {
  return ROLE_NAMES[role] ?? `role_${role}`;
}

export const ApprovalState = {
  UNSPECIFIED: 0,
  PENDING: 1,
  APPROVED: 2,
  DENIED: 3,
  EXPIRED: 4,
  SUPERSEDED: 5,
  CANCELLED: 6,
} as const;

const APPROVAL_STATE_NAMES = ["unspecified", "pending", "approved", "denied", "expired", "superseded", "cancelled"];

/** An approval's state in lower case (`pending`, `approved`, ...). */
export function approvalStateName(state: number): string {
  return APPROVAL_STATE_NAMES[state] ?? `state_${state}`;
}

export const ToolCallVerdict = {
  UNSPECIFIED: 0,
  APPROVE: 1,
  DENY: 2,
} as const;

// ---------- messages ----------

export interface Incident {
  id: string;
  title: string;
  description: string;
  createdAt: number;
  /** The alert group behind it (GetIncident only; null: none). */
  alertOrigin: AlertOrigin | null;
  /** Where it came from: an IncidentSource. */
  source: number;
}

/** Where an incident came from (ListIncidents can filter by it). */
export const IncidentSource = {
  UNSPECIFIED: 0,
  MANUAL: 1,
  ALERT: 2,
  SCHEDULE: 3,
} as const;

const SOURCE_NAMES = ["", "manual", "alert", "schedule"];

export function sourceName(source: number): string {
  return SOURCE_NAMES[source] ?? `source_${source}`;
}

/** The IncidentSource of a name ("alert"); 0 for none. */
export function sourceFromName(name: string): number {
  const i = SOURCE_NAMES.indexOf(name);
  return i > 0 ? i : 0;
}

/** One alert that fired or resolved, as a notification brought it. */
export interface AlertEvent {
  fingerprint: string;
  firing: boolean;
  startsAt: number;
  endsAt: number;
  /** The alert's labels, in the order sent. */
  labels: Array<[string, string]>;
  receivedAt: number;
}

export interface AlertOrigin {
  source: string;
  receiver: string;
  externalUrl: string;
  groupKey: string;
  eventsTotal: number;
  /** The newest events (at most 100), newest first. */
  events: AlertEvent[];
  /** When every alert of the group had resolved (0: one still fires). */
  resolvedAt: number;
  sessionSkipped: string;
}

function decodeAlertEvent(buf: Uint8Array): AlertEvent {
  const m: AlertEvent = { fingerprint: "", firing: false, startsAt: 0, endsAt: 0, labels: [], receivedAt: 0 };
  for (const [n, f] of fields(buf)) {
    if (n === 1) m.fingerprint = str(f);
    else if (n === 2) m.firing = bool(f);
    else if (n === 3) m.startsAt = timestamp(f);
    else if (n === 4) m.endsAt = timestamp(f);
    else if (n === 5) {
      // A map entry: key 1, value 2.
      let key = "";
      let value = "";
      for (const [k, g] of fields(sub(f))) {
        if (k === 1) key = str(g);
        else if (k === 2) value = str(g);
      }
      m.labels.push([key, value]);
    } else if (n === 6) m.receivedAt = timestamp(f);
  }
  return m;
}

export function decodeAlertOrigin(buf: Uint8Array): AlertOrigin {
  const m: AlertOrigin = {
    source: "",
    receiver: "",
    externalUrl: "",
    groupKey: "",
    eventsTotal: 0,
    events: [],
    resolvedAt: 0,
    sessionSkipped: "",
  };
  for (const [n, f] of fields(buf)) {
    if (n === 1) m.source = str(f);
    else if (n === 2) m.receiver = str(f);
    else if (n === 3) m.externalUrl = str(f);
    else if (n === 4) m.groupKey = str(f);
    else if (n === 5) m.eventsTotal = num(f);
    else if (n === 6) m.events.push(decodeAlertEvent(sub(f)));
    else if (n === 7) m.resolvedAt = timestamp(f);
    else if (n === 8) m.sessionSkipped = str(f);
  }
  return m;
}

export function decodeIncident(buf: Uint8Array): Incident {
  const m: Incident = { id: "", title: "", description: "", createdAt: 0, alertOrigin: null, source: 0 };
  for (const [n, f] of fields(buf)) {
    if (n === 1) m.id = str(f);
    else if (n === 2) m.title = str(f);
    else if (n === 3) m.description = str(f);
    else if (n === 4) m.createdAt = timestamp(f);
    else if (n === 5) m.alertOrigin = decodeAlertOrigin(sub(f));
    else if (n === 6) m.source = num(f);
  }
  return m;
}

export interface InterruptedCall {
  callId: string;
  name: string;
  assistantSeq: number;
  sideEffect: string;
}

export interface RecoveryPlan {
  kind: string;
  repairedCallIds: string[];
  canContinue: boolean;
  canAutoContinue: boolean;
  requiresConfirmation: boolean;
  noticeText: string;
  interruptedCalls: InterruptedCall[];
}

export function decodeRecoveryPlan(buf: Uint8Array): RecoveryPlan {
  const m: RecoveryPlan = {
    kind: "",
    repairedCallIds: [],
    canContinue: false,
    canAutoContinue: false,
    requiresConfirmation: false,
    noticeText: "",
    interruptedCalls: [],
  };
  for (const [n, f] of fields(buf)) {
    if (n === 1) m.kind = str(f);
    else if (n === 3) m.repairedCallIds.push(str(f));
    else if (n === 4) m.canContinue = bool(f);
    else if (n === 5) m.canAutoContinue = bool(f);
    else if (n === 6) m.requiresConfirmation = bool(f);
    else if (n === 7) m.noticeText = str(f);
    else if (n === 8) {
      const c: InterruptedCall = { callId: "", name: "", assistantSeq: 0, sideEffect: "" };
      for (const [k, g] of fields(sub(f))) {
        if (k === 1) c.callId = str(g);
        else if (k === 2) c.name = str(g);
        else if (k === 3) c.assistantSeq = num(g);
        else if (k === 4) c.sideEffect = str(g);
      }
      m.interruptedCalls.push(c);
    }
  }
  return m;
}

/** A tool call held for a human's decision before it first runs. */
export interface Approval {
  callId: string;
  assistantSeq: number;
  tool: string;
  server: string;
  argumentsJson: string;
  sideEffect: string;
  rule: string;
  state: number;
  requestedAt: number;
  expiresAt: number;
  decidedBy: string;
  comment: string;
  decidedAt: number;
}

export function decodeApproval(buf: Uint8Array): Approval {
  const m: Approval = {
    callId: "",
    assistantSeq: 0,
    tool: "",
    server: "",
    argumentsJson: "",
    sideEffect: "",
    rule: "",
    state: 0,
    requestedAt: 0,
    expiresAt: 0,
    decidedBy: "",
    comment: "",
    decidedAt: 0,
  };
  for (const [n, f] of fields(buf)) {
    if (n === 1) m.callId = str(f);
    else if (n === 2) m.assistantSeq = num(f);
    else if (n === 3) m.tool = str(f);
    else if (n === 4) m.server = str(f);
    else if (n === 5) m.argumentsJson = str(f);
    else if (n === 6) m.sideEffect = str(f);
    else if (n === 7) m.rule = str(f);
    else if (n === 8) m.state = num(f);
    else if (n === 9) m.requestedAt = timestamp(f);
    else if (n === 10) m.expiresAt = timestamp(f);
    else if (n === 11) m.decidedBy = str(f);
    else if (n === 12) m.comment = str(f);
    else if (n === 13) m.decidedAt = timestamp(f);
  }
  return m;
}

export interface Session {
  id: string;
  incidentId: string;
  status: number;
  exitReason: string;
  headSeq: number;
  turnCount: number;
  toolCalls: number;
  inputTokens: number;
  outputTokens: number;
  createdAt: number;
  updatedAt: number;
  lastRecoveryPlan: RecoveryPlan | null;
  costUsd: number;
  costComplete: boolean;
  /** The latest hold's approval requests, in call order (empty: none). */
  approvals: Approval[];
  /** A fork's source session and the seq it was forked at ("" and 0: no fork). */
  forkedFromSessionId: string;
  forkedAtSeq: number;
  /** Messages queued behind the running burst, oldest first. */
  queuedMessages: QueuedMessage[];
}

/** A message sent while a burst ran, waiting to become a user turn. */
export interface QueuedMessage {
  text: string;
  position: number;
  interrupt: boolean;
  queuedAt: number;
}

export function decodeSession(buf: Uint8Array): Session {
  const m: Session = {
    id: "",
    incidentId: "",
    status: 0,
    exitReason: "",
    headSeq: 0,
    turnCount: 0,
    toolCalls: 0,
    inputTokens: 0,
    outputTokens: 0,
    createdAt: 0,
    updatedAt: 0,
    lastRecoveryPlan: null,
    costUsd: 0,
    costComplete: false,
    approvals: [],
    forkedFromSessionId: "",
    forkedAtSeq: 0,
    queuedMessages: [],
  };
  for (const [n, f] of fields(buf)) {
    if (n === 1) m.id = str(f);
    else if (n === 2) m.incidentId = str(f);
    else if (n === 3) m.status = num(f);
    else if (n === 4) m.exitReason = str(f);
    else if (n === 5) m.headSeq = num(f);
    else if (n === 6) m.turnCount = num(f);
    else if (n === 7) m.toolCalls = num(f);
    else if (n === 8) m.inputTokens = num(f);
    else if (n === 9) m.outputTokens = num(f);
    else if (n === 10) m.createdAt = timestamp(f);
    else if (n === 11) m.updatedAt = timestamp(f);
    else if (n === 12) m.lastRecoveryPlan = decodeRecoveryPlan(sub(f));
    else if (n === 19) m.costUsd = double(f);
    else if (n === 20) m.costComplete = bool(f);
    else if (n === 22) m.approvals.push(decodeApproval(sub(f)));
    else if (n === 23) m.forkedFromSessionId = str(f);
    else if (n === 24) m.forkedAtSeq = num(f);
    else if (n === 25) {
      const q: QueuedMessage = { text: "", position: 0, interrupt: false, queuedAt: 0 };
      for (const [k, g] of fields(sub(f))) {
        if (k === 1) q.text = str(g);
        else if (k === 2) q.position = num(g);
        else if (k === 3) q.interrupt = bool(g);
        else if (k === 4) q.queuedAt = timestamp(g);
      }
      m.queuedMessages.push(q);
    }
  }
  return m;
}

export interface ToolCall {
  id: string;
  name: string;
  argumentsJson: string;
}

export interface SessionTurn {
  sessionId: string;
  seq: number;
  role: number;
  content: string;
  toolCalls: ToolCall[];
  toolCallId: string;
  toolName: string;
  isError: boolean;
  createdAt: number;
  inputTokens: number;
  outputTokens: number;
  recoveryPlan: RecoveryPlan | null;
  costUsd: number | null;
  /** A COMPACTION turn's record: from which seq the model still sees the
   * turns verbatim, and the context estimates before and after. */
  compaction: Compaction | null;
}

export interface Compaction {
  firstRetainedSeq: number;
  tokensBefore: number;
  tokensAfter: number;
}

export function decodeTurn(buf: Uint8Array): SessionTurn {
  const m: SessionTurn = {
    sessionId: "",
    seq: 0,
    role: 0,
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
  };
  for (const [n, f] of fields(buf)) {
    if (n === 1) m.sessionId = str(f);
    else if (n === 2) m.seq = num(f);
    else if (n === 3) m.role = num(f);
    else if (n === 4) m.content = str(f);
    else if (n === 5) {
      const c: ToolCall = { id: "", name: "", argumentsJson: "" };
      for (const [k, g] of fields(sub(f))) {
        if (k === 1) c.id = str(g);
        else if (k === 2) c.name = str(g);
        else if (k === 3) c.argumentsJson = str(g);
      }
      m.toolCalls.push(c);
    } else if (n === 6) m.toolCallId = str(f);
    else if (n === 7) m.toolName = str(f);
    else if (n === 8) m.isError = bool(f);
    else if (n === 9) m.createdAt = timestamp(f);
    else if (n === 10) m.inputTokens = num(f);
    else if (n === 11) m.outputTokens = num(f);
    else if (n === 12) m.recoveryPlan = decodeRecoveryPlan(sub(f));
    else if (n === 15) m.costUsd = double(f);
    else if (n === 21) {
      const c: Compaction = { firstRetainedSeq: 0, tokensBefore: 0, tokensAfter: 0 };
      for (const [k, g] of fields(sub(f))) {
        if (k === 1) c.firstRetainedSeq = num(g);
        else if (k === 2) c.tokensBefore = num(g);
        else if (k === 3) c.tokensAfter = num(g);
      }
      m.compaction = c;
    }
  }
  return m;
}

export interface ToolCallStart {
  sessionId: string;
  assistantSeq: number;
  callId: string;
  toolName: string;
}

export interface TextDelta {
  sessionId: string;
  turnSeq: number;
  offset: number;
  text: string;
  attempt: number;
}

export type WatchEvent =
  | { kind: "turn"; turn: SessionTurn }
  | { kind: "tool_call_start"; start: ToolCallStart }
  | { kind: "lagged"; lastDeliveredSeq: number; headSeq: number }
  | { kind: "heartbeat"; headSeq: number }
  | { kind: "text_delta"; delta: TextDelta }
  | { kind: "approval_requested"; approval: Approval }
  | { kind: "message_queued"; queued: MessageQueued }
  | { kind: "unknown" };

/** A message queued behind the running burst (live only: once its burst
 * opens it is a user turn). */
export interface MessageQueued {
  sessionId: string;
  text: string;
  /** Its place in the queue when it was stored (1 = next). */
  position: number;
}

export function decodeWatchEvent(buf: Uint8Array): WatchEvent {
  let event: WatchEvent = { kind: "unknown" };
  for (const [n, f] of fields(buf)) {
    const body = sub(f);
    if (n === 1) event = { kind: "turn", turn: decodeTurn(body) };
    else if (n === 2) {
      const s: ToolCallStart = { sessionId: "", assistantSeq: 0, callId: "", toolName: "" };
      for (const [k, g] of fields(body)) {
        if (k === 1) s.sessionId = str(g);
        else if (k === 2) s.assistantSeq = num(g);
        else if (k === 3) s.callId = str(g);
        else if (k === 4) s.toolName = str(g);
      }
      event = { kind: "tool_call_start", start: s };
    } else if (n === 3) {
      let last = 0;
      let head = 0;
      for (const [k, g] of fields(body)) {
        if (k === 1) last = num(g);
        else if (k === 2) head = num(g);
      }
      event = { kind: "lagged", lastDeliveredSeq: last, headSeq: head };
    } else if (n === 4) {
      let head = 0;
      for (const [k, g] of fields(body)) if (k === 1) head = num(g);
      event = { kind: "heartbeat", headSeq: head };
    } else if (n === 5) {
      const d: TextDelta = { sessionId: "", turnSeq: 0, offset: 0, text: "", attempt: 0 };
      for (const [k, g] of fields(body)) {
        if (k === 1) d.sessionId = str(g);
        else if (k === 2) d.turnSeq = num(g);
        else if (k === 3) d.offset = num(g);
        else if (k === 4) d.text = str(g);
        else if (k === 5) d.attempt = num(g);
      }
      event = { kind: "text_delta", delta: d };
    } else if (n === 6) {
      event = { kind: "approval_requested", approval: decodeApproval(body) };
    } else if (n === 7) {
      const q: MessageQueued = { sessionId: "", text: "", position: 0 };
      for (const [k, g] of fields(body)) {
        if (k === 1) q.sessionId = str(g);
        else if (k === 2) q.text = str(g);
        else if (k === 3) q.position = num(g);
      }
      event = { kind: "message_queued", queued: q };
    }
  }
  return event;
}

export interface Report {
  sessionId: string;
  burst: number;
  exitReason: string;
  summary: string;
  toolCalls: number;
  inputTokens: number;
  outputTokens: number;
  activeTimeMs: number;
  costUsd: number;
  costComplete: boolean;
  costUnknownCalls: number;
  /** This burst's figures: its model calls (stored turns plus the
   * report's writing, which `author*` shows apart) and tool calls. */
  burstModelCalls: number;
  burstInputTokens: number;
  burstOutputTokens: number;
  burstToolCalls: number;
  authorInputTokens: number;
  authorOutputTokens: number;
}

export function decodeReport(buf: Uint8Array): Report {
  const m: Report = {
    sessionId: "",
    burst: 0,
    exitReason: "",
    summary: "",
    toolCalls: 0,
    inputTokens: 0,
    outputTokens: 0,
    activeTimeMs: 0,
    costUsd: 0,
    costComplete: false,
    costUnknownCalls: 0,
    burstModelCalls: 0,
    burstInputTokens: 0,
    burstOutputTokens: 0,
    burstToolCalls: 0,
    authorInputTokens: 0,
    authorOutputTokens: 0,
  };
  for (const [n, f] of fields(buf)) {
    if (n === 1) m.sessionId = str(f);
    else if (n === 2) m.burst = num(f);
    else if (n === 3) m.exitReason = str(f);
    else if (n === 5) m.summary = str(f);
    else if (n === 6) m.toolCalls = num(f);
    else if (n === 7) m.inputTokens = num(f);
    else if (n === 8) m.outputTokens = num(f);
    else if (n === 12) m.activeTimeMs = num(f);
    else if (n === 14) m.costUsd = double(f);
    else if (n === 15) m.costComplete = bool(f);
    else if (n === 21) m.costUnknownCalls = num(f);
    else if (n === 16) m.burstModelCalls = num(f);
    else if (n === 17) m.burstInputTokens = num(f);
    else if (n === 18) m.burstOutputTokens = num(f);
    else if (n === 22) m.burstToolCalls = num(f);
    else if (n === 23) m.authorInputTokens = num(f);
    else if (n === 24) m.authorOutputTokens = num(f);
  }
  return m;
}

/** A list response: its repeated field 1 and its next page token (field 2). */
export function decodeList<T>(buf: Uint8Array, item: (b: Uint8Array) => T): { items: T[]; next: string } {
  const items: T[] = [];
  let next = "";
  for (const [n, f] of fields(buf)) {
    if (n === 1) items.push(item(sub(f)));
    else if (n === 2) next = str(f);
  }
  return { items, next };
}

export interface TurnPage {
  turns: SessionTurn[];
  nextAfterSeq: number;
  headSeq: number;
  /** Paging backwards: the before_seq of the next older page, 0 at seq 1. */
  nextBeforeSeq: number;
}

export function decodeListTurns(buf: Uint8Array): TurnPage {
  const out: TurnPage = { turns: [], nextAfterSeq: 0, headSeq: 0, nextBeforeSeq: 0 };
  for (const [n, f] of fields(buf)) {
    if (n === 1) out.turns.push(decodeTurn(sub(f)));
    else if (n === 2) out.nextAfterSeq = num(f);
    else if (n === 3) out.headSeq = num(f);
    else if (n === 4) out.nextBeforeSeq = num(f);
  }
  return out;
}

/** SendMessage's answer: the stored turn's seq, or (0 and) its place in
 * the queue behind the running burst. */
export interface SendMessageResult {
  seq: number;
  queued: boolean;
  queuePosition: number;
}

export function decodeSendMessage(buf: Uint8Array): SendMessageResult {
  const m: SendMessageResult = { seq: 0, queued: false, queuePosition: 0 };
  for (const [n, f] of fields(buf)) {
    if (n === 1) m.seq = num(f);
    else if (n === 2) m.queued = bool(f);
    else if (n === 3) m.queuePosition = num(f);
  }
  return m;
}

/** SendMessage's `if_running`: what a message sent during a burst does. */
export const IfRunning = {
  UNSPECIFIED: 0,
  REJECT: 1,
  ENQUEUE: 2,
  INTERRUPT: 3,
} as const;

// ---------- requests ----------

export interface ToolCallDecision {
  callId: string;
  /** ToolCallVerdict.APPROVE or DENY. */
  verdict: number;
  comment: string;
}

/** A before_seq past any head: ListTurns backwards from the newest turn. */
export const LATEST = Number.MAX_SAFE_INTEGER;

export const encode = {
  createIncident: (title: string, description: string) =>
    new Writer().string(1, title).string(2, description).finish(),
  listIncidents: (pageSize: number, pageToken: string, source = 0) =>
    new Writer().uint(1, pageSize).string(2, pageToken).uint(3, source).finish(),
  startSession: (incidentId: string, message: string, idempotencyKey: string) =>
    new Writer().string(1, incidentId).string(2, message).string(3, idempotencyKey).finish(),
  sessionId: (sessionId: string) => new Writer().string(1, sessionId).finish(),
  incidentId: (incidentId: string) => new Writer().string(1, incidentId).finish(),
  listSessions: (incidentId: string, pageSize: number, pageToken: string, statuses: number[] = [], queuedOnly = false) =>
    new Writer()
      .string(1, incidentId)
      .uint(2, pageSize)
      .string(3, pageToken)
      .packed(4, statuses)
      .uint(5, queuedOnly ? 1 : 0)
      .finish(),
  listTurns: (sessionId: string, afterSeq: number, limit: number) =>
    new Writer().string(1, sessionId).uint(2, afterSeq).uint(3, limit).finish(),
  /** ListTurns backwards: the page just before `beforeSeq` (LATEST: the newest). */
  listTurnsBefore: (sessionId: string, beforeSeq: number, limit: number) =>
    new Writer().string(1, sessionId).uint(3, limit).uint(4, beforeSeq).finish(),
  sendMessage: (sessionId: string, message: string, idempotencyKey: string, ifRunning = 0) =>
    new Writer().string(1, sessionId).string(2, message).string(3, idempotencyKey).uint(4, ifRunning).finish(),
  /** ForkSession; an empty `message` leaves it unset (the fork stays idle). */
  forkSession: (sessionId: string, atSeq: number, message: string, idempotencyKey: string) =>
    new Writer().string(1, sessionId).uint(2, atSeq).string(3, message).string(4, idempotencyKey).finish(),
  watchSession: (sessionId: string, afterSeq: number) =>
    new Writer().string(1, sessionId).uint(2, afterSeq).finish(),
  getReport: (sessionId: string, burst: number) =>
    new Writer().string(1, sessionId).uint(2, burst).finish(),
  decideToolCalls: (sessionId: string, decisions: ToolCallDecision[], idempotencyKey: string) => {
    const w = new Writer().string(1, sessionId);
    for (const d of decisions) {
      w.message(2, new Writer().string(1, d.callId).uint(2, d.verdict).string(3, d.comment).finish());
    }
    return w.string(3, idempotencyKey).finish();
  },
};
