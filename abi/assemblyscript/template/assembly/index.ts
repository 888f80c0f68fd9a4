// my-plugin: an informer-host plugin in AssemblyScript (abi/ABI.md), built
// with the kit informer-host-as. It logs every event with the object's
// phase, if it has one. Build: npm run build (build/my-plugin.wasm).
import * as ih from "informer-host-as/assembly";
export { informer_host_abi_v1, ih_handle, ih_synced } from "informer-host-as/assembly";

ih.onHandle((ev: ih.Event): i32 => {
  const phase = ev.get("status.phase");
  ih.info(ev.typeName() + " " + ev.key() + " phase=" + (phase === null ? "-" : phase));
  return ih.OK;
});

ih.onSynced((h: ih.Header): void => {
  ih.info("initial list of " + h.resourceName + " handled");
});
