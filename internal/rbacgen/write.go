package rbacgen

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Write prints the RBAC as YAML documents in a stable order: the
// daemon's ClusterRole and its binding, then each namespace's Role and
// binding, namespaces sorted; then each identity's the same way, under a
// comment naming it; each rule under a comment saying why it is there.
// header, when not empty, is printed first as comment lines.
func (r *RBAC) Write(w io.Writer, header string) error {
	bw := bufio.NewWriter(w)
	if header != "" {
		for _, line := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
			fmt.Fprintln(bw, strings.TrimRight("# "+line, " "))
		}
	}
	first := true
	doc := func() {
		if !first {
			fmt.Fprintln(bw, "---")
		}
		first = false
	}
	for i, sr := range r.subjects() {
		if i > 0 && (len(sr.cluster) > 0 || len(sr.namespaces) > 0) {
			doc()
			first = true // the comment opens the next document
			fmt.Fprintf(bw, "# The ServiceAccount %s/%s, as which plugins act (grants.impersonate):\n# what their writes and Events need.\n", sr.namespace, sr.serviceAccount)
		}
		role := func(kind, namespace string, rules []Rule) {
			doc()
			fmt.Fprintf(bw, "apiVersion: rbac.authorization.k8s.io/v1\nkind: %s\nmetadata:\n  name: %s\n", kind, scalar(sr.name))
			if namespace != "" {
				fmt.Fprintf(bw, "  namespace: %s\n", scalar(namespace))
			}
			fmt.Fprintln(bw, "rules:")
			for _, rule := range rules {
				for _, why := range rule.Why {
					fmt.Fprintf(bw, "  # %s\n", why)
				}
				fmt.Fprintf(bw, "  - apiGroups: %s\n", list(rule.APIGroups))
				fmt.Fprintf(bw, "    resources: %s\n", list(rule.Resources))
				if len(rule.ResourceNames) > 0 {
					fmt.Fprintf(bw, "    resourceNames: %s\n", list(rule.ResourceNames))
				}
				fmt.Fprintf(bw, "    verbs: %s\n", list(rule.Verbs))
			}
		}
		binding := func(kind, roleKind, namespace string) {
			doc()
			fmt.Fprintf(bw, "apiVersion: rbac.authorization.k8s.io/v1\nkind: %s\nmetadata:\n  name: %s\n", kind, scalar(sr.name))
			if namespace != "" {
				fmt.Fprintf(bw, "  namespace: %s\n", scalar(namespace))
			}
			fmt.Fprintf(bw, "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: %s\n  name: %s\n", roleKind, scalar(sr.name))
			fmt.Fprintf(bw, "subjects:\n  - kind: ServiceAccount\n    name: %s\n    namespace: %s\n", scalar(sr.serviceAccount), scalar(sr.namespace))
		}
		if len(sr.cluster) > 0 {
			role("ClusterRole", "", sr.cluster)
			binding("ClusterRoleBinding", "ClusterRole", "")
		}
		for _, ns := range sr.namespaces {
			role("Role", ns, sr.namespaced[ns])
			binding("RoleBinding", "Role", ns)
		}
	}
	return bw.Flush()
}

// list renders a YAML flow sequence.
func list(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = scalar(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// scalar renders s plain when it is a Kubernetes name starting with a
// letter (lower-case letters, digits, '-', '.', '/'), which YAML reads back
// as that string; anything else double-quoted (a Go quoted string is a
// valid YAML double-quoted one).
func scalar(s string) string {
	plain := s != "" && s[0] >= 'a' && s[0] <= 'z'
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '/') {
			plain = false
		}
	}
	switch s {
	case "null", "true", "false", "yes", "no", "on", "off", "y", "n":
		plain = false // YAML 1.1 reads these as booleans or null
	}
	if plain {
		return s
	}
	return fmt.Sprintf("%q", s)
}
