// gRPC-Web over fetch (binary `application/grpc-web+proto`), same origin:
// the server translates it to gRPC for the very same Investigations
// service (tonic-web), behind the same auth and limits.

export const SERVICE = "inquest.v1.Investigations";

/** gRPC status codes the console acts on. */
export const Code = {
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
  UNAUTHENTICATED: 16,
} as const;

export class GrpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** Splits a gRPC-Web body into its data messages and its trailers. */
export class FrameReader {
  private buf = new Uint8Array(0);
  trailers: Map<string, string> | null = null;

  /** Feeds bytes; returns the data messages completed by them. */
  push(chunk: Uint8Array): Uint8Array[] {
    const joined = new Uint8Array(this.buf.length + chunk.length);
    joined.set(this.buf, 0);
    joined.set(chunk, this.buf.length);
    this.buf = joined;
    const out: Uint8Array[] = [];
    while (this.buf.length >= 5) {
      const flag = this.buf[0];
      const len = new DataView(this.buf.buffer, this.buf.byteOffset + 1, 4).getUint32(0, false);
      if (this.buf.length < 5 + len) break;
      const body = this.buf.slice(5, 5 + len);
      this.buf = this.buf.slice(5 + len);
      if (flag & 0x80) {
        this.trailers = parseTrailers(new TextDecoder().decode(body));
      } else {
        out.push(body);
      }
    }
    return out;
  }

  /** Bytes of a frame not yet complete. */
  pending(): number {
    return this.buf.length;
  }
}

export function parseTrailers(text: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const line of text.split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0) m.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  return m;
}

function statusOf(get: (k: string) => string | null | undefined): GrpcError | null | undefined {
  const code = get("grpc-status");
  if (code === null || code === undefined) return undefined;
  const n = Number(code);
  if (n === Code.OK) return null;
  let message = get("grpc-message") ?? "";
  try {
    message = decodeURIComponent(message);
  } catch {
    // Not percent-encoded: shown as sent.
  }
  return new GrpcError(Number.isFinite(n) ? n : Code.UNKNOWN, message);
}

export interface CallOptions {
  token: string | null;
  signal?: AbortSignal;
}

function headers(token: string | null): Record<string, string> {
  const h: Record<string, string> = {
    "content-type": "application/grpc-web+proto",
    "x-grpc-web": "1",
    accept: "application/grpc-web+proto",
  };
  if (token) h["authorization"] = `Bearer ${token}`;
  return h;
}

function frame(message: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + message.length);
  new DataView(out.buffer).setUint32(1, message.length, false);
  out.set(message, 5);
  return out;
}

async function open(method: string, request: Uint8Array, opts: CallOptions): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(`/${SERVICE}/${method}`, {
      method: "POST",
      headers: headers(opts.token),
      body: frame(request) as BodyInit,
      signal: opts.signal,
      cache: "no-store",
    });
  } catch (e) {
    if (opts.signal?.aborted) throw new GrpcError(Code.CANCELLED, "cancelled");
    throw new GrpcError(Code.UNAVAILABLE, `cannot reach the server: ${String(e)}`);
  }
  // A trailers-only answer carries its status in the headers.
  const early = statusOf((k) => response.headers.get(k));
  if (early) throw early;
  if (!response.ok) throw new GrpcError(Code.UNAVAILABLE, `HTTP ${response.status}`);
  return response;
}

/** One unary call: its response message's bytes. */
export async function unary(method: string, request: Uint8Array, opts: CallOptions): Promise<Uint8Array> {
  const response = await open(method, request, opts);
  let body: Uint8Array;
  try {
    body = new Uint8Array(await response.arrayBuffer());
  } catch (e) {
    throw new GrpcError(Code.UNAVAILABLE, `the answer was cut: ${String(e)}`);
  }
  const reader = new FrameReader();
  const messages = reader.push(body);
  const status = statusOf((k) => reader.trailers?.get(k));
  if (status) throw status;
  if (status === undefined) throw new GrpcError(Code.UNAVAILABLE, "the answer ended without a status");
  const first = messages[0];
  if (!first) throw new GrpcError(Code.UNKNOWN, "no response message");
  return first;
}

/**
 * A server stream: calls `onMessage` for each message as it arrives and
 * resolves when the stream ends OK; rejects with its status otherwise (a
 * cut connection is UNAVAILABLE, an abort CANCELLED).
 */
export async function serverStream(
  method: string,
  request: Uint8Array,
  opts: CallOptions,
  onMessage: (m: Uint8Array) => void,
): Promise<void> {
  const response = await open(method, request, opts);
  if (!response.body) throw new GrpcError(Code.UNAVAILABLE, "no response body");
  const body = response.body.getReader();
  const reader = new FrameReader();
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
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
  if (status === undefined) throw new GrpcError(Code.UNAVAILABLE, "the stream ended without a status");
}
