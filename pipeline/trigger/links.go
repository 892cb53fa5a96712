package trigger

import (
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/chatguard/chatguard/pipeline"
)

// Bounds of the chat events' trace contexts kept for the windows' links.
const (
	// maxLinksPerRoom bounds the links of one window's span: past it, a
	// busy room's later events are not linked.
	maxLinksPerRoom = 16
	// maxLinkRooms bounds the rooms held; when full, every room's links
	// are forgotten at once (a window fired by another replica leaves its
	// room's entry here until then).
	maxLinkRooms = 10000
)

// eventLinks keeps, per room, the sampled trace contexts that the chat
// events this replica received carried in their traceparent attribute,
// until the room's window span links them. Only sampled contexts are
// kept: a chat service that traces nothing costs a map lookup per event.
// The state is this replica's memory, not Redis: a window claimed by
// another replica links the events that replica received.
type eventLinks struct {
	mu    sync.Mutex
	rooms map[string][]trace.SpanContext
}

// add keeps the event's trace context for its room's window, when attrs
// carry a sampled one.
func (l *eventLinks) add(room string, attrs map[string]pipeline.Attribute) {
	sc := pipeline.TraceContext(attrs)
	if !sc.IsSampled() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rooms == nil || len(l.rooms) >= maxLinkRooms {
		l.rooms = map[string][]trace.SpanContext{}
	}
	held := l.rooms[room]
	if len(held) >= maxLinksPerRoom {
		return
	}
	for _, h := range held {
		if h.Equal(sc) { // a redelivered event
			return
		}
	}
	l.rooms[room] = append(held, sc)
}

// take returns the links of room's window and forgets them.
func (l *eventLinks) take(room string) []trace.Link {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.rooms[room]
	if len(held) == 0 {
		return nil
	}
	delete(l.rooms, room)
	links := make([]trace.Link, len(held))
	for i, sc := range held {
		links[i] = trace.Link{SpanContext: sc}
	}
	return links
}
