// Package tracingtest is an OTLP/HTTP trace receiver on loopback for
// tests: it decodes what an exporter POSTs to /v1/traces
// (go.opentelemetry.io/proto/otlp) into flat spans a test can check
// parent by parent.
//
// Rule of direction: tracingtest imports the OTLP protobufs and the
// standard library; only tests import it.
package tracingtest
