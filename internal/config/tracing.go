package config

import (
	"math"
	"net/url"
)

// DefaultSampleRatio traces every delivery: tracing is opt-in (an
// endpoint), and whoever turns it on usually wants to see the event they
// are chasing.
const DefaultSampleRatio = 1.0

// Enabled reports whether traces are exported: an endpoint is set.
func (t Tracing) Enabled() bool { return t.Endpoint != "" }

// Ratio is the share of deliveries traced, DefaultSampleRatio when unset.
func (t Tracing) Ratio() float64 {
	if t.SampleRatio == nil {
		return DefaultSampleRatio
	}
	return *t.SampleRatio
}

func validateTracing(p *problems, t Tracing) {
	tp := path{"tracing"}
	if e := t.Endpoint; e != "" {
		u, err := url.Parse(e)
		switch {
		case err != nil:
			p.add(tp.key("endpoint"), "invalid URL %q: %v; use the OTLP/HTTP collector's base URL, e.g. \"http://otel-collector:4318\"", e, err)
		case u.Scheme != "http" && u.Scheme != "https":
			p.add(tp.key("endpoint"), "%q is not an http(s) URL; use the OTLP/HTTP collector's base URL, e.g. \"http://otel-collector:4318\" (spans go to <endpoint>/v1/traces; OTLP/gRPC is not supported)", e)
		case u.Host == "":
			p.add(tp.key("endpoint"), "%q has no host; use e.g. \"http://otel-collector:4318\"", e)
		case u.RawQuery != "" || u.Fragment != "":
			p.add(tp.key("endpoint"), "%q has a query or fragment; give the collector's base URL only", e)
		}
	}
	if r := t.SampleRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		p.add(tp.key("sampleRatio"), "%v is out of range; use a share from 0 (none) to 1 (every delivery, the default)", *r)
	}
}

// applyDefaults fills the unset sample ratio, so what the daemon runs
// with is what a dump of the resolved config shows.
func (t *Tracing) applyDefaults() {
	if t.SampleRatio == nil {
		r := DefaultSampleRatio
		t.SampleRatio = &r
	}
}
