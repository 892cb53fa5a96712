package integration_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/internal/stacktest"
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/storage/chatapi"
)

// sampleRoom is one room of the sample lake's ground truth.
type sampleRoom struct {
	RoomID         string    `json:"room_id"`
	Label          string    `json:"label"`
	FirstMessageAt time.Time `json:"first_message_at"`
	LastMessageAt  time.Time `json:"last_message_at"`
}

// sampleRooms reads the first n rooms (every room for n < 0) of the ground
// truth the stack wrote.
func sampleRooms(t *testing.T, n int) []sampleRoom {
	t.Helper()
	f, err := os.Open(filepath.Join(stacktest.TruthDir(t), "groundtruth.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var rooms []sampleRoom
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for (n < 0 || len(rooms) < n) && sc.Scan() {
		var r sampleRoom
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		rooms = append(rooms, r)
	}
	require.NoError(t, sc.Err())
	if n >= 0 {
		require.Len(t, rooms, n, "the sample lake has fewer rooms than the test needs")
	}
	require.NotEmpty(t, rooms)
	return rooms
}

func TestChatAPIHistoryOfSampleRoomAndUnknownRoom(t *testing.T) {
	t.Parallel()
	cfg := chatapi.DefaultConfig()
	cfg.BaseURL = stacktest.ChatAPIURL(t)
	c, err := chatapi.New(cfg)
	require.NoError(t, err)
	ctx := ctxFor(t, 30*time.Second)

	for _, room := range sampleRooms(t, 3) {
		msgs, err := c.History(ctx, room.RoomID, room.FirstMessageAt, room.LastMessageAt.Add(time.Millisecond))
		require.NoError(t, err, room.RoomID)
		require.NotEmpty(t, msgs, room.RoomID)
		require.True(t, msgs[0].SentAt.Equal(room.FirstMessageAt), "first message at %s, want %s", msgs[0].SentAt, room.FirstMessageAt)
		require.True(t, msgs[len(msgs)-1].SentAt.Equal(room.LastMessageAt), "last message at %s, want %s", msgs[len(msgs)-1].SentAt, room.LastMessageAt)
		for i, m := range msgs {
			require.NotEmpty(t, m.MessageID)
			if i > 0 {
				require.False(t, m.SentAt.Before(msgs[i-1].SentAt), "messages in time order")
			}
		}
	}

	_, err = c.History(ctx, "no-such-room", time.Now().Add(-time.Hour), time.Now())
	var perm *pipeline.PermanentError
	require.True(t, errors.As(err, &perm), "an unknown room is permanent, got %v", err)

	resp, err := http.Get(stacktest.ChatAPIURL(t) + "/rooms/no-such-room/messages?from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestLLMSimulatorsAnswerAndFallbackNeedsItsKey(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 30*time.Second)
	ask := func(llm stacktest.LLM, key string) (openai.ChatCompletionResponse, error) {
		cfg := openai.DefaultConfig(key)
		cfg.BaseURL = llm.BaseURL
		return openai.NewClientWithConfig(cfg).CreateChatCompletion(ctx, openai.ChatCompletionRequest{
			Model:    llm.Model,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hello"}},
		})
	}
	primary, fallback := stacktest.Primary(t), stacktest.Fallback(t)
	require.Empty(t, primary.APIKey)
	require.NotEqual(t, primary.BaseURL, fallback.BaseURL)

	resp, err := ask(primary, "")
	require.NoError(t, err)
	require.NotEmpty(t, resp.Choices)
	require.Equal(t, primary.Model, resp.Model)

	_, err = ask(fallback, "wrong-key")
	var apiErr *openai.APIError
	require.True(t, errors.As(err, &apiErr), "want an API error, got %v", err)
	require.Equal(t, http.StatusUnauthorized, apiErr.HTTPStatusCode)

	resp, err = ask(fallback, fallback.APIKey)
	require.NoError(t, err)
	require.NotEmpty(t, resp.Choices)
	require.Equal(t, fallback.Model, resp.Model)

	for _, llm := range []stacktest.LLM{primary, fallback} {
		r, err := http.Get(llm.AdminURL + "/config")
		require.NoError(t, err)
		var cfg struct{ Name string }
		require.NoError(t, json.NewDecoder(r.Body).Decode(&cfg))
		r.Body.Close()
		require.Equal(t, http.StatusOK, r.StatusCode)
		require.NotEmpty(t, cfg.Name)
	}
}
