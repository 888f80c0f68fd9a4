// pod-logger-as: logs every pod event with the pod's phase and counts the
// events per namespace and type (metric pod_events_total; grant
// `metrics`). Built from the AssemblyScript kit (abi/assemblyscript):
// `npm install && npm run build`, or `make plugins`.
import * as ih from "informer-host-as/assembly";
export { informer_host_abi_v1, ih_handle, ih_synced } from "informer-host-as/assembly";

const events = ih.counter("pod_events_total", "Pod events by namespace and type.", ["namespace", "type"]);
let listed: i32 = 0;

ih.onHandle((ev: ih.Event): i32 => {
  const phase = ev.get("status.phase");
  const p = phase === null ? "Unknown" : phase;
  let line: string;
  if (ev.type == ih.EVENT_ADD) {
    if (ev.header.initialList) listed++;
    line = (ev.header.initialList ? "pod listed: " : "pod added: ") + ev.key() + " phase=" + p;
  } else if (ev.type == ih.EVENT_UPDATE) {
    const was = ev.old.get("status.phase");
    line = "pod updated: " + ev.key() + " phase=" + p;
    if (was !== null && was != p) line += " (was " + was + ")";
  } else {
    line = "pod deleted: " + ev.key() + " phase=" + p;
    if (ev.header.finalStateUnknown) line += " (missed by the watch; last known state)";
  }
  ih.info(line);
  const r = events.add(1, [ev.namespace, ev.typeName()]);
  if (r < 0 && r != ih.ERR_DENIED) return ih.fail(ih.ERROR, "metric_add: " + ih.errorName(r));
  return ih.OK;
});

ih.onSynced((h: ih.Header): void => {
  ih.info("initial list of " + h.resourceName + " handled: " + listed.toString() + " pods");
});
