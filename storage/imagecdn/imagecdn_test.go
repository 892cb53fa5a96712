package imagecdn

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

func reason(t *testing.T, err error) string {
	t.Helper()
	var re *pipeline.ImageRejectedError
	require.True(t, errors.As(err, &re), "%v", err)
	return re.Reason
}

func TestOnlyConfiguredHostsAndHTTPS(t *testing.T) {
	t.Parallel()
	g, err := New(Config{Hosts: []string{"img.example-market.test", ".cdn.example-market.test"}})
	require.NoError(t, err)
	ok := []string{"https://img.example-market.test/rooms/r1/m1.jpg", "https://a.cdn.example-market.test/x.png?sig=1"}
	for _, u := range ok {
		got, err := g.Admit(context.Background(), u)
		require.NoError(t, err, u)
		require.Equal(t, u, got)
	}
	bad := map[string]string{
		"http://img.example-market.test/x.jpg":             pipeline.ImageRejectScheme,
		"file:///etc/passwd":                               pipeline.ImageRejectScheme,
		"gopher://img.example-market.test/":                pipeline.ImageRejectScheme,
		"https://169.254.169.254/latest/meta-data/":        pipeline.ImageRejectHost,
		"https://10.0.0.1/x.jpg":                           pipeline.ImageRejectHost,
		"https://[::1]/x.jpg":                              pipeline.ImageRejectHost,
		"https://img.example-market.test.evil.com/x.jpg":   pipeline.ImageRejectHost,
		"https://evilimg.example-market.test/x.jpg":        pipeline.ImageRejectHost,
		"https://user:pw@img.example-market.test/x.jpg":    pipeline.ImageRejectHost,
		"https://cdn.example-market.test/x.jpg":            pipeline.ImageRejectHost, // the suffix needs a subdomain
		"https://metadata.google.internal/computeMetadata": pipeline.ImageRejectHost,
	}
	for u, want := range bad {
		_, err := g.Admit(context.Background(), u)
		require.Equal(t, want, reason(t, err), u)
	}
	none, err := New(Config{})
	require.NoError(t, err)
	_, err = none.Admit(context.Background(), ok[0])
	require.Equal(t, pipeline.ImageRejectHost, reason(t, err), "no hosts configured: no image")
	_, err = New(Config{Hosts: []string{"https://x"}})
	require.Error(t, err)
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.White)
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

func TestInlineFetchesSniffsAndBounds(t *testing.T) {
	t.Parallel()
	pic := pngBytes(t)
	var other *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("/ok.png", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain") // the header is not trusted; the bytes are
		_, _ = w.Write(pic)
	})
	mux.HandleFunc("/page.jpg", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html><body>hi</body></html>")) })
	mux.HandleFunc("/big.png", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(append(pic, make([]byte, 4096)...)) })
	mux.HandleFunc("/away.png", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/ok.png", http.StatusFound)
	})
	mux.HandleFunc("/missing.png", http.NotFound)
	mux.HandleFunc("/slow.png", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	other = httptest.NewServer(mux)
	t.Cleanup(other.Close)
	// Both servers are on 127.0.0.1; "localhost" is the allowed host and
	// the other is reached by IP, which the host rule refuses.
	host := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	g, err := New(Config{Hosts: []string{"localhost"}, Inline: true, MaxBytes: int64(len(pic)) + 100, Timeout: time.Second, AllowPrivate: true})
	require.NoError(t, err)
	got, err := g.Admit(context.Background(), host+"/ok.png")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(got, "data:image/png;base64,"), got)
	for path, want := range map[string]string{"/page.jpg": pipeline.ImageRejectType, "/big.png": pipeline.ImageRejectSize,
		"/away.png": pipeline.ImageRejectHost, "/missing.png": pipeline.ImageRejectFetch, "/slow.png": pipeline.ImageRejectFetch} {
		_, err := g.Admit(context.Background(), host+path)
		require.Equal(t, want, reason(t, err), "%s: %v", path, err)
	}

	// Without AllowPrivate, a name that resolves to loopback is refused
	// when the connection is dialled, after DNS.
	strict, err := New(Config{Hosts: []string{"localhost"}, Inline: true, MaxBytes: 1 << 20, Timeout: time.Second})
	require.NoError(t, err)
	_, err = strict.Admit(context.Background(), strings.Replace(host, "http://", "https://", 1)+"/ok.png")
	require.Equal(t, pipeline.ImageRejectAddress, reason(t, err))
}
