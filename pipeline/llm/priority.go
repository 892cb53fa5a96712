package llm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/chatguard/chatguard/pipeline"
)

// priorityKey carries an attempt's server priority (a pool with
// PoolConfig.ServerPriority) to the pool's HTTP client, since go-openai's
// request has no field for it.
type priorityKey struct{}

// priority returns ctx carrying class's rank as the server priority when
// the pool sends one, else ctx.
func (p *pool) priority(ctx context.Context, class pipeline.Class) context.Context {
	if !p.cfg.ServerPriority {
		return ctx
	}
	return context.WithValue(ctx, priorityKey{}, class.Rank())
}

// withPriority adds `"priority":n` to the JSON object req sends. The body
// is go-openai's encoding of a chat request: an object, whose opening
// brace the field goes right after (JSON allows any member order).
func withPriority(req *http.Request, n int) error {
	if req.Body == nil {
		return nil
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return fmt.Errorf("priority: read body: %w", err)
	}
	rest, ok := bytes.CutPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{"))
	if !ok {
		return fmt.Errorf("priority: request body is not a JSON object")
	}
	out := make([]byte, 0, len(body)+16)
	out = append(out, `{"priority":`...)
	out = strconv.AppendInt(out, int64(n), 10)
	if len(bytes.TrimSpace(rest)) > 1 { // more than the closing brace
		out = append(out, ',')
	}
	out = append(out, rest...)
	req.Body = io.NopCloser(bytes.NewReader(out))
	req.ContentLength = int64(len(out))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
	return nil
}
