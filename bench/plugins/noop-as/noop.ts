// noop-as: an AssemblyScript (abi/assemblyscript kit) handler that
// returns at once, re-exporting the kit's optional ih_handle_batch, for
// BenchmarkBatch: batch=1 goes through ih_handle, as for a plugin without
// the export. The kit still reads and parses each event's header, as
// noop-go's does.
import * as ih from "../../../abi/assemblyscript/assembly/index";
export { informer_host_abi_v1, ih_handle, ih_handle_batch } from "../../../abi/assemblyscript/assembly/index";

ih.onHandle((ev: ih.Event): i32 => ih.OK);
