// Package imagecdn vets chat image URLs against the marketplace's image
// CDN before a model server sees them (pipeline.ImageGate): only https
// URLs on configured hosts pass, and in inline mode the image is fetched
// here (bounded in time and size, no redirect to another host, every
// resolved address checked at dial time so DNS cannot point the fetch at
// the pod network) and handed to the model as a data: URL, so model
// servers never reach out at all.
package imagecdn

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Config says which image URLs may reach a model and how.
type Config struct {
	// Hosts are the allowed image hosts (exact, lower case), or suffix
	// patterns starting with "." (".cdn.example.com" allows any
	// subdomain). Empty rejects every image.
	Hosts []string
	// Inline fetches the image and sends it as a data: URL.
	Inline bool
	// MaxBytes bounds an inlined image.
	MaxBytes int64
	// Timeout bounds one fetch, connection included.
	Timeout time.Duration
	// AllowPrivate lets the fetch dial private and loopback addresses:
	// for tests against a local server only.
	AllowPrivate bool
}

// DefaultConfig inlines nothing and allows no host until Hosts is set.
func DefaultConfig() Config {
	return Config{MaxBytes: 5 << 20, Timeout: 5 * time.Second}
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	for _, h := range c.Hosts {
		if h == "" || h == "." || strings.ContainsAny(h, "/:@ *") || h != strings.ToLower(h) {
			errs = append(errs, fmt.Errorf("imagecdn: host %q: give a lower-case host name or .suffix", h))
		}
	}
	if c.Inline && (c.MaxBytes <= 0 || c.MaxBytes > 20<<20) {
		errs = append(errs, fmt.Errorf("imagecdn: max bytes %d is outside 1..20 MiB", c.MaxBytes))
	}
	if c.Inline && c.Timeout <= 0 {
		errs = append(errs, errors.New("imagecdn: timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Gate is a pipeline.ImageGate. It is safe for concurrent use.
type Gate struct {
	cfg    Config
	client *http.Client
}

var _ pipeline.ImageGate = (*Gate)(nil)

// New returns a gate for cfg.
func New(cfg Config) (*Gate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gate{cfg: cfg}
	dialer := &net.Dialer{Timeout: cfg.Timeout, Control: func(_, address string, _ syscall.RawConn) error {
		// Called with the resolved address of every connection attempt:
		// a host name that resolves (or re-resolves) to the pod network
		// is refused here, after DNS, where it cannot be raced.
		if cfg.AllowPrivate {
			return nil
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectAddress, Detail: "unparsable address"}
		}
		if !publicAddr(ap.Addr()) {
			return &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectAddress, Detail: "resolves to a non-public address"}
		}
		return nil
	}}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       30 * time.Second,
	}
	g.client = &http.Client{Transport: tr, Timeout: cfg.Timeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectFetch, Detail: "too many redirects"}
		}
		if err := g.check(req.URL); err != nil {
			return err
		}
		return nil
	}}
	return g, nil
}

// publicAddr reports whether a may be dialled for a chat's image: not
// loopback, private (RFC 1918, ULA), link-local (cloud metadata at
// 169.254.169.254), unspecified, multicast or CGNAT.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() {
		return false
	}
	return !netip.MustParsePrefix("100.64.0.0/10").Contains(a) && !netip.MustParsePrefix("0.0.0.0/8").Contains(a)
}

// check applies the scheme and host rules to u.
func (g *Gate) check(u *url.URL) error {
	if u.Scheme != "https" && !(g.cfg.AllowPrivate && u.Scheme == "http") {
		return &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectScheme, Detail: fmt.Sprintf("scheme %q", u.Scheme)}
	}
	if u.User != nil {
		return &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectHost, Detail: "credentials in the URL"}
	}
	host := strings.ToLower(u.Hostname())
	if _, err := netip.ParseAddr(host); err == nil {
		return &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectHost, Detail: "an IP address, not an image host"}
	}
	for _, h := range g.cfg.Hosts {
		if host == h || (strings.HasPrefix(h, ".") && strings.HasSuffix(host, h)) {
			return nil
		}
	}
	return &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectHost, Detail: fmt.Sprintf("host %q is not an image host", host)}
}

// Admit implements pipeline.ImageGate.
func (g *Gate) Admit(ctx context.Context, rawURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return "", &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectScheme, Detail: "not a URL"}
	}
	if err := g.check(u); err != nil {
		return "", err
	}
	if !g.cfg.Inline {
		return u.String(), nil
	}
	return g.fetch(ctx, u)
}

// inlineTypes are the image types the vision models take, by sniffed
// content type (never the server's Content-Type header).
var inlineTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

func (g *Gate) fetch(ctx context.Context, u *url.URL) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectFetch, Detail: "bad request"}
	}
	resp, err := g.client.Do(req)
	if err != nil {
		var re *pipeline.ImageRejectedError
		if errors.As(err, &re) {
			return "", re
		}
		return "", &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectFetch, Detail: fetchDetail(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectFetch, Detail: fmt.Sprintf("status %d", resp.StatusCode)}
	}
	if resp.ContentLength > g.cfg.MaxBytes {
		return "", &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectSize, Detail: fmt.Sprintf("%d bytes", resp.ContentLength)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, g.cfg.MaxBytes+1))
	if err != nil {
		return "", &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectFetch, Detail: fetchDetail(err)}
	}
	if int64(len(b)) > g.cfg.MaxBytes {
		return "", &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectSize, Detail: fmt.Sprintf("over %d bytes", g.cfg.MaxBytes)}
	}
	ct := http.DetectContentType(b)
	if !inlineTypes[ct] {
		return "", &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectType, Detail: fmt.Sprintf("content is %s", ct)}
	}
	return "data:" + ct + ";base64," + base64.StdEncoding.EncodeToString(b), nil
}

// fetchDetail describes a transport error without the URL (its query may
// carry a signed token).
func fetchDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}
