// A fake informer-host for unit tests of an AssemblyScript plugin under
// node: it instantiates the plugin's .wasm with the informer_host_v1
// imports written in JavaScript (ABI.md §6, §16, §17: their codes, the
// size protocol and result messages) and delivers events to it, as the
// Go kit's kittest and the Rust kit's fake do.
//
//   import { FakeHost } from "informer-host-as/fake/host.mjs";
//   const h = await FakeHost.load(readFileSync("build/my-plugin.wasm"));
//   h.cache("pods", { metadata: { name: "web-0", namespace: "shop" } });
//   const r = h.add("pods", { metadata: { name: "web-0", namespace: "shop" }, status: { phase: "Running" } });
//   assert.equal(r.code, OK);
//   assert.deepEqual(h.writes.map((w) => w.op), ["apply"]);
//
// Every call that acts outside the host is recorded (writes, events,
// httpRequests) and its answer programmable (onWrite, onEvent, onHTTP);
// by default a write is applied to the fake cache (applyWrite), so a
// later cache_get sees it, as controller-runtime's fake client does.
// controller() and reconcile() run a controller-mode plugin (ABI.md §18)
// as the host's loop does: finalizer, children applied and pruned,
// status conditions, requeue-after on a fake clock (advance).
// It is a unit-test fake: informer-host replay runs the .wasm through the
// real engine, and is the proof that the module works.

export const OK = 0, RETRY = 1, DROP = 2, ERROR = 3;
export const ERR_ABSENT = -1, ERR_NOT_FOUND = -2, ERR_BAD_PATH = -3, ERR_BOUNDS = -4, ERR_INVALID = -5,
  ERR_NO_EVENT = -6, ERR_INTERNAL = -7, ERR_DENIED = -8, ERR_CONFLICT = -9, ERR_QUOTA = -10, ERR_EXISTS = -11,
  ERR_FORBIDDEN = -12, ERR_UNPROCESSABLE = -13, ERR_RATE_LIMITED = -14, ERR_TIMEOUT = -15, ERR_UNAVAILABLE = -16,
  ERR_TOO_LARGE = -17, ERR_CANCELED = -18, ERR_FIELD_CONFLICT = -19;

// The host's bookkeeping on every child it applies, and the plugin's
// name in the fake's.
export const PLUGIN_LABEL = "controller.informer-host.io/plugin", OWNER_ANNOTATION = "controller.informer-host.io/owner", FAKE_PLUGIN = "fake";
const CLOCK_START = Date.UTC(2026, 0, 1);
const OPS = { 1: "create", 2: "merge-patch", 3: "json-patch", 4: "apply", 5: "delete" };
const FIRST_HANDLE = 2;
const enc = new TextEncoder();
const dec = new TextDecoder();

// JSON as the host encodes objects: compact, keys sorted.
export function hostJSON(v) {
  if (Array.isArray(v)) return "[" + v.map(hostJSON).join(",") + "]";
  if (v !== null && typeof v === "object") {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + hostJSON(v[k])).join(",") + "}";
  }
  return JSON.stringify(v);
}

// A field path of ABI.md §9 as segments ({key} or {index}); null when it
// does not parse.
export function parsePath(p) {
  const segs = [];
  let i = 0;
  while (i < p.length) {
    if (p[i] === "[") {
      const end = p.indexOf("]", i);
      if (end < 0) return null;
      const inner = p.slice(i + 1, end);
      if (/^[0-9]+$/.test(inner)) segs.push({ index: Number(inner) });
      else if (inner.startsWith('"')) {
        let close = i + 1;
        do { close = p.indexOf('"]', close + 1); } while (close > 0 && p[close - 1] === "\\" );
        if (close < 0) return null;
        try { segs.push({ key: JSON.parse(p.slice(i + 1, close + 1)) }); } catch { return null; }
        i = close + 2;
        if (i < p.length && p[i] === ".") i++;
        continue;
      } else return null;
      i = end + 1;
      if (i < p.length && p[i] === ".") i++;
      continue;
    }
    let j = i;
    while (j < p.length && p[j] !== "." && p[j] !== "[") j++;
    if (j === i) return null;
    segs.push({ key: p.slice(i, j) });
    i = j;
    if (p[i] === ".") {
      i++;
      if (i === p.length) return null;
    }
  }
  return segs.length ? segs : null;
}

function metaOf(o) {
  return (o && o.metadata) || {};
}
function keyOf(ns, name) {
  return ns ? ns + "/" + name : name;
}
function clone(v) {
  return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
}
function mergePatch(target, patch) {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return clone(patch);
  const t = target !== null && typeof target === "object" && !Array.isArray(target) ? target : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete t[k];
    else t[k] = mergePatch(t[k], v);
  }
  return t;
}

// A label selector of equalities, inequalities and existence
// ("app=web,tier!=db,env"); null when it does not parse.
function selector(s) {
  if (s.trim() === "") return () => true;
  const reqs = [];
  for (const part of s.split(",")) {
    const m = /^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)?\s*([A-Za-z0-9_.-]*)\s*$/.exec(part);
    if (!m) return null;
    reqs.push(m);
  }
  return (labels) => reqs.every(([, k, op, v]) => (op === undefined ? k in labels : op === "!=" ? labels[k] !== v : labels[k] === v));
}

export class FakeHost {
  // Instantiates the plugin's module (bytes) with the fake's imports.
  static async load(bytes) {
    const h = new FakeHost();
    const { instance } = await WebAssembly.instantiate(bytes, h.imports());
    h.exports = instance.exports;
    if (h.exports._initialize) h.exports._initialize();
    return h;
  }

  constructor() {
    this.config = ""; // what config_read returns
    this.logs = []; // "LEVEL message"
    this.writes = []; // {op, resource, namespace, name, subresource, body, uid, resourceVersion, force, mustExist}
    this.events = []; // {type, reason, message, object, kind}
    this.httpRequests = []; // {upstream, method, path, header: {Name: [values]}, body}
    this.stateMap = new Map(); // key -> {value, version}
    this.metrics = []; // {kind, name, declaration}
    this.values = new Map(); // name \0 labels -> value
    this._cache = new Map(); // resource -> Map(key -> object)
    this._writeAnswer = null;
    this._eventAnswer = null;
    this._upstreams = new Map();
    this._denied = new Set(); // capabilities deny() took away
    this._version = 0;
    this._rv = 0;
    this._uid = 0;
    this._batch = null; // {items, results, cur} during batch()
    this._ctl = null; // controller(): the controller loop's state
    this._endCall();
  }

  _endCall() {
    this._header = null;
    this._obj = null;
    this._old = null;
    this._handles = [];
    this._response = null;
    this._result = "";
    this._error = "";
  }

  // ---- what a test does ----

  // OnInit with this.config; the refusal's message, or null when accepted.
  init() {
    this._endCall();
    const rc = this.exports.ih_init(enc.encode(this.config).length);
    const msg = this._error;
    this._endCall();
    return rc === 0 ? null : msg || "ih_init returned " + rc;
  }
  add(resource, obj) { return this._deliver(1, 0, resource, obj, null); }
  addInitial(resource, obj) { return this._deliver(1, 0x01, resource, obj, null); }
  update(resource, old, obj) { return this._deliver(2, 0x04, resource, obj, old); }
  delete(resource, obj) { return this._deliver(3, 0, resource, obj, null); }
  // An add or update whose object is the plugin's own write (flag 0x08).
  selfWrite(resource, old, obj) { return this._deliver(old ? 2 : 1, 0x08 | (old ? 0x04 : 0), resource, obj, old); }

  // Puts obj into resource's cache (the resource is granted by its first object).
  cache(resource, obj) {
    if (!this._cache.has(resource)) this._cache.set(resource, new Map());
    const m = metaOf(obj);
    this._cache.get(resource).set(keyOf(m.namespace, m.name), clone(obj));
  }
  // Takes capabilities away, as an operator who did not grant them:
  // "cache" (every resource; one nothing was cached for is denied
  // anyway), "state" and "metrics" then answer ERR_DENIED.
  deny(...capabilities) {
    for (const c of capabilities) {
      if (!["cache", "state", "metrics"].includes(c)) throw new Error(`fake: deny(${JSON.stringify(c)}): not a capability it can deny (cache, state, metrics)`);
      this._denied.add(c);
    }
  }
  // The cached object, as cache() or a write left it, or undefined.
  cacheObject(resource, namespace, name) {
    const c = this._cache.get(cacheResource(resource));
    return c && clone(c.get(keyOf(namespace, name)));
  }
  state(key) {
    const e = this.stateMap.get(key);
    return e && dec.decode(e.value);
  }
  setState(key, value) {
    this.stateMap.set(key, { value: enc.encode(value), version: ++this._version });
  }
  // A counter's or gauge's value (a histogram's sum) for the label values.
  metric(name, ...labels) {
    return this.values.get(name + "\0" + labels.join("\0")) || 0;
  }
  // fn(request) -> {code, body}: code 0 with body the object answered
  // (ignored for a delete), or a negative code with body the message.
  // Without it, applyWrite answers.
  onWrite(fn) { this._writeAnswer = fn; }
  // fn(event) -> {code, message}; without it every Event is queued.
  onEvent(fn) { this._eventAnswer = fn; }
  // Grants upstream: fn(request) -> {status, header: {Name: [values]}, body}
  // or {code, message}. An upstream without one is ERR_DENIED.
  onHTTP(upstream, fn) { this._upstreams.set(upstream, fn); }

  // Adds of objs handed in one ih_handle_batch call (ABI.md §5; the
  // plugin re-exports the kit's ih_handle_batch): what it returned (how
  // many it settled) and each settled event's {code, message}, in order.
  // Each batch_select starts the event's call over, as the host does.
  batch(resource, objs) {
    this._endCall();
    this._batch = { items: objs.map((obj) => this._event(1, 0, resource, obj, null)), results: [], cur: -1 };
    const settled = this.exports.ih_handle_batch(objs.length);
    const results = this._batch.results;
    this._batch = null;
    this._endCall();
    return { settled, results };
  }

  _event(type, flags, resource, obj, old) {
    const m = metaOf(obj);
    return { header: header(type, flags, [resource, "", "v1", resource, obj.kind || "", m.namespace || "", m.name || "", m.uid || "", m.resourceVersion || ""]), obj, old };
  }

  _deliver(type, flags, resource, obj, old) {
    this._endCall();
    const e = this._event(type, flags, resource, obj, old);
    this._header = e.header;
    this._obj = obj;
    this._old = old;
    const code = this.exports.ih_handle(this._header.length);
    const r = { code, message: this._error };
    this._endCall();
    return r;
  }

  // ---- controller mode (ABI.md §18) ----

  // Sets up the host's controller loop over the fake cache as the object
  // store: resource is controller.for, owns maps a child's kind to its
  // resource ({Service: "services"}; any other kind is ERR_DENIED),
  // finalizer is controller.finalizer. The fake clock starts at
  // 2026-01-01T00:00:00Z.
  controller({ resource, owns = {}, finalizer = "" }) {
    if (!this._cache.has(resource)) this._cache.set(resource, new Map());
    this._ctl = { resource, owns, finalizer, children: new Map(), timers: new Map(), failures: new Map(), now: CLOCK_START, current: null, requeue: null };
    this.applied = []; // the last reconcile's children applied, "resource ns/name"
    this.pruned = []; // and pruned
    this.statuses = []; // and status bodies, as the host filled them in
  }

  // One reconcile of namespace/name through the plugin's ih_reconcile, as
  // the host makes it: the finalizer added before the first call of a
  // live object; the flags (absent, deleting, initial); after OK the
  // requeue timer kept, the finalizer removed from a deleting object
  // (which the fake apiserver then deletes when no finalizer is left),
  // every child of an absent key pruned. {code, message}.
  reconcile(namespace, name, { initial = false } = {}) {
    const c = this._ctl;
    if (!c) throw new Error("fake: reconcile before controller({resource, owns, finalizer})");
    const store = this._cache.get(c.resource);
    const k = keyOf(namespace, name);
    let obj = clone(store.get(k));
    const deleting = !!(obj && metaOf(obj).deletionTimestamp);
    if (obj && !deleting && c.finalizer && !(metaOf(obj).finalizers || []).includes(c.finalizer)) {
      obj.metadata.finalizers = [...(obj.metadata.finalizers || []), c.finalizer];
      store.set(k, clone(obj));
    }
    this._endCall();
    const m = metaOf(obj);
    const [group, version] = (obj && obj.apiVersion || "").includes("/") ? obj.apiVersion.split("/") : ["", (obj && obj.apiVersion) || ""];
    const flags = (initial ? 0x01 : 0) | (obj ? 0 : 0x40) | (deleting ? 0x80 : 0);
    this._header = header(4, flags, [c.resource, group, version, c.resource, (obj && obj.kind) || "", namespace, name, m.uid || "", m.resourceVersion || ""]);
    this._obj = obj || null;
    this._old = null;
    c.current = { namespace, name, key: k };
    c.requeue = null;
    this.applied = [];
    this.pruned = [];
    this.statuses = [];
    const code = this.exports.ih_reconcile(this._header.length);
    const r = { code, message: this._error };
    c.current = null;
    this._endCall();
    if (code === OK) {
      if (c.requeue > 0) c.timers.set(k, c.now + c.requeue);
      else c.timers.delete(k);
      if (!obj) this._prune(k, new Set());
      const cur = store.get(k);
      if (deleting && c.finalizer && cur) {
        cur.metadata.finalizers = (cur.metadata.finalizers || []).filter((f) => f !== c.finalizer);
        if (cur.metadata.finalizers.length === 0) store.delete(k);
      }
    } else if (code === DROP) c.timers.delete(k);
    return r;
  }
  // The replay after a (re)start: every cached primary, initial.
  reconcileAll() {
    return [...this._cache.get(this._ctl.resource).keys()].sort().map((k) => {
      const [ns, name] = k.includes("/") ? k.split("/") : ["", k];
      return { key: k, ...this.reconcile(ns, name, { initial: true }) };
    });
  }
  // A user's delete of the primary: with finalizers it gets a
  // deletionTimestamp (the fake clock's now), without it is gone.
  deletePrimary(namespace, name) {
    const store = this._cache.get(this._ctl.resource);
    const o = store.get(keyOf(namespace, name));
    if (!o) return;
    if ((metaOf(o).finalizers || []).length === 0) store.delete(keyOf(namespace, name));
    else o.metadata.deletionTimestamp = this.now();
  }
  // Moves the fake clock on by ms and reconciles, in due order, every key
  // whose requeue fell due: [{key, code, message}].
  advance(ms) {
    const c = this._ctl;
    c.now += ms;
    const due = [...c.timers.entries()].filter(([, at]) => at <= c.now).sort((a, b) => a[1] - b[1]);
    return due.map(([k]) => {
      c.timers.delete(k);
      const [ns, name] = k.includes("/") ? k.split("/") : ["", k];
      return { key: k, ...this.reconcile(ns, name) };
    });
  }
  // How long until namespace/name's requeue fires (ms), or undefined.
  requeueAfter(namespace, name) {
    const at = this._ctl.timers.get(keyOf(namespace, name));
    return at === undefined ? undefined : at - this._ctl.now;
  }
  // The fake clock, RFC 3339.
  now() {
    return new Date(this._ctl.now).toISOString().replace(/\.\d+Z$/, "Z");
  }
  // The children the host applied for namespace/name and has not pruned,
  // "resource ns/name", sorted.
  children(namespace, name) {
    return [...(this._ctl.children.get(keyOf(namespace, name)) || new Map()).keys()].sort();
  }
  // From now on children_apply fails the child kind key ("ns/name") with
  // error ("" applies it again).
  failChild(kind, key, error) {
    if (error) this._ctl.failures.set(kind + " " + key, error);
    else this._ctl.failures.delete(kind + " " + key);
  }

  _prune(primary, keep) {
    const c = this._ctl;
    const had = c.children.get(primary) || new Map();
    for (const [id, { resource, key }] of had) {
      if (keep.has(id)) continue;
      const store = this._cache.get(resource);
      if (store) store.delete(key);
      had.delete(id);
      this.pruned.push(id);
    }
    if (had.size === 0) c.children.delete(primary);
    else c.children.set(primary, had);
  }

  _childrenApply(text) {
    const c = this._ctl;
    let items;
    try { items = JSON.parse(text); } catch { items = null; }
    if (!Array.isArray(items)) return this._fail(ERR_INVALID, "children_apply: the body is not a JSON array");
    for (const [i, ch] of items.entries()) {
      if (!ch || !ch.apiVersion || !ch.kind || !metaOf(ch).name) return this._fail(ERR_INVALID, `children_apply: child ${i} has no apiVersion, kind or metadata.name`);
      if (!c.owns[ch.kind]) return this._fail(ERR_DENIED, `children_apply: ${ch.kind} is not of a resource in controller.owns`);
    }
    const { namespace, key } = c.current;
    const primary = this._cache.get(c.resource).get(key);
    const pm = metaOf(primary);
    const keep = new Set(), lines = [];
    const had = c.children.get(key) || new Map();
    for (const ch of items) {
      const res = c.owns[ch.kind], ns = metaOf(ch).namespace || namespace, name = ch.metadata.name;
      const id = `${res} ${keyOf(ns, name)}`;
      keep.add(id);
      const err = c.failures.get(ch.kind + " " + keyOf(ns, name));
      if (err) {
        lines.push(`${ch.kind} ${keyOf(ns, name)}: ${err}`);
        continue;
      }
      const body = clone(ch);
      body.metadata.labels = { ...(body.metadata.labels || {}), [PLUGIN_LABEL]: FAKE_PLUGIN };
      body.metadata.annotations = { ...(body.metadata.annotations || {}), [OWNER_ANNOTATION]: `${c.resource}/${namespace}/${c.current.name}/${pm.uid || ""}` };
      if (primary && (ns === namespace || !namespace)) {
        body.metadata.ownerReferences = [{ apiVersion: primary.apiVersion, kind: primary.kind, name: c.current.name, uid: pm.uid, controller: true, blockOwnerDeletion: true }];
      }
      const r = this.applyWrite({ op: "apply", resource: res, namespace: ns, name, body: JSON.stringify(body), force: true });
      if (r.code < 0) {
        lines.push(`${ch.kind} ${keyOf(ns, name)}: ${r.body}`);
        continue;
      }
      had.set(id, { resource: res, key: keyOf(ns, name) });
      this.applied.push(id);
    }
    c.children.set(key, had);
    this._prune(key, keep);
    this._result = lines.join("\n");
    return lines.length;
  }

  _statusApply(text) {
    const c = this._ctl;
    let st;
    try { st = JSON.parse(text); } catch { st = null; }
    if (!st || typeof st !== "object" || Array.isArray(st)) return this._fail(ERR_INVALID, "status_apply: the body is not a JSON object");
    const store = this._cache.get(c.resource);
    const obj = store.get(c.current.key);
    if (!obj) return ERR_ABSENT;
    if (st.conditions !== undefined) {
      if (!Array.isArray(st.conditions)) return this._fail(ERR_INVALID, "status_apply: conditions is not an array");
      const old = (obj.status && obj.status.conditions) || [];
      for (const [i, cond] of st.conditions.entries()) {
        if (!cond || !cond.type || !["True", "False", "Unknown"].includes(cond.status)) {
          return this._fail(ERR_INVALID, `status_apply: condition ${i} needs a type and a status of True, False or Unknown`);
        }
        const was = old.find((o) => o.type === cond.type);
        cond.lastTransitionTime = was && was.status === cond.status && was.lastTransitionTime ? was.lastTransitionTime : this.now();
        if (metaOf(obj).generation !== undefined) cond.observedGeneration = obj.metadata.generation;
      }
    }
    obj.status = { ...(obj.status || {}), ...st };
    this.statuses.push(st);
    return 0;
  }

  // ---- memory ----

  _mem() { return new Uint8Array(this.exports.memory.buffer); }
  _bytes(p, n) { return this._mem().slice(p, p + n); }
  _text(p, n) { return dec.decode(this._bytes(p, n)); }
  // The size protocol: copies data when it fits, returns its size.
  _out(data, p, n) {
    if (data.length <= n) this._mem().set(data, p);
    return data.length;
  }
  _fail(code, message) {
    this._result = message;
    return code;
  }

  _pick(which) {
    if (which === 0 || which === 1) {
      if (!this._header) return { code: ERR_NO_EVENT };
      const o = which === 0 ? this._obj : this._old;
      return o ? { obj: o } : { code: ERR_ABSENT };
    }
    const o = this._handles[which - FIRST_HANDLE];
    return o ? { obj: o } : { code: ERR_INVALID };
  }

  _handle(obj) {
    this._handles.push(obj);
    return FIRST_HANDLE + this._handles.length - 1;
  }

  _page(resource, start, p, n, keep) {
    const c = this._cache.get(resource);
    if (!c || this._denied.has("cache")) return BigInt(ERR_DENIED);
    if (start < 0) return BigInt(ERR_INVALID);
    const keys = [...c.entries()].filter(([, o]) => keep(o)).map(([k]) => k).sort();
    const page = enc.encode(keys.slice(start, start + 1000).map((k) => k + "\n").join(""));
    return (BigInt(keys.length) << 32n) | BigInt(this._out(page, p, n));
  }

  // ---- the imports ----

  imports() {
    const h = this;
    const t = (p, n) => h._text(p, n);
    const levels = ["DEBUG", "INFO", "WARN", "ERROR"];
    const metric = (op) => (id, v, lp, ln) => {
      const m = h.metrics[id];
      if (!m || Number.isNaN(v) || (op === "add" && m.kind === 0 && v < 0)) return ERR_INVALID;
      const k = m.name + "\0" + t(lp, ln);
      h.values.set(k, op === "set" ? v : (h.values.get(k) || 0) + v);
      return 0;
    };
    return {
      env: {
        abort() { throw new Error("the plugin called env.abort: build it with --use abort=...informer-host-as/assembly/index/abort"); },
        seed: () => 0,
      },
      informer_host_v1: {
        header_read: (p, n) => (h._header ? h._out(h._header, p, n) : ERR_NO_EVENT),
        // Controller mode (ABI.md §18): ERR_NO_EVENT outside ih_reconcile.
        reconcile_requeue_after(ms) {
          if (!h._ctl || !h._ctl.current) return ERR_NO_EVENT;
          const n = Number(ms);
          if (n < 0 || n > 366 * 86400000) return ERR_INVALID;
          h._ctl.requeue = n;
          return 0;
        },
        children_apply(p, n) {
          h._result = "";
          return h._ctl && h._ctl.current ? h._childrenApply(t(p, n)) : ERR_NO_EVENT;
        },
        status_apply(p, n) {
          h._result = "";
          return h._ctl && h._ctl.current ? h._statusApply(t(p, n)) : ERR_NO_EVENT;
        },
        object_read(which, p, n) {
          const r = h._pick(which);
          return r.code || h._out(enc.encode(hostJSON(r.obj)), p, n);
        },
        field_read(which, pp, pn, p, n) {
          const segs = parsePath(t(pp, pn));
          const r = h._pick(which);
          if (r.code) return BigInt(r.code);
          if (!segs) return BigInt(ERR_BAD_PATH);
          let cur = r.obj;
          for (const s of segs) {
            if (cur === null || typeof cur !== "object" || ("index" in s) !== Array.isArray(cur)) return BigInt(ERR_NOT_FOUND);
            cur = "index" in s ? cur[s.index] : Object.prototype.hasOwnProperty.call(cur, s.key) ? cur[s.key] : undefined;
            if (cur === undefined) return BigInt(ERR_NOT_FOUND);
          }
          const kind = typeof cur === "string" ? 1 : typeof cur === "number" ? 2 : typeof cur === "boolean" ? 3 : cur === null ? 4 : Array.isArray(cur) ? 6 : 5;
          const data = enc.encode(kind === 1 ? cur : hostJSON(cur));
          return (BigInt(kind) << 32n) | BigInt(h._out(data, p, n));
        },
        config_read: (p, n) => h._out(enc.encode(h.config), p, n),
        set_error(p, n) {
          h._error = t(p, n);
          return 0;
        },
        log(level, p, n) {
          if (level < 0 || level > 3) return ERR_INVALID;
          h.logs.push(levels[level] + " " + t(p, n));
          return 0;
        },
        cache_get(rp, rn, np, nn, mp, mn) {
          const c = h._cache.get(t(rp, rn));
          if (!c || h._denied.has("cache")) return ERR_DENIED;
          const o = c.get(keyOf(t(np, nn), t(mp, mn)));
          return o ? h._handle(clone(o)) : ERR_ABSENT;
        },
        cache_list(rp, rn, np, nn, sp, sn, start, p, n) {
          const ns = t(np, nn), match = selector(t(sp, sn));
          if (!h._cache.has(t(rp, rn))) return BigInt(ERR_DENIED);
          if (!match) return BigInt(ERR_INVALID);
          return h._page(t(rp, rn), start, p, n, (o) => (!ns || metaOf(o).namespace === ns) && match(metaOf(o).labels || {}));
        },
        cache_index(rp, rn, ip, inn, vp, vn, start, p, n) {
          const index = t(ip, inn), v = t(vp, vn);
          if (!h._cache.has(t(rp, rn))) return BigInt(ERR_DENIED);
          if (index === "namespace") return h._page(t(rp, rn), start, p, n, (o) => metaOf(o).namespace === v);
          if (index === "owner") return h._page(t(rp, rn), start, p, n, (o) => (metaOf(o).ownerReferences || []).some((r) => r.uid === v));
          return BigInt(ERR_INVALID);
        },
        state_get(kp, kn, p, n, vp) {
          if (h._denied.has("state")) return ERR_DENIED;
          const e = h.stateMap.get(t(kp, kn));
          if (kn < 1 || kn > 1024) return ERR_INVALID;
          if (!e) return ERR_ABSENT;
          new DataView(h.exports.memory.buffer).setBigInt64(vp, BigInt(e.version), true);
          return h._out(e.value, p, n);
        },
        state_set(kp, kn, vp, vn, ifVersion) {
          if (h._denied.has("state")) return BigInt(ERR_DENIED);
          if (kn < 1 || kn > 1024 || ifVersion < -1n) return BigInt(ERR_INVALID);
          const k = t(kp, kn), e = h.stateMap.get(k);
          if ((ifVersion === 0n && e) || (ifVersion > 0n && (!e || BigInt(e.version) !== ifVersion))) return BigInt(ERR_CONFLICT);
          h.stateMap.set(k, { value: h._bytes(vp, vn), version: ++h._version });
          return BigInt(h._version);
        },
        state_delete(kp, kn, ifVersion) {
          if (h._denied.has("state")) return ERR_DENIED;
          if (kn < 1 || kn > 1024 || ifVersion === 0n || ifVersion < -1n) return ERR_INVALID;
          const k = t(kp, kn), e = h.stateMap.get(k);
          if (!e) return ifVersion === -1n ? ERR_ABSENT : ERR_CONFLICT;
          if (ifVersion > 0n && BigInt(e.version) !== ifVersion) return ERR_CONFLICT;
          h.stateMap.delete(k);
          return 0;
        },
        state_list(pp, pn, ap, an, max, p, n) {
          if (h._denied.has("state")) return BigInt(ERR_DENIED);
          if (max < 1 || max > 1000) return BigInt(ERR_INVALID);
          const prefix = t(pp, pn), after = t(ap, an);
          const keys = [...h.stateMap.keys()].filter((k) => k.startsWith(prefix) && (!after || k > after)).sort().slice(0, max);
          const parts = [];
          for (const k of keys) {
            const b = enc.encode(k), len = new Uint8Array(4);
            new DataView(len.buffer).setUint32(0, b.length, true);
            parts.push(len, b);
          }
          const out = new Uint8Array(parts.reduce((s, b) => s + b.length, 0));
          parts.reduce((at, b) => (out.set(b, at), at + b.length), 0);
          return (BigInt(keys.length) << 32n) | BigInt(h._out(out, p, n));
        },
        metric_declare(kind, p, n) {
          if (h._denied.has("metrics")) return ERR_DENIED;
          let d;
          try { d = JSON.parse(t(p, n)); } catch { return ERR_INVALID; }
          if (kind < 0 || kind > 2 || !d || typeof d.name !== "string" || !/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(d.name)) return ERR_INVALID;
          const same = h.metrics.findIndex((m) => m.name === d.name);
          if (same >= 0) return same;
          h.metrics.push({ kind, name: d.name, declaration: d });
          return h.metrics.length - 1;
        },
        metric_add: metric("add"),
        metric_set: metric("set"),
        metric_observe: metric("observe"),
        result_message: (p, n) => h._out(enc.encode(h._result), p, n),
        batch_select(i) {
          const b = h._batch;
          if (!b) return ERR_NO_EVENT;
          if (i !== b.results.length || i >= b.items.length) return ERR_INVALID;
          if (b.cur !== i) {
            h._endCall();
            const e = b.items[i];
            h._header = e.header;
            h._obj = e.obj;
            h._old = e.old;
            b.cur = i;
          }
          return h._header.length;
        },
        batch_result(code) {
          const b = h._batch;
          if (!b || b.cur < 0) return ERR_NO_EVENT;
          b.results.push({ code, message: h._error });
          b.cur = -1;
          h._endCall();
          return 0;
        },
        k8s_write(op, rp, rn, np, nn, mp, mn, sp, sn, bp, bn, up, un, vp, vn, flags) {
          h._result = "";
          const r = { op: OPS[op] || "", resource: t(rp, rn), namespace: t(np, nn), name: t(mp, mn), subresource: t(sp, sn),
            body: t(bp, bn), uid: t(up, un), resourceVersion: t(vp, vn), force: (flags & 1) !== 0, mustExist: (flags & 2) !== 0 };
          h.writes.push(r);
          const bad = checkWrite(op, r, flags);
          if (bad) return h._fail(ERR_INVALID, bad);
          const a = h._writeAnswer ? h._writeAnswer(r) : h.applyWrite(r);
          if (a.code < 0) return h._fail(a.code, a.body || "");
          if (op === 5) return 0;
          return h._handle(typeof a.body === "string" && a.body !== "" ? JSON.parse(a.body) : a.body || {});
        },
        event_record(which, type, rp, rn, mp, mn) {
          h._result = "";
          const reason = t(rp, rn), message = t(mp, mn);
          if (type !== 0 && type !== 1) return h._fail(ERR_INVALID, `event type ${type} is neither 0 (Normal) nor 1 (Warning)`);
          const o = h._pick(which);
          if (o.code) return h._fail(o.code, `event_record: no object for which ${which}`);
          if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(reason)) return h._fail(ERR_INVALID, `reason ${JSON.stringify(reason)} is not 1 to 128 letters, digits and _-.:`);
          if (mn > 1024) return h._fail(ERR_TOO_LARGE, `the message is ${mn} bytes, over 1024`);
          const m = metaOf(o.obj);
          if (!m.name) return h._fail(ERR_INVALID, "the involved object has no name");
          const e = { type: type ? "Warning" : "Normal", reason, message, object: keyOf(m.namespace, m.name), kind: o.obj.kind || "" };
          const a = h._eventAnswer ? h._eventAnswer(e) : { code: 0 };
          if (a.code) return h._fail(a.code, a.message || "");
          h.events.push(e);
          return 0;
        },
        http_request(upp, upn, mp, mn, pp, pn, hp, hn, bp, bn) {
          h._result = "";
          h._response = null;
          const r = { upstream: t(upp, upn), method: t(mp, mn), path: t(pp, pn), header: {}, body: t(bp, bn) };
          for (const line of t(hp, hn).split("\n")) {
            if (line === "") continue;
            const c = line.indexOf(":");
            if (c <= 0) return h._fail(ERR_INVALID, `header line ${JSON.stringify(line)} is not Name: value`);
            const name = canonical(line.slice(0, c));
            if (["Host", "Content-Length", "Connection", "Transfer-Encoding", "Upgrade"].includes(name)) return h._fail(ERR_INVALID, `header ${name} is the host's`);
            (r.header[name] = r.header[name] || []).push(line.slice(c + 1).trim());
          }
          const answer = h._upstreams.get(r.upstream);
          if (!answer) return h._fail(ERR_DENIED, `upstream ${JSON.stringify(r.upstream)} is not granted (fake: program it with onHTTP)`);
          if (r.path && !/^[/?]/.test(r.path)) return h._fail(ERR_INVALID, `path ${JSON.stringify(r.path)} does not start with / or ?`);
          if (/[\\ #]|\/\/|(^|\/)(\.|%2e){1,2}(\/|\?|$)/i.test(r.path.split("?")[0])) return h._fail(ERR_INVALID, `path ${JSON.stringify(r.path)} would leave the upstream's base`);
          h.httpRequests.push(r);
          const a = answer(r);
          if (a.code < 0) return h._fail(a.code, a.message || "");
          h._response = { status: a.status || 200, header: a.header || {}, body: a.body || "" };
          return h._response.status;
        },
        http_response_read(part, p, n) {
          if (part !== 0 && part !== 1) return ERR_INVALID;
          if (!h._response) return ERR_ABSENT;
          if (part === 0) return h._out(typeof h._response.body === "string" ? enc.encode(h._response.body) : h._response.body, p, n);
          const lines = [];
          for (const name of Object.keys(h._response.header).map(canonical).sort()) {
            for (const [k, vs] of Object.entries(h._response.header)) if (canonical(k) === name) for (const v of vs) lines.push(name + ": " + v + "\n");
          }
          return h._out(enc.encode([...new Set(lines)].join("")), p, n);
        },
      },
    };
  }

  // The default answer to a write: applied to the fake cache, as the
  // apiserver would to the cluster ({code, body} as onWrite answers). A
  // create of an existing object is ERR_EXISTS; a patch, a must-exist
  // apply or a delete of a missing one ERR_ABSENT; a precondition the
  // object does not meet ERR_CONFLICT. An apply merges the applied
  // configuration (a merge patch, no field ownership); a JSON patch
  // supports add, replace and remove; a subresource write changes the
  // object itself. Each change sets a new metadata.resourceVersion, a
  // created object gets a metadata.uid.
  applyWrite(r) {
    const res = cacheResource(r.resource);
    if (!this._cache.has(res)) this._cache.set(res, new Map());
    const c = this._cache.get(res);
    const body = r.body ? JSON.parse(r.body) : null;
    const name = r.name || metaOf(body).name || "";
    const k = keyOf(r.namespace, name);
    let obj = clone(c.get(k));
    const notFound = { code: ERR_ABSENT, body: `${res} ${JSON.stringify(name)} not found` };
    if (obj) {
      const m = metaOf(obj);
      if (r.uid && m.uid !== r.uid) return { code: ERR_CONFLICT, body: `Precondition failed: UID in precondition: ${r.uid}, UID in object meta: ${m.uid}` };
      if (r.resourceVersion && m.resourceVersion !== r.resourceVersion) {
        return { code: ERR_CONFLICT, body: `the object has been modified (resourceVersion ${m.resourceVersion}, precondition ${r.resourceVersion})` };
      }
    }
    switch (r.op) {
      case "delete":
        if (!obj) return notFound;
        c.delete(k);
        return { code: 0, body: "" };
      case "create":
        if (obj) return { code: ERR_EXISTS, body: `${res} ${JSON.stringify(name)} already exists` };
        obj = this._created(body, r.namespace, name);
        break;
      case "apply":
        if (!obj && r.mustExist) return notFound;
        if (!obj && r.uid) return { code: ERR_CONFLICT, body: `Precondition failed: UID in precondition: ${r.uid}, the object does not exist` };
        obj = obj ? mergePatch(obj, body) : this._created(body, r.namespace, name);
        break;
      case "merge-patch":
        if (!obj) return notFound;
        obj = mergePatch(obj, body);
        break;
      case "json-patch":
        if (!obj) return notFound;
        for (const [i, o] of body.entries()) {
          const path = String(o.path || "").split("/").slice(1).map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
          const last = path.pop();
          let parent = obj;
          for (const s of path) parent = parent == null ? undefined : parent[s];
          if (parent == null || typeof parent !== "object" || !["add", "replace", "remove"].includes(o.op) || (o.op !== "add" && !(last in parent))) {
            return { code: ERR_UNPROCESSABLE, body: `the JSON patch does not apply: operation ${i} (${o.op} ${o.path})` };
          }
          if (o.op === "remove") Array.isArray(parent) ? parent.splice(Number(last), 1) : delete parent[last];
          else if (Array.isArray(parent) && o.op === "add") parent.splice(last === "-" ? parent.length : Number(last), 0, clone(o.value));
          else parent[last] = clone(o.value);
        }
        break;
    }
    obj.metadata = obj.metadata || {};
    obj.metadata.resourceVersion = String(++this._rv);
    c.set(k, clone(obj));
    return { code: 0, body: hostJSON(obj) };
  }

  _created(body, ns, name) {
    const o = clone(body) || {};
    o.metadata = o.metadata || {};
    o.metadata.name = name;
    if (ns) o.metadata.namespace = ns;
    if (!o.metadata.uid) o.metadata.uid = "fake-uid-" + ++this._uid;
    return o;
  }
}

// What the host refuses before any request (ABI.md §17.1), or "".
function checkWrite(op, r, flags) {
  if (!r.op) return `unknown op ${op}`;
  if (flags & ~3) return `unknown flags 0x${(flags & ~3).toString(16)}`;
  if (flags && op !== 4) return `force and must-exist are flags of an apply, not of a ${r.op}`;
  if (!r.name && op !== 1) return `a ${r.op} needs the object's name`;
  if (op === 5) return r.body ? "a delete takes no body" : "";
  if (op === 1 && (r.uid || r.resourceVersion)) return "a create takes no preconditions";
  let body;
  try { body = JSON.parse(r.body); } catch { return `the body of the ${r.op} is not JSON`; }
  if (op === 4 && !(body && body.apiVersion)) return "the applied configuration has no apiVersion";
  if (op === 4 && !body.kind) return "the applied configuration has no kind";
  return "";
}

// The cache a write lands in: "apps/v1/deployments" is "deployments".
function cacheResource(res) {
  return res.slice(res.lastIndexOf("/") + 1);
}

function canonical(name) {
  return name.trim().toLowerCase().replace(/(^|-)([a-z])/g, (_, d, c) => d + c.toUpperCase());
}

// An event header of ABI.md §8.
export function header(type, flags, fields) {
  const strs = fields.map((f) => enc.encode(f));
  const size = 80 + strs.reduce((s, b) => s + b.length, 0);
  const b = new Uint8Array(size), v = new DataView(b.buffer);
  b[0] = 1;
  b[1] = type;
  b[2] = flags;
  b[3] = 9;
  v.setUint32(4, size, true);
  let off = 80;
  strs.forEach((s, i) => {
    v.setUint32(8 + 8 * i, off, true);
    v.setUint32(12 + 8 * i, s.length, true);
    b.set(s, off);
    off += s.length;
  });
  return b;
}
