// labeller-assemblyscript: labels each Pod with the Deployment it belongs
// to, found in the host's caches through the Pod's ReplicaSet, and records
// a Kubernetes Event on the Pod saying so. config.yaml grants it cache
// reads of pods, replicasets and deployments, apply on pods and Events.
import * as ih from "informer-host-as/assembly";
export { informer_host_abi_v1, ih_handle } from "informer-host-as/assembly";

// The Pod label that names the Pod's Deployment.
const LABEL = "deployment";

ih.onHandle((ev: ih.Event): i32 => {
  if (ev.type == ih.EVENT_DELETE) return ih.OK;
  const ns = ev.namespace;
  const rsName = owner(ev, "ReplicaSet");
  if (rsName === null) {
    ih.info(ev.key() + ": not owned by a ReplicaSet");
    return ih.OK;
  }
  const rs = ih.cacheGet("replicasets", ns, rsName);
  if (rs === null) {
    // ERR_ABSENT: the ReplicaSet's informer has not seen it yet; it will.
    if (ih.lastError() == ih.ERR_ABSENT) return ih.fail(ih.RETRY, "ReplicaSet " + ns + "/" + rsName + " of " + ev.key() + " not in the cache yet");
    return ih.fail(ih.ERROR, "read ReplicaSet " + ns + "/" + rsName + ": " + ih.errorName(ih.lastError()));
  }
  const depName = owner(rs, "Deployment");
  if (depName === null) {
    ih.info(ev.key() + ": ReplicaSet " + rsName + " has no Deployment");
    return ih.OK;
  }
  if (ih.cacheGet("deployments", ns, depName) === null) {
    if (ih.lastError() == ih.ERR_ABSENT) return ih.fail(ih.RETRY, "Deployment " + ns + "/" + depName + " of " + ev.key() + " not in the cache yet");
    return ih.fail(ih.ERROR, "read Deployment " + ns + "/" + depName + ": " + ih.errorName(ih.lastError()));
  }
  // The update that our own apply causes comes back with the label set:
  // acting only when it differs ends the loop there.
  const current = ev.get("metadata.labels." + LABEL);
  if (current !== null && current == depName) return ih.OK;
  // Kubernetes names are DNS subdomains: nothing in them needs quoting.
  const body = '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"' + ev.name + '","namespace":"' + ns +
    '","labels":{"' + LABEL + '":"' + depName + '"}}}';
  // mustExist: a Pod deleted since the event is not created anew.
  if (ih.k8sApply(new ih.Target("pods", ns, ev.name), body, false, new ih.Preconditions(), true) === null) {
    return ih.fail(ih.ERROR, ih.callError());
  }
  if (ev.recordEvent(ih.NORMAL, "Labelled", LABEL + "=" + depName + " (through ReplicaSet " + rsName + ")") < 0) {
    return ih.fail(ih.ERROR, ih.callError());
  }
  return ih.OK;
});

// The name of the object's first ownerReference when it is of kind.
function owner(o: ih.Readable, kind: string): string | null {
  const k = o.get("metadata.ownerReferences[0].kind");
  if (k === null || k != kind) return null;
  return o.get("metadata.ownerReferences[0].name");
}
