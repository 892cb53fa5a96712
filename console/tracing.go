package console

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracer names the console's own spans.
var tracer = otel.Tracer("github.com/chatguard/chatguard/console")

// reviewAPI is the path prefix of the on-demand review API, the only part
// of the console that is traced.
const reviewAPI = "/v1/reviews"

// traced wraps the console's handler in OpenTelemetry's HTTP server
// instrumentation (otelhttp) for the on-demand review API only: a request
// that carries a traceparent header is continued, and the review it
// starts is a child of its span. The other pages are not traced: their
// paths name accounts and campaigns (otelhttp records url.path), and a
// page view is not what a trace is for. The W3C format whatever the
// process's global propagator, as on the queues.
func traced(h http.Handler) http.Handler {
	return hidePeer(otelhttp.NewHandler(restorePeer(h), "console",
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithFilter(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, reviewAPI) }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Method == http.MethodPost {
				return "POST " + reviewAPI
			}
			return r.Method + " " + reviewAPI + "/{id}/events"
		})))
}

// peerHeaders are the request headers that say who is asking (address,
// browser) and that otelhttp would copy into a span.
var peerHeaders = []string{"User-Agent", "X-Forwarded-For", "X-Real-Ip", "Forwarded"}

// peerKey keys a traced request's own address and headers in its context.
type peerKey struct{}

type peer struct {
	remote string
	header http.Header
}

// hidePeer keeps the moderator's address and browser out of the server
// span (otelhttp records client.address, network.peer.address and
// user_agent.original): a traced request reaches otelhttp without them,
// and restorePeer gives them back to the console's own handler.
func hidePeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, reviewAPI) {
			next.ServeHTTP(w, r)
			return
		}
		bare := r.WithContext(context.WithValue(r.Context(), peerKey{}, peer{remote: r.RemoteAddr, header: r.Header}))
		bare.RemoteAddr, bare.Header = "", r.Header.Clone()
		for _, k := range peerHeaders {
			bare.Header.Del(k)
		}
		next.ServeHTTP(w, bare)
	})
}

// restorePeer undoes hidePeer inside otelhttp's span.
func restorePeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := r.Context().Value(peerKey{}).(peer); ok {
			r = r.WithContext(r.Context())
			r.RemoteAddr, r.Header = p.remote, p.header
		}
		next.ServeHTTP(w, r)
	})
}

// startReviewSpan starts an on-demand review's span as a child of parent
// (the request's span, which may have ended when the client went away):
// the stages and model attempts are its children. The room is not named.
func startReviewSpan(ctx context.Context, parent trace.SpanContext) (context.Context, trace.Span) {
	if !parent.IsSampled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer.Start(trace.ContextWithSpanContext(ctx, parent), "on-demand review",
		trace.WithAttributes(attribute.String("chatguard.review.source", "ondemand")))
}
