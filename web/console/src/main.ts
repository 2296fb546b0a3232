// The Inquest web console: incidents and their sessions, a live session
// view, and the actions an operator takes. Plain DOM, no framework: the
// elements the browser tests read carry stable ids and data attributes
// (data-seq, data-role, data-call-id, data-state, data-status).

import { Code, GrpcError, serverStream, unary } from "./grpcweb";
import {
  type Approval,
  type AlertOrigin,
  type Incident,
  type Report,
  type Session,
  type SessionTurn,
  ALL_STATUSES,
  ApprovalState,
  IfRunning,
  SessionStatus,
  ToolCallVerdict,
  TurnRole,
  approvalStateName,
  decodeIncident,
  decodeList,
  decodeListTurns,
  decodeReport,
  decodeSendMessage,
  decodeSession,
  decodeWatchEvent,
  encode,
  LATEST,
  roleName,
  statusFromName,
  statusName,
  sourceFromName,
  sourceName,
} from "./proto";
import { type CallView, stillQueued, Timeline } from "./view";
import { renderMarkdown } from "./markdown";

const TOKEN_KEY = "inquest.token";

// ---------- small DOM helpers ----------

function $(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (!el) throw new Error(`missing #${id}`);
  return el;
}

function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: Array<Node | string>
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else el.setAttribute(k, v);
  }
  for (const c of children) el.append(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}

function show(el: HTMLElement, visible: boolean): void {
  el.hidden = !visible;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function newKey(): string {
  return typeof crypto.randomUUID === "function"
    ? crypto.randomUUID()
    : `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

function when(ms: number): string {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
}

/** A cost; `pricedAny`: some model call was counted (without one, a
 * complete $0 only means nothing was priced yet: unknown, never $0). */
function money(usd: number, complete: boolean, pricedAny: boolean): string {
  if (complete && !pricedAny) return "unknown (no model call priced yet)";
  if (!complete && usd === 0) return "unknown (no price configured)";
  const text = `$${usd.toFixed(usd < 0.01 && usd > 0 ? 6 : 4)}`;
  return complete ? text : `${text} (some calls unpriced)`;
}

function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

// ---------- token and calls ----------

function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Shows the token form; resolves once a token was entered. */
let tokenWaiters: Array<() => void> = [];
function askToken(why: string): Promise<void> {
  $("token-why").textContent = why;
  show($("token-panel"), true);
  authState("needs-token");
  ($("token-input") as HTMLInputElement).focus();
  return new Promise((resolve) => tokenWaiters.push(resolve));
}

/** The auth indicator; "Forget token" only when there is one to forget. */
function authState(state: "none" | "token" | "needs-token"): void {
  $("auth-state").dataset.state = state;
  show($("sign-out"), state === "token");
}

function setupToken(): void {
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("token-input") as HTMLInputElement;
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

/** A unary call that asks for a token on UNAUTHENTICATED and retries. */
async function call(method: string, request: Uint8Array): Promise<Uint8Array> {
  for (;;) {
    // Several calls run at once (the pollers): each judges the token it
    // sent, so a second refusal of the same token still says "refused".
    const sent = token();
    try {
      return await unary(method, request, { token: sent });
    } catch (e) {
      if (e instanceof GrpcError && e.code === Code.UNAUTHENTICATED) {
        const now = token();
        // A newer token was entered meanwhile: try that one.
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

function showError(e: unknown): void {
  const el = $("error");
  el.textContent = e instanceof GrpcError ? `${e.message} (code ${e.code})` : String(e);
  show(el, true);
}

function clearError(): void {
  show($("error"), false);
  $("error").textContent = "";
}

// ---------- views ----------

const VIEWS = ["waiting-view", "incidents-view", "incident-view", "session-view"];

function showView(id: string): void {
  for (const v of VIEWS) show($(v), v === id);
}

/** Incidents read once, by id: titles do not change, and the waiting list
 * and a filtered incident list name each session's incident. */
const incidentCache = new Map<string, Incident>();

async function incidentById(id: string): Promise<Incident> {
  const known = incidentCache.get(id);
  if (known) return known;
  const incident = decodeIncident(await call("GetIncident", encode.incidentId(id)));
  incidentCache.set(id, incident);
  return incident;
}

// ---------- approvals ----------

/**
 * The cards of tool calls held for a human (`Session.approvals`), shared by
 * the waiting list and the session page. Everything in them (tool,
 * arguments, rule, comment) came from a model, a tool or a person: it is
 * set as text, never parsed as HTML. What a person typed into a comment
 * box, a decision in flight and its error are kept here by call, so a
 * card rebuilt by a poll keeps them.
 */
const approvalDrafts = new Map<string, string>();
const approvalErrors = new Map<string, string>();
const approvalsInFlight = new Set<string>();

function approvalKey(sessionId: string, callId: string): string {
  return `${sessionId}/${callId}`;
}

const CODE_NAMES = new Map<number, string>(Object.entries(Code).map(([name, n]) => [n, name]));

/** An error as shown in place: the gRPC code's name and the server's words. */
function errorText(e: unknown): string {
  if (e instanceof GrpcError) return `${CODE_NAMES.get(e.code) ?? `code ${e.code}`}: ${e.message}`;
  return String(e);
}

/** Arguments as stored, indented when they are JSON. */
function prettyArguments(json: string): string {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}

function pendingApprovals(s: Session): Approval[] {
  return s.approvals.filter((a) => a.state === ApprovalState.PENDING);
}

/** What was decided, by whom, and their comment. */
function decisionText(a: Approval): string {
  const by = a.decidedBy ? ` by ${a.decidedBy}` : "";
  const comment = a.comment ? `: ${a.comment}` : "";
  const at = a.decidedAt ? ` (${when(a.decidedAt)})` : "";
  return `${approvalStateName(a.state)}${by}${comment}${at}`;
}

/** Where approval cards are shown: the waiting list or a session page. */
interface CardHost {
  /** DecideToolCalls answered with this session. */
  decided(s: Session): Promise<void>;
  /** Redraws the cards from what was last read (busy state, errors). */
  redraw(): void;
  /** Reads the session(s) again and redraws. */
  reread(): Promise<void>;
}

/** Decides one call, showing a refusal on its card. */
function decideCall(sessionId: string, callId: string, verdict: number, host: CardHost): void {
  const key = approvalKey(sessionId, callId);
  if (approvalsInFlight.has(key)) return;
  approvalsInFlight.add(key);
  approvalErrors.delete(key);
  host.redraw();
  const comment = (approvalDrafts.get(key) ?? "").trim();
  // A fresh key per click: a second click is a second decision, which the
  // server refuses once the first was taken (the call is no longer pending).
  call("DecideToolCalls", encode.decideToolCalls(sessionId, [{ callId, verdict, comment }], newKey()))
    .then(async (bytes) => {
      const s = decodeSession(bytes);
      approvalDrafts.delete(key);
      // Busy until the view shows the decision, so the buttons of a call
      // already decided cannot be clicked again meanwhile.
      try {
        await host.decided(s);
      } catch {
        // The decision stands; the next poll or read shows it.
      } finally {
        approvalsInFlight.delete(key);
        host.redraw();
      }
    })
    .catch((e) => {
      approvalsInFlight.delete(key);
      const what = verdict === ToolCallVerdict.APPROVE ? "Approve" : "Deny";
      approvalErrors.set(key, `${what} failed: ${errorText(e)}`);
      host.redraw();
      // Refused (decided elsewhere, the session moved on): show what
      // stands now, the refusal kept on the card.
      host.reread().catch(() => undefined);
    });
}

/**
 * One approval's card: buttons and a comment box while it is pending in a
 * session that waits for it (`actionable`), its decision once made.
 */
function approvalCard(sessionId: string, a: Approval, actionable: boolean, host: CardHost): HTMLElement {
  const key = approvalKey(sessionId, a.callId);
  const state = approvalStateName(a.state);
  const card = h("li", {
    class: `approval approval-${state}`,
    "data-session-id": sessionId,
    "data-call-id": a.callId,
    "data-state": state,
  });
  card.append(
    h(
      "div",
      { class: "approval-head" },
      h("code", { class: "approval-tool" }, a.tool),
      a.server ? ` on ${a.server}` : "",
      " ",
      h("span", { class: `approval-state approval-state-${state}` }, state),
    ),
    h("pre", { class: "approval-args", "aria-label": "arguments" }, prettyArguments(a.argumentsJson)),
  );
  const facts = h("dl", { class: "approval-facts" });
  const fact = (name: string, value: string, cls: string) => {
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
      "data-focus-key": `comment:${key}`,
    });
    box.setAttribute("aria-label", `Comment on ${a.tool} (${a.callId})`);
    box.value = approvalDrafts.get(key) ?? "";
    box.addEventListener("input", () => approvalDrafts.set(key, box.value));
    const button = (label: string, action: string, verdict: number) => {
      const b = h("button", { type: "button", "data-action": action, "data-focus-key": `${action}:${key}` }, label);
      b.disabled = busy;
      b.setAttribute("aria-label", `${label} ${a.tool} (${a.callId})`);
      b.addEventListener("click", () => decideCall(sessionId, a.callId, verdict, host));
      return b;
    };
    card.append(
      h("label", { class: "approval-comment-label" }, "Comment (optional; the model sees it when denied)", box),
      h(
        "div",
        { class: "actions" },
        button("Approve", "approve", ToolCallVerdict.APPROVE),
        button("Deny", "deny", ToolCallVerdict.DENY),
      ),
    );
  }
  const error = approvalErrors.get(key);
  if (error) card.append(h("p", { class: "approval-error", role: "alert" }, error));
  return card;
}

/** Replaces `el`'s children, keeping the keyboard focus (and a comment
 * box's caret) on the element that stands for the same thing. */
function replaceKeepingFocus(el: HTMLElement, children: Node[]): void {
  const active = document.activeElement as HTMLElement | null;
  const focusKey = active && el.contains(active) ? active.dataset.focusKey : undefined;
  const caret =
    active instanceof HTMLTextAreaElement ? [active.selectionStart, active.selectionEnd] : null;
  el.replaceChildren(...children);
  if (!focusKey) return;
  const again = [...el.querySelectorAll<HTMLElement>("[data-focus-key]")].find((e) => e.dataset.focusKey === focusKey);
  if (!again) return;
  again.focus();
  if (caret && again instanceof HTMLTextAreaElement) again.setSelectionRange(caret[0], caret[1]);
}

// ---------- waiting for you ----------

/**
 * What a session can be held for, each with why it waits and the actions
 * that release it: a recovery confirmation, or tool calls held for
 * approval (each decided on its own card). Another hold (a queued message)
 * is one more entry here, with its status and its actions.
 */
interface Hold {
  kind: string;
  status: number;
  why(s: Session): string;
  actions: Array<{ label: string; method: string; action: string }>;
}

const HOLDS: Hold[] = [
  {
    kind: "confirmation",
    status: SessionStatus.AWAITING_CONFIRMATION,
    why: holdWhy,
    actions: [
      { label: "Confirm and continue", method: "ContinueSession", action: "confirm" },
      { label: "Cancel session", method: "CancelSession", action: "cancel" },
    ],
  },
  {
    kind: "approval",
    status: SessionStatus.AWAITING_APPROVAL,
    why: (s) => {
      const n = pendingApprovals(s).length;
      return `${n} tool call${n === 1 ? "" : "s"} held for your approval.`;
    },
    actions: [{ label: "Cancel session", method: "CancelSession", action: "cancel" }],
  },
];

/** A session with messages queued behind its running burst (read with
 * ListSessions' queued_only): they wait for the burst, and a person may
 * want them gone, which only a cancel of the session does. */
const QUEUED: Hold = {
  kind: "queued",
  status: 0,
  why: (s) => {
    const n = s.queuedMessages.length;
    return `${n} message${n === 1 ? "" : "s"} queued behind the running burst; cancelling the session drops ${n === 1 ? "it" : "them"}.`;
  },
  actions: [{ label: "Cancel session", method: "CancelSession", action: "cancel" }],
};

/** What a held session counts for in the title and header: each call
 * waiting for approval, or the session itself for a confirmation. */
function waitingCount(s: Session, hold: Hold): number {
  return hold.kind === "approval" ? pendingApprovals(s).length : 1;
}

/** Why a held session waits, as the session page says it. */
function holdWhy(s: Session): string {
  const plan = s.lastRecoveryPlan;
  if (!plan) return "Held for confirmation.";
  const calls = plan.interruptedCalls.map((c) => `${c.name} (${c.callId}, ${c.sideEffect})`).join(", ");
  return `Held for confirmation: ${calls || plan.kind}`;
}

const WAITING_POLL_MS = 3000;
const WAITING_POLL_MAX_MS = 30000;
/** At most this many pages of held sessions are read per poll. */
const WAITING_MAX_PAGES = 5;

let waitingRun: Promise<void> | null = null;
let waitingAgain: Promise<void> | null = null;
let waitingShown = "";
/** The last sessions read, to redraw the cards without a read. */
let waitingHeld: Array<{ session: Session; hold: Hold; title: string }> = [];
let waitingMore = false;

/**
 * Reads the held sessions now (one read at a time). `fresh`: after an
 * action, a read already under way may predate it, so read once more after.
 */
function waitingNow(fresh = false): Promise<void> {
  if (!waitingRun) {
    waitingRun = readWaiting().finally(() => {
      waitingRun = null;
    });
    return waitingRun;
  }
  if (!fresh) return waitingRun;
  if (!waitingAgain) {
    waitingAgain = waitingRun
      .catch(() => undefined)
      .then(() => {
        waitingAgain = null;
        return waitingNow();
      });
  }
  return waitingAgain;
}

async function readWaiting(): Promise<void> {
  const statuses = HOLDS.map((h) => h.status);
  const held: Session[] = [];
  let pageToken = "";
  let more = false;
  for (let pages = 0; pages < WAITING_MAX_PAGES; pages++) {
    const page = decodeList(await call("ListSessions", encode.listSessions("", 100, pageToken, statuses)), decodeSession);
    held.push(...page.items);
    pageToken = page.next;
    if (!pageToken) break;
    more = pages + 1 === WAITING_MAX_PAGES;
  }
  const shown: typeof waitingHeld = [];
  for (const listed of held) {
    let s = listed;
    // The approvals themselves are read per session (GetSession), so a
    // list response that leaves them out still shows every card.
    if (s.status === SessionStatus.AWAITING_APPROVAL && s.approvals.length === 0) {
      try {
        s = decodeSession(await call("GetSession", encode.sessionId(s.id)));
      } catch (e) {
        if (e instanceof GrpcError && e.code === Code.NOT_FOUND) continue;
        throw e;
      }
    }
    const hold = HOLDS.find((h) => h.status === s.status);
    // Decided meanwhile (no longer held, or no call left pending).
    if (!hold || waitingCount(s, hold) === 0) continue;
    shown.push({ session: s, hold, title: await incidentTitle(s.incidentId) });
  }
  // Sessions with queued messages and no other hold (a held one shows its
  // queue in its own entry).
  pageToken = "";
  for (let pages = 0; pages < WAITING_MAX_PAGES; pages++) {
    const page = decodeList(
      await call("ListSessions", encode.listSessions("", 100, pageToken, [], true)),
      decodeSession,
    );
    for (const s of page.items) {
      if (s.queuedMessages.length === 0 || shown.some((w) => w.session.id === s.id)) continue;
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

/** Draws the list from the last read (after a read, or when a card's busy
 * state or error changed). */
function renderWaiting(): void {
  const items = waitingHeld.map((w) => waitingItem(w.session, w.hold, w.title));
  const total = waitingHeld.reduce((n, w) => n + waitingCount(w.session, w.hold), 0);
  const more = waitingMore;
  const list = $("waiting-list");
  // Unchanged since the last read: keep the DOM, so focus stays on its
  // button and the live region does not announce the same list again.
  const signature = JSON.stringify([items.map((i) => i.outerHTML), more]);
  if (signature === waitingShown && list.dataset.state === "loaded") return;
  waitingShown = signature;
  replaceKeepingFocus(list, items);
  if (items.length === 0) list.append(h("li", { class: "empty" }, "Nothing waits for you."));
  if (more) list.append(h("li", { class: "empty" }, "More are held than shown here."));
  list.dataset.state = "loaded";
  list.dataset.count = String(total);
  const count = $("waiting-count");
  const n = `${total}${more ? "+" : ""}`;
  count.textContent = n;
  count.dataset.count = String(total);
  document.title = total ? `(${n}) waiting · Inquest console` : "Inquest console";
}

async function incidentTitle(id: string): Promise<string> {
  try {
    return (await incidentById(id)).title;
  } catch (e) {
    if (!(e instanceof GrpcError && e.code === Code.NOT_FOUND)) throw e;
    return id;
  }
}

function waitingItem(s: Session, hold: Hold, title: string): HTMLElement {
  const actions = h("div", { class: "actions" });
  for (const a of hold.actions) {
    const button = h("button", { type: "button", "data-action": a.action }, a.label);
    button.addEventListener("click", () => {
      clearError();
      button.disabled = true;
      call(a.method, encode.sessionId(s.id))
        .then(() => waitingNow(true))
        .catch((e) => {
          button.disabled = false;
          showError(e);
        });
    });
    actions.append(button);
  }
  const cards =
    hold.kind === "approval"
      ? h(
          "ol",
          { class: "approvals" },
          ...s.approvals.map((a) => approvalCard(s.id, a, true, waitingHost)),
        )
      : "";
  const queued =
    s.queuedMessages.length > 0
      ? h(
          "ol",
          { class: "queued-messages", "aria-label": "Queued messages" },
          ...s.queuedMessages.map((q) =>
            h(
              "li",
              { class: "queued", "data-position": String(q.position) },
              h("span", { class: "queued-state" }, `${q.interrupt ? "interrupting" : "queued"}, position ${q.position}`),
              h("pre", { class: "content" }, q.text),
            ),
          ),
        )
      : "";
  return h(
    "li",
    { class: "waiting", "data-session-id": s.id, "data-kind": hold.kind, "data-status": statusName(s.status) },
    h("h3", {}, title),
    h(
      "p",
      {},
      h("a", { href: `#/session/${s.id}` }, `session ${s.id.slice(0, 8)}…`),
      " ",
      h("span", { class: `status status-${statusName(s.status)}` }, statusName(s.status)),
      ` · ${s.turnCount} turns`,
    ),
    h("p", { class: "why" }, hold.why(s)),
    cards,
    queued,
    actions,
  );
}

const waitingHost: CardHost = {
  decided: () => waitingNow(true),
  redraw: renderWaiting,
  reread: () => waitingNow(true),
};

/** The count in the header and title stays current on every view. */
async function pollWaiting(): Promise<void> {
  let delay = WAITING_POLL_MS;
  for (;;) {
    while (hooks.holdWaiting) await sleep(20);
    try {
      await waitingNow();
      delay = WAITING_POLL_MS;
    } catch (e) {
      $("waiting-list").dataset.state = "error";
      if (!$("waiting-view").hidden) showError(e);
      delay = Math.min(delay * 2, WAITING_POLL_MAX_MS);
    }
    // A hidden tab reads less often.
    await sleep(document.hidden ? Math.max(delay, WAITING_POLL_MAX_MS / 2) : delay);
  }
}

// ---------- incidents view ----------

const INCIDENT_PAGE = 20;
const INCIDENT_POLL_MS = 5000;

/**
 * The incident list: newest incidents a page at a time (ListIncidents), or,
 * filtered by a session status, the incidents of the sessions with that
 * status (ListSessions across incidents), each with those sessions. "More"
 * reads one page further; a refresh rereads the pages shown.
 */
class IncidentList {
  pages = 1;
  private stale = false;
  private shown = "";
  private running: Promise<void> | null = null;

  /** `source`: only incidents from it (0: any). */
  constructor(
    readonly status: number,
    readonly source = 0,
  ) {}

  close(): void {
    this.stale = true;
  }

  load(): Promise<void> {
    if (!this.running) {
      this.running = this.read().finally(() => {
        this.running = null;
      });
    }
    return this.running;
  }

  async more(): Promise<void> {
    await this.running;
    this.pages += 1;
    await this.load();
  }

  private async read(): Promise<void> {
    const list = $("incident-list");
    if (list.dataset.state !== "loaded") list.dataset.state = "loading";
    const groups: Array<{ incident: Incident; sessions: Session[] | null }> = [];
    let pageToken = "";
    let read = 0;
    do {
      if (this.status) {
        const page = decodeList(
          await call("ListSessions", encode.listSessions("", INCIDENT_PAGE, pageToken, [this.status])),
          decodeSession,
        );
        for (const s of page.items) {
          const group = groups.find((g) => g.incident.id === s.incidentId);
          if (group) group.sessions?.push(s);
          else {
            const incident = await incidentById(s.incidentId);
            // ListSessions has no source filter: the incidents it names
            // are sorted here (a page may then show fewer).
            if (!this.source || incident.source === this.source) groups.push({ incident, sessions: [s] });
          }
        }
        pageToken = page.next;
      } else {
        const page = decodeList(
          await call("ListIncidents", encode.listIncidents(INCIDENT_PAGE, pageToken, this.source)),
          decodeIncident,
        );
        for (const incident of page.items) groups.push({ incident, sessions: null });
        pageToken = page.next;
      }
      read += 1;
    } while (pageToken && read < this.pages);
    const items: HTMLElement[] = [];
    for (const g of groups) items.push(await incidentItem(g.incident, g.sessions));
    // A route change while reading: another list owns the DOM now.
    if (this.stale) return;
    // Unchanged: keep the DOM (and the keyboard focus in it).
    const signature = JSON.stringify([items.map((i) => i.outerHTML), pageToken]);
    if (signature === this.shown && list.dataset.state === "loaded") return;
    this.shown = signature;
    list.replaceChildren(...items);
    if (items.length === 0) {
      list.append(
        h(
          "li",
          { class: "empty" },
          this.status ? "No sessions with that status." : this.source ? "No incidents from that source." : "No incidents yet.",
        ),
      );
    }
    list.dataset.pages = String(read);
    list.dataset.state = "loaded";
    show($("incidents-more"), pageToken !== "");
  }
}

let incidents: IncidentList | null = null;

/** The incident list shown rereads itself every few seconds. */
async function pollIncidents(): Promise<void> {
  for (;;) {
    await sleep(INCIDENT_POLL_MS);
    if (incidentPage && !document.hidden) await incidentPage.load().catch(() => undefined);
    const list = incidents;
    if (!list || document.hidden) continue;
    try {
      await list.load();
    } catch {
      // The next poll tries again; Refresh reports the error.
    }
  }
}

/** Where an incident came from, in words. */
const SOURCE_TEXT: Record<number, string> = {
  1: "Opened by hand",
  2: "From an alert",
  3: "From a schedule",
};

async function incidentItem(incident: Incident, only: Session[] | null): Promise<HTMLElement> {
  const sessions =
    only ??
    decodeList(await call("ListSessions", encode.listSessions(incident.id, 50, "")), decodeSession).items;
  const ul = h("ul", { class: "sessions" });
  for (const s of sessions) {
    ul.append(
      h(
        "li",
        { "data-session-id": s.id, "data-status": statusName(s.status) },
        h("a", { href: `#/session/${s.id}` }, `session ${s.id.slice(0, 8)}…`),
        " ",
        h("span", { class: `status status-${statusName(s.status)}` }, statusName(s.status)),
        ` · ${s.turnCount} turns · started ${when(s.createdAt)}`,
      ),
    );
  }
  return h(
    "li",
    { class: "incident", "data-incident-id": incident.id, "data-source": sourceName(incident.source) },
    h("h3", {}, h("a", { href: `#/incident/${incident.id}` }, incident.title)),
    h("p", { class: "source" }, SOURCE_TEXT[incident.source] ?? ""),
    incident.description ? h("p", { class: "description" }, incident.description) : "",
    ul,
  );
}

// ---------- incident page ----------

/** At most this many pages of an incident's sessions are read. */
const INCIDENT_SESSION_PAGES = 5;

/** An http(s) URL as given, or null: a link from an alert sender must not
 * be a `javascript:` one. */
function safeUrl(url: string): string | null {
  try {
    const u = new URL(url);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

/**
 * One incident (#/incident/<id>): where it came from (the alert group
 * behind it, with each alert's labels and its firing and resolved times)
 * and its sessions, each fork under the session it was forked from.
 * Everything shown came from an alert sender, a model or a person: set as
 * text, never parsed as HTML.
 */
class IncidentPage {
  private stale = false;
  private shown = "";
  private running: Promise<void> | null = null;

  constructor(readonly id: string) {}

  close(): void {
    this.stale = true;
  }

  load(): Promise<void> {
    if (!this.running) {
      this.running = this.read().finally(() => {
        this.running = null;
      });
    }
    return this.running;
  }

  private async read(): Promise<void> {
    // Read afresh, not from the cache: alerts fire and resolve.
    const incident = decodeIncident(await call("GetIncident", encode.incidentId(this.id)));
    incidentCache.set(incident.id, { ...incident, alertOrigin: null });
    const sessions: Session[] = [];
    let pageToken = "";
    for (let pages = 0; pages < INCIDENT_SESSION_PAGES; pages++) {
      const page = decodeList(
        await call("ListSessions", encode.listSessions(this.id, 100, pageToken)),
        decodeSession,
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
      alerts ? [alerts.facts.map((f) => f.outerHTML), alerts.rows.map((r) => r.outerHTML)] : null,
    ]);
    if (signature === this.shown) return;
    this.shown = signature;
    $("incident-title").textContent = incident.title;
    $("incident-description").textContent = incident.description;
    $("incident-created").textContent = `opened ${when(incident.createdAt)}`;
    const section = $("alerts");
    if (alerts && origin) {
      $("alert-origin").replaceChildren(...alerts.facts);
      $("alert-event-rows").replaceChildren(...alerts.rows);
      section.dataset.resolved = String(origin.resolvedAt !== 0);
    } else {
      $("alert-origin").replaceChildren();
      $("alert-event-rows").replaceChildren();
    }
    show(section, alerts !== null);
    const list = $("incident-sessions");
    list.replaceChildren(...tree);
    list.dataset.count = String(sessions.length);
    list.dataset.state = "loaded";
  }
}

/** The alert group's facts (a `dl`'s children) and one table row per event. */
function alertOriginView(o: AlertOrigin): { facts: HTMLElement[]; rows: HTMLElement[] } {
  const facts: HTMLElement[] = [];
  const fact = (name: string, value: Node | string, cls: string) =>
    facts.push(h("dt", {}, name), h("dd", { class: cls }, value));
  fact("Source", o.source, "alert-source");
  if (o.receiver) fact("Receiver", o.receiver, "alert-receiver");
  if (o.externalUrl) {
    const url = safeUrl(o.externalUrl);
    fact(
      "Sent by",
      url ? h("a", { href: url, rel: "noopener noreferrer", target: "_blank" }, o.externalUrl) : o.externalUrl,
      "alert-external-url",
    );
  }
  fact("Group", o.groupKey, "alert-group-key");
  fact(
    "Status",
    o.resolvedAt ? `resolved ${when(o.resolvedAt)}` : "firing",
    "alert-group-status",
  );
  fact("Events", `${o.eventsTotal}${o.eventsTotal > o.events.length ? ` (newest ${o.events.length} shown)` : ""}`, "alert-events-total");
  if (o.sessionSkipped) fact("No session started", o.sessionSkipped, "alert-session-skipped");
  const rows = o.events.map((e) => {
    const state = e.firing ? "firing" : "resolved";
    const labels = h("ul", { class: "labels" });
    // Sorted: a map's entries come in no set order, and a stable row
    // keeps the page from redrawing on every read.
    const sorted = [...e.labels].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    for (const [k, v] of sorted) labels.append(h("li", {}, h("code", {}, `${k}=${v}`)));
    return h(
      "tr",
      { class: `alert-event alert-${state}`, "data-fingerprint": e.fingerprint, "data-state": state },
      h("td", {}, h("span", { class: "alert-state" }, state)),
      h("td", {}, labels),
      h("td", {}, when(e.startsAt)),
      h("td", {}, when(e.endsAt)),
      h("td", {}, when(e.receivedAt)),
    );
  });
  return { facts, rows };
}

/** Sessions as a tree: each fork under its source (a source not listed
 * leaves the fork at the top), oldest first at each level. */
function sessionTree(sessions: Session[]): HTMLElement[] {
  const byId = new Map(sessions.map((s) => [s.id, s]));
  const children = new Map<string, Session[]>();
  const roots: Session[] = [];
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
  const oldestFirst = (a: Session, b: Session) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1);
  const seen = new Set<string>();
  const node = (s: Session): HTMLElement => {
    seen.add(s.id);
    const li = h(
      "li",
      { class: "session-node", "data-session-id": s.id, "data-status": statusName(s.status) },
      // The id's random tail: sessions and forks made the same minute
      // share the head of their UUIDv7.
      h("a", { href: `#/session/${s.id}`, title: s.id }, `session …${s.id.slice(-12)}`),
      " ",
      h("span", { class: `status status-${statusName(s.status)}` }, statusName(s.status)),
      ` · ${s.turnCount} turns · started ${when(s.createdAt)}`,
    );
    if (s.forkedFromSessionId) {
      li.dataset.forkedFrom = s.forkedFromSessionId;
      li.append(
        " · forked at ",
        h("a", { href: `#/session/${s.forkedFromSessionId}/turn/${s.forkedAtSeq}` }, `#${s.forkedAtSeq}`),
      );
    }
    const kids = (children.get(s.id) ?? []).filter((k) => !seen.has(k.id)).sort(oldestFirst);
    if (kids.length > 0) li.append(h("ul", { class: "forks" }, ...kids.map(node)));
    return li;
  };
  return roots.sort(oldestFirst).map(node);
}

let incidentPage: IncidentPage | null = null;

function setupNewInvestigation(): void {
  $("new-investigation").addEventListener("submit", async (e) => {
    e.preventDefault();
    clearError();
    const title = ($("new-title") as HTMLInputElement).value.trim();
    const description = ($("new-description") as HTMLTextAreaElement).value.trim();
    const message = ($("new-message") as HTMLTextAreaElement).value.trim();
    if (!title || !message) {
      showError("A title and a question are needed.");
      return;
    }
    const button = $("new-submit") as HTMLButtonElement;
    button.disabled = true;
    try {
      const incident = decodeIncident(await call("CreateIncident", encode.createIncident(title, description)));
      const session = decodeSession(
        await call("StartSession", encode.startSession(incident.id, message, newKey())),
      );
      ($("new-investigation") as HTMLFormElement).reset();
      location.hash = `#/session/${session.id}`;
    } catch (err) {
      showError(err);
    } finally {
      button.disabled = false;
    }
  });
  $("refresh").addEventListener("click", () => void incidents?.load().catch(showError));
  $("incidents-more").addEventListener("click", () => void incidents?.more().catch(showError));
  const filter = $("status-filter") as HTMLSelectElement;
  for (const status of ALL_STATUSES) {
    filter.append(h("option", { value: statusName(status) }, statusName(status)));
  }
  // The filters are part of the URL, so a filtered list can be linked to.
  const source = $("source-filter") as HTMLSelectElement;
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

// ---------- session view ----------

const ACTIVE = [SessionStatus.PENDING, SessionStatus.RUNNING] as number[];

type Way = "older" | "newer" | "latest";

/** The most turns the session page keeps in the DOM: a window over the
 * session that scrolling moves, so a session of any length costs the
 * page the same. */
const WINDOW = 300;
/** Turns per ListTurns read when the window moves (and when it opens). */
const PAGE = 100;
/** How near (px) an edge of the window comes into view before the next
 * page is read. */
const EDGE = 800;

class SessionPage {
  readonly timeline = new Timeline();
  private controller: AbortController | null = null;
  private stopped = false;
  private watching = false;
  reconnects = 0;
  session: Session | null = null;

  /** `focus`: the seq a deep link (#/session/<id>/turn/<seq>) points at. */
  constructor(
    readonly id: string,
    readonly focus: number | null = null,
  ) {}

  async open(): Promise<void> {
    showView("session-view");
    $("session-title").textContent = `Session ${this.id}`;
    $("turns").replaceChildren();
    $("turn-announcer").textContent = "";
    this.updateEdges();
    $("approval-list").replaceChildren();
    show($("approvals"), false);
    show($("report"), false);
    show($("lineage"), false);
    closeForkForm();
    this.renderQueued();
    this.renderStreaming();
    this.setWatchState("connecting");
    await Promise.all([this.refresh(), this.openWindow()]);
    if (this.stopped) return;
    this.showWindow();
    void this.watch();
  }

  close(): void {
    this.stopped = true;
    this.controller?.abort();
    window.removeEventListener("scroll", this.onScroll);
  }

  // ---------- the window of turns in the DOM ----------

  /** The seqs of the first and the last turn in the DOM (0: none). */
  private lo = 0;
  private hi = 0;
  /** Whether turns older than the window's first exist. */
  private older = false;
  /** A read that moves the window is under way (one at a time). */
  private moving = false;
  private edgeCheck = false;

  private readonly onScroll = (): void => {
    if (this.edgeCheck) return;
    this.edgeCheck = true;
    requestAnimationFrame(() => {
      this.edgeCheck = false;
      this.checkEdges();
    });
  };

  /** Whether the window ends at the newest turn seen: live turns are then
   * shown as they come, otherwise they wait behind "Show newer turns". */
  private atTail(): boolean {
    return this.hi >= this.timeline.lastSeq;
  }

  /**
   * The first page: the newest turns (ListTurns backwards), or those
   * around a deep-linked turn. The stream then follows from the head, so
   * a session of 20,000 turns opens with one read of a hundred.
   */
  private async openWindow(): Promise<void> {
    const page =
      this.focus !== null
        ? decodeListTurns(await call("ListTurns", encode.listTurns(this.id, Math.max(0, this.focus - PAGE / 2), PAGE)))
        : decodeListTurns(await call("ListTurns", encode.listTurnsBefore(this.id, LATEST, PAGE)));
    if (this.stopped) return;
    const first = page.turns[0]?.seq ?? 0;
    this.timeline.startAt(Math.max(0, first - 1));
    for (const t of page.turns) this.timeline.applyTurn(t);
    // Deep-linked: the turns past the page are read as the window moves.
    this.timeline.startAt(page.headSeq);
    const list = $("turns");
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
  private showWindow(): void {
    const list = $("turns");
    const focused = this.focus !== null ? document.getElementById(`turn-${this.focus}`) : null;
    if (focused) focused.scrollIntoView({ block: "center" });
    else if (this.focus === null) list.lastElementChild?.scrollIntoView({ block: "nearest" });
    window.addEventListener("scroll", this.onScroll, { passive: true });
    if (list.lastElementChild) {
      list.dataset.shown = String(this.hi);
      // What `inquest-bench console` reads: navigation to the newest turns on screen.
      performance.mark("inquest:turns-shown");
    }
  }

  /** Reads the next page at whichever edge of the window is near the screen. */
  private checkEdges(): void {
    if (this.stopped || this.moving) return;
    const older = $("turns-older");
    const newer = $("turns-newer");
    if (!older.hidden && older.getBoundingClientRect().bottom > -EDGE) void this.moveWindow("older");
    else if (!newer.hidden && newer.getBoundingClientRect().top < window.innerHeight + EDGE) void this.moveWindow("newer");
  }

  /** A move a person asked for while another was under way: it runs next. */
  private asked: Way | null = null;

  /** Moves the window a page back or forth, keeping what is on screen in
   * place. A move the scrolling asks for during another is dropped (the
   * next scroll asks again); one a person asks for (`asked`) waits. */
  async moveWindow(way: Way, asked = false): Promise<void> {
    if (this.stopped) return;
    if (this.moving) {
      if (asked) this.asked = way;
      return;
    }
    this.moving = true;
    try {
      const request =
        way === "older"
          ? encode.listTurnsBefore(this.id, this.lo, PAGE)
          : way === "newer"
            ? encode.listTurns(this.id, this.hi, PAGE)
            : encode.listTurnsBefore(this.id, LATEST, PAGE);
      const page = decodeListTurns(await call("ListTurns", request));
      if (this.stopped) return;
      // Turns past the stream's cursor come by the stream, in order.
      const turns = page.turns.filter((t) =>
        way === "older" ? t.seq < this.lo : way === "newer" ? t.seq > this.hi && t.seq <= this.timeline.lastSeq : t.seq <= this.timeline.lastSeq,
      );
      const changed = turns.flatMap((t) => this.timeline.applyHistory(t));
      const els = turns.map((t) => this.turnElement(t));
      const list = $("turns");
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
    // Still near an edge (a short page, a fast scroll): read on.
    requestAnimationFrame(() => this.checkEdges());
  }

  /** Runs `mutate` keeping the first turn on screen where it was. */
  private anchored(mutate: () => void): void {
    const list = $("turns");
    let anchor: Element | null = null;
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
  private trim(from: "top" | "bottom"): void {
    const list = $("turns");
    while (list.children.length > WINDOW) {
      (from === "top" ? list.firstElementChild : list.lastElementChild)?.remove();
      if (from === "top") this.older = true;
    }
    this.syncBounds();
  }

  private syncBounds(): void {
    const list = $("turns");
    this.lo = Number((list.firstElementChild as HTMLElement | null)?.dataset.seq ?? 0);
    this.hi = Number((list.lastElementChild as HTMLElement | null)?.dataset.seq ?? 0);
  }

  /** The controls at the window's edges say what lies beyond them. */
  private updateEdges(): void {
    const list = $("turns");
    list.dataset.lo = String(this.lo);
    list.dataset.hi = String(this.hi);
    show($("turns-older"), this.older);
    $("turns-older").textContent = `Load older turns (before #${this.lo})`;
    const behind = this.timeline.lastSeq - this.hi;
    show($("turns-newer"), behind > 0);
    show($("turns-latest"), behind > PAGE);
    $("turns-newer").textContent = `Show newer turns (${behind} after #${this.hi})`;
  }

  /** Test hook: cut the live stream as a dropped connection would. */
  dropWatch(): boolean {
    if (!this.controller) return false;
    this.controller.abort();
    return true;
  }

  private setWatchState(state: string): void {
    const el = $("watch-state");
    el.dataset.state = state;
    el.dataset.reconnects = String(this.reconnects);
    el.textContent =
      state === "live"
        ? "live"
        : state === "reconnecting"
          ? `reconnecting (after seq ${this.timeline.lastSeq})`
          : state === "ended"
            ? "not running"
            : state;
  }

  /** Session reads issued and the latest one shown: an older answer that
   * arrives late never overwrites a newer one. */
  private reads = 0;
  private shown = 0;

  private async readSession(method: string, request = encode.sessionId(this.id)): Promise<Session | null> {
    const n = ++this.reads;
    const s = decodeSession(await call(method, request));
    if (n < this.shown) return null;
    this.shown = n;
    this.applySession(s);
    // GetSession names the queue as stored: a page opened after a message
    // was queued shows it too. (Other calls answer without the queue.)
    if (method === "GetSession") {
      this.queued = stillQueued(s.queuedMessages, s.headSeq, this.timeline.turns).map((q) => ({
        text: q.text,
        position: q.position,
      }));
      this.renderQueued();
    }
    return s;
  }

  async refresh(): Promise<void> {
    await this.readSession("GetSession");
    const s = this.session;
    if (!s) return;
    // A held round has no report yet: it is written when the round ends.
    if (!ACTIVE.includes(s.status) && s.status !== SessionStatus.AWAITING_APPROVAL && s.headSeq > 0) {
      await this.loadReport();
    }
  }

  private applySession(s: Session): void {
    this.session = s;
    const status = $("session-status");
    status.textContent = statusName(s.status);
    status.dataset.status = statusName(s.status);
    $("session-exit").textContent = s.exitReason ? `exit: ${s.exitReason}` : "";
    $("session-counters").textContent =
      `${s.turnCount} turns · ${s.toolCalls} tool calls · session tokens ${s.inputTokens} in / ${s.outputTokens} out · ` +
      money(s.costUsd, s.costComplete, s.inputTokens > 0 || s.outputTokens > 0);
    // A new burst (a follow-up, a confirmation, a decision) makes the last
    // report stale.
    if (
      ACTIVE.includes(s.status) ||
      s.status === SessionStatus.AWAITING_CONFIRMATION ||
      s.status === SessionStatus.AWAITING_APPROVAL
    ) {
      show($("report"), false);
    }
    show($("confirm-button"), s.status === SessionStatus.AWAITING_CONFIRMATION);
    // Cancel ends anything not settled for good (an idle session too);
    // completed and failed sessions keep their outcome.
    show(
      $("cancel-button"),
      ACTIVE.includes(s.status) ||
        s.status === SessionStatus.AWAITING_CONFIRMATION ||
        s.status === SessionStatus.AWAITING_APPROVAL ||
        s.status === SessionStatus.IDLE,
    );
    this.renderApprovals();
    const plan = s.lastRecoveryPlan;
    const confirmWhy = $("confirm-why");
    confirmWhy.textContent = s.status === SessionStatus.AWAITING_CONFIRMATION && plan ? holdWhy(s) : "";
    show(confirmWhy, confirmWhy.textContent !== "");
    ($("follow-up-send") as HTMLButtonElement).disabled = s.status === SessionStatus.CANCELLED;
    // A fork says where it came from: the source and the turn it was cut at.
    if (s.forkedFromSessionId) {
      const link = $("lineage-link") as HTMLAnchorElement;
      link.href = `#/session/${s.forkedFromSessionId}/turn/${s.forkedAtSeq}`;
      link.textContent = `session ${s.forkedFromSessionId} at turn #${s.forkedAtSeq}`;
      $("lineage").dataset.parent = s.forkedFromSessionId;
      $("lineage").dataset.atSeq = String(s.forkedAtSeq);
    }
    show($("lineage"), s.forkedFromSessionId !== "");
    const incident = $("session-incident-link") as HTMLAnchorElement;
    incident.href = `#/incident/${s.incidentId}`;
    const known = incidentCache.get(s.incidentId);
    incident.textContent = known?.title ?? s.incidentId;
    if (!known && s.incidentId && !this.titleAsked) {
      this.titleAsked = true;
      // Named by its title once read (a read the waiting list shares).
      void incidentTitle(s.incidentId)
        .then((title) => {
          if (!this.stopped && this.session?.incidentId === s.incidentId) incident.textContent = title;
        })
        .catch(() => undefined);
    }
    show($("session-incident"), s.incidentId !== "");
    // A cancel drops the queue (the session's notice says what it dropped).
    if (s.status === SessionStatus.CANCELLED && this.queued.length > 0) {
      this.queued = [];
      this.renderQueued();
    }
  }

  /** The incident's title was asked for (once per page). */
  private titleAsked = false;

  /**
   * Messages queued behind the running burst, in queue order, until each
   * opens a burst and arrives as a user turn. Read from GetSession, and
   * learnt between reads from SendMessage's answer and the watch's
   * MessageQueued events.
   */
  queued: Array<{ text: string; position: number }> = [];

  private addQueued(text: string, position: number): void {
    if (this.queued.some((q) => q.text === text && q.position === position)) return;
    this.queued.push({ text, position });
    this.renderQueued();
  }

  /** A user turn arrived: the queued message it was is no longer queued. */
  private dequeue(text: string): void {
    if (this.queued.length === 0) return;
    const i = this.queued.findIndex((q) => q.text === text);
    if (i < 0) return;
    this.queued.splice(i, 1);
    this.renderQueued();
  }

  private renderQueued(): void {
    const items = this.queued.map((q) =>
      h(
        "li",
        { class: "queued", "data-position": String(q.position) },
        h("span", { class: "queued-state" }, `queued, position ${q.position}`),
        h("pre", { class: "content" }, q.text),
      ),
    );
    $("queued-list").replaceChildren(...items);
    $("queued").dataset.count = String(items.length);
    show($("queued"), items.length > 0);
  }

  private approvalsShown = "";

  /** The latest hold's calls: Approve / Deny while the session waits for
   * them, then how each was decided. */
  private renderApprovals(): void {
    const s = this.session;
    const section = $("approvals");
    this.markHeldCalls();
    if (!s || s.approvals.length === 0) {
      show(section, false);
      $("approval-list").replaceChildren();
      this.approvalsShown = "";
      return;
    }
    const held = s.status === SessionStatus.AWAITING_APPROVAL;
    const cards = s.approvals.map((a) => approvalCard(s.id, a, held, this.cardHost));
    // Unchanged: keep the DOM, and with it the focus and a comment typed.
    const signature = JSON.stringify(cards.map((c) => c.outerHTML));
    if (signature === this.approvalsShown) return;
    this.approvalsShown = signature;
    replaceKeepingFocus($("approval-list"), cards);
    section.dataset.pending = String(held ? pendingApprovals(s).length : 0);
    show(section, true);
  }

  /** A call of the timeline not started yet says it waits for a person
   * (its card above has the buttons), rather than just "requested". */
  private markHeldCalls(): void {
    for (const a of this.session?.approvals ?? []) {
      const view = this.timeline.calls.get(a.callId);
      if (view && view.state !== "requested") continue;
      for (const el of document.querySelectorAll<HTMLElement>(
        `#turns .tool-call[data-call-id="${CSS.escape(a.callId)}"]`,
      )) {
        el.dataset.approval = approvalStateName(a.state);
        const state = el.querySelector(".call-state");
        if (state) state.textContent = a.state === ApprovalState.PENDING ? "awaiting approval" : "requested";
      }
    }
  }

  private readonly cardHost: CardHost = {
    decided: (s) => this.decided(s),
    redraw: () => {
      if (!this.stopped) this.renderApprovals();
    },
    reread: async () => {
      if (!this.stopped) await this.readSession("GetSession");
    },
  };

  /** A decision was taken here: show the session it answered, and follow
   * the burst it started once nothing is left pending. */
  private async decided(s: Session): Promise<void> {
    if (this.stopped) return;
    // Newer than any read still under way: an older answer arriving late
    // must not bring the buttons back.
    this.shown = ++this.reads;
    this.applySession(s);
    if (s.status !== SessionStatus.AWAITING_APPROVAL) void this.watch();
    // The list's count follows at once, not at its next poll.
    void waitingNow(true).catch(() => undefined);
  }

  private async loadReport(): Promise<void> {
    let report: Report;
    try {
      report = decodeReport(await call("GetReport", encode.getReport(this.id, 0)));
    } catch (e) {
      if (e instanceof GrpcError && e.code === Code.NOT_FOUND) return;
      throw e;
    }
    $("report-summary").replaceChildren(renderMarkdown(report.summary));
    $("report-exit").textContent = report.exitReason;
    $("report-burst").textContent = String(report.burst);
    $("report-tokens").textContent = `session tokens ${report.inputTokens} in / ${report.outputTokens} out`;
    const writing =
      report.authorInputTokens || report.authorOutputTokens
        ? ` (report writing ${report.authorInputTokens} in / ${report.authorOutputTokens} out)`
        : "";
    $("report-burst-figures").textContent =
      `${report.burstModelCalls} model calls · ${report.burstToolCalls} tool calls · ` +
      `${report.burstInputTokens} in / ${report.burstOutputTokens} out${writing}`;
    $("report-cost").textContent = money(report.costUsd, report.costComplete, report.burstModelCalls > 0);
    $("report-active-time").textContent = duration(report.activeTimeMs);
    $("report-tool-calls").textContent = String(report.toolCalls);
    $("report").dataset.burst = String(report.burst);
    show($("report"), true);
  }

  /** Follows the session from the last seq shown, reconnecting on drops. */
  async watch(): Promise<void> {
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
            },
          );
          this.controller = null;
          // Ended OK: the burst ended and every turn to its head was sent.
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
          if (
            code === Code.NOT_FOUND ||
            code === Code.INVALID_ARGUMENT ||
            code === Code.PERMISSION_DENIED ||
            code === Code.OUT_OF_RANGE
          ) {
            showError(e);
            this.setWatchState("ended");
            return;
          }
          // Dropped, lagged (ABORTED), shutting down (UNAVAILABLE), too
          // many streams: reconnect from the last seq shown.
          this.reconnects += 1;
          this.setWatchState("reconnecting");
          await sleep(backoff);
          while (hooks.holdReconnect && !this.stopped) await sleep(20);
          backoff = Math.min(backoff * 2, 2000);
        }
      }
    } finally {
      this.watching = false;
    }
  }

  private refreshTimer: ReturnType<typeof setTimeout> | null = null;

  /** Counters and status follow the turns, at most a few reads a second. */
  private scheduleRefresh(): void {
    if (this.refreshTimer !== null || this.stopped) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      if (this.stopped) return;
      this.readSession("GetSession").catch(() => {
          // The stream's own refresh at its end reports errors.
        });
    }, 250);
  }

  private onEvent(event: ReturnType<typeof decodeWatchEvent>): void {
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
        // The session is held: its approvals (all of them, with their
        // state) come with the session.
        this.scheduleRefresh();
        break;
      case "heartbeat":
      case "lagged":
      case "unknown":
        break;
    }
    $("turns").dataset.lastSeq = String(this.timeline.lastSeq);
  }

  /** A live turn at the window's end; the page follows it when the reader
   * was at the end, and the window drops its oldest turn past WINDOW. */
  private appendLive(turn: SessionTurn): void {
    const list = $("turns");
    const following = list.getBoundingClientRect().bottom <= window.innerHeight + 120;
    const li = this.turnElement(turn);
    list.append(li);
    this.trim("top");
    this.updateEdges();
    if (this.focus === null && following) li.scrollIntoView({ block: "nearest" });
  }

  /** Says a new turn arrived, for screen readers (the list itself is not
   * a live region: pages of older turns must not be read out). */
  private announce(turn: SessionTurn): void {
    $("turn-announcer").textContent = `New turn #${turn.seq}: ${turnLabel(turn)}`;
  }

  private turnElement(turn: SessionTurn): HTMLElement {
    const role = roleName(turn.role);
    const li = h("li", {
      class: `turn turn-${role}`,
      "data-seq": String(turn.seq),
      "data-role": role,
    });
    const label = turnLabel(turn);
    // The seq is the turn's stable link: #/session/<id>/turn/<seq>.
    const link = h("a", { class: "seq", href: `#/session/${this.id}/turn/${turn.seq}`, title: "link to this turn" }, `#${turn.seq}`);
    const fork = h("button", { type: "button", class: "fork-button", "data-action": "fork" }, "Fork from here");
    // The visible words start the name (a voice command says what it sees).
    fork.setAttribute("aria-label", `Fork from here, turn ${turn.seq}`);
    fork.addEventListener("click", () => openForkForm(turn.seq));
    li.append(h("div", { class: "turn-head" }, link, ` ${label} `, h("time", {}, when(turn.createdAt)), fork));
    // A notice or a summary is a note, inside its list item (a list item
    // given another role would no longer be one of the list's items).
    const note = turn.role === TurnRole.NOTICE || turn.role === TurnRole.COMPACTION;
    const body = note ? h("div", { role: "note", class: "note-body" }) : li;
    if (turn.role === TurnRole.NOTICE && turn.recoveryPlan) li.dataset.kind = turn.recoveryPlan.kind;
    if (turn.role === TurnRole.COMPACTION) {
      // A summary the model wrote of the turns before it, not a turn of
      // the investigation: said so, with what the model still sees.
      const c = turn.compaction;
      li.dataset.firstRetainedSeq = String(c?.firstRetainedSeq ?? 0);
      body.append(
        h(
          "p",
          { class: "compaction-note" },
          c
            ? `The context was compacted here: from now on the model sees this summary instead of the turns before #${c.firstRetainedSeq} (about ${c.tokensBefore} → ${c.tokensAfter} tokens). Every turn stays listed.`
            : "The context was compacted here: the model sees this summary instead of the older turns. Every turn stays listed.",
        ),
      );
    }
    if (turn.content) {
      // Model text is Markdown, rendered sanitized; everything else (the
      // user's words, tool results, notices) stays preformatted text.
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
            h("span", { class: "call-state", role: "status" }, view?.state ?? "requested"),
          ),
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

  private renderCall(view: CallView): void {
    for (const el of document.querySelectorAll<HTMLElement>(`.tool-call[data-call-id="${CSS.escape(view.id)}"]`)) {
      el.dataset.state = view.state;
      const state = el.querySelector(".call-state");
      if (state) state.textContent = view.state === "failed" ? "failed (interrupted)" : view.state;
    }
  }

  private renderStreaming(): void {
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

  async confirm(): Promise<void> {
    await this.readSession("ContinueSession");
    void this.watch();
  }

  async cancel(): Promise<void> {
    await this.readSession("CancelSession");
  }

  /** Sends a follow-up; while a burst runs it is queued behind it or
   * interrupts it (`mode`), otherwise it opens a burst at once. */
  async followUp(text: string, mode: number): Promise<void> {
    const before = this.timeline.lastSeq;
    const sent = decodeSendMessage(await call("SendMessage", encode.sendMessage(this.id, text, newKey(), mode)));
    // Shown as queued unless its turn already arrived through the watch
    // (an interrupt opens its burst at once).
    const arrived = this.timeline.turns.some(
      (t) => t.seq > before && t.role === TurnRole.USER && t.content === text,
    );
    if (sent.queued && !arrived) this.addQueued(text, sent.queuePosition);
    await this.refresh();
    void this.watch();
  }

  /** Forks this session after turn `atSeq` (ForkSession) and opens the fork. */
  async fork(atSeq: number, message: string, key: string): Promise<void> {
    const s = decodeSession(await call("ForkSession", encode.forkSession(this.id, atSeq, message, key)));
    location.hash = `#/session/${s.id}`;
  }
}

let current: SessionPage | null = null;

/** What a turn is, in words (its head line and the live announcement). */
function turnLabel(turn: SessionTurn): string {
  return turn.role === TurnRole.TOOL
    ? `tool result · ${turn.toolName} (${turn.toolCallId})${turn.isError ? " · error" : ""}`
    : turn.role === TurnRole.NOTICE && turn.recoveryPlan
      ? `recovery notice · ${turn.recoveryPlan.kind}`
      : turn.role === TurnRole.COMPACTION
        ? "summary of earlier turns (compaction)"
        : roleName(turn.role);
}

/** Set by the browser tests through `window.inquestConsole`. */
const hooks = { holdReconnect: false, holdWaiting: false };

/** One key per opened fork form: a second click of Fork makes no second fork. */
let forkKey = "";

function openForkForm(seq: number): void {
  const form = $("fork-form");
  if (form.dataset.atSeq !== String(seq) || form.hidden) forkKey = newKey();
  form.dataset.atSeq = String(seq);
  $("fork-at").textContent = `#${seq}`;
  show(form, true);
  form.scrollIntoView({ block: "nearest" });
  ($("fork-message") as HTMLTextAreaElement).focus();
}

function closeForkForm(): void {
  const form = $("fork-form");
  show(form, false);
  form.dataset.atSeq = "0";
  ($("fork-message") as HTMLTextAreaElement).value = "";
}

function setupSessionActions(): void {
  const guard = (f: () => Promise<void>) => () => {
    clearError();
    f().catch(showError);
  };
  $("fork-close").addEventListener("click", closeForkForm);
  $("fork-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const seq = Number($("fork-form").dataset.atSeq);
    if (!current || !seq) return;
    clearError();
    const button = $("fork-submit") as HTMLButtonElement;
    button.disabled = true;
    current
      .fork(seq, ($("fork-message") as HTMLTextAreaElement).value.trim(), forkKey)
      .catch(showError)
      .finally(() => {
        button.disabled = false;
      });
  });
  $("turns-older").addEventListener("click", guard(async () => current?.moveWindow("older", true)));
  $("turns-newer").addEventListener("click", guard(async () => current?.moveWindow("newer", true)));
  $("turns-latest").addEventListener("click", guard(async () => current?.moveWindow("latest", true)));
  $("confirm-button").addEventListener("click", guard(async () => current?.confirm()));
  $("cancel-button").addEventListener("click", guard(async () => current?.cancel()));
  $("follow-up").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = $("follow-up-text") as HTMLTextAreaElement;
    const text = input.value.trim();
    if (!text || !current) return;
    clearError();
    const mode = ($("follow-up-mode") as HTMLSelectElement).value === "interrupt" ? IfRunning.INTERRUPT : IfRunning.ENQUEUE;
    current
      .followUp(text, mode)
      .then(() => {
        input.value = "";
      })
      .catch(showError);
  });
}

// ---------- routing ----------

// The views' stable URLs: #/waiting (the landing page: what needs a
// person comes first), #/incidents[?status=<name>] (and #/, which older
// links and the session page's back link use), #/incident/<id> (its
// alerts and its sessions with their forks), #/session/<id>, and
// #/session/<id>/turn/<seq> (that turn marked and scrolled to).
function route(): void {
  clearError();
  // A refusal explains a click on the view it was made on.
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
    $("incident-sessions").dataset.state = "loading";
    for (const id of ["incident-title", "incident-description", "incident-created"]) $(id).textContent = "";
    show($("alerts"), false);
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
    ($("status-filter") as HTMLSelectElement).value = status ? statusName(status) : "";
    ($("source-filter") as HTMLSelectElement).value = source ? sourceName(source) : "";
    const el = $("incident-list");
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

declare global {
  interface Window {
    /**
     * For the browser tests (harmless otherwise): cut the live stream as a
     * dropped connection would, hold the reconnect until released, read
     * the seqs shown and the reconnect count.
     */
    inquestConsole: {
      dropWatch(): boolean;
      holdReconnect(hold: boolean): void;
      seqs(): number[];
      reconnects(): number;
      /** Pause the waiting list's poll (a read after an action still runs). */
      holdWaiting(hold: boolean): void;
      /** Whether a read of the waiting list is under way. */
      waitingBusy(): boolean;
    };
  }
}

window.inquestConsole = {
  dropWatch: () => current?.dropWatch() ?? false,
  holdReconnect: (hold: boolean) => {
    hooks.holdReconnect = hold;
  },
  seqs: () => current?.timeline.seqs() ?? [],
  reconnects: () => current?.reconnects ?? 0,
  holdWaiting: (hold: boolean) => {
    hooks.holdWaiting = hold;
  },
  waitingBusy: () => waitingRun !== null || waitingAgain !== null,
};

setupToken();
setupNewInvestigation();
setupSessionActions();
window.addEventListener("hashchange", route);
route();
void pollWaiting();
void pollIncidents();
