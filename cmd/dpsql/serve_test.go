package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dpsql/dpsql/serve"
)

var servingRE = regexp.MustCompile(`on (https?://[0-9.:]+)/`)

// startServe runs `dpsql serve` in-process until the test ends and returns
// the URL it listens on.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb lockedBuffer
	done := make(chan int, 1)
	go func() {
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
		done <- m.Exec(ctx, append([]string{"serve"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("dpsql serve exited %d: %s", code, errb.String())
		}
	})
	for range 200 {
		if m := servingRE.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("dpsql serve exited %d: %s", code, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("dpsql serve did not start: %s %s", out.String(), errb.String())
	return ""
}

// The owner's commands and the analyst's remote query and shell, end to end.
func TestServeAnalystRemote(t *testing.T) {
	db := newClinicDB(t)
	mustRun(t, "protect", db, "patients", "--privacy-unit", "pid")
	mustFail(t, 2, "--scope is required", "analyst", "add", db, "alice")
	mustFail(t, 1, `scope "nope" does not exist`, "analyst", "add", db, "alice", "--scope", "nope")
	tok := strings.TrimSpace(mustRun(t, "analyst", "add", db, "alice", "--scope", "default"))
	if !strings.HasPrefix(tok, serve.TokenPrefix) || strings.Contains(tok, "\n") {
		t.Fatalf("analyst add printed %q, want the token alone", tok)
	}
	tokFile := filepath.Join(t.TempDir(), "alice.token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, "analyst", "list", db, "-f", "csv"); !strings.Contains(out, "alice,default,active,") {
		t.Errorf("analyst list: %q", out)
	}
	url := startServe(t, db, "--listen", "127.0.0.1:0")

	out := mustRun(t, "query", "--remote", url, "--token-file", tokFile, issueStatement, "-f", "csv")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || lines[0] != "sex,n,mean_bmi" {
		t.Errorf("remote query: %q", out)
	}
	mustFail(t, 1, "table patients is protected", "query", "--remote", url, "--token-file", tokFile, "SELECT * FROM patients")
	t.Setenv(tokenEnv, tok)
	r := run(t, "SELECT name FROM sqlite_schema WHERE name = 'patients';\n.budget\n.audit\n.tables\nSELECT * FROM patients;\n", "shell", "--remote", url, "-f", "csv")
	if r.code != 1 || !strings.Contains(r.stdout, "name\npatients\n") || !strings.Contains(r.stdout, "alice,default,2,") ||
		!strings.Contains(r.stdout, "table,access,column,type,bounds,public_keys,max_length\npatients,\"DP only; person = pid, max_groups 1, max_rows 1\",pid,") ||
		!strings.Contains(r.stdout, "for example:\nSELECT WITH DIFFERENTIAL_PRIVACY") ||
		!strings.Contains(r.stdout, "WITH DIFFERENTIAL_PRIVACY") || !strings.Contains(r.stderr, "Error: refused: table patients is protected") {
		t.Errorf("remote shell: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Setenv(tokenEnv, "")
	loose := filepath.Join(t.TempDir(), "loose.token")
	if err := os.WriteFile(loose, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if r := run(t, "", "query", "--remote", url, "--token-file", loose, "SELECT 1"); r.code != 0 || !strings.Contains(r.stderr, "readable by other users") {
		t.Errorf("a token file others can read: exit %d, stderr %q", r.code, r.stderr)
	}
	mustFail(t, 2, "needs a token", "query", "--remote", url, "SELECT 1")
	mustFail(t, 2, "does not go with --remote", "query", "--remote", url, "--token-file", tokFile, "--scope", "x", "SELECT 1")
	mustFail(t, 2, "plain http is allowed only to loopback", "query", "--remote", "http://192.0.2.1:8642", "--token-file", tokFile, "SELECT 1")
	mustFail(t, 2, "--token-file goes with --remote", "query", db, "--token-file", tokFile, "SELECT 1")
	mustFail(t, 2, "too many arguments", "shell", "--remote", url, "--token-file", tokFile, db)

	if out := mustRun(t, "analyst", "revoke", db, "alice"); !strings.Contains(out, "revoked account alice") {
		t.Errorf("revoke: %q", out)
	}
	mustFail(t, 1, "not that of an active account", "query", "--remote", url, "--token-file", tokFile, "SELECT 1")
	if out := mustRun(t, "analyst", "list", db, "-f", "csv"); !strings.Contains(out, "alice,default,revoked,") {
		t.Errorf("analyst list after revoke: %q", out)
	}
	mustFail(t, 1, "no such active account", "analyst", "revoke", db, "alice")
	mustRun(t, "query", db, "UPDATE dp_account SET revoked_at = NULL")
	mustFail(t, 1, `dp_account does not match the account records of the ledger's chain: account "alice" differs`, "analyst", "list", db)
	mustFail(t, 1, `analyst account verification failed: dp_account does not match`, "audit", "verify", db)
}

// Off loopback the service needs TLS; with a certificate it serves https.
func TestServeTLS(t *testing.T) {
	db := newClinicDB(t)
	mustFail(t, 2, "needs TLS", "serve", db, "--listen", "0.0.0.0:0")
	mustFail(t, 2, "needs TLS", "serve", db, "--listen", ":0")
	mustFail(t, 2, "both --tls-cert and --tls-key", "serve", db, "--tls-cert", "x.pem")
	tok := strings.TrimSpace(mustRun(t, "analyst", "add", db, "alice", "--scope", "default"))
	cert, key, pool := selfSigned(t)
	url := startServe(t, db, "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("serving on %s", url)
	}
	cl := &serve.Client{URL: url, Token: tok, HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	b, err := cl.Budget(context.Background())
	if err != nil || b.Scope != "default" {
		t.Fatalf("budget over TLS: %+v, %v", b, err)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (string, string, *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dpsql test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}
