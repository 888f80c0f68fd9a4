//! labeller-rust: labels each Pod with the Deployment it belongs to, found
//! in the host's caches through the Pod's ReplicaSet, and records a
//! Kubernetes Event on the Pod saying so. config.yaml grants it cache
//! reads of pods, replicasets and deployments, apply on pods and Events.
//! Build: ./build.sh; test: ./build.sh test (both run by make test).

use informer_host::writes::{self, ApplyOptions, Preconditions, Target};
use informer_host::{cache, events, info, plugin, Event, EventType, Fail, Result};

/// The Pod label that names the Pod's Deployment.
const LABEL: &str = "deployment";

fn handle(ev: &Event) -> Result {
    if let EventType::Delete = ev.event_type() {
        return Ok(());
    }
    let ns = ev.namespace();
    let rs_name = match owner(|p| ev.get(p), "ReplicaSet") {
        Some(n) => n,
        None => {
            info!("{}: not owned by a ReplicaSet", ev.key());
            return Ok(());
        }
    };
    // None: the ReplicaSet's informer has not seen it yet; it will.
    let rs = cache::get("replicasets", ns, &rs_name)?
        .ok_or_else(|| Fail::retry(format!("ReplicaSet {}/{} of {} not in the cache yet", ns, rs_name, ev.key())))?;
    let dep_name = match owner(|p| rs.get(p), "Deployment") {
        Some(n) => n,
        None => {
            info!("{}: ReplicaSet {} has no Deployment", ev.key(), rs_name);
            return Ok(());
        }
    };
    if cache::get("deployments", ns, &dep_name)?.is_none() {
        return Err(Fail::retry(format!("Deployment {}/{} of {} not in the cache yet", ns, dep_name, ev.key())));
    }
    // The update that our own apply causes comes back with the label set:
    // acting only when it differs ends the loop there.
    if ev.get(&format!("metadata.labels.{}", LABEL)).as_deref() == Some(dep_name.as_str()) {
        return Ok(());
    }
    // Kubernetes names are DNS subdomains: nothing in them needs quoting.
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}","labels":{{"{}":"{}"}}}}}}"#,
        ev.name(), ns, LABEL, dep_name
    );
    let target = Target { resource: "pods", namespace: ns, name: ev.name(), subresource: "" };
    // must_exist: a Pod deleted since the event is not created anew.
    writes::apply_with(&target, body.as_bytes(), &ApplyOptions { force: false, must_exist: true }, &Preconditions::default())?;
    ev.record_event(events::NORMAL, "Labelled", &format!("{}={} (through ReplicaSet {})", LABEL, dep_name, rs_name))?;
    Ok(())
}

/// The name of the object's first ownerReference when it is of `kind`,
/// read with `get` (an Event's or a cached object's).
fn owner(get: impl Fn(&str) -> Option<String>, kind: &str) -> Option<String> {
    if get("metadata.ownerReferences[0].kind").as_deref() != Some(kind) {
        return None;
    }
    get("metadata.ownerReferences[0].name")
}

plugin!(handle: handle);

#[cfg(test)]
mod tests {
    use informer_host::fake::{self, RecordedEvent, WriteRequest};

    const STRING: u32 = 1;

    /// The fake's caches seeded as the cluster's would be, and the add of
    /// Pod shop/web-7d9-x1 of ReplicaSet web-7d9, with its label when given.
    fn pod_of_deployment(replica_set_cached: bool, label: Option<&str>) {
        fake::reset();
        let pod = [
            ("metadata.name", STRING, "web-7d9-x1"),
            ("metadata.namespace", STRING, "shop"),
            ("metadata.ownerReferences[0].kind", STRING, "ReplicaSet"),
            ("metadata.ownerReferences[0].name", STRING, "web-7d9"),
        ];
        fake::event(1, 0, "pods", "shop", "web-7d9-x1");
        for (path, kind, value) in pod {
            fake::field(0, path, kind, value);
        }
        if let Some(l) = label {
            fake::field(0, "metadata.labels.deployment", STRING, l);
        }
        fake::cached("pods", "shop/web-7d9-x1", &pod);
        if replica_set_cached {
            fake::cached("replicasets", "shop/web-7d9", &[
                ("metadata.name", STRING, "web-7d9"),
                ("metadata.ownerReferences[0].kind", STRING, "Deployment"),
                ("metadata.ownerReferences[0].name", STRING, "web"),
            ]);
        }
        fake::cached("deployments", "shop/web", &[("metadata.name", STRING, "web")]);
    }

    #[test]
    fn labels_the_pod_with_its_deployment() {
        pod_of_deployment(true, None);
        assert_eq!(fake::handle(super::handle), (0, String::new()));
        assert_eq!(fake::writes(), vec![WriteRequest {
            op: "apply",
            resource: "pods".to_string(),
            namespace: "shop".to_string(),
            name: "web-7d9-x1".to_string(),
            body: r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9-x1","namespace":"shop","labels":{"deployment":"web"}}}"#.to_string(),
            must_exist: true,
            ..Default::default()
        }]);
        assert_eq!(fake::events(), vec![RecordedEvent {
            which: 0,
            event_type: "Normal",
            reason: "Labelled".to_string(),
            message: "deployment=web (through ReplicaSet web-7d9)".to_string(),
        }]);
    }

    #[test]
    fn leaves_a_labelled_pod_alone() {
        pod_of_deployment(true, Some("web"));
        assert_eq!(fake::handle(super::handle), (0, String::new()));
        assert_eq!(fake::writes(), vec![]);
        assert_eq!(fake::events(), vec![]);
    }

    #[test]
    fn retries_until_the_replica_set_is_cached() {
        pod_of_deployment(false, None);
        let (code, message) = fake::handle(super::handle);
        assert_eq!((code, message.as_str()), (1, "ReplicaSet shop/web-7d9 of shop/web-7d9-x1 not in the cache yet"));
        assert_eq!(fake::writes(), vec![]);
    }
}
