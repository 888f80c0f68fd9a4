// The kit's own test plugin (make plugins builds build/kits/as-kit-test.wasm;
// host/internal/engine TestKitAssemblyScriptFunctions runs it): every event
// goes through the kit's capability wrappers and logs what they returned,
// one "check <what>: <result>" line each, for the Go test to compare.
import * as ih from "../assembly/index";
export { informer_host_abi_v1, ih_handle, ih_init } from "../assembly/index";

function check(what: string, got: string): void {
  ih.info("check " + what + ": " + got);
}

function keys(k: string[] | null): string {
  return k === null ? ih.errorName(ih.lastError()) : k.join(",");
}

ih.onInit((config: string): string | null => {
  check("config", config);
  const j = ih.configJSON();
  check("configJSON", j === null ? ih.jsonError() : "kind " + j.kind.toString());
  return config == "refuse" ? "refused: " + config : null;
});

ih.onHandle((ev: ih.Event): i32 => {
  check("header", ev.typeName() + " " + ev.key() + " rv=" + ev.header.resourceVersion + " uid=" + ev.header.uid);
  check("flags", "selfWrite=" + (ev.selfWrite ? "yes" : "no") + " initialList=" + (ev.initialList ? "yes" : "no") + " handedOver=" + (ev.handedOver ? "yes" : "no"));
  const doc = ih.parseJSON(" {\"key\":\"t\\u00e9am\\/x\",\"n\":-2.5e1,\"on\":true,\"list\":[null,{}]} ");
  check("parseJSON", doc === null ? ih.jsonError() : doc.getString("key", "-") + " " + doc.getNumber("n", 0).toString() + " " + (doc.getBool("on", false) ? "on" : "off")
    + " " + (doc.get("list") as ih.JSONValue).items.length.toString() + " " + ((doc.get("list") as ih.JSONValue).at(0) as ih.JSONValue).isNull().toString());
  check("parseJSON bad", ih.parseJSON("[1,]") === null ? ih.jsonError() : "parsed");
  const f = ev.field("spec.containers[0]");
  check("field", f === null ? "null" : f.kind.toString() + " " + f.text);
  check("missing", ev.field("status.nope") === null ? ih.errorName(ih.lastError()) : "found");
  check("old", ev.old.get("status.phase") === null ? ih.errorName(ih.lastError()) : "found");
  const big = ev.json();
  check("json", big === null ? "null" : big.length > 1024 ? "long" : "short " + big.substring(0, 20));
  // Cache.
  const o = ih.cacheGet("pods", "ns", "p2");
  check("cacheGet", o === null ? ih.errorName(ih.lastError()) : "phase " + (o.get("status.phase") as string));
  check("cacheGet absent", ih.cacheGet("pods", "ns", "zz") === null ? ih.errorName(ih.lastError()) : "found");
  check("cacheGet denied", ih.cacheGet("secrets", "ns", "p2") === null ? ih.errorName(ih.lastError()) : "found");
  check("cacheGet denied call", ih.callError());
  check("cacheList", keys(ih.cacheList("pods", "", "phase=Running")));
  check("cacheIndex", keys(ih.cacheIndex("pods", "namespace", "ns")));
  check("cacheIndex bad", keys(ih.cacheIndex("pods", "nope", "x")));
  check("cacheIndex bad call", ih.callError());
  // State: versions, conflicts, lists, UTF-8 keys and values.
  const v = ih.stateSet("k/é", "wert ü", ih.ABSENT);
  check("stateSet again", ih.errorName(<i32>ih.stateSet("k/é", "x", ih.ABSENT)));
  const g = ih.stateGet("k/é");
  check("stateGet", g === null ? "null" : g.text() + (g.version == v ? " at its version" : " at another version"));
  ih.stateSet("k/a", "1");
  ih.stateSet("k/b", "2");
  check("stateList", keys(ih.stateList("k/", "k/a", 10)));
  check("stateKeys", keys(ih.stateKeys("k/")));
  check("stateDelete", ih.stateDelete("k/a").toString() + " " + ih.errorName(ih.stateDelete("k/a")));
  check("stateGet absent", ih.stateGet("k/a") === null ? ih.errorName(ih.lastError()) : "found");
  check("stateSet invalid", ih.stateSet("", "x") < 0 ? ih.callError() : "written");
  // Metrics.
  const h = ih.histogram("lat_seconds", "Latency \"quoted\".", [0.5, 1], ["ns"]);
  check("observe", h.observe(0.7, [ev.namespace]).toString());
  check("declaration", h.declaration());
  check("metric invalid", ih.counter("bad-name", "").add(1) < 0 ? ih.callError() : "added");
  check("resultMessage", "[" + ih.resultMessage() + "]");
  // Capabilities II: writes (ops, preconditions, force), Events, HTTP,
  // each failure with its result message.
  const t = new ih.Target("pods", "ns", "p1");
  const c = ih.k8sCreate(new ih.Target("pods", "ns"), "{\"metadata\":{\"name\":\"nü\"}}");
  check("k8sCreate", c === null ? ih.callError() : (c.get("metadata.name") as string) + " rv " + (c.get("metadata.resourceVersion") as string));
  const a = ih.k8sApply(t, "{\"kind\":\"Pod\"}", true, new ih.Preconditions("uid-p1", "42"));
  check("k8sApply", a === null ? ih.callError() : "rv " + (a.get("metadata.resourceVersion") as string));
  check("k8sApply mustExist", ih.k8sApply(t, "{\"kind\":\"Pod\"}", false, new ih.Preconditions(), true) === null ? ih.callError() : "written");
  check("k8sMergePatch", ih.k8sMergePatch(t, "{}", new ih.Preconditions("", "old")) === null ? ih.callError() : "written");
  const j = ih.k8sJSONPatch(new ih.Target("pods", "ns", "p1", "status"), "[]");
  check("k8sJSONPatch", j === null ? ih.callError() : "rv " + (j.get("metadata.resourceVersion") as string));
  check("k8sDelete", ih.k8sDelete(t, new ih.Preconditions("uid-p1")).toString());
  check("k8sDelete denied", ih.k8sDelete(new ih.Target("secrets", "ns", "s")) < 0 ? ih.callError() : "deleted");
  check("k8sWrite op", ih.k8sWrite(9, t, "{}") < 0 ? ih.callError() : "written");
  check("recordEvent", ev.recordEvent(ih.WARNING, "TooLarge", "size é").toString());
  check("recordEvent bad", ev.recordEvent(ih.NORMAL, "Bad", "x") < 0 ? ih.callError() : "recorded");
  if (o !== null) check("recordEvent cached", o.recordEvent(ih.NORMAL, "Seen", "from the cache").toString());
  const r = ih.httpPost("u", "/hook?x=1", "application/json", "{\"é\":1}");
  check("httpPost", r === null ? ih.callError() : r.status.toString() + " " + r.text() + " " + (r.headerValue("X-Reply") as string));
  check("httpGet denied", ih.httpGet("nope", "/") === null ? ih.callError() : "answered");
  check("httpResponseRead", ih.httpResponseRead(ih.HTTP_BODY) === null ? ih.errorName(ih.lastError()) : "found");
  check("lastErrorMessage", ih.lastErrorMessage());
  if (ev.name == "abort") {
    assert(false, "asked to abort");
  }
  return ih.fail(ih.DROP, "dropped é");
});
