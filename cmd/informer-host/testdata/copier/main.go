// Command copier copies each ConfigMap labelled copy=yes to <name>-copy
// when the copy is not in the cache: a controller whose replay once
// found its copies already cached and made none of the live run's writes. Built by TestRecordReplayCopier (GOOS=wasip1).
package main

import (
	"errors"
	"fmt"

	"github.com/informer-host/informer-host/abi/kit"
)

func init() {
	kit.Handle(handle)
}

func handle(ev *kit.Event) error {
	if ev.Type() == kit.Delete {
		return nil
	}
	if v, _ := ev.Get("metadata.labels.copy"); v != "yes" {
		return nil
	}
	ns, name := ev.Namespace(), ev.Name()+"-copy"
	if _, err := kit.Cache().Get("cms", ns, name); err == nil {
		return nil
	} else if !errors.Is(err, kit.ErrNoObject) {
		return err
	}
	data, _ := ev.Get("data")
	if data == "" {
		data = "{}"
	}
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q},"data":%s}`, name, ns, data)
	if _, err := kit.K8s().Create(kit.Target{Resource: "cms", Namespace: ns}, []byte(body)); err != nil {
		return err
	}
	kit.Infof("copied %s/%s to %s", ns, ev.Name(), name)
	return nil
}

func main() {}
