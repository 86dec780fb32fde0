package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// controllerManagerUser is a separate identity for the controller manager,
// so audit logs and tests can tell its writes (namespace cleanup, garbage
// collection, service accounts) apart from the test's own admin requests.
const controllerManagerUser = "system:kube-controller-manager"

const certValidity = 10 * 365 * 24 * time.Hour

// credentials are the files every component is pointed at. They are created
// on first start and reused afterwards, so a restarted control plane keeps
// accepting the tokens and service-account tokens it issued before.
type credentials struct {
	caFile                 string
	caPEM                  []byte
	caKey                  crypto.Signer
	caCert                 *x509.Certificate
	caCreated              bool
	serverCertFile         string
	serverKeyFile          string
	saKeyFile, saPubFile   string
	tokenFile              string
	adminToken             string
	controllerManagerToken string
}

func ensureCredentials(dataDir, name string) (*credentials, error) {
	dir := filepath.Join(dataDir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &credentials{
		serverCertFile: filepath.Join(dir, "apiserver.crt"),
		serverKeyFile:  filepath.Join(dir, "apiserver.key"),
		saKeyFile:      filepath.Join(dir, "sa.key"),
		saPubFile:      filepath.Join(dir, "sa.pub"),
		tokenFile:      filepath.Join(dir, "tokens.csv"),
	}
	var err error
	if err = c.ensureCA(filepath.Join(dataDir, "ca.crt"), filepath.Join(dir, "ca.key"), name); err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	if err = c.ensureServingCert(name); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if err = c.ensureServiceAccountKey(); err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}
	if c.adminToken, err = ensureToken(filepath.Join(dir, "admin.token")); err != nil {
		return nil, err
	}
	if c.controllerManagerToken, err = ensureToken(filepath.Join(dir, "controller-manager.token")); err != nil {
		return nil, err
	}
	// Both identities are in system:masters: the controller manager runs
	// without per-controller service accounts and needs to delete anything.
	tokens := fmt.Sprintf("%s,ferry-admin,ferry-admin,system:masters\n%s,%s,%s,system:masters\n",
		c.adminToken, c.controllerManagerToken, controllerManagerUser, controllerManagerUser)
	if err := os.WriteFile(c.tokenFile, []byte(tokens), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *credentials) ensureCA(certFile, keyFile, name string) error {
	c.caFile = certFile
	if exists(certFile) && exists(keyFile) {
		cert, key, err := loadCertAndKey(certFile, keyFile)
		if err != nil {
			return err
		}
		c.caCert, c.caKey = cert, key
		c.caPEM, err = os.ReadFile(certFile)
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: name + "-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	c.caCert, err = x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	c.caKey = key
	c.caCreated = true
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return writeCertAndKey(certFile, keyFile, c.caPEM, key)
}

func (c *credentials) ensureServingCert(name string) error {
	if !c.caCreated && exists(c.serverCertFile) && exists(c.serverKeyFile) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: name + "-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{
			"localhost",
			"kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local",
		},
		// 10.0.0.1 is the "kubernetes" Service IP in --service-cluster-ip-range.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.caCert, key.Public(), c.caKey)
	if err != nil {
		return err
	}
	return writeCertAndKey(c.serverCertFile, c.serverKeyFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key)
}

func (c *credentials) ensureServiceAccountKey() error {
	if exists(c.saKeyFile) && exists(c.saPubFile) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writeKey(c.saKeyFile, key); err != nil {
		return err
	}
	return os.WriteFile(c.saPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

func ensureToken(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	t := hex.EncodeToString(buf)
	return t, os.WriteFile(path, []byte(t+"\n"), 0o600)
}

func writeCertAndKey(certFile, keyFile string, certPEM []byte, key crypto.Signer) error {
	if err := writeKey(keyFile, key); err != nil {
		return err
	}
	return os.WriteFile(certFile, certPEM, 0o644)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func loadCertAndKey(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("%s: no PEM data", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	block, _ = pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("%s: no PEM data", keyFile)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a signing key", keyFile)
	}
	return cert, signer, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
