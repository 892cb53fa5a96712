package standin

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chatguard/chatguard/pipeline"
)

// StartChatAPI starts a private chat-history API (deploy/local/chatapi)
// serving rooms, and returns its base URL. It is stopped when t ends.
func StartChatAPI(t testing.TB, rooms map[string][]pipeline.ChatMessage) string {
	t.Helper()
	b, err := json.Marshal(rooms)
	if err != nil {
		t.Fatalf("standin: rooms: %v", err)
	}
	file := filepath.Join(t.TempDir(), "rooms.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatalf("standin: %v", err)
	}
	return Start(t, Build(t, ChatAPICommand), "--addr", "127.0.0.1:0", "--messages", file).URL
}

// StartChatAPILake starts a private chat-history API serving the rooms of a
// sample lake, and returns its base URL. It is stopped when t ends.
func StartChatAPILake(t testing.TB, lakeDir string) string {
	t.Helper()
	return Start(t, Build(t, ChatAPICommand), "--addr", "127.0.0.1:0", "--lake-dir", lakeDir).URL
}

// SampleLake writes a synthetic sample lake of rooms rooms over days days
// (deploy/local/sampledata's generator, deterministic for a seed) into
// fresh folders, and returns the lake and the ground-truth folders.
func SampleLake(t testing.TB, seed int64, rooms, days int) (lakeDir, truthDir string) {
	t.Helper()
	lakeDir, truthDir = t.TempDir(), t.TempDir()
	Run(t, 5*time.Minute, Build(t, GenlakeCommand), "--lake-dir", lakeDir, "--truth-dir", truthDir,
		"--seed", strconv.FormatInt(seed, 10), "--rooms", strconv.Itoa(rooms), "--days", strconv.Itoa(days))
	return lakeDir, truthDir
}

// Truth is one room of a sample lake's ground truth (groundtruth.jsonl).
// Tests read it only to choose rooms and to report agreement; the pipeline
// never reads it.
type Truth struct {
	RoomID         string            `json:"room_id"`
	Label          pipeline.Label    `json:"label"`
	Category       pipeline.Category `json:"category"`
	Scenario       string            `json:"scenario"`
	Images         int               `json:"images"`
	FirstMessageAt time.Time         `json:"first_message_at"`
	LastMessageAt  time.Time         `json:"last_message_at"`
}

// ReadTruth reads a sample lake's ground truth, in file order.
func ReadTruth(t testing.TB, truthDir string) []Truth {
	t.Helper()
	f, err := os.Open(filepath.Join(truthDir, "groundtruth.jsonl"))
	if err != nil {
		t.Fatalf("standin: truth: %v", err)
	}
	defer f.Close()
	var out []Truth
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r Truth
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("standin: truth: %v", err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("standin: truth: %v", err)
	}
	return out
}
