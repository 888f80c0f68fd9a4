package config

import (
	"strings"
	"testing"
)

func TestTracing(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		problems []string // each a whole "file:line: message" prefix; none = valid
		endpoint string
		ratio    float64
	}{
		{"absent: off, every delivery once on", withHead(), nil, "", 1},
		{"endpoint, default ratio", withHead("tracing:", "  endpoint: http://otel-collector:4318"), nil, "http://otel-collector:4318", 1},
		{"https with a path", withHead("tracing:", "  endpoint: https://otel.example.com/base", "  sampleRatio: 0.25"), nil, "https://otel.example.com/base", 0.25},
		{"ratio 0", withHead("tracing:", "  endpoint: http://127.0.0.1:4318", "  sampleRatio: 0"), nil, "http://127.0.0.1:4318", 0},
		{"grpc scheme", withHead("tracing:", "  endpoint: grpc://otel:4317"),
			[]string{`config.yaml:7: tracing.endpoint: "grpc://otel:4317" is not an http(s) URL`}, "", 0},
		{"host and port only", withHead("tracing:", "  endpoint: otel:4318"),
			[]string{`config.yaml:7: tracing.endpoint: "otel:4318" is not an http(s) URL`}, "", 0},
		{"no host", withHead("tracing:", "  endpoint: 'http://'"),
			[]string{`config.yaml:7: tracing.endpoint: "http://" has no host`}, "", 0},
		{"query", withHead("tracing:", "  endpoint: http://otel:4318/?x=1"),
			[]string{`config.yaml:7: tracing.endpoint: "http://otel:4318/?x=1" has a query or fragment`}, "", 0},
		{"bad URL", withHead("tracing:", "  endpoint: 'http://otel:port'"),
			[]string{`config.yaml:7: tracing.endpoint: invalid URL "http://otel:port"`}, "", 0},
		{"ratio over 1", withHead("tracing:", "  endpoint: http://otel:4318", "  sampleRatio: 1.5"),
			[]string{`config.yaml:8: tracing.sampleRatio: 1.5 is out of range; use a share from 0`}, "", 0},
		{"negative ratio", withHead("tracing:", "  sampleRatio: -0.1"),
			[]string{`config.yaml:7: tracing.sampleRatio: -0.1 is out of range`}, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(tc.in))
			if len(tc.problems) > 0 {
				if err == nil {
					t.Fatalf("parsed; want problems %q", tc.problems)
				}
				for _, w := range tc.problems {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q\nlacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Tracing.Endpoint != tc.endpoint || c.Tracing.Enabled() != (tc.endpoint != "") {
				t.Errorf("endpoint %q (enabled %v), want %q", c.Tracing.Endpoint, c.Tracing.Enabled(), tc.endpoint)
			}
			if c.Tracing.SampleRatio == nil || *c.Tracing.SampleRatio != tc.ratio || c.Tracing.Ratio() != tc.ratio {
				t.Errorf("sampleRatio %v, Ratio() %v; want %v", c.Tracing.SampleRatio, c.Tracing.Ratio(), tc.ratio)
			}
		})
	}
}
