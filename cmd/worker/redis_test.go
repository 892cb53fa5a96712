package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// selfSigned writes a CA certificate and its key as PEM files.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certFile, keyFile
}

func TestRedisTLSAndACLOptions(t *testing.T) {
	t.Parallel()
	plain := redisOptions{RedisAddr: "redis:6379"}
	tc, err := plain.tlsConfig()
	require.NoError(t, err)
	require.Nil(t, tc, "no TLS unless asked for")

	cert, key := selfSigned(t)
	o := redisOptions{RedisAddr: "redis:6379", RedisUsername: "chatguard", RedisPassword: "pw", RedisCAFile: cert,
		RedisCertFile: cert, RedisKeyFile: key, RedisServerName: "redis.internal"}
	require.NoError(t, o.validate())
	tc, err = o.tlsConfig()
	require.NoError(t, err)
	require.NotNil(t, tc.RootCAs)
	require.Len(t, tc.Certificates, 1)
	require.Equal(t, "redis.internal", tc.ServerName)
	c, err := o.client()
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, "chatguard", c.Options().Username)
	require.NotNil(t, c.Options().TLSConfig)

	require.ErrorContains(t, redisOptions{RedisCertFile: cert}.validate(), "go together")
	require.ErrorContains(t, redisOptions{RedisUsername: "u"}.validate(), "needs --redis-password")
	_, err = redisOptions{RedisCAFile: key}.tlsConfig()
	require.Error(t, err, "a key is not a CA")
}
