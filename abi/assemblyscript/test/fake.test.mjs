// The fake host (fake/host.mjs) against a real plugin built with the kit
// (test/fake-plugin.ts, built by make kits-test into $FAKE_PLUGIN): what
// it records, what it answers, and how the kit reports a failed call.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { FakeHost, OK, RETRY, ERROR, ERR_RATE_LIMITED, ERR_TIMEOUT, ERR_DENIED } from "../fake/host.mjs";

const wasm = readFileSync(process.env.FAKE_PLUGIN || new URL("../../../build/kits/as-fake-plugin.wasm", import.meta.url));
const cm = (name, extra = {}) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: "demo", uid: "u1", resourceVersion: "5" }, data: { a: "1" }, ...extra });

async function host(config = '{"key":"team"}') {
  const h = await FakeHost.load(wasm);
  h.config = config;
  assert.equal(h.init(), null);
  return h;
}

test("configuration as JSON", async () => {
  const h = await FakeHost.load(wasm);
  h.config = "{key: team}";
  assert.equal(h.init(), "config: expected a member name at character 1");
});

test("writes", async (t) => {
  for (const tc of [
    { name: "apply", seed: true, want: { code: OK, message: "" }, log: "INFO applied rv 1, cached 2", data: { a: "1", team: "2" } },
    { name: "apply", seed: false, want: { code: OK, message: "" }, log: "INFO applied rv 1, cached 2", data: { team: "2" } },
    { name: "stale", seed: true, want: { code: ERROR, message: "k8s_write apply configmaps demo/stale: ERR_CONFLICT: the object has been modified (resourceVersion 5, precondition 0)" } },
    { name: "gone", seed: false, want: { code: ERROR, message: 'k8s_write apply --force --must-exist configmaps demo/gone: ERR_ABSENT: configmaps "gone" not found' } },
    { name: "delete", seed: true, want: { code: OK, message: "" }, data: undefined },
    { name: "delete", seed: false, want: { code: ERROR, message: 'k8s_write delete configmaps demo/delete: ERR_ABSENT: configmaps "delete" not found' } },
  ]) {
    await t.test(`${tc.name} ${tc.seed ? "existing" : "missing"}`, async () => {
      const h = await host();
      if (tc.seed) h.cache("configmaps", cm(tc.name));
      assert.deepEqual(h.add("configmaps", cm(tc.name)), tc.want);
      if (tc.log) assert.deepEqual(h.logs, [tc.log]);
      if ("data" in tc) assert.deepEqual(h.cacheObject("configmaps", "demo", tc.name)?.data, tc.data);
      assert.equal(h.writes.length, 1);
      assert.equal(h.writes[0].op, tc.name === "delete" ? "delete" : "apply");
      assert.equal(h.writes[0].mustExist, tc.name === "gone");
      assert.equal(h.writes[0].force, tc.name === "gone");
      assert.equal(h.writes[0].resourceVersion, tc.name === "stale" ? "0" : "");
    });
  }
  await t.test("onWrite", async () => {
    const h = await host();
    h.onWrite((r) => ({ code: ERR_RATE_LIMITED, body: `would wait 12s for ${r.name}` }));
    assert.deepEqual(h.add("configmaps", cm("apply")), { code: ERROR, message: "k8s_write apply configmaps demo/apply: ERR_RATE_LIMITED: would wait 12s for apply" });
    assert.equal(h.writes[0].body, '{"apiVersion":"v1","kind":"ConfigMap","data":{"team":"2"}}');
  });
});

test("events", async (t) => {
  await t.test("recorded", async () => {
    const h = await host();
    assert.deepEqual(h.add("configmaps", cm("event")), { code: OK, message: "" });
    assert.deepEqual(h.events, [{ type: "Warning", reason: "TooLarge", message: "data is big", object: "demo/event", kind: "ConfigMap" }]);
  });
  await t.test("denied", async () => {
    const h = await host();
    h.onEvent(() => ({ code: ERR_DENIED, message: "events not granted" }));
    assert.deepEqual(h.add("configmaps", cm("event")), { code: ERROR, message: "event_record Warning TooLarge about demo/event: ERR_DENIED: events not granted" });
    assert.deepEqual(h.events, []);
  });
});

test("http", async (t) => {
  for (const tc of [
    { name: "answered", answer: { status: 201, header: { "x-reply": ["yes"] }, body: "créé" }, want: { code: OK, message: "" }, log: ["INFO posted 201 créé yes"] },
    { name: "timeout", answer: { code: ERR_TIMEOUT, message: 'upstream "chat" did not answer within its timeout (10s)' },
      want: { code: RETRY, message: 'http_request chat POST /crashloop: ERR_TIMEOUT: upstream "chat" did not answer within its timeout (10s)' }, log: [] },
    { name: "not granted", want: { code: RETRY, message: 'http_request chat POST /crashloop: ERR_DENIED: upstream "chat" is not granted (fake: program it with onHTTP)' }, log: [] },
  ]) {
    await t.test(tc.name, async () => {
      const h = await host();
      if (tc.answer) h.onHTTP("chat", () => tc.answer);
      assert.deepEqual(h.add("pods", cm("http")), tc.want);
      assert.deepEqual(h.logs, tc.log);
      assert.deepEqual(h.httpRequests, tc.answer ? [{ upstream: "chat", method: "POST", path: "/crashloop", header: { "Content-Type": ["application/json"] }, body: '{"pod":"demo/http"}' }] : []);
    });
  }
});

test("state, metrics and the self-write flag", async () => {
  const h = await host();
  h.setState("n", "41");
  assert.deepEqual(h.add("configmaps", cm("state")), { code: OK, message: "" });
  assert.equal(h.state("n"), "42");
  assert.equal(h.metric("handled_total", "state"), 1);
  h.selfWrite("configmaps", null, cm("self"));
  h.add("configmaps", cm("self"));
  assert.deepEqual(h.logs, ["INFO selfWrite=yes", "INFO selfWrite=no"]);
});

// A failed cache, state or metrics call names the call and what it was
// called on; a miss and a conflict only the function (the kit builds no
// string for what a plugin expects on every event).
test("cache, state and metrics failures name the call", async (t) => {
  for (const tc of [
    { name: "cache-get", message: "cache_get secrets demo/token: ERR_DENIED" },
    { name: "cache-list", deny: "cache", message: "cache_list configmaps in demo -l app=web: ERR_DENIED" },
    { name: "cache-owned", deny: "cache", message: "cache_index configmaps owner=u1: ERR_DENIED" },
    { name: "cache-miss", message: "cache_get: ERR_ABSENT" },
    { name: "state-get", deny: "state", message: 'state_get "phase/state-get": ERR_DENIED' },
    { name: "state-get", message: "state_get: ERR_ABSENT" },
    { name: "state-set", deny: "state", message: 'state_set "k": ERR_DENIED' },
    { name: "state-create", state: true, message: "state_set: ERR_CONFLICT" },
    { name: "state-delete", deny: "state", message: 'state_delete "k": ERR_DENIED' },
    { name: "state-list", deny: "state", message: 'state_list prefix "phase/" after "": ERR_DENIED' },
    { name: "metric", deny: "metrics", message: "metric_declare refused_total: ERR_DENIED" },
  ]) {
    await t.test(`${tc.name}${tc.deny ? " without " + tc.deny : ""}`, async () => {
      const h = await host();
      h.cache("configmaps", cm("seed"));
      if (tc.state) h.setState("k", "v");
      if (tc.deny) h.deny(tc.deny);
      assert.deepEqual(h.add("configmaps", cm(tc.name)), { code: ERROR, message: tc.message });
    });
  }
});

test("batch", async () => {
  const h = await host();
  // http is answered RETRY (no upstream granted): that event alone; the
  // others are settled OK, in order, the state counted across them.
  const r = h.batch("configmaps", [cm("state"), cm("http"), cm("self"), cm("state")]);
  assert.deepEqual(r, { settled: 4, results: [{ code: OK, message: "" },
    { code: RETRY, message: 'http_request chat POST /crashloop: ERR_DENIED: upstream "chat" is not granted (fake: program it with onHTTP)' },
    { code: OK, message: "" }, { code: OK, message: "" }] });
  assert.equal(h.state("n"), "2");
  assert.deepEqual(h.logs, ["INFO selfWrite=no"]);
});
