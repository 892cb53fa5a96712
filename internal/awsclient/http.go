package awsclient

import (
	"net"
	"net/http"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// newHTTPClient returns the SDK's buildable client with bounded dials,
// handshakes and whole-request time, and enough idle connections for the
// concurrent batch calls the worker and publisher make.
func newHTTPClient(timeout time.Duration) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithTimeout(timeout).
		WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = 5 * time.Second
			d.KeepAlive = 30 * time.Second
		}).
		WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns = 256
			tr.MaxIdleConnsPerHost = 64
			tr.IdleConnTimeout = 90 * time.Second
			tr.TLSHandshakeTimeout = 5 * time.Second
			tr.ResponseHeaderTimeout = 0 // long polls hold the header back
		})
}
