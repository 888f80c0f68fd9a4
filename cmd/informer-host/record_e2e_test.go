package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

// informer-host record writes its events file 0600, also over an older
// 0644 one, and blanks every Secret value in it (the initial list, an
// update's old and new object, the cache lines, the last-applied
// annotation) unless --keep-secret-data says to keep them.
func TestRecordSecrets(t *testing.T) {
	env.Require(t)
	const password, token, second = "hunter2-password-value", "tok-stringdata-value", "second-password-value"
	b64 := base64.StdEncoding.EncodeToString
	// As the apiserver serves them: data base64 (stringData merged into
	// it), the annotation in clear.
	served := []string{b64([]byte(password)), b64([]byte(token)), b64([]byte(second)), token}
	for _, tc := range []struct {
		name     string
		flags    []string
		existing bool // an older recording, 0644, is there already
		keep     bool
	}{
		{name: "default", existing: true},
		{name: "keep-secret-data", flags: []string{"--keep-secret-data"}, keep: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "plugins", "counter.wasm"), testenv.WAT(t, "../../host/testdata/plugins/counter.wat"), 0o644); err != nil {
				t.Fatal(err)
			}
			testConfig(t, dir, ns, `
resources:
  - {name: secrets, version: v1, resource: secrets, namespaces: [NS]}
plugins:
  directory: plugins
  default:
    bindings: [{resource: secrets}]
    grants: {cache: [{resource: secrets}]}
`)
			out := filepath.Join(dir, "events.jsonl")
			if tc.existing {
				if err := os.WriteFile(out, []byte("an older recording\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			secrets := env.Client.CoreV1().Secrets(ns)
			// As kubectl apply leaves it: the applied object, stringData
			// in clear, in an annotation.
			applied := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"listed"},"stringData":{"token":"` + token + `"}}`
			if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "listed",
				Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": applied}},
				Data: map[string][]byte{"password": []byte(password)}, StringData: map[string]string{"token": token}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}

			logs := &testenv.LogBuffer{}
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			var stdout bytes.Buffer
			done := make(chan int, 1)
			go func() {
				done <- Main(runCtx, append([]string{"record", "--config", filepath.Join(dir, "config.yaml"), "--out", out}, tc.flags...), &stdout, logs)
			}()
			testenv.Eventually(t, "the counter to count the listed secret", func() bool {
				select {
				case code := <-done:
					t.Fatalf("record ended early: exit %d\n%s", code, strings.Join(logs.Lines(), "\n"))
				default:
				}
				return len(logs.Lines("plugin=counter.wasm", "count=1")) > 0
			})
			s, err := secrets.Get(ctx, "listed", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Data["password"] = []byte(second)
			if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			// Delivered in order: the second count follows the update.
			if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "created"},
				Data: map[string][]byte{"password": []byte(password)}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "the counter to count the created secret", func() bool { return len(logs.Lines("plugin=counter.wasm", "count=2")) > 0 })
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("record: exit %d\n%s", code, strings.Join(logs.Lines(), "\n"))
			}

			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("events file mode %v, want 0600", fi.Mode().Perm())
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"type":"update"`, `"oldObject"`, `"type":"cache"`, `"password"`, `"token"`, `"name":"created"`} {
				if !bytes.Contains(b, []byte(want)) {
					t.Fatalf("recording lacks %s:\n%s", want, b)
				}
			}
			for _, v := range append(served, password, second) {
				if bytes.Contains(b, []byte(v)) && !tc.keep {
					t.Errorf("recording holds the value %q", v)
				}
			}
			for _, v := range served {
				if !bytes.Contains(b, []byte(v)) && tc.keep {
					t.Errorf("recording with --keep-secret-data lacks the value %q", v)
				}
			}
			if t.Failed() {
				t.Logf("recording:\n%s", b)
			}
		})
	}
}
