// informer-host-as: the informer-host plugin ABI v1 (abi/ABI.md) for
// AssemblyScript. A plugin's entry file re-exports the kit's exports and
// registers its handler at top level:
//
//   import * as ih from "informer-host-as/assembly";
//   export { informer_host_abi_v1, ih_handle, ih_synced, ih_init, ih_shutdown } from "informer-host-as/assembly";
//   // optional: ih_handle_batch too (ABI v1.4; see ih_handle_batch below)
//   ih.onHandle((ev: ih.Event): i32 => {
//     ih.info(ev.typeName() + " " + ev.key());
//     return ih.OK;
//   });
//
// built with
//
//   asc assembly/index.ts -o plugin.wasm -O --debug \
//     --use abort=~lib/informer-host-as/assembly/index/abort
//
// (`--use abort=...` replaces the env.abort import the host refuses with
// the kit's abort, which logs the message and traps; a package's files are
// under ~lib/ in asc's names. --debug keeps the name section, which -O
// alone drops, so the host's stack traces name the functions).
//
// Text crosses the ABI as UTF-8; AssemblyScript strings are UTF-16: the
// kit converts both ways. A failed read returns null (or a negative
// code) and leaves its code in lastError().

import * as host from "./host";
export { host };
import { JSONValue, parseJSON, jsonError } from "./json";
export { JSONValue, parseJSON, jsonError, JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } from "./json";
export { jsonObject, jsonArray, jsonStringValue, jsonInt, jsonNumber, jsonBool } from "./json";
import { quoteJSON } from "./json";
import { isController } from "./reconcile";
export {
  Request, Outcome, Children, Status, Condition, child, applyChildren, applyStatus, requeueAfter, onReconcile, ih_reconcile,
  EVENT_RECONCILE, FLAG_MISSED_DELETE, FLAG_ABSENT, FLAG_DELETING,
} from "./reconcile";

// ih_handle results (section 10).
export const OK: i32 = 0;
export const RETRY: i32 = 1;
export const DROP: i32 = 2;
export const ERROR: i32 = 3;

// Host function errors (section 10).
export const ERR_ABSENT: i32 = -1;
export const ERR_NOT_FOUND: i32 = -2;
export const ERR_BAD_PATH: i32 = -3;
export const ERR_BOUNDS: i32 = -4;
export const ERR_INVALID: i32 = -5;
export const ERR_NO_EVENT: i32 = -6;
export const ERR_INTERNAL: i32 = -7;
export const ERR_DENIED: i32 = -8;
export const ERR_CONFLICT: i32 = -9;
export const ERR_QUOTA: i32 = -10;
export const ERR_EXISTS: i32 = -11;
export const ERR_FORBIDDEN: i32 = -12;
export const ERR_UNPROCESSABLE: i32 = -13;
export const ERR_RATE_LIMITED: i32 = -14;
export const ERR_TIMEOUT: i32 = -15;
export const ERR_UNAVAILABLE: i32 = -16;
export const ERR_TOO_LARGE: i32 = -17;
export const ERR_CANCELED: i32 = -18;
// An apply would change fields another field manager owns: force or
// report; no newer event settles it (v1.3).
export const ERR_FIELD_CONFLICT: i32 = -19;

const ERR_NAMES: string[] = [
  "ERR_ABSENT", "ERR_NOT_FOUND", "ERR_BAD_PATH", "ERR_BOUNDS", "ERR_INVALID", "ERR_NO_EVENT",
  "ERR_INTERNAL", "ERR_DENIED", "ERR_CONFLICT", "ERR_QUOTA", "ERR_EXISTS", "ERR_FORBIDDEN",
  "ERR_UNPROCESSABLE", "ERR_RATE_LIMITED", "ERR_TIMEOUT", "ERR_UNAVAILABLE", "ERR_TOO_LARGE",
  "ERR_CANCELED", "ERR_FIELD_CONFLICT",
];

// The code's name in abi/ABI.md: errorName(-2) is "ERR_NOT_FOUND".
export function errorName(code: i32): string {
  if (code <= -1 && code >= -19) return ERR_NAMES[-code - 1];
  return "ERR_UNKNOWN(" + code.toString() + ")";
}

let lastCode: i32 = 0;
// The code of the last kit call that failed (0 if none has).
export function lastError(): i32 {
  return lastCode;
}

// Event types, flags and string indexes of the header (section 8).
export const EVENT_NONE: i32 = 0;
export const EVENT_ADD: i32 = 1;
export const EVENT_UPDATE: i32 = 2;
export const EVENT_DELETE: i32 = 3;
export const FLAG_INITIAL_LIST: i32 = 0x01;
export const FLAG_FINAL_STATE_UNKNOWN: i32 = 0x02;
export const FLAG_HAS_OLD_OBJECT: i32 = 0x04;
export const FLAG_SELF_WRITE: i32 = 0x08; // the result of one of this plugin's own writes (v1.2)
export const FLAG_HANDED_OVER: i32 = 0x10; // a delete: the object moved to another replica (v1.2)

// Field kinds (field_read, section 6).
export const KIND_STRING: i32 = 1;
export const KIND_NUMBER: i32 = 2;
export const KIND_BOOL: i32 = 3;
export const KIND_NULL: i32 = 4;
export const KIND_OBJECT: i32 = 5;
export const KIND_ARRAY: i32 = 6;

// Log levels.
export const DEBUG: i32 = 0;
export const INFO: i32 = 1;
export const WARN: i32 = 2;
export const LOG_ERROR: i32 = 3;

// ---- UTF-8 ----

// The UTF-8 bytes of s.
export function utf8(s: string): ArrayBuffer {
  return String.UTF8.encode(s, false);
}

// The string of n UTF-8 bytes at ptr (invalid sequences become U+FFFD).
export function fromUtf8(ptr: usize, n: i32): string {
  return String.UTF8.decodeUnsafe(ptr, <usize>n, false);
}

function ptrOf(b: ArrayBuffer): usize {
  return changetype<usize>(b);
}

// ---- the size protocol (section 7) ----

// One scratch buffer, grown as needed; reads copy out of it at once.
let scratch = new ArrayBuffer(1024);

// A read's result: the bytes (in scratch, `size` of them) and the high 32
// bits of the host's result (kind, total or count).
let readSize: i32 = 0;
let readHigh: u32 = 0;

// Prepares scratch for a value of n bytes; true when it had to grow (the
// caller calls the host again).
function fits(r: i64): bool {
  if (r < 0) return true; // nothing to grow for
  const size = <i32>(r & 0xffffffff);
  if (size <= scratch.byteLength) return true;
  scratch = new ArrayBuffer(size);
  return false;
}

// Records a read's result; false (and lastError) on an error code.
function took(r: i64): bool {
  if (r < 0) {
    lastCode = <i32>r;
    return false;
  }
  readSize = <i32>(r & 0xffffffff);
  readHigh = <u32>(r >>> 32);
  return true;
}

function scratchBytes(): Uint8Array {
  const out = new Uint8Array(readSize);
  memory.copy(out.dataStart, ptrOf(scratch), <usize>readSize);
  return out;
}

function scratchString(): string {
  return fromUtf8(ptrOf(scratch), readSize);
}

// ---- logging, errors, configuration ----

// Logs one line; false when the host's rate limit dropped it.
export function log(level: i32, msg: string): bool {
  const b = utf8(msg);
  return host.log(level, ptrOf(b), b.byteLength) == 0;
}
export function debug(msg: string): bool { return log(DEBUG, msg); }
export function info(msg: string): bool { return log(INFO, msg); }
export function warn(msg: string): bool { return log(WARN, msg); }
export function error(msg: string): bool { return log(LOG_ERROR, msg); }

// Sets the message of the current call's result.
export function setError(msg: string): void {
  const b = utf8(msg);
  host.set_error(ptrOf(b), b.byteLength);
}

// Sets the message and returns code: `return ih.fail(ih.RETRY, "not yet")`.
export function fail(code: i32, msg: string): i32 {
  setError(msg);
  return code;
}

// The plugin's configuration as text (JSON is customary).
export function config(): string {
  let r: i64;
  do {
    r = <i64>host.config_read(ptrOf(scratch), scratch.byteLength);
  } while (!fits(r));
  return took(r) ? scratchString() : "";
}

// The plugin's configuration parsed as JSON: what Go plugins get with
// kit.DecodeConfig(&v). An empty configuration is JSON null;
// one that is not JSON is null, and jsonError() says where (for onInit
// to refuse it with).
export function configJSON(): JSONValue | null {
  const c = config();
  if (c.trim().length == 0) return new JSONValue();
  return parseJSON(c);
}

// The message of the last capabilities II call of this export call.
export function resultMessage(): string {
  let r: i64;
  do {
    r = <i64>host.result_message(ptrOf(scratch), scratch.byteLength);
  } while (!fits(r));
  return took(r) ? scratchString() : errorName(<i32>r);
}

// The abort replacement (build with --use abort=~lib/informer-host-as/assembly/index/abort):
// logs where it happened, then traps; the host reports the trap.
export function abort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  let m = "abort";
  if (message !== null) m += ": " + message;
  if (fileName !== null) m += " at " + fileName + ":" + line.toString() + ":" + column.toString();
  error(m);
  unreachable();
}

// ---- the header (section 8) ----

export class Header {
  constructor(public bytes: Uint8Array) {}

  // A v1 header with at least 9 descriptors, each inside the header.
  valid(): bool {
    const b = this.bytes;
    if (b.length < 80 || b[0] != 1 || b[3] < 9 || 8 + 8 * <i32>b[3] > b.length) return false;
    for (let i = 0; i < 9; i++) {
      const off = this.u32(8 + 8 * i), n = this.u32(12 + 8 * i);
      if (<u64>off + <u64>n > <u64>b.length) return false;
    }
    return true;
  }
  u32(at: i32): u32 {
    return load<u32>(this.bytes.dataStart + <usize>at);
  }
  get version(): i32 { return this.bytes[0]; }
  get type(): i32 { return this.bytes[1]; }
  get flags(): i32 { return this.bytes[2]; }
  get initialList(): bool { return (this.flags & FLAG_INITIAL_LIST) != 0; }
  get finalStateUnknown(): bool { return (this.flags & FLAG_FINAL_STATE_UNKNOWN) != 0; }
  get hasOldObject(): bool { return (this.flags & FLAG_HAS_OLD_OBJECT) != 0; }
  // The object is the result of one of this plugin's own writes: a
  // controller answering it would be answering itself (section 17.1).
  get selfWrite(): bool { return (this.flags & FLAG_SELF_WRITE) != 0; }
  // A delete that says the object moved to another replica of a sharding
  // group, not out of the cluster (section 4.3).
  get handedOver(): bool { return (this.flags & FLAG_HANDED_OVER) != 0; }
  // String i of section 8 (0 resource name ... 8 resourceVersion).
  string(i: i32): string {
    if (i < 0 || i >= 9) return "";
    return fromUtf8(this.bytes.dataStart + <usize>this.u32(8 + 8 * i), <i32>this.u32(12 + 8 * i));
  }
  get resourceName(): string { return this.string(0); }
  get group(): string { return this.string(1); }
  get apiVersion(): string { return this.string(2); }
  get resource(): string { return this.string(3); }
  get kind(): string { return this.string(4); }
  get namespace(): string { return this.string(5); }
  get name(): string { return this.string(6); }
  get uid(): string { return this.string(7); }
  get resourceVersion(): string { return this.string(8); }
  // "namespace/name", or "name" for a cluster-scoped object.
  key(): string {
    const ns = this.namespace;
    return ns.length == 0 ? this.name : ns + "/" + this.name;
  }
  typeName(): string {
    const t = this.type;
    return t == EVENT_ADD ? "add" : t == EVENT_UPDATE ? "update" : t == EVENT_DELETE ? "delete" : t == EVENT_NONE ? "none" : t == 4 ? "reconcile" : "type " + t.toString();
  }
}

// Reads and checks the header of the current call; null on failure.
export function readHeader(len: i32): Header | null {
  const b = new Uint8Array(len);
  const n = host.header_read(b.dataStart, len);
  if (n < 0) {
    lastCode = n;
    return null;
  }
  const h = new Header(b);
  if (n != len || !h.valid()) {
    lastCode = ERR_INVALID;
    return null;
  }
  return h;
}

// ---- objects and fields ----

// A field's value: a string's bytes, or the JSON text of anything else.
export class Field {
  constructor(public kind: i32, public text: string) {}
}

function readField(which: i32, path: string): Field | null {
  const p = utf8(path);
  let r: i64;
  do {
    r = host.field_read(which, ptrOf(p), p.byteLength, ptrOf(scratch), scratch.byteLength);
  } while (!fits(r));
  if (!took(r)) return null;
  return new Field(<i32>readHigh, scratchString());
}

function readObject(which: i32): string | null {
  let r: i64;
  do {
    r = <i64>host.object_read(which, ptrOf(scratch), scratch.byteLength);
  } while (!fits(r));
  return took(r) ? scratchString() : null;
}

// Something whose fields can be read: the event's object, its old object
// or an object from the cache (`which` of section 6).
export class Readable {
  constructor(public which: i32) {}
  // The field at path (section 9), or null (lastError: ERR_NOT_FOUND, ...).
  field(path: string): Field | null { return readField(this.which, path); }
  // The field as text, or null.
  get(path: string): string | null {
    const f = readField(this.which, path);
    return f === null ? null : f.text;
  }
  // The whole object as JSON (compact, keys sorted), or null.
  json(): string | null { return readObject(this.which); }
  // Records a Kubernetes Event about this object (see recordEvent).
  recordEvent(type: i32, reason: string, message: string): i32 { return recordEvent(this.which, type, reason, message); }
}

export class Event extends Readable {
  old: Readable = new Readable(1);
  constructor(public header: Header) {
    super(0);
  }
  get type(): i32 { return this.header.type; }
  get namespace(): string { return this.header.namespace; }
  get name(): string { return this.header.name; }
  key(): string { return this.header.key(); }
  typeName(): string { return this.header.typeName(); }
  // The object is the result of one of this plugin's own writes (header
  // flag 0x08); Go's Event.SelfWrite, Rust's Event::self_write.
  get selfWrite(): bool { return this.header.selfWrite; }
  get initialList(): bool { return this.header.initialList; }
  get handedOver(): bool { return this.header.handedOver; }
}

// ---- the exports ----

let handler: ((ev: Event) => i32) | null = null;
let initHandler: ((config: string) => string | null) | null = null;
let syncedHandler: ((h: Header) => void) | null = null;
let shutdownHandler: (() => void) | null = null;

// Registers the event handler; it returns OK, RETRY, DROP or ERROR.
export function onHandle(f: (ev: Event) => i32): void { handler = f; }
// Registers the configuration check: null accepts, a message refuses.
export function onInit(f: (config: string) => string | null): void { initHandler = f; }
// Registers the call for a binding whose initial list is handled.
export function onSynced(f: (h: Header) => void): void { syncedHandler = f; }
export function onShutdown(f: () => void): void { shutdownHandler = f; }

export function informer_host_abi_v1(): void {}

export function ih_handle(len: i32): i32 {
  const h = readHeader(len);
  if (h === null) return fail(ERROR, "header_read: " + errorName(lastCode));
  const f = handler;
  if (f === null) {
    if (isController()) return fail(ERROR, "this plugin is a controller (it exports ih_reconcile): configure it with a controller: block (abi/ABI.md section 18)");
    return fail(ERROR, "no handler: call onHandle at the top level of the entry file");
  }
  return f(new Event(h));
}

// The optional batch export (section 5, since v1.4), opt-in: re-export it
// beside ih_handle to have the host hand up to 64 waiting events in one
// call. The onHandle handler still runs once per event, in order, each
// event made current with batch_select and settled with its own result
// (and setError message) through batch_result before the next; an abort
// traps in the event being handled, which the host fails alone, keeping
// the results settled before it. Every event then costs two host calls
// where an AssemblyScript export call alone is cheap, so a plugin is
// usually faster without it (abi/RATIONALE.md, "Batches").
export function ih_handle_batch(count: i32): i32 {
  for (let i = 0; i < count; i++) {
    const len = host.batch_select(i);
    // Not the host's protocol: settle what was settled.
    if (len < 0) return i;
    if (host.batch_result(ih_handle(len)) != 0) return i;
  }
  return count;
}

export function ih_init(len: i32): i32 {
  const f = initHandler;
  if (f === null) return 0;
  const msg = f(config());
  if (msg === null) return 0;
  setError(msg);
  return 1;
}

export function ih_synced(len: i32): void {
  const f = syncedHandler;
  if (f === null) return;
  const h = readHeader(len);
  if (h !== null) f(h);
}

export function ih_shutdown(): void {
  const f = shutdownHandler;
  if (f !== null) f();
}

// ---- cache reads (capability "cache", section 16.1) ----

// The object namespace/name of resource (the configured name), readable
// like the event until the export call returns; null when it is not in
// the cache (lastError ERR_ABSENT) or on an error (ERR_DENIED, ...).
export function cacheGet(resource: string, namespace: string, name: string): Readable | null {
  const r = utf8(resource), n = utf8(namespace), m = utf8(name);
  const h = host.cache_get(ptrOf(r), r.byteLength, ptrOf(n), n.byteLength, ptrOf(m), m.byteLength);
  if (h < 0) {
    if (h == ERR_ABSENT || h == ERR_NOT_FOUND) failedHere(h, "cache_get");
    else failedHere(h, "cache_get " + resource + " " + (namespace.length > 0 ? namespace + "/" + name : name));
    return null;
  }
  return new Readable(h);
}

// Splits one page of keys into out; false when the page was empty.
function takeKeys(out: string[]): bool {
  const before = out.length;
  const base = ptrOf(scratch);
  let from = 0;
  for (let i = 0; i < readSize; i++) {
    if (load<u8>(base + <usize>i) == 0x0a) {
      if (i > from) out.push(fromUtf8(base + <usize>from, i - from));
      from = i + 1;
    }
  }
  return out.length > before;
}

// Every page of keys of cache_list (index false: a and b are the namespace
// and selector) or cache_index (a and b are the index and value).
function cachePages(index: bool, resource: string, a: string, b: string): string[] | null {
  const r = utf8(resource), x = utf8(a), y = utf8(b);
  const out: string[] = [];
  for (;;) {
    let res: i64;
    do {
      res = index
        ? host.cache_index(ptrOf(r), r.byteLength, ptrOf(x), x.byteLength, ptrOf(y), y.byteLength, out.length, ptrOf(scratch), scratch.byteLength)
        : host.cache_list(ptrOf(r), r.byteLength, ptrOf(x), x.byteLength, ptrOf(y), y.byteLength, out.length, ptrOf(scratch), scratch.byteLength);
    } while (!fits(res));
    if (!took(res)) {
      if (lastCode == ERR_ABSENT || lastCode == ERR_NOT_FOUND) failedHere(lastCode, index ? "cache_index" : "cache_list");
      else failedHere(lastCode, index ? "cache_index " + resource + " " + a + "=" + b : listCall(resource, a, b));
      return null;
    }
    if (!takeKeys(out) || <u32>out.length >= readHigh) break;
  }
  return out;
}

// A cache_list as its error names it: "cache_list pods in shop -l app=web".
function listCall(resource: string, namespace: string, selector: string): string {
  let s = "cache_list " + resource;
  if (namespace.length > 0) s += " in " + namespace;
  if (selector.length > 0) s += " -l " + selector;
  return s;
}

// The keys of resource in namespace ("" all) matching selector ("" all),
// sorted, every page; null on an error.
export function cacheList(resource: string, namespace: string, selector: string): string[] | null {
  return cachePages(false, resource, namespace, selector);
}

// The keys that index ("namespace", or "owner" if granted) maps to value.
export function cacheIndex(resource: string, index: string, value: string): string[] | null {
  return cachePages(true, resource, index, value);
}

// ---- state (capability "state", section 16.2) ----

export const ANY_VERSION: i64 = -1;
export const ABSENT: i64 = 0;

export class StateValue {
  constructor(public bytes: Uint8Array, public version: i64) {}
  text(): string { return String.UTF8.decode(this.bytes.buffer, false); }
}

const versionBuf = new ArrayBuffer(8);

// The value of key and its version; null when there is no such key
// (lastError ERR_ABSENT) or on an error.
export function stateGet(key: string): StateValue | null {
  const k = utf8(key);
  let r: i64;
  do {
    r = <i64>host.state_get(ptrOf(k), k.byteLength, ptrOf(scratch), scratch.byteLength, ptrOf(versionBuf));
  } while (!fits(r));
  if (!took(r)) {
    stateFailed(lastCode, "state_get", key);
    return null;
  }
  return new StateValue(scratchBytes(), load<i64>(ptrOf(versionBuf)));
}

// Writes key if it is at ifVersion (ANY_VERSION: always; ABSENT: only if
// missing); the new version, or a negative code (ERR_CONFLICT, ERR_QUOTA).
export function stateSet(key: string, value: string, ifVersion: i64 = ANY_VERSION): i64 {
  const v = utf8(value);
  return stateSetBytes(key, Uint8Array.wrap(v), ifVersion);
}

export function stateSetBytes(key: string, value: Uint8Array, ifVersion: i64 = ANY_VERSION): i64 {
  const k = utf8(key);
  const r = host.state_set(ptrOf(k), k.byteLength, value.dataStart, value.length, ifVersion);
  if (r < 0) stateFailed(<i32>r, "state_set", key);
  return r;
}

// Deletes key: 0, or ERR_ABSENT (no such key), ERR_CONFLICT, ...
export function stateDelete(key: string, ifVersion: i64 = ANY_VERSION): i32 {
  const k = utf8(key);
  const r = host.state_delete(ptrOf(k), k.byteLength, ifVersion);
  if (r < 0) stateFailed(r, "state_delete", key);
  return r;
}

// Up to max (1..1000) keys starting with prefix, sorting after after.
export function stateList(prefix: string, after: string, max: i32): string[] | null {
  const p = utf8(prefix), a = utf8(after);
  let r: i64;
  do {
    r = host.state_list(ptrOf(p), p.byteLength, ptrOf(a), a.byteLength, max, ptrOf(scratch), scratch.byteLength);
  } while (!fits(r));
  if (!took(r)) {
    failedHere(lastCode, "state_list prefix " + jsonString(prefix) + " after " + jsonString(after));
    return null;
  }
  const out: string[] = [];
  const base = ptrOf(scratch);
  let at: i32 = 0;
  for (let i: u32 = 0; i < readHigh; i++) {
    if (at + 4 > readSize) break;
    const n = <i32>load<u32>(base + <usize>at);
    if (at + 4 + n > readSize) break;
    out.push(fromUtf8(base + <usize>at + 4, n));
    at += 4 + n;
  }
  return out;
}

// Records a failed state call: a missing key and a conflict, which a
// plugin expects, cheaply (the code and the function); anything else
// with the key.
function stateFailed(code: i32, fn: string, key: string): void {
  if (code == ERR_ABSENT || code == ERR_CONFLICT) failedHere(code, fn);
  else failedHere(code, fn + " " + jsonString(key));
}

// Every key starting with prefix, page by page.
export function stateKeys(prefix: string): string[] | null {
  const out: string[] = [];
  for (;;) {
    const page = stateList(prefix, out.length > 0 ? out[out.length - 1] : "", 1000);
    if (page === null) return null;
    for (let i = 0; i < page.length; i++) out.push(page[i]);
    if (page.length < 1000) break;
  }
  return out;
}

// ---- metrics (capability "metrics", section 16.3) ----

export const METRIC_COUNTER: i32 = 0;
export const METRIC_GAUGE: i32 = 1;
export const METRIC_HISTOGRAM: i32 = 2;
export const METRIC_DROPPED: i32 = 1;

// s as a JSON string.
export function jsonString(s: string): string {
  return quoteJSON(s);
}

// A metric, declared on its first update. An update returns 0,
// METRIC_DROPPED (past the series cap) or a negative code (ERR_DENIED
// without the grant, ERR_INVALID).
export class Metric {
  private id: i32 = i32.MIN_VALUE;
  constructor(public kind: i32, public name: string, public help: string, public labels: string[], public buckets: f64[]) {}

  declaration(): string {
    let d = "{\"name\":" + jsonString(this.name);
    if (this.help.length > 0) d += ",\"help\":" + jsonString(this.help);
    if (this.labels.length > 0) {
      d += ",\"labels\":[";
      for (let i = 0; i < this.labels.length; i++) d += (i > 0 ? "," : "") + jsonString(this.labels[i]);
      d += "]";
    }
    if (this.buckets.length > 0) {
      d += ",\"buckets\":[";
      for (let i = 0; i < this.buckets.length; i++) d += (i > 0 ? "," : "") + this.buckets[i].toString();
      d += "]";
    }
    return d + "}";
  }

  private declared(): i32 {
    if (this.id == i32.MIN_VALUE) {
      const d = utf8(this.declaration());
      this.id = host.metric_declare(this.kind, ptrOf(d), d.byteLength);
    }
    if (this.id < 0) failedHere(this.id, "metric_declare " + this.name);
    return this.id;
  }

  private update(op: i32, v: f64, values: string[]): i32 {
    const id = this.declared();
    if (id < 0) return id;
    const l = utf8(values.join("\0"));
    let r: i32;
    if (op == 0) r = host.metric_add(id, v, ptrOf(l), l.byteLength);
    else if (op == 1) r = host.metric_set(id, v, ptrOf(l), l.byteLength);
    else r = host.metric_observe(id, v, ptrOf(l), l.byteLength);
    if (r < 0) failedHere(r, (op == 0 ? "metric_add " : op == 1 ? "metric_set " : "metric_observe ") + this.name);
    return r;
  }

  add(v: f64, labels: string[] = []): i32 { return this.update(0, v, labels); }
  set(v: f64, labels: string[] = []): i32 { return this.update(1, v, labels); }
  observe(v: f64, labels: string[] = []): i32 { return this.update(2, v, labels); }
}

export function counter(name: string, help: string, labels: string[] = []): Metric {
  return new Metric(METRIC_COUNTER, name, help, labels, []);
}
export function gauge(name: string, help: string, labels: string[] = []): Metric {
  return new Metric(METRIC_GAUGE, name, help, labels, []);
}
// Empty buckets: Prometheus' defaults.
export function histogram(name: string, help: string, buckets: f64[], labels: string[] = []): Metric {
  return new Metric(METRIC_HISTOGRAM, name, help, labels, buckets);
}

// ---- capabilities II (section 17): writes, Events, HTTP ----
//
// A failed call returns null (or a negative code) and leaves its code in
// lastError() and the host's message (result_message) in
// lastErrorMessage(); callError() says it all, the call included, for a
// log line or setError. A failed cache, state or metrics call leaves its
// code and call the same way, without a message.

let lastMessage = "";
let lastCall = "";

// The result message of the last capabilities II call that failed (empty
// after a failed cache, state or metrics call: the host gives none).
export function lastErrorMessage(): string {
  return lastMessage;
}

// The last failed call: the host function and what it was called on,
// "k8s_write apply configmaps demo/x", "cache_get secrets shop/token",
// "state_set \"phase/web\"", "metric_declare pods_total"; only the function
// after a cache miss, a missing state key or a conflict.
export function lastErrorCall(): string {
  return lastCall;
}

// The last failed call, its code and the host's message:
// "k8s_write apply configmaps demo/x: ERR_RATE_LIMITED: <message>",
// "cache_get secrets shop/token: ERR_DENIED".
export function callError(): string {
  let s = lastCall.length > 0 ? lastCall + ": " + errorName(lastCode) : errorName(lastCode);
  return lastMessage.length > 0 ? s + ": " + lastMessage : s;
}

// Records a capabilities II failure: the call, the code and the result
// message.
function failed(code: i32, call: string): i32 {
  lastMessage = resultMessage();
  lastCall = call;
  lastCode = code;
  return code;
}

// Records a failed cache, state or metrics call: the call and the code.
// The host sets no result message for these (section 17 only): reading
// it would return a write's from earlier in the same export call. An
// outcome a plugin checks for on every event (a cache miss, a missing
// state key, a compare-and-swap conflict) passes the function's name, a
// literal, so that it builds no string.
function failedHere(code: i32, call: string): void {
  lastMessage = "";
  lastCall = call;
  lastCode = code;
}

// How errors name a k8s_write op: "create", "merge-patch", "json-patch",
// "apply", "delete"; "op N" for another.
export function writeOpName(op: i32): string {
  switch (op) {
    case WRITE_CREATE: return "create";
    case WRITE_MERGE_PATCH: return "merge-patch";
    case WRITE_JSON_PATCH: return "json-patch";
    case WRITE_APPLY: return "apply";
    case WRITE_DELETE: return "delete";
  }
  return "op " + op.toString();
}

// A write as its error names it: "apply --force pods shop/web".
function writeCall(op: i32, t: Target, flags: i32): string {
  let s = "k8s_write " + writeOpName(op);
  if ((flags & WRITE_FORCE) != 0) s += " --force";
  if ((flags & WRITE_MUST_EXIST) != 0) s += " --must-exist";
  s += " " + t.resource;
  if (t.subresource.length > 0) s += "/" + t.subresource;
  if (t.namespace.length > 0 && t.name.length > 0) s += " " + t.namespace + "/" + t.name;
  else if (t.namespace.length > 0) s += " in " + t.namespace;
  else if (t.name.length > 0) s += " " + t.name;
  return s;
}

// k8s_write ops and flags (section 17.1).
export const WRITE_CREATE: i32 = 1; // POST the body; verb create
export const WRITE_MERGE_PATCH: i32 = 2; // JSON merge patch (RFC 7386); verb patch
export const WRITE_JSON_PATCH: i32 = 3; // JSON patch (RFC 6902); verb patch
export const WRITE_APPLY: i32 = 4; // server-side apply; verb apply
export const WRITE_DELETE: i32 = 5; // DELETE, no body; verb delete
export const WRITE_FORCE: i32 = 1; // apply: take over fields another manager owns
export const WRITE_MUST_EXIST: i32 = 2; // apply: update only, ERR_ABSENT when gone (v1.3)

// The object a write acts on. resource is a granted resource as the grant
// names it: a configured name ("pods") or "group/version/resource".
export class Target {
  constructor(public resource: string, public namespace: string = "", public name: string = "", public subresource: string = "") {}
}

// Optional preconditions: the apiserver refuses the write with
// ERR_CONFLICT when the object's uid or resourceVersion differs.
export class Preconditions {
  constructor(public uid: string = "", public resourceVersion: string = "") {}
}

const NO_PRECONDITIONS = new Preconditions();

// k8s_write: a handle (>= 2) to the object the apiserver answered with,
// 0 after a delete, or a negative code (lastError, lastErrorMessage).
export function k8sWrite(op: i32, t: Target, body: string, pre: Preconditions = NO_PRECONDITIONS, flags: i32 = 0): i32 {
  const r = utf8(t.resource), n = utf8(t.namespace), m = utf8(t.name), s = utf8(t.subresource);
  const b = utf8(body), u = utf8(pre.uid), v = utf8(pre.resourceVersion);
  const h = host.k8s_write(op, ptrOf(r), r.byteLength, ptrOf(n), n.byteLength, ptrOf(m), m.byteLength, ptrOf(s), s.byteLength,
    ptrOf(b), b.byteLength, ptrOf(u), u.byteLength, ptrOf(v), v.byteLength, flags);
  return h < 0 ? failed(h, writeCall(op, t, flags)) : h;
}

function written(h: i32): Readable | null {
  return h < 0 ? null : new Readable(h);
}

// Creates the object body (JSON) describes; the created object, readable
// until the export call returns, or null (ERR_EXISTS, ERR_DENIED, ...).
export function k8sCreate(t: Target, body: string): Readable | null {
  return written(k8sWrite(WRITE_CREATE, t, body));
}

// Applies a JSON merge patch; the patched object or null.
export function k8sMergePatch(t: Target, patch: string, pre: Preconditions = NO_PRECONDITIONS): Readable | null {
  return written(k8sWrite(WRITE_MERGE_PATCH, t, patch, pre));
}

// Applies a JSON patch (an array of operations); the patched object or null.
export function k8sJSONPatch(t: Target, patch: string, pre: Preconditions = NO_PRECONDITIONS): Readable | null {
  return written(k8sWrite(WRITE_JSON_PATCH, t, patch, pre));
}

// Server-side applies body (apiVersion, kind, metadata.name) as field
// manager informer-host/<plugin>; force takes over conflicting fields
// (else ERR_FIELD_CONFLICT); mustExist updates the object only, ERR_ABSENT
// when it is gone (v1.3).
export function k8sApply(t: Target, body: string, force: bool = false, pre: Preconditions = NO_PRECONDITIONS, mustExist: bool = false): Readable | null {
  return written(k8sWrite(WRITE_APPLY, t, body, pre, (force ? WRITE_FORCE : 0) | (mustExist ? WRITE_MUST_EXIST : 0)));
}

// Deletes the object: 0 or a negative code (ERR_ABSENT: already gone).
export function k8sDelete(t: Target, pre: Preconditions = NO_PRECONDITIONS): i32 {
  return k8sWrite(WRITE_DELETE, t, "", pre);
}

// Kubernetes Event types (section 17.2).
export const NORMAL: i32 = 0;
export const WARNING: i32 = 1;

// Records a Kubernetes Event about the object which selects (0 the
// event's object, 1 its old object, or a Readable's which), attributed to
// the plugin. reason: a CamelCase word; message: up to 1 KiB. 0 (queued)
// or a negative code. Readable.recordEvent is the same on an object.
export function recordEvent(which: i32, type: i32, reason: string, message: string): i32 {
  const r = utf8(reason), m = utf8(message);
  const c = host.event_record(which, type, ptrOf(r), r.byteLength, ptrOf(m), m.byteLength);
  if (c >= 0) return c;
  failed(c, "");
  // The object's key for the error's text, read after the message (a
  // field read leaves the code in lastError, put back below).
  let call = "event_record " + (type == NORMAL ? "Normal" : type == WARNING ? "Warning" : "type " + type.toString()) + " " + reason;
  const name = readField(which, "metadata.name");
  if (name !== null) {
    const ns = readField(which, "metadata.namespace");
    call += " about " + (ns !== null && ns.text.length > 0 ? ns.text + "/" + name.text : name.text);
  }
  lastCall = call;
  lastCode = c;
  return c;
}

// Parts of an HTTP response (http_response_read).
export const HTTP_BODY: i32 = 0;
export const HTTP_HEADER: i32 = 1;

// An upstream's answer (5xx included: an answer is not an error).
export class Response {
  constructor(public status: i32, public header: string, public body: Uint8Array) {}
  // The body as text.
  text(): string { return String.UTF8.decode(this.body.buffer, false); }
  // The first value of the header name (canonical: "Content-Type"), or null.
  headerValue(name: string): string | null {
    const lines = this.header.split("\n");
    const prefix = name + ": ";
    for (let i = 0; i < lines.length; i++) {
      if (lines[i].startsWith(prefix)) return lines[i].substring(prefix.length);
    }
    return null;
  }
}

// One part of the last response (HTTP_BODY, HTTP_HEADER), size protocol;
// null (lastError ERR_ABSENT) when the last call got no response.
export function httpResponseRead(part: i32): Uint8Array | null {
  let r: i64;
  do {
    r = <i64>host.http_response_read(part, ptrOf(scratch), scratch.byteLength);
  } while (!fits(r));
  return took(r) ? scratchBytes() : null;
}

// Calls the upstream the operator named (config.yaml upstreams, granted
// by grants.http) with method and path ("" or starting with "/" or "?")
// and header as name, value pairs; the response, or null (lastError:
// ERR_DENIED, ERR_TIMEOUT, ERR_UNAVAILABLE, ERR_RATE_LIMITED, ...).
export function httpRequest(upstream: string, method: string, path: string, header: string[] = [], body: Uint8Array | null = null): Response | null {
  let lines = "";
  for (let i = 0; i + 1 < header.length; i += 2) lines += header[i] + ": " + header[i + 1] + "\n";
  const u = utf8(upstream), m = utf8(method), p = utf8(path), h = utf8(lines);
  const bp: usize = body === null ? 0 : body.dataStart;
  const bl: i32 = body === null ? 0 : body.length;
  const status = host.http_request(ptrOf(u), u.byteLength, ptrOf(m), m.byteLength, ptrOf(p), p.byteLength, ptrOf(h), h.byteLength, bp, bl);
  const call = "http_request " + upstream + " " + method + " " + path;
  if (status < 0) {
    failed(status, call);
    return null;
  }
  const b = httpResponseRead(HTTP_BODY);
  const hd = httpResponseRead(HTTP_HEADER);
  if (b === null || hd === null) {
    lastCall = "http_response_read " + (b === null ? "body" : "header") + " of " + call;
    lastMessage = "";
    return null;
  }
  return new Response(status, String.UTF8.decode(hd.buffer, false), b);
}

// Posts body (text) with contentType to path under the upstream's URL.
export function httpPost(upstream: string, path: string, contentType: string, body: string): Response | null {
  return httpRequest(upstream, "POST", path, ["Content-Type", contentType], Uint8Array.wrap(utf8(body)));
}

// Gets path under the upstream's URL.
export function httpGet(upstream: string, path: string): Response | null {
  return httpRequest(upstream, "GET", path);
}
