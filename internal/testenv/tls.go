package testenv

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lock/locktest"
)

// TLSFiles are a throwaway CA and a server certificate it signed, for
// 127.0.0.1 and localhost, as PEM files in a test's temporary directory.
type TLSFiles struct {
	CA, Cert, Key string
}

// NewTLSFiles generates a CA and a server certificate signed by it.
func NewTLSFiles(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "seckill test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server.key")}
	for path, block := range map[string]*pem.Block{
		f.CA:   {Type: "CERTIFICATE", Bytes: caDER},
		f.Cert: {Type: "CERTIFICATE", Bytes: der},
		f.Key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// TLSRedis is a private redis-server that serves TLS on TLSAddr, where
// only the ACL user User with Password may log in (the default user is
// off). Addr is its plain port, for the test's own setup.
type TLSRedis struct {
	Addr, TLSAddr  string
	User, Password string
	Files          TLSFiles
}

// StartRedisTLS starts redis-server with TLS (no client certificates
// asked) and the ACL user "seckill". It skips the test, saying why, when
// this redis-server was built without TLS.
func StartRedisTLS(t testing.TB) *TLSRedis {
	t.Helper()
	files := NewTLSFiles(t)
	port, tlsPort := FreePort(t), FreePort(t)
	dir := t.TempDir()
	s := &TLSRedis{
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		TLSAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort)),
		User:    "seckill", Password: "s3cret-" + strconv.Itoa(tlsPort), Files: files,
	}
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	p := &locktest.Process{
		Path: "redis-server", Log: filepath.Join(dir, "redis.log"),
		Args: []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", files.Cert, "--tls-key-file", files.Key,
			"--tls-ca-cert-file", files.CA, "--tls-auth-clients", "no"},
		Ready: func(ctx context.Context) error { return c.Ping(ctx).Err() },
	}
	err := p.Start(ctx, 10*time.Second)
	switch {
	case errors.Is(err, exec.ErrNotFound):
		t.Skipf("redis-server not installed: %v", err)
	case errors.Is(err, locktest.ErrExited) && logSays(p.Log, "tls"):
		t.Skipf("this redis-server has no TLS (built without BUILD_TLS=yes): %v", err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	// The service's user; then nobody else may log in, on either port.
	if err := c.Do(ctx, "ACL", "SETUSER", s.User, "on", ">"+s.Password, "~*", "&*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	if err := c.Do(ctx, "ACL", "SETUSER", "default", "off").Err(); err != nil {
		t.Fatalf("ACL SETUSER default off: %v", err)
	}
	return s
}

// logSays reports whether the log at path mentions s.
func logSays(path, s string) bool {
	log, _ := os.ReadFile(path)
	return bytes.Contains(log, []byte(s))
}
