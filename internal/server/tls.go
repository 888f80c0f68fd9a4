package server

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certReloader serves the certificate in certFile and keyFile, read again
// whenever either file's modification time changes, so a certificate a
// Secret volume or cert-manager rotates is picked up without a restart. A
// rotation that cannot be loaded (a half-written pair) keeps the previous
// certificate.
type certReloader struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate // guarded by mu
	modCert time.Time        // guarded by mu
	modKey  time.Time        // guarded by mu
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.get(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) get() (*tls.Certificate, error) {
	cst, err := os.Stat(r.certFile)
	if err != nil {
		return r.fallback(fmt.Errorf("server: TLS certificate: %w", err))
	}
	kst, err := os.Stat(r.keyFile)
	if err != nil {
		return r.fallback(fmt.Errorf("server: TLS key: %w", err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && cst.ModTime().Equal(r.modCert) && kst.ModTime().Equal(r.modKey) {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			return r.cert, nil
		}
		return nil, fmt.Errorf("server: TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.modCert, r.modKey = &cert, cst.ModTime(), kst.ModTime()
	return r.cert, nil
}

func (r *certReloader) fallback(err error) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil {
		return r.cert, nil
	}
	return nil, err
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.get() }
