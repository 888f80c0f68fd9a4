// Controller mode (ABI v1.5, abi/ABI.md section 18): a plugin whose
// configuration has a controller: block is called once per primary key
// through ih_reconcile, never per event, and answers with the state it
// wants: the complete set of the key's children, the status it owns, and
// when to look again. The entry file re-exports ih_reconcile beside the
// marker and ih_handle (which the host never calls on a controller) and
// registers the reconciler at top level:
//
//   import * as ih from "informer-host-as/assembly";
//   export { informer_host_abi_v1, ih_handle, ih_reconcile } from "informer-host-as/assembly";
//   ih.onReconcile((req: ih.Request): ih.Outcome => {
//     const children = new ih.Children();
//     if (req.exists && !req.deleting) {
//       children.add(ih.child("v1", "ConfigMap", req.name + "-copy").set("data", ih.jsonObject()));
//     }
//     const status = new ih.Status().setCondition(new ih.Condition("Ready", "True", "Copied"));
//     return ih.Outcome.ok().withChildren(children).withStatus(status).requeueAfter(60000);
//   });
//
// Outcome.retry, Outcome.drop and Outcome.error answer as a handler's
// RETRY, DROP and ERROR do (withStatus on them still writes the status: a
// failure can be a condition). After an OK outcome the kit applies the
// children (children_apply), then the status (status_apply), then the
// requeue (always: zero clears the key's timer); a child the host could not apply turns the answer into ERROR
// with the host's line for each (`<kind> <ns>/<name>: <error>`), after
// the status was written, so the key is retried with backoff.
// applyChildren gives a plugin the failures to act on itself.

import * as host from "./host";
import { Header, Readable, readHeader, fail, setError, resultMessage, errorName, lastError, OK, RETRY, DROP, ERROR } from "./index";
import { JSONValue, jsonObject, jsonArray, jsonStringValue } from "./json";

export const EVENT_RECONCILE: i32 = 4;
export const FLAG_MISSED_DELETE: i32 = 0x20; // a delete inferred after the fact; the object is a stub (v1.5)
export const FLAG_ABSENT: i32 = 0x40; // reconcile: the key has no object in the cache (v1.5)
export const FLAG_DELETING: i32 = 0x80; // reconcile: the object's deletionTimestamp is set (v1.5)

// The key to reconcile; its object, when the cache has it, is read as an
// event's (get, field, json: null with lastError ERR_ABSENT when not).
export class Request extends Readable {
  constructor(public header: Header) {
    super(0);
  }
  get namespace(): string { return this.header.namespace; }
  get name(): string { return this.header.name; }
  key(): string { return this.header.key(); }
  // The cache has the object (header flag 0x40 unset).
  get exists(): bool { return (this.header.flags & FLAG_ABSENT) == 0; }
  // Its deletionTimestamp is set: clean up and answer OK, and the host
  // removes the finalizer.
  get deleting(): bool { return (this.header.flags & FLAG_DELETING) != 0; }
  // A reconcile of the replay after a (re)start or reload.
  get initial(): bool { return this.header.initialList; }
}

// A status condition; the host sets observedGeneration and
// lastTransitionTime (kept while the status is unchanged).
export class Condition {
  constructor(public type: string, public status: string, public reason: string = "", public message: string = "") {}
  toValue(): JSONValue {
    const v = jsonObject().set("type", jsonStringValue(this.type)).set("status", jsonStringValue(this.status));
    if (this.reason.length > 0) v.set("reason", jsonStringValue(this.reason));
    if (this.message.length > 0) v.set("message", jsonStringValue(this.message));
    return v;
  }
}

// The complete set of a key's children: each an object with apiVersion,
// kind and metadata.name (the namespace defaults to the primary's), of a
// resource among controller.owns. Empty: every child the host applied for
// the key is pruned.
export class Children {
  items: JSONValue[] = [];
  add(child: JSONValue): Children {
    this.items.push(child);
    return this;
  }
  get length(): i32 { return this.items.length; }
  stringify(): string { return jsonArray(this.items).stringify(); }
}

// A child's start: {apiVersion, kind, metadata: {name}}; add the rest
// with set (its metadata is get("metadata")).
export function child(apiVersion: string, kind: string, name: string): JSONValue {
  return jsonObject()
    .set("apiVersion", jsonStringValue(apiVersion))
    .set("kind", jsonStringValue(kind))
    .set("metadata", jsonObject().set("name", jsonStringValue(name)));
}

// The status fields the plugin owns: conditions and any others.
export class Status {
  fields: JSONValue = jsonObject();
  conditions: Condition[] = [];
  // Sets status field key (not "conditions": use setCondition).
  set(key: string, v: JSONValue): Status {
    this.fields.set(key, v);
    return this;
  }
  // Adds the condition, or replaces the one of its type (as
  // apimachinery's meta.SetStatusCondition).
  setCondition(c: Condition): Status {
    for (let i = 0; i < this.conditions.length; i++) {
      if (this.conditions[i].type == c.type) {
        this.conditions[i] = c;
        return this;
      }
    }
    this.conditions.push(c);
    return this;
  }
  condition(type: string): Condition | null {
    for (let i = 0; i < this.conditions.length; i++) if (this.conditions[i].type == type) return this.conditions[i];
    return null;
  }
  stringify(): string {
    const v = jsonObject();
    for (let i = 0; i < this.fields.keys.length; i++) v.set(this.fields.keys[i], this.fields.items[i]);
    if (this.conditions.length > 0) {
      const cs: JSONValue[] = [];
      for (let i = 0; i < this.conditions.length; i++) cs.push(this.conditions[i].toValue());
      v.set("conditions", jsonArray(cs));
    }
    return v.stringify();
  }
}

// What a reconcile answers. Outcome.ok() changes nothing: children left
// alone, no status, no requeue.
export class Outcome {
  code: i32 = OK;
  message: string = "";
  requeueAfterMs: i64 = 0;
  children: Children | null = null;
  status: Status | null = null;

  static ok(): Outcome { return new Outcome(); }
  static retry(message: string): Outcome { return Outcome.failed(RETRY, message); }
  // DROP: the key's backoff is forgotten, no requeue.
  static drop(message: string): Outcome { return Outcome.failed(DROP, message); }
  static error(message: string): Outcome { return Outcome.failed(ERROR, message); }
  static failed(code: i32, message: string): Outcome {
    const o = new Outcome();
    o.code = code;
    o.message = message;
    return o;
  }
  // Reconcile the key again after ms (the host persists it on the object).
  requeueAfter(ms: i64): Outcome {
    this.requeueAfterMs = ms;
    return this;
  }
  withChildren(c: Children): Outcome {
    this.children = c;
    return this;
  }
  withStatus(s: Status): Outcome {
    this.status = s;
    return this;
  }
}

// children_apply now, for a plugin that acts on failed children itself
// (its Outcome then has no children): the number that failed (0: every
// child applied and every stale one pruned; the lines, `<kind>
// <ns>/<name>: <error>`, in resultMessage()), or a negative code
// (ERR_INVALID, ERR_DENIED: a kind not among controller.owns, ...).
export function applyChildren(c: Children): i32 {
  const b = String.UTF8.encode(c.stringify(), false);
  return host.children_apply(changetype<usize>(b), b.byteLength);
}

// status_apply now: 0 or a negative code (message in resultMessage()).
export function applyStatus(s: Status): i32 {
  const b = String.UTF8.encode(s.stringify(), false);
  return host.status_apply(changetype<usize>(b), b.byteLength);
}

// reconcile_requeue_after now: 0, or ERR_INVALID (negative, over 366 days).
export function requeueAfter(ms: i64): i32 {
  return host.reconcile_requeue_after(ms);
}

// Carries out an outcome, as Go's kit does: the children only when it is
// OK (a failed reconcile's set may be partial, and pruning by it would
// delete), the status whatever the answer (so a failure can be a
// condition; skipped when the primary is gone: its absent reconcile
// follows), the requeue only when all succeeded, zero included, so an
// outcome without one clears the key's timer. The first failure is the
// answer.
function settle(o: Outcome): i32 {
  let answer = o.code;
  let message = o.message;
  const c = o.children;
  if (c !== null && answer == OK) {
    const r = applyChildren(c);
    if (r < 0) {
      answer = ERROR;
      message = "children_apply " + c.length.toString() + " children: " + errorName(r) + ": " + resultMessage();
    } else if (r > 0) {
      answer = ERROR;
      message = "children_apply: " + r.toString() + " of " + c.length.toString() + " children failed: " + resultMessage().split("\n").join("; ");
    }
  }
  const s = o.status;
  if (s !== null) {
    const r = applyStatus(s);
    if (r < 0 && r != -1 && answer == OK) {
      answer = ERROR;
      message = "status_apply: " + errorName(r) + ": " + resultMessage();
    }
  }
  if (answer == OK) {
    const r = requeueAfter(o.requeueAfterMs);
    if (r < 0) {
      answer = ERROR;
      message = "reconcile_requeue_after " + o.requeueAfterMs.toString() + ": " + errorName(r);
    }
  }
  if (answer == OK) return OK;
  if (message.length > 0) setError(message);
  return answer;
}

let reconciler: ((req: Request) => Outcome) | null = null;

// Registers the reconcile function (controller mode).
export function onReconcile(f: (req: Request) => Outcome): void { reconciler = f; }

// True once onReconcile has run: ih_handle then says what is missing.
export function isController(): bool { return reconciler !== null; }

export function ih_reconcile(len: i32): i32 {
  const h = readHeader(len);
  if (h === null) return fail(ERROR, "header_read: " + errorName(lastError()));
  const f = reconciler;
  if (f === null) return fail(ERROR, "no reconciler: call onReconcile at the top level of the entry file");
  return settle(f(new Request(h)));
}
