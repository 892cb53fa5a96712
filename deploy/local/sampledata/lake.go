package sampledata

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/chatguard/chatguard/pipeline"
)

// Lake object key prefixes, relative to the lake root (the S3 bucket).
const (
	RoomsPrefix    = "chat/rooms"
	MessagesPrefix = "chat/messages"
	// TruthFileName is the ground-truth file Generate writes into TruthDir.
	TruthFileName = "groundtruth.jsonl"
	// VersionFileName is the file in TruthDir that names the generator
	// Version that wrote the lake.
	VersionFileName = "generator-version"
)

// Version names what Generate writes. It changes when the same options
// give other rooms (version 2: lakes of the stack's size hold a scam ring
// and a shop in the sample hour), so that a stack finding a lake of an
// older version writes it again (LakeVersion) instead of showing a
// newcomer a demo without them.
const Version = "2"

// LakeVersion is the generator version that wrote the lake whose truth is
// in truthDir: "" when the lake predates versions or was never written.
func LakeVersion(truthDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(truthDir, VersionFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sampledata: lake version: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// RoomRow is one row of the chat_rooms table. A room's row lives in the
// partition of its first message.
type RoomRow struct {
	RoomID         string    `parquet:"room_id"`
	ItemTitle      string    `parquet:"item_title"`
	ItemCategory   string    `parquet:"item_category,dict"`
	ItemPrice      int64     `parquet:"item_price"`
	BuyerID        string    `parquet:"buyer_id"`
	SellerID       string    `parquet:"seller_id"`
	CreatedAt      time.Time `parquet:"created_at,timestamp(millisecond)"`
	FirstMessageAt time.Time `parquet:"first_message_at,timestamp(millisecond)"`
	LastMessageAt  time.Time `parquet:"last_message_at,timestamp(millisecond)"`
	MessageCount   int32     `parquet:"message_count"`
	HasImages      bool      `parquet:"has_images"`
}

// MessageRow is one row of the chat_messages table, partitioned by the hour
// of sent_at. Text is null for image messages and ImageURL is null for
// everything else.
type MessageRow struct {
	RoomID     string    `parquet:"room_id"`
	MessageID  string    `parquet:"message_id"`
	SenderID   string    `parquet:"sender_id"`
	SenderRole string    `parquet:"sender_role,dict"`
	SentAt     time.Time `parquet:"sent_at,timestamp(millisecond)"`
	Kind       string    `parquet:"kind,dict"`
	Text       string    `parquet:"text,optional"`
	ImageURL   string    `parquet:"image_url,optional"`
}

// ChatMessage converts the row to the chat-history contract.
func (m MessageRow) ChatMessage() pipeline.ChatMessage {
	return pipeline.ChatMessage{
		MessageID:  m.MessageID,
		SenderID:   m.SenderID,
		SenderRole: pipeline.SenderRole(m.SenderRole),
		SentAt:     m.SentAt.UTC(),
		Kind:       pipeline.MessageKind(m.Kind),
		Text:       m.Text,
		ImageURL:   m.ImageURL,
	}
}

// Truth is the ground-truth label of one room. It lives outside the lake.
// Severity is 1-5 for abusive and suspicious rooms and 0 for clean ones.
type Truth struct {
	RoomID   string            `json:"room_id"`
	Label    pipeline.Label    `json:"label"`
	Category pipeline.Category `json:"category"`
	Severity int               `json:"severity"`
	// Scenario names the conversation template the room was drawn from.
	Scenario string `json:"scenario"`
	Language string `json:"language"`
	// HardNegative marks clean rooms built to look like abuse to a keyword filter.
	HardNegative bool `json:"hard_negative"`
	// Injection marks rooms with a prompt-injection attempt in the chat text.
	Injection bool `json:"injection"`
	// Obfuscated marks rooms whose abusive numbers or ids are written with
	// spaces, dots or Hangul digits.
	Obfuscated          bool      `json:"obfuscated"`
	EvidenceMessageIDs  []string  `json:"evidence_message_ids,omitempty"`
	InjectionMessageIDs []string  `json:"injection_message_ids,omitempty"`
	Images              int       `json:"images"`
	FirstMessageAt      time.Time `json:"first_message_at"`
	LastMessageAt       time.Time `json:"last_message_at"`
}

// partitionKey is the Hive partition path of an instant: dt=YYYY-MM-DD/hour=HH.
func partitionKey(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("dt=%s/hour=%02d", t.Format(time.DateOnly), t.Hour())
}

// writerOptions are fixed so that the same rows give the same bytes: the
// default created_by would embed the build's module version.
func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.Compression(&parquet.Zstd),
		parquet.CreatedBy("chatguard-sampledata", "1", ""),
		parquet.MaxRowsPerRowGroup(1 << 20),
	}
}

func writeLake(ctx context.Context, lakeDir string, rooms []generatedRoom) ([]string, error) {
	for _, p := range []string{RoomsPrefix, MessagesPrefix} {
		if err := os.RemoveAll(filepath.Join(lakeDir, filepath.FromSlash(p))); err != nil {
			return nil, fmt.Errorf("clear %s: %w", p, err)
		}
	}
	roomParts := map[string][]RoomRow{}
	msgParts := map[string][]MessageRow{}
	for _, r := range rooms {
		k := partitionKey(r.room.FirstMessageAt)
		roomParts[k] = append(roomParts[k], r.room)
		for _, m := range r.messages {
			k := partitionKey(m.SentAt)
			msgParts[k] = append(msgParts[k], m)
		}
	}
	var files []string
	for _, k := range slices.Sorted(maps.Keys(roomParts)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rows := roomParts[k]
		slices.SortFunc(rows, func(a, b RoomRow) int {
			return cmp.Or(a.FirstMessageAt.Compare(b.FirstMessageAt), cmp.Compare(a.RoomID, b.RoomID))
		})
		key := path.Join(RoomsPrefix, k, "part-00000.parquet")
		if err := writeParquet(lakeDir, key, rows); err != nil {
			return nil, err
		}
		files = append(files, key)
	}
	for _, k := range slices.Sorted(maps.Keys(msgParts)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rows := msgParts[k]
		sortMessages(rows)
		key := path.Join(MessagesPrefix, k, "part-00000.parquet")
		if err := writeParquet(lakeDir, key, rows); err != nil {
			return nil, err
		}
		files = append(files, key)
	}
	slices.Sort(files)
	return files, nil
}

func writeParquet[T any](lakeDir, key string, rows []T) (err error) {
	p := filepath.Join(lakeDir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	f, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", key, cerr)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := parquet.NewGenericWriter[T](bw, writerOptions()...)
	if _, err := w.Write(rows); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

func writeTruth(dir string, rooms []generatedRoom) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write truth: %w", err)
	}
	p := filepath.Join(dir, TruthFileName)
	var b strings.Builder
	for _, r := range rooms {
		line, err := json.Marshal(r.truth)
		if err != nil {
			return "", fmt.Errorf("write truth: %w", err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("write truth: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, VersionFileName), []byte(Version+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write truth: %w", err)
	}
	return p, nil
}

// LoadMessages reads every chat_messages file under lakeDir and returns each
// room's messages in chronological order (ties by message id). It fails if
// the lake has no message files.
func LoadMessages(lakeDir string) (map[string][]pipeline.ChatMessage, error) {
	rows, err := readTable[MessageRow](lakeDir, MessagesPrefix)
	if err != nil {
		return nil, fmt.Errorf("sampledata: load messages: %w", err)
	}
	sortMessages(rows)
	out := map[string][]pipeline.ChatMessage{}
	for _, m := range rows {
		out[m.RoomID] = append(out[m.RoomID], m.ChatMessage())
	}
	return out, nil
}

// LoadRooms reads every chat_rooms file under lakeDir, sorted by room id.
// It fails if the lake has no room files.
func LoadRooms(lakeDir string) ([]RoomRow, error) {
	rows, err := readTable[RoomRow](lakeDir, RoomsPrefix)
	if err != nil {
		return nil, fmt.Errorf("sampledata: load rooms: %w", err)
	}
	slices.SortFunc(rows, func(a, b RoomRow) int { return cmp.Compare(a.RoomID, b.RoomID) })
	for i := range rows {
		rows[i].CreatedAt = rows[i].CreatedAt.UTC()
		rows[i].FirstMessageAt = rows[i].FirstMessageAt.UTC()
		rows[i].LastMessageAt = rows[i].LastMessageAt.UTC()
	}
	return rows, nil
}

// LoadTruth reads the ground truth Generate wrote into truthDir, keyed by
// room id.
func LoadTruth(truthDir string) (map[string]Truth, error) {
	f, err := os.Open(filepath.Join(truthDir, TruthFileName))
	if err != nil {
		return nil, fmt.Errorf("sampledata: load truth: %w", err)
	}
	defer f.Close()
	out := map[string]Truth{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var t Truth
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return nil, fmt.Errorf("sampledata: load truth: line %d: %w", n, err)
		}
		out[t.RoomID] = t
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sampledata: load truth: %w", err)
	}
	return out, nil
}

func readTable[T any](lakeDir, prefix string) ([]T, error) {
	root := filepath.Join(lakeDir, filepath.FromSlash(prefix))
	var rows []T
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return nil
		}
		rs, err := parquet.ReadFile[T](p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		files++
		rows = append(rows, rs...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if files == 0 {
		return nil, errors.New("no parquet files under " + root)
	}
	return rows, nil
}

// WriteMessages writes rows into lakeDir as the chat_messages table lays
// them out, one file per sent_at hour (dt=YYYY-MM-DD/hour=HH/name.parquet),
// beside whatever the partitions already hold, and returns the keys it
// wrote in order. It is how a replay that moved the sample's messages onto
// wall time makes them visible to the sweep's Athena query. rows is
// reordered; name must be a plain file name.
func WriteMessages(lakeDir, name string, rows []MessageRow) ([]string, error) {
	if name == "" || name != path.Base(name) || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("sampledata: write messages: %q is not a file name", name)
	}
	parts := map[string][]MessageRow{}
	for _, m := range rows {
		k := partitionKey(m.SentAt)
		parts[k] = append(parts[k], m)
	}
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(parts)) {
		ms := parts[k]
		sortMessages(ms)
		key := path.Join(MessagesPrefix, k, name+".parquet")
		if err := writeParquet(lakeDir, key, ms); err != nil {
			return nil, fmt.Errorf("sampledata: %w", err)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// MessageRowOf is m as a chat_messages row of room.
func MessageRowOf(room string, m pipeline.ChatMessage) MessageRow {
	return MessageRow{RoomID: room, MessageID: m.MessageID, SenderID: m.SenderID, SenderRole: string(m.SenderRole),
		SentAt: m.SentAt.UTC(), Kind: string(m.Kind), Text: m.Text, ImageURL: m.ImageURL}
}
