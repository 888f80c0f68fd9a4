//! service-per-pod-rs: Metacontroller's service-per-pod DecoratorController
//! as a controller-mode plugin (abi/ABI.md section 18), in Rust. A
//! StatefulSet annotated `service-per-pod-label: <label key>` and
//! `service-per-pod-ports: <port>:<targetPort>[,...]` gets one Service per
//! Pod (`<set>-<ordinal>`, selecting `<label key>=<pod name>`), and its Pods
//! get that label; when an annotation goes, or the StatefulSet is deleted,
//! its Services go. See README.md for the configuration.

use informer_host::json::{object, Value};
use informer_host::reconcile::{Children, Outcome, Request};
use informer_host::{cache, plugin, warn, writes, Fail, Result};

pub const LABEL_ANNOTATION: &str = "service-per-pod-label";
pub const PORTS_ANNOTATION: &str = "service-per-pod-ports";

/// `80:8080,443:8443` as (port, targetPort) pairs.
pub fn parse_ports(s: &str) -> std::result::Result<Vec<(i64, i64)>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let (p, t) = part.split_once(':').ok_or_else(|| format!("{:?} is not <port>:<targetPort>", part))?;
        let num = |x: &str| x.trim().parse::<i64>().ok().filter(|n| (1..=65535).contains(n)).ok_or_else(|| format!("{:?} in {:?} is not a port (1-65535)", x, part));
        out.push((num(p)?, num(t)?));
    }
    Ok(out)
}

/// The Service of the pod `<set>-<ordinal>`.
fn service(set: &str, ordinal: i64, label: &str, ports: &[(i64, i64)]) -> Value {
    let pod = format!("{}-{}", set, ordinal);
    let ports = ports
        .iter()
        .map(|(p, t)| object([("name", format!("port-{}", p).into()), ("port", (*p).into()), ("targetPort", (*t).into())]))
        .collect::<Vec<_>>();
    object([
        ("apiVersion", "v1".into()),
        ("kind", "Service".into()),
        ("metadata", object([("name", pod.as_str().into()), ("labels", object([("app", "service-per-pod".into())]))])),
        ("spec", object([("selector", object([(label, pod.as_str().into())])), ("ports", ports.into())])),
    ])
}

/// Labels each pod the StatefulSet owns with `label=<its name>` (the
/// original's pod-name-label decorator), by a must-exist apply: a pod
/// deleted meanwhile is not recreated.
fn label_pods(req: &Request, label: &str) -> Result {
    let uid = req.header().uid();
    for key in cache::owned("pods", uid)? {
        let name = key.rsplit('/').next().unwrap_or(&key);
        let pod = match cache::get("pods", req.namespace(), name)? {
            Some(p) => p,
            None => continue,
        };
        if pod.get(&format!("metadata.labels[{:?}]", label)).as_deref() == Some(name) {
            continue;
        }
        let body = object([
            ("apiVersion", "v1".into()),
            ("kind", "Pod".into()),
            ("metadata", object([("name", name.into()), ("namespace", req.namespace().into()), ("labels", object([(label, name.into())]))])),
        ]);
        let t = writes::Target { resource: "pods", namespace: req.namespace(), name, subresource: "" };
        let o = writes::ApplyOptions { force: true, must_exist: true };
        match writes::apply_with(&t, body.to_string().as_bytes(), &o, &writes::Preconditions::default()) {
            Err(e) if e.code == informer_host::Error::ABSENT => {}
            r => {
                r?;
            }
        }
    }
    Ok(())
}

pub fn reconcile(req: &Request) -> Result<Outcome> {
    // Gone, being deleted, or opted out: no Services (the original's
    // finalize hook). The host prunes them before it removes the
    // finalizer, and answers a failed prune with a retry.
    let none = Ok(Outcome::new().children(Children::new()));
    if !req.exists() || req.deleting() {
        return none;
    }
    let (label, ports) = match (req.get(&format!("metadata.annotations[{:?}]", LABEL_ANNOTATION)), req.get(&format!("metadata.annotations[{:?}]", PORTS_ANNOTATION))) {
        (Some(l), Some(p)) if !l.is_empty() => (l, p),
        _ => return none,
    };
    let ports = match parse_ports(&ports) {
        Ok(p) => p,
        // No retry mends an annotation: drop the key until it changes,
        // and leave the Services as they are.
        Err(e) => {
            warn!("statefulset {}: annotation {}: {}", req.key(), PORTS_ANNOTATION, e);
            return Err(Fail::drop(format!("annotation {}: {}", PORTS_ANNOTATION, e)));
        }
    };
    // spec.replicas defaults to 1, as the apiserver defaults it.
    let replicas = req.get("spec.replicas").and_then(|r| r.parse::<i64>().ok()).unwrap_or(1);
    let mut children = Children::new();
    for i in 0..replicas {
        children.add(service(req.name(), i, &label, &ports));
    }
    label_pods(req, &label)?;
    Ok(Outcome::new().children(children))
}

plugin!(reconcile: reconcile);

#[cfg(test)]
mod tests {
    // The original's test.sh, offline: one Service per Pod with the pod
    // label, scale down, opt out and back in, delete with another
    // finalizer present.
    use super::*;
    use informer_host::fake::{self, Controller};
    use informer_host::json;

    const FINALIZER: &str = "service-per-pod.informer-host.io/cleanup";

    fn statefulset(replicas: i64, annotations: &str, finalizers: &str) -> String {
        format!(
            r#"{{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{{"namespace":"web","name":"nginx","uid":"sts-uid","annotations":{{{}}},"finalizers":[{}]}},"spec":{{"replicas":{}}}}}"#,
            annotations, finalizers, replicas
        )
    }
    const OPTED_IN: &str = r#""service-per-pod-label":"pod-name","service-per-pod-ports":"80:8080""#;

    /// The pods the StatefulSet controller made.
    fn pods(n: i64) {
        for i in 0..n {
            fake::cached_json("pods", &format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"namespace":"web","name":"nginx-{}","uid":"pod-{}","ownerReferences":[{{"apiVersion":"apps/v1","kind":"StatefulSet","name":"nginx","uid":"sts-uid","controller":true}}]}}}}"#,
                i, i
            ));
        }
    }

    fn get(resource: &str, name: &str) -> Option<json::Value> {
        cache::get(resource, "web", name).unwrap().map(|o| json::parse(&o.json().unwrap()).unwrap())
    }

    fn controller() -> Controller {
        Controller::new("statefulsets", reconcile).owns("services", "Service").owns("pods", "Pod").finalizer(FINALIZER)
    }

    fn services(c: &Controller) -> Vec<String> {
        c.children("web", "nginx")
    }

    #[test]
    fn one_service_per_pod_then_scale_down_then_opt_out() {
        fake::reset();
        fake::cached_json("statefulsets", &statefulset(3, OPTED_IN, ""));
        pods(3);
        let mut c = controller();
        assert_eq!(c.reconcile("web", "nginx"), (0, String::new()));
        assert_eq!(services(&c), vec!["services web/nginx-0", "services web/nginx-1", "services web/nginx-2"]);
        let svc = get("services", "nginx-2").unwrap();
        assert_eq!(svc.get("spec").unwrap().get("selector").unwrap().to_string(), r#"{"pod-name":"nginx-2"}"#);
        assert_eq!(svc.get("spec").unwrap().get("ports").unwrap().to_string(), r#"[{"name":"port-80","port":80,"targetPort":8080}]"#);
        let pod = get("pods", "nginx-2").unwrap();
        assert_eq!(pod.get("metadata").unwrap().get("labels").unwrap().to_string(), r#"{"pod-name":"nginx-2"}"#);
        let sts = get("statefulsets", "nginx").unwrap();
        assert_eq!(sts.get("metadata").unwrap().get("finalizers").unwrap().to_string(), format!("[{:?}]", FINALIZER));

        // Labelled pods are not written again.
        assert_eq!(c.reconcile("web", "nginx"), (0, String::new()));
        assert!(fake::writes().is_empty(), "{:?}", fake::writes());

        // Scale down: the Services of the pods that go are pruned.
        fake::cached_json("statefulsets", &statefulset(1, OPTED_IN, &format!("{:?}", FINALIZER)));
        assert_eq!(c.reconcile("web", "nginx"), (0, String::new()));
        assert_eq!(c.pruned(), vec!["services web/nginx-1", "services web/nginx-2"]);
        assert!(get("services", "nginx-2").is_none());

        // The label annotation removed: opted out, every Service goes.
        fake::cached_json("statefulsets", &statefulset(1, r#""service-per-pod-ports":"80:8080""#, &format!("{:?}", FINALIZER)));
        assert_eq!(c.reconcile("web", "nginx"), (0, String::new()));
        assert!(services(&c).is_empty());
        assert!(get("services", "nginx-0").is_none());

        // Back in: the Services come back.
        fake::cached_json("statefulsets", &statefulset(3, OPTED_IN, &format!("{:?}", FINALIZER)));
        assert_eq!(c.reconcile("web", "nginx"), (0, String::new()));
        assert_eq!(get("services", "nginx-2").unwrap().get("spec").unwrap().get("selector").unwrap().to_string(), r#"{"pod-name":"nginx-2"}"#);
    }

    #[test]
    fn delete_cleans_up_before_the_finalizer_goes() {
        fake::reset();
        // Another controller's finalizer keeps the object after ours goes,
        // as the original's test appends one to check the ordering.
        fake::cached_json("statefulsets", &statefulset(2, OPTED_IN, r#""example.com/test""#));
        pods(2);
        let mut c = controller();
        assert_eq!(c.reconcile("web", "nginx"), (0, String::new()));
        assert_eq!(services(&c).len(), 2);
        c.delete("web", "nginx");
        assert_eq!(c.reconcile("web", "nginx"), (0, String::new()));
        assert!(get("services", "nginx-0").is_none() && get("services", "nginx-1").is_none());
        let sts = get("statefulsets", "nginx").expect("held by the other finalizer");
        assert_eq!(sts.get("metadata").unwrap().get("finalizers").unwrap().to_string(), r#"["example.com/test"]"#);
    }

    #[test]
    fn a_failed_prune_keeps_the_finalizer() {
        fake::reset();
        fake::cached_json("statefulsets", &statefulset(1, OPTED_IN, ""));
        pods(1);
        let mut c = controller();
        assert_eq!(c.reconcile("web", "nginx").0, 0);
        c.fail_child("Service", "web/nginx-0", "ERR_UNAVAILABLE: apiserver down");
        fake::cached_json("statefulsets", &statefulset(2, OPTED_IN, &format!("{:?}", FINALIZER)));
        let (code, msg) = c.reconcile("web", "nginx");
        assert_eq!((code, msg.as_str()), (3, "children_apply: 1 of 2 children failed: Service web/nginx-0: ERR_UNAVAILABLE: apiserver down"));
    }

    #[test]
    fn a_bad_ports_annotation_is_dropped_and_named() {
        fake::reset();
        fake::cached_json("statefulsets", &statefulset(1, r#""service-per-pod-label":"pod-name","service-per-pod-ports":"80""#, ""));
        let mut c = controller();
        assert_eq!(c.reconcile("web", "nginx"), (2, r#"annotation service-per-pod-ports: "80" is not <port>:<targetPort>"#.to_string()));
        assert_eq!(parse_ports("80:8080, 443:8443"), Ok(vec![(80, 8080), (443, 8443)]));
        assert!(parse_ports("80:0").is_err());
    }

    #[test]
    fn a_statefulset_gone_prunes_its_services() {
        fake::reset();
        fake::cached_json("statefulsets", &statefulset(2, OPTED_IN, ""));
        let mut c = Controller::new("statefulsets", reconcile).owns("services", "Service");
        assert_eq!(c.reconcile("web", "nginx").0, 0);
        c.delete("web", "nginx");
        assert_eq!(c.reconcile("web", "nginx"), (0, String::new()));
        assert_eq!(c.pruned(), vec!["services web/nginx-0", "services web/nginx-1"]);
    }
}
