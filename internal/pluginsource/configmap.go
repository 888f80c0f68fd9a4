package pluginsource

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/informer-host/informer-host/internal/config"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ErrNoRESTConfig is Fetch's and Resolve's error for a configmap:// source
// when the fetchers were given no apiserver (Fetchers.RESTConfig).
var ErrNoRESTConfig = errors.New("configmap:// sources need the Kubernetes API, which these fetchers were not given")

// configMapClients keeps one clientset per identity a ConfigMap is read
// as, so a refresh every 30s does not build a transport each time.
type configMapClients struct {
	mu   sync.Mutex
	byAs map[string]kubernetes.Interface
}

func (f *Fetchers) configMapClient(as string) (kubernetes.Interface, error) {
	if f.RESTConfig == nil {
		return nil, ErrNoRESTConfig
	}
	f.cm.mu.Lock()
	defer f.cm.mu.Unlock()
	if c, ok := f.cm.byAs[as]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(f.RESTConfig)
	if as != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: as}
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("configmap:// sources: client: %w", err)
	}
	if f.cm.byAs == nil {
		f.cm.byAs = map[string]kubernetes.Interface{}
	}
	f.cm.byAs[as] = c
	return c, nil
}

// readConfigMap reads the module src names: the ConfigMap key's
// binaryData, else its data, as src.Impersonate; its digest is the
// sha256 of the bytes, checked against a pin.
func (f *Fetchers) readConfigMap(ctx context.Context, src Source) (Artifact, error) {
	c, err := f.configMapClient(src.Impersonate)
	if err != nil {
		return Artifact{}, err
	}
	r := src.Ref
	cm, err := c.CoreV1().ConfigMaps(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		who := "the daemon's ServiceAccount"
		if src.Impersonate != "" {
			who = "ServiceAccount " + serviceAccountOf(src.Impersonate) + " (the plugin's grants.impersonate)"
		}
		return Artifact{}, fmt.Errorf("%s may not read ConfigMap %s/%s: give it get on configmaps in namespace %s "+
			"(a Role with apiGroups: [\"\"], resources: [configmaps], resourceNames: [%s], verbs: [get], and a RoleBinding to it): %w",
			who, r.Namespace, r.Name, r.Namespace, r.Name, err)
	case apierrors.IsNotFound(err):
		return Artifact{}, fmt.Errorf("ConfigMap %s/%s does not exist (yet): %w", r.Namespace, r.Name, err)
	case err != nil:
		return Artifact{}, fmt.Errorf("reading ConfigMap %s/%s: %w", r.Namespace, r.Name, err)
	}
	b, ok := cm.BinaryData[r.Key]
	if !ok {
		s, ok := cm.Data[r.Key]
		if !ok {
			return Artifact{}, fmt.Errorf("ConfigMap %s/%s has no key %q in binaryData or data (it has %s); "+
				"put the module there with kubectl create configmap %s --from-file=%s=plugin.wasm",
				r.Namespace, r.Name, r.Key, keysOf(cm.BinaryData, cm.Data), r.Name, r.Key)
		}
		b = []byte(s)
	}
	if f.MaxBytes > 0 && int64(len(b)) > f.MaxBytes {
		return Artifact{}, fmt.Errorf("ConfigMap %s/%s key %q is over plugins.maxModuleSize (%s)", r.Namespace, r.Name, r.Key, config.Size(f.MaxBytes))
	}
	d := digestOf(b)
	if src.SHA256 != "" && d != src.SHA256 {
		return Artifact{}, fmt.Errorf("ConfigMap %s/%s key %q has %s, but the config pins %s", r.Namespace, r.Name, r.Key, d, src.SHA256)
	}
	return Artifact{Digest: d, Module: b}, nil
}

// serviceAccountOf turns "system:serviceaccount:ns:name" back into
// "ns/name", the way the config and RBAC subjects spell it.
func serviceAccountOf(user string) string {
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			return ns + "/" + name
		}
	}
	return user
}

func keysOf(bin map[string][]byte, data map[string]string) string {
	var ks []string
	for k := range bin {
		ks = append(ks, k)
	}
	for k := range data {
		ks = append(ks, k)
	}
	if len(ks) == 0 {
		return "no keys"
	}
	sort.Strings(ks)
	return "keys " + strings.Join(ks, ", ")
}
