package seenkeys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/informer-host/informer-host/internal/state"
)

// NamePrefix begins the name of every ConfigMap the ConfigMaps backend
// writes; `informer-host rbac` grants the daemon ConfigMaps in its
// namespace for them.
const NamePrefix = "informer-host-seen-"

// The ConfigMaps' labels find a plugin's (and a member's) sets with a
// list; their values are hashes, as plugin and member names may be
// longer than a label value. The annotations hold the names themselves
// and how the set was split.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelPlugin    = "seenkeys.informer-host.io/plugin"
	labelMember    = "seenkeys.informer-host.io/member"
	annPlugin      = "seenkeys.informer-host.io/plugin"
	annMember      = "seenkeys.informer-host.io/member"
	annPart        = "seenkeys.informer-host.io/part"  // "i/n"
	annWrite       = "seenkeys.informer-host.io/write" // one random id per write, the same on its n parts
	dataKey        = "keys.gz"
)

// partBytes is the most of a set one ConfigMap holds: the apiserver
// refuses a ConfigMap over 1 MiB, and its other fields need room.
const partBytes = 900 << 10

type configMaps struct {
	c         corev1client.ConfigMapsGetter
	namespace string
	member    string
	part      int // partBytes; smaller in tests
}

// ConfigMaps returns the backend that keeps each plugin's set in
// ConfigMaps named NamePrefix+… in namespace, one or more per plugin and
// member (a set over 900 KiB gzip'd is split), so another replica reads
// the sets of a member that left. member names this daemon: its sharding
// member id, or one name every replica of a leader-elected daemon shares
// (the leader's set is the next leader's).
func ConfigMaps(c corev1client.ConfigMapsGetter, namespace, member string) Backend {
	return &configMaps{c: c, namespace: namespace, member: member, part: partBytes}
}

func (b *configMaps) Name() string { return "configmaps in namespace " + b.namespace }

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// name is the ConfigMap of part i of plugin's set of this member.
func (b *configMaps) name(plugin string, i int) string {
	return fmt.Sprintf("%s%s-%d", NamePrefix, hash(plugin+"\x00"+b.member), i)
}

func (b *configMaps) list(ctx context.Context, plugin, member string) ([]corev1.ConfigMap, error) {
	sel := labelPlugin + "=" + hash(plugin)
	if member != "" {
		sel += "," + labelMember + "=" + hash(member)
	}
	l, err := b.c.ConfigMaps(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list the seen-keys ConfigMaps of plugin %q in %s: %w", plugin, b.namespace, err)
	}
	return l.Items, nil
}

// join puts the parts of one member's set together; it fails when parts
// are missing or come from different writes (a write cut short).
func join(cms []corev1.ConfigMap) ([]byte, error) {
	type part struct {
		i    int
		data []byte
	}
	var parts []part
	n, write := -1, ""
	for _, cm := range cms {
		var i, m int
		if _, err := fmt.Sscanf(cm.Annotations[annPart], "%d/%d", &i, &m); err != nil {
			return nil, fmt.Errorf("ConfigMap %s: annotation %s %q is not i/n", cm.Name, annPart, cm.Annotations[annPart])
		}
		w := cm.Annotations[annWrite]
		if n == -1 {
			n, write = m, w
		}
		if m != n || w != write {
			return nil, fmt.Errorf("ConfigMap %s belongs to another write than its siblings (a write was cut short)", cm.Name)
		}
		parts = append(parts, part{i, cm.BinaryData[dataKey]})
	}
	if len(parts) != n {
		return nil, fmt.Errorf("%d of %d parts", len(parts), n)
	}
	sort.Slice(parts, func(a, b int) bool { return parts[a].i < parts[b].i })
	var out []byte
	for j, p := range parts {
		if p.i != j {
			return nil, fmt.Errorf("part %d missing", j)
		}
		out = append(out, p.data...)
	}
	return out, nil
}

func (b *configMaps) Load(ctx context.Context, plugin string) ([]byte, error) {
	cms, err := b.list(ctx, plugin, b.member)
	if err != nil || len(cms) == 0 {
		return nil, err
	}
	return join(cms)
}

func (b *configMaps) Others(ctx context.Context, plugin string) (map[string][]byte, error) {
	cms, err := b.list(ctx, plugin, "")
	if err != nil {
		return nil, err
	}
	byMember := map[string][]corev1.ConfigMap{}
	for _, cm := range cms {
		if m := cm.Annotations[annMember]; m != b.member {
			byMember[m] = append(byMember[m], cm)
		}
	}
	out := map[string][]byte{}
	var errs []error
	for m, cms := range byMember {
		data, err := join(cms)
		if err != nil {
			errs = append(errs, fmt.Errorf("member %q: %w", m, err))
			continue
		}
		out[m] = data
	}
	return out, errors.Join(errs...)
}

func (b *configMaps) Save(ctx context.Context, plugin string, data []byte) error {
	old, err := b.list(ctx, plugin, b.member)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, cm := range old {
		have[cm.Name] = true
	}
	n := 0
	if data != nil {
		n = max(1, (len(data)+b.part-1)/b.part)
	}
	write := rand.String(8)
	cmAPI := b.c.ConfigMaps(b.namespace)
	for i := 0; i < n; i++ {
		chunk := data[i*b.part : min(len(data), (i+1)*b.part)]
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: b.name(plugin, i), Namespace: b.namespace,
				Labels: map[string]string{labelManagedBy: "informer-host", labelPlugin: hash(plugin), labelMember: hash(b.member)},
				Annotations: map[string]string{annPlugin: plugin, annMember: b.member,
					annPart: strconv.Itoa(i) + "/" + strconv.Itoa(n), annWrite: write},
			},
			BinaryData: map[string][]byte{dataKey: chunk},
		}
		if have[cm.Name] {
			// Unconditional: this member is the only writer of its own.
			_, err = cmAPI.Update(ctx, cm, metav1.UpdateOptions{})
		} else {
			_, err = cmAPI.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				_, err = cmAPI.Update(ctx, cm, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("write ConfigMap %s/%s (the keys plugin %q was handed): %w", b.namespace, cm.Name, plugin, err)
		}
		delete(have, cm.Name)
	}
	for name := range have {
		if err := cmAPI.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ConfigMap %s/%s: %w", b.namespace, name, err)
		}
	}
	return nil
}

// stateFile keeps each plugin's set in a bucket of the local state file.
type stateFile struct{ st *state.Store }

// StateFile returns the backend that keeps each plugin's set in st (the
// plugins' state store, plugins.state.path), in a bucket of its own per
// plugin, named StateBucketPrefix+plugin: a name no plugin's file has.
func StateFile(st *state.Store) Backend { return stateFile{st} }

// StateBucketPrefix begins the state buckets of the StateFile backend.
const StateBucketPrefix = "informer-host-seen/"

var stateKey = []byte("keys.gz")

// stateQuota is far above any set (50,000 keys are about 1 MiB) so the
// state store's quota never refuses one.
var stateQuota = state.Quota{MaxBytes: 1 << 30, MaxKeys: 4}

func (b stateFile) Name() string { return "the state file" }

func (b stateFile) Load(_ context.Context, plugin string) ([]byte, error) {
	bk, ok := b.st.Lookup(StateBucketPrefix + plugin)
	if !ok {
		return nil, nil
	}
	v, _, ok := bk.Get(stateKey)
	if !ok {
		return nil, nil
	}
	return v, nil
}

func (b stateFile) Save(_ context.Context, plugin string, data []byte) error {
	if data == nil {
		b.st.Drop(StateBucketPrefix + plugin)
		return nil
	}
	_, err := b.st.Bucket(StateBucketPrefix+plugin, stateQuota).Set(stateKey, data, state.Any)
	return err
}

func (b stateFile) Others(context.Context, string) (map[string][]byte, error) { return nil, nil }
