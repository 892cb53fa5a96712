// Package chatapi is a development stand-in for the marketplace's
// chat-history HTTP API. It is not the real service: it serves the synthetic
// sample lake (see deploy/local/sampledata) from memory, and it can inject
// faults so that the worker's chat client can be tested against 5xx answers,
// throttling, stalls and dropped connections.
//
// Endpoints:
//
//	GET /rooms/{room_id}/messages?from=RFC3339&to=RFC3339  → 200 pipeline.ChatHistory
//	POST /rooms/{room_id}/messages  (pipeline.ChatMessage)  → 201, 403 when the sender is restricted
//	GET /actions                                           → 200 ActionState
//	GET /healthz                                           → 200 {"status":"ok"}
//
// Messages are returned when from <= sent_at < to, oldest first. An unknown
// room is a 404 and a missing, malformed or empty window a 400, both with a
// JSON body {"error": "..."}.
//
// Faults: a request header X-Chatapi-Fault with one of 500, 503, 429, timeout
// or reset forces that failure for that request only; Config.FaultRate (or
// SetFault at run time) fails that fraction of requests with Config.FaultKind.
//
// Protective actions: Apply (and a Consumer on the actions queue) applies
// chatguard's actions as the chat service would; see actions.go.
package chatapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/internal/clock"
	"github.com/chatguard/chatguard/pipeline"
)

// FaultHeader is the request header that forces a fault for one request.
const FaultHeader = "X-Chatapi-Fault"

// Fault kinds, as used in FaultHeader and Config.FaultKind.
const (
	Fault500     = "500"     // 500 Internal Server Error
	Fault503     = "503"     // 503 Service Unavailable with Retry-After: 1
	Fault429     = "429"     // 429 Too Many Requests with Retry-After: 1
	FaultTimeout = "timeout" // stall until the client gives up (or TimeoutStall passes, then 504)
	FaultReset   = "reset"   // drop the connection without an answer
)

var faultKinds = []string{Fault500, Fault503, Fault429, FaultTimeout, FaultReset}

// Config configures the stand-in. Exactly one of LakeDir and Messages must
// be set.
type Config struct {
	// LakeDir is a sample lake root to load messages from.
	LakeDir string
	// Messages, keyed by room id, is served as is (sorted by sent_at on New);
	// handy in tests that need hand-made rooms.
	Messages map[string][]pipeline.ChatMessage
	// FaultRate is the fraction (0..1) of history requests that fail with
	// FaultKind; 0 disables random faults.
	FaultRate float64
	// FaultKind is the failure FaultRate injects; default 503.
	FaultKind string
	// FaultSeed seeds the random fault draws so that a test run is repeatable.
	FaultSeed int64
	// TimeoutStall bounds how long a timeout fault stalls before answering
	// 504; default 30s. The stall also ends when the client goes away.
	TimeoutStall time.Duration
	// ActionsJournal, when set, is a file that records every action key
	// applied and is read back on New, so that a restarted stand-in still
	// applies each key once.
	ActionsJournal string
	// Clock is the stand-in's clock for notices, expiries and
	// restrictions (nil: the wall clock).
	Clock clock.Clock
}

func (c Config) withDefaults() Config {
	if c.FaultKind == "" {
		c.FaultKind = Fault503
	}
	if c.TimeoutStall == 0 {
		c.TimeoutStall = 30 * time.Second
	}
	return c
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if (c.LakeDir == "") == (c.Messages == nil) {
		errs = append(errs, errors.New("set exactly one of lake dir and messages"))
	}
	if err := validFault(c.FaultKind, c.FaultRate); err != nil {
		errs = append(errs, err)
	}
	if c.TimeoutStall < 0 {
		errs = append(errs, fmt.Errorf("timeout stall %s is negative", c.TimeoutStall))
	}
	return errors.Join(errs...)
}

func validFault(kind string, rate float64) error {
	var errs []error
	if !(rate >= 0 && rate <= 1) {
		errs = append(errs, fmt.Errorf("fault rate %v is outside 0..1", rate))
	}
	if kind != "" && !slices.Contains(faultKinds, kind) {
		errs = append(errs, fmt.Errorf("fault kind %q is not one of %v", kind, faultKinds))
	}
	return errors.Join(errs...)
}

// Stats counts what the server answered, for tests that assert on retries.
type Stats struct {
	Requests int64 // history requests received
	Served   int64 // answered 200
	Faults   int64 // failed by injection (header or rate)
}

// Server serves chat histories from memory. It is safe for concurrent use.
type Server struct {
	// roomsMu guards the map; a room's slice is never changed in place
	// (Add replaces it), so a handler may encode one after unlocking.
	roomsMu sync.RWMutex
	rooms   map[string][]pipeline.ChatMessage
	stall   time.Duration

	mu        sync.Mutex
	rng       *rand.Rand
	faultRate float64
	faultKind string

	requests, served, faults atomic.Int64

	clk clock.Clock
	// actMu guards act; it is taken before roomsMu, never after.
	actMu sync.Mutex
	act   actionState

	fetchMu sync.Mutex
	fetches []Fetch
}

// Fetch is one answered history request: the room, its window and the ids
// of the messages answered.
type Fetch struct {
	RoomID   string
	From, To time.Time
	IDs      []string
}

// Fetches returns the history requests answered so far, in order: the
// fetch log a benchmark counts coverage from.
func (s *Server) Fetches() []Fetch {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	return slices.Clone(s.fetches)
}

// New loads the messages and returns a server. It fails on an invalid
// configuration or a lake that cannot be read.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("chatapi: %w", err)
	}
	rooms := cfg.Messages
	if cfg.LakeDir != "" {
		var err error
		if rooms, err = sampledata.LoadMessages(cfg.LakeDir); err != nil {
			return nil, fmt.Errorf("chatapi: %w", err)
		}
	} else {
		// Copy so that sorting never touches the caller's slices.
		cp := make(map[string][]pipeline.ChatMessage, len(rooms))
		for id, ms := range rooms {
			cp[id] = slices.Clone(ms)
		}
		rooms = cp
	}
	for _, ms := range rooms {
		for i := range ms {
			ms[i].SentAt = ms[i].SentAt.UTC()
		}
		slices.SortStableFunc(ms, func(a, b pipeline.ChatMessage) int {
			return cmp.Or(a.SentAt.Compare(b.SentAt), cmp.Compare(a.MessageID, b.MessageID))
		})
	}
	s := &Server{
		rooms:     rooms,
		stall:     cfg.TimeoutStall,
		rng:       rand.New(rand.NewPCG(uint64(cfg.FaultSeed), 0x6368617461706921)),
		faultRate: cfg.FaultRate,
		faultKind: cfg.FaultKind,
		clk:       clock.Or(cfg.Clock),
		act:       newActionState(),
	}
	if cfg.ActionsJournal != "" {
		if err := s.openJournal(cfg.ActionsJournal); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SetFault changes the random fault rate and kind at run time; kind "" keeps
// the current kind. It returns an error, changing nothing, when either is
// invalid.
func (s *Server) SetFault(rate float64, kind string) error {
	if err := validFault(kind, rate); err != nil {
		return fmt.Errorf("chatapi: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultRate = rate
	if kind != "" {
		s.faultKind = kind
	}
	return nil
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	return Stats{Requests: s.requests.Load(), Served: s.served.Load(), Faults: s.faults.Load()}
}

// Rooms returns the ids of every room served, sorted.
func (s *Server) Rooms() []string {
	s.roomsMu.RLock()
	defer s.roomsMu.RUnlock()
	ids := make([]string, 0, len(s.rooms))
	for id := range s.rooms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Add serves msgs in room roomID from now on, in sent_at order, as the
// chat service stores a message before it announces it: a replay adds a
// message here before it publishes the message's chat event. A message id
// already in its room is replaced, not doubled.
func (s *Server) Add(roomID string, msgs ...pipeline.ChatMessage) {
	s.roomsMu.Lock()
	defer s.roomsMu.Unlock()
	for _, m := range msgs {
		m.SentAt = m.SentAt.UTC()
		room := slices.DeleteFunc(slices.Clone(s.rooms[roomID]), func(o pipeline.ChatMessage) bool { return o.MessageID == m.MessageID })
		i, _ := slices.BinarySearchFunc(room, m, func(a, b pipeline.ChatMessage) int {
			return cmp.Or(a.SentAt.Compare(b.SentAt), cmp.Compare(a.MessageID, b.MessageID))
		})
		s.rooms[roomID] = slices.Insert(room, i, m)
	}
}

// Messages returns the messages of a room (notices included), oldest
// first; ok is false for a room not served.
func (s *Server) Messages(roomID string) ([]pipeline.ChatMessage, bool) {
	s.roomsMu.RLock()
	defer s.roomsMu.RUnlock()
	ms, ok := s.rooms[roomID]
	return slices.Clone(ms), ok
}

// hasRoom reports whether the room is served.
func (s *Server) hasRoom(roomID string) bool {
	s.roomsMu.RLock()
	defer s.roomsMu.RUnlock()
	_, ok := s.rooms[roomID]
	return ok
}

// remove takes the message with this id out of a room.
func (s *Server) remove(roomID, messageID string) {
	s.roomsMu.Lock()
	defer s.roomsMu.Unlock()
	if room, ok := s.rooms[roomID]; ok {
		s.rooms[roomID] = slices.DeleteFunc(slices.Clone(room), func(m pipeline.ChatMessage) bool { return m.MessageID == messageID })
	}
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /rooms/{room_id}/messages", s.history)
	mux.HandleFunc("POST /rooms/{room_id}/messages", s.post)
	mux.HandleFunc("GET /actions", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Actions()) })
	mux.HandleFunc("/rooms/{room_id}/messages", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	return mux
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if kind := s.faultFor(r); kind != "" {
		s.faults.Add(1)
		s.fail(w, r, kind)
		return
	}
	roomID := r.PathValue("room_id")
	from, to, err := parseWindow(r.URL.Query().Get("from"), r.URL.Query().Get("to"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.roomsMu.RLock()
	msgs, ok := s.rooms[roomID]
	s.roomsMu.RUnlock()
	if !ok {
		writeError(w, http.StatusNotFound, "room not found")
		return
	}
	lo, _ := slices.BinarySearchFunc(msgs, from, func(m pipeline.ChatMessage, t time.Time) int { return m.SentAt.Compare(t) })
	hi, _ := slices.BinarySearchFunc(msgs, to, func(m pipeline.ChatMessage, t time.Time) int { return m.SentAt.Compare(t) })
	// BinarySearchFunc returns the first index at or after the target even
	// among equal timestamps, which gives exactly from <= sent_at < to.
	out := pipeline.ChatHistory{RoomID: roomID, From: from, To: to, Messages: msgs[lo:hi:hi]}
	if out.Messages == nil {
		out.Messages = []pipeline.ChatMessage{}
	}
	s.served.Add(1)
	f := Fetch{RoomID: roomID, From: from, To: to, IDs: make([]string, len(out.Messages))}
	for i, m := range out.Messages {
		f.IDs[i] = m.MessageID
	}
	s.fetchMu.Lock()
	s.fetches = append(s.fetches, f)
	s.fetchMu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// post is the message intake (Post) over HTTP.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	var m pipeline.ChatMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&m); err != nil {
		writeError(w, http.StatusBadRequest, "not a chat message")
		return
	}
	if m.MessageID == "" || m.SenderID == "" || m.SentAt.IsZero() {
		writeError(w, http.StatusBadRequest, "message_id, sender_id and sent_at are required")
		return
	}
	switch err := s.Post(r.PathValue("room_id"), m); {
	case errors.Is(err, ErrRestricted):
		writeError(w, http.StatusForbidden, err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeJSON(w, http.StatusCreated, map[string]string{"message_id": m.MessageID})
	}
}

// faultFor decides whether this request fails: the header wins, then the
// random rate.
func (s *Server) faultFor(r *http.Request) string {
	if h := r.Header.Get(FaultHeader); h != "" {
		if slices.Contains(faultKinds, h) {
			return h
		}
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faultRate > 0 && s.rng.Float64() < s.faultRate {
		return s.faultKind
	}
	return ""
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, kind string) {
	switch kind {
	case Fault500:
		writeError(w, http.StatusInternalServerError, "injected fault")
	case Fault503:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "injected fault")
	case Fault429:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "injected fault")
	case FaultTimeout:
		t := time.NewTimer(s.stall)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
			writeError(w, http.StatusGatewayTimeout, "injected fault: stalled for "+s.stall.String())
		}
	case FaultReset:
		rc := http.NewResponseController(w)
		conn, _, err := rc.Hijack()
		if err != nil {
			// HTTP/2 cannot be hijacked; abort the stream instead.
			panic(http.ErrAbortHandler)
		}
		_ = conn.Close()
	}
}

// parseWindow parses the half-open window [from, to). Both bounds are
// required RFC 3339 instants and to must be after from.
func parseWindow(fromS, toS string) (time.Time, time.Time, error) {
	var errs []string
	parse := func(name, v string) time.Time {
		if v == "" {
			errs = append(errs, name+" is missing")
			return time.Time{}
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s is not an RFC 3339 time: %s", name, strconv.Quote(truncate(v, 64))))
			return time.Time{}
		}
		return t.UTC()
	}
	from, to := parse("from", fromS), parse("to", toS)
	if len(errs) == 0 && !to.After(from) {
		errs = append(errs, "to is not after from")
	}
	if len(errs) > 0 {
		return time.Time{}, time.Time{}, errors.New(strings.Join(errs, "; "))
	}
	return from, to, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
