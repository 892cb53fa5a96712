package pipeline

import (
	"context"
	"fmt"
)

// ImageGate decides what of a chat image a model server may see. Image
// URLs are chat input: sent as they are, a model server would fetch
// whatever the chat says (file://, internal addresses, cloud metadata).
type ImageGate interface {
	// Admit returns the URL to put in the model request for rawURL: the
	// URL itself when its scheme and host are allowed, or a data: URL of
	// the fetched image when the gate inlines. It returns an
	// *ImageRejectedError when the image may not be sent, and honours ctx
	// (a cancelled ctx is a rejection with reason "fetch").
	Admit(ctx context.Context, rawURL string) (string, error)
}

// The reasons an image is rejected (a small fixed set: a metric label).
const (
	ImageRejectScheme  = "scheme"  // not https (or not http(s) at all)
	ImageRejectHost    = "host"    // not a configured image host
	ImageRejectAddress = "address" // resolves to a private, loopback or link-local address
	ImageRejectSize    = "size"    // larger than the limit
	ImageRejectType    = "type"    // not an image type the models take
	ImageRejectFetch   = "fetch"   // the fetch failed (status, timeout, redirect elsewhere)
)

// ImageRejectedError says why an image was not sent to a model. It is
// never fatal to a review: the image is left out and recorded.
type ImageRejectedError struct {
	Reason string // one of the ImageReject constants
	Detail string // for the verdict; no URL query strings
}

func (e *ImageRejectedError) Error() string {
	return fmt.Sprintf("image rejected (%s): %s", e.Reason, e.Detail)
}
