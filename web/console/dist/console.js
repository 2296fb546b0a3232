"use strict";
(() => {
  var __defProp = Object.defineProperty;
  var __defNormalProp = (obj, key, value) => key in obj ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
  var __publicField = (obj, key, value) => __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);

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
  function parseTrailers(text) {
    const m = /* @__PURE__ */ new Map();
    for (const line of text.split("\r\n")) {
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
      let v = Math.floor(n);
      while (v >= 128) {
        this.bytes.push(v % 128 | 128);
        v = Math.floor(v / 128);
      }
      this.bytes.push(v);
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
        const b = new TextEncoder().encode(s);
        this.tag(field, 2);
        this.varint(b.length);
        for (const x of b) this.bytes.push(x);
      }
      return this;
    }
    /** A repeated enum, packed (as proto3 encodes it). */
    packed(field, values) {
      if (values.length > 0) {
        const inner = new _Writer();
        for (const v of values) inner.varint(v);
        const b = inner.finish();
        this.tag(field, 2);
        this.varint(b.length);
        for (const x of b) this.bytes.push(x);
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
        const b = buf[pos++];
        result |= BigInt(b & 127) << BigInt(7 * i);
        if ((b & 128) === 0) {
          return Number(BigInt.asIntN(64, result));
        }
      }
      throw new DecodeError("varint longer than 10 bytes");
    };
    const take = (n) => {
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
    for (const [n, v] of fields(sub(f))) {
      if (n === 1) seconds = num(v);
      if (n === 2) nanos = num(v);
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
    AWAITING_CONFIRMATION: 7
  };
  var STATUS_NAMES = [
    "unspecified",
    "pending",
    "running",
    "idle",
    "completed",
    "failed",
    "cancelled",
    "awaiting_confirmation"
  ];
  function statusName(status) {
    return STATUS_NAMES[status] ?? `status_${status}`;
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
  function decodeIncident(buf) {
    const m = { id: "", title: "", description: "", createdAt: 0 };
    for (const [n, f] of fields(buf)) {
      if (n === 1) m.id = str(f);
      else if (n === 2) m.title = str(f);
      else if (n === 3) m.description = str(f);
      else if (n === 4) m.createdAt = timestamp(f);
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
      costComplete: false
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
      costUsd: null
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
        const d = { sessionId: "", turnSeq: 0, offset: 0, text: "", attempt: 0 };
        for (const [k, g] of fields(body)) {
          if (k === 1) d.sessionId = str(g);
          else if (k === 2) d.turnSeq = num(g);
          else if (k === 3) d.offset = num(g);
          else if (k === 4) d.text = str(g);
          else if (k === 5) d.attempt = num(g);
        }
        event = { kind: "text_delta", delta: d };
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
  function decodeSendMessage(buf) {
    let seq = 0;
    for (const [n, f] of fields(buf)) if (n === 1) seq = num(f);
    return seq;
  }
  var encode = {
    createIncident: (title, description) => new Writer().string(1, title).string(2, description).finish(),
    listIncidents: (pageSize, pageToken) => new Writer().uint(1, pageSize).string(2, pageToken).finish(),
    startSession: (incidentId, message, idempotencyKey) => new Writer().string(1, incidentId).string(2, message).string(3, idempotencyKey).finish(),
    sessionId: (sessionId) => new Writer().string(1, sessionId).finish(),
    listSessions: (incidentId, pageSize, pageToken, statuses = []) => new Writer().string(1, incidentId).uint(2, pageSize).string(3, pageToken).packed(4, statuses).finish(),
    listTurns: (sessionId, afterSeq, limit) => new Writer().string(1, sessionId).uint(2, afterSeq).uint(3, limit).finish(),
    sendMessage: (sessionId, message, idempotencyKey) => new Writer().string(1, sessionId).string(2, message).string(3, idempotencyKey).finish(),
    watchSession: (sessionId, afterSeq) => new Writer().string(1, sessionId).uint(2, afterSeq).finish(),
    getReport: (sessionId, burst) => new Writer().string(1, sessionId).uint(2, burst).finish()
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
    applyTurn(turn) {
      if (turn.seq <= this.lastSeq) return { added: false, changed: [] };
      if (turn.seq !== this.lastSeq + 1) this.gaps.push([this.lastSeq, turn.seq]);
      this.lastSeq = turn.seq;
      this.turns.push(turn);
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
      return { added: true, changed };
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
        const same = cur.bytes.subarray(delta.offset, end).every((b, i) => b === piece[i]);
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

  // src/main.ts
  var TOKEN_KEY = "inquest.token";
  function $(id) {
    const el = document.getElementById(id);
    if (!el) throw new Error(`missing #${id}`);
    return el;
  }
  function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") el.className = v;
      else el.setAttribute(k, v);
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
    const text = `$${usd.toFixed(usd < 0.01 && usd > 0 ? 6 : 4)}`;
    return complete ? text : `${text} (some calls unpriced)`;
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
    $("token-why").textContent = why;
    show($("token-panel"), true);
    authState("needs-token");
    $("token-input").focus();
    return new Promise((resolve) => tokenWaiters.push(resolve));
  }
  function authState(state) {
    $("auth-state").dataset.state = state;
    show($("sign-out"), state === "token");
  }
  function setupToken() {
    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const input = $("token-input");
      const value = input.value.trim();
      if (!value) return;
      sessionStorage.setItem(TOKEN_KEY, value);
      input.value = "";
      show($("token-panel"), false);
      authState("token");
      const waiters = tokenWaiters;
      tokenWaiters = [];
      for (const w of waiters) w();
    });
    $("sign-out").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      authState("none");
      route();
    });
    authState(token() ? "token" : "none");
  }
  async function call(method, request) {
    for (; ; ) {
      try {
        return await unary(method, request, { token: token() });
      } catch (e) {
        if (e instanceof GrpcError && e.code === Code.UNAUTHENTICATED) {
          const had = token() !== null;
          sessionStorage.removeItem(TOKEN_KEY);
          await askToken(had ? "That token was refused." : "This server requires an API token.");
          continue;
        }
        throw e;
      }
    }
  }
  function showError(e) {
    const el = $("error");
    el.textContent = e instanceof GrpcError ? `${e.message} (code ${e.code})` : String(e);
    show(el, true);
  }
  function clearError() {
    show($("error"), false);
    $("error").textContent = "";
  }
  async function renderIncidents() {
    show($("incidents-view"), true);
    show($("session-view"), false);
    const list = $("incident-list");
    list.dataset.state = "loading";
    const page = decodeList(await call("ListIncidents", encode.listIncidents(50, "")), decodeIncident);
    const items = [];
    for (const incident of page.items) items.push(await incidentItem(incident));
    list.replaceChildren(...items);
    if (items.length === 0) list.append(h("li", { class: "empty" }, "No incidents yet."));
    list.dataset.state = "loaded";
  }
  async function incidentItem(incident) {
    const sessions = decodeList(
      await call("ListSessions", encode.listSessions(incident.id, 50, "")),
      decodeSession
    );
    const ul = h("ul", { class: "sessions" });
    for (const s of sessions.items) {
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
      { class: "incident", "data-incident-id": incident.id },
      h("h3", {}, incident.title),
      incident.description ? h("p", { class: "description" }, incident.description) : "",
      ul
    );
  }
  function setupNewInvestigation() {
    $("new-investigation").addEventListener("submit", async (e) => {
      e.preventDefault();
      clearError();
      const title = $("new-title").value.trim();
      const description = $("new-description").value.trim();
      const message = $("new-message").value.trim();
      if (!title || !message) {
        showError("A title and a question are needed.");
        return;
      }
      const button = $("new-submit");
      button.disabled = true;
      try {
        const incident = decodeIncident(await call("CreateIncident", encode.createIncident(title, description)));
        const session = decodeSession(
          await call("StartSession", encode.startSession(incident.id, message, newKey()))
        );
        $("new-investigation").reset();
        location.hash = `#/session/${session.id}`;
      } catch (err) {
        showError(err);
      } finally {
        button.disabled = false;
      }
    });
    $("refresh").addEventListener("click", () => void renderIncidents().catch(showError));
  }
  var ACTIVE = [SessionStatus.PENDING, SessionStatus.RUNNING];
  var SessionPage = class {
    constructor(id) {
      __publicField(this, "id", id);
      __publicField(this, "timeline", new Timeline());
      __publicField(this, "controller", null);
      __publicField(this, "stopped", false);
      __publicField(this, "watching", false);
      __publicField(this, "reconnects", 0);
      __publicField(this, "session", null);
      /** Session reads issued and the latest one shown: an older answer that
       * arrives late never overwrites a newer one. */
      __publicField(this, "reads", 0);
      __publicField(this, "shown", 0);
      __publicField(this, "refreshTimer", null);
    }
    async open() {
      show($("incidents-view"), false);
      show($("session-view"), true);
      $("session-title").textContent = `Session ${this.id}`;
      $("turns").replaceChildren();
      show($("report"), false);
      this.renderStreaming();
      this.setWatchState("connecting");
      await this.refresh();
      void this.watch();
    }
    close() {
      this.stopped = true;
      this.controller?.abort();
    }
    /** Test hook: cut the live stream as a dropped connection would. */
    dropWatch() {
      if (!this.controller) return false;
      this.controller.abort();
      return true;
    }
    setWatchState(state) {
      const el = $("watch-state");
      el.dataset.state = state;
      el.dataset.reconnects = String(this.reconnects);
      el.textContent = state === "live" ? "live" : state === "reconnecting" ? `reconnecting (after seq ${this.timeline.lastSeq})` : state === "ended" ? "not running" : state;
    }
    async readSession(method) {
      const n = ++this.reads;
      const s = decodeSession(await call(method, encode.sessionId(this.id)));
      if (n < this.shown) return null;
      this.shown = n;
      this.applySession(s);
      return s;
    }
    async refresh() {
      await this.readSession("GetSession");
      const s = this.session;
      if (!s) return;
      if (!ACTIVE.includes(s.status) && s.headSeq > 0) await this.loadReport();
    }
    applySession(s) {
      this.session = s;
      const status = $("session-status");
      status.textContent = statusName(s.status);
      status.dataset.status = statusName(s.status);
      $("session-exit").textContent = s.exitReason ? `exit: ${s.exitReason}` : "";
      $("session-counters").textContent = `${s.turnCount} turns \xB7 ${s.toolCalls} tool calls \xB7 session tokens ${s.inputTokens} in / ${s.outputTokens} out \xB7 ` + money(s.costUsd, s.costComplete, s.inputTokens > 0 || s.outputTokens > 0);
      if (ACTIVE.includes(s.status) || s.status === SessionStatus.AWAITING_CONFIRMATION) {
        show($("report"), false);
      }
      show($("confirm-button"), s.status === SessionStatus.AWAITING_CONFIRMATION);
      show(
        $("cancel-button"),
        ACTIVE.includes(s.status) || s.status === SessionStatus.AWAITING_CONFIRMATION || s.status === SessionStatus.IDLE
      );
      const plan = s.lastRecoveryPlan;
      const confirmWhy = $("confirm-why");
      confirmWhy.textContent = s.status === SessionStatus.AWAITING_CONFIRMATION && plan ? `Held for confirmation: ${plan.interruptedCalls.map((c) => `${c.name} (${c.callId}, ${c.sideEffect})`).join(", ") || plan.kind}` : "";
      show(confirmWhy, confirmWhy.textContent !== "");
      $("follow-up-send").disabled = s.status === SessionStatus.CANCELLED;
    }
    async loadReport() {
      let report;
      try {
        report = decodeReport(await call("GetReport", encode.getReport(this.id, 0)));
      } catch (e) {
        if (e instanceof GrpcError && e.code === Code.NOT_FOUND) return;
        throw e;
      }
      $("report-summary").textContent = report.summary;
      $("report-exit").textContent = report.exitReason;
      $("report-burst").textContent = String(report.burst);
      $("report-tokens").textContent = `session tokens ${report.inputTokens} in / ${report.outputTokens} out`;
      const writing = report.authorInputTokens || report.authorOutputTokens ? ` (report writing ${report.authorInputTokens} in / ${report.authorOutputTokens} out)` : "";
      $("report-burst-figures").textContent = `${report.burstModelCalls} model calls \xB7 ${report.burstToolCalls} tool calls \xB7 ${report.burstInputTokens} in / ${report.burstOutputTokens} out${writing}`;
      $("report-cost").textContent = money(report.costUsd, report.costComplete, report.burstModelCalls > 0);
      $("report-active-time").textContent = duration(report.activeTimeMs);
      $("report-tool-calls").textContent = String(report.toolCalls);
      $("report").dataset.burst = String(report.burst);
      show($("report"), true);
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
          const outcome = this.timeline.applyTurn(event.turn);
          if (outcome.added) {
            this.renderTurn(event.turn);
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
        case "heartbeat":
        case "lagged":
        case "unknown":
          break;
      }
      $("turns").dataset.lastSeq = String(this.timeline.lastSeq);
    }
    renderTurn(turn) {
      const role = roleName(turn.role);
      const li = h("li", {
        class: `turn turn-${role}`,
        "data-seq": String(turn.seq),
        "data-role": role
      });
      const label = turn.role === TurnRole.TOOL ? `tool result \xB7 ${turn.toolName} (${turn.toolCallId})${turn.isError ? " \xB7 error" : ""}` : turn.role === TurnRole.NOTICE && turn.recoveryPlan ? `recovery notice \xB7 ${turn.recoveryPlan.kind}` : role;
      li.append(h("div", { class: "turn-head" }, h("span", { class: "seq" }, `#${turn.seq}`), ` ${label} `, h("time", {}, when(turn.createdAt))));
      if (turn.role === TurnRole.NOTICE) {
        li.setAttribute("role", "note");
        if (turn.recoveryPlan) li.dataset.kind = turn.recoveryPlan.kind;
      }
      if (turn.content) li.append(h("pre", { class: "content" }, turn.content));
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
      $("turns").append(li);
      li.scrollIntoView({ block: "nearest" });
    }
    renderCall(view) {
      for (const el of document.querySelectorAll(`.tool-call[data-call-id="${CSS.escape(view.id)}"]`)) {
        el.dataset.state = view.state;
        const state = el.querySelector(".call-state");
        if (state) state.textContent = view.state === "failed" ? "failed (interrupted)" : view.state;
      }
    }
    renderStreaming() {
      const el = $("streaming");
      const s = this.timeline.streaming;
      show(el, s !== null);
      if (s) {
        el.dataset.turnSeq = String(s.turnSeq);
        el.dataset.attempt = String(s.attempt);
        $("streaming-text").textContent = this.timeline.streamingText();
      } else {
        delete el.dataset.turnSeq;
        $("streaming-text").textContent = "";
      }
    }
    async confirm() {
      await this.readSession("ContinueSession");
      void this.watch();
    }
    async cancel() {
      await this.readSession("CancelSession");
    }
    async followUp(text) {
      decodeSendMessage(await call("SendMessage", encode.sendMessage(this.id, text, newKey())));
      await this.refresh();
      void this.watch();
    }
  };
  var current = null;
  var hooks = { holdReconnect: false };
  function setupSessionActions() {
    const guard = (f) => () => {
      clearError();
      f().catch(showError);
    };
    $("confirm-button").addEventListener("click", guard(async () => current?.confirm()));
    $("cancel-button").addEventListener("click", guard(async () => current?.cancel()));
    $("follow-up").addEventListener("submit", (e) => {
      e.preventDefault();
      const input = $("follow-up-text");
      const text = input.value.trim();
      if (!text || !current) return;
      clearError();
      current.followUp(text).then(() => {
        input.value = "";
      }).catch(showError);
    });
  }
  function route() {
    clearError();
    current?.close();
    current = null;
    const m = /^#\/session\/([0-9a-fA-F-]{36})$/.exec(location.hash);
    if (m) {
      current = new SessionPage(m[1]);
      current.open().catch(showError);
    } else {
      renderIncidents().catch(showError);
    }
  }
  window.inquestConsole = {
    dropWatch: () => current?.dropWatch() ?? false,
    holdReconnect: (hold) => {
      hooks.holdReconnect = hold;
    },
    seqs: () => current?.timeline.seqs() ?? [],
    reconnects: () => current?.reconnects ?? 0
  };
  setupToken();
  setupNewInvestigation();
  setupSessionActions();
  window.addEventListener("hashchange", route);
  route();
})();
