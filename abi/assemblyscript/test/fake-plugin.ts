// A plugin for the fake host's own tests (test/fake.test.mjs, run by make
// kits-test): each event's name picks what it does through the kit, and a
// failure is its ERROR with the kit's callError(), so the tests see what
// the fake recorded, answered and how the kit reported it.
import * as ih from "../assembly/index";
export { informer_host_abi_v1, ih_handle, ih_handle_batch, ih_init } from "../assembly/index";

let key = "";
const handled = ih.counter("handled_total", "Events handled.", ["name"]);
const refused = ih.counter("refused_total", "Updates the host refuses.");

ih.onInit((config: string): string | null => {
  const c = ih.configJSON();
  if (c === null) return "config: " + ih.jsonError();
  key = c.getString("key", "team");
  return null;
});

ih.onHandle((ev: ih.Event): i32 => {
  handled.add(1, [ev.name]);
  const t = new ih.Target("configmaps", ev.namespace, ev.name);
  if (ev.name == "apply" || ev.name == "stale") {
    const pre = ev.name == "stale" ? new ih.Preconditions("", "0") : new ih.Preconditions();
    const o = ih.k8sApply(t, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"" + key + "\":\"2\"}}", false, pre);
    if (o === null) return ih.fail(ih.ERROR, ih.callError());
    const c = ih.cacheGet("configmaps", ev.namespace, ev.name);
    ih.info("applied rv " + (o.get("metadata.resourceVersion") as string) + ", cached " + (c === null ? ih.callError() : c.get("data." + key) as string));
  } else if (ev.name == "gone") {
    if (ih.k8sApply(t, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}", true, new ih.Preconditions(), true) === null) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "delete") {
    if (ih.k8sDelete(t) < 0) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "event") {
    if (ev.recordEvent(ih.WARNING, "TooLarge", "data is big") < 0) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "http") {
    const r = ih.httpPost("chat", "/crashloop", "application/json", "{\"pod\":\"" + ev.key() + "\"}");
    if (r === null) return ih.fail(ih.RETRY, ih.callError());
    ih.info("posted " + r.status.toString() + " " + r.text() + " " + (r.headerValue("X-Reply") as string));
  } else if (ev.name == "state") {
    const v = ih.stateGet("n");
    const n = v === null ? 0 : I32.parseInt(v.text());
    ih.stateSet("n", (n + 1).toString());
  } else if (ev.name == "cache-get") {
    if (ih.cacheGet("secrets", ev.namespace, "token") === null) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "cache-list") {
    if (ih.cacheList("configmaps", ev.namespace, "app=web") === null) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "cache-owned") {
    if (ih.cacheIndex("configmaps", "owner", "u1") === null) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "cache-miss") {
    if (ih.cacheGet("configmaps", ev.namespace, "gone") === null) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "state-get") {
    if (ih.stateGet("phase/" + ev.name) === null) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "state-set") {
    if (ih.stateSet("k", "v") < 0) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "state-create") {
    if (ih.stateSet("k", "v", ih.ABSENT) < 0) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "state-delete") {
    if (ih.stateDelete("k") < 0) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "state-list") {
    if (ih.stateList("phase/", "", 10) === null) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "metric") {
    if (refused.add(1) < 0) return ih.fail(ih.ERROR, ih.callError());
  } else if (ev.name == "self") {
    ih.info("selfWrite=" + (ev.selfWrite ? "yes" : "no"));
  }
  return ih.OK;
});
