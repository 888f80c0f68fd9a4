package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeAuth lets a request through only if its bearer token is one the
// apiserver authenticates (TokenReview) and whose user RBAC allows "get"
// on the request's path as a non-resource URL (SubjectAccessReview), as
// controller-runtime's secure metrics serving and kube-rbac-proxy do. A
// Prometheus with a ServiceAccount token and a ClusterRole granting
//
//	nonResourceURLs: ["/metrics"], verbs: ["get"]
//
// can scrape; anyone else gets 401 or 403.
//
// Decisions are cached for ttl per token and path, so a scrape every few
// seconds costs the apiserver two reviews per ttl, not per scrape; a
// revoked token or role takes effect within ttl. Failed reviews (the
// apiserver unreachable) are not cached and answer 503.
type kubeAuth struct {
	client kubernetes.Interface
	ttl    time.Duration
	log    *slog.Logger

	mu    sync.Mutex
	cache map[authKey]authDecision // at most maxAuthCache entries; guarded by mu
}

// maxAuthCache bounds the cache against a client sending a new token with
// every request.
const maxAuthCache = 1024

type authKey struct {
	token [sha256.Size]byte // the token's hash: the cache holds no credentials
	path  string
}

type authDecision struct {
	code    int // http.StatusOK, StatusUnauthorized or StatusForbidden
	msg     string
	expires time.Time
}

func (a *kubeAuth) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := a.decide(r.Context(), r)
		if d.code != http.StatusOK {
			if d.code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="informer-host"`)
			}
			http.Error(w, d.msg, d.code)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (a *kubeAuth) decide(ctx context.Context, r *http.Request) authDecision {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token = strings.TrimSpace(token); !ok || token == "" {
		return authDecision{code: http.StatusUnauthorized, msg: "Unauthorized: " + r.URL.Path + " needs a Kubernetes bearer token (Authorization: Bearer ...)"}
	}
	key := authKey{token: sha256.Sum256([]byte(token)), path: r.URL.Path}
	now := time.Now()
	a.mu.Lock()
	d, hit := a.cache[key]
	a.mu.Unlock()
	if hit && now.Before(d.expires) {
		return d
	}
	d, err := a.review(ctx, token, r.URL.Path)
	if err != nil {
		a.log.Warn("cannot authenticate or authorize a request: the apiserver did not answer", "path", r.URL.Path, "err", err)
		return authDecision{code: http.StatusServiceUnavailable, msg: "authentication unavailable: " + err.Error()}
	}
	d.expires = now.Add(a.ttl)
	a.mu.Lock()
	if len(a.cache) >= maxAuthCache {
		for k, e := range a.cache {
			if !now.Before(e.expires) {
				delete(a.cache, k)
			}
		}
		if len(a.cache) >= maxAuthCache {
			clear(a.cache)
		}
	}
	a.cache[key] = d
	a.mu.Unlock()
	return d
}

func (a *kubeAuth) review(ctx context.Context, token, path string) (authDecision, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := a.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authDecision{}, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return authDecision{code: http.StatusUnauthorized, msg: "Unauthorized: the apiserver does not accept this token"}, nil
	}
	u := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return authDecision{}, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	if !sar.Status.Allowed {
		return authDecision{code: http.StatusForbidden, msg: fmt.Sprintf("Forbidden: user %q may not get %s", u.Username, path)}, nil
	}
	return authDecision{code: http.StatusOK}, nil
}
