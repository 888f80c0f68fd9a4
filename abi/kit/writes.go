package kit

import (
	"strconv"
	"strings"

	"github.com/informer-host/informer-host/abi"
)

// Errors of the writes (ABI.md §17.1). Each is a HostError, so
// errors.Is(err, kit.ErrForbidden) works on the *CallError a write
// returns. Shared with the other capabilities: ErrDenied (not granted),
// ErrConflict (a precondition or resourceVersion conflict, 409) and
// ErrNoObject (the object a patch, apply or delete names is missing, 404).
var (
	// ErrFieldConflict: an apply would change fields another field
	// manager owns (kubectl, another controller). No newer event settles
	// it: force (ApplyOptions.Force) if the plugin owns the field by
	// policy, else report it. Since v1.3.
	ErrFieldConflict error = HostError(abi.ErrFieldConflict)
	ErrForbidden     error = HostError(abi.ErrForbidden)     // the apiserver's RBAC refused it (403)
	ErrExists        error = HostError(abi.ErrExists)        // a create of an object that exists
	ErrUnprocessable error = HostError(abi.ErrUnprocessable) // an invalid object (422) or request (400)
	ErrRateLimited   error = HostError(abi.ErrRateLimited)   // the plugin's rate limit or a 429: return kit.Retry(err)
	ErrTimeout       error = HostError(abi.ErrTimeout)       // no answer within the write timeout
	ErrUnavailable   error = HostError(abi.ErrUnavailable)   // the apiserver could not be reached, or 5xx
	ErrCanceled      error = HostError(abi.ErrCanceled)      // the host stopped the call: return at once
)

// Target names the object a write acts on.
type Target struct {
	// Resource is a granted resource as the grant names it: a configured
	// resource's name ("pods") or "group/version/resource"
	// ("v1/configmaps", "apps/v1/deployments").
	Resource    string
	Namespace   string // "" for a cluster-scoped object
	Name        string // a create may leave it to the body's metadata.name
	Subresource string // "" = the object itself; "status"
}

// Preconditions make a write conditional: the apiserver refuses it with
// ErrConflict when the object's uid or resourceVersion differs.
type Preconditions struct {
	UID             string
	ResourceVersion string
}

// writesAPI is k8s_write and result_message; the host implements it on
// wasip1 (writes_wasip1.go), tests with a fake.
type writesAPI interface {
	k8sWrite(op int32, t Target, body []byte, p Preconditions, flags int32) int32
	resultMessage(buf []byte) int32
}

func (p *plugin) writes() writesAPI {
	if a, ok := p.host.(writesAPI); ok {
		return a
	}
	return noWrites{}
}

// Cluster writes to the Kubernetes API (capability "writes", k8s_write):
// only what the plugin's grants.writes covers; anything else is
// ErrDenied without a request. Each write returns the object the
// apiserver answered with, readable like a cached one until the handler
// returns, or a *CallError that names the write and carries the
// apiserver's (or the host's) message.
type Cluster struct{ p *plugin }

// K8s returns the plugin's writer to the cluster.
func K8s() Cluster { return Cluster{p: &the} }

// Create creates the object body (JSON) describes.
func (c Cluster) Create(t Target, body []byte) (Cached, error) {
	return c.p.write(abi.WriteCreate, t, body, Preconditions{}, 0)
}

// MergePatch applies a JSON merge patch (RFC 7386) to the object.
func (c Cluster) MergePatch(t Target, patch []byte, p Preconditions) (Cached, error) {
	return c.p.write(abi.WriteMergePatch, t, patch, p, 0)
}

// JSONPatch applies a JSON patch (RFC 6902, a JSON array of operations).
func (c Cluster) JSONPatch(t Target, patch []byte, p Preconditions) (Cached, error) {
	return c.p.write(abi.WriteJSONPatch, t, patch, p, 0)
}

// Apply server-side applies body (a JSON object with apiVersion, kind and
// metadata.name) as field manager "informer-host/<plugin>". force takes
// over fields another manager owns.
func (c Cluster) Apply(t Target, body []byte, force bool, p Preconditions) (Cached, error) {
	return c.ApplyWith(t, body, ApplyOptions{Force: force}, p)
}

// ApplyOptions are the flags of an apply.
type ApplyOptions struct {
	// Force takes over fields another manager owns; without it such a
	// field is ErrFieldConflict.
	Force bool
	// MustExist makes the apply update the object only: when it is gone
	// (deleted since the event) the apply is ErrNoObject instead of
	// creating it anew. Since v1.3.
	MustExist bool
}

// ApplyWith is Apply with all of an apply's options.
func (c Cluster) ApplyWith(t Target, body []byte, o ApplyOptions, p Preconditions) (Cached, error) {
	var flags int32
	if o.Force {
		flags |= abi.WriteForce
	}
	if o.MustExist {
		flags |= abi.WriteMustExist
	}
	return c.p.write(abi.WriteApply, t, body, p, flags)
}

// Delete deletes the object.
func (c Cluster) Delete(t Target, p Preconditions) error {
	_, err := c.p.write(abi.WriteDelete, t, nil, p, 0)
	return err
}

// write calls k8s_write; the object the apiserver returned is readable
// like a cached one until the handler returns.
func (p *plugin) write(op int32, t Target, body []byte, pre Preconditions, flags int32) (Cached, error) {
	w := p.writes()
	h := w.k8sWrite(op, t, body, pre, flags)
	if h < 0 {
		return Cached{}, &CallError{Func: abi.ImportK8sWrite, Call: writeCall(op, t, flags), Code: h, Message: p.resultMessage(w)}
	}
	return Cached{p: p, h: h}, nil
}

// writeOpName is a k8s_write op's name, "op N" for an unknown one.
func writeOpName(op int32) string {
	if n := abi.WriteOpName(op); n != "" {
		return n
	}
	return "op " + strconv.Itoa(int(op))
}

// writeCall is a write as its error names it: "apply pods shop/web",
// "merge-patch pods/status shop/web", "apply --force pods shop/web".
func writeCall(op int32, t Target, flags int32) string {
	var b strings.Builder
	b.WriteString(writeOpName(op))
	if flags&abi.WriteForce != 0 {
		b.WriteString(" --force")
	}
	if flags&abi.WriteMustExist != 0 {
		b.WriteString(" --must-exist")
	}
	b.WriteByte(' ')
	b.WriteString(t.Resource)
	if t.Subresource != "" {
		b.WriteByte('/')
		b.WriteString(t.Subresource)
	}
	switch {
	case t.Namespace != "" && t.Name != "":
		b.WriteString(" " + t.Namespace + "/" + t.Name)
	case t.Namespace != "":
		b.WriteString(" in " + t.Namespace)
	case t.Name != "":
		b.WriteString(" " + t.Name)
	}
	return b.String()
}

// resultMessage reads result_message, growing the buffer as it must.
func (p *plugin) resultMessage(w interface{ resultMessage([]byte) int32 }) string {
	for {
		if cap(p.valBuf) < 1024 {
			p.valBuf = make([]byte, 1024)
		}
		buf := p.valBuf[:cap(p.valBuf)]
		n := w.resultMessage(buf)
		switch {
		case n < 0:
			return ""
		case int(n) > len(buf):
			p.valBuf = make([]byte, n)
			continue
		}
		return string(buf[:n])
	}
}

// SelfWrite reports an event whose object is the result of one of this
// plugin's own writes (header flag FlagSelfWrite): a controller reacting
// to it would be reacting to itself.
func (e *Event) SelfWrite() bool { return e.hdr.Has(abi.FlagSelfWrite) }

// noWrites stands in where there is no host: every write is denied.
type noWrites struct{}

func (noWrites) k8sWrite(int32, Target, []byte, Preconditions, int32) int32 { return abi.ErrDenied }
func (noWrites) resultMessage([]byte) int32                                 { return 0 }
