// The codec against bytes the reference implementation produces: every hex
// string here was made by Google's protobuf library for Python (5.29.4)
// from proto/inquest/v1/investigations.proto (grpcio-tools' protoc).
import assert from "node:assert/strict";
import { test } from "node:test";
import { FrameReader, parseTrailers } from "./grpcweb";
import {
  ApprovalState,
  DecodeError,
  SessionStatus,
  ToolCallVerdict,
  Writer,
  approvalStateName,
  IfRunning,
  decodeIncident,
  decodeReport,
  decodeSendMessage,
  decodeSession,
  decodeTurn,
  decodeWatchEvent,
  encode,
  fields,
  statusFromName,
  statusName,
} from "./proto";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const bytes = (h: string) => new Uint8Array(Buffer.from(h, "hex"));

test("requests encode as proto3 does (defaults omitted)", () => {
  assert.equal(hex(encode.watchSession("s", 0)), "0a0173");
  assert.equal(hex(encode.watchSession("s", 300)), "0a017310ac02");
  assert.equal(hex(encode.createIncident("t", "")), "0a0174");
  assert.equal(hex(encode.listSessions("", 50, "", [2, 7])), "103222020207");
  assert.equal(hex(encode.startSession("i", "é", "k")), "0a01691202c3a91a016b");
});

test("varints round-trip up to 2^53 and negative int64s decode", () => {
  for (const n of [1, 127, 128, 16384, 2 ** 31, 2 ** 53 - 1]) {
    const [[field, f]] = fields(new Writer().uint(3, n).finish());
    assert.equal(field, 3);
    assert.deepEqual(f, { wire: 0, value: n });
  }
  // -1 as int64: ten bytes.
  const [[, f]] = fields(bytes("10ffffffffffffffffff01"));
  assert.equal(f.value, -1);
});

test("truncated input is refused, unknown fields are skipped", () => {
  assert.throws(() => fields(bytes("0a05")), DecodeError);
  assert.throws(() => fields(bytes("08ff")), DecodeError);
  // field 99 (varint), then seq = 7
  const t = decodeTurn(bytes("98060110" + "07"));
  assert.equal(t.seq, 7);
});

test("a session decodes with its plan, cost and timestamps", () => {
  // id "a", status 7, head_seq 3, created_at {seconds 1, nanos 5e6},
  // last_recovery_plan {kind "k", repaired_call_ids ["c1"], interrupted_calls [{call_id "c2"}]},
  // cost_usd 0.5, cost_complete true
  const s = decodeSession(bytes("0a0161180728035207080110c096b102620d0a016b1a02633142040a0263329901000000000000e03fa00101"));
  assert.equal(s.id, "a");
  assert.equal(s.status, 7);
  assert.equal(s.headSeq, 3);
  assert.equal(s.createdAt, 1005);
  assert.equal(s.lastRecoveryPlan?.kind, "k");
  assert.deepEqual(s.lastRecoveryPlan?.repairedCallIds, ["c1"]);
  assert.equal(s.lastRecoveryPlan?.interruptedCalls[0].callId, "c2");
  assert.equal(s.costUsd, 0.5);
  assert.equal(s.costComplete, true);
});

test("watch events of every kind decode", () => {
  // turn { seq 2, role assistant, tool_calls [{id "c", name "n", arguments_json "{}"}] }
  const turn = decodeWatchEvent(bytes("0a10100218022a0a0a016312016e1a027b7d"));
  assert.equal(turn.kind, "turn");
  if (turn.kind === "turn") {
    assert.equal(turn.turn.seq, 2);
    assert.deepEqual(turn.turn.toolCalls, [{ id: "c", name: "n", argumentsJson: "{}" }]);
  }
  const start = decodeWatchEvent(bytes("120810021a016322016e"));
  assert.deepEqual(start, { kind: "tool_call_start", start: { sessionId: "", assistantSeq: 2, callId: "c", toolName: "n" } });
  assert.deepEqual(decodeWatchEvent(bytes("1a0408031009")), { kind: "lagged", lastDeliveredSeq: 3, headSeq: 9 });
  assert.deepEqual(decodeWatchEvent(bytes("22020804")), { kind: "heartbeat", headSeq: 4 });
  // text_delta { turn_seq 5, offset 3, text "hé", attempt 2 }
  assert.deepEqual(decodeWatchEvent(bytes("2a0b10051803220368c3a92802")), {
    kind: "text_delta",
    delta: { sessionId: "", turnSeq: 5, offset: 3, text: "hé", attempt: 2 },
  });
});

test("a report decodes with tokens, cost and active time", () => {
  const r = decodeReport(bytes("0a017310021a09636f6d706c657465642a04646f6e6530033864401460dc0b71000000000000d03f7801a80101"));
  assert.deepEqual(r, {
    sessionId: "s",
    burst: 2,
    exitReason: "completed",
    summary: "done",
    toolCalls: 3,
    inputTokens: 100,
    outputTokens: 20,
    activeTimeMs: 1500,
    costUsd: 0.25,
    costComplete: true,
    costUnknownCalls: 1,
    burstModelCalls: 0,
    burstInputTokens: 0,
    burstOutputTokens: 0,
    burstToolCalls: 0,
    authorInputTokens: 0,
    authorOutputTokens: 0,
  });
});

test("a report's burst figures decode (fields 16-18, 22-24)", () => {
  // Encoded by hand: tag varints 0x80 0x01 (16) ... 0xc0 0x01 (24).
  const r = decodeReport(bytes("800102" + "8801ac02" + "90011e" + "b00101" + "b80132" + "c00105"));
  assert.equal(r.burstModelCalls, 2);
  assert.equal(r.burstInputTokens, 300);
  assert.equal(r.burstOutputTokens, 30);
  assert.equal(r.burstToolCalls, 1);
  assert.equal(r.authorInputTokens, 50);
  assert.equal(r.authorOutputTokens, 5);
});

test("gRPC-Web frames split anywhere give the same messages and trailers", () => {
  const wire = bytes("00000000020801" + "0000000000" + "80000000" + "0f" + Buffer.from("grpc-status:0\r\n").toString("hex"));
  for (let split = 1; split < wire.length; split++) {
    const r = new FrameReader();
    const got = [...r.push(wire.subarray(0, split)), ...r.push(wire.subarray(split))];
    assert.deepEqual(got.map(hex), ["0801", ""]);
    assert.equal(r.trailers?.get("grpc-status"), "0");
    assert.equal(r.pending(), 0);
  }
  assert.equal(parseTrailers("grpc-status: 16\r\ngrpc-message: no%20token\r\n").get("grpc-message"), "no%20token");
});

test("a session held for approval decodes with its approvals", () => {
  // id "s", status AWAITING_APPROVAL, approvals [
  //   {call_id "c1", assistant_seq 4, tool "restart_service", server "ops",
  //    arguments_json '{"target":"<img src=x>"}', side_effect "mutating",
  //    rule 'require (mode "mutating")', state DENIED, requested_at {10},
  //    expires_at {86410, 5e6 ns}, decided_by "alice", comment "not now",
  //    decided_at {20}},
  //   {call_id "c2", state PENDING}]
  const s = decodeSession(
    bytes(
      "0a01731808b20180010a02633110041a0f726573746172745f7365727669636522036f70732a187b22746172676574223a22" +
        "3c696d67207372633d783e227d32086d75746174696e673a197265717569726520286d6f646520226d75746174696e6722" +
        "2940034a02080a5209088aa30510c096b1025a05616c69636562076e6f74206e6f776a020814b201060a0263324001",
    ),
  );
  assert.equal(s.status, SessionStatus.AWAITING_APPROVAL);
  assert.equal(statusName(s.status), "awaiting_approval");
  assert.equal(statusFromName("awaiting_approval"), 8);
  assert.deepEqual(s.approvals, [
    {
      callId: "c1",
      assistantSeq: 4,
      tool: "restart_service",
      server: "ops",
      argumentsJson: '{"target":"<img src=x>"}',
      sideEffect: "mutating",
      rule: 'require (mode "mutating")',
      state: ApprovalState.DENIED,
      requestedAt: 10_000,
      expiresAt: 86_410_005,
      decidedBy: "alice",
      comment: "not now",
      decidedAt: 20_000,
    },
    {
      callId: "c2",
      assistantSeq: 0,
      tool: "",
      server: "",
      argumentsJson: "",
      sideEffect: "",
      rule: "",
      state: ApprovalState.PENDING,
      requestedAt: 0,
      expiresAt: 0,
      decidedBy: "",
      comment: "",
      decidedAt: 0,
    },
  ]);
  assert.equal(approvalStateName(s.approvals[0].state), "denied");
  assert.equal(approvalStateName(ApprovalState.SUPERSEDED), "superseded");
  // A session never held has none.
  assert.deepEqual(decodeSession(bytes("0a0161")).approvals, []);
});

test("an approval_requested watch event decodes", () => {
  // approval_requested { call_id "c3", tool "t", state PENDING }
  const e = decodeWatchEvent(bytes("32090a0263331a01744001"));
  assert.equal(e.kind, "approval_requested");
  if (e.kind === "approval_requested") {
    assert.equal(e.approval.callId, "c3");
    assert.equal(e.approval.tool, "t");
    assert.equal(e.approval.state, ApprovalState.PENDING);
  }
});

test("DecideToolCalls and the held-status filter encode as proto3 does", () => {
  // session_id "s", decisions [{call_id "c1", APPROVE}, {call_id "c2", DENY, comment "é no"}],
  // idempotency_key "k"
  assert.equal(
    hex(
      encode.decideToolCalls(
        "s",
        [
          { callId: "c1", verdict: ToolCallVerdict.APPROVE, comment: "" },
          { callId: "c2", verdict: ToolCallVerdict.DENY, comment: "é no" },
        ],
        "k",
      ),
    ),
    "0a017312060a0263311001120d0a02633210021a05c3a9206e6f1a016b",
  );
  // page_size 100, statuses [AWAITING_CONFIRMATION, AWAITING_APPROVAL]
  assert.equal(
    hex(encode.listSessions("", 100, "", [SessionStatus.AWAITING_CONFIRMATION, SessionStatus.AWAITING_APPROVAL])),
    "106422020708",
  );
});

test("SendMessage's if_running and answer, and ForkSession, as proto3 has them", () => {
  assert.equal(hex(encode.sendMessage("s", "m", "k", IfRunning.ENQUEUE)), "0a017312016d1a016b2002");
  assert.equal(hex(encode.sendMessage("s", "m", "k", IfRunning.INTERRUPT)), "0a017312016d1a016b2003");
  assert.equal(hex(encode.forkSession("s", 3, "m", "k")), "0a017310031a016d22016b");
  // No message: the field is left unset (the fork stays idle).
  assert.equal(hex(encode.forkSession("s", 3, "", "")), "0a01731003");
  assert.deepEqual(decodeSendMessage(bytes("10011802")), { seq: 0, queued: true, queuePosition: 2 });
  assert.deepEqual(decodeSendMessage(bytes("0809")), { seq: 9, queued: false, queuePosition: 0 });
});

test("a MessageQueued event and a fork's lineage decode", () => {
  assert.deepEqual(decodeWatchEvent(bytes("3a080a01731201741802")), {
    kind: "message_queued",
    queued: { sessionId: "s", text: "t", position: 2 },
  });
  const s = decodeSession(bytes("0a0161ba010170c00104"));
  assert.equal(s.forkedFromSessionId, "p");
  assert.equal(s.forkedAtSeq, 4);
});

test("an incident decodes with the alert group behind it", () => {
  // alert_origin {source "alertmanager", receiver "r", external_url "http://x",
  // group_key "g", events_total 3, events [{fingerprint "f", firing, starts_at 1 s,
  // labels {a: b}, received_at 3 s}, {fingerprint "f", ends_at 4 s}],
  // resolved_at 2 s, session_skipped "cap"}
  const i = decodeIncident(
    bytes(
      "0a01691201742a490a0c616c6572746d616e616765721201721a08687474703a2f2f78220167280332150a016610011a0208012a060a01611201623202080332070a0166220208043a0208024203636170",
    ),
  );
  assert.equal(i.title, "t");
  assert.deepEqual(i.alertOrigin, {
    source: "alertmanager",
    receiver: "r",
    externalUrl: "http://x",
    groupKey: "g",
    eventsTotal: 3,
    events: [
      { fingerprint: "f", firing: true, startsAt: 1000, endsAt: 0, labels: [["a", "b"]], receivedAt: 3000 },
      { fingerprint: "f", firing: false, startsAt: 0, endsAt: 4000, labels: [], receivedAt: 0 },
    ],
    resolvedAt: 2000,
    sessionSkipped: "cap",
  });
  assert.equal(decodeIncident(bytes("0a0169")).alertOrigin, null);
});
