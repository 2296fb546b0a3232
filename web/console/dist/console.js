"use strict";
(() => {
  var __defProp = Object.defineProperty;
  var __typeError = (msg) => {
    throw TypeError(msg);
  };
  var __defNormalProp = (obj, key, value) => key in obj ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
  var __publicField = (obj, key, value) => __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);
  var __accessCheck = (obj, member, msg) => member.has(obj) || __typeError("Cannot " + msg);
  var __privateAdd = (obj, member, value) => member.has(obj) ? __typeError("Cannot add the same private member more than once") : member instanceof WeakSet ? member.add(obj) : member.set(obj, value);
  var __privateMethod = (obj, member, method) => (__accessCheck(obj, member, "access private method"), method);

  // src/grpcweb.ts
  var SERVICE = "inquest.v1.Investigations";
  var Code = {
    OK: 0,
    CANCELLED: 1,
    UNKNOWN: 2,
    INVALID_ARGUMENT: 3,
    NOT_FOUND: 5,
    PERMISSION_DENIED: 7,
    RESOURCE_EXHAUSTED: 8,
    FAILED_PRECONDITION: 9,
    ABORTED: 10,
    OUT_OF_RANGE: 11,
    UNAVAILABLE: 14,
    UNAUTHENTICATED: 16
  };
  var GrpcError = class extends Error {
    constructor(code, message) {
      super(message);
      __publicField(this, "code", code);
    }
  };
  var FrameReader = class {
    constructor() {
      __publicField(this, "buf", new Uint8Array(0));
      __publicField(this, "trailers", null);
    }
    /** Feeds bytes; returns the data messages completed by them. */
    push(chunk) {
      const joined = new Uint8Array(this.buf.length + chunk.length);
      joined.set(this.buf, 0);
      joined.set(chunk, this.buf.length);
      this.buf = joined;
      const out = [];
      while (this.buf.length >= 5) {
        const flag = this.buf[0];
        const len = new DataView(this.buf.buffer, this.buf.byteOffset + 1, 4).getUint32(0, false);
        if (this.buf.length < 5 + len) break;
        const body = this.buf.slice(5, 5 + len);
        this.buf = this.buf.slice(5 + len);
        if (flag & 128) {
          this.trailers = parseTrailers(new TextDecoder().decode(body));
        } else {
          out.push(body);
        }
      }
      return out;
    }
    /** Bytes of a frame not yet complete. */
    pending() {
      return this.buf.length;
    }
  };
  function parseTrailers(text2) {
    const m = /* @__PURE__ */ new Map();
    for (const line of text2.split("\r\n")) {
      const i = line.indexOf(":");
      if (i > 0) m.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
    }
    return m;
  }
  function statusOf(get) {
    const code = get("grpc-status");
    if (code === null || code === void 0) return void 0;
    const n = Number(code);
    if (n === Code.OK) return null;
    let message = get("grpc-message") ?? "";
    try {
      message = decodeURIComponent(message);
    } catch {
    }
    return new GrpcError(Number.isFinite(n) ? n : Code.UNKNOWN, message);
  }
  function headers(token2) {
    const h2 = {
      "content-type": "application/grpc-web+proto",
      "x-grpc-web": "1",
      accept: "application/grpc-web+proto"
    };
    if (token2) h2["authorization"] = `Bearer ${token2}`;
    return h2;
  }
  function frame(message) {
    const out = new Uint8Array(5 + message.length);
    new DataView(out.buffer).setUint32(1, message.length, false);
    out.set(message, 5);
    return out;
  }
  async function open(method, request, opts) {
    let response;
    try {
      response = await fetch(`/${SERVICE}/${method}`, {
        method: "POST",
        headers: headers(opts.token),
        body: frame(request),
        signal: opts.signal,
        cache: "no-store"
      });
    } catch (e) {
      if (opts.signal?.aborted) throw new GrpcError(Code.CANCELLED, "cancelled");
      throw new GrpcError(Code.UNAVAILABLE, `cannot reach the server: ${String(e)}`);
    }
    const early = statusOf((k) => response.headers.get(k));
    if (early) throw early;
    if (!response.ok) throw new GrpcError(Code.UNAVAILABLE, `HTTP ${response.status}`);
    return response;
  }
  async function unary(method, request, opts) {
    const response = await open(method, request, opts);
    let body;
    try {
      body = new Uint8Array(await response.arrayBuffer());
    } catch (e) {
      throw new GrpcError(Code.UNAVAILABLE, `the answer was cut: ${String(e)}`);
    }
    const reader = new FrameReader();
    const messages = reader.push(body);
    const status = statusOf((k) => reader.trailers?.get(k));
    if (status) throw status;
    if (status === void 0) throw new GrpcError(Code.UNAVAILABLE, "the answer ended without a status");
    const first = messages[0];
    if (!first) throw new GrpcError(Code.UNKNOWN, "no response message");
    return first;
  }
  async function serverStream(method, request, opts, onMessage) {
    const response = await open(method, request, opts);
    if (!response.body) throw new GrpcError(Code.UNAVAILABLE, "no response body");
    const body = response.body.getReader();
    const reader = new FrameReader();
    for (; ; ) {
      let chunk;
      try {
        chunk = await body.read();
      } catch (e) {
        if (opts.signal?.aborted) throw new GrpcError(Code.CANCELLED, "cancelled");
        throw new GrpcError(Code.UNAVAILABLE, `the stream was cut: ${String(e)}`);
      }
      if (chunk.done) break;
      for (const m of reader.push(chunk.value)) onMessage(m);
    }
    const status = statusOf((k) => reader.trailers?.get(k));
    if (status) throw status;
    if (status === void 0) throw new GrpcError(Code.UNAVAILABLE, "the stream ended without a status");
  }

  // src/proto.ts
  var Writer = class _Writer {
    constructor() {
      __publicField(this, "bytes", []);
    }
    varint(n) {
      let v2 = Math.floor(n);
      while (v2 >= 128) {
        this.bytes.push(v2 % 128 | 128);
        v2 = Math.floor(v2 / 128);
      }
      this.bytes.push(v2);
    }
    tag(field, wire) {
      this.varint(field * 8 + wire);
    }
    uint(field, n) {
      if (n !== 0) {
        this.tag(field, 0);
        this.varint(n);
      }
      return this;
    }
    string(field, s) {
      if (s !== "") {
        const b2 = new TextEncoder().encode(s);
        this.tag(field, 2);
        this.varint(b2.length);
        for (const x of b2) this.bytes.push(x);
      }
      return this;
    }
    /** An embedded message (written even when empty: it is an element of a
     * repeated field, whose presence counts). */
    message(field, body) {
      this.tag(field, 2);
      this.varint(body.length);
      for (const x of body) this.bytes.push(x);
      return this;
    }
    /** A repeated enum, packed (as proto3 encodes it). */
    packed(field, values) {
      if (values.length > 0) {
        const inner = new _Writer();
        for (const v2 of values) inner.varint(v2);
        const b2 = inner.finish();
        this.tag(field, 2);
        this.varint(b2.length);
        for (const x of b2) this.bytes.push(x);
      }
      return this;
    }
    finish() {
      return Uint8Array.from(this.bytes);
    }
  };
  var DecodeError = class extends Error {
  };
  function fields(buf) {
    const out = [];
    let pos = 0;
    const varint = () => {
      let result = 0n;
      for (let i = 0; i < 10; i++) {
        if (pos >= buf.length) throw new DecodeError("truncated varint");
        const b2 = buf[pos++];
        result |= BigInt(b2 & 127) << BigInt(7 * i);
        if ((b2 & 128) === 0) {
          return Number(BigInt.asIntN(64, result));
        }
      }
      throw new DecodeError("varint longer than 10 bytes");
    };
    const take = (n) => {
      if (n < 0 || pos + n > buf.length) throw new DecodeError("truncated field");
      const v2 = buf.subarray(pos, pos + n);
      pos += n;
      return v2;
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
  var utf8 = new TextDecoder("utf-8", { fatal: false });
  function str(f) {
    return f.wire === 2 ? utf8.decode(f.value) : "";
  }
  function num(f) {
    return f.wire === 0 ? f.value : 0;
  }
  function bool(f) {
    return f.wire === 0 && f.value !== 0;
  }
  function double(f) {
    if (f.wire !== 1) return 0;
    return new DataView(f.value.buffer, f.value.byteOffset, 8).getFloat64(0, true);
  }
  function sub(f) {
    return f.wire === 2 ? f.value : new Uint8Array();
  }
  function timestamp(f) {
    let seconds = 0;
    let nanos = 0;
    for (const [n, v2] of fields(sub(f))) {
      if (n === 1) seconds = num(v2);
      if (n === 2) nanos = num(v2);
    }
    return seconds * 1e3 + Math.floor(nanos / 1e6);
  }
  var SessionStatus = {
    UNSPECIFIED: 0,
    PENDING: 1,
    RUNNING: 2,
    IDLE: 3,
    COMPLETED: 4,
    FAILED: 5,
    CANCELLED: 6,
    AWAITING_CONFIRMATION: 7,
    AWAITING_APPROVAL: 8
  };
  var ALL_STATUSES = Object.values(SessionStatus).filter((v2) => v2 !== 0);
  var STATUS_NAMES = [
    "unspecified",
    "pending",
    "running",
    "idle",
    "completed",
    "failed",
    "cancelled",
    "awaiting_confirmation",
    "awaiting_approval"
  ];
  function statusName(status) {
    return STATUS_NAMES[status] ?? `status_${status}`;
  }
  function statusFromName(name) {
    const i = STATUS_NAMES.indexOf(name);
    return i > 0 ? i : 0;
  }
  var TurnRole = {
    UNSPECIFIED: 0,
    USER: 1,
    ASSISTANT: 2,
    TOOL: 3,
    NOTICE: 4,
    COMPACTION: 5
  };
  var ROLE_NAMES = ["unspecified", "user", "assistant", "tool", "notice", "compaction"];
  function roleName(role) {
    return ROLE_NAMES[role] ?? `role_${role}`;
  }
  var ApprovalState = {
    UNSPECIFIED: 0,
    PENDING: 1,
    APPROVED: 2,
    DENIED: 3,
    EXPIRED: 4,
    SUPERSEDED: 5,
    CANCELLED: 6
  };
  var APPROVAL_STATE_NAMES = ["unspecified", "pending", "approved", "denied", "expired", "superseded", "cancelled"];
  function approvalStateName(state) {
    return APPROVAL_STATE_NAMES[state] ?? `state_${state}`;
  }
  var ToolCallVerdict = {
    UNSPECIFIED: 0,
    APPROVE: 1,
    DENY: 2
  };
  var SOURCE_NAMES = ["", "manual", "alert", "schedule"];
  function sourceName(source) {
    return SOURCE_NAMES[source] ?? `source_${source}`;
  }
  function sourceFromName(name) {
    const i = SOURCE_NAMES.indexOf(name);
    return i > 0 ? i : 0;
  }
  function decodeAlertEvent(buf) {
    const m = { fingerprint: "", firing: false, startsAt: 0, endsAt: 0, labels: [], receivedAt: 0 };
    for (const [n, f] of fields(buf)) {
      if (n === 1) m.fingerprint = str(f);
      else if (n === 2) m.firing = bool(f);
      else if (n === 3) m.startsAt = timestamp(f);
      else if (n === 4) m.endsAt = timestamp(f);
      else if (n === 5) {
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
  function decodeAlertOrigin(buf) {
    const m = {
      source: "",
      receiver: "",
      externalUrl: "",
      groupKey: "",
      eventsTotal: 0,
      events: [],
      resolvedAt: 0,
      sessionSkipped: ""
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
  function decodeIncident(buf) {
    const m = { id: "", title: "", description: "", createdAt: 0, alertOrigin: null, source: 0 };
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
  function decodeRecoveryPlan(buf) {
    const m = {
      kind: "",
      repairedCallIds: [],
      canContinue: false,
      canAutoContinue: false,
      requiresConfirmation: false,
      noticeText: "",
      interruptedCalls: []
    };
    for (const [n, f] of fields(buf)) {
      if (n === 1) m.kind = str(f);
      else if (n === 3) m.repairedCallIds.push(str(f));
      else if (n === 4) m.canContinue = bool(f);
      else if (n === 5) m.canAutoContinue = bool(f);
      else if (n === 6) m.requiresConfirmation = bool(f);
      else if (n === 7) m.noticeText = str(f);
      else if (n === 8) {
        const c = { callId: "", name: "", assistantSeq: 0, sideEffect: "" };
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
  function decodeApproval(buf) {
    const m = {
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
      decidedAt: 0
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
  function decodeSession(buf) {
    const m = {
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
      queuedMessages: []
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
        const q = { text: "", position: 0, interrupt: false, queuedAt: 0 };
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
  function decodeTurn(buf) {
    const m = {
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
      compaction: null
    };
    for (const [n, f] of fields(buf)) {
      if (n === 1) m.sessionId = str(f);
      else if (n === 2) m.seq = num(f);
      else if (n === 3) m.role = num(f);
      else if (n === 4) m.content = str(f);
      else if (n === 5) {
        const c = { id: "", name: "", argumentsJson: "" };
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
        const c = { firstRetainedSeq: 0, tokensBefore: 0, tokensAfter: 0 };
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
  function decodeWatchEvent(buf) {
    let event = { kind: "unknown" };
    for (const [n, f] of fields(buf)) {
      const body = sub(f);
      if (n === 1) event = { kind: "turn", turn: decodeTurn(body) };
      else if (n === 2) {
        const s = { sessionId: "", assistantSeq: 0, callId: "", toolName: "" };
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
        const d2 = { sessionId: "", turnSeq: 0, offset: 0, text: "", attempt: 0 };
        for (const [k, g] of fields(body)) {
          if (k === 1) d2.sessionId = str(g);
          else if (k === 2) d2.turnSeq = num(g);
          else if (k === 3) d2.offset = num(g);
          else if (k === 4) d2.text = str(g);
          else if (k === 5) d2.attempt = num(g);
        }
        event = { kind: "text_delta", delta: d2 };
      } else if (n === 6) {
        event = { kind: "approval_requested", approval: decodeApproval(body) };
      } else if (n === 7) {
        const q = { sessionId: "", text: "", position: 0 };
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
  function decodeReport(buf) {
    const m = {
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
      authorOutputTokens: 0
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
  function decodeList(buf, item) {
    const items = [];
    let next = "";
    for (const [n, f] of fields(buf)) {
      if (n === 1) items.push(item(sub(f)));
      else if (n === 2) next = str(f);
    }
    return { items, next };
  }
  function decodeListTurns(buf) {
    const out = { turns: [], nextAfterSeq: 0, headSeq: 0, nextBeforeSeq: 0 };
    for (const [n, f] of fields(buf)) {
      if (n === 1) out.turns.push(decodeTurn(sub(f)));
      else if (n === 2) out.nextAfterSeq = num(f);
      else if (n === 3) out.headSeq = num(f);
      else if (n === 4) out.nextBeforeSeq = num(f);
    }
    return out;
  }
  function decodeSendMessage(buf) {
    const m = { seq: 0, queued: false, queuePosition: 0 };
    for (const [n, f] of fields(buf)) {
      if (n === 1) m.seq = num(f);
      else if (n === 2) m.queued = bool(f);
      else if (n === 3) m.queuePosition = num(f);
    }
    return m;
  }
  var IfRunning = {
    UNSPECIFIED: 0,
    REJECT: 1,
    ENQUEUE: 2,
    INTERRUPT: 3
  };
  var LATEST = Number.MAX_SAFE_INTEGER;
  var encode = {
    createIncident: (title, description) => new Writer().string(1, title).string(2, description).finish(),
    listIncidents: (pageSize, pageToken, source = 0) => new Writer().uint(1, pageSize).string(2, pageToken).uint(3, source).finish(),
    startSession: (incidentId, message, idempotencyKey) => new Writer().string(1, incidentId).string(2, message).string(3, idempotencyKey).finish(),
    sessionId: (sessionId) => new Writer().string(1, sessionId).finish(),
    incidentId: (incidentId) => new Writer().string(1, incidentId).finish(),
    listSessions: (incidentId, pageSize, pageToken, statuses = [], queuedOnly = false) => new Writer().string(1, incidentId).uint(2, pageSize).string(3, pageToken).packed(4, statuses).uint(5, queuedOnly ? 1 : 0).finish(),
    listTurns: (sessionId, afterSeq, limit) => new Writer().string(1, sessionId).uint(2, afterSeq).uint(3, limit).finish(),
    /** ListTurns backwards: the page just before `beforeSeq` (LATEST: the newest). */
    listTurnsBefore: (sessionId, beforeSeq, limit) => new Writer().string(1, sessionId).uint(3, limit).uint(4, beforeSeq).finish(),
    sendMessage: (sessionId, message, idempotencyKey, ifRunning = 0) => new Writer().string(1, sessionId).string(2, message).string(3, idempotencyKey).uint(4, ifRunning).finish(),
    /** ForkSession; an empty `message` leaves it unset (the fork stays idle). */
    forkSession: (sessionId, atSeq, message, idempotencyKey) => new Writer().string(1, sessionId).uint(2, atSeq).string(3, message).string(4, idempotencyKey).finish(),
    watchSession: (sessionId, afterSeq) => new Writer().string(1, sessionId).uint(2, afterSeq).finish(),
    getReport: (sessionId, burst) => new Writer().string(1, sessionId).uint(2, burst).finish(),
    decideToolCalls: (sessionId, decisions, idempotencyKey) => {
      const w2 = new Writer().string(1, sessionId);
      for (const d2 of decisions) {
        w2.message(2, new Writer().string(1, d2.callId).uint(2, d2.verdict).string(3, d2.comment).finish());
      }
      return w2.string(3, idempotencyKey).finish();
    }
  };

  // src/view.ts
  var encoder = new TextEncoder();
  var decoder = new TextDecoder();
  var Timeline = class {
    constructor() {
      /** The last seq shown: the cursor a reconnect resumes after. */
      __publicField(this, "lastSeq", 0);
      __publicField(this, "turns", []);
      __publicField(this, "calls", /* @__PURE__ */ new Map());
      __publicField(this, "streaming", null);
      /** Seqs that arrived after a gap (never expected: the server fills gaps). */
      __publicField(this, "gaps", []);
    }
    /**
     * Starts the stream's cursor at `seq`: the turns up to it were read by
     * page (ListTurns), not by the stream, and are not kept here.
     */
    startAt(seq) {
      if (seq > this.lastSeq) this.lastSeq = seq;
    }
    applyTurn(turn) {
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
    applyHistory(turn) {
      return this.track(turn);
    }
    track(turn) {
      const changed = [];
      const set = (id, state, name = "", assistantSeq = 0) => {
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
          ...turn.recoveryPlan.interruptedCalls.map((c) => c.callId)
        ];
        for (const id of ids) {
          const known = this.calls.get(id);
          if (known && (known.state === "done" || known.state === "error")) continue;
          set(id, "failed");
        }
      }
      if (this.streaming && this.streaming.turnSeq <= turn.seq) this.streaming = null;
      return changed;
    }
    /** A ToolCallStart; the call's view when it changed. */
    applyStart(start) {
      const known = this.calls.get(start.callId);
      if (known && known.state !== "requested") return null;
      const view = known ?? {
        id: start.callId,
        name: start.toolName,
        assistantSeq: start.assistantSeq,
        state: "running"
      };
      view.state = "running";
      this.calls.set(start.callId, view);
      return view;
    }
    /** A TextDelta; true when the streamed text changed. */
    applyDelta(delta) {
      if (delta.turnSeq <= this.lastSeq) return false;
      const s = this.streaming;
      const attempt = Math.max(delta.attempt, 1);
      if (!s || delta.turnSeq > s.turnSeq || attempt > s.attempt) {
        this.streaming = { turnSeq: delta.turnSeq, attempt, bytes: new Uint8Array(0) };
      } else if (delta.turnSeq < s.turnSeq || attempt < s.attempt) {
        return false;
      }
      const cur = this.streaming;
      const piece = encoder.encode(delta.text);
      if (delta.offset > cur.bytes.length) {
        return false;
      }
      const end = delta.offset + piece.length;
      if (end <= cur.bytes.length) {
        const same = cur.bytes.subarray(delta.offset, end).every((b2, i) => b2 === piece[i]);
        if (same) return false;
      }
      const next = new Uint8Array(Math.max(end, delta.offset + piece.length));
      next.set(cur.bytes.subarray(0, delta.offset), 0);
      next.set(piece, delta.offset);
      cur.bytes = next;
      return true;
    }
    streamingText() {
      return this.streaming ? decoder.decode(this.streaming.bytes) : "";
    }
    seqs() {
      return this.turns.map((t) => t.seq);
    }
  };
  function stillQueued(queued, headSeq, turns) {
    const since = turns.filter((t) => t.seq > headSeq && t.role === TurnRole.USER).map((t) => t.content);
    return queued.filter((q) => {
      const i = since.indexOf(q.text);
      if (i < 0) return true;
      since.splice(i, 1);
      return false;
    });
  }

  // node_modules/dompurify/dist/purify.es.mjs
  function _OverloadYield(e, d2) {
    this.v = e, this.k = d2;
  }
  function _arrayLikeToArray(r, a) {
    (null == a || a > r.length) && (a = r.length);
    for (var e = 0, n = Array(a); e < a; e++) n[e] = r[e];
    return n;
  }
  function _arrayWithHoles(r) {
    if (Array.isArray(r)) return r;
  }
  function _iterableToArrayLimit(r, l2) {
    var t = null == r ? null : "undefined" != typeof Symbol && r[Symbol.iterator] || r["@@iterator"];
    if (null != t) {
      var e, n, i, u, a = [], f = true, o = false;
      try {
        if (i = (t = t.call(r)).next, 0 === l2) {
          if (Object(t) !== t) return;
          f = false;
        } else for (; !(f = (e = i.call(t)).done) && (a.push(e.value), a.length !== l2); f = true) ;
      } catch (r2) {
        o = true, n = r2;
      } finally {
        try {
          if (!f && null != t.return && (u = t.return(), Object(u) !== u)) return;
        } finally {
          if (o) throw n;
        }
      }
      return a;
    }
  }
  function _nonIterableRest() {
    throw new TypeError("Invalid attempt to destructure non-iterable instance.\nIn order to be iterable, non-array objects must have a [Symbol.iterator]() method.");
  }
  function _slicedToArray(r, e) {
    return _arrayWithHoles(r) || _iterableToArrayLimit(r, e) || _unsupportedIterableToArray(r, e) || _nonIterableRest();
  }
  function _unsupportedIterableToArray(r, a) {
    if (r) {
      if ("string" == typeof r) return _arrayLikeToArray(r, a);
      var t = {}.toString.call(r).slice(8, -1);
      return "Object" === t && r.constructor && (t = r.constructor.name), "Map" === t || "Set" === t ? Array.from(r) : "Arguments" === t || /^(?:Ui|I)nt(?:8|16|32)(?:Clamped)?Array$/.test(t) ? _arrayLikeToArray(r, a) : void 0;
    }
  }
  function AsyncGenerator(e) {
    var t, n;
    function resume(t2, n2) {
      try {
        var r = e[t2](n2), o = r.value, u = o instanceof _OverloadYield;
        Promise.resolve(u ? o.v : o).then(function(n3) {
          if (u) {
            var i = "return" === t2 && o.k ? t2 : "next";
            if (!o.k || n3.done) return resume(i, n3);
            n3 = e[i](n3).value;
          }
          settle(!!r.done, n3);
        }, function(e2) {
          resume("throw", e2);
        });
      } catch (e2) {
        settle(2, e2);
      }
    }
    function settle(e2, r) {
      2 === e2 ? t.reject(r) : t.resolve({
        value: r,
        done: e2
      }), (t = t.next) ? resume(t.key, t.arg) : n = null;
    }
    this._invoke = function(e2, r) {
      return new Promise(function(o, u) {
        var i = {
          key: e2,
          arg: r,
          resolve: o,
          reject: u,
          next: null
        };
        n ? n = n.next = i : (t = n = i, resume(e2, r));
      });
    }, "function" != typeof e.return && (this.return = void 0);
  }
  AsyncGenerator.prototype["function" == typeof Symbol && Symbol.asyncIterator || "@@asyncIterator"] = function() {
    return this;
  }, AsyncGenerator.prototype.next = function(e) {
    return this._invoke("next", e);
  }, AsyncGenerator.prototype.throw = function(e) {
    return this._invoke("throw", e);
  }, AsyncGenerator.prototype.return = function(e) {
    return this._invoke("return", e);
  };
  var entries = Object.entries;
  var objectKeys = Object.keys;
  var setPrototypeOf = Object.setPrototypeOf;
  var isFrozen = Object.isFrozen;
  var getPrototypeOf = Object.getPrototypeOf;
  var getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  var freeze = Object.freeze;
  var seal = Object.seal;
  var create = Object.create;
  var _ref = typeof Reflect !== "undefined" && Reflect;
  var apply = _ref.apply;
  var construct = _ref.construct;
  if (!freeze) freeze = function freeze2(x) {
    return x;
  };
  if (!seal) seal = function seal2(x) {
    return x;
  };
  if (!apply) apply = function apply2(func, thisArg) {
    for (var _len = arguments.length, args = new Array(_len > 2 ? _len - 2 : 0), _key = 2; _key < _len; _key++) args[_key - 2] = arguments[_key];
    return func.apply(thisArg, args);
  };
  if (!construct) construct = function construct2(Func) {
    for (var _len2 = arguments.length, args = new Array(_len2 > 1 ? _len2 - 1 : 0), _key2 = 1; _key2 < _len2; _key2++) args[_key2 - 1] = arguments[_key2];
    return new Func(...args);
  };
  var arrayForEach = unapply(Array.prototype.forEach);
  var arrayLastIndexOf = unapply(Array.prototype.lastIndexOf);
  var arrayPop = unapply(Array.prototype.pop);
  var arrayPush = unapply(Array.prototype.push);
  var arraySlice = unapply(Array.prototype.slice);
  var arraySplice = unapply(Array.prototype.splice);
  var arrayIsArray = Array.isArray;
  var setCreate = unconstruct(Set);
  var setAdd = unapply(Set.prototype.add);
  var setHas = unapply(Set.prototype.has);
  var setDelete = unapply(Set.prototype.delete);
  var mapCreate = unconstruct(Map);
  var mapGet = unapply(Map.prototype.get);
  var mapSet = unapply(Map.prototype.set);
  var stringToLowerCase = unapply(String.prototype.toLowerCase);
  var stringToString = unapply(String.prototype.toString);
  var stringMatch = unapply(String.prototype.match);
  var stringReplace = unapply(String.prototype.replace);
  var stringIndexOf = unapply(String.prototype.indexOf);
  var stringTrim = unapply(String.prototype.trim);
  var numberToString = unapply(Number.prototype.toString);
  var booleanToString = unapply(Boolean.prototype.toString);
  var bigintToString = typeof BigInt === "undefined" ? null : unapply(BigInt.prototype.toString);
  var symbolToString = typeof Symbol === "undefined" ? null : unapply(Symbol.prototype.toString);
  var objectHasOwnProperty = unapply(Object.prototype.hasOwnProperty);
  var objectToString = unapply(Object.prototype.toString);
  var regExpTestRaw = RegExp.prototype.test;
  var regExpTest = function regExpTest2(regExp, value) {
    if (regExp instanceof RegExp) regExp.lastIndex = 0;
    return apply(regExpTestRaw, regExp, [value]);
  };
  var typeErrorCreate = unconstruct(TypeError);
  function unapply(func) {
    return function(thisArg) {
      for (var _len3 = arguments.length, args = new Array(_len3 > 1 ? _len3 - 1 : 0), _key3 = 1; _key3 < _len3; _key3++) args[_key3 - 1] = arguments[_key3];
      return apply(func, thisArg, args);
    };
  }
  function unconstruct(Func) {
    return function() {
      for (var _len4 = arguments.length, args = new Array(_len4), _key4 = 0; _key4 < _len4; _key4++) args[_key4] = arguments[_key4];
      return construct(Func, args);
    };
  }
  function addToSet(set, array) {
    let transformCaseFunc = arguments.length > 2 && arguments[2] !== void 0 ? arguments[2] : stringToLowerCase;
    if (setPrototypeOf) setPrototypeOf(set, null);
    if (!arrayIsArray(array)) return set;
    let l2 = array.length;
    while (l2--) {
      let element = array[l2];
      if (typeof element === "string") {
        const lcElement = transformCaseFunc(element);
        if (lcElement !== element) {
          if (!isFrozen(array)) array[l2] = lcElement;
          element = lcElement;
        }
      }
      set[element] = true;
    }
    return set;
  }
  function cleanArray(array) {
    for (let index = 0; index < array.length; index++) if (!objectHasOwnProperty(array, index)) array[index] = null;
    return array;
  }
  function clone(object) {
    const newObject = create(null);
    for (const _ref2 of entries(object)) {
      var _ref3 = _slicedToArray(_ref2, 2);
      const property = _ref3[0];
      const value = _ref3[1];
      if (objectHasOwnProperty(object, property)) {
        if (arrayIsArray(value)) newObject[property] = cleanArray(value);
        else if (value && typeof value === "object" && value.constructor === Object) newObject[property] = clone(value);
        else newObject[property] = value;
      }
    }
    return newObject;
  }
  function cloneSet(set) {
    const newSet = create(null);
    const keys = objectKeys(set);
    let l2 = keys.length;
    while (l2--) newSet[keys[l2]] = set[keys[l2]];
    return newSet;
  }
  function stringifyValue(value) {
    switch (typeof value) {
      case "string":
        return value;
      case "number":
        return numberToString(value);
      case "boolean":
        return booleanToString(value);
      case "bigint":
        return bigintToString ? bigintToString(value) : "0";
      case "symbol":
        return symbolToString ? symbolToString(value) : "Symbol()";
      case "undefined":
        return objectToString(value);
      case "function":
      case "object": {
        if (value === null) return objectToString(value);
        const valueAsRecord = value;
        const valueToString = lookupGetter(valueAsRecord, "toString");
        if (typeof valueToString === "function") {
          const stringified = valueToString(valueAsRecord);
          return typeof stringified === "string" ? stringified : objectToString(stringified);
        }
        return objectToString(value);
      }
      default:
        return objectToString(value);
    }
  }
  function lookupGetter(object, prop) {
    while (object !== null) {
      const desc = getOwnPropertyDescriptor(object, prop);
      if (desc) {
        if (desc.get) return unapply(desc.get);
        if (typeof desc.value === "function") return unapply(desc.value);
      }
      object = getPrototypeOf(object);
    }
    function fallbackValue() {
      return null;
    }
    return fallbackValue;
  }
  function lookupAccessor(object, prop) {
    while (object !== null) {
      const desc = getOwnPropertyDescriptor(object, prop);
      if (desc) return desc.get ? unapply(desc.get) : null;
      object = getPrototypeOf(object);
    }
    return null;
  }
  function isRegex(value) {
    if (!value) return false;
    try {
      regExpTest(value, "");
      return true;
    } catch (_unused) {
      return false;
    }
  }
  var html$1 = freeze([
    "a",
    "abbr",
    "acronym",
    "address",
    "area",
    "article",
    "aside",
    "audio",
    "b",
    "bdi",
    "bdo",
    "big",
    "blink",
    "blockquote",
    "body",
    "br",
    "button",
    "canvas",
    "caption",
    "center",
    "cite",
    "code",
    "col",
    "colgroup",
    "content",
    "data",
    "datalist",
    "dd",
    "decorator",
    "del",
    "details",
    "dfn",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "element",
    "em",
    "fieldset",
    "figcaption",
    "figure",
    "font",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "head",
    "header",
    "hgroup",
    "hr",
    "html",
    "i",
    "img",
    "input",
    "ins",
    "kbd",
    "label",
    "legend",
    "li",
    "main",
    "map",
    "mark",
    "marquee",
    "menu",
    "menuitem",
    "meter",
    "nav",
    "nobr",
    "ol",
    "optgroup",
    "option",
    "output",
    "p",
    "picture",
    "pre",
    "progress",
    "q",
    "rp",
    "rt",
    "ruby",
    "s",
    "samp",
    "search",
    "section",
    "select",
    "shadow",
    "slot",
    "small",
    "source",
    "spacer",
    "span",
    "strike",
    "strong",
    "style",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "template",
    "textarea",
    "tfoot",
    "th",
    "thead",
    "time",
    "tr",
    "track",
    "tt",
    "u",
    "ul",
    "var",
    "video",
    "wbr"
  ]);
  var svg$1 = freeze([
    "svg",
    "a",
    "altglyph",
    "altglyphdef",
    "altglyphitem",
    "animatecolor",
    "animatemotion",
    "animatetransform",
    "circle",
    "clippath",
    "defs",
    "desc",
    "ellipse",
    "filter",
    "font",
    "g",
    "glyph",
    "glyphref",
    "hkern",
    "image",
    "line",
    "lineargradient",
    "marker",
    "mask",
    "metadata",
    "mpath",
    "path",
    "pattern",
    "polygon",
    "polyline",
    "radialgradient",
    "rect",
    "stop",
    "style",
    "switch",
    "symbol",
    "text",
    "textpath",
    "title",
    "tref",
    "tspan",
    "view",
    "vkern"
  ]);
  var svgFilters = freeze([
    "feBlend",
    "feColorMatrix",
    "feComponentTransfer",
    "feComposite",
    "feConvolveMatrix",
    "feDiffuseLighting",
    "feDisplacementMap",
    "feDistantLight",
    "feDropShadow",
    "feFlood",
    "feFuncA",
    "feFuncB",
    "feFuncG",
    "feFuncR",
    "feGaussianBlur",
    "feImage",
    "feMerge",
    "feMergeNode",
    "feMorphology",
    "feOffset",
    "fePointLight",
    "feSpecularLighting",
    "feSpotLight",
    "feTile",
    "feTurbulence"
  ]);
  var svgDisallowed = freeze([
    "animate",
    "color-profile",
    "cursor",
    "discard",
    "font-face",
    "font-face-format",
    "font-face-name",
    "font-face-src",
    "font-face-uri",
    "foreignobject",
    "hatch",
    "hatchpath",
    "mesh",
    "meshgradient",
    "meshpatch",
    "meshrow",
    "missing-glyph",
    "script",
    "set",
    "solidcolor",
    "unknown",
    "use"
  ]);
  var mathMl$1 = freeze([
    "math",
    "menclose",
    "merror",
    "mfenced",
    "mfrac",
    "mglyph",
    "mi",
    "mlabeledtr",
    "mmultiscripts",
    "mn",
    "mo",
    "mover",
    "mpadded",
    "mphantom",
    "mroot",
    "mrow",
    "ms",
    "mspace",
    "msqrt",
    "mstyle",
    "msub",
    "msup",
    "msubsup",
    "mtable",
    "mtd",
    "mtext",
    "mtr",
    "munder",
    "munderover",
    "mprescripts"
  ]);
  var mathMlDisallowed = freeze([
    "maction",
    "maligngroup",
    "malignmark",
    "mlongdiv",
    "mscarries",
    "mscarry",
    "msgroup",
    "mstack",
    "msline",
    "msrow",
    "semantics",
    "annotation",
    "annotation-xml",
    "mprescripts",
    "none"
  ]);
  var text = freeze(["#text"]);
  var html = freeze([
    "accept",
    "action",
    "align",
    "alt",
    "autocapitalize",
    "autocomplete",
    "autopictureinpicture",
    "autoplay",
    "background",
    "bgcolor",
    "border",
    "capture",
    "cellpadding",
    "cellspacing",
    "checked",
    "cite",
    "class",
    "clear",
    "color",
    "cols",
    "colspan",
    "command",
    "commandfor",
    "controls",
    "controlslist",
    "coords",
    "crossorigin",
    "datetime",
    "decoding",
    "default",
    "dir",
    "disabled",
    "disablepictureinpicture",
    "disableremoteplayback",
    "download",
    "draggable",
    "enctype",
    "enterkeyhint",
    "exportparts",
    "face",
    "for",
    "headers",
    "height",
    "hidden",
    "high",
    "href",
    "hreflang",
    "id",
    "inert",
    "inputmode",
    "integrity",
    "ismap",
    "kind",
    "label",
    "lang",
    "list",
    "loading",
    "loop",
    "low",
    "max",
    "maxlength",
    "media",
    "method",
    "min",
    "minlength",
    "multiple",
    "muted",
    "name",
    "nonce",
    "noshade",
    "novalidate",
    "nowrap",
    "open",
    "optimum",
    "part",
    "pattern",
    "placeholder",
    "playsinline",
    "popover",
    "popovertarget",
    "popovertargetaction",
    "poster",
    "preload",
    "pubdate",
    "radiogroup",
    "readonly",
    "rel",
    "required",
    "rev",
    "reversed",
    "role",
    "rows",
    "rowspan",
    "spellcheck",
    "scope",
    "selected",
    "shape",
    "size",
    "sizes",
    "slot",
    "span",
    "srclang",
    "start",
    "src",
    "srcset",
    "step",
    "style",
    "summary",
    "tabindex",
    "title",
    "translate",
    "type",
    "usemap",
    "valign",
    "value",
    "width",
    "wrap",
    "xmlns"
  ]);
  var svg = freeze([
    "accent-height",
    "accumulate",
    "additive",
    "alignment-baseline",
    "amplitude",
    "ascent",
    "attributename",
    "attributetype",
    "azimuth",
    "basefrequency",
    "baseline-shift",
    "begin",
    "bias",
    "by",
    "class",
    "clip",
    "clippathunits",
    "clip-path",
    "clip-rule",
    "color",
    "color-interpolation",
    "color-interpolation-filters",
    "color-profile",
    "color-rendering",
    "cx",
    "cy",
    "d",
    "dx",
    "dy",
    "diffuseconstant",
    "direction",
    "display",
    "divisor",
    "dominant-baseline",
    "dur",
    "edgemode",
    "elevation",
    "end",
    "exponent",
    "fill",
    "fill-opacity",
    "fill-rule",
    "filter",
    "filterunits",
    "flood-color",
    "flood-opacity",
    "font-family",
    "font-size",
    "font-size-adjust",
    "font-stretch",
    "font-style",
    "font-variant",
    "font-weight",
    "fx",
    "fy",
    "g1",
    "g2",
    "glyph-name",
    "glyphref",
    "gradientunits",
    "gradienttransform",
    "height",
    "href",
    "id",
    "image-rendering",
    "in",
    "in2",
    "intercept",
    "k",
    "k1",
    "k2",
    "k3",
    "k4",
    "kerning",
    "keypoints",
    "keysplines",
    "keytimes",
    "lang",
    "lengthadjust",
    "letter-spacing",
    "kernelmatrix",
    "kernelunitlength",
    "lighting-color",
    "local",
    "marker-end",
    "marker-mid",
    "marker-start",
    "markerheight",
    "markerunits",
    "markerwidth",
    "maskcontentunits",
    "maskunits",
    "max",
    "mask",
    "mask-type",
    "media",
    "method",
    "mode",
    "min",
    "name",
    "numoctaves",
    "offset",
    "operator",
    "opacity",
    "order",
    "orient",
    "orientation",
    "origin",
    "overflow",
    "paint-order",
    "path",
    "pathlength",
    "patterncontentunits",
    "patterntransform",
    "patternunits",
    "pointer-events",
    "points",
    "preservealpha",
    "preserveaspectratio",
    "primitiveunits",
    "r",
    "rx",
    "ry",
    "radius",
    "refx",
    "refy",
    "repeatcount",
    "repeatdur",
    "restart",
    "result",
    "rotate",
    "scale",
    "seed",
    "shape-rendering",
    "slope",
    "specularconstant",
    "specularexponent",
    "spreadmethod",
    "startoffset",
    "stddeviation",
    "stitchtiles",
    "stop-color",
    "stop-opacity",
    "stroke-dasharray",
    "stroke-dashoffset",
    "stroke-linecap",
    "stroke-linejoin",
    "stroke-miterlimit",
    "stroke-opacity",
    "stroke",
    "stroke-width",
    "style",
    "surfacescale",
    "systemlanguage",
    "tabindex",
    "tablevalues",
    "targetx",
    "targety",
    "transform",
    "transform-origin",
    "text-anchor",
    "text-decoration",
    "text-orientation",
    "text-rendering",
    "textlength",
    "type",
    "u1",
    "u2",
    "unicode",
    "values",
    "vector-effect",
    "viewbox",
    "visibility",
    "version",
    "vert-adv-y",
    "vert-origin-x",
    "vert-origin-y",
    "width",
    "word-spacing",
    "wrap",
    "writing-mode",
    "xchannelselector",
    "ychannelselector",
    "x",
    "x1",
    "x2",
    "xmlns",
    "y",
    "y1",
    "y2",
    "z",
    "zoomandpan"
  ]);
  var mathMl = freeze([
    "accent",
    "accentunder",
    "align",
    "bevelled",
    "close",
    "columnalign",
    "columnlines",
    "columnspacing",
    "columnspan",
    "denomalign",
    "depth",
    "dir",
    "display",
    "displaystyle",
    "encoding",
    "fence",
    "frame",
    "height",
    "href",
    "id",
    "largeop",
    "length",
    "linethickness",
    "lquote",
    "lspace",
    "mathbackground",
    "mathcolor",
    "mathsize",
    "mathvariant",
    "maxsize",
    "minsize",
    "movablelimits",
    "notation",
    "numalign",
    "open",
    "rowalign",
    "rowlines",
    "rowspacing",
    "rowspan",
    "rspace",
    "rquote",
    "scriptlevel",
    "scriptminsize",
    "scriptsizemultiplier",
    "selection",
    "separator",
    "separators",
    "stretchy",
    "subscriptshift",
    "supscriptshift",
    "symmetric",
    "voffset",
    "width",
    "xmlns"
  ]);
  var xml = freeze([
    "xlink:href",
    "xml:id",
    "xlink:title",
    "xml:space",
    "xmlns:xlink"
  ]);
  var MUSTACHE_EXPR = seal(/{{[\w\W]*|^[\w\W]*}}/g);
  var ERB_EXPR = seal(/<%[\w\W]*|^[\w\W]*%>/g);
  var TMPLIT_EXPR = seal(/\${[\w\W]*/g);
  var TMPL_MARKER = seal(/{{|}}|\${|<%|%>/);
  var NON_WHITESPACE = seal(/[^\t\n\f\r ]/);
  var NUL = seal(/\u0000/g);
  var DATA_ATTR = seal(/^data-[\-\w.\u00B7-\uFFFF]+$/);
  var ARIA_ATTR = seal(/^aria-[\-\w]+$/);
  var IS_ALLOWED_URI = seal(/^(?:(?:(?:f|ht)tps?|mailto|tel|callto|sms|cid|xmpp|matrix):|[^a-z]|[a-z+.\-]+(?:[^a-z+.\-:]|$))/i);
  var IS_SCRIPT_OR_DATA = seal(/^(?:\w+script|data):/i);
  var ATTR_WHITESPACE = seal(/[\u0000-\u0020\u00A0\u1680\u180E\u2000-\u2029\u205F\u3000]/g);
  var DOCTYPE_NAME = seal(/^html$/i);
  var CUSTOM_ELEMENT = seal(/^[a-z][.\w]*(-[.\w]+)+$/i);
  var ELEMENT_MARKUP_PROBE = seal(/<[/\w!]/g);
  var COMMENT_MARKUP_PROBE = seal(/<[/\w]/g);
  var COMMENT_UNSAFE = seal(/<[/\w]|^-?>|--!?>|<!-$/g);
  var FALLBACK_TAG_CLOSE = seal(/<\/no(script|embed|frames)/i);
  var SELF_CLOSING_TAG = seal(/\/>/i);
  var ATTR_VALUE_BREAKOUT = seal(/((--!?|])>)|<\/(style|script|title|xmp|textarea|noscript|iframe|noembed|noframes)/i);
  var LEADING_WHITESPACE = seal(/^[\r\n\t ]+/);
  var NODE_TYPE = {
    element: 1,
    text: 3,
    processingInstruction: 7,
    comment: 8,
    document: 9,
    documentFragment: 11
  };
  var LITERAL_TEXT_ELEMENTS = freeze(addToSet({}, [
    "style",
    "script",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "plaintext",
    "noscript"
  ]));
  var ESCAPABLE_TEXT_ELEMENTS = freeze(addToSet({}, ["textarea", "title"]));
  var VOID_ELEMENTS = freeze(addToSet({}, [
    "area",
    "base",
    "basefont",
    "bgsound",
    "br",
    "col",
    "embed",
    "frame",
    "hr",
    "img",
    "input",
    "keygen",
    "link",
    "meta",
    "param",
    "source",
    "track",
    "wbr"
  ]));
  var getGlobal = function getGlobal2() {
    return typeof window === "undefined" ? null : window;
  };
  var _createTrustedTypesPolicy = function _createTrustedTypesPolicy2(trustedTypes, purifyHostElement) {
    if (typeof trustedTypes !== "object" || typeof trustedTypes.createPolicy !== "function") return null;
    let suffix = null;
    const ATTR_NAME = "data-tt-policy-suffix";
    if (purifyHostElement && purifyHostElement.hasAttribute(ATTR_NAME)) suffix = purifyHostElement.getAttribute(ATTR_NAME);
    const policyName = "dompurify" + (suffix ? "#" + suffix : "");
    try {
      return trustedTypes.createPolicy(policyName, {
        createHTML(html2) {
          return html2;
        },
        createScriptURL(scriptUrl) {
          return scriptUrl;
        }
      });
    } catch (_2) {
      console.warn("TrustedTypes policy " + policyName + " could not be created.");
      return null;
    }
  };
  var _createHooksMap = function _createHooksMap2() {
    return {
      afterSanitizeAttributes: [],
      afterSanitizeElements: [],
      afterSanitizeShadowDOM: [],
      beforeSanitizeAttributes: [],
      beforeSanitizeElements: [],
      beforeSanitizeShadowDOM: [],
      uponSanitizeAttribute: [],
      uponSanitizeElement: [],
      uponSanitizeShadowNode: []
    };
  };
  var _resolveSetOption = function _resolveSetOption2(cfg, key, fallback, options) {
    return objectHasOwnProperty(cfg, key) && arrayIsArray(cfg[key]) ? addToSet(options.base ? cloneSet(options.base) : {}, cfg[key], options.transform) : fallback;
  };
  var _resolveObjectOption = function _resolveObjectOption2(cfg, key, fallback) {
    const value = objectHasOwnProperty(cfg, key) ? cfg[key] : void 0;
    return value && typeof value === "object" ? clone(value) : fallback;
  };
  function createDOMPurify() {
    let window2 = arguments.length > 0 && arguments[0] !== void 0 ? arguments[0] : getGlobal();
    const DOMPurify = (root) => createDOMPurify(root);
    DOMPurify.version = "3.5.0";
    DOMPurify.removed = [];
    if (!window2 || !window2.document || window2.document.nodeType !== NODE_TYPE.document || !window2.Element) {
      DOMPurify.isSupported = false;
      return DOMPurify;
    }
    let document2 = window2.document;
    const originalDocument = document2;
    const currentScript = originalDocument.currentScript;
    const HTMLTemplateElement = window2.HTMLTemplateElement, Node = window2.Node, Element = window2.Element, NodeFilter = window2.NodeFilter, DOMParser = window2.DOMParser, trustedTypes = window2.trustedTypes;
    const ElementPrototype = Element.prototype;
    const cloneNode = lookupGetter(ElementPrototype, "cloneNode");
    const remove = lookupGetter(ElementPrototype, "remove");
    const removeChild = lookupGetter(ElementPrototype, "removeChild");
    const removeAttributeNode = lookupGetter(ElementPrototype, "removeAttributeNode");
    const getNextSibling = lookupGetter(ElementPrototype, "nextSibling");
    const getChildNodes = lookupGetter(ElementPrototype, "childNodes");
    const getParentNode = lookupGetter(ElementPrototype, "parentNode");
    const getShadowRoot = lookupGetter(ElementPrototype, "shadowRoot");
    const getAttributes = lookupGetter(ElementPrototype, "attributes");
    const getNodeType = Node && Node.prototype ? lookupGetter(Node.prototype, "nodeType") : null;
    const getNodeName = Node && Node.prototype ? lookupGetter(Node.prototype, "nodeName") : null;
    const getOwnerDocument = Node && Node.prototype ? lookupGetter(Node.prototype, "ownerDocument") : null;
    const _readNodeType = function _readNodeType2(node) {
      return getNodeType ? getNodeType(node) : node.nodeType;
    };
    const _readNodeName = function _readNodeName2(node) {
      return getNodeName ? getNodeName(node) : node.nodeName;
    };
    const getNamespaceURI = lookupAccessor(ElementPrototype, "namespaceURI");
    const _readNamespaceURI = function _readNamespaceURI2(element) {
      return getNamespaceURI ? getNamespaceURI(element) : element.namespaceURI;
    };
    const _readAttributes = function _readAttributes2(node) {
      return _readNodeType(node) === NODE_TYPE.element ? getAttributes(node) : null;
    };
    if (typeof HTMLTemplateElement === "function") {
      const template = document2.createElement("template");
      if (template.content && template.content.ownerDocument) document2 = template.content.ownerDocument;
    }
    let trustedTypesPolicy;
    let emptyHTML = "";
    let defaultTrustedTypesPolicy;
    let defaultTrustedTypesPolicyResolved = false;
    let IN_TRUSTED_TYPES_POLICY = 0;
    const _assertNotInTrustedTypesPolicy = function _assertNotInTrustedTypesPolicy2() {
      if (IN_TRUSTED_TYPES_POLICY > 0) throw typeErrorCreate('A configured TRUSTED_TYPES_POLICY callback (createHTML or createScriptURL) must not call DOMPurify.sanitize, as that causes infinite recursion. Do not pass a policy whose callbacks wrap DOMPurify as TRUSTED_TYPES_POLICY; see the "DOMPurify and Trusted Types" section of the README.');
    };
    const _createTrustedHTML = function _createTrustedHTML2(html2) {
      _assertNotInTrustedTypesPolicy();
      IN_TRUSTED_TYPES_POLICY++;
      try {
        return trustedTypesPolicy.createHTML(html2);
      } finally {
        IN_TRUSTED_TYPES_POLICY--;
      }
    };
    const _signOutput = function _signOutput2(html2) {
      return trustedTypesPolicy && RETURN_TRUSTED_TYPE ? _createTrustedHTML(html2) : html2;
    };
    const _createTrustedScriptURL = function _createTrustedScriptURL2(scriptUrl) {
      _assertNotInTrustedTypesPolicy();
      IN_TRUSTED_TYPES_POLICY++;
      try {
        return trustedTypesPolicy.createScriptURL(scriptUrl);
      } finally {
        IN_TRUSTED_TYPES_POLICY--;
      }
    };
    const _getDefaultTrustedTypesPolicy = function _getDefaultTrustedTypesPolicy2() {
      if (!defaultTrustedTypesPolicyResolved) {
        defaultTrustedTypesPolicy = _createTrustedTypesPolicy(trustedTypes, currentScript);
        defaultTrustedTypesPolicyResolved = true;
      }
      return defaultTrustedTypesPolicy;
    };
    const _document = document2, implementation = _document.implementation, createNodeIterator = _document.createNodeIterator, createDocumentFragment = _document.createDocumentFragment, getElementsByTagName = _document.getElementsByTagName;
    const importNode = originalDocument.importNode;
    let hooks2 = _createHooksMap();
    DOMPurify.isSupported = typeof entries === "function" && typeof getParentNode === "function" && implementation && implementation.createHTMLDocument !== void 0;
    const MUSTACHE_EXPR$1 = MUSTACHE_EXPR, ERB_EXPR$1 = ERB_EXPR, TMPLIT_EXPR$1 = TMPLIT_EXPR, DATA_ATTR$1 = DATA_ATTR, ARIA_ATTR$1 = ARIA_ATTR, IS_SCRIPT_OR_DATA$1 = IS_SCRIPT_OR_DATA, ATTR_WHITESPACE$1 = ATTR_WHITESPACE, CUSTOM_ELEMENT$1 = CUSTOM_ELEMENT;
    let IS_ALLOWED_URI$1 = IS_ALLOWED_URI;
    let ALLOWED_TAGS = null;
    const DEFAULT_ALLOWED_TAGS = addToSet({}, [
      ...html$1,
      ...svg$1,
      ...svgFilters,
      ...mathMl$1,
      ...text
    ]);
    let ALLOWED_ATTR = null;
    const DEFAULT_ALLOWED_ATTR = addToSet({}, [
      ...html,
      ...svg,
      ...mathMl,
      ...xml
    ]);
    let CUSTOM_ELEMENT_HANDLING = null;
    let FORBID_TAGS = null;
    let FORBID_ATTR = null;
    const EXTRA_ELEMENT_HANDLING = Object.seal(create(null, {
      tagCheck: {
        writable: true,
        configurable: false,
        enumerable: true,
        value: null
      },
      attributeCheck: {
        writable: true,
        configurable: false,
        enumerable: true,
        value: null
      }
    }));
    let ALLOW_ARIA_ATTR = true;
    let ALLOW_DATA_ATTR = true;
    let ALLOW_UNKNOWN_PROTOCOLS = false;
    let ALLOW_SELF_CLOSE_IN_ATTR = true;
    let SAFE_FOR_TEMPLATES = false;
    let SAFE_FOR_XML = true;
    let WHOLE_DOCUMENT = false;
    let SET_CONFIG = false;
    let SET_CONFIG_ALLOWED_TAGS = null;
    let SET_CONFIG_ALLOWED_ATTR = null;
    let FORCE_BODY = false;
    let RETURN_DOM = false;
    let RETURN_DOM_FRAGMENT = false;
    let RETURN_TRUSTED_TYPE = false;
    let SANITIZE_DOM = true;
    let SANITIZE_NAMED_PROPS = false;
    const SANITIZE_NAMED_PROPS_PREFIX = "user-content-";
    let KEEP_CONTENT = true;
    let IN_PLACE = false;
    let IN_PLACE_VISITED = null;
    let IN_PLACE_RETURNS = null;
    let USE_PROFILES = false;
    let FORBID_CONTENTS = null;
    const DEFAULT_FORBID_CONTENTS = addToSet({}, [
      "annotation-xml",
      "audio",
      "colgroup",
      "desc",
      "foreignobject",
      "head",
      "iframe",
      "math",
      "mi",
      "mn",
      "mo",
      "ms",
      "mtext",
      "noembed",
      "noframes",
      "noscript",
      "plaintext",
      "script",
      "selectedcontent",
      "style",
      "svg",
      "template",
      "thead",
      "title",
      "video",
      "xmp"
    ]);
    let DATA_URI_TAGS = null;
    const DEFAULT_DATA_URI_TAGS = addToSet({}, [
      "audio",
      "video",
      "img",
      "source",
      "image",
      "track"
    ]);
    let URI_SAFE_ATTRIBUTES = null;
    const DEFAULT_URI_SAFE_ATTRIBUTES = addToSet({}, [
      "alt",
      "class",
      "for",
      "id",
      "label",
      "name",
      "pattern",
      "placeholder",
      "role",
      "summary",
      "title",
      "value",
      "style",
      "xmlns"
    ]);
    const MATHML_NAMESPACE = "http://www.w3.org/1998/Math/MathML";
    const SVG_NAMESPACE = "http://www.w3.org/2000/svg";
    const HTML_NAMESPACE = "http://www.w3.org/1999/xhtml";
    let NAMESPACE = HTML_NAMESPACE;
    let IS_EMPTY_INPUT = false;
    let ALLOWED_NAMESPACES = null;
    const DEFAULT_ALLOWED_NAMESPACES = addToSet({}, [
      MATHML_NAMESPACE,
      SVG_NAMESPACE,
      HTML_NAMESPACE
    ], stringToString);
    const DEFAULT_MATHML_TEXT_INTEGRATION_POINTS = freeze(addToSet({}, [
      "mi",
      "mo",
      "mn",
      "ms",
      "mtext"
    ]));
    let MATHML_TEXT_INTEGRATION_POINTS = null;
    const DEFAULT_HTML_INTEGRATION_POINTS = freeze(addToSet({}, ["annotation-xml"]));
    let HTML_INTEGRATION_POINTS = null;
    const DEFAULT_CUSTOM_ELEMENT_HANDLING = freeze(create(null));
    const COMMON_SVG_AND_HTML_ELEMENTS = addToSet({}, [
      "title",
      "style",
      "font",
      "a",
      "script"
    ]);
    let PARSER_MEDIA_TYPE = null;
    const SUPPORTED_PARSER_MEDIA_TYPES = ["application/xhtml+xml", "text/html"];
    const DEFAULT_PARSER_MEDIA_TYPE = "text/html";
    let transformCaseFunc = null;
    let CONFIG = null;
    let ACTIVE_CONFIG = null;
    const formElement = document2.createElement("form");
    const isRegexOrFunction = function isRegexOrFunction2(testValue) {
      return testValue instanceof RegExp || testValue instanceof Function;
    };
    const _parseConfig = function _parseConfig2() {
      let cfg = arguments.length > 0 && arguments[0] !== void 0 ? arguments[0] : {};
      if (!cfg || typeof cfg !== "object") cfg = {};
      cfg = clone(cfg);
      PARSER_MEDIA_TYPE = SUPPORTED_PARSER_MEDIA_TYPES.indexOf(cfg.PARSER_MEDIA_TYPE) === -1 ? DEFAULT_PARSER_MEDIA_TYPE : cfg.PARSER_MEDIA_TYPE;
      transformCaseFunc = PARSER_MEDIA_TYPE === "application/xhtml+xml" ? stringToString : stringToLowerCase;
      ALLOWED_TAGS = _resolveSetOption(cfg, "ALLOWED_TAGS", DEFAULT_ALLOWED_TAGS, { transform: transformCaseFunc });
      ALLOWED_ATTR = _resolveSetOption(cfg, "ALLOWED_ATTR", DEFAULT_ALLOWED_ATTR, { transform: transformCaseFunc });
      ALLOWED_NAMESPACES = _resolveSetOption(cfg, "ALLOWED_NAMESPACES", DEFAULT_ALLOWED_NAMESPACES, { transform: stringToString });
      URI_SAFE_ATTRIBUTES = _resolveSetOption(cfg, "ADD_URI_SAFE_ATTR", DEFAULT_URI_SAFE_ATTRIBUTES, {
        transform: transformCaseFunc,
        base: DEFAULT_URI_SAFE_ATTRIBUTES
      });
      DATA_URI_TAGS = _resolveSetOption(cfg, "ADD_DATA_URI_TAGS", DEFAULT_DATA_URI_TAGS, {
        transform: transformCaseFunc,
        base: DEFAULT_DATA_URI_TAGS
      });
      FORBID_CONTENTS = _resolveSetOption(cfg, "FORBID_CONTENTS", DEFAULT_FORBID_CONTENTS, { transform: transformCaseFunc });
      FORBID_TAGS = _resolveSetOption(cfg, "FORBID_TAGS", create(null), { transform: transformCaseFunc });
      FORBID_ATTR = _resolveSetOption(cfg, "FORBID_ATTR", create(null), { transform: transformCaseFunc });
      USE_PROFILES = objectHasOwnProperty(cfg, "USE_PROFILES") ? cfg.USE_PROFILES && typeof cfg.USE_PROFILES === "object" ? clone(cfg.USE_PROFILES) : cfg.USE_PROFILES : false;
      ALLOW_ARIA_ATTR = cfg.ALLOW_ARIA_ATTR !== false;
      ALLOW_DATA_ATTR = cfg.ALLOW_DATA_ATTR !== false;
      ALLOW_UNKNOWN_PROTOCOLS = cfg.ALLOW_UNKNOWN_PROTOCOLS || false;
      ALLOW_SELF_CLOSE_IN_ATTR = cfg.ALLOW_SELF_CLOSE_IN_ATTR !== false;
      SAFE_FOR_TEMPLATES = cfg.SAFE_FOR_TEMPLATES || false;
      SAFE_FOR_XML = cfg.SAFE_FOR_XML !== false;
      WHOLE_DOCUMENT = cfg.WHOLE_DOCUMENT || false;
      RETURN_DOM = cfg.RETURN_DOM || false;
      RETURN_DOM_FRAGMENT = cfg.RETURN_DOM_FRAGMENT || false;
      RETURN_TRUSTED_TYPE = cfg.RETURN_TRUSTED_TYPE || false;
      FORCE_BODY = cfg.FORCE_BODY || false;
      SANITIZE_DOM = cfg.SANITIZE_DOM !== false;
      SANITIZE_NAMED_PROPS = cfg.SANITIZE_NAMED_PROPS || false;
      KEEP_CONTENT = cfg.KEEP_CONTENT !== false;
      IN_PLACE = cfg.IN_PLACE || false;
      IS_ALLOWED_URI$1 = isRegex(cfg.ALLOWED_URI_REGEXP) ? cfg.ALLOWED_URI_REGEXP : IS_ALLOWED_URI;
      NAMESPACE = typeof cfg.NAMESPACE === "string" ? cfg.NAMESPACE : HTML_NAMESPACE;
      MATHML_TEXT_INTEGRATION_POINTS = _resolveObjectOption(cfg, "MATHML_TEXT_INTEGRATION_POINTS", DEFAULT_MATHML_TEXT_INTEGRATION_POINTS);
      HTML_INTEGRATION_POINTS = _resolveObjectOption(cfg, "HTML_INTEGRATION_POINTS", DEFAULT_HTML_INTEGRATION_POINTS);
      const customElementHandling = _resolveObjectOption(cfg, "CUSTOM_ELEMENT_HANDLING", DEFAULT_CUSTOM_ELEMENT_HANDLING);
      CUSTOM_ELEMENT_HANDLING = create(null);
      if (objectHasOwnProperty(customElementHandling, "tagNameCheck") && isRegexOrFunction(customElementHandling.tagNameCheck)) CUSTOM_ELEMENT_HANDLING.tagNameCheck = customElementHandling.tagNameCheck;
      if (objectHasOwnProperty(customElementHandling, "attributeNameCheck") && isRegexOrFunction(customElementHandling.attributeNameCheck)) CUSTOM_ELEMENT_HANDLING.attributeNameCheck = customElementHandling.attributeNameCheck;
      if (objectHasOwnProperty(customElementHandling, "allowCustomizedBuiltInElements") && typeof customElementHandling.allowCustomizedBuiltInElements === "boolean") CUSTOM_ELEMENT_HANDLING.allowCustomizedBuiltInElements = customElementHandling.allowCustomizedBuiltInElements;
      seal(CUSTOM_ELEMENT_HANDLING);
      if (SAFE_FOR_TEMPLATES) ALLOW_DATA_ATTR = false;
      if (RETURN_DOM_FRAGMENT) RETURN_DOM = true;
      if (USE_PROFILES) {
        if ((objectHasOwnProperty(cfg, "ALLOWED_TAGS") || objectHasOwnProperty(cfg, "ALLOWED_ATTR")) && typeof console !== "undefined" && typeof console.warn === "function") console.warn("DOMPurify: USE_PROFILES overrides ALLOWED_TAGS and ALLOWED_ATTR. Do not use these options together.");
        ALLOWED_TAGS = addToSet({}, text);
        ALLOWED_ATTR = create(null);
        if (USE_PROFILES.html === true) {
          addToSet(ALLOWED_TAGS, html$1);
          addToSet(ALLOWED_ATTR, html);
        }
        if (USE_PROFILES.svg === true) {
          addToSet(ALLOWED_TAGS, svg$1);
          addToSet(ALLOWED_ATTR, svg);
          addToSet(ALLOWED_ATTR, xml);
        }
        if (USE_PROFILES.svgFilters === true) {
          addToSet(ALLOWED_TAGS, svgFilters);
          addToSet(ALLOWED_ATTR, svg);
          addToSet(ALLOWED_ATTR, xml);
        }
        if (USE_PROFILES.mathMl === true) {
          addToSet(ALLOWED_TAGS, mathMl$1);
          addToSet(ALLOWED_ATTR, mathMl);
          addToSet(ALLOWED_ATTR, xml);
        }
      }
      EXTRA_ELEMENT_HANDLING.tagCheck = null;
      EXTRA_ELEMENT_HANDLING.attributeCheck = null;
      if (objectHasOwnProperty(cfg, "ADD_TAGS")) {
        if (typeof cfg.ADD_TAGS === "function") EXTRA_ELEMENT_HANDLING.tagCheck = cfg.ADD_TAGS;
        else if (arrayIsArray(cfg.ADD_TAGS)) {
          if (ALLOWED_TAGS === DEFAULT_ALLOWED_TAGS) ALLOWED_TAGS = cloneSet(ALLOWED_TAGS);
          addToSet(ALLOWED_TAGS, cfg.ADD_TAGS, transformCaseFunc);
        }
      }
      if (objectHasOwnProperty(cfg, "ADD_ATTR")) {
        if (typeof cfg.ADD_ATTR === "function") EXTRA_ELEMENT_HANDLING.attributeCheck = cfg.ADD_ATTR;
        else if (arrayIsArray(cfg.ADD_ATTR)) {
          if (ALLOWED_ATTR === DEFAULT_ALLOWED_ATTR) ALLOWED_ATTR = cloneSet(ALLOWED_ATTR);
          addToSet(ALLOWED_ATTR, cfg.ADD_ATTR, transformCaseFunc);
        }
      }
      if (objectHasOwnProperty(cfg, "ADD_FORBID_CONTENTS") && arrayIsArray(cfg.ADD_FORBID_CONTENTS)) {
        if (FORBID_CONTENTS === DEFAULT_FORBID_CONTENTS) FORBID_CONTENTS = cloneSet(FORBID_CONTENTS);
        addToSet(FORBID_CONTENTS, cfg.ADD_FORBID_CONTENTS, transformCaseFunc);
      }
      if (KEEP_CONTENT) ALLOWED_TAGS["#text"] = true;
      if (WHOLE_DOCUMENT) addToSet(ALLOWED_TAGS, [
        "html",
        "head",
        "body"
      ]);
      if (ALLOWED_TAGS.table) {
        ALLOWED_TAGS.tbody = true;
        delete FORBID_TAGS.tbody;
      }
      if (cfg.TRUSTED_TYPES_POLICY) {
        if (typeof cfg.TRUSTED_TYPES_POLICY.createHTML !== "function") throw typeErrorCreate('TRUSTED_TYPES_POLICY configuration option must provide a "createHTML" hook.');
        if (typeof cfg.TRUSTED_TYPES_POLICY.createScriptURL !== "function") throw typeErrorCreate('TRUSTED_TYPES_POLICY configuration option must provide a "createScriptURL" hook.');
        const previousTrustedTypesPolicy = trustedTypesPolicy;
        trustedTypesPolicy = cfg.TRUSTED_TYPES_POLICY;
        try {
          emptyHTML = _createTrustedHTML("");
        } catch (error) {
          trustedTypesPolicy = previousTrustedTypesPolicy;
          throw error;
        }
      } else if (cfg.TRUSTED_TYPES_POLICY === null) {
        trustedTypesPolicy = void 0;
        emptyHTML = "";
      } else {
        if (trustedTypesPolicy === void 0) trustedTypesPolicy = _getDefaultTrustedTypesPolicy();
        if (trustedTypesPolicy && typeof emptyHTML === "string") emptyHTML = _createTrustedHTML("");
      }
      CONFIG = freeze(cfg);
    };
    const ALL_SVG_TAGS = addToSet({}, [
      ...svg$1,
      ...svgFilters,
      ...svgDisallowed
    ]);
    const ALL_MATHML_TAGS = addToSet({}, [...mathMl$1, ...mathMlDisallowed]);
    const _checkSvgNamespace = function _checkSvgNamespace2(tagName, parentNamespace, parentTagName) {
      if (parentNamespace === HTML_NAMESPACE) return tagName === "svg";
      if (parentNamespace === MATHML_NAMESPACE) return tagName === "svg" && (parentTagName === "annotation-xml" || MATHML_TEXT_INTEGRATION_POINTS[parentTagName]);
      return Boolean(ALL_SVG_TAGS[tagName]);
    };
    const _checkMathMlNamespace = function _checkMathMlNamespace2(tagName, parentNamespace, parentTagName) {
      if (parentNamespace === HTML_NAMESPACE) return tagName === "math";
      if (parentNamespace === SVG_NAMESPACE) return tagName === "math" && HTML_INTEGRATION_POINTS[parentTagName];
      return Boolean(ALL_MATHML_TAGS[tagName]);
    };
    const _checkHtmlNamespace = function _checkHtmlNamespace2(tagName, parentNamespace, parentTagName) {
      if (parentNamespace === SVG_NAMESPACE && !HTML_INTEGRATION_POINTS[parentTagName]) return false;
      if (parentNamespace === MATHML_NAMESPACE && !MATHML_TEXT_INTEGRATION_POINTS[parentTagName]) return false;
      return !ALL_MATHML_TAGS[tagName] && (COMMON_SVG_AND_HTML_ELEMENTS[tagName] || !ALL_SVG_TAGS[tagName]);
    };
    const _checkValidNamespace = function _checkValidNamespace2(element) {
      const elementNamespace = _readNamespaceURI(element);
      const tagName = stringToLowerCase(_readNodeName(element));
      const parentNode = getParentNode(element);
      let parentNamespace = NAMESPACE;
      let parentTagName = "template";
      if (parentNode && _readNodeType(parentNode) === NODE_TYPE.element) {
        parentNamespace = _readNamespaceURI(parentNode);
        parentTagName = stringToLowerCase(_readNodeName(parentNode));
      }
      if (!ALLOWED_NAMESPACES[elementNamespace]) return false;
      if (elementNamespace === SVG_NAMESPACE) return _checkSvgNamespace(tagName, parentNamespace, parentTagName);
      if (elementNamespace === MATHML_NAMESPACE) return _checkMathMlNamespace(tagName, parentNamespace, parentTagName);
      if (elementNamespace === HTML_NAMESPACE) return _checkHtmlNamespace(tagName, parentNamespace, parentTagName);
      return PARSER_MEDIA_TYPE === "application/xhtml+xml";
    };
    const _forceRemove = function _forceRemove2(node) {
      arrayPush(DOMPurify.removed, { element: node });
      _unmarkVisited(node);
      try {
        getParentNode(node).removeChild(node);
      } catch (_2) {
        remove(node);
        if (!getParentNode(node)) throw typeErrorCreate("a node selected for removal could not be detached from its tree and cannot be safely returned; refusing to sanitize in place");
      }
    };
    const _stripAttributeNode = function _stripAttributeNode2(element, attribute, name) {
      try {
        removeAttributeNode(element, attribute);
      } catch (_2) {
        try {
          element.removeAttribute(name);
        } catch (_3) {
        }
      }
    };
    const _neutralizeRoot = function _neutralizeRoot2(root) {
      _neutralizeSubtree(root);
      const childNodes = getChildNodes(root);
      if (childNodes) arrayForEach(arraySlice(childNodes), (child) => {
        try {
          removeChild(root, child);
        } catch (_2) {
        }
      });
      if (_readNodeType(root) === NODE_TYPE.element) _stripAttributes(root, false);
    };
    const _removeAttribute = function _removeAttribute2(name, element, attr) {
      if (!attr) try {
        attr = element.getAttributeNode(name);
      } catch (_2) {
        attr = null;
      }
      arrayPush(DOMPurify.removed, {
        attribute: attr || null,
        from: element
      });
      if (attr) _stripAttributeNode(element, attr, name);
      else try {
        element.removeAttribute(name);
      } catch (_2) {
      }
      if (name === "is") {
        if (RETURN_DOM || RETURN_DOM_FRAGMENT) try {
          _forceRemove(element);
        } catch (_2) {
        }
        else try {
          element.setAttribute(name, "");
        } catch (_2) {
        }
      }
    };
    const _stripAttributes = function _stripAttributes2(element, keepAllowed) {
      const attributes = getAttributes(element);
      if (!attributes) return;
      for (let i = attributes.length - 1; i >= 0; --i) {
        const attribute = attributes[i];
        const name = attribute && attribute.name;
        if (typeof name === "string" && !(keepAllowed && ALLOWED_ATTR[transformCaseFunc(name)])) _stripAttributeNode(element, attribute, name);
      }
    };
    const _walkTree = function _walkTree2(root, visit) {
      let intoShadow = arguments.length > 2 && arguments[2] !== void 0 ? arguments[2] : false;
      const stack = [root];
      while (stack.length > 0) {
        const node = stack.pop();
        if (visit(node) === false) continue;
        if (intoShadow && _readNodeType(node) === NODE_TYPE.element) {
          const shadowRoot = getShadowRoot(node);
          if (_isDocumentFragment(shadowRoot)) stack.push(shadowRoot);
        }
        const childNodes = getChildNodes(node);
        if (childNodes) for (let i = childNodes.length - 1; i >= 0; --i) stack.push(childNodes[i]);
      }
    };
    const _neutralizeSubtree = function _neutralizeSubtree2(root) {
      _walkTree(root, (node) => {
        if (_readNodeType(node) === NODE_TYPE.element) _stripAttributes(node, true);
      });
    };
    const _collectLiveNodes = function _collectLiveNodes2(root) {
      const nodes = [];
      _walkTree(root, (node) => {
        nodes.push(node);
      }, true);
      return nodes;
    };
    const _neutralizeEscapedElements = function _neutralizeEscapedElements2(root, before) {
      const reachable = setCreate();
      arrayForEach(_collectLiveNodes(root), (node) => {
        if (_readNodeType(node) === NODE_TYPE.element) setAdd(reachable, node);
      });
      arrayForEach(before, (node) => {
        if (_readNodeType(node) === NODE_TYPE.element && !setHas(reachable, node)) _stripAttributes(node, true);
      });
    };
    const _neutralizeDiscarded = function _neutralizeDiscarded2(root, before) {
      let rootRemoved = false;
      arrayForEach(DOMPurify.removed, (entry) => {
        if (entry.element) {
          rootRemoved = rootRemoved || entry.element === root;
          _neutralizeSubtree(entry.element);
        }
      });
      _neutralizeEscapedElements(root, before);
      return rootRemoved;
    };
    const _failClosed = function _failClosed2(root, before) {
      _neutralizeRoot(root);
      _neutralizeDiscarded(root, before);
    };
    const MAX_UNVISITED_ROUNDS = 8;
    const _sanitizeUnvisitedNodes = function _sanitizeUnvisitedNodes2(root, before) {
      const visited = IN_PLACE_VISITED;
      let original = null;
      const getOriginal = () => {
        if (!original) {
          original = setCreate();
          arrayForEach(before, (beforeNode) => {
            setAdd(original, beforeNode);
          });
        }
        return original;
      };
      for (let round = 0; ; round++) {
        const live = _collectLiveNodes(root);
        const containers = [root];
        let pending = false;
        arrayForEach(live, (node) => {
          if (_readNodeType(node) === NODE_TYPE.documentFragment) arrayPush(containers, node);
          else if (!pending && !setHas(visited, node)) pending = setHas(getOriginal(), node);
        });
        if (!pending) return;
        if (round >= MAX_UNVISITED_ROUNDS) throw typeErrorCreate("the tree kept changing during in-place sanitization; refusing to return it");
        arrayForEach(containers, (container, index) => {
          _sanitizeUnvisitedIn(container, index > 0, root, getOriginal());
        });
      }
    };
    const _sanitizeUnvisitedIn = function _sanitizeUnvisitedIn2(container, inShadow, root, original) {
      const iterator = _createNodeIterator(container);
      let node;
      while (node = iterator.nextNode()) {
        if (!setHas(original, node) || setHas(IN_PLACE_VISITED, node)) continue;
        if (inShadow) _executeHooks(hooks2.uponSanitizeShadowNode, node, null);
        _sanitizeNode(node, root);
      }
    };
    const _markVisited = function _markVisited2(node) {
      if (!IN_PLACE_VISITED) return;
      setAdd(IN_PLACE_VISITED, node);
      const returns = mapGet(IN_PLACE_RETURNS, node);
      if (returns === void 0) return;
      if (returns >= MAX_UNVISITED_ROUNDS) throw typeErrorCreate("the tree kept changing during in-place sanitization; refusing to return it");
      mapSet(IN_PLACE_RETURNS, node, returns + 1);
    };
    const _unmarkVisited = function _unmarkVisited2(node) {
      if (!IN_PLACE_VISITED) return;
      setDelete(IN_PLACE_VISITED, node);
      if (mapGet(IN_PLACE_RETURNS, node) === void 0) mapSet(IN_PLACE_RETURNS, node, 0);
    };
    const _isPatchLinkageAttribute = function _isPatchLinkageAttribute2(lcName, lcTag) {
      if (!SAFE_FOR_XML) return false;
      if (lcName === "patchsrc") return true;
      return lcName === "for" && lcTag !== "label" && lcTag !== "output";
    };
    const _neutralizePatchLinkage = function _neutralizePatchLinkage2(root) {
      if (!SAFE_FOR_XML) return;
      _walkTree(root, (node) => {
        const nodeType = _readNodeType(node);
        if (nodeType === NODE_TYPE.processingInstruction || nodeType === NODE_TYPE.comment && regExpTest(COMMENT_MARKUP_PROBE, node.data)) {
          try {
            remove(node);
          } catch (_2) {
          }
          return false;
        }
        if (nodeType === NODE_TYPE.element) {
          const element = node;
          const lcTag = transformCaseFunc(_readNodeName(node));
          try {
            if (element.hasAttribute && element.hasAttribute("patchsrc")) element.removeAttribute("patchsrc");
            if (element.hasAttribute && element.hasAttribute("for") && _isPatchLinkageAttribute("for", lcTag)) element.removeAttribute("for");
          } catch (_2) {
          }
        }
        return true;
      });
    };
    const _initDocument = function _initDocument2(dirty) {
      let doc = null;
      let leadingWhitespace = null;
      if (FORCE_BODY) dirty = "<remove></remove>" + dirty;
      else {
        const matches = stringMatch(dirty, LEADING_WHITESPACE);
        leadingWhitespace = matches && matches[0];
      }
      if (PARSER_MEDIA_TYPE === "application/xhtml+xml" && NAMESPACE === HTML_NAMESPACE) dirty = '<html xmlns="http://www.w3.org/1999/xhtml"><head></head><body>' + dirty + "</body></html>";
      const dirtyPayload = trustedTypesPolicy ? _createTrustedHTML(dirty) : dirty;
      if (NAMESPACE === HTML_NAMESPACE) try {
        doc = new DOMParser().parseFromString(dirtyPayload, PARSER_MEDIA_TYPE);
      } catch (_2) {
      }
      if (!doc || !doc.documentElement) {
        doc = implementation.createDocument(NAMESPACE, "template", null);
        try {
          doc.documentElement.innerHTML = IS_EMPTY_INPUT ? emptyHTML : dirtyPayload;
        } catch (_2) {
        }
      }
      const body = doc.body || doc.documentElement;
      if (dirty && leadingWhitespace) body.insertBefore(document2.createTextNode(leadingWhitespace), body.childNodes[0] || null);
      if (NAMESPACE === HTML_NAMESPACE) return getElementsByTagName.call(doc, WHOLE_DOCUMENT ? "html" : "body")[0];
      return WHOLE_DOCUMENT ? doc.documentElement : body;
    };
    const _createNodeIterator = function _createNodeIterator2(root) {
      let characterDataOnly = arguments.length > 1 && arguments[1] !== void 0 ? arguments[1] : false;
      const doc = getOwnerDocument ? getOwnerDocument(root) : root.ownerDocument;
      return createNodeIterator.call(doc || root, root, (characterDataOnly ? 0 : NodeFilter.SHOW_ELEMENT) | NodeFilter.SHOW_COMMENT | NodeFilter.SHOW_TEXT | NodeFilter.SHOW_PROCESSING_INSTRUCTION | NodeFilter.SHOW_CDATA_SECTION, null);
    };
    const _stripTemplateExpressions = function _stripTemplateExpressions2(value) {
      value = stringReplace(value, MUSTACHE_EXPR$1, " ");
      value = stringReplace(value, ERB_EXPR$1, " ");
      value = stringReplace(value, TMPLIT_EXPR$1, " ");
      return value;
    };
    const _scrubTemplateExpressions2 = function _scrubTemplateExpressions(node) {
      var _node$querySelectorAl;
      _scrubOwnCharacterData(node);
      const templates = (_node$querySelectorAl = node.querySelectorAll) === null || _node$querySelectorAl === void 0 ? void 0 : _node$querySelectorAl.call(node, "template");
      if (templates) arrayForEach(templates, (tmpl) => {
        if (_isDocumentFragment(tmpl.content)) _scrubTemplateExpressions2(tmpl.content);
      });
    };
    const TABLE_STRUCTURE = "table,tbody,thead,tfoot,tr,colgroup";
    const TABLE_CONTENT = addToSet({}, [
      "caption",
      "colgroup",
      "col",
      "thead",
      "tbody",
      "tfoot",
      "tr",
      "td",
      "th",
      "style",
      "script",
      "template"
    ]);
    const _fosterTableContent = function _fosterTableContent2(root) {
      var _root$querySelectorAl;
      if (PARSER_MEDIA_TYPE === "application/xhtml+xml") return;
      const structures = (_root$querySelectorAl = root.querySelectorAll) === null || _root$querySelectorAl === void 0 ? void 0 : _root$querySelectorAl.call(root, TABLE_STRUCTURE);
      if (!structures || structures.length === 0) return;
      arrayForEach(structures, (structure) => {
        arrayForEach(arraySlice(getChildNodes(structure)), (child) => {
          const nodeType = _readNodeType(child);
          if (!(nodeType === NODE_TYPE.text ? regExpTest(NON_WHITESPACE, child.data) : nodeType === NODE_TYPE.element && !TABLE_CONTENT[stringToLowerCase(_readNodeName(child))])) return;
          let table = structure;
          while (table && stringToLowerCase(_readNodeName(table)) !== "table") table = table === root ? null : getParentNode(table);
          const tableParent = table && table !== root ? getParentNode(table) : null;
          if (tableParent) try {
            tableParent.insertBefore(child, table);
          } catch (_2) {
          }
        });
      });
    };
    const _scrubOwnCharacterData = function _scrubOwnCharacterData2(node) {
      _fosterTableContent(node);
      node.normalize();
      const walker = _createNodeIterator(node, true);
      let previousText = null;
      let currentNode = walker.nextNode();
      while (currentNode) {
        let data = currentNode.data;
        if (regExpTest(NUL, data)) {
          data = stringReplace(data, NUL, "");
          currentNode.data = data;
        }
        if (regExpTest(TMPL_MARKER, data)) {
          data = _stripTemplateExpressions(data);
          currentNode.data = data;
        }
        if (data && _readNodeType(currentNode) === NODE_TYPE.text) {
          if (previousText) {
            const tail = previousText.data;
            const boundary = tail[tail.length - 1] + data[0];
            if (regExpTest(TMPL_MARKER, boundary)) previousText.data = _stripTemplateExpressions(tail + data[0]);
          }
          previousText = currentNode;
        }
        currentNode = walker.nextNode();
      }
    };
    const _isClobbered = function _isClobbered2(element) {
      const realTagName = getNodeName ? getNodeName(element) : null;
      if (typeof realTagName !== "string") return false;
      if (transformCaseFunc(realTagName) !== "form") return false;
      return typeof element.nodeName !== "string" || typeof element.textContent !== "string" || typeof element.removeChild !== "function" || element.attributes !== getAttributes(element) || typeof element.removeAttribute !== "function" || typeof element.removeAttributeNode !== "function" || typeof element.getAttributeNode !== "function" || typeof element.setAttribute !== "function" || typeof element.namespaceURI !== "string" || typeof element.insertBefore !== "function" || typeof element.hasChildNodes !== "function" || element.nodeType !== getNodeType(element) || element.childNodes !== getChildNodes(element);
    };
    const _nodeTypeOf = function _nodeTypeOf2(value) {
      if (!getNodeType || typeof value !== "object" || value === null) return null;
      try {
        const nodeType = getNodeType(value);
        return typeof nodeType === "number" ? nodeType : null;
      } catch (_2) {
        return null;
      }
    };
    const _isDocumentFragment = function _isDocumentFragment2(value) {
      return _nodeTypeOf(value) === NODE_TYPE.documentFragment;
    };
    const _isNode = function _isNode2(value) {
      return _nodeTypeOf(value) !== null;
    };
    function _executeHooks(hooks3, currentNode, data) {
      if (hooks3.length === 0) return;
      arrayForEach(hooks3, (hook2) => {
        hook2.call(DOMPurify, currentNode, data, CONFIG);
      });
    }
    const _isMalformedElement = function _isMalformedElement2(currentNode, tagName) {
      const isVoid = Boolean(VOID_ELEMENTS[tagName]);
      const literal = Boolean(LITERAL_TEXT_ELEMENTS[tagName]);
      if (!isVoid && !literal && !ESCAPABLE_TEXT_ELEMENTS[tagName]) return false;
      if (_readNamespaceURI(currentNode) !== HTML_NAMESPACE) return false;
      if (isVoid) return currentNode.hasChildNodes();
      if (_isNode(currentNode.firstElementChild)) return true;
      return literal && typeof currentNode.textContent === "string" && regExpTest(ELEMENT_MARKUP_PROBE, currentNode.textContent);
    };
    const _isUnsafeNode = function _isUnsafeNode2(currentNode, tagName, nodeType) {
      if (SAFE_FOR_XML && nodeType === NODE_TYPE.element && currentNode.hasChildNodes() && !_isNode(currentNode.firstElementChild) && regExpTest(ELEMENT_MARKUP_PROBE, currentNode.textContent) && regExpTest(ELEMENT_MARKUP_PROBE, currentNode.innerHTML)) return true;
      if (SAFE_FOR_XML && nodeType === NODE_TYPE.element && _isMalformedElement(currentNode, tagName)) return true;
      if (nodeType === NODE_TYPE.processingInstruction) return true;
      if (SAFE_FOR_XML && nodeType === NODE_TYPE.comment && regExpTest(COMMENT_UNSAFE, currentNode.data)) return true;
      return false;
    };
    const _matchesNameCheck = function _matchesNameCheck2(check, name) {
      if (check instanceof RegExp) return regExpTest(check, name);
      if (check instanceof Function) {
        for (var _len = arguments.length, args = new Array(_len > 2 ? _len - 2 : 0), _key = 2; _key < _len; _key++) args[_key - 2] = arguments[_key];
        return Boolean(check(name, ...args));
      }
      return false;
    };
    const _sanitizeDisallowedNode = function _sanitizeDisallowedNode2(currentNode, tagName, root) {
      if (!FORBID_TAGS[tagName] && _isBasicCustomElement(tagName) && _matchesNameCheck(CUSTOM_ELEMENT_HANDLING.tagNameCheck, tagName)) return false;
      if (KEEP_CONTENT && !FORBID_CONTENTS[tagName] && !FORBID_CONTENTS[stringToLowerCase(tagName)]) {
        const parentNode = getParentNode(currentNode);
        const childNodes = getChildNodes(currentNode);
        if (childNodes && parentNode) {
          const childCount = childNodes.length;
          for (let i = childCount - 1; i >= 0; --i) {
            const hoisted = currentNode === root ? cloneNode(childNodes[i], true) : childNodes[i];
            parentNode.insertBefore(hoisted, getNextSibling(currentNode));
          }
        }
      }
      _forceRemove(currentNode);
      return true;
    };
    const _forkSharedAllowlist = function _forkSharedAllowlist2(hookList, set, defaultSet, setConfigSet) {
      if (hookList.length === 0) return set;
      return set === defaultSet || set === setConfigSet ? cloneSet(set) : set;
    };
    const _handleHookDetachedNode = function _handleHookDetachedNode2(currentNode, root) {
      if (currentNode === root || getParentNode(currentNode) !== null) return false;
      if (IN_PLACE) _neutralizeSubtree(currentNode);
      _unmarkVisited(currentNode);
      return true;
    };
    const _sanitizeElements = function _sanitizeElements2(currentNode, root) {
      _markVisited(currentNode);
      _executeHooks(hooks2.beforeSanitizeElements, currentNode, null);
      if (_handleHookDetachedNode(currentNode, root)) return true;
      if (_isClobbered(currentNode)) {
        _forceRemove(currentNode);
        return true;
      }
      const tagName = transformCaseFunc(_readNodeName(currentNode));
      const nodeType = _readNodeType(currentNode);
      ALLOWED_TAGS = _forkSharedAllowlist(hooks2.uponSanitizeElement, ALLOWED_TAGS, DEFAULT_ALLOWED_TAGS, SET_CONFIG_ALLOWED_TAGS);
      _executeHooks(hooks2.uponSanitizeElement, currentNode, {
        tagName,
        allowedTags: ALLOWED_TAGS
      });
      if (_handleHookDetachedNode(currentNode, root)) return true;
      if (_isUnsafeNode(currentNode, tagName, nodeType)) {
        _forceRemove(currentNode);
        return true;
      }
      if ((FORBID_TAGS[tagName] || !(EXTRA_ELEMENT_HANDLING.tagCheck instanceof Function && EXTRA_ELEMENT_HANDLING.tagCheck(tagName)) && !ALLOWED_TAGS[tagName]) && _sanitizeDisallowedNode(currentNode, tagName, root)) return true;
      if (nodeType === NODE_TYPE.element && !_checkValidNamespace(currentNode)) {
        _forceRemove(currentNode);
        return true;
      }
      if ((tagName === "noscript" || tagName === "noembed" || tagName === "noframes") && regExpTest(FALLBACK_TAG_CLOSE, currentNode.innerHTML)) {
        _forceRemove(currentNode);
        return true;
      }
      if (SAFE_FOR_TEMPLATES && nodeType === NODE_TYPE.text) {
        const text2 = currentNode.textContent;
        const content = _stripTemplateExpressions(text2);
        if (text2 !== content) {
          arrayPush(DOMPurify.removed, { element: currentNode.cloneNode() });
          currentNode.textContent = content;
        }
      }
      _executeHooks(hooks2.afterSanitizeElements, currentNode, null);
      return _handleHookDetachedNode(currentNode, root);
    };
    const _isValidAttribute = function _isValidAttribute2(lcTag, lcName, value) {
      if (FORBID_ATTR[lcName]) return false;
      if (_isPatchLinkageAttribute(lcName, lcTag)) return false;
      if (SANITIZE_DOM && (lcName === "id" || lcName === "name") && (value in document2 || value in formElement)) return false;
      const nameIsPermitted = ALLOWED_ATTR[lcName] || EXTRA_ELEMENT_HANDLING.attributeCheck instanceof Function && EXTRA_ELEMENT_HANDLING.attributeCheck(lcName, lcTag);
      if (ALLOW_DATA_ATTR && regExpTest(DATA_ATTR$1, lcName)) return true;
      if (ALLOW_ARIA_ATTR && regExpTest(ARIA_ATTR$1, lcName)) return true;
      if (!nameIsPermitted) return _isBasicCustomElement(lcTag) && _matchesNameCheck(CUSTOM_ELEMENT_HANDLING.tagNameCheck, lcTag) && _matchesNameCheck(CUSTOM_ELEMENT_HANDLING.attributeNameCheck, lcName, lcTag) || lcName === "is" && CUSTOM_ELEMENT_HANDLING.allowCustomizedBuiltInElements && _matchesNameCheck(CUSTOM_ELEMENT_HANDLING.tagNameCheck, value);
      if (URI_SAFE_ATTRIBUTES[lcName]) return true;
      const compactValue = stringReplace(value, ATTR_WHITESPACE$1, "");
      if (regExpTest(IS_ALLOWED_URI$1, compactValue)) return true;
      if ((lcName === "src" || lcName === "xlink:href" || lcName === "href") && lcTag !== "script" && stringIndexOf(value, "data:") === 0 && DATA_URI_TAGS[lcTag]) return true;
      if (ALLOW_UNKNOWN_PROTOCOLS && !regExpTest(IS_SCRIPT_OR_DATA$1, compactValue)) return true;
      return !value;
    };
    const RESERVED_CUSTOM_ELEMENT_NAMES = addToSet({}, [
      "annotation-xml",
      "color-profile",
      "font-face",
      "font-face-format",
      "font-face-name",
      "font-face-src",
      "font-face-uri",
      "missing-glyph"
    ]);
    const _isBasicCustomElement = function _isBasicCustomElement2(tagName) {
      return !RESERVED_CUSTOM_ELEMENT_NAMES[stringToLowerCase(tagName)] && regExpTest(CUSTOM_ELEMENT$1, tagName);
    };
    const _applyTrustedTypesToAttribute = function _applyTrustedTypesToAttribute2(lcTag, lcName, namespaceURI, value) {
      if (trustedTypesPolicy && typeof trustedTypes === "object" && typeof trustedTypes.getAttributeType === "function" && !namespaceURI) switch (trustedTypes.getAttributeType(lcTag, lcName)) {
        case "TrustedHTML":
          return _createTrustedHTML(value);
        case "TrustedScriptURL":
          return _createTrustedScriptURL(value);
      }
      return value;
    };
    const _setAttributeValue = function _setAttributeValue2(currentNode, name, namespaceURI, value) {
      try {
        if (namespaceURI) currentNode.setAttributeNS(namespaceURI, name, value);
        else currentNode.setAttribute(name, value);
        if (_isClobbered(currentNode)) {
          _forceRemove(currentNode);
          return false;
        }
        return true;
      } catch (_2) {
        _removeAttribute(name, currentNode);
        return false;
      }
    };
    const _isUnsafeAttributeValue = function _isUnsafeAttributeValue2(name, value) {
      if (SAFE_FOR_XML && regExpTest(ATTR_VALUE_BREAKOUT, value)) return true;
      return stringToLowerCase(name) === "attributename" && stringIndexOf(value, "href") !== -1;
    };
    const _sanitizeAttributes = function _sanitizeAttributes2(currentNode, root) {
      _executeHooks(hooks2.beforeSanitizeAttributes, currentNode, null);
      if (_handleHookDetachedNode(currentNode, root)) return;
      const attributes = _readAttributes(currentNode);
      if (!attributes || _isClobbered(currentNode)) return;
      ALLOWED_ATTR = _forkSharedAllowlist(hooks2.uponSanitizeAttribute, ALLOWED_ATTR, DEFAULT_ALLOWED_ATTR, SET_CONFIG_ALLOWED_ATTR);
      const hookEvent = {
        attrName: "",
        attrValue: "",
        keepAttr: true,
        allowedAttributes: ALLOWED_ATTR,
        forceKeepAttr: void 0
      };
      let l2 = attributes.length;
      const lcTag = transformCaseFunc(_readNodeName(currentNode));
      while (l2--) {
        const attr = attributes[l2];
        if (!attr) continue;
        const name = attr.name, namespaceURI = attr.namespaceURI, attrValue = attr.value;
        const lcName = transformCaseFunc(name);
        const initValue = attrValue;
        let value = name === "value" ? initValue : stringTrim(initValue);
        let recreatedNamedProp = false;
        hookEvent.attrName = lcName;
        hookEvent.attrValue = value;
        hookEvent.keepAttr = true;
        hookEvent.forceKeepAttr = void 0;
        _executeHooks(hooks2.uponSanitizeAttribute, currentNode, hookEvent);
        value = hookEvent.attrValue;
        if (SANITIZE_NAMED_PROPS && (lcName === "id" || lcName === "name") && stringIndexOf(value, SANITIZE_NAMED_PROPS_PREFIX) !== 0) {
          _removeAttribute(name, currentNode, attr);
          value = SANITIZE_NAMED_PROPS_PREFIX + value;
          recreatedNamedProp = true;
        }
        if (_isUnsafeAttributeValue(name, value)) {
          _removeAttribute(name, currentNode, attr);
          continue;
        }
        if (hookEvent.forceKeepAttr) continue;
        if (!hookEvent.keepAttr) {
          _removeAttribute(name, currentNode, attr);
          continue;
        }
        if (!ALLOW_SELF_CLOSE_IN_ATTR && regExpTest(SELF_CLOSING_TAG, value)) {
          _removeAttribute(name, currentNode, attr);
          continue;
        }
        if (SAFE_FOR_TEMPLATES) value = _stripTemplateExpressions(value);
        if (!_isValidAttribute(lcTag, lcName, value)) {
          _removeAttribute(name, currentNode, attr);
          continue;
        }
        value = _applyTrustedTypesToAttribute(lcTag, lcName, namespaceURI, value);
        if (value !== initValue) {
          if (_setAttributeValue(currentNode, name, namespaceURI, value) && recreatedNamedProp) arrayPop(DOMPurify.removed);
        }
      }
      _executeHooks(hooks2.afterSanitizeAttributes, currentNode, null);
      _handleHookDetachedNode(currentNode, root);
    };
    const _sanitizeNode = function _sanitizeNode2(node, root) {
      _sanitizeElements(node, root);
      _sanitizeAttributes(node, root);
      if (_isDocumentFragment(node.content)) _sanitizeShadowDOM2(node.content);
    };
    const _sanitizeShadowDOM2 = function _sanitizeShadowDOM(fragment) {
      let shadowNode = null;
      const shadowIterator = _createNodeIterator(fragment);
      _executeHooks(hooks2.beforeSanitizeShadowDOM, fragment, null);
      while (shadowNode = shadowIterator.nextNode()) {
        _executeHooks(hooks2.uponSanitizeShadowNode, shadowNode, null);
        _sanitizeNode(shadowNode, fragment);
        if (_readNodeType(shadowNode) === NODE_TYPE.element) {
          const innerSr = getShadowRoot(shadowNode);
          if (_isDocumentFragment(innerSr)) {
            _sanitizeAttachedShadowRoots(innerSr);
            _sanitizeShadowDOM2(innerSr);
          }
        }
      }
      if (SAFE_FOR_TEMPLATES) _scrubOwnCharacterData(fragment);
      _executeHooks(hooks2.afterSanitizeShadowDOM, fragment, null);
    };
    const _sanitizeAttachedShadowRoots = function _sanitizeAttachedShadowRoots2(root) {
      const stack = [{
        node: root,
        shadow: null
      }];
      while (stack.length > 0) {
        const item = stack.pop();
        if (item.shadow) {
          _sanitizeShadowDOM2(item.shadow);
          continue;
        }
        const node = item.node;
        const isElement = _readNodeType(node) === NODE_TYPE.element;
        const childNodes = getChildNodes(node);
        if (childNodes) for (let i = childNodes.length - 1; i >= 0; --i) stack.push({
          node: childNodes[i],
          shadow: null
        });
        if (isElement) {
          const rootName = getNodeName ? getNodeName(node) : null;
          if (typeof rootName === "string" && transformCaseFunc(rootName) === "template") {
            const content = node.content;
            if (_isDocumentFragment(content)) stack.push({
              node: content,
              shadow: null
            });
          }
        }
        if (isElement) {
          const sr = getShadowRoot(node);
          if (_isDocumentFragment(sr)) stack.push({
            node: null,
            shadow: sr
          }, {
            node: sr,
            shadow: null
          });
        }
      }
    };
    const _sanitize = function _sanitize2(dirty) {
      let cfg = arguments.length > 1 && arguments[1] !== void 0 ? arguments[1] : {};
      let body = null;
      let importedNode = null;
      let currentNode = null;
      let returnNode = null;
      IS_EMPTY_INPUT = !dirty;
      if (IS_EMPTY_INPUT) dirty = "<!-->";
      if (typeof dirty !== "string" && !_isNode(dirty)) {
        dirty = stringifyValue(dirty);
        if (typeof dirty !== "string") throw typeErrorCreate("dirty is not a string, aborting");
      }
      if (!DOMPurify.isSupported) return dirty;
      if (SET_CONFIG) {
        ALLOWED_TAGS = SET_CONFIG_ALLOWED_TAGS;
        ALLOWED_ATTR = SET_CONFIG_ALLOWED_ATTR;
      } else _parseConfig(cfg);
      ACTIVE_CONFIG = CONFIG;
      DOMPurify.removed = [];
      const inPlace = IN_PLACE && typeof dirty !== "string" && _isNode(dirty);
      let inPlaceNodes = [];
      const outerVisited = IN_PLACE_VISITED;
      const outerReturns = IN_PLACE_RETURNS;
      if (inPlace) {
        _neutralizePatchLinkage(dirty);
        inPlaceNodes = _collectLiveNodes(dirty);
        const nn = _readNodeName(dirty);
        if (typeof nn === "string") {
          const tagName = transformCaseFunc(nn);
          if (!ALLOWED_TAGS[tagName] || FORBID_TAGS[tagName]) {
            _failClosed(dirty, inPlaceNodes);
            throw typeErrorCreate("root node is forbidden and cannot be sanitized in-place");
          }
        }
        if (_isClobbered(dirty)) {
          _failClosed(dirty, inPlaceNodes);
          throw typeErrorCreate("root node is clobbered and cannot be sanitized in-place");
        }
        IN_PLACE_VISITED = setCreate();
        IN_PLACE_RETURNS = mapCreate();
      } else if (_isNode(dirty)) {
        body = _initDocument("<!---->");
        importedNode = body.ownerDocument.importNode(dirty, true);
        if (importedNode.nodeType === NODE_TYPE.element && importedNode.nodeName === "BODY") body = importedNode;
        else if (importedNode.nodeName === "HTML") body = importedNode;
        else body.appendChild(importedNode);
        _sanitizeAttachedShadowRoots(body);
      } else {
        if (!RETURN_DOM && !SAFE_FOR_TEMPLATES && !WHOLE_DOCUMENT && dirty.indexOf("<") === -1) return _signOutput(dirty);
        body = _initDocument(dirty);
        if (!body) return RETURN_DOM ? null : RETURN_TRUSTED_TYPE ? emptyHTML : "";
      }
      if (body && FORCE_BODY) _forceRemove(body.firstChild);
      const walkRoot = inPlace ? dirty : body;
      try {
        if (inPlace) _sanitizeAttachedShadowRoots(dirty);
        const nodeIterator = _createNodeIterator(walkRoot);
        while (currentNode = nodeIterator.nextNode()) _sanitizeNode(currentNode, walkRoot);
        if (inPlace) _sanitizeUnvisitedNodes(dirty, inPlaceNodes);
      } catch (error) {
        if (inPlace) _failClosed(dirty, inPlaceNodes);
        throw error;
      } finally {
        IN_PLACE_VISITED = outerVisited;
        IN_PLACE_RETURNS = outerReturns;
      }
      if (inPlace) {
        if (_neutralizeDiscarded(dirty, inPlaceNodes)) throw typeErrorCreate("a node selected for removal could not be safely returned; refusing to sanitize in place");
        if (SAFE_FOR_TEMPLATES) _scrubTemplateExpressions2(dirty);
        return dirty;
      }
      if (RETURN_DOM) {
        if (SAFE_FOR_TEMPLATES) _scrubTemplateExpressions2(body);
        if (RETURN_DOM_FRAGMENT) {
          returnNode = createDocumentFragment.call(body.ownerDocument);
          while (body.firstChild) returnNode.appendChild(body.firstChild);
        } else returnNode = body;
        if (ALLOWED_ATTR.shadowroot || ALLOWED_ATTR.shadowrootmode) returnNode = importNode.call(originalDocument, returnNode, true);
        return returnNode;
      }
      if (SAFE_FOR_TEMPLATES) _scrubOwnCharacterData(body);
      let serializedHTML = WHOLE_DOCUMENT ? body.outerHTML : body.innerHTML;
      if (WHOLE_DOCUMENT && ALLOWED_TAGS["!doctype"] && body.ownerDocument && body.ownerDocument.doctype && body.ownerDocument.doctype.name && regExpTest(DOCTYPE_NAME, body.ownerDocument.doctype.name)) serializedHTML = "<!DOCTYPE " + body.ownerDocument.doctype.name + ">\n" + serializedHTML;
      return _signOutput(serializedHTML);
    };
    DOMPurify.sanitize = function(dirty) {
      let cfg = arguments.length > 1 && arguments[1] !== void 0 ? arguments[1] : {};
      const outerConfig = ACTIVE_CONFIG;
      const outerTags = ALLOWED_TAGS;
      const outerAttr = ALLOWED_ATTR;
      const outerRemoved = DOMPurify.removed;
      ACTIVE_CONFIG = null;
      try {
        return _sanitize(dirty, cfg);
      } finally {
        ACTIVE_CONFIG = outerConfig;
        if (outerConfig) {
          if (!SET_CONFIG) _parseConfig(outerConfig);
          ALLOWED_TAGS = outerTags;
          ALLOWED_ATTR = outerAttr;
          DOMPurify.removed = outerRemoved;
        }
      }
    };
    DOMPurify.setConfig = function() {
      let cfg = arguments.length > 0 && arguments[0] !== void 0 ? arguments[0] : {};
      _parseConfig(cfg);
      SET_CONFIG = true;
      SET_CONFIG_ALLOWED_TAGS = ALLOWED_TAGS;
      SET_CONFIG_ALLOWED_ATTR = ALLOWED_ATTR;
    };
    DOMPurify.clearConfig = function() {
      CONFIG = null;
      SET_CONFIG = false;
      SET_CONFIG_ALLOWED_TAGS = null;
      SET_CONFIG_ALLOWED_ATTR = null;
      trustedTypesPolicy = defaultTrustedTypesPolicy;
      emptyHTML = "";
    };
    DOMPurify.isValidAttribute = function(tag, attr, value) {
      if (!CONFIG) _parseConfig({});
      const lcTag = transformCaseFunc(tag);
      const lcName = transformCaseFunc(attr);
      if (typeof value === "string" && (_isUnsafeAttributeValue(attr, value) || !ALLOW_SELF_CLOSE_IN_ATTR && regExpTest(SELF_CLOSING_TAG, value))) return false;
      return _isValidAttribute(lcTag, lcName, value);
    };
    DOMPurify.addHook = function(entryPoint, hookFunction) {
      if (typeof hookFunction !== "function") return;
      if (!objectHasOwnProperty(hooks2, entryPoint)) return;
      arrayPush(hooks2[entryPoint], hookFunction);
    };
    DOMPurify.removeHook = function(entryPoint, hookFunction) {
      if (!objectHasOwnProperty(hooks2, entryPoint)) return;
      if (hookFunction !== void 0) {
        const index = arrayLastIndexOf(hooks2[entryPoint], hookFunction);
        return index === -1 ? void 0 : arraySplice(hooks2[entryPoint], index, 1)[0];
      }
      return arrayPop(hooks2[entryPoint]);
    };
    DOMPurify.removeHooks = function(entryPoint) {
      if (!objectHasOwnProperty(hooks2, entryPoint)) return;
      hooks2[entryPoint] = [];
    };
    DOMPurify.removeAllHooks = function() {
      hooks2 = _createHooksMap();
    };
    return DOMPurify;
  }
  var purify_default = createDOMPurify();

  // node_modules/marked/lib/marked.esm.js
  function G() {
    return { async: false, breaks: false, extensions: null, gfm: true, hooks: null, pedantic: false, renderer: null, silent: false, tokenizer: null, walkTokens: null };
  }
  var _ = G();
  function pe(l2) {
    _ = l2;
  }
  var v = { exec: () => null };
  function H(l2) {
    let e = [];
    return (t) => {
      let n = Math.max(0, Math.min(3, t - 1)), r = e[n];
      return r || (r = l2(n), e[n] = r), r;
    };
  }
  function d(l2, e = "") {
    let t = typeof l2 == "string" ? l2 : l2.source, n = { replace: (r, s) => {
      let o = typeof s == "string" ? s : s.source;
      return o = o.replace(T.caret, "$1"), t = t.replace(r, o), n;
    }, getRegex: () => new RegExp(t, e) };
    return n;
  }
  var $e = ((l2 = "") => {
    try {
      return !!new RegExp("(?<=1)(?<!1)" + l2);
    } catch {
      return false;
    }
  })();
  var Ce = "^ *([^\\n ].*)\\n {0,3}((?:\\| *)?:?-+:? *(?:\\| *:?-+:? *)*(?:\\| *)?)";
  var T = { codeRemoveIndent: /^(?: {0,3}\t| {1,4})/gm, listInterruptsParagraph: /^ {0,3}(?:[*+-]|1[.)])[ \t]+[^ \t\n]/, outputLinkReplace: /\\([\[\]])/g, indentCodeCompensation: /^(\s+)(?:```)/, beginningSpace: /^\s+/, endingHash: /#$/, startingSpaceChar: /^ /, endingSpaceChar: / $/, endingSpaceTabChar: /[ \t]$/, nonSpaceChar: /[^ ]/, newLineCharGlobal: /\n/g, tabCharGlobal: /\t/g, leadingSpaceTab: /^[ \t]+/, multipleSpaceGlobal: /\s+/g, blankLine: /^[ \t]*$/, doubleBlankLine: /\n[ \t]*\n[ \t]*$/, textIndentedContinuation: /^(?:\n(?: {4}| {0,3}\t)[ \t]*[^ \t\n][^\n]*)+/, blockquoteStart: /^ {0,3}>/, blockquoteSetextReplace: /\n {0,3}((?:=+|-+)[ \t]*)(?=\n|$)/g, blockquoteSetextReplace2: /^ {0,3}>[ \t]?/gm, blockquoteMarkerWhitespace: /^( {0,3}>)(\t[ \t]*)/gm, blockquoteFenceOpen: /^ {0,3}(`{3,}(?=[^`]*$)|~{3,})/, blockquoteFenceClose: /^ {0,3}(`{3,}|~{3,})[ \t]*$/, blockquoteListItemStart: /^ {0,3}(?:[*+-]|\d{1,9}[.)])(?:[ \t]|$)/, nestedBlockMarker: /^ {0,3}(?:(?:[*+-]|\d{1,9}[.)])(?: |$)|> ?)/, listReplaceNesting: /^ {1,4}(?=( {4})*[^ ])/g, listIsTask: /^\[[ xX]\][ \t]+\S/, listReplaceTask: /^\[[ xX]\][ \t]+/, listTaskCheckbox: /\[[ xX]\]/, anyLine: /\n.*\n/, hrefBrackets: /^<(.*)>$/, tableHeader: new RegExp(Ce + "(?:\\n|$)"), tableDelimiter: /[:|]/, tableAlignChars: /^\||\| *$/g, tableRowBlankLine: /\n[ \t]*$/, tableAlignRight: /^ *-+: *$/, tableAlignCenter: /^ *:-+: *$/, tableAlignLeft: /^ *:-+ *$/, startATag: /^<a /i, endATag: /^<\/a>/i, startPreScriptTag: /^<(pre|code|kbd|script)(\s|>)/i, endPreScriptTag: /^<\/(pre|code|kbd|script)(\s|>)/i, startAngleBracket: /^</, endAngleBracket: />$/, pedanticHrefTitle: /^([^'"]*[^\s])\s+(['"])(.*)\2/, unicodeAlphaNumeric: /[\p{L}\p{N}]/u, numericCharacterReference: /&#(?:(\d{1,7})|[Xx]([A-Fa-f0-9]{1,6}));/, numericCharacterReferenceOrAmpersand: /&#(?:(\d{1,7})|[Xx]([A-Fa-f0-9]{1,6}));|&(?!(#\d{1,7}|#[Xx][a-fA-F0-9]{1,6}|\w+);)/g, escapeTest: /[&<>"']/, escapeReplace: /[&<>"']/g, escapeTestNoEncode: /[<>"']|&(?!(#\d{1,7}|#[Xx][a-fA-F0-9]{1,6}|\w+);)/, escapeReplaceNoEncode: /[<>"']|&(?!(#\d{1,7}|#[Xx][a-fA-F0-9]{1,6}|\w+);)/g, caret: /(^|[^\[])\^/g, percentDecode: /%25/g, findPipe: /\|/g, splitPipe: / \|/, slashPipe: /\\\|/g, carriageReturn: /\r\n|\r/g, spaceLine: /^ +$/gm, notSpaceStart: /^\S*/, endingNewline: /\n$/, listItemRegex: (l2) => new RegExp(`^( {0,3}${l2})((?:[	 ][^\\n]*)?(?:\\n|$))`), nextBulletRegex: H((l2) => new RegExp(`^ {0,${l2}}(?:[*+-]|\\d{1,9}[.)])((?:[ 	][^\\n]*)?(?:\\n|$))`)), hrRegex: H((l2) => new RegExp(`^ {0,${l2}}((?:-[ 	]*){3,}|(?:_[ 	]*){3,}|(?:\\*[ 	]*){3,})(?:\\n+|$)`)), fencesBeginRegex: H((l2) => new RegExp(`^ {0,${l2}}(?:\`\`\`|~~~)`)), headingBeginRegex: H((l2) => new RegExp(`^ {0,${l2}}#{1,6}(?:\\s|$)`)), pedanticHeadingBeginRegex: H((l2) => new RegExp(`^ {0,${l2}}#`)), htmlBeginRegex: H((l2) => new RegExp(`^ {0,${l2}}(?:</?(?:${ge})(?:[ \\t]+|$|/?>)|<(?:(?:script|pre|style|textarea)(?:[\\s>]|$)|!--)|<\\?|<![A-Za-z]|<!\\[CDATA\\[)`, "i")), blockquoteBeginRegex: H((l2) => new RegExp(`^ {0,${l2}}>`)), nestedContainerMarkers: /^(?: {0,3}(?:(?:[*+-]|\d{1,9}[.)])[ \t]+|>[ \t]?))+/ };
  var Ue = /^(?:[ \t]*(?:\n|$))+/;
  var Ke = /^((?: {4}| {0,3}\t)[^\n]+(?:\n(?:[ \t]*(?:\n|$))*)?)+/;
  var Xe = /^ {0,3}(`{3,}(?=[^`\n]*(?:\n|$))|~{3,})([^\n]*)(?:\n|$)(?:|([\s\S]*?)(?:\n|$))(?: {0,3}(?:(?=`)\1`*|(?=~)\1~*)[ \t]*(?=\n|$)|$)/;
  var V = /^ {0,3}((?:-[\t ]*){3,}|(?:_[ \t]*){3,}|(?:\*[ \t]*){3,})(?:\n+|$)/;
  var Ve = /^ {0,3}(#{1,6})(?=\s|$)(.*)(?:\n+|$)/;
  var de = / {0,3}(?:[*+-]|\d{1,9}[.)])/;
  var ge = "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|meta|nav|noframes|ol|optgroup|option|p|param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul";
  var J = d(" {0,3}(?:</?(?:tag)(?:[ \\t]+|\\n|/?>)|<(?:(?:script|pre|style|textarea)(?:[\\s>]|$)|!--)|<\\?|<![A-Za-z]|<!\\[CDATA\\[)").replace("tag", ge).getRegex();
  var Le = /^(?!bull |blockCode|fences|blockquote|heading|html|table)((?:.|\n(?!\s*?\n|bull |fences|blockquote|heading|hr|html|table))+?)\n {0,3}(=+|-+)[ \t]*(?:\n+|$)/;
  var Ie = d(Le).replace(/bull/g, de).replace(/blockCode/g, /(?: {4}| {0,3}\t)/).replace(/fences/g, / {0,3}(?:`{3,}|~{3,})/).replace(/blockquote/g, / {0,3}>/).replace(/heading/g, / {0,3}#{1,6}(?:\s|$)/).replace(/hr/g, / {0,3}(?:(?:-[\t ]*){3,}|(?:_[ \t]*){3,}|(?:\*[ \t]*){3,})(?:\n+|$)/).replace(/\|table/g, "").replace(/html/g, J).getRegex();
  var Je = d(Le).replace(/bull/g, de).replace(/blockCode/g, /(?: {4}| {0,3}\t)/).replace(/fences/g, / {0,3}(?:`{3,}|~{3,})/).replace(/blockquote/g, / {0,3}>/).replace(/heading/g, / {0,3}#{1,6}(?:\s|$)/).replace(/hr/g, / {0,3}(?:(?:-[\t ]*){3,}|(?:_[ \t]*){3,}|(?:\*[ \t]*){3,})(?:\n+|$)/).replace(/table/g, / {0,3}\|?(?:[:\- ]*\|)+[\:\- ]*\n/).replace(/html/g, J).getRegex();
  var ke = /^([^\n]+(?:\n(?!hr|heading|lheading|blockquote|fences|list|html|table|[ \t]+\n)[^\n]+)*)/;
  var Ye = /^[^\n]+/;
  var fe = /(?!\s*\])(?:\\[\s\S]|[^\[\]\\\n]|\n(?![ \t]*\n))+/;
  var et = d(/^ {0,3}\[(label)\]: *(?:\n[ \t]*)?([^<\s][^\s]*|<(?:\\.|[^\n<>\\])*>)(?:(?: +(?:\n[ \t]*)?| *\n[ \t]*)(title))? *(?:\n+|$)/).replace("label", fe).replace("title", /(?:"(?:\\[\s\S]|[^"\\])*"|'(?:\\[\s\S]|[^'\\\n]|\n(?!\n))*'|\((?:\\[\s\S]|[^()\\])*\))/).getRegex();
  var tt = d(/^(bull)([ \t][^\n]*?)?(?:\n|$)/).replace(/bull/g, de).getRegex();
  var me = /<!--(?:-?>|[\s\S]*?(?:-->|$))/;
  var nt = d("^ {0,3}(?:<(script|pre|style|textarea)[\\s>][\\s\\S]*?(?:</\\1>[^\\n]*\\n*|$)|comment[^\\n]*(\\n+|$)|<\\?[\\s\\S]*?(?:\\?>[^\\n]*\\n*|$)|<![A-Z][\\s\\S]*?(?:>[^\\n]*\\n*|$)|<!\\[CDATA\\[[\\s\\S]*?(?:\\]\\]>[^\\n]*\\n*|$)|</?(tag)(?:[ \\t]+|\\n|/?>|$)[\\s\\S]*?(?:(?:\\n[ 	]*)+\\n|$)|<(?!(?:script|pre|style|textarea)(?![a-z0-9-]))([a-z][a-z0-9-]*)(?:attribute)*?[ \\t]*/?>(?=[ \\t]*(?:\\n|$))[\\s\\S]*?(?:(?:\\n[ 	]*)+\\n|$)|</[a-z][a-z0-9-]*\\s*>(?=[ \\t]*(?:\\n|$))[\\s\\S]*?(?:(?:\\n[ 	]*)+\\n|$))", "i").replace("comment", me).replace("tag", ge).replace("attribute", /[ \t]+[a-zA-Z:_][\w.:-]*(?:[ \t]*=[ \t]*"[^"\n]*"|[ \t]*=[ \t]*'[^'\n]*'|[ \t]*=[ \t]*[^\s"'=<>`]+)?/).getRegex();
  var Ae = (l2) => d(ke).replace("hr", V).replace("heading", " {0,3}#{1,6}(?:\\s|$)").replace("|lheading", "").replace("|table", "").replace("blockquote", " {0,3}>").replace("fences", " {0,3}(?:`{3,}(?=[^`\\n]*(?:\\n|$))|~~~)[^\\n]*(?:\\n|$)").replace("list", l2).replace("html", J).getRegex();
  var rt = Ae(/ {0,3}(?:[*+-]|1[.)])[ \t]+[^ \t\n]/);
  var st = Ae(/ {0,3}(?:[*+-]|\d{1,9}[.)])(?:[ \t]|\n|$)/);
  var ye = / {0,3}> ?(?:(?!blank)(paragraph)|[^\n]*)(?:\n|$)/;
  var it = d(/^(first)(?:next)*/).replace("first", d(ye).replace("blank", /[ \t]*(?:\n|$)| {4}/).getRegex()).replace("next", d(ye).replace("blank", /[ \t]*(?:\n|$)/).getRegex()).replace(/paragraph/g, st).getRegex();
  var xe = { blockquote: it, code: Ke, def: et, fences: Xe, heading: Ve, hr: V, html: nt, lheading: Ie, list: tt, newline: Ue, paragraph: rt, table: v, text: Ye };
  var ot = d(Ce + "(?:\\n((?:(?! *\\n|hr|heading|blockquote|code|fences|list|html).*(?:\\n|$))*)\\n*|$)").replace("hr", V).replace("heading", " {0,3}#{1,6}(?:\\s|$)").replace("blockquote", " {0,3}>").replace("code", "(?: {4}| {0,3}	)[^\\n]").replace("fences", " {0,3}(?:`{3,}(?=[^`\\n]*(?:\\n|$))|~~~)[^\\n]*(?:\\n|$)").replace("list", " {0,3}(?:[*+-]|1[.)])[ \\t]").replace("html", J).getRegex();
  var at = { ...xe, lheading: Je, table: ot, paragraph: d(ke).replace("hr", V).replace("heading", " {0,3}#{1,6}(?:\\s|$)").replace("|lheading", "").replace("table", T.tableHeader).replace("blockquote", " {0,3}>").replace("fences", " {0,3}(?:`{3,}(?=[^`\\n]*(?:\\n|$))|~~~)[^\\n]*(?:\\n|$)").replace("list", " {0,3}(?:[*+-]|1[.)])[ \\t]+[^ \\t\\n]").replace("html", J).getRegex() };
  var lt = { ...xe, html: d(`^ *(?:comment(?: *\\n|\\s*$)|<(tag)[\\s\\S]+?</\\1>(?: *\\n{2,}|\\s*$)|<tag(?:"[^"]*"|'[^']*'|\\s[^'"/>\\s]*)*?/?>(?: *\\n{2,}|\\s*$))`).replace("comment", me).replace(/tag/g, "(?!(?:a|em|strong|small|s|cite|q|dfn|abbr|data|time|code|var|samp|kbd|sub|sup|i|b|u|mark|ruby|rt|rp|bdi|bdo|span|br|wbr|ins|del|img)\\b)\\w+(?!:|[^\\w\\s@]*@)\\b").getRegex(), def: /^ *\[([^\]]+)\]: *<?([^\s>]+)>?(?: +(["(][^\n]+[")]))? *(?:\n+|$)/, heading: /^(#{1,6})(.*)(?:\n+|$)/, fences: v, lheading: /^(.+?)\n {0,3}(=+|-+) *(?:\n+|$)/, paragraph: d(ke).replace("hr", V).replace("heading", ` *#{1,6} *[^
]`).replace("|table", "").replace("blockquote", " {0,3}>").replace("|fences", "").replace("|list", "").replace("|html", "").replace("|tag", "").replace("lheading", Ie).getRegex() };
  var ut = /^\\([!"#$%&'()*+,\-./:;<=>?@\[\]\\^_`{|}~])/;
  var ct = /^(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/;
  var Ee = /^( {2,}|\\)\n(?!\s*$)[ \t]*/;
  var pt = /^(`+|[^`])(?:(?= {2,}\n)|[\s\S]*?(?:(?=[\\<!\[`*_]|\b_|$)|[^ ](?= {2,}\n)))/;
  var I = /[\p{P}\p{S}]/u;
  var N = /[\s\p{P}\p{S}]/u;
  var Y = /[^\s\p{P}\p{S}]/u;
  var ht = d(/^((?![*_])punctSpace)/, "u").replace(/punctSpace/g, N).getRegex();
  var dt = /[\p{Pi}\p{Ps}"']/u;
  var ze = /(?!~)[\p{P}\p{S}]/u;
  var gt = /(?!~)[\s\p{P}\p{S}]/u;
  var kt = /(?:[^\s\p{P}\p{S}]|~)/u;
  var ft = d(/link|precode-code|html/, "g").replace("link", /\[(?:[^\[\]`]|(?<a>`+)[^`]+\k<a>(?!`))*?\]\((?:\\[\s\S]|[^\\\(\)]|\((?:\\[\s\S]|[^\\\(\)])*\))*\)/).replace("precode-", $e ? "(?<!`)()" : "(^^|[^`])").replace("code", /(?<b>`+)[^`]+\k<b>(?!`)/).replace("html", /<(?! )[^<>]*?>/).getRegex();
  var Me = /^(?:\*+(?:((?!\*)punct)|([^\s*]))?)|^_+(?:((?!_)punct)|([^\s_]))?/;
  var mt = d(Me, "u").replace(/punct/g, I).getRegex();
  var xt = d(Me, "u").replace(/punct/g, ze).getRegex();
  var bt = /^(?:\*+(?:((?!\*)(?!openQuote)punct)|([^\s*]))?)|^_+(?:((?!_)(?!openQuote)punct)|([^\s_]))?/;
  var Rt = d(bt, "u").replace(/openQuote/g, dt).replace(/punct/g, I).getRegex();
  var Be = "^[^_*]*?__[^_*]*?\\*[^_*]*?(?=__)|[^*]+(?=[^*])|(?!\\*)punct(\\*+)(?=[\\s]|$)|notPunctSpace(\\*+)(?!\\*)(?=punctSpace|$)|(?!\\*)punctSpace(\\*+)(?=notPunctSpace)|[\\s](\\*+)(?!\\*)(?=punct)|(?!\\*)punct(\\*+)(?!\\*)(?=punct)|notPunctSpace(\\*+)(?=notPunctSpace)";
  var Tt = d(Be, "gu").replace(/notPunctSpace/g, Y).replace(/punctSpace/g, N).replace(/punct/g, I).getRegex();
  var Ot = d(Be, "gu").replace(/notPunctSpace/g, kt).replace(/punctSpace/g, gt).replace(/punct/g, ze).getRegex();
  var wt = "^[^_*]*?__[^_*]*?\\*[^_*]*?(?=__)|[^*]+(?=[^*])|(?!\\*)punct(\\*+)(?=[\\s]|$)|notPunctSpace(\\*+)(?!\\*)(?=punctSpace|$)|(?!\\*)[\\s](\\*+)(?=notPunctSpace)|[\\s](\\*+)(?!\\*)(?=punct)|(?!\\*)punct(\\*+)(?!\\*)(?=punct)|(?:(?!\\*)punct|notPunctSpace)(\\*+)(?!\\*)(?=notPunctSpace)";
  var Pt = d(wt, "gu").replace(/notPunctSpace/g, Y).replace(/punctSpace/g, N).replace(/punct/g, I).getRegex();
  var yt = d("^[^_*]*?\\*\\*[^_*]*?_[^_*]*?(?=\\*\\*)|[^_]+(?=[^_])|(?!_)punct(_+)(?=[\\s]|$)|notPunctSpace(_+)(?!_)(?=punctSpace|$)|(?!_)punctSpace(_+)(?=notPunctSpace)|[\\s](_+)(?!_)(?=punct)|(?!_)punct(_+)(?!_)(?=punct)", "gu").replace(/notPunctSpace/g, Y).replace(/punctSpace/g, N).replace(/punct/g, I).getRegex();
  var St = "^[^_*]*?\\*\\*[^_*]*?_[^_*]*?(?=\\*\\*)|[^_]+(?=[^_])|(?!_)punct(_+)(?=[\\s]|$)|notPunctSpace(_+)(?!_)(?=punctSpace|$)|(?!_)[\\s](_+)(?=notPunctSpace)|[\\s](_+)(?!_)(?=punct)|(?!_)punct(_+)(?!_)(?=punct)|(?:(?!_)punct|notPunctSpace)(_+)(?!_)(?=notPunctSpace)";
  var _t = d(St, "gu").replace(/notPunctSpace/g, Y).replace(/punctSpace/g, N).replace(/punct/g, I).getRegex();
  var $t = d(/^~~?(?:((?!~)punct)|[^\s~])/, "u").replace(/punct/g, I).getRegex();
  var Ct = "^[^~]+(?=[^~])|(?!~)punct(~~?)(?=[\\s]|$)|notPunctSpace(~~?)(?!~)(?=punctSpace|$)|(?!~)punctSpace(~~?)(?=notPunctSpace)|[\\s](~~?)(?!~)(?=punct)|(?!~)punct(~~?)(?!~)(?=punct)|notPunctSpace(~~?)(?=notPunctSpace)";
  var Lt = d(Ct, "gu").replace(/notPunctSpace/g, Y).replace(/punctSpace/g, N).replace(/punct/g, I).getRegex();
  var It = d(/\\(punct)/, "gu").replace(/punct/g, I).getRegex();
  var At = d(/(`+)(?:[^`]|[^`][\s\S]*?[^`])\1(?!`)|`+|\\(punct)/, "gu").replace(/punct/g, I).getRegex();
  var Et = d(/^<(scheme:[^\s\x00-\x1f<>]*|email)>/).replace("scheme", /[a-zA-Z][a-zA-Z0-9+.-]{1,31}/).replace("email", /[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+(@)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+(?![-_])/).getRegex();
  var zt = d(me).replace("(?:-->|$)", "-->").getRegex();
  var Mt = d("^comment|^</[a-zA-Z][a-zA-Z0-9-]*\\s*>|^<[a-zA-Z][a-zA-Z0-9-]*(?:attribute)*?\\s*/?>|^<\\?[\\s\\S]*?\\?>|^<![a-zA-Z]+\\s[\\s\\S]*?>|^<!\\[CDATA\\[[\\s\\S]*?\\]\\]>").replace("comment", zt).replace("attribute", /\s+[a-zA-Z:_][\w.:-]*(?:\s*=\s*"[^"]*"|\s*=\s*'[^']*'|\s*=\s*[^\s"'=<>`]+)?/).getRegex();
  var De = /\[(?:\\[\s\S]|[^\[\]\\])*\]/;
  var ie = d(/(?:\[(?:brackets|\\[\s\S]|[^\[\]\\])*\]|\\[\s\S]|`+(?!`)[^`]*?`+(?!`)|``+(?=\])|[^\[\]\\`])*?/).replace("brackets", De).getRegex();
  var oe = /\\[^ \t\n\x00-\x1f]|\\(?=[ \t\n])|[^ \t\n\x00-\x1f\\()]/;
  var Bt = d(/\((?:char)*\)/).replace("char", oe).getRegex();
  var Dt = d(/\((?:char|p1)*\)/).replace("char", oe).replace("p1", Bt).getRegex();
  var qt = d(/\((?:char|p2)*\)/).replace("char", oe).replace("p2", Dt).getRegex();
  var Ht = d(/(?!<)(?:char|p3)+/).replace("char", oe).replace("p3", qt).getRegex();
  var vt = d(/^!?\[(label)\]\([ \t\n]*(href)(?:(?:[ \t]+(?:\n[ \t]*)?|\n[ \t]*)(title))?[ \t\n]*\)/).replace("label", ie).replace("href", d(/<(?:\\.|[^\n<>\\])*>|bareHref|(?=\))/).replace("bareHref", Ht).getRegex()).replace("title", /"(?:\\[\s\S]|[^"\\])*"|'(?:\\[\s\S]|[^'\\])*'|\((?:\\[\s\S]|[^)\\])*\)/).getRegex();
  var Zt = d(/^!?\[(label)\]\[(ref)\]/).replace("label", ie).replace("ref", fe).getRegex();
  var jt = d(/^!?\[(ref)\](?:\[\])?/).replace("ref", fe).getRegex();
  var Se = /(?!\s*\])(?:\\[\s\S]|[^\[\]\\]){1,999}/;
  var Ft = d(/(?:[^\[\]\\`]*(?:\[(?:brackets|\\[\s\S]|[^\[\]\\])*\]|\\[\s\S]|`+(?!`)[^`]*?`+(?!`)|``+(?=\]))){0,999}?[^\[\]\\`]*?/).replace("brackets", De).getRegex();
  var Gt = d("reflink|nolink(?!\\()", "g").replace("reflink", d(/^!?\[(label)\]\[(ref)\]/).replace("label", Ft).replace("ref", Se).getRegex()).replace("nolink", d(/^!?\[(ref)\](?:\[\])?/).replace("ref", Se).getRegex()).getRegex();
  var _e = /[hH][tT][tT][pP][sS]?|[fF][tT][pP]/;
  var Nt = /[A-Za-z0-9._+-]+@[a-zA-Z0-9-_]+(?:\.[a-zA-Z0-9-_]*[a-zA-Z0-9])+(?![\w-])/;
  var Qt = d(/(?:mailto:email|xmpp:email(?:\/[A-Za-z0-9@.]+)?)/).replace(/email/g, Nt).getRegex();
  var be = { _backpedal: v, anyPunctuation: It, anyPunctuationOutsideCode: At, autolink: Et, blockSkip: ft, br: Ee, code: ct, del: v, delLDelim: v, delRDelim: v, emStrongLDelim: mt, emStrongRDelimAst: Tt, emStrongRDelimUnd: yt, escape: ut, link: vt, nolink: jt, punctuation: ht, reflink: Zt, reflinkSearch: Gt, tag: Mt, text: pt, url: v };
  var Wt = { ...be, emStrongLDelim: Rt, emStrongRDelimAst: Pt, emStrongRDelimUnd: _t, link: d(/^!?\[(label)\]\((.*?)\)/).replace("label", ie).getRegex(), reflink: d(/^!?\[(label)\]\s*\[([^\]]*)\]/).replace("label", ie).getRegex() };
  var he = { ...be, emStrongRDelimAst: Ot, emStrongLDelim: xt, delLDelim: $t, delRDelim: Lt, url: d(/^emailProtocol|^((?:protocol):\/\/|www\.)(?:[a-zA-Z0-9\-]+\.?)+[^\s<]*|^email/).replace("emailProtocol", Qt).replace("protocol", _e).replace("email", /[A-Za-z0-9._+-]+(@)[a-zA-Z0-9-_]+(?:\.[a-zA-Z0-9-_]*[a-zA-Z0-9])+(?![\w-])/).getRegex(), _backpedal: /(?:[^?!.,:;*_'"~()&]+|\([^)]*\)|&(?![a-zA-Z0-9]+;$)|[?!.,:;*_'"~)]+(?!$))+/, del: /^(~~?)(?=[^\s~])((?:\\[\s\S]|[^\\])*?(?:\\[\s\S]|[^\s~\\]))\1(?=[^~]|$)/, text: d(/^(?:[A-Za-z0-9.+-]+(?=@)|[^a-zA-Z0-9](?=emailProtocol)|(`+|~+|[^`~])(?:(?=[`~])|(?= {2,}\n)|(?=[a-zA-Z0-9.!#$%&'*+\/=?_`{\|}~-]+@)|[\s\S]*?(?:(?=[\\<!\[`*~_]|\b_|protocol:\/\/|wwwStart|$)|[^ ](?= {2,}\n)|[^a-zA-Z0-9](?=emailProtocol)|[^a-zA-Z0-9.!#$%&'*+\/=?_`{\|}~-](?=[a-zA-Z0-9.!#$%&'*+\/=?_`{\|}~-]+@))))/).replace("protocol", _e).replace(/emailProtocol/g, /(?:mailto|xmpp):/).replace("wwwStart", $e ? "(?<![^\\s*_~(])www\\." : "www\\.").getRegex() };
  var Ut = { ...he, br: d(Ee).replace("{2,}", "*").getRegex(), text: d(he.text).replace("\\b_", "\\b_| {2,}\\n").replace(/\{2,\}/g, "*").getRegex() };
  var ee = { normal: xe, gfm: at, pedantic: lt };
  var Q = { normal: be, gfm: he, breaks: Ut, pedantic: Wt };
  var Kt = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  var qe = (l2) => Kt[l2];
  function y(l2, e) {
    if (e) {
      if (T.escapeTest.test(l2)) return l2.replace(T.escapeReplace, qe);
    } else if (T.escapeTestNoEncode.test(l2)) return l2.replace(T.escapeReplaceNoEncode, qe);
    return l2;
  }
  function ve(l2) {
    return T.numericCharacterReference.test(l2) ? l2.replace(T.numericCharacterReferenceOrAmpersand, (e, t, n) => {
      if (t === void 0 && n === void 0) return "&amp;";
      let r = t === void 0 ? Number.parseInt(n, 16) : Number.parseInt(t, 10);
      return r === 0 || r > 1114111 || r >= 55296 && r <= 57343 ? "\uFFFD" : r === 38 ? "&amp;" : String.fromCodePoint(r);
    }) : l2;
  }
  function Re(l2) {
    try {
      l2 = encodeURI(l2).replace(T.percentDecode, "%");
    } catch {
      return null;
    }
    return l2;
  }
  function ae(l2, e) {
    let t = l2.replace(T.findPipe, (s, o, i) => {
      let a = false, c = o;
      for (; --c >= 0 && i[c] === "\\"; ) a = !a;
      return a ? "|" : " |";
    }), n = t.split(T.splitPipe), r = 0;
    if (n[0].trim() || n.shift(), n.length > 0 && !n.at(-1)?.trim() && n.pop(), e) if (n.length > e) n.splice(e);
    else for (; n.length < e; ) n.push("");
    for (; r < n.length; r++) n[r] = n[r].trim().replace(T.slashPipe, "|");
    return n;
  }
  function A(l2, e, t) {
    let n = l2.length;
    if (n === 0) return "";
    let r = 0;
    for (; r < n; ) {
      let s = l2.charAt(n - r - 1);
      if (s === e && !t) r++;
      else if (s !== e && t) r++;
      else break;
    }
    return l2.slice(0, n - r);
  }
  function Te(l2) {
    let e = l2.split(`
`), t = e.length - 1;
    for (; t >= 0 && T.blankLine.test(e[t]); ) t--;
    return e.length - t <= 2 ? l2 : e.slice(0, t + 1).join(`
`);
  }
  function U(l2) {
    return l2.trim().replace(T.multipleSpaceGlobal, " ").toLowerCase().toUpperCase().toLowerCase();
  }
  function Oe(l2, e) {
    if (l2.indexOf(e[0]) === -1 && l2.indexOf(e[1]) === -1) return -1;
    let t = 0;
    for (let n = 0; n < l2.length; n++) if (l2[n] === "\\") n++;
    else if (l2[n] === e[0]) t++;
    else if (l2[n] === e[1] && (t--, t < 0)) return n;
    return t > 0 ? -2 : -1;
  }
  var W = /* @__PURE__ */ new WeakMap();
  function we(l2) {
    let e = { "*": -1, _: -1 }, t = -1, n = l2.length;
    for (let r = 0; r < n; r++) {
      let s = l2[r];
      if (s !== "*" && s !== "_" && s !== "~") continue;
      let o = r === 0 ? `
` : l2[r - 1], i = r + 1;
      for (; i < n && l2[i] === s; ) i++;
      o !== " " && o !== "	" && o !== `
` && o !== "\r" && o !== "\f" && (s === "~" ? t = r : e[s] = r), r = i - 1;
    }
    return { maskedSrc: l2, lastPossibleEmStrongCloserIndex: e, lastPossibleDelCloserIndex: t };
  }
  function Ze(l2, e) {
    let t = we(e), n = W.get(l2);
    n ? n.push(t) : W.set(l2, [t]);
  }
  function je(l2) {
    let e = W.get(l2);
    e && (e.pop(), e.length === 0 && W.delete(l2));
  }
  function le(l2, e, t) {
    let n = W.get(l2)?.at(-1);
    return n && n.maskedSrc === e ? n.lastPossibleEmStrongCloserIndex[t] : we(e).lastPossibleEmStrongCloserIndex[t];
  }
  function ue(l2, e) {
    let t = W.get(l2)?.at(-1);
    return t && t.maskedSrc === e ? t.lastPossibleDelCloserIndex : we(e).lastPossibleDelCloserIndex;
  }
  function te(l2, e = 0) {
    let t = e, n = "";
    for (let r of l2) if (r === "	") {
      let s = 4 - t % 4;
      n += " ".repeat(s), t += s;
    } else n += r, t++;
    return n;
  }
  function Fe(l2) {
    let e, t = false;
    return l2.map((n) => {
      if (t) return n;
      let { depth: r, expanded: s, keptIndent: o, content: i } = Xt(n, e?.depth ?? 1 / 0);
      if (e?.depth !== r && (e = void 0), e) {
        let c = T.blockquoteFenceClose.exec(i)?.[1];
        return !c || c[0] !== e.marker[0] || c.length < e.marker.length ? o : (e = void 0, s);
      }
      if (t = T.blockquoteListItemStart.test(i), t) return n;
      let a = T.blockquoteFenceOpen.exec(i)?.[1];
      return a && (e = { marker: a, depth: r }), s;
    }).join(`
`);
  }
  function Xt(l2, e) {
    let t = 0, n = 0, r = 0, s = 0, o = "";
    for (; r < e; ) {
      let u = t, g = n;
      for (; l2[u] === " " || l2[u] === "	"; ) g += He(l2[u], g), u++;
      if (l2[u] !== ">" || g - s > 3) break;
      o += " ".repeat(g - n) + ">", r++, t = u + 1, n = g + 1, s = l2[t] === " " || l2[t] === "	" ? n + 1 : n;
    }
    if (r === 0) return { depth: r, expanded: l2, keptIndent: l2, content: l2 };
    let i = "", a = "";
    for (; (l2[t] === " " || l2[t] === "	") && n < s + 4; ) {
      let u = He(l2[t], n);
      i += " ".repeat(u), a += n < s && u > 1 ? " ".repeat(u) : l2[t], n += u, t++;
    }
    let c = l2.slice(t);
    return { depth: r, expanded: o + i + c, keptIndent: o + a + c, content: " ".repeat(Math.max(0, n - s)) + c };
  }
  function He(l2, e) {
    return l2 === "	" ? 4 - e % 4 : 1;
  }
  function Vt(l2, e) {
    let t = "";
    for (let n = 0; n < l2.length; n++) {
      if (l2[n] === "`") {
        let r = e.inline.code.exec(l2.slice(n));
        if (r) {
          t += r[0], n += r[0].length - 1;
          continue;
        }
      }
      if (l2[n] === "\\" && (l2[n + 1] === "[" || l2[n + 1] === "]")) {
        t += l2[n + 1], n++;
        continue;
      }
      t += l2[n];
    }
    return t;
  }
  function Ge(l2, e, t, n, r) {
    let s = e.href, o = e.title || null, i = Vt(l2[1], r), a = l2[0].charAt(0) === "!", c = n.state.inLink, u = n.state.linkEmitted, g = n.state.inRawBlock;
    n.state.inLink = true, n.state.linkEmitted = false;
    let h2 = n.inlineTokens(i), p = n.state.linkEmitted;
    if (n.state.linkEmitted = u, n.state.inLink = c, !a) {
      if (p) {
        n.state.inRawBlock = g;
        return;
      }
      n.state.linkEmitted = true;
    }
    return { type: a ? "image" : "link", raw: t, href: s, title: o, text: i, tokens: h2 };
  }
  function Jt(l2, e, t) {
    let n = l2.match(t.other.indentCodeCompensation);
    if (n === null) return e;
    let r = n[1];
    return e.split(`
`).map((s) => {
      let o = s.match(t.other.beginningSpace);
      if (o === null) return s;
      let [i] = o;
      return s.slice(Math.min(i.length, r.length));
    }).join(`
`);
  }
  function Ne(l2, e, t, n) {
    if (!e.includes("<")) return false;
    for (let r = 0; r < e.length; r++) {
      if (e[r] === "\\") {
        r++;
        continue;
      }
      if (e[r] === "`") {
        let i = n.inline.code.exec(e.slice(r));
        if (i) {
          r += i[0].length - 1;
          continue;
        }
      }
      if (e[r] !== "<") continue;
      let s = l2.slice(t + r), o = n.inline.tag.exec(s) || n.inline.autolink.exec(s);
      if (o) {
        if (o[0].length > e.length - r) return true;
        r += o[0].length - 1;
      }
    }
    return false;
  }
  var $ = class {
    constructor(e) {
      __publicField(this, "options");
      __publicField(this, "rules");
      __publicField(this, "lexer");
      this.options = e || _;
    }
    space(e) {
      let t = this.rules.block.newline.exec(e);
      if (t && t[0].length > 0) return { type: "space", raw: t[0] };
    }
    code(e) {
      let t = this.rules.block.code.exec(e);
      if (t) {
        let n = this.options.pedantic ? t[0] : Te(t[0]), r = n.replace(this.rules.other.codeRemoveIndent, "");
        return { type: "code", raw: n, codeBlockStyle: "indented", text: r };
      }
    }
    fences(e) {
      let t = this.rules.block.fences.exec(e);
      if (t) {
        let n = t[0], r = Jt(n, t[3] || "", this.rules);
        return t[3] !== void 0 && (r === "" || r.endsWith(`
`)) && (r += `
`), { type: "code", raw: n, lang: t[2] ? t[2].trim().replace(this.rules.inline.anyPunctuation, "$1") : t[2], text: r };
      }
    }
    heading(e) {
      let t = this.rules.block.heading.exec(e);
      if (t) {
        let n = t[2].trim();
        if (this.rules.other.endingHash.test(n)) {
          let r = A(n, "#");
          (this.options.pedantic || !r || this.rules.other.endingSpaceTabChar.test(r)) && (n = r.trim());
        }
        return { type: "heading", raw: A(t[0], `
`), depth: t[1].length, text: n, tokens: this.lexer.inline(n) };
      }
    }
    hr(e) {
      let t = this.rules.block.hr.exec(e);
      if (t) return { type: "hr", raw: A(t[0], `
`) };
    }
    blockquote(e) {
      let t = this.rules.block.blockquote.exec(e);
      if (t) {
        let n = A(t[0], `
`).split(`
`), r = "", s = "", o = [];
        for (; n.length > 0; ) {
          let i = false, a = [], c;
          for (c = 0; c < n.length; c++) if (this.rules.other.blockquoteStart.test(n[c])) a.push(n[c]), i = true;
          else if (!i) a.push(n[c]);
          else break;
          n = n.slice(c);
          let u = a.join(`
`), h2 = (this.lexer.state.top && !this.lexer.state.inBlockquote && u.includes("	") ? Fe(a) : u).replace(this.rules.other.blockquoteMarkerWhitespace, (O, k, m) => m.startsWith(" ") ? k + " " + m.slice(1) : k + te(m, k.length)).replace(this.rules.other.blockquoteSetextReplace, `
    $1`).replace(this.rules.other.blockquoteSetextReplace2, "");
          r = r ? `${r}
${u}` : u, s = s ? `${s}
${h2}` : h2;
          let p = this.lexer.state.top, x = this.lexer.state.inBlockquote;
          if (this.lexer.state.top = true, this.lexer.state.inBlockquote = true, this.lexer.blockTokens(h2, o, true), this.lexer.state.top = p, this.lexer.state.inBlockquote = x, n.length === 0) break;
          let f = o.at(-1);
          if (f?.type === "code" || f?.type === "heading" || f?.type === "hr" || f?.type === "html" || f?.type === "table") break;
          if (f?.type === "blockquote") {
            let O = f, k = n.join(`
`), m = O.raw + `
` + k.replace(this.rules.other.blockquoteSetextReplace2, "");
            this.lexer.state.inBlockquote = true;
            let S = this.blockquote(m);
            this.lexer.state.inBlockquote = x, o[o.length - 1] = S;
            let R = m.substring(S.raw.length).replace(/^\n/, ""), B = R ? R.split(`
`).length : 0, L = B ? n.slice(0, -B) : n;
            if (L.length > 0 && (r = `${r}
${L.join(`
`)}`), s = s.substring(0, s.length - O.text.length) + S.text, n = n.slice(L.length), n.length > 0 && this.rules.other.blockquoteStart.test(n[0])) continue;
            break;
          } else if (f?.type === "list") {
            let O = f, k = O.raw + `
` + n.join(`
`), m = this.list(k);
            o[o.length - 1] = m;
            let S = m.raw.length > O.raw.length ? k.slice(O.raw.length + 1, m.raw.length).split(`
`).length : 0;
            if (S > 0) {
              let R = n.slice(0, S).join(`
`);
              r = `${r}
${R}`, s = `${s}
${R}`;
            }
            if (n = n.slice(S), n.length > 0 && !this.rules.other.blockquoteStart.test(n[0])) break;
            continue;
          }
        }
        return { type: "blockquote", raw: r, tokens: o, text: s };
      }
    }
    list(e) {
      let t = this.rules.block.list.exec(e);
      if (t) {
        if (!this.options.pedantic && this.lexer.state.lastToken?.type === "text" && !this.rules.other.listInterruptsParagraph.test(e)) return;
        let n = e, r = () => n.length - e.length, s = t[1].trim(), o = s.length > 1, i = { type: "list", raw: "", ordered: o, start: o ? +s.slice(0, -1) : "", loose: false, items: [] };
        s = o ? `\\d{1,9}\\${s.slice(-1)}` : `\\${s}`, this.options.pedantic && (s = o ? s : "[*+-]");
        let a = this.rules.other.listItemRegex(s), c = false;
        for (; e; ) {
          let h2 = false, p = "";
          if (!(t = a.exec(e)) || this.rules.block.hr.test(e)) break;
          let x = r();
          e = e.substring(t[0].length);
          let f = t[2].split(`
`, 1)[0], O = t[1].length, k = this.options.pedantic ? te(f, O) : f.replace(this.rules.other.leadingSpaceTab, (L) => te(L, O)), m = e.split(`
`, 1)[0], S = !k.trim(), R = 0;
          if (this.options.pedantic ? (R = 2, p = k.trimStart()) : S ? R = O + 1 : (R = k.search(this.rules.other.nonSpaceChar), R = R > 4 ? 1 : R, p = k.slice(R), R += O), S && this.rules.other.blankLine.test(m) && (e = e.substring(m.length + 1), h2 = true), !h2) {
            let L = this.rules.other.nextBulletRegex(R), K = this.rules.other.hrRegex(R), re = this.rules.other.fencesBeginRegex(R), q = this.options.pedantic ? this.rules.other.pedanticHeadingBeginRegex(R) : this.rules.other.headingBeginRegex(R), X = this.rules.other.htmlBeginRegex(R), se = this.rules.other.blockquoteBeginRegex(R), ce = false;
            for (; e; ) {
              let Pe = e.split(`
`, 1)[0], j;
              if (m = Pe, this.options.pedantic ? (m = m.replace(this.rules.other.listReplaceNesting, "  "), j = m) : j = m.replace(this.rules.other.leadingSpaceTab, (C) => te(C)), re.test(m) || q.test(m) || X.test(m) || se.test(m) || L.test(m) || K.test(m)) break;
              if (j.search(this.rules.other.nonSpaceChar) >= R || !m.trim()) p += `
` + j.slice(R), ce = false;
              else {
                if (S) break;
                let C = k;
                if (!this.options.pedantic && !p.includes(`
`) && !k.includes("	")) {
                  let F;
                  for (; !K.test(C) && (F = this.rules.other.nestedBlockMarker.exec(C)); ) C = C.slice(F[0].length);
                  if (!C.trim()) break;
                }
                if (C.replace(this.rules.other.tabCharGlobal, "    ").search(this.rules.other.nonSpaceChar) >= 4 || re.test(C) || q.test(C) || X.test(C) || K.test(C)) break;
                if (!this.options.pedantic && !ce) {
                  let F = k.replace(this.rules.other.nestedContainerMarkers, "");
                  if (this.rules.block.fences.test(F) || this.rules.block.heading.test(F) || this.rules.block.hr.test(F)) break;
                }
                let We = !this.options.pedantic && /^ {0,3}(?:=+|-+) *$/.test(m) && this.rules.block.lheading.test(`${k}
${m}`) ? `    ${j.replace(/^ {0,3}/, "")}` : m;
                p += `
` + We, ce = true;
              }
              S = !m.trim(), e = e.substring(Pe.length + 1), k = j.slice(R);
            }
          }
          let B = n.slice(x, r());
          i.loose || (c ? i.loose = true : this.rules.other.doubleBlankLine.test(B) && (c = true)), i.items.push({ type: "list_item", raw: B, task: !!this.options.gfm && this.rules.other.listIsTask.test(p), loose: false, text: p, tokens: [] });
        }
        let u = i.items.at(-1);
        if (u) u.raw = u.raw.trimEnd(), u.text = u.text.trimEnd();
        else return;
        i.raw = n.slice(0, r()).trimEnd();
        let g = [];
        for (let h2 of i.items) if (this.lexer.state.top = false, g.push(this.lexer.inlineQueue.length), h2.tokens = this.lexer.blockTokens(h2.text, []), !i.loose) {
          let p = h2.tokens.filter((f) => f.type === "space"), x = p.length > 0 && p.some((f) => this.rules.other.anyLine.test(f.raw));
          i.loose = x;
        }
        for (let h2 = 0; h2 < i.items.length; h2++) {
          let p = i.items[h2], x = p.tokens[0];
          if (p.task && (x?.type === "text" || x?.type === "paragraph")) {
            p.text = p.text.replace(this.rules.other.listReplaceTask, ""), x.raw = x.raw.replace(this.rules.other.listReplaceTask, ""), x.text = x.text.replace(this.rules.other.listReplaceTask, "");
            let f = this.lexer.inlineQueue;
            for (let k = g[h2]; k < f.length; k++) if (f[k].tokens === x.tokens) {
              f[k].src = f[k].src.replace(this.rules.other.listReplaceTask, "");
              break;
            }
            let O = this.rules.other.listTaskCheckbox.exec(p.raw);
            if (O) {
              let k = { type: "checkbox", raw: O[0] + " ", checked: O[0] !== "[ ]" };
              p.checked = k.checked, i.loose ? p.tokens[0] && ["paragraph", "text"].includes(p.tokens[0].type) && "tokens" in p.tokens[0] && p.tokens[0].tokens ? (p.tokens[0].raw = k.raw + p.tokens[0].raw, p.tokens[0].text = k.raw + p.tokens[0].text, p.tokens[0].tokens.unshift(k)) : p.tokens.unshift({ type: "paragraph", raw: k.raw, text: k.raw, tokens: [k] }) : p.tokens.unshift(k);
            }
          } else p.task && (p.task = false);
        }
        if (i.loose) for (let h2 of i.items) {
          h2.loose = true;
          for (let p of h2.tokens) p.type === "text" && (p.type = "paragraph");
        }
        return i;
      }
    }
    html(e) {
      let t = this.rules.block.html.exec(e);
      if (t) {
        if (this.lexer.state.lastToken?.type === "paragraph" && !this.rules.other.htmlBeginRegex(4).test(e)) return;
        let n = Te(t[0]);
        return { type: "html", block: true, raw: n, pre: t[1] === "pre" || t[1] === "script" || t[1] === "style", text: n };
      }
    }
    def(e) {
      let t = this.rules.block.def.exec(e);
      if (t) {
        if (!this.rules.other.startAngleBracket.test(t[2]) && Oe(t[2], "()") !== -1) return;
        let n = U(t[1]), r = t[2] ? t[2].replace(this.rules.other.hrefBrackets, "$1").replace(this.rules.inline.anyPunctuation, "$1") : "", s = t[3] ? t[3].substring(1, t[3].length - 1).replace(this.rules.inline.anyPunctuation, "$1") : t[3];
        return { type: "def", tag: n, raw: A(t[0], `
`), href: r, title: s };
      }
    }
    table(e) {
      let t, n;
      if (this.options.gfm && !this.options.pedantic) {
        let i = this.rules.other.tableHeader.exec(e);
        if (!i || !this.rules.other.tableDelimiter.test(i[2]) || (t = ae(i[1]), n = i[2].replace(this.rules.other.tableAlignChars, "").split("|"), t.length !== n.length)) return;
      }
      let r = this.rules.block.table.exec(e);
      if (!r || !this.rules.other.tableDelimiter.test(r[2])) return;
      t ?? (t = ae(r[1])), n ?? (n = r[2].replace(this.rules.other.tableAlignChars, "").split("|"));
      let s = r[3]?.trim() ? r[3].replace(this.rules.other.tableRowBlankLine, "").split(`
`) : [], o = { type: "table", raw: A(r[0], `
`), header: [], align: [], rows: [] };
      if (t.length === n.length) {
        for (let i of n) this.rules.other.tableAlignRight.test(i) ? o.align.push("right") : this.rules.other.tableAlignCenter.test(i) ? o.align.push("center") : this.rules.other.tableAlignLeft.test(i) ? o.align.push("left") : o.align.push(null);
        for (let i = 0; i < t.length; i++) o.header.push({ text: t[i], tokens: this.lexer.inline(t[i]), header: true, align: o.align[i] });
        for (let i of s) o.rows.push(ae(i, o.header.length).map((a, c) => ({ text: a, tokens: this.lexer.inline(a), header: false, align: o.align[c] })));
        return o;
      }
    }
    lheading(e) {
      let t = this.rules.block.lheading.exec(e);
      if (t) {
        let n = t[1].trim();
        return { type: "heading", raw: A(t[0], `
`), depth: t[2].charAt(0) === "=" ? 1 : 2, text: n, tokens: this.lexer.inline(n) };
      }
    }
    paragraph(e) {
      let t = this.rules.block.paragraph.exec(e);
      if (t) {
        let n = t[1].charAt(t[1].length - 1) === `
` ? t[1].slice(0, -1) : t[1];
        return { type: "paragraph", raw: t[0], text: n, tokens: this.lexer.inline(n) };
      }
    }
    text(e) {
      let t = this.rules.block.text.exec(e);
      if (t) {
        let n = t[0], r = t[0], s = this.rules.other.textIndentedContinuation.exec(e.slice(n.length));
        return s && (n += s[0], r += s[0].replace(this.rules.other.codeRemoveIndent, "")), { type: "text", raw: n, text: r, tokens: this.lexer.inline(r) };
      }
    }
    escape(e) {
      if (e.charCodeAt(0) !== 92) return;
      let t = this.rules.inline.escape.exec(e);
      if (t) return { type: "escape", raw: t[0], text: t[1] };
    }
    tag(e) {
      if (e.charCodeAt(0) !== 60) return;
      let t = this.rules.inline.tag.exec(e);
      if (t) return !this.lexer.state.inLink && this.rules.other.startATag.test(t[0]) ? this.lexer.state.inLink = true : this.lexer.state.inLink && this.rules.other.endATag.test(t[0]) && (this.lexer.state.inLink = false), !this.lexer.state.inRawBlock && this.rules.other.startPreScriptTag.test(t[0]) ? this.lexer.state.inRawBlock = true : this.lexer.state.inRawBlock && this.rules.other.endPreScriptTag.test(t[0]) && (this.lexer.state.inRawBlock = false), { type: "html", raw: t[0], inLink: this.lexer.state.inLink, inRawBlock: this.lexer.state.inRawBlock, block: false, text: t[0] };
    }
    link(e) {
      if (this.lexer.state.linkParenPossible === false) return;
      let t = e.charCodeAt(0);
      if (t !== 91 && t !== 33) return;
      let n = this.rules.inline.link.exec(e);
      if (n) {
        let r = n[0].charAt(0) === "!" ? 2 : 1;
        if (!this.options.pedantic && Ne(e, n[1], r, this.rules)) return;
        let s = n[2].trim();
        if (!this.options.pedantic && this.rules.other.startAngleBracket.test(s)) {
          if (!this.rules.other.endAngleBracket.test(s)) return;
          let c = A(s.slice(0, -1), "\\");
          if ((s.length - c.length) % 2 === 0) return;
        } else {
          let c = Oe(n[2], "()");
          if (c === -2) return;
          if (c > -1) {
            let g = (n[0].indexOf("!") === 0 ? 5 : 4) + n[1].length + c;
            n[2] = n[2].substring(0, c), n[0] = n[0].substring(0, g).trim(), n[3] = "";
          }
        }
        let o = A(n[0].slice(0, -1), "\\");
        if ((n[0].length - o.length) % 2 === 0) return;
        let i = n[2], a = "";
        if (this.options.pedantic) {
          let c = this.rules.other.pedanticHrefTitle.exec(i);
          c && (i = c[1], a = c[3]);
        } else a = n[3] ? n[3].slice(1, -1) : "";
        return i = i.trim(), this.rules.other.startAngleBracket.test(i) && (this.options.pedantic && !this.rules.other.endAngleBracket.test(s) ? i = i.slice(1) : i = i.slice(1, -1)), Ge(n, { href: i && i.replace(this.rules.inline.anyPunctuation, "$1"), title: a && a.replace(this.rules.inline.anyPunctuation, "$1") }, n[0], this.lexer, this.rules);
      }
    }
    reflink(e, t) {
      let n = e.charCodeAt(0);
      if (n !== 91 && n !== 33) return;
      let r;
      if ((r = this.rules.inline.reflink.exec(e)) || (r = this.rules.inline.nolink.exec(e))) {
        let s = r[0].charAt(0) === "!" ? 2 : 1;
        if (!this.options.pedantic && Ne(e, r[1], s, this.rules)) return;
        let o = t[U(r[2] || r[1])];
        if (!o) {
          let i = r[0].charAt(0);
          return { type: "text", raw: i, text: i };
        }
        return Ge(r, o, r[0], this.lexer, this.rules);
      }
    }
    emStrong(e, t, n = "") {
      let r = this.rules.inline.emStrongLDelim.exec(e);
      if (!r || !r[1] && !r[2] && !r[3] && !r[4]) return;
      let s = r[0][0], o = n === s, i = t.length - e.length, a = i;
      for (; !this.options.pedantic && a > 0 && t[a - 1] === s; ) a--;
      let c = [...t.slice(Math.max(0, a - 2), a)].at(-1) ?? "", u = c === "*" || c === "_" || !!this.rules.inline.punctuation.exec(c);
      a < i && (n = c);
      let g = a < i ? u : n === "*" || n === "_" || !!this.rules.inline.punctuation.exec(n);
      if (r[4] && n.match(this.rules.other.unicodeAlphaNumeric)) return;
      let h2 = r[1] || r[3] || "";
      if (!h2 || !n || g) {
        let p = [...r[0]].length - 1, x, f, O = p, k = 0, m = i - a + p, S = !this.options.pedantic && !!c.trim() && (!!h2 || s === "*" && !u);
        if (s !== "*" && s !== "_") return;
        let R = s === "*" ? this.rules.inline.emStrongRDelimAst : this.rules.inline.emStrongRDelimUnd, B = le(this, t, s), L = t.length - e.length + p;
        if (B < L) return;
        t = t.slice(-1 * e.length + p);
        let K = B - L;
        for (R.lastIndex = 0; (r = R.exec(t)) !== null && !(r.index > K); ) {
          if (x = r[1] || r[2] || r[3] || r[4] || r[5] || r[6], !x) continue;
          if (f = [...x].length, r[3] || r[4]) {
            O += f;
            continue;
          } else if ((r[5] || r[6] || S) && m % 3 && !((m + f) % 3)) {
            if (o && (r[5] || r[6])) break;
            k += f;
            continue;
          }
          if (O -= f, O > 0) continue;
          f = Math.min(f, f + O + k);
          let re = [...r[0]][0].length, q = e.slice(0, p + r.index + re + f);
          if (Math.min(p, f) % 2) {
            let se = q.slice(1, -1);
            return { type: "em", raw: q, text: se, tokens: this.lexer.inlineTokens(se) };
          }
          let X = q.slice(2, -2);
          return { type: "strong", raw: q, text: X, tokens: this.lexer.inlineTokens(X) };
        }
      }
    }
    codespan(e) {
      if (e.charCodeAt(0) !== 96) return;
      let t = this.rules.inline.code.exec(e);
      if (t) {
        let n = t[2].replace(this.rules.other.newLineCharGlobal, " "), r = this.rules.other.nonSpaceChar.test(n), s = this.rules.other.startingSpaceChar.test(n) && this.rules.other.endingSpaceChar.test(n);
        return r && s && (n = n.substring(1, n.length - 1)), { type: "codespan", raw: t[0], text: n };
      }
    }
    br(e) {
      let t = e.charCodeAt(0);
      if (t !== 32 && t !== 92 && t !== 10) return;
      let n = this.rules.inline.br.exec(e);
      if (n) return { type: "br", raw: n[0] };
    }
    del(e, t, n = "") {
      if (e.charCodeAt(0) !== 126) return;
      let r = this.rules.inline.delLDelim.exec(e);
      if (!r) return;
      if (!(r[1] || "") || !n || this.rules.inline.punctuation.exec(n)) {
        let o = [...r[0]].length - 1, i, a, c = o, u = this.rules.inline.delRDelim, g = ue(this, t), h2 = t.length - e.length + o;
        if (g < h2) return;
        t = t.slice(-1 * e.length + o);
        let p = g - h2;
        for (u.lastIndex = 0; (r = u.exec(t)) !== null && !(r.index > p); ) {
          if (i = r[1] || r[2] || r[3] || r[4] || r[5] || r[6], !i || (a = [...i].length, a !== o)) continue;
          if (r[3] || r[4]) {
            c += a;
            continue;
          }
          if (c -= a, c > 0) continue;
          a = Math.min(a, a + c);
          let x = [...r[0]][0].length, f = e.slice(0, o + r.index + x + a), O = f.slice(o, -o);
          return { type: "del", raw: f, text: O, tokens: this.lexer.inlineTokens(O) };
        }
      }
    }
    autolink(e) {
      if (e.charCodeAt(0) !== 60) return;
      let t = this.rules.inline.autolink.exec(e);
      if (t) {
        let n, r;
        return t[2] === "@" ? (n = t[1], r = "mailto:" + n) : (n = t[1], r = n), { type: "link", raw: t[0], text: n, href: r, autolink: true, tokens: [{ type: "text", raw: n, text: n }] };
      }
    }
    url(e) {
      let t;
      if (t = this.rules.inline.url.exec(e)) {
        let n, r;
        if (t[2] === "@") n = t[0], r = "mailto:" + n;
        else {
          let s;
          do
            s = t[0], t[0] = this.rules.inline._backpedal.exec(t[0])?.[0] ?? "";
          while (s !== t[0]);
          n = t[0], t[1] === "www." ? r = "http://" + t[0] : r = t[0];
        }
        return { type: "link", raw: t[0], text: n, href: r, autolink: true, tokens: [{ type: "text", raw: n, text: n }] };
      }
    }
    inlineText(e) {
      let t = this.rules.inline.text.exec(e);
      if (t) {
        let n = this.lexer.state.inRawBlock;
        return { type: "text", raw: t[0], text: n ? t[0] : ve(t[0]), escaped: n };
      }
    }
  };
  var _l_instances, t_fn, e_fn, n_fn, r_fn, _a;
  var w = (_a = class {
    constructor(e) {
      __privateAdd(this, _l_instances);
      __publicField(this, "tokens");
      __publicField(this, "options");
      __publicField(this, "state");
      __publicField(this, "inlineQueue");
      __publicField(this, "tokenizer");
      this.tokens = [], this.tokens.links = /* @__PURE__ */ Object.create(null), this.options = e || _, this.options.tokenizer = this.options.tokenizer || new $(), this.tokenizer = this.options.tokenizer, this.tokenizer.options = this.options, this.tokenizer.lexer = this, this.inlineQueue = [], this.state = { inLink: false, inRawBlock: false, linkEmitted: false, linkParenPossible: true, top: true, inBlockquote: false };
      let t = { other: T, block: ee.normal, inline: Q.normal };
      this.options.pedantic ? (t.block = ee.pedantic, t.inline = Q.pedantic) : this.options.gfm && (t.block = ee.gfm, this.options.breaks ? t.inline = Q.breaks : t.inline = Q.gfm), this.tokenizer.rules = t;
    }
    static get rules() {
      return { block: ee, inline: Q };
    }
    static lex(e, t) {
      return new _a(t).lex(e);
    }
    static lexInline(e, t) {
      return new _a(t).inlineTokens(e);
    }
    lex(e) {
      e = e.replace(T.carriageReturn, `
`), this.blockTokens(e, this.tokens);
      for (let t = 0; t < this.inlineQueue.length; t++) {
        let n = this.inlineQueue[t];
        this.state.inRawBlock = false, this.inlineTokens(n.src, n.tokens);
      }
      return this.inlineQueue = [], this.tokens;
    }
    blockTokens(e, t = [], n = false) {
      this.tokenizer.lexer = this;
      let r = this.state.lastToken;
      this.options.pedantic && (e = e.replace(T.tabCharGlobal, "    ").replace(T.spaceLine, ""));
      let s = 1 / 0, o, i = this.options.gfm && !this.options.pedantic && this.tokenizer.paragraph === $.prototype.paragraph;
      for (; e; ) {
        if (e.length < s) s = e.length;
        else {
          this.infiniteLoopError(e.charCodeAt(0));
          break;
        }
        this.state.lastToken = t.at(-1);
        let a;
        if (this.options.extensions?.block?.some((u) => (a = u.call({ lexer: this }, e, t)) ? (e = e.substring(a.raw.length), t.push(a), true) : false)) continue;
        if (a = this.tokenizer.space(e)) {
          e = e.substring(a.raw.length);
          let u = t.at(-1);
          a.raw.length === 1 && u !== void 0 ? u.raw += `
` : t.push(a);
          continue;
        }
        if (a = this.tokenizer.code(e)) {
          e = e.substring(a.raw.length);
          let u = t.at(-1);
          u?.type === "paragraph" || u?.type === "text" ? (u.raw += (u.raw.endsWith(`
`) ? "" : `
`) + a.raw, u.text += `
` + a.text, this.inlineQueue.at(-1).src = u.text) : t.push(a);
          continue;
        }
        if (a = this.tokenizer.fences(e)) {
          e = e.substring(a.raw.length), t.push(a);
          continue;
        }
        if (a = this.tokenizer.heading(e)) {
          e = e.substring(a.raw.length), t.push(a);
          continue;
        }
        if (a = this.tokenizer.hr(e)) {
          e = e.substring(a.raw.length), t.push(a);
          continue;
        }
        if (a = this.tokenizer.blockquote(e)) {
          e = e.substring(a.raw.length), t.push(a);
          continue;
        }
        if (a = this.tokenizer.list(e)) {
          e = e.substring(a.raw.length), t.push(a);
          continue;
        }
        if (a = this.tokenizer.html(e)) {
          e = e.substring(a.raw.length), t.push(a);
          continue;
        }
        if (a = this.tokenizer.def(e)) {
          e = e.substring(a.raw.length);
          let u = t.at(-1);
          u?.type === "paragraph" || u?.type === "text" ? (u.raw += (u.raw.endsWith(`
`) ? "" : `
`) + a.raw, u.text += `
` + a.raw, this.inlineQueue.at(-1).src = u.text) : (this.tokens.links[a.tag] || (this.tokens.links[a.tag] = { href: a.href, title: a.title }), t.push(a));
          continue;
        }
        if (a = this.tokenizer.table(e)) {
          e = e.substring(a.raw.length), t.push(a);
          continue;
        }
        if (a = this.tokenizer.lheading(e)) {
          e = e.substring(a.raw.length), t.push(a);
          continue;
        }
        let c = e;
        if (this.options.extensions?.startBlock) {
          let u = 1 / 0, g = e.slice(1), h2;
          this.options.extensions.startBlock.forEach((p) => {
            h2 = p.call({ lexer: this }, g), typeof h2 == "number" && h2 >= 0 && (u = Math.min(u, h2));
          }), u < 1 / 0 && u >= 0 && (c = e.substring(0, u + 1));
        }
        if (this.state.top && (a = this.tokenizer.paragraph(c))) {
          let u = t.at(-1);
          (n || u === o && i) && u?.type === "paragraph" ? (u.raw += (u.raw.endsWith(`
`) ? "" : `
`) + a.raw, u.text += `
` + a.text, this.inlineQueue.pop(), this.inlineQueue.at(-1).src = u.text, o = u) : (t.push(a), o = a), n = c.length !== e.length, e = e.substring(a.raw.length);
          continue;
        }
        if (a = this.tokenizer.text(e)) {
          e = e.substring(a.raw.length);
          let u = t.at(-1);
          u?.type === "text" ? (u.raw += (u.raw.endsWith(`
`) ? "" : `
`) + a.raw, u.text += `
` + a.text, this.inlineQueue.pop(), this.inlineQueue.at(-1).src = u.text) : t.push(a);
          continue;
        }
        if (e) {
          this.infiniteLoopError(e.charCodeAt(0));
          break;
        }
      }
      return this.state.top = true, this.state.lastToken = r, t;
    }
    inline(e, t = []) {
      return this.inlineQueue.push({ src: e, tokens: t }), t;
    }
    linkInText(e) {
      if (!e.includes("[")) return false;
      let t = this.tokenizer.rules.inline.link;
      for (let n of e.matchAll(this.tokenizer.rules.inline.blockSkip)) if (t.test(n[0]) && e.charAt(n.index - 1) !== "!") return true;
      for (let n of e.matchAll(this.tokenizer.rules.inline.reflinkSearch)) {
        let r = n[0], s = r.lastIndexOf("[");
        if (!(r.charAt(0) === "!" || !Object.hasOwn(this.tokens.links, U(r.slice(s + 1, -1)))) && !(s > 1 && this.linkInText(r.slice(1, s - 1)))) return true;
      }
      return false;
    }
    inlineTokens(e, t = []) {
      this.tokenizer.lexer = this;
      let n = this.state.linkParenPossible;
      this.state.linkParenPossible = e.includes(")");
      try {
        return __privateMethod(this, _l_instances, t_fn).call(this, e, t);
      } finally {
        this.state.linkParenPossible = n;
      }
    }
    infiniteLoopError(e) {
      let t = "Infinite loop on byte: " + e;
      if (this.options.silent) console.error(t);
      else throw new Error(t);
    }
  }, _l_instances = new WeakSet(), t_fn = function(e, t) {
    let n = e.includes("*") || e.includes("_") || e.includes("~"), r = n || this.options.hooks?.emStrongMask || this.tokenizer.emStrong !== $.prototype.emStrong || this.tokenizer.del !== $.prototype.del ? __privateMethod(this, _l_instances, r_fn).call(this, e) : e;
    if (!n) return __privateMethod(this, _l_instances, e_fn).call(this, e, r, t);
    Ze(this.tokenizer, r);
    try {
      return __privateMethod(this, _l_instances, e_fn).call(this, e, r, t);
    } finally {
      je(this.tokenizer);
    }
  }, e_fn = function(e, t, n) {
    let r = false, s = "", o = 1 / 0;
    for (; e; ) {
      if (e.length < o) o = e.length;
      else {
        this.infiniteLoopError(e.charCodeAt(0));
        break;
      }
      r || (s = ""), r = false;
      let i;
      if (this.options.extensions?.inline?.some((u) => (i = u.call({ lexer: this }, e, n)) ? (e = e.substring(i.raw.length), n.push(i), true) : false)) continue;
      if (i = this.tokenizer.escape(e)) {
        e = e.substring(i.raw.length), n.push(i);
        continue;
      }
      if (i = this.tokenizer.tag(e)) {
        e = e.substring(i.raw.length), n.push(i);
        continue;
      }
      if (i = this.tokenizer.link(e)) {
        e = e.substring(i.raw.length), n.push(i);
        continue;
      }
      if (i = this.tokenizer.reflink(e, this.tokens.links)) {
        e = e.substring(i.raw.length);
        let u = n.at(-1);
        i.type === "text" && u?.type === "text" ? (u.raw += i.raw, u.text += i.text) : n.push(i);
        continue;
      }
      let a = e[0];
      if (a === "*" || a === "_") {
        let u = t.length - e.length;
        if (le(this.tokenizer, t, a) <= u) {
          let h2 = 1;
          for (; h2 < e.length && e.charCodeAt(h2) === a.charCodeAt(0); ) h2++;
          let p = e.substring(0, h2), x = n.at(-1);
          x?.type === "text" && !x.escaped ? (x.raw += p, x.text += p) : n.push({ type: "text", raw: p, text: p, escaped: false }), e = e.substring(h2), s = a, r = true;
          continue;
        }
      } else if (a === "~") {
        let u = t.length - e.length;
        if (ue(this.tokenizer, t) <= u) {
          let h2 = 1;
          for (; h2 < e.length && e.charCodeAt(h2) === 126; ) h2++;
          let p = e.substring(0, h2), x = n.at(-1);
          x?.type === "text" && !x.escaped ? (x.raw += p, x.text += p) : n.push({ type: "text", raw: p, text: p, escaped: false }), e = e.substring(h2), s = a, r = true;
          continue;
        }
      }
      if (i = this.tokenizer.emStrong(e, t, s)) {
        e = e.substring(i.raw.length), n.push(i);
        continue;
      }
      if (i = this.tokenizer.codespan(e)) {
        e = e.substring(i.raw.length), n.push(i);
        continue;
      }
      if (i = this.tokenizer.br(e)) {
        e = e.substring(i.raw.length), n.push(i);
        continue;
      }
      if (i = this.tokenizer.del(e, t, s)) {
        e = e.substring(i.raw.length), n.push(i);
        continue;
      }
      if (i = this.tokenizer.autolink(e)) {
        e = e.substring(i.raw.length), n.push(i);
        continue;
      }
      if (!this.state.inLink && (i = this.tokenizer.url(e))) {
        e = e.substring(i.raw.length), n.push(i);
        continue;
      }
      let c = e;
      if (this.options.extensions?.startInline) {
        let u = 1 / 0, g = e.slice(1), h2;
        this.options.extensions.startInline.forEach((p) => {
          h2 = p.call({ lexer: this }, g), typeof h2 == "number" && h2 >= 0 && (u = Math.min(u, h2));
        }), u < 1 / 0 && u >= 0 && (c = e.substring(0, u + 1));
      }
      if (i = this.tokenizer.inlineText(c)) {
        e = e.substring(i.raw.length), i.raw.slice(-1) !== "_" && (s = i.raw.slice(-1)), r = true;
        let u = n.at(-1);
        u?.type === "text" ? (u.raw += i.raw, u.text += i.text) : n.push(i);
        continue;
      }
      if (e) {
        this.infiniteLoopError(e.charCodeAt(0));
        break;
      }
    }
    return n;
  }, n_fn = function(e) {
    let { blockSkip: t, tag: n, autolink: r } = this.tokenizer.rules.inline, s = "", o = 0, i;
    for (t.lastIndex = 0; i = t.exec(e); ) {
      let a = i.index + (i[2] ? i[2].length : 0), c = i.index + i[0].length;
      if (e.charAt(a) === "<") {
        let u = e.slice(a), g = n.exec(u) || r.exec(u);
        if (!g) {
          t.lastIndex = a + 1;
          continue;
        }
        c = a + g[0].length, t.lastIndex = c;
      }
      s += e.slice(o, a) + "[" + "a".repeat(c - a - 2) + "]", o = c;
    }
    return s + e.slice(o);
  }, r_fn = function(e) {
    let t = e;
    if (this.tokens.links && e.includes("[")) {
      let n = this.tokenizer.rules.inline.reflinkSearch, r = (s) => {
        let o = s.lastIndexOf("[");
        if (!Object.hasOwn(this.tokens.links, U(s.slice(o + 1, -1)))) return s;
        if (o > 1 && s.charAt(0) !== "!") {
          let i = s.slice(1, o - 1);
          if (this.linkInText(i)) return "[" + i.replace(n, r) + "][" + "a".repeat(s.length - o - 2) + "]";
        }
        return "[" + "a".repeat(s.length - 2) + "]";
      };
      t = t.replace(n, r);
    }
    return t = t.replace(this.tokenizer.rules.inline.anyPunctuationOutsideCode, (n, r, s) => s ? "+".repeat(n.length) : r ? r + n.slice(r.length, -r.length).replace(/`/g, "+") + r : n), t = __privateMethod(this, _l_instances, n_fn).call(this, t), t = this.options.hooks?.emStrongMask?.call({ lexer: this }, t) ?? t, t;
  }, _a);
  function Qe(l2) {
    return l2.map((e) => e.type === "codespan" || e.type === "escape" ? { ...e, text: y(e.text, true) } : "tokens" in e && e.tokens ? { ...e, tokens: Qe(e.tokens) } : e);
  }
  var E = class {
    constructor(e) {
      __publicField(this, "options");
      __publicField(this, "parser");
      this.options = e || _;
    }
    space(e) {
      return "";
    }
    code({ text: e, lang: t, escaped: n }) {
      let r = (t || "").match(T.notSpaceStart)?.[0], s = e ? e.replace(T.endingNewline, "") + `
` : "";
      return r ? '<pre><code class="language-' + y(r) + '">' + (n ? s : y(s, true)) + `</code></pre>
` : "<pre><code>" + (n ? s : y(s, true)) + `</code></pre>
`;
    }
    blockquote({ tokens: e }) {
      return `<blockquote>
${this.parser.parse(e)}</blockquote>
`;
    }
    html({ text: e }) {
      return e;
    }
    def(e) {
      return "";
    }
    heading({ tokens: e, depth: t }) {
      return `<h${t}>${this.parser.parseInline(e)}</h${t}>
`;
    }
    hr(e) {
      return `<hr>
`;
    }
    list(e) {
      let t = e.ordered, n = e.start, r = "";
      for (let i = 0; i < e.items.length; i++) {
        let a = e.items[i];
        r += this.listitem(a);
      }
      let s = t ? "ol" : "ul", o = t && n !== 1 ? ' start="' + n + '"' : "";
      return "<" + s + o + `>
` + r + "</" + s + `>
`;
    }
    listitem(e) {
      return `<li>${this.parser.parse(e.tokens)}</li>
`;
    }
    checkbox({ checked: e }) {
      return "<input " + (e ? 'checked="" ' : "") + 'disabled="" type="checkbox"> ';
    }
    paragraph({ tokens: e }) {
      return `<p>${this.parser.parseInline(e)}</p>
`;
    }
    table(e) {
      let t = "", n = "";
      for (let s = 0; s < e.header.length; s++) n += this.tablecell(e.header[s]);
      t += this.tablerow({ text: n });
      let r = "";
      for (let s = 0; s < e.rows.length; s++) {
        let o = e.rows[s];
        n = "";
        for (let i = 0; i < o.length; i++) n += this.tablecell(o[i]);
        r += this.tablerow({ text: n });
      }
      return r && (r = `<tbody>${r}</tbody>`), `<table>
<thead>
` + t + `</thead>
` + r + `</table>
`;
    }
    tablerow({ text: e }) {
      return `<tr>
${e}</tr>
`;
    }
    tablecell(e) {
      let t = this.parser.parseInline(e.tokens), n = e.header ? "th" : "td";
      return (e.align ? `<${n} align="${e.align}">` : `<${n}>`) + t + `</${n}>
`;
    }
    strong({ tokens: e }) {
      return `<strong>${this.parser.parseInline(e)}</strong>`;
    }
    em({ tokens: e }) {
      return `<em>${this.parser.parseInline(e)}</em>`;
    }
    codespan({ text: e }) {
      return `<code>${y(e, true)}</code>`;
    }
    br(e) {
      return "<br>";
    }
    del({ tokens: e }) {
      return `<del>${this.parser.parseInline(e)}</del>`;
    }
    link({ href: e, title: t, text: n, tokens: r, autolink: s }) {
      let o = s ? y(n, true) : this.parser.parseInline(r), i = Re(e);
      if (i === null) return o;
      e = y(i, s);
      let a = '<a href="' + e + '"';
      return t && (a += ' title="' + y(t) + '"'), a += ">" + o + "</a>", a;
    }
    image({ href: e, title: t, text: n, tokens: r }) {
      r && (n = this.parser.parseInline(Qe(r), this.parser.textRenderer));
      let s = Re(e);
      if (s === null) return y(n);
      e = s;
      let o = `<img src="${y(e)}" alt="${y(n)}"`;
      return t && (o += ` title="${y(t)}"`), o += ">", o;
    }
    text(e) {
      return "tokens" in e && e.tokens ? this.parser.parseInline(e.tokens) : "escaped" in e && e.escaped ? e.text : y(e.text);
    }
  };
  var M = class {
    constructor() {
      __publicField(this, "parser");
    }
    strong({ text: e, tokens: t }) {
      return t ? this.parser.parseInline(t, this) : e;
    }
    em({ text: e, tokens: t }) {
      return t ? this.parser.parseInline(t, this) : e;
    }
    codespan({ text: e }) {
      return e;
    }
    del({ text: e, tokens: t }) {
      return t ? this.parser.parseInline(t, this) : e;
    }
    html({ text: e }) {
      return e;
    }
    text({ text: e }) {
      return e;
    }
    link({ text: e, tokens: t }) {
      return t ? this.parser.parseInline(t, this) : e;
    }
    image({ text: e, tokens: t }) {
      return t ? this.parser.parseInline(t, this) : e;
    }
    br() {
      return `
`;
    }
    checkbox({ raw: e }) {
      return e;
    }
  };
  var P = class l {
    constructor(e) {
      __publicField(this, "options");
      __publicField(this, "renderer");
      __publicField(this, "textRenderer");
      this.options = e || _, this.options.renderer = this.options.renderer || new E(), this.renderer = this.options.renderer, this.renderer.options = this.options, this.renderer.parser = this, this.textRenderer = new M(), this.textRenderer.parser = this;
    }
    static parse(e, t) {
      return new l(t).parse(e);
    }
    static parseInline(e, t) {
      return new l(t).parseInline(e);
    }
    parse(e) {
      this.renderer.parser = this;
      let t = "";
      for (let n = 0; n < e.length; n++) {
        let r = e[n], s = this.options.extensions?.renderers;
        if (s && Object.hasOwn(s, r.type) && s[r.type]) {
          let i = r, a = s[i.type].call({ parser: this }, i);
          if (a !== false || !["space", "hr", "heading", "code", "table", "blockquote", "list", "checkbox", "html", "def", "paragraph", "text"].includes(i.type)) {
            t += a === false ? "" : a ?? "";
            continue;
          }
        }
        let o = r;
        switch (o.type) {
          case "space": {
            t += this.renderer.space(o);
            break;
          }
          case "hr": {
            t += this.renderer.hr(o);
            break;
          }
          case "heading": {
            t += this.renderer.heading(o);
            break;
          }
          case "code": {
            t += this.renderer.code(o);
            break;
          }
          case "table": {
            t += this.renderer.table(o);
            break;
          }
          case "blockquote": {
            t += this.renderer.blockquote(o);
            break;
          }
          case "list": {
            t += this.renderer.list(o);
            break;
          }
          case "checkbox": {
            t += this.renderer.checkbox(o);
            break;
          }
          case "html": {
            t += this.renderer.html(o);
            break;
          }
          case "def": {
            t += this.renderer.def(o);
            break;
          }
          case "paragraph": {
            t += this.renderer.paragraph(o);
            break;
          }
          case "text": {
            t += this.renderer.text(o);
            break;
          }
          default: {
            let i = 'Token with "' + o.type + '" type was not found.';
            if (this.options.silent) return console.error(i), "";
            throw new Error(i);
          }
        }
      }
      return t;
    }
    parseInline(e, t = this.renderer) {
      this.renderer.parser = this;
      let n = "";
      for (let r = 0; r < e.length; r++) {
        let s = e[r], o = this.options.extensions?.renderers;
        if (o && Object.hasOwn(o, s.type) && o[s.type]) {
          let a = o[s.type].call({ parser: this }, s);
          if (a !== false || !["escape", "html", "link", "image", "checkbox", "strong", "em", "codespan", "br", "del", "text"].includes(s.type)) {
            n += a === false ? "" : a ?? "";
            continue;
          }
        }
        let i = s;
        switch (i.type) {
          case "escape": {
            n += t.text(i);
            break;
          }
          case "html": {
            n += t.html(i);
            break;
          }
          case "link": {
            n += t.link(i);
            break;
          }
          case "image": {
            n += t.image(i);
            break;
          }
          case "checkbox": {
            n += t.checkbox(i);
            break;
          }
          case "strong": {
            n += t.strong(i);
            break;
          }
          case "em": {
            n += t.em(i);
            break;
          }
          case "codespan": {
            n += t.codespan(i);
            break;
          }
          case "br": {
            n += t.br(i);
            break;
          }
          case "del": {
            n += t.del(i);
            break;
          }
          case "text": {
            n += t.text(i);
            break;
          }
          default: {
            let a = 'Token with "' + i.type + '" type was not found.';
            if (this.options.silent) return console.error(a), "";
            throw new Error(a);
          }
        }
      }
      return n;
    }
  };
  var _a2;
  var z = (_a2 = class {
    constructor(e) {
      __publicField(this, "options");
      __publicField(this, "block");
      this.options = e || _;
    }
    preprocess(e) {
      return e;
    }
    postprocess(e) {
      return e;
    }
    processAllTokens(e) {
      return e;
    }
    emStrongMask(e) {
      return e;
    }
    provideLexer(e = this.block) {
      return e ? w.lex : w.lexInline;
    }
    provideParser(e = this.block) {
      return e ? P.parse : P.parseInline;
    }
  }, __publicField(_a2, "passThroughHooks", /* @__PURE__ */ new Set(["preprocess", "postprocess", "processAllTokens", "emStrongMask"])), __publicField(_a2, "passThroughHooksRespectAsync", /* @__PURE__ */ new Set(["preprocess", "postprocess", "processAllTokens"])), _a2);
  function D(l2, e) {
    if (Array.isArray(e)) for (let t = 0; t < e.length; t++) l2.push(e[t]);
    else l2.push(e);
  }
  var ne = class {
    constructor(...e) {
      __publicField(this, "defaults", G());
      __publicField(this, "options", this.setOptions);
      __publicField(this, "parse", this.parseMarkdown(true));
      __publicField(this, "parseInline", this.parseMarkdown(false));
      __publicField(this, "Parser", P);
      __publicField(this, "Renderer", E);
      __publicField(this, "TextRenderer", M);
      __publicField(this, "Lexer", w);
      __publicField(this, "Tokenizer", $);
      __publicField(this, "Hooks", z);
      this.use(...e);
    }
    walkTokens(e, t) {
      let n = [];
      for (let r of e) switch (D(n, t.call(this, r)), r.type) {
        case "table": {
          let s = r;
          for (let o of s.header) D(n, this.walkTokens(o.tokens, t));
          for (let o of s.rows) for (let i of o) D(n, this.walkTokens(i.tokens, t));
          break;
        }
        case "list": {
          let s = r;
          D(n, this.walkTokens(s.items, t));
          break;
        }
        default: {
          let s = r;
          this.defaults.extensions?.childTokens?.[s.type] ? this.defaults.extensions.childTokens[s.type].forEach((o) => {
            if (s[o]) {
              let i = s[o].flat(1 / 0);
              D(n, this.walkTokens(i, t));
            }
          }) : s.tokens && D(n, this.walkTokens(s.tokens, t));
        }
      }
      return n;
    }
    use(...e) {
      let t = this.defaults.extensions || { renderers: /* @__PURE__ */ Object.create(null), childTokens: /* @__PURE__ */ Object.create(null) };
      return e.forEach((n) => {
        let r = { ...n };
        if (r.async = this.defaults.async || r.async || false, n.extensions && (n.extensions.forEach((s) => {
          if (!s.name) throw new Error("extension name required");
          if ("renderer" in s) {
            let o = t.renderers[s.name];
            o ? t.renderers[s.name] = function(...i) {
              let a = s.renderer.apply(this, i);
              return a === false && (a = o.apply(this, i)), a;
            } : t.renderers[s.name] = s.renderer;
          }
          if ("tokenizer" in s) {
            if (!s.level || s.level !== "block" && s.level !== "inline") throw new Error("extension level must be 'block' or 'inline'");
            let o = t[s.level];
            o ? o.unshift(s.tokenizer) : t[s.level] = [s.tokenizer], s.start && (s.level === "block" ? t.startBlock ? t.startBlock.push(s.start) : t.startBlock = [s.start] : s.level === "inline" && (t.startInline ? t.startInline.push(s.start) : t.startInline = [s.start]));
          }
          "childTokens" in s && s.childTokens && (t.childTokens[s.name] = s.childTokens);
        }), r.extensions = t), n.renderer) {
          let s = this.defaults.renderer || new E(this.defaults);
          for (let o in n.renderer) {
            if (!(o in s)) throw new Error(`renderer '${o}' does not exist`);
            if (["options", "parser"].includes(o)) continue;
            let i = o, a = n.renderer[i], c = s[i];
            s[i] = (...u) => {
              let g = a.apply(s, u);
              return g === false && (g = c.apply(s, u)), g === false ? "" : g ?? "";
            };
          }
          r.renderer = s;
        }
        if (n.tokenizer) {
          let s = this.defaults.tokenizer || new $(this.defaults);
          for (let o in n.tokenizer) {
            if (!(o in s)) throw new Error(`tokenizer '${o}' does not exist`);
            if (["options", "rules", "lexer"].includes(o)) continue;
            let i = o, a = n.tokenizer[i], c = s[i];
            s[i] = (...u) => {
              let g = a.apply(s, u);
              return g === false && (g = c.apply(s, u)), g;
            };
          }
          r.tokenizer = s;
        }
        if (n.hooks) {
          let s = this.defaults.hooks || new z();
          for (let o in n.hooks) {
            if (!(o in s)) throw new Error(`hook '${o}' does not exist`);
            if (["options", "block"].includes(o)) continue;
            let i = o, a = n.hooks[i], c = s[i];
            z.passThroughHooks.has(o) ? s[i] = (u) => {
              if (s.options.async && z.passThroughHooksRespectAsync.has(o)) return (async () => {
                let h2 = await a.call(s, u);
                return c.call(s, h2);
              })();
              let g = a.call(s, u);
              return c.call(s, g);
            } : s[i] = (...u) => {
              if (s.options.async) return (async () => {
                let h2 = await a.apply(s, u);
                return h2 === false && (h2 = await c.apply(s, u)), h2;
              })();
              let g = a.apply(s, u);
              return g === false && (g = c.apply(s, u)), g;
            };
          }
          r.hooks = s;
        }
        if (n.walkTokens) {
          let s = this.defaults.walkTokens, o = n.walkTokens;
          r.walkTokens = function(i) {
            let a = [];
            return D(a, o.call(this, i)), s && D(a, s.call(this, i)), a;
          };
        }
        this.defaults = { ...this.defaults, ...r };
      }), this;
    }
    setOptions(e) {
      return this.defaults = { ...this.defaults, ...e }, this;
    }
    lexer(e, t) {
      return w.lex(e, t ?? this.defaults);
    }
    parser(e, t) {
      return P.parse(e, t ?? this.defaults);
    }
    parseMarkdown(e) {
      return (n, r) => {
        let s = { ...r }, o = { ...this.defaults, ...s }, i = this.onError(!!o.silent, !!o.async);
        if (this.defaults.async === true && s.async === false) return i(new Error("marked(): The async option was set to true by an extension. Remove async: false from the parse options object to return a Promise."));
        if (typeof n > "u" || n === null) return i(new Error("marked(): input parameter is undefined or null"));
        if (typeof n != "string") return i(new Error("marked(): input parameter is of type " + Object.prototype.toString.call(n) + ", string expected"));
        if (o.hooks && (o.hooks.options = o, o.hooks.block = e), o.async) return (async () => {
          let a = o.hooks ? await o.hooks.preprocess(n) : n, u = await (o.hooks ? await o.hooks.provideLexer(e) : e ? w.lex : w.lexInline)(a, o), g = o.hooks ? await o.hooks.processAllTokens(u) : u;
          o.walkTokens && await Promise.all(this.walkTokens(g, o.walkTokens));
          let p = await (o.hooks ? await o.hooks.provideParser(e) : e ? P.parse : P.parseInline)(g, o);
          return o.hooks ? await o.hooks.postprocess(p) : p;
        })().catch(i);
        try {
          o.hooks && (n = o.hooks.preprocess(n));
          let c = (o.hooks ? o.hooks.provideLexer(e) : e ? w.lex : w.lexInline)(n, o);
          o.hooks && (c = o.hooks.processAllTokens(c)), o.walkTokens && this.walkTokens(c, o.walkTokens);
          let g = (o.hooks ? o.hooks.provideParser(e) : e ? P.parse : P.parseInline)(c, o);
          return o.hooks && (g = o.hooks.postprocess(g)), g;
        } catch (a) {
          return i(a);
        }
      };
    }
    onError(e, t) {
      return (n) => {
        if (n.message += `
Please report this to https://github.com/markedjs/marked.`, e) {
          let r = "<p>An error occurred:</p><pre>" + y(n.message + "", true) + "</pre>";
          return t ? Promise.resolve(r) : r;
        }
        if (t) return Promise.reject(n);
        throw n;
      };
    }
  };
  var Z = new ne();
  function b(l2, e) {
    return Z.parse(l2, e);
  }
  b.options = b.setOptions = function(l2) {
    return Z.setOptions(l2), b.defaults = Z.defaults, pe(b.defaults), b;
  };
  b.getDefaults = G;
  b.defaults = _;
  function Yt(...l2) {
    return Z.use(...l2), b.defaults = Z.defaults, pe(b.defaults), b;
  }
  b.use = Yt;
  b.walkTokens = function(l2, e) {
    return Z.walkTokens(l2, e);
  };
  b.parseInline = Z.parseInline;
  b.Parser = P;
  b.parser = P.parse;
  b.Renderer = E;
  b.TextRenderer = M;
  b.Lexer = w;
  b.lexer = w.lex;
  b.Tokenizer = $;
  b.Hooks = z;
  b.parse = b;
  var Gn = b.options;
  var Nn = b.setOptions;
  var Qn = b.walkTokens;
  var Wn = b.parseInline;
  var Kn = P.parse;
  var Xn = w.lex;

  // src/markdown.ts
  var hooked = false;
  function hook() {
    if (hooked) return;
    hooked = true;
    purify_default.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A" && node.hasAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    });
  }
  function renderMarkdown(text2) {
    hook();
    const html2 = b.parse(text2, { async: false, gfm: true, breaks: false }).trim();
    return purify_default.sanitize(html2, {
      USE_PROFILES: { html: true },
      FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
      FORBID_ATTR: ["style"],
      RETURN_DOM_FRAGMENT: true
    });
  }

  // src/main.ts
  var TOKEN_KEY = "inquest.token";
  function $2(id) {
    const el = document.getElementById(id);
    if (!el) throw new Error(`missing #${id}`);
    return el;
  }
  function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag);
    for (const [k, v2] of Object.entries(attrs)) {
      if (k === "class") el.className = v2;
      else el.setAttribute(k, v2);
    }
    for (const c of children) el.append(typeof c === "string" ? document.createTextNode(c) : c);
    return el;
  }
  function show(el, visible) {
    el.hidden = !visible;
  }
  function sleep(ms) {
    return new Promise((r) => setTimeout(r, ms));
  }
  function newKey() {
    return typeof crypto.randomUUID === "function" ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(16).slice(2)}`;
  }
  function when(ms) {
    return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
  }
  function money(usd, complete, pricedAny) {
    if (complete && !pricedAny) return "unknown (no model call priced yet)";
    if (!complete && usd === 0) return "unknown (no price configured)";
    const text2 = `$${usd.toFixed(usd < 0.01 && usd > 0 ? 6 : 4)}`;
    return complete ? text2 : `${text2} (some calls unpriced)`;
  }
  function duration(ms) {
    if (ms < 1e3) return `${ms} ms`;
    const s = ms / 1e3;
    if (s < 60) return `${s.toFixed(1)} s`;
    return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  }
  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }
  var tokenWaiters = [];
  function askToken(why) {
    $2("token-why").textContent = why;
    show($2("token-panel"), true);
    authState("needs-token");
    $2("token-input").focus();
    return new Promise((resolve) => tokenWaiters.push(resolve));
  }
  function authState(state) {
    $2("auth-state").dataset.state = state;
    show($2("sign-out"), state === "token");
  }
  function setupToken() {
    $2("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const input = $2("token-input");
      const value = input.value.trim();
      if (!value) return;
      sessionStorage.setItem(TOKEN_KEY, value);
      input.value = "";
      show($2("token-panel"), false);
      authState("token");
      const waiters = tokenWaiters;
      tokenWaiters = [];
      for (const w2 of waiters) w2();
    });
    $2("sign-out").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      authState("none");
      route();
    });
    authState(token() ? "token" : "none");
  }
  async function call(method, request) {
    for (; ; ) {
      const sent = token();
      try {
        return await unary(method, request, { token: sent });
      } catch (e) {
        if (e instanceof GrpcError && e.code === Code.UNAUTHENTICATED) {
          const now = token();
          if (now !== null && now !== sent) continue;
          const had = sent !== null;
          sessionStorage.removeItem(TOKEN_KEY);
          await askToken(had ? "That token was refused." : "This server requires an API token.");
          continue;
        }
        throw e;
      }
    }
  }
  function showError(e) {
    const el = $2("error");
    el.textContent = e instanceof GrpcError ? `${e.message} (code ${e.code})` : String(e);
    show(el, true);
  }
  function clearError() {
    show($2("error"), false);
    $2("error").textContent = "";
  }
  var VIEWS = ["waiting-view", "incidents-view", "incident-view", "session-view"];
  function showView(id) {
    for (const v2 of VIEWS) show($2(v2), v2 === id);
  }
  var incidentCache = /* @__PURE__ */ new Map();
  async function incidentById(id) {
    const known = incidentCache.get(id);
    if (known) return known;
    const incident = decodeIncident(await call("GetIncident", encode.incidentId(id)));
    incidentCache.set(id, incident);
    return incident;
  }
  var approvalDrafts = /* @__PURE__ */ new Map();
  var approvalErrors = /* @__PURE__ */ new Map();
  var approvalsInFlight = /* @__PURE__ */ new Set();
  function approvalKey(sessionId, callId) {
    return `${sessionId}/${callId}`;
  }
  var CODE_NAMES = new Map(Object.entries(Code).map(([name, n]) => [n, name]));
  function errorText(e) {
    if (e instanceof GrpcError) return `${CODE_NAMES.get(e.code) ?? `code ${e.code}`}: ${e.message}`;
    return String(e);
  }
  function prettyArguments(json) {
    try {
      return JSON.stringify(JSON.parse(json), null, 2);
    } catch {
      return json;
    }
  }
  function pendingApprovals(s) {
    return s.approvals.filter((a) => a.state === ApprovalState.PENDING);
  }
  function decisionText(a) {
    const by = a.decidedBy ? ` by ${a.decidedBy}` : "";
    const comment = a.comment ? `: ${a.comment}` : "";
    const at2 = a.decidedAt ? ` (${when(a.decidedAt)})` : "";
    return `${approvalStateName(a.state)}${by}${comment}${at2}`;
  }
  function decideCall(sessionId, callId, verdict, host) {
    const key = approvalKey(sessionId, callId);
    if (approvalsInFlight.has(key)) return;
    approvalsInFlight.add(key);
    approvalErrors.delete(key);
    host.redraw();
    const comment = (approvalDrafts.get(key) ?? "").trim();
    call("DecideToolCalls", encode.decideToolCalls(sessionId, [{ callId, verdict, comment }], newKey())).then(async (bytes) => {
      const s = decodeSession(bytes);
      approvalDrafts.delete(key);
      try {
        await host.decided(s);
      } catch {
      } finally {
        approvalsInFlight.delete(key);
        host.redraw();
      }
    }).catch((e) => {
      approvalsInFlight.delete(key);
      const what = verdict === ToolCallVerdict.APPROVE ? "Approve" : "Deny";
      approvalErrors.set(key, `${what} failed: ${errorText(e)}`);
      host.redraw();
      host.reread().catch(() => void 0);
    });
  }
  function approvalCard(sessionId, a, actionable, host) {
    const key = approvalKey(sessionId, a.callId);
    const state = approvalStateName(a.state);
    const card = h("li", {
      class: `approval approval-${state}`,
      "data-session-id": sessionId,
      "data-call-id": a.callId,
      "data-state": state
    });
    card.append(
      h(
        "div",
        { class: "approval-head" },
        h("code", { class: "approval-tool" }, a.tool),
        a.server ? ` on ${a.server}` : "",
        " ",
        h("span", { class: `approval-state approval-state-${state}` }, state)
      ),
      h("pre", { class: "approval-args", "aria-label": "arguments" }, prettyArguments(a.argumentsJson))
    );
    const facts = h("dl", { class: "approval-facts" });
    const fact = (name, value, cls) => {
      if (value) facts.append(h("dt", {}, name), h("dd", { class: cls }, value));
    };
    fact("Side effect", a.sideEffect, "approval-side-effect");
    fact("Why held", a.rule, "approval-rule");
    fact("Call", a.callId, "approval-call-id");
    fact("Requested", when(a.requestedAt), "approval-requested");
    if (a.state === ApprovalState.PENDING) fact("Expires", when(a.expiresAt), "approval-expires");
    else fact("Decision", decisionText(a), "approval-decision");
    card.append(facts);
    if (actionable && a.state === ApprovalState.PENDING) {
      const busy = approvalsInFlight.has(key);
      const box = h("textarea", {
        class: "approval-comment",
        rows: "2",
        maxlength: "4096",
        "data-focus-key": `comment:${key}`
      });
      box.setAttribute("aria-label", `Comment on ${a.tool} (${a.callId})`);
      box.value = approvalDrafts.get(key) ?? "";
      box.addEventListener("input", () => approvalDrafts.set(key, box.value));
      const button = (label, action, verdict) => {
        const b2 = h("button", { type: "button", "data-action": action, "data-focus-key": `${action}:${key}` }, label);
        b2.disabled = busy;
        b2.setAttribute("aria-label", `${label} ${a.tool} (${a.callId})`);
        b2.addEventListener("click", () => decideCall(sessionId, a.callId, verdict, host));
        return b2;
      };
      card.append(
        h("label", { class: "approval-comment-label" }, "Comment (optional; the model sees it when denied)", box),
        h(
          "div",
          { class: "actions" },
          button("Approve", "approve", ToolCallVerdict.APPROVE),
          button("Deny", "deny", ToolCallVerdict.DENY)
        )
      );
    }
    const error = approvalErrors.get(key);
    if (error) card.append(h("p", { class: "approval-error", role: "alert" }, error));
    return card;
  }
  function replaceKeepingFocus(el, children) {
    const active = document.activeElement;
    const focusKey = active && el.contains(active) ? active.dataset.focusKey : void 0;
    const caret = active instanceof HTMLTextAreaElement ? [active.selectionStart, active.selectionEnd] : null;
    el.replaceChildren(...children);
    if (!focusKey) return;
    const again = [...el.querySelectorAll("[data-focus-key]")].find((e) => e.dataset.focusKey === focusKey);
    if (!again) return;
    again.focus();
    if (caret && again instanceof HTMLTextAreaElement) again.setSelectionRange(caret[0], caret[1]);
  }
  var HOLDS = [
    {
      kind: "confirmation",
      status: SessionStatus.AWAITING_CONFIRMATION,
      why: holdWhy,
      actions: [
        { label: "Confirm and continue", method: "ContinueSession", action: "confirm" },
        { label: "Cancel session", method: "CancelSession", action: "cancel" }
      ]
    },
    {
      kind: "approval",
      status: SessionStatus.AWAITING_APPROVAL,
      why: (s) => {
        const n = pendingApprovals(s).length;
        return `${n} tool call${n === 1 ? "" : "s"} held for your approval.`;
      },
      actions: [{ label: "Cancel session", method: "CancelSession", action: "cancel" }]
    }
  ];
  var QUEUED = {
    kind: "queued",
    status: 0,
    why: (s) => {
      const n = s.queuedMessages.length;
      return `${n} message${n === 1 ? "" : "s"} queued behind the running burst; cancelling the session drops ${n === 1 ? "it" : "them"}.`;
    },
    actions: [{ label: "Cancel session", method: "CancelSession", action: "cancel" }]
  };
  function waitingCount(s, hold) {
    return hold.kind === "approval" ? pendingApprovals(s).length : 1;
  }
  function holdWhy(s) {
    const plan = s.lastRecoveryPlan;
    if (!plan) return "Held for confirmation.";
    const calls = plan.interruptedCalls.map((c) => `${c.name} (${c.callId}, ${c.sideEffect})`).join(", ");
    return `Held for confirmation: ${calls || plan.kind}`;
  }
  var WAITING_POLL_MS = 3e3;
  var WAITING_POLL_MAX_MS = 3e4;
  var WAITING_MAX_PAGES = 5;
  var waitingRun = null;
  var waitingAgain = null;
  var waitingShown = "";
  var waitingHeld = [];
  var waitingMore = false;
  function waitingNow(fresh = false) {
    if (!waitingRun) {
      waitingRun = readWaiting().finally(() => {
        waitingRun = null;
      });
      return waitingRun;
    }
    if (!fresh) return waitingRun;
    if (!waitingAgain) {
      waitingAgain = waitingRun.catch(() => void 0).then(() => {
        waitingAgain = null;
        return waitingNow();
      });
    }
    return waitingAgain;
  }
  async function readWaiting() {
    const statuses = HOLDS.map((h2) => h2.status);
    const held = [];
    let pageToken = "";
    let more = false;
    for (let pages = 0; pages < WAITING_MAX_PAGES; pages++) {
      const page = decodeList(await call("ListSessions", encode.listSessions("", 100, pageToken, statuses)), decodeSession);
      held.push(...page.items);
      pageToken = page.next;
      if (!pageToken) break;
      more = pages + 1 === WAITING_MAX_PAGES;
    }
    const shown = [];
    for (const listed of held) {
      let s = listed;
      if (s.status === SessionStatus.AWAITING_APPROVAL && s.approvals.length === 0) {
        try {
          s = decodeSession(await call("GetSession", encode.sessionId(s.id)));
        } catch (e) {
          if (e instanceof GrpcError && e.code === Code.NOT_FOUND) continue;
          throw e;
        }
      }
      const hold = HOLDS.find((h2) => h2.status === s.status);
      if (!hold || waitingCount(s, hold) === 0) continue;
      shown.push({ session: s, hold, title: await incidentTitle(s.incidentId) });
    }
    pageToken = "";
    for (let pages = 0; pages < WAITING_MAX_PAGES; pages++) {
      const page = decodeList(
        await call("ListSessions", encode.listSessions("", 100, pageToken, [], true)),
        decodeSession
      );
      for (const s of page.items) {
        if (s.queuedMessages.length === 0 || shown.some((w2) => w2.session.id === s.id)) continue;
        shown.push({ session: s, hold: QUEUED, title: await incidentTitle(s.incidentId) });
      }
      pageToken = page.next;
      if (!pageToken) break;
      if (pages + 1 === WAITING_MAX_PAGES) more = true;
    }
    waitingHeld = shown;
    waitingMore = more;
    renderWaiting();
  }
  function renderWaiting() {
    const items = waitingHeld.map((w2) => waitingItem(w2.session, w2.hold, w2.title));
    const total = waitingHeld.reduce((n2, w2) => n2 + waitingCount(w2.session, w2.hold), 0);
    const more = waitingMore;
    const list = $2("waiting-list");
    const signature = JSON.stringify([items.map((i) => i.outerHTML), more]);
    if (signature === waitingShown && list.dataset.state === "loaded") return;
    waitingShown = signature;
    replaceKeepingFocus(list, items);
    if (items.length === 0) list.append(h("li", { class: "empty" }, "Nothing waits for you."));
    if (more) list.append(h("li", { class: "empty" }, "More are held than shown here."));
    list.dataset.state = "loaded";
    list.dataset.count = String(total);
    const count = $2("waiting-count");
    const n = `${total}${more ? "+" : ""}`;
    count.textContent = n;
    count.dataset.count = String(total);
    document.title = total ? `(${n}) waiting \xB7 Inquest console` : "Inquest console";
  }
  async function incidentTitle(id) {
    try {
      return (await incidentById(id)).title;
    } catch (e) {
      if (!(e instanceof GrpcError && e.code === Code.NOT_FOUND)) throw e;
      return id;
    }
  }
  function waitingItem(s, hold, title) {
    const actions = h("div", { class: "actions" });
    for (const a of hold.actions) {
      const button = h("button", { type: "button", "data-action": a.action }, a.label);
      button.addEventListener("click", () => {
        clearError();
        button.disabled = true;
        call(a.method, encode.sessionId(s.id)).then(() => waitingNow(true)).catch((e) => {
          button.disabled = false;
          showError(e);
        });
      });
      actions.append(button);
    }
    const cards = hold.kind === "approval" ? h(
      "ol",
      { class: "approvals" },
      ...s.approvals.map((a) => approvalCard(s.id, a, true, waitingHost))
    ) : "";
    const queued = s.queuedMessages.length > 0 ? h(
      "ol",
      { class: "queued-messages", "aria-label": "Queued messages" },
      ...s.queuedMessages.map(
        (q) => h(
          "li",
          { class: "queued", "data-position": String(q.position) },
          h("span", { class: "queued-state" }, `${q.interrupt ? "interrupting" : "queued"}, position ${q.position}`),
          h("pre", { class: "content" }, q.text)
        )
      )
    ) : "";
    return h(
      "li",
      { class: "waiting", "data-session-id": s.id, "data-kind": hold.kind, "data-status": statusName(s.status) },
      h("h3", {}, title),
      h(
        "p",
        {},
        h("a", { href: `#/session/${s.id}` }, `session ${s.id.slice(0, 8)}\u2026`),
        " ",
        h("span", { class: `status status-${statusName(s.status)}` }, statusName(s.status)),
        ` \xB7 ${s.turnCount} turns`
      ),
      h("p", { class: "why" }, hold.why(s)),
      cards,
      queued,
      actions
    );
  }
  var waitingHost = {
    decided: () => waitingNow(true),
    redraw: renderWaiting,
    reread: () => waitingNow(true)
  };
  async function pollWaiting() {
    let delay = WAITING_POLL_MS;
    for (; ; ) {
      while (hooks.holdWaiting) await sleep(20);
      try {
        await waitingNow();
        delay = WAITING_POLL_MS;
      } catch (e) {
        $2("waiting-list").dataset.state = "error";
        if (!$2("waiting-view").hidden) showError(e);
        delay = Math.min(delay * 2, WAITING_POLL_MAX_MS);
      }
      await sleep(document.hidden ? Math.max(delay, WAITING_POLL_MAX_MS / 2) : delay);
    }
  }
  var INCIDENT_PAGE = 20;
  var INCIDENT_POLL_MS = 5e3;
  var IncidentList = class {
    /** `source`: only incidents from it (0: any). */
    constructor(status, source = 0) {
      __publicField(this, "status", status);
      __publicField(this, "source", source);
      __publicField(this, "pages", 1);
      __publicField(this, "stale", false);
      __publicField(this, "shown", "");
      __publicField(this, "running", null);
    }
    close() {
      this.stale = true;
    }
    load() {
      if (!this.running) {
        this.running = this.read().finally(() => {
          this.running = null;
        });
      }
      return this.running;
    }
    async more() {
      await this.running;
      this.pages += 1;
      await this.load();
    }
    async read() {
      const list = $2("incident-list");
      if (list.dataset.state !== "loaded") list.dataset.state = "loading";
      const groups = [];
      let pageToken = "";
      let read = 0;
      do {
        if (this.status) {
          const page = decodeList(
            await call("ListSessions", encode.listSessions("", INCIDENT_PAGE, pageToken, [this.status])),
            decodeSession
          );
          for (const s of page.items) {
            const group = groups.find((g) => g.incident.id === s.incidentId);
            if (group) group.sessions?.push(s);
            else {
              const incident = await incidentById(s.incidentId);
              if (!this.source || incident.source === this.source) groups.push({ incident, sessions: [s] });
            }
          }
          pageToken = page.next;
        } else {
          const page = decodeList(
            await call("ListIncidents", encode.listIncidents(INCIDENT_PAGE, pageToken, this.source)),
            decodeIncident
          );
          for (const incident of page.items) groups.push({ incident, sessions: null });
          pageToken = page.next;
        }
        read += 1;
      } while (pageToken && read < this.pages);
      const items = [];
      for (const g of groups) items.push(await incidentItem(g.incident, g.sessions));
      if (this.stale) return;
      const signature = JSON.stringify([items.map((i) => i.outerHTML), pageToken]);
      if (signature === this.shown && list.dataset.state === "loaded") return;
      this.shown = signature;
      list.replaceChildren(...items);
      if (items.length === 0) {
        list.append(
          h(
            "li",
            { class: "empty" },
            this.status ? "No sessions with that status." : this.source ? "No incidents from that source." : "No incidents yet."
          )
        );
      }
      list.dataset.pages = String(read);
      list.dataset.state = "loaded";
      show($2("incidents-more"), pageToken !== "");
    }
  };
  var incidents = null;
  async function pollIncidents() {
    for (; ; ) {
      await sleep(INCIDENT_POLL_MS);
      if (incidentPage && !document.hidden) await incidentPage.load().catch(() => void 0);
      const list = incidents;
      if (!list || document.hidden) continue;
      try {
        await list.load();
      } catch {
      }
    }
  }
  var SOURCE_TEXT = {
    1: "Opened by hand",
    2: "From an alert",
    3: "From a schedule"
  };
  async function incidentItem(incident, only) {
    const sessions = only ?? decodeList(await call("ListSessions", encode.listSessions(incident.id, 50, "")), decodeSession).items;
    const ul = h("ul", { class: "sessions" });
    for (const s of sessions) {
      ul.append(
        h(
          "li",
          { "data-session-id": s.id, "data-status": statusName(s.status) },
          h("a", { href: `#/session/${s.id}` }, `session ${s.id.slice(0, 8)}\u2026`),
          " ",
          h("span", { class: `status status-${statusName(s.status)}` }, statusName(s.status)),
          ` \xB7 ${s.turnCount} turns \xB7 started ${when(s.createdAt)}`
        )
      );
    }
    return h(
      "li",
      { class: "incident", "data-incident-id": incident.id, "data-source": sourceName(incident.source) },
      h("h3", {}, h("a", { href: `#/incident/${incident.id}` }, incident.title)),
      h("p", { class: "source" }, SOURCE_TEXT[incident.source] ?? ""),
      incident.description ? h("p", { class: "description" }, incident.description) : "",
      ul
    );
  }
  var INCIDENT_SESSION_PAGES = 5;
  function safeUrl(url) {
    try {
      const u = new URL(url);
      return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
    } catch {
      return null;
    }
  }
  var IncidentPage = class {
    constructor(id) {
      __publicField(this, "id", id);
      __publicField(this, "stale", false);
      __publicField(this, "shown", "");
      __publicField(this, "running", null);
    }
    close() {
      this.stale = true;
    }
    load() {
      if (!this.running) {
        this.running = this.read().finally(() => {
          this.running = null;
        });
      }
      return this.running;
    }
    async read() {
      const incident = decodeIncident(await call("GetIncident", encode.incidentId(this.id)));
      incidentCache.set(incident.id, { ...incident, alertOrigin: null });
      const sessions = [];
      let pageToken = "";
      for (let pages = 0; pages < INCIDENT_SESSION_PAGES; pages++) {
        const page = decodeList(
          await call("ListSessions", encode.listSessions(this.id, 100, pageToken)),
          decodeSession
        );
        sessions.push(...page.items);
        pageToken = page.next;
        if (!pageToken) break;
      }
      if (this.stale) return;
      const tree = sessionTree(sessions);
      if (pageToken) tree.push(h("li", { class: "empty" }, "More sessions than shown here."));
      if (sessions.length === 0) tree.push(h("li", { class: "empty" }, "No sessions yet."));
      const origin = incident.alertOrigin;
      const alerts = origin ? alertOriginView(origin) : null;
      const signature = JSON.stringify([
        incident,
        tree.map((t) => t.outerHTML),
        alerts ? [alerts.facts.map((f) => f.outerHTML), alerts.rows.map((r) => r.outerHTML)] : null
      ]);
      if (signature === this.shown) return;
      this.shown = signature;
      $2("incident-title").textContent = incident.title;
      $2("incident-description").textContent = incident.description;
      $2("incident-created").textContent = `opened ${when(incident.createdAt)}`;
      const section = $2("alerts");
      if (alerts && origin) {
        $2("alert-origin").replaceChildren(...alerts.facts);
        $2("alert-event-rows").replaceChildren(...alerts.rows);
        section.dataset.resolved = String(origin.resolvedAt !== 0);
      } else {
        $2("alert-origin").replaceChildren();
        $2("alert-event-rows").replaceChildren();
      }
      show(section, alerts !== null);
      const list = $2("incident-sessions");
      list.replaceChildren(...tree);
      list.dataset.count = String(sessions.length);
      list.dataset.state = "loaded";
    }
  };
  function alertOriginView(o) {
    const facts = [];
    const fact = (name, value, cls) => facts.push(h("dt", {}, name), h("dd", { class: cls }, value));
    fact("Source", o.source, "alert-source");
    if (o.receiver) fact("Receiver", o.receiver, "alert-receiver");
    if (o.externalUrl) {
      const url = safeUrl(o.externalUrl);
      fact(
        "Sent by",
        url ? h("a", { href: url, rel: "noopener noreferrer", target: "_blank" }, o.externalUrl) : o.externalUrl,
        "alert-external-url"
      );
    }
    fact("Group", o.groupKey, "alert-group-key");
    fact(
      "Status",
      o.resolvedAt ? `resolved ${when(o.resolvedAt)}` : "firing",
      "alert-group-status"
    );
    fact("Events", `${o.eventsTotal}${o.eventsTotal > o.events.length ? ` (newest ${o.events.length} shown)` : ""}`, "alert-events-total");
    if (o.sessionSkipped) fact("No session started", o.sessionSkipped, "alert-session-skipped");
    const rows = o.events.map((e) => {
      const state = e.firing ? "firing" : "resolved";
      const labels = h("ul", { class: "labels" });
      const sorted = [...e.labels].sort(([a], [b2]) => a < b2 ? -1 : a > b2 ? 1 : 0);
      for (const [k, v2] of sorted) labels.append(h("li", {}, h("code", {}, `${k}=${v2}`)));
      return h(
        "tr",
        { class: `alert-event alert-${state}`, "data-fingerprint": e.fingerprint, "data-state": state },
        h("td", {}, h("span", { class: "alert-state" }, state)),
        h("td", {}, labels),
        h("td", {}, when(e.startsAt)),
        h("td", {}, when(e.endsAt)),
        h("td", {}, when(e.receivedAt))
      );
    });
    return { facts, rows };
  }
  function sessionTree(sessions) {
    const byId = new Map(sessions.map((s) => [s.id, s]));
    const children = /* @__PURE__ */ new Map();
    const roots = [];
    for (const s of sessions) {
      const parent = s.forkedFromSessionId;
      if (parent && byId.has(parent) && parent !== s.id) {
        const list = children.get(parent) ?? [];
        list.push(s);
        children.set(parent, list);
      } else {
        roots.push(s);
      }
    }
    const oldestFirst = (a, b2) => a.createdAt - b2.createdAt || (a.id < b2.id ? -1 : 1);
    const seen = /* @__PURE__ */ new Set();
    const node = (s) => {
      seen.add(s.id);
      const li = h(
        "li",
        { class: "session-node", "data-session-id": s.id, "data-status": statusName(s.status) },
        // The id's random tail: sessions and forks made the same minute
        // share the head of their UUIDv7.
        h("a", { href: `#/session/${s.id}`, title: s.id }, `session \u2026${s.id.slice(-12)}`),
        " ",
        h("span", { class: `status status-${statusName(s.status)}` }, statusName(s.status)),
        ` \xB7 ${s.turnCount} turns \xB7 started ${when(s.createdAt)}`
      );
      if (s.forkedFromSessionId) {
        li.dataset.forkedFrom = s.forkedFromSessionId;
        li.append(
          " \xB7 forked at ",
          h("a", { href: `#/session/${s.forkedFromSessionId}/turn/${s.forkedAtSeq}` }, `#${s.forkedAtSeq}`)
        );
      }
      const kids = (children.get(s.id) ?? []).filter((k) => !seen.has(k.id)).sort(oldestFirst);
      if (kids.length > 0) li.append(h("ul", { class: "forks" }, ...kids.map(node)));
      return li;
    };
    return roots.sort(oldestFirst).map(node);
  }
  var incidentPage = null;
  function setupNewInvestigation() {
    $2("new-investigation").addEventListener("submit", async (e) => {
      e.preventDefault();
      clearError();
      const title = $2("new-title").value.trim();
      const description = $2("new-description").value.trim();
      const message = $2("new-message").value.trim();
      if (!title || !message) {
        showError("A title and a question are needed.");
        return;
      }
      const button = $2("new-submit");
      button.disabled = true;
      try {
        const incident = decodeIncident(await call("CreateIncident", encode.createIncident(title, description)));
        const session = decodeSession(
          await call("StartSession", encode.startSession(incident.id, message, newKey()))
        );
        $2("new-investigation").reset();
        location.hash = `#/session/${session.id}`;
      } catch (err) {
        showError(err);
      } finally {
        button.disabled = false;
      }
    });
    $2("refresh").addEventListener("click", () => void incidents?.load().catch(showError));
    $2("incidents-more").addEventListener("click", () => void incidents?.more().catch(showError));
    const filter = $2("status-filter");
    for (const status of ALL_STATUSES) {
      filter.append(h("option", { value: statusName(status) }, statusName(status)));
    }
    const source = $2("source-filter");
    const go = () => {
      const q = new URLSearchParams();
      if (filter.value) q.set("status", filter.value);
      if (source.value) q.set("source", source.value);
      const query = q.toString();
      location.hash = query ? `#/incidents?${query}` : "#/incidents";
    };
    filter.addEventListener("change", go);
    source.addEventListener("change", go);
  }
  var ACTIVE = [SessionStatus.PENDING, SessionStatus.RUNNING];
  var WINDOW = 300;
  var PAGE = 100;
  var EDGE = 800;
  var SessionPage = class {
    /** `focus`: the seq a deep link (#/session/<id>/turn/<seq>) points at. */
    constructor(id, focus = null) {
      __publicField(this, "id", id);
      __publicField(this, "focus", focus);
      __publicField(this, "timeline", new Timeline());
      __publicField(this, "controller", null);
      __publicField(this, "stopped", false);
      __publicField(this, "watching", false);
      __publicField(this, "reconnects", 0);
      __publicField(this, "session", null);
      // ---------- the window of turns in the DOM ----------
      /** The seqs of the first and the last turn in the DOM (0: none). */
      __publicField(this, "lo", 0);
      __publicField(this, "hi", 0);
      /** Whether turns older than the window's first exist. */
      __publicField(this, "older", false);
      /** A read that moves the window is under way (one at a time). */
      __publicField(this, "moving", false);
      __publicField(this, "edgeCheck", false);
      __publicField(this, "onScroll", () => {
        if (this.edgeCheck) return;
        this.edgeCheck = true;
        requestAnimationFrame(() => {
          this.edgeCheck = false;
          this.checkEdges();
        });
      });
      /** A move a person asked for while another was under way: it runs next. */
      __publicField(this, "asked", null);
      /** Session reads issued and the latest one shown: an older answer that
       * arrives late never overwrites a newer one. */
      __publicField(this, "reads", 0);
      __publicField(this, "shown", 0);
      /** The incident's title was asked for (once per page). */
      __publicField(this, "titleAsked", false);
      /**
       * Messages queued behind the running burst, in queue order, until each
       * opens a burst and arrives as a user turn. Read from GetSession, and
       * learnt between reads from SendMessage's answer and the watch's
       * MessageQueued events.
       */
      __publicField(this, "queued", []);
      __publicField(this, "approvalsShown", "");
      __publicField(this, "cardHost", {
        decided: (s) => this.decided(s),
        redraw: () => {
          if (!this.stopped) this.renderApprovals();
        },
        reread: async () => {
          if (!this.stopped) await this.readSession("GetSession");
        }
      });
      __publicField(this, "refreshTimer", null);
    }
    async open() {
      showView("session-view");
      $2("session-title").textContent = `Session ${this.id}`;
      $2("turns").replaceChildren();
      $2("turn-announcer").textContent = "";
      this.updateEdges();
      $2("approval-list").replaceChildren();
      show($2("approvals"), false);
      show($2("report"), false);
      show($2("lineage"), false);
      closeForkForm();
      this.renderQueued();
      this.renderStreaming();
      this.setWatchState("connecting");
      await Promise.all([this.refresh(), this.openWindow()]);
      if (this.stopped) return;
      this.showWindow();
      void this.watch();
    }
    close() {
      this.stopped = true;
      this.controller?.abort();
      window.removeEventListener("scroll", this.onScroll);
    }
    /** Whether the window ends at the newest turn seen: live turns are then
     * shown as they come, otherwise they wait behind "Show newer turns". */
    atTail() {
      return this.hi >= this.timeline.lastSeq;
    }
    /**
     * The first page: the newest turns (ListTurns backwards), or those
     * around a deep-linked turn. The stream then follows from the head, so
     * a session of 20,000 turns opens with one read of a hundred.
     */
    async openWindow() {
      const page = this.focus !== null ? decodeListTurns(await call("ListTurns", encode.listTurns(this.id, Math.max(0, this.focus - PAGE / 2), PAGE))) : decodeListTurns(await call("ListTurns", encode.listTurnsBefore(this.id, LATEST, PAGE)));
      if (this.stopped) return;
      const first = page.turns[0]?.seq ?? 0;
      this.timeline.startAt(Math.max(0, first - 1));
      for (const t of page.turns) this.timeline.applyTurn(t);
      this.timeline.startAt(page.headSeq);
      const list = $2("turns");
      list.replaceChildren(...page.turns.map((t) => this.turnElement(t)));
      this.lo = first;
      this.hi = page.turns[page.turns.length - 1]?.seq ?? 0;
      this.older = this.focus !== null ? first > 1 : page.nextBeforeSeq !== 0;
      list.dataset.lastSeq = String(this.timeline.lastSeq);
      this.markHeldCalls();
      this.updateEdges();
    }
    /** Once the session and the first page are both in (either may move the
     * layout): the deep-linked turn, or the newest, on screen; then the
     * window follows the scrolling. */
    showWindow() {
      const list = $2("turns");
      const focused = this.focus !== null ? document.getElementById(`turn-${this.focus}`) : null;
      if (focused) focused.scrollIntoView({ block: "center" });
      else if (this.focus === null) list.lastElementChild?.scrollIntoView({ block: "nearest" });
      window.addEventListener("scroll", this.onScroll, { passive: true });
      if (list.lastElementChild) {
        list.dataset.shown = String(this.hi);
        performance.mark("inquest:turns-shown");
      }
    }
    /** Reads the next page at whichever edge of the window is near the screen. */
    checkEdges() {
      if (this.stopped || this.moving) return;
      const older = $2("turns-older");
      const newer = $2("turns-newer");
      if (!older.hidden && older.getBoundingClientRect().bottom > -EDGE) void this.moveWindow("older");
      else if (!newer.hidden && newer.getBoundingClientRect().top < window.innerHeight + EDGE) void this.moveWindow("newer");
    }
    /** Moves the window a page back or forth, keeping what is on screen in
     * place. A move the scrolling asks for during another is dropped (the
     * next scroll asks again); one a person asks for (`asked`) waits. */
    async moveWindow(way, asked = false) {
      if (this.stopped) return;
      if (this.moving) {
        if (asked) this.asked = way;
        return;
      }
      this.moving = true;
      try {
        const request = way === "older" ? encode.listTurnsBefore(this.id, this.lo, PAGE) : way === "newer" ? encode.listTurns(this.id, this.hi, PAGE) : encode.listTurnsBefore(this.id, LATEST, PAGE);
        const page = decodeListTurns(await call("ListTurns", request));
        if (this.stopped) return;
        const turns = page.turns.filter(
          (t) => way === "older" ? t.seq < this.lo : way === "newer" ? t.seq > this.hi && t.seq <= this.timeline.lastSeq : t.seq <= this.timeline.lastSeq
        );
        const changed = turns.flatMap((t) => this.timeline.applyHistory(t));
        const els = turns.map((t) => this.turnElement(t));
        const list = $2("turns");
        if (way === "latest") {
          list.replaceChildren(...els);
          this.older = (turns[0]?.seq ?? 1) > 1;
          this.syncBounds();
          list.lastElementChild?.scrollIntoView({ block: "nearest" });
        } else {
          this.anchored(() => {
            if (way === "older") {
              list.prepend(...els);
              if (page.nextBeforeSeq === 0) this.older = false;
              this.trim("bottom");
            } else {
              list.append(...els);
              this.trim("top");
            }
          });
        }
        for (const c of changed) this.renderCall(c);
        this.markHeldCalls();
        this.updateEdges();
      } finally {
        this.moving = false;
      }
      const next = this.asked;
      this.asked = null;
      if (next) return this.moveWindow(next);
      requestAnimationFrame(() => this.checkEdges());
    }
    /** Runs `mutate` keeping the first turn on screen where it was. */
    anchored(mutate) {
      const list = $2("turns");
      let anchor = null;
      for (const li of list.children) {
        if (li.getBoundingClientRect().bottom > 0) {
          anchor = li;
          break;
        }
      }
      const before = anchor?.getBoundingClientRect().top ?? 0;
      mutate();
      if (anchor?.isConnected) window.scrollBy(0, anchor.getBoundingClientRect().top - before);
    }
    /** Drops turns at one end until the window holds at most WINDOW. */
    trim(from) {
      const list = $2("turns");
      while (list.children.length > WINDOW) {
        (from === "top" ? list.firstElementChild : list.lastElementChild)?.remove();
        if (from === "top") this.older = true;
      }
      this.syncBounds();
    }
    syncBounds() {
      const list = $2("turns");
      this.lo = Number(list.firstElementChild?.dataset.seq ?? 0);
      this.hi = Number(list.lastElementChild?.dataset.seq ?? 0);
    }
    /** The controls at the window's edges say what lies beyond them. */
    updateEdges() {
      const list = $2("turns");
      list.dataset.lo = String(this.lo);
      list.dataset.hi = String(this.hi);
      show($2("turns-older"), this.older);
      $2("turns-older").textContent = `Load older turns (before #${this.lo})`;
      const behind = this.timeline.lastSeq - this.hi;
      show($2("turns-newer"), behind > 0);
      show($2("turns-latest"), behind > PAGE);
      $2("turns-newer").textContent = `Show newer turns (${behind} after #${this.hi})`;
    }
    /** Test hook: cut the live stream as a dropped connection would. */
    dropWatch() {
      if (!this.controller) return false;
      this.controller.abort();
      return true;
    }
    setWatchState(state) {
      const el = $2("watch-state");
      el.dataset.state = state;
      el.dataset.reconnects = String(this.reconnects);
      el.textContent = state === "live" ? "live" : state === "reconnecting" ? `reconnecting (after seq ${this.timeline.lastSeq})` : state === "ended" ? "not running" : state;
    }
    async readSession(method, request = encode.sessionId(this.id)) {
      const n = ++this.reads;
      const s = decodeSession(await call(method, request));
      if (n < this.shown) return null;
      this.shown = n;
      this.applySession(s);
      if (method === "GetSession") {
        this.queued = stillQueued(s.queuedMessages, s.headSeq, this.timeline.turns).map((q) => ({
          text: q.text,
          position: q.position
        }));
        this.renderQueued();
      }
      return s;
    }
    async refresh() {
      await this.readSession("GetSession");
      const s = this.session;
      if (!s) return;
      if (!ACTIVE.includes(s.status) && s.status !== SessionStatus.AWAITING_APPROVAL && s.headSeq > 0) {
        await this.loadReport();
      }
    }
    applySession(s) {
      this.session = s;
      const status = $2("session-status");
      status.textContent = statusName(s.status);
      status.dataset.status = statusName(s.status);
      $2("session-exit").textContent = s.exitReason ? `exit: ${s.exitReason}` : "";
      $2("session-counters").textContent = `${s.turnCount} turns \xB7 ${s.toolCalls} tool calls \xB7 session tokens ${s.inputTokens} in / ${s.outputTokens} out \xB7 ` + money(s.costUsd, s.costComplete, s.inputTokens > 0 || s.outputTokens > 0);
      if (ACTIVE.includes(s.status) || s.status === SessionStatus.AWAITING_CONFIRMATION || s.status === SessionStatus.AWAITING_APPROVAL) {
        show($2("report"), false);
      }
      show($2("confirm-button"), s.status === SessionStatus.AWAITING_CONFIRMATION);
      show(
        $2("cancel-button"),
        ACTIVE.includes(s.status) || s.status === SessionStatus.AWAITING_CONFIRMATION || s.status === SessionStatus.AWAITING_APPROVAL || s.status === SessionStatus.IDLE
      );
      this.renderApprovals();
      const plan = s.lastRecoveryPlan;
      const confirmWhy = $2("confirm-why");
      confirmWhy.textContent = s.status === SessionStatus.AWAITING_CONFIRMATION && plan ? holdWhy(s) : "";
      show(confirmWhy, confirmWhy.textContent !== "");
      $2("follow-up-send").disabled = s.status === SessionStatus.CANCELLED;
      if (s.forkedFromSessionId) {
        const link = $2("lineage-link");
        link.href = `#/session/${s.forkedFromSessionId}/turn/${s.forkedAtSeq}`;
        link.textContent = `session ${s.forkedFromSessionId} at turn #${s.forkedAtSeq}`;
        $2("lineage").dataset.parent = s.forkedFromSessionId;
        $2("lineage").dataset.atSeq = String(s.forkedAtSeq);
      }
      show($2("lineage"), s.forkedFromSessionId !== "");
      const incident = $2("session-incident-link");
      incident.href = `#/incident/${s.incidentId}`;
      const known = incidentCache.get(s.incidentId);
      incident.textContent = known?.title ?? s.incidentId;
      if (!known && s.incidentId && !this.titleAsked) {
        this.titleAsked = true;
        void incidentTitle(s.incidentId).then((title) => {
          if (!this.stopped && this.session?.incidentId === s.incidentId) incident.textContent = title;
        }).catch(() => void 0);
      }
      show($2("session-incident"), s.incidentId !== "");
      if (s.status === SessionStatus.CANCELLED && this.queued.length > 0) {
        this.queued = [];
        this.renderQueued();
      }
    }
    addQueued(text2, position) {
      if (this.queued.some((q) => q.text === text2 && q.position === position)) return;
      this.queued.push({ text: text2, position });
      this.renderQueued();
    }
    /** A user turn arrived: the queued message it was is no longer queued. */
    dequeue(text2) {
      if (this.queued.length === 0) return;
      const i = this.queued.findIndex((q) => q.text === text2);
      if (i < 0) return;
      this.queued.splice(i, 1);
      this.renderQueued();
    }
    renderQueued() {
      const items = this.queued.map(
        (q) => h(
          "li",
          { class: "queued", "data-position": String(q.position) },
          h("span", { class: "queued-state" }, `queued, position ${q.position}`),
          h("pre", { class: "content" }, q.text)
        )
      );
      $2("queued-list").replaceChildren(...items);
      $2("queued").dataset.count = String(items.length);
      show($2("queued"), items.length > 0);
    }
    /** The latest hold's calls: Approve / Deny while the session waits for
     * them, then how each was decided. */
    renderApprovals() {
      const s = this.session;
      const section = $2("approvals");
      this.markHeldCalls();
      if (!s || s.approvals.length === 0) {
        show(section, false);
        $2("approval-list").replaceChildren();
        this.approvalsShown = "";
        return;
      }
      const held = s.status === SessionStatus.AWAITING_APPROVAL;
      const cards = s.approvals.map((a) => approvalCard(s.id, a, held, this.cardHost));
      const signature = JSON.stringify(cards.map((c) => c.outerHTML));
      if (signature === this.approvalsShown) return;
      this.approvalsShown = signature;
      replaceKeepingFocus($2("approval-list"), cards);
      section.dataset.pending = String(held ? pendingApprovals(s).length : 0);
      show(section, true);
    }
    /** A call of the timeline not started yet says it waits for a person
     * (its card above has the buttons), rather than just "requested". */
    markHeldCalls() {
      for (const a of this.session?.approvals ?? []) {
        const view = this.timeline.calls.get(a.callId);
        if (view && view.state !== "requested") continue;
        for (const el of document.querySelectorAll(
          `#turns .tool-call[data-call-id="${CSS.escape(a.callId)}"]`
        )) {
          el.dataset.approval = approvalStateName(a.state);
          const state = el.querySelector(".call-state");
          if (state) state.textContent = a.state === ApprovalState.PENDING ? "awaiting approval" : "requested";
        }
      }
    }
    /** A decision was taken here: show the session it answered, and follow
     * the burst it started once nothing is left pending. */
    async decided(s) {
      if (this.stopped) return;
      this.shown = ++this.reads;
      this.applySession(s);
      if (s.status !== SessionStatus.AWAITING_APPROVAL) void this.watch();
      void waitingNow(true).catch(() => void 0);
    }
    async loadReport() {
      let report;
      try {
        report = decodeReport(await call("GetReport", encode.getReport(this.id, 0)));
      } catch (e) {
        if (e instanceof GrpcError && e.code === Code.NOT_FOUND) return;
        throw e;
      }
      $2("report-summary").replaceChildren(renderMarkdown(report.summary));
      $2("report-exit").textContent = report.exitReason;
      $2("report-burst").textContent = String(report.burst);
      $2("report-tokens").textContent = `session tokens ${report.inputTokens} in / ${report.outputTokens} out`;
      const writing = report.authorInputTokens || report.authorOutputTokens ? ` (report writing ${report.authorInputTokens} in / ${report.authorOutputTokens} out)` : "";
      $2("report-burst-figures").textContent = `${report.burstModelCalls} model calls \xB7 ${report.burstToolCalls} tool calls \xB7 ${report.burstInputTokens} in / ${report.burstOutputTokens} out${writing}`;
      $2("report-cost").textContent = money(report.costUsd, report.costComplete, report.burstModelCalls > 0);
      $2("report-active-time").textContent = duration(report.activeTimeMs);
      $2("report-tool-calls").textContent = String(report.toolCalls);
      $2("report").dataset.burst = String(report.burst);
      show($2("report"), true);
    }
    /** Follows the session from the last seq shown, reconnecting on drops. */
    async watch() {
      if (this.watching) return;
      this.watching = true;
      let backoff = 100;
      try {
        while (!this.stopped) {
          const controller = new AbortController();
          this.controller = controller;
          this.setWatchState("live");
          try {
            await serverStream(
              "WatchSession",
              encode.watchSession(this.id, this.timeline.lastSeq),
              { token: token(), signal: controller.signal },
              (m) => {
                backoff = 100;
                this.onEvent(decodeWatchEvent(m));
              }
            );
            this.controller = null;
            await this.refresh();
            if (this.session && ACTIVE.includes(this.session.status)) continue;
            this.setWatchState("ended");
            return;
          } catch (e) {
            this.controller = null;
            if (this.stopped) return;
            const code = e instanceof GrpcError ? e.code : Code.UNKNOWN;
            if (code === Code.UNAUTHENTICATED) {
              sessionStorage.removeItem(TOKEN_KEY);
              await askToken("This server requires an API token.");
              continue;
            }
            if (code === Code.NOT_FOUND || code === Code.INVALID_ARGUMENT || code === Code.PERMISSION_DENIED || code === Code.OUT_OF_RANGE) {
              showError(e);
              this.setWatchState("ended");
              return;
            }
            this.reconnects += 1;
            this.setWatchState("reconnecting");
            await sleep(backoff);
            while (hooks.holdReconnect && !this.stopped) await sleep(20);
            backoff = Math.min(backoff * 2, 2e3);
          }
        }
      } finally {
        this.watching = false;
      }
    }
    /** Counters and status follow the turns, at most a few reads a second. */
    scheduleRefresh() {
      if (this.refreshTimer !== null || this.stopped) return;
      this.refreshTimer = setTimeout(() => {
        this.refreshTimer = null;
        if (this.stopped) return;
        this.readSession("GetSession").catch(() => {
        });
      }, 250);
    }
    onEvent(event) {
      switch (event.kind) {
        case "turn": {
          const tail = this.atTail();
          const outcome = this.timeline.applyTurn(event.turn);
          if (outcome.added) {
            if (event.turn.role === TurnRole.USER) this.dequeue(event.turn.content);
            if (tail) this.appendLive(event.turn);
            else this.updateEdges();
            this.announce(event.turn);
            this.markHeldCalls();
            this.scheduleRefresh();
          }
          for (const c of outcome.changed) this.renderCall(c);
          this.renderStreaming();
          break;
        }
        case "tool_call_start": {
          const changed = this.timeline.applyStart(event.start);
          if (changed) this.renderCall(changed);
          break;
        }
        case "text_delta":
          if (this.timeline.applyDelta(event.delta)) this.renderStreaming();
          break;
        case "message_queued":
          if (event.queued.sessionId === this.id) this.addQueued(event.queued.text, event.queued.position);
          break;
        case "approval_requested":
          this.scheduleRefresh();
          break;
        case "heartbeat":
        case "lagged":
        case "unknown":
          break;
      }
      $2("turns").dataset.lastSeq = String(this.timeline.lastSeq);
    }
    /** A live turn at the window's end; the page follows it when the reader
     * was at the end, and the window drops its oldest turn past WINDOW. */
    appendLive(turn) {
      const list = $2("turns");
      const following = list.getBoundingClientRect().bottom <= window.innerHeight + 120;
      const li = this.turnElement(turn);
      list.append(li);
      this.trim("top");
      this.updateEdges();
      if (this.focus === null && following) li.scrollIntoView({ block: "nearest" });
    }
    /** Says a new turn arrived, for screen readers (the list itself is not
     * a live region: pages of older turns must not be read out). */
    announce(turn) {
      $2("turn-announcer").textContent = `New turn #${turn.seq}: ${turnLabel(turn)}`;
    }
    turnElement(turn) {
      const role = roleName(turn.role);
      const li = h("li", {
        class: `turn turn-${role}`,
        "data-seq": String(turn.seq),
        "data-role": role
      });
      const label = turnLabel(turn);
      const link = h("a", { class: "seq", href: `#/session/${this.id}/turn/${turn.seq}`, title: "link to this turn" }, `#${turn.seq}`);
      const fork = h("button", { type: "button", class: "fork-button", "data-action": "fork" }, "Fork from here");
      fork.setAttribute("aria-label", `Fork from here, turn ${turn.seq}`);
      fork.addEventListener("click", () => openForkForm(turn.seq));
      li.append(h("div", { class: "turn-head" }, link, ` ${label} `, h("time", {}, when(turn.createdAt)), fork));
      const note = turn.role === TurnRole.NOTICE || turn.role === TurnRole.COMPACTION;
      const body = note ? h("div", { role: "note", class: "note-body" }) : li;
      if (turn.role === TurnRole.NOTICE && turn.recoveryPlan) li.dataset.kind = turn.recoveryPlan.kind;
      if (turn.role === TurnRole.COMPACTION) {
        const c = turn.compaction;
        li.dataset.firstRetainedSeq = String(c?.firstRetainedSeq ?? 0);
        body.append(
          h(
            "p",
            { class: "compaction-note" },
            c ? `The context was compacted here: from now on the model sees this summary instead of the turns before #${c.firstRetainedSeq} (about ${c.tokensBefore} \u2192 ${c.tokensAfter} tokens). Every turn stays listed.` : "The context was compacted here: the model sees this summary instead of the older turns. Every turn stays listed."
          )
        );
      }
      if (turn.content) {
        if (turn.role === TurnRole.ASSISTANT || turn.role === TurnRole.COMPACTION) {
          const md = h("div", { class: "content markdown" });
          md.append(renderMarkdown(turn.content));
          body.append(md);
        } else {
          body.append(h("pre", { class: "content" }, turn.content));
        }
      }
      if (body !== li) li.append(body);
      if (turn.toolCalls.length > 0) {
        const calls = h("ul", { class: "tool-calls" });
        for (const c of turn.toolCalls) {
          const view = this.timeline.calls.get(c.id);
          calls.append(
            h(
              "li",
              { class: "tool-call", "data-call-id": c.id, "data-state": view?.state ?? "requested" },
              h("span", { class: "spinner", "aria-hidden": "true" }),
              h("code", {}, c.name),
              " ",
              h("span", { class: "call-args" }, c.argumentsJson),
              " ",
              h("span", { class: "call-state", role: "status" }, view?.state ?? "requested")
            )
          );
        }
        li.append(calls);
      }
      if (turn.role === TurnRole.ASSISTANT && (turn.inputTokens || turn.outputTokens)) {
        li.append(h("div", { class: "usage" }, `${turn.inputTokens} in / ${turn.outputTokens} out tokens`));
      }
      if (turn.seq === this.focus) {
        li.classList.add("focused");
        li.setAttribute("aria-current", "true");
        li.id = `turn-${turn.seq}`;
      }
      return li;
    }
    renderCall(view) {
      for (const el of document.querySelectorAll(`.tool-call[data-call-id="${CSS.escape(view.id)}"]`)) {
        el.dataset.state = view.state;
        const state = el.querySelector(".call-state");
        if (state) state.textContent = view.state === "failed" ? "failed (interrupted)" : view.state;
      }
    }
    renderStreaming() {
      const el = $2("streaming");
      const s = this.timeline.streaming;
      show(el, s !== null);
      if (s) {
        el.dataset.turnSeq = String(s.turnSeq);
        el.dataset.attempt = String(s.attempt);
        $2("streaming-text").textContent = this.timeline.streamingText();
      } else {
        delete el.dataset.turnSeq;
        $2("streaming-text").textContent = "";
      }
    }
    async confirm() {
      await this.readSession("ContinueSession");
      void this.watch();
    }
    async cancel() {
      await this.readSession("CancelSession");
    }
    /** Sends a follow-up; while a burst runs it is queued behind it or
     * interrupts it (`mode`), otherwise it opens a burst at once. */
    async followUp(text2, mode) {
      const before = this.timeline.lastSeq;
      const sent = decodeSendMessage(await call("SendMessage", encode.sendMessage(this.id, text2, newKey(), mode)));
      const arrived = this.timeline.turns.some(
        (t) => t.seq > before && t.role === TurnRole.USER && t.content === text2
      );
      if (sent.queued && !arrived) this.addQueued(text2, sent.queuePosition);
      await this.refresh();
      void this.watch();
    }
    /** Forks this session after turn `atSeq` (ForkSession) and opens the fork. */
    async fork(atSeq, message, key) {
      const s = decodeSession(await call("ForkSession", encode.forkSession(this.id, atSeq, message, key)));
      location.hash = `#/session/${s.id}`;
    }
  };
  var current = null;
  function turnLabel(turn) {
    return turn.role === TurnRole.TOOL ? `tool result \xB7 ${turn.toolName} (${turn.toolCallId})${turn.isError ? " \xB7 error" : ""}` : turn.role === TurnRole.NOTICE && turn.recoveryPlan ? `recovery notice \xB7 ${turn.recoveryPlan.kind}` : turn.role === TurnRole.COMPACTION ? "summary of earlier turns (compaction)" : roleName(turn.role);
  }
  var hooks = { holdReconnect: false, holdWaiting: false };
  var forkKey = "";
  function openForkForm(seq) {
    const form = $2("fork-form");
    if (form.dataset.atSeq !== String(seq) || form.hidden) forkKey = newKey();
    form.dataset.atSeq = String(seq);
    $2("fork-at").textContent = `#${seq}`;
    show(form, true);
    form.scrollIntoView({ block: "nearest" });
    $2("fork-message").focus();
  }
  function closeForkForm() {
    const form = $2("fork-form");
    show(form, false);
    form.dataset.atSeq = "0";
    $2("fork-message").value = "";
  }
  function setupSessionActions() {
    const guard = (f) => () => {
      clearError();
      f().catch(showError);
    };
    $2("fork-close").addEventListener("click", closeForkForm);
    $2("fork-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const seq = Number($2("fork-form").dataset.atSeq);
      if (!current || !seq) return;
      clearError();
      const button = $2("fork-submit");
      button.disabled = true;
      current.fork(seq, $2("fork-message").value.trim(), forkKey).catch(showError).finally(() => {
        button.disabled = false;
      });
    });
    $2("turns-older").addEventListener("click", guard(async () => current?.moveWindow("older", true)));
    $2("turns-newer").addEventListener("click", guard(async () => current?.moveWindow("newer", true)));
    $2("turns-latest").addEventListener("click", guard(async () => current?.moveWindow("latest", true)));
    $2("confirm-button").addEventListener("click", guard(async () => current?.confirm()));
    $2("cancel-button").addEventListener("click", guard(async () => current?.cancel()));
    $2("follow-up").addEventListener("submit", (e) => {
      e.preventDefault();
      const input = $2("follow-up-text");
      const text2 = input.value.trim();
      if (!text2 || !current) return;
      clearError();
      const mode = $2("follow-up-mode").value === "interrupt" ? IfRunning.INTERRUPT : IfRunning.ENQUEUE;
      current.followUp(text2, mode).then(() => {
        input.value = "";
      }).catch(showError);
    });
  }
  function route() {
    clearError();
    approvalErrors.clear();
    current?.close();
    current = null;
    incidents?.close();
    incidents = null;
    incidentPage?.close();
    incidentPage = null;
    if (location.hash === "" || location.hash === "#") {
      history.replaceState(null, "", "#/waiting");
    }
    const hash = location.hash;
    const m = /^#\/session\/([0-9a-fA-F-]{36})(?:\/turn\/([1-9][0-9]{0,17}))?$/.exec(hash);
    const list = /^#\/(?:incidents)?(?:\?((?:status|source)=[a-z_]+(?:&(?:status|source)=[a-z_]+)?))?$/.exec(hash);
    const one = /^#\/incident\/([0-9a-fA-F-]{36})$/.exec(hash);
    if (one) {
      showView("incident-view");
      $2("incident-sessions").dataset.state = "loading";
      for (const id of ["incident-title", "incident-description", "incident-created"]) $2(id).textContent = "";
      show($2("alerts"), false);
      incidentPage = new IncidentPage(one[1]);
      incidentPage.load().catch(showError);
    } else if (m) {
      current = new SessionPage(m[1], m[2] ? Number(m[2]) : null);
      current.open().catch(showError);
    } else if (hash === "#/waiting") {
      showView("waiting-view");
      waitingNow().catch(showError);
    } else if (list) {
      showView("incidents-view");
      const q = new URLSearchParams(list[1] ?? "");
      const status = statusFromName(q.get("status") ?? "");
      const source = sourceFromName(q.get("source") ?? "");
      $2("status-filter").value = status ? statusName(status) : "";
      $2("source-filter").value = source ? sourceName(source) : "";
      const el = $2("incident-list");
      el.dataset.state = "loading";
      el.dataset.filter = status ? statusName(status) : "";
      el.dataset.source = source ? sourceName(source) : "";
      incidents = new IncidentList(status, source);
      incidents.load().catch(showError);
    } else {
      showView("waiting-view");
      showError(`No such page: ${hash}`);
    }
  }
  window.inquestConsole = {
    dropWatch: () => current?.dropWatch() ?? false,
    holdReconnect: (hold) => {
      hooks.holdReconnect = hold;
    },
    seqs: () => current?.timeline.seqs() ?? [],
    reconnects: () => current?.reconnects ?? 0,
    holdWaiting: (hold) => {
      hooks.holdWaiting = hold;
    },
    waitingBusy: () => waitingRun !== null || waitingAgain !== null
  };
  setupToken();
  setupNewInvestigation();
  setupSessionActions();
  window.addEventListener("hashchange", route);
  route();
  void pollWaiting();
  void pollIncidents();
})();
