// The AssemblyScript kit's batch test plugin (make plugins builds
// build/kits/as-batch-test.wasm; host/internal/engine TestKitBatch runs
// it): the kit's optional ih_handle_batch export, re-exported beside
// ih_handle. Each event logs "<name> <phase>"; by the first letter of the
// name, "e" is answered ERROR, "r" RETRY (each with a message naming the
// event) and "p" aborts, which traps. The same plugin as the Rust kit's
// test/batch.rs.
import * as ih from "../assembly/index";
export { informer_host_abi_v1, ih_handle, ih_handle_batch } from "../assembly/index";

ih.onHandle((ev: ih.Event): i32 => {
  const phase = ev.get("status.phase");
  ih.info(ev.name + " " + (phase === null ? "" : phase));
  const c = ev.name.length > 0 ? ev.name.charAt(0) : "";
  if (c == "e") return ih.fail(ih.ERROR, "asked to fail " + ev.name);
  if (c == "r") return ih.fail(ih.RETRY, "not yet " + ev.name);
  if (c == "p") assert(false, "asked to panic in " + ev.name);
  return ih.OK;
});
