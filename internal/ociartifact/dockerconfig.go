package ociartifact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// dockerKeychain is the "auths" of one docker config.json, keyed by
// registry host. Credential helpers (credsStore, credHelpers) are not
// run: a daemon in a pod has none, and a file that relies on them says
// so in explain's message (no auths entry for the host).
type dockerKeychain struct {
	path  string
	auths map[string]authn.AuthConfig
}

type dockerConfigFile struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// loadDockerConfig reads path: a config.json or a
// kubernetes.io/dockerconfigjson Secret's .dockerconfigjson (the same
// {"auths": {...}}), or the legacy .dockercfg form (the auths map alone).
func loadDockerConfig(path string) (*dockerKeychain, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("docker config: %w", err)
	}
	var f dockerConfigFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("docker config %s: not JSON: %v (want a docker config.json: {\"auths\": {\"registry\": {\"auth\": \"base64(user:password)\"}}})", path, err)
	}
	if f.Auths == nil {
		// .dockercfg: {"registry": {"auth": ...}}
		var legacy map[string]dockerAuth
		if json.Unmarshal(b, &legacy) == nil {
			f.Auths = legacy
		}
	}
	kc := &dockerKeychain{path: path, auths: map[string]authn.AuthConfig{}}
	for key, a := range f.Auths {
		host := authHost(key)
		ac := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("docker config %s: auths[%q].auth is not base64: %v", path, key, err)
			}
			u, p, ok := strings.Cut(string(dec), ":")
			if !ok {
				return nil, fmt.Errorf("docker config %s: auths[%q].auth is not base64 of user:password", path, key)
			}
			ac.Username, ac.Password = u, p
		}
		kc.auths[host] = ac
	}
	return kc, nil
}

// authHost is the registry host of an auths key, which docker writes as
// "host", "https://host", "https://host/v1/" (Docker Hub) and so on.
func authHost(key string) string {
	k := key
	if strings.Contains(k, "://") {
		if u, err := url.Parse(k); err == nil {
			k = u.Host
		}
	} else {
		k, _, _ = strings.Cut(k, "/")
	}
	switch k {
	case "docker.io", "registry-1.docker.io", "index.docker.io":
		return name.DefaultRegistry
	}
	return k
}

func (k *dockerKeychain) has(host string) bool {
	_, ok := k.auths[host]
	return ok
}

// Resolve implements authn.Keychain.
func (k *dockerKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if ac, ok := k.auths[authHost(r.RegistryStr())]; ok {
		return authn.FromConfig(ac), nil
	}
	return authn.Anonymous, nil
}
