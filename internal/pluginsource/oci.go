package pluginsource

import (
	"context"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact"
)

// OCI is the Fetcher of oci:// sources over internal/ociartifact's
// registry client (mirrors, CA bundles, plain HTTP to loopback,
// docker-config credentials, the module formats it accepts).
type OCI struct{ Client *ociartifact.Client }

// NewOCI builds the registry client the config describes: plugins.registries,
// plugins.dockerConfig, plugins.allowInsecureRemote, plugins.maxModuleSize,
// plugins.fetchTimeout.
func NewOCI(cfg *config.Config) (*OCI, error) {
	regs := make(map[string]ociartifact.Registry, len(cfg.Plugins.Registries))
	for host, r := range cfg.Plugins.Registries {
		regs[host] = ociartifact.Registry{CAFile: cfg.ResolvePath(r.CABundle), Mirrors: r.Mirrors, Insecure: r.Insecure}
	}
	c, err := ociartifact.New(ociartifact.Options{DockerConfig: cfg.ResolvePath(cfg.Plugins.DockerConfig), Registries: regs,
		AllowInsecureRemote: cfg.Plugins.AllowInsecureRemote, MaxModuleSize: cfg.ModuleSizeLimit(), Timeout: cfg.FetchTimeoutOrDefault()})
	if err != nil {
		return nil, err
	}
	return &OCI{Client: c}, nil
}

func ociRef(src Source) string {
	repo := src.Ref.Registry + "/" + src.Ref.Repository
	if src.Ref.Digest != "" {
		return repo + "@" + src.Ref.Digest
	}
	return repo + ":" + src.Ref.Tag
}

// Resolve implements Fetcher: the manifest digest the tag names now (a
// digest source as it is, with no request).
func (o *OCI) Resolve(ctx context.Context, src Source) (string, error) {
	d, err := o.Client.Resolve(ctx, ociRef(src))
	if err != nil {
		return "", err
	}
	return d.Digest, nil
}

// Fetch implements Fetcher: the module of the manifest (or index) digest
// names, pulled by digest so that a tag moving meanwhile changes nothing.
func (o *OCI) Fetch(ctx context.Context, src Source, digest string) (Artifact, error) {
	a, err := o.Client.Pull(ctx, src.Ref.Registry+"/"+src.Ref.Repository+"@"+digest)
	if err != nil {
		return Artifact{}, err
	}
	return Artifact{Digest: digest, Module: a.Bytes}, nil
}
