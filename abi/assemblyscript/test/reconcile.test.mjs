// The fake host's controller loop (fake/host.mjs: controller, reconcile)
// against the kit's controller-mode test plugin (test/reconcile-plugin.ts,
// built by make kits-test into $RECONCILE_PLUGIN): children applied and
// pruned, status conditions, requeue-after on the fake clock, deleting ->
// OK -> finalizer gone, per-child failures surfaced.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { FakeHost, OK, RETRY, ERROR, PLUGIN_LABEL, OWNER_ANNOTATION } from "../fake/host.mjs";

const wasm = readFileSync(process.env.RECONCILE_PLUGIN || new URL("../../../build/kits/as-reconcile-plugin.wasm", import.meta.url));
const widget = (name, spec, extra = {}) => ({ apiVersion: "example.com/v1", kind: "Widget", metadata: { namespace: "shop", name, uid: "uid-" + name, generation: 3, ...extra }, spec });

async function loop(finalizer = "example.com/cleanup") {
  const h = await FakeHost.load(wasm);
  h.controller({ resource: "widgets", owns: { ConfigMap: "configmaps" }, finalizer });
  return h;
}
const edit = (h, name, f) => {
  const o = h.cacheObject("widgets", "shop", name);
  f(o);
  h.cache("widgets", o);
};

test("children applied, status written, then pruned on scale down", async () => {
  const h = await loop();
  h.cache("widgets", widget("w", { replicas: 3 }));
  assert.deepEqual(h.reconcile("shop", "w"), { code: OK, message: "" });
  assert.deepEqual(h.children("shop", "w"), ["configmaps shop/w-0", "configmaps shop/w-1", "configmaps shop/w-2"]);
  const cm = h.cacheObject("configmaps", "shop", "w-1");
  assert.deepEqual(cm.data, { index: 1 });
  assert.equal(cm.metadata.labels.app, 'wid"get');
  assert.equal(cm.metadata.labels[PLUGIN_LABEL], "fake");
  assert.equal(cm.metadata.annotations[OWNER_ANNOTATION], "widgets/shop/w/uid-w");
  assert.deepEqual(cm.metadata.ownerReferences, [{ apiVersion: "example.com/v1", kind: "Widget", name: "w", uid: "uid-w", controller: true, blockOwnerDeletion: true }]);
  let w = h.cacheObject("widgets", "shop", "w");
  assert.deepEqual(w.metadata.finalizers, ["example.com/cleanup"]);
  assert.deepEqual(w.status, { replicas: 3, conditions: [{ type: "Ready", status: "True", reason: "Applied", message: "3 config maps", lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 3 }] });
  assert.deepEqual(h.logs, ["INFO reconcile shop/w initial=false"]);

  edit(h, "w", (o) => { o.spec.replicas = 1; o.metadata.generation = 4; });
  h.advance(5000);
  assert.deepEqual(h.reconcile("shop", "w"), { code: OK, message: "" });
  assert.deepEqual(h.pruned, ["configmaps shop/w-1", "configmaps shop/w-2"]);
  assert.equal(h.cacheObject("configmaps", "shop", "w-2"), undefined);
  w = h.cacheObject("widgets", "shop", "w");
  assert.equal(w.status.conditions[0].lastTransitionTime, "2026-01-01T00:00:00Z", "kept while the status is");
  assert.equal(w.status.conditions[0].observedGeneration, 4);

  edit(h, "w", (o) => { o.spec.replicas = 0; });
  h.advance(5000);
  assert.deepEqual(h.reconcile("shop", "w"), { code: OK, message: "" });
  assert.deepEqual(h.children("shop", "w"), []);
  assert.equal(h.cacheObject("widgets", "shop", "w").status.conditions[0].lastTransitionTime, "2026-01-01T00:00:10Z");
});

test("requeue-after fires on the fake clock", async () => {
  const h = await loop("");
  h.cache("widgets", widget("w", { replicas: 1, every: "30000" }));
  assert.equal(h.reconcile("shop", "w").code, OK);
  assert.equal(h.requeueAfter("shop", "w"), 30000);
  assert.deepEqual(h.advance(29999), []);
  assert.deepEqual(h.advance(1), [{ key: "shop/w", code: OK, message: "" }]);
  assert.equal(h.requeueAfter("shop", "w"), 30000);
  edit(h, "w", (o) => { delete o.spec.every; });
  assert.equal(h.reconcile("shop", "w").code, OK);
  assert.equal(h.requeueAfter("shop", "w"), undefined);
});

test("deleting cleans up, then the finalizer goes", async () => {
  const h = await loop();
  h.cache("widgets", widget("w", { replicas: 2 }));
  assert.equal(h.reconcile("shop", "w").code, OK);
  h.deletePrimary("shop", "w");
  assert.equal(h.cacheObject("widgets", "shop", "w").metadata.deletionTimestamp, "2026-01-01T00:00:00Z");
  assert.deepEqual(h.reconcile("shop", "w"), { code: OK, message: "" });
  assert.deepEqual(h.pruned, ["configmaps shop/w-0", "configmaps shop/w-1"]);
  assert.equal(h.cacheObject("widgets", "shop", "w"), undefined, "finalizer removed after OK: gone");
});

test("an absent key prunes every child", async () => {
  const h = await loop("");
  h.cache("widgets", widget("w", { replicas: 2 }));
  assert.equal(h.reconcileAll()[0].code, OK);
  assert.deepEqual(h.logs, ["INFO reconcile shop/w initial=true"]);
  h.deletePrimary("shop", "w");
  assert.deepEqual(h.reconcile("shop", "w"), { code: OK, message: "" });
  assert.deepEqual(h.pruned, ["configmaps shop/w-0", "configmaps shop/w-1"]);
});

test("a failed child fails the reconcile and names it", async () => {
  const h = await loop("");
  h.cache("widgets", widget("w", { replicas: 3 }));
  h.failChild("ConfigMap", "shop/w-1", "ERR_FORBIDDEN: configmaps is forbidden");
  assert.deepEqual(h.reconcile("shop", "w"), { code: ERROR, message: "children_apply: 1 of 3 children failed: ConfigMap shop/w-1: ERR_FORBIDDEN: configmaps is forbidden" });
  assert.deepEqual(h.applied, ["configmaps shop/w-0", "configmaps shop/w-2"]);
  assert.equal(h.statuses.length, 1, "the status is written even so");
  h.failChild("ConfigMap", "shop/w-1", "");
  assert.deepEqual(h.reconcile("shop", "w"), { code: OK, message: "" });
  assert.equal(h.children("shop", "w").length, 3);
});

test("applyChildren gives the failures to the plugin", async () => {
  const h = await loop("");
  h.cache("widgets", widget("w", { replicas: 2, own: "true" }));
  h.failChild("ConfigMap", "shop/w-1", "ERR_UNPROCESSABLE: spec: Invalid value");
  assert.deepEqual(h.reconcile("shop", "w"), { code: OK, message: "" });
  assert.equal(h.cacheObject("widgets", "shop", "w").status.conditions[0].message, "ConfigMap shop/w-1: ERR_UNPROCESSABLE: spec: Invalid value");
});

test("refusals, RETRY, and the imports outside a reconcile", async () => {
  let h = await FakeHost.load(wasm);
  h.controller({ resource: "widgets", owns: {} });
  h.cache("widgets", widget("w", { replicas: 1 }));
  assert.deepEqual(h.reconcile("shop", "w"), { code: ERROR, message: "children_apply 1 children: ERR_DENIED: children_apply: ConfigMap is not of a resource in controller.owns" });
  h = await loop("");
  h.cache("widgets", widget("w", { replicas: 1, fail: "true" }));
  assert.deepEqual(h.reconcile("shop", "w"), { code: RETRY, message: "spec.fail is set" });
  assert.deepEqual(h.children("shop", "w"), [], "a failed reconcile's children are not applied");
  assert.equal(h.cacheObject("widgets", "shop", "w").status.conditions[0].reason, "Waiting", "its status is written");
  assert.equal(h.requeueAfter("shop", "w"), undefined);
  h.cache("widgets", widget("w", { replicas: 1, every: "999999999999" }));
  assert.deepEqual(h.reconcile("shop", "w"), { code: ERROR, message: "reconcile_requeue_after 999999999999: ERR_INVALID" });
  // ih_handle of a controller names the fix.
  const r = h.add("widgets", widget("w", {}));
  assert.equal(r.code, ERROR);
  assert.match(r.message, /controller: block/);
  // The primary gone: its status is skipped, the answer OK.
  h.cache("widgets", widget("w", { replicas: 0 }));
  h.reconcile("shop", "w");
  assert.deepEqual(h.children("shop", "w"), []);
});

test("a status for a gone primary is skipped", async () => {
  const h = await loop("");
  h.cache("widgets", widget("w", { replicas: 1 }));
  h._cache.get("widgets").delete("shop/w");
  // Absent: the plugin answers an empty set and a status, which the host refuses (ERR_ABSENT) and the kit skips.
  assert.deepEqual(h.reconcile("shop", "w"), { code: OK, message: "" });
  assert.deepEqual(h.statuses, []);
});
