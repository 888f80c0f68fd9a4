// The AssemblyScript kit's controller-mode test plugin, run under node by
// test/reconcile.test.mjs against fake/host.mjs's controller loop. A
// widget wants spec.replicas ConfigMaps <name>-<i>, reports them in its
// status, and asks to be looked at again after spec.every ms; a
// deleting or absent widget wants none; spec.fail answers RETRY;
// spec.own applies the children itself and reports a failed one in a
// condition.
import * as ih from "../assembly/index";
export { informer_host_abi_v1, ih_handle, ih_reconcile } from "../assembly/index";

function configMaps(req: ih.Request, n: i32): ih.Children {
  const children = new ih.Children();
  for (let i = 0; i < n; i++) {
    const c = ih.child("v1", "ConfigMap", req.name + "-" + i.toString());
    c.get("metadata")!.set("labels", ih.jsonObject().set("app", ih.jsonStringValue("wid\"get")));
    children.add(c.set("data", ih.jsonObject().set("index", ih.jsonInt(i))));
  }
  return children;
}

ih.onReconcile((req: ih.Request): ih.Outcome => {
  if (!req.exists || req.deleting) {
    if (req.get("metadata.name") === null && ih.lastError() != ih.ERR_ABSENT && !req.exists) return ih.Outcome.error("absent read was not ERR_ABSENT");
    const o = ih.Outcome.ok().withChildren(new ih.Children());
    // A status for a gone primary: the host answers ERR_ABSENT, the kit skips it.
    if (!req.exists) o.withStatus(new ih.Status().set("gone", ih.jsonBool(true)));
    return o;
  }
  if (req.get("spec.fail") == "true") {
    // A failure reported as a condition: the children left alone.
    const waiting = new ih.Status().setCondition(new ih.Condition("Ready", "False", "Waiting", "spec.fail is set"));
    return ih.Outcome.retry("spec.fail is set").withChildren(configMaps(req, 1)).withStatus(waiting).requeueAfter(5000);
  }
  const replicasText = req.get("spec.replicas");
  const n = replicasText === null ? 0 : I32.parseInt(replicasText);
  const children = configMaps(req, n);
  const status = new ih.Status().set("replicas", ih.jsonInt(n));
  if (req.get("spec.own") == "true") {
    const failed = ih.applyChildren(children);
    if (failed > 0) status.setCondition(new ih.Condition("Ready", "False", "ChildFailed", ih.resultMessage()));
    else status.setCondition(new ih.Condition("Ready", "True", "Applied"));
    return ih.Outcome.ok().withStatus(status);
  }
  status.setCondition(new ih.Condition("Ready", "Unknown"));
  status.setCondition(new ih.Condition("Ready", n > 0 ? "True" : "False", "Applied", n.toString() + " config maps"));
  const every = req.get("spec.every");
  const o = ih.Outcome.ok().withChildren(children).withStatus(status);
  if (every !== null) o.requeueAfter(I64.parseInt(every));
  ih.info(req.header.typeName() + " " + req.key() + " initial=" + (req.initial ? "true" : "false"));
  return o;
});
