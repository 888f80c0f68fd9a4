package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The control plane authorizes with RBAC (envtest's default
// --authorization-mode), so a ServiceAccount may do only what its
// bindings allow, plus what the apiserver's default roles give every
// authenticated user (discovery, self reviews).

// ServiceAccount creates the ServiceAccount namespace/name (if it does not
// exist) and returns a client configuration authenticating as it with a
// token from the TokenRequest API, as a pod's projected token would: the
// apiserver sees system:serviceaccount:namespace:name and its groups.
func (e *Env) ServiceAccount(t testing.TB, namespace, name string) *rest.Config {
	t.Helper()
	e.Require(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := e.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service account %s/%s: %v", namespace, name, err)
	}
	tr, err := e.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for service account %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// WriteConfigKubeconfig writes a kubeconfig for cfg (a bearer token, like
// ServiceAccount's) to path (mode 0600), for a daemon to run as that
// identity.
func WriteConfigKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
