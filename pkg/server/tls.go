package server

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certRecheck is how often the certificate files are looked at again: a
// renewed certificate (cert-manager, certbot) reaches new connections
// within it, without a restart.
const certRecheck = 5 * time.Second

// certFiles serves the certificate of a PEM certificate file and key file,
// loaded again when either file changes. A renewal caught half-written
// does not load; the certificate loaded before is served until the files
// make a valid pair again.
type certFiles struct {
	certPath, keyPath string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

// loadCertFiles loads the pair once, so that a wrong path or a key that
// does not match the certificate stops the process at start.
func loadCertFiles(certPath, keyPath string, log *slog.Logger) (*certFiles, error) {
	c := &certFiles{certPath: certPath, keyPath: keyPath, log: log}
	stamp, err := c.fileStamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w", certPath, keyPath, err)
	}
	c.cert, c.stamp, c.checked = &cert, stamp, time.Now()
	return c, nil
}

// CheckCertFiles reports whether the PEM certificate and key files load,
// for a process to name them with its other bad flags before it starts.
func CheckCertFiles(certPath, keyPath string) error {
	_, err := loadCertFiles(certPath, keyPath, slog.New(slog.DiscardHandler))
	return err
}

// fileStamp changes whenever either file is replaced or written.
func (c *certFiles) fileStamp() (string, error) {
	var b bytes.Buffer
	for _, p := range []string{c.certPath, c.keyPath} {
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("TLS file: %w", err)
		}
		fmt.Fprintf(&b, "%d/%d/%s;", fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
	}
	return b.String(), nil
}

// current returns the certificate to serve, loading it again first when
// the files changed since the last look.
func (c *certFiles) current() *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) < certRecheck {
		return c.cert
	}
	c.checked = time.Now()
	stamp, err := c.fileStamp()
	if err != nil || stamp == c.stamp {
		if err != nil {
			c.log.Warn("TLS certificate files unreadable; serving the one loaded before", "err", err)
		}
		return c.cert
	}
	cert, err := tls.LoadX509KeyPair(c.certPath, c.keyPath)
	if err != nil {
		// Not stamped: looked at again at the next recheck, when a renewal
		// under way may have finished writing.
		c.log.Warn("TLS certificate files changed but do not load; serving the one loaded before", "err", err)
		return c.cert
	}
	c.cert, c.stamp = &cert, stamp
	c.log.Info("TLS certificate loaded again", "cert", c.certPath)
	return c.cert
}

// serverConfig is the TLS of the listening port. It offers HTTP/2 and
// HTTP/1.1: gRPC clients require h2, browsers take either.
func (c *certFiles) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.current(), nil },
	}
}

// selfConfig is the TLS of calls from this process to its own port
// (services of one `palace serve` reach each other through it). The
// listen address (127.0.0.1:port) is rarely a name the certificate holds,
// so instead of checking names it accepts exactly the certificate the
// port serves.
func (c *certFiles) selfConfig() *tls.Config {
	return pinned(func() []byte { return c.current().Certificate[0] })
}

// PinnedTLS is the TLS of a client that runs beside the server, with its
// certificate file (a health check in the same container or pod): it
// accepts exactly the certificate in certFile, whatever names it holds,
// as the listen address is rarely one of them.
func PinnedTLS(certFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	block := firstCertificate(pem)
	if block == nil {
		return nil, fmt.Errorf("TLS certificate: %s holds no PEM certificate", certFile)
	}
	return pinned(func() []byte { return block }), nil
}

// pinned accepts the peer whose leaf certificate is own().
func pinned(own func() []byte) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		// Checked below, against the one certificate accepted.
		InsecureSkipVerify: true, //nolint:gosec // the peer must present that certificate, byte for byte
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, own()) {
				return errors.New("the server presented another certificate than the one expected")
			}
			return nil
		},
	}
}

// firstCertificate returns the DER bytes of the first certificate in the
// PEM text b, nil if there is none.
func firstCertificate(b []byte) []byte {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil
		}
		if block.Type == "CERTIFICATE" {
			return block.Bytes
		}
	}
}
