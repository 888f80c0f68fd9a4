// The handler runs on the kit's fake host under node, its caches seeded
// with what the cluster's would hold; the fake records each write and
// Event the handler made.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { FakeHost, OK, RETRY } from "informer-host-as/fake/host.mjs";

const wasm = readFileSync(new URL("../labeller-assemblyscript.wasm", import.meta.url));

const owned = (kind, name) => [{ apiVersion: "apps/v1", kind, name, uid: "u-" + name, controller: true }];
const pod = (labels) => ({ apiVersion: "v1", kind: "Pod",
  metadata: { name: "web-7d9-x1", namespace: "shop", ...(labels && { labels }), ownerReferences: owned("ReplicaSet", "web-7d9") } });
const replicaSet = { apiVersion: "apps/v1", kind: "ReplicaSet", metadata: { name: "web-7d9", namespace: "shop", ownerReferences: owned("Deployment", "web") } };
const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web", namespace: "shop" } };

test("labels the pod with its deployment", async (t) => {
  for (const tc of [
    {
      name: "pod of a deployment", cached: { pods: pod(), replicasets: replicaSet, deployments: deployment }, pod: pod(),
      want: { code: OK, message: "" },
      writes: [{ op: "apply", resource: "pods", namespace: "shop", name: "web-7d9-x1", subresource: "", uid: "", resourceVersion: "",
        force: false, mustExist: true,
        body: '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9-x1","namespace":"shop","labels":{"deployment":"web"}}}' }],
      events: [{ type: "Normal", reason: "Labelled", message: "deployment=web (through ReplicaSet web-7d9)", object: "shop/web-7d9-x1", kind: "Pod" }],
    },
    {
      name: "already labelled: its own write coming back", pod: pod({ deployment: "web" }),
      cached: { pods: pod({ deployment: "web" }), replicasets: replicaSet, deployments: deployment },
      want: { code: OK, message: "" }, writes: [], events: [],
    },
    {
      name: "replicaset not cached yet", pod: pod(),
      cached: { pods: pod(), deployments: deployment, replicasets: { metadata: { name: "other", namespace: "shop" } } },
      want: { code: RETRY, message: "ReplicaSet shop/web-7d9 of shop/web-7d9-x1 not in the cache yet" }, writes: [], events: [],
    },
  ]) {
    await t.test(tc.name, async () => {
      const h = await FakeHost.load(wasm);
      for (const [resource, obj] of Object.entries(tc.cached)) h.cache(resource, obj);
      assert.deepEqual(h.add("pods", tc.pod), tc.want);
      assert.deepEqual(h.writes, tc.writes);
      assert.deepEqual(h.events, tc.events);
    });
  }
});
