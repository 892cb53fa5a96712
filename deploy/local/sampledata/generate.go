package sampledata

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// Defaults for the zero fields of Options.
const (
	DefaultRooms = 5000
	DefaultDays  = 3
)

// DefaultStart is the first instant of the default data range.
var DefaultStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// Limits that keep a mistyped flag from filling the disk.
const (
	maxRooms = 1_000_000
	maxDays  = 366
)

// Options says what Generate writes and where. Zero Rooms, Days and Start
// take the defaults (5,000 rooms, 3 days from 2026-11-01T00:00Z); Seed is
// used as is, zero included.
type Options struct {
	// LakeDir is the root of the lake (the S3 bucket "lake"); Generate
	// replaces its chat/rooms and chat/messages trees and nothing else.
	LakeDir string
	// TruthDir receives groundtruth.jsonl. It must not be inside LakeDir:
	// the labels must never be visible to anything that reads the lake.
	TruthDir string
	Seed     int64
	Rooms    int
	Start    time.Time
	Days     int
}

func (o Options) withDefaults() Options {
	if o.Rooms == 0 {
		o.Rooms = DefaultRooms
	}
	if o.Days == 0 {
		o.Days = DefaultDays
	}
	if o.Start.IsZero() {
		o.Start = DefaultStart
	}
	o.Start = o.Start.UTC()
	return o
}

// Validate reports every problem with the options at once.
func (o Options) Validate() error {
	var errs []error
	if o.LakeDir == "" {
		errs = append(errs, errors.New("lake dir is missing"))
	}
	if o.TruthDir == "" {
		errs = append(errs, errors.New("truth dir is missing"))
	}
	if o.LakeDir != "" && o.TruthDir != "" {
		lake, err1 := filepath.Abs(o.LakeDir)
		truth, err2 := filepath.Abs(o.TruthDir)
		if err := errors.Join(err1, err2); err != nil {
			errs = append(errs, err)
		} else if rel, err := filepath.Rel(lake, truth); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
			errs = append(errs, fmt.Errorf("truth dir %q is inside the lake dir %q: labels would leak into the lake", o.TruthDir, o.LakeDir))
		}
	}
	if o.Rooms < 0 || o.Rooms > maxRooms {
		errs = append(errs, fmt.Errorf("rooms %d is outside 1..%d", o.Rooms, maxRooms))
	}
	if o.Days < 0 || o.Days > maxDays {
		errs = append(errs, fmt.Errorf("days %d is outside 1..%d", o.Days, maxDays))
	}
	return errors.Join(errs...)
}

// Summary describes what Generate wrote.
type Summary struct {
	Rooms      int
	Messages   int
	Images     int
	Injections int
	// From and To bound the data: every message has From <= sent_at < To.
	From, To   time.Time
	ByLabel    map[pipeline.Label]int
	ByCategory map[pipeline.Category]int
	// Files are the lake object keys written, relative to LakeDir with
	// forward slashes, sorted.
	Files []string
	// TruthFile is the path of the ground-truth file.
	TruthFile string
}

// Generate writes a synthetic chat lake and its ground truth. The same
// options always produce byte-identical files. It honours ctx between rooms
// and files; on error the lake may be partly written.
func Generate(ctx context.Context, opts Options) (Summary, error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return Summary{}, fmt.Errorf("sampledata: %w", err)
	}
	end := opts.Start.Add(time.Duration(opts.Days) * 24 * time.Hour)
	sum := Summary{
		Rooms: opts.Rooms, From: opts.Start, To: end,
		ByLabel: map[pipeline.Label]int{}, ByCategory: map[pipeline.Category]int{},
	}
	rooms := make([]generatedRoom, 0, opts.Rooms)
	for i := range opts.Rooms {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return Summary{}, fmt.Errorf("sampledata: %w", err)
			}
		}
		rooms = append(rooms, buildRoom(opts.Seed, i, opts.Start, end))
	}
	campaignRooms(rooms)
	sum.ByLabel, sum.ByCategory, sum.Messages, sum.Images, sum.Injections = tally(rooms)
	files, err := writeLake(ctx, opts.LakeDir, rooms)
	if err != nil {
		return Summary{}, fmt.Errorf("sampledata: %w", err)
	}
	sum.Files = files
	truthFile, err := writeTruth(opts.TruthDir, rooms)
	if err != nil {
		return Summary{}, fmt.Errorf("sampledata: %w", err)
	}
	sum.TruthFile = truthFile
	return sum, nil
}

// tally counts the rooms' labels, categories, messages, images and
// injection attempts for the summary.
func tally(rooms []generatedRoom) (labels map[pipeline.Label]int, cats map[pipeline.Category]int, msgs, images, injections int) {
	labels, cats = map[pipeline.Label]int{}, map[pipeline.Category]int{}
	for _, r := range rooms {
		msgs += len(r.messages)
		images += r.truth.Images
		if r.truth.Injection {
			injections++
		}
		labels[r.truth.Label]++
		cats[r.truth.Category]++
	}
	return labels, cats, msgs, images, injections
}

type generatedRoom struct {
	room     RoomRow
	messages []MessageRow
	truth    Truth
}

// hourWeights shapes when chats start: quiet at night, busy in the evening.
var hourWeights = [24]int{3, 2, 1, 1, 1, 1, 2, 3, 5, 6, 7, 8, 9, 8, 7, 7, 8, 9, 10, 11, 12, 11, 8, 5}

const imageHost = "https://img.example-market.test"

func buildRoom(seed int64, idx int, start, end time.Time) generatedRoom {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(idx)^0x9e3779b97f4a7c15))
	sc := pickScenario(r)
	english := r.Float64() < 0.2
	pool := items
	if sc.items != nil {
		pool = sc.items
	}
	it := pick(r, pool)
	g := newRoomGen(r, english, it, sc.label != pipeline.LabelClean)
	sc.run(g)

	roomID := fmt.Sprintf("room-%06d", idx+1)
	buyerID, sellerID := userID(r), userID(r)
	if sc.label != pipeline.LabelClean {
		if sc.abuser() == buyer {
			buyerID = abuserID(r)
		} else {
			sellerID = abuserID(r)
		}
	}
	for sellerID == buyerID {
		sellerID = userID(r)
	}

	offsets := timeline(r, g.msgs, end.Sub(start))
	total := offsets[len(offsets)-1]
	first := placeStart(r, start, end, total)

	lang := "ko"
	if english {
		lang = "en"
	}
	truth := Truth{
		RoomID: roomID, Label: sc.label, Category: sc.category, Severity: sc.severity,
		Scenario: sc.name, Language: lang, HardNegative: sc.hardNegative, Obfuscated: g.usedObf,
	}
	if g.sev != 0 {
		truth.Severity = g.sev
	}
	msgs := make([]MessageRow, len(g.msgs))
	for i, d := range g.msgs {
		m := MessageRow{
			RoomID:    roomID,
			MessageID: fmt.Sprintf("m%04d", i+1),
			SentAt:    first.Add(offsets[i]),
			Kind:      string(d.kind),
			Text:      d.text,
		}
		switch d.who {
		case buyer:
			m.SenderID, m.SenderRole = buyerID, string(pipeline.RoleBuyer)
		case seller:
			m.SenderID, m.SenderRole = sellerID, string(pipeline.RoleSeller)
		default:
			m.SenderID, m.SenderRole = "system", string(pipeline.RoleSystem)
		}
		if d.kind == pipeline.KindImage {
			m.ImageURL = fmt.Sprintf("%s/rooms/%s/%s-%s", imageHost, roomID, m.MessageID, d.image)
			truth.Images++
		}
		if d.evidence {
			truth.EvidenceMessageIDs = append(truth.EvidenceMessageIDs, m.MessageID)
		}
		if d.inject {
			truth.Injection = true
			truth.InjectionMessageIDs = append(truth.InjectionMessageIDs, m.MessageID)
		}
		msgs[i] = m
	}
	last := msgs[len(msgs)-1].SentAt
	truth.FirstMessageAt, truth.LastMessageAt = first, last
	room := RoomRow{
		RoomID:         roomID,
		ItemTitle:      it.ko,
		ItemCategory:   it.category,
		ItemPrice:      int64(it.price),
		BuyerID:        buyerID,
		SellerID:       sellerID,
		CreatedAt:      first.Add(-time.Duration(2+r.IntN(300)) * time.Second),
		FirstMessageAt: first,
		LastMessageAt:  last,
		MessageCount:   int32(len(msgs)),
		HasImages:      truth.Images > 0,
	}
	if english {
		room.ItemTitle = it.en
	}
	return generatedRoom{room: room, messages: msgs, truth: truth}
}

func pickScenario(r *rand.Rand) scenario {
	total := 0
	for _, s := range scenarios {
		total += s.weight
	}
	n := r.IntN(total)
	for _, s := range scenarios {
		if n < s.weight {
			return s
		}
		n -= s.weight
	}
	return scenarios[0]
}

// timeline returns each message's offset from the first one: seconds to
// minutes apart, with the long pauses a scenario asks for (and a few
// spontaneous ones) so that some rooms span several hours or days' edges.
func timeline(r *rand.Rand, msgs []draft, span time.Duration) []time.Duration {
	offs := make([]time.Duration, len(msgs))
	budget := span - time.Hour
	for i := 1; i < len(msgs); i++ {
		var gap time.Duration
		switch {
		case msgs[i].longGap:
			gap = time.Duration(20+r.IntN(460)) * time.Minute
		case r.Float64() < 0.04:
			gap = time.Duration(15+r.IntN(75)) * time.Minute
		default:
			// Mostly quick replies, sometimes a few minutes.
			gap = time.Duration(4+int(r.ExpFloat64()*45)) * time.Second
			if gap > 20*time.Minute {
				gap = 20 * time.Minute
			}
		}
		gap += time.Duration(r.IntN(1000)) * time.Millisecond
		if offs[i-1]+gap > budget {
			gap = time.Duration(1+r.IntN(30)) * time.Second
		}
		offs[i] = offs[i-1] + gap
	}
	return offs
}

// placeStart picks when a room's first message is sent so that the whole
// conversation fits in [start, end).
func placeStart(r *rand.Rand, start, end time.Time, dur time.Duration) time.Time {
	days := int(end.Sub(start) / (24 * time.Hour))
	total := 0
	for _, w := range hourWeights {
		total += w
	}
	n, hour := r.IntN(total), 0
	for h, w := range hourWeights {
		if n < w {
			hour = h
			break
		}
		n -= w
	}
	t := start.Add(time.Duration(r.IntN(max(days, 1)))*24*time.Hour +
		time.Duration(hour)*time.Hour +
		time.Duration(r.IntN(3600*1000))*time.Millisecond)
	if latest := end.Add(-dur - time.Second); t.After(latest) {
		t = latest.Add(-time.Duration(r.IntN(3600)) * time.Second)
	}
	if t.Before(start) {
		t = start
	}
	return t.Truncate(time.Millisecond)
}

func sortMessages(ms []MessageRow) {
	slices.SortFunc(ms, func(a, b MessageRow) int {
		return cmp.Or(a.SentAt.Compare(b.SentAt), cmp.Compare(a.RoomID, b.RoomID), cmp.Compare(a.MessageID, b.MessageID))
	})
}
