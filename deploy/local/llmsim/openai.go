package llmsim

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// chatRequest is the part of an OpenAI chat-completion request the
// simulator reads; other fields (temperature, seed, ...) are accepted and
// ignored, as vLLM accepts and mostly ignores them for a rule engine.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	ResponseFormat      *responseFormat `json:"response_format"`
	// Priority is vLLM's request priority (lower is served first); it
	// orders the waiting queue under Config.PriorityScheduling.
	Priority int `json:"priority"`
}

type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name string `json:"name"`
		// The schema is not read: the stage name picks the answer, and the
		// answers are built to the stages' schemas.
		Schema ignored `json:"schema"`
	} `json:"json_schema"`
}

// ignored accepts any JSON value without keeping it.
type ignored struct{}

func (*ignored) UnmarshalJSON([]byte) error { return nil }

type chatMessage struct {
	Role    string  `json:"role"`
	Content content `json:"content"`
}

// content is a message's content: a string, or an array of text and
// image_url parts.
type content struct {
	text   string
	images []string
	parts  int
}

func (c *content) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	switch b[0] {
	case '"':
		return json.Unmarshal(b, &c.text)
	case '[':
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL *struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		c.parts = len(parts)
		for _, p := range parts {
			switch p.Type {
			case "text":
				if c.text != "" {
					c.text += "\n"
				}
				c.text += p.Text
			case "image_url":
				if p.ImageURL == nil || p.ImageURL.URL == "" {
					return errors.New("image_url part without a url")
				}
				c.images = append(c.images, p.ImageURL.URL)
			default:
				return errors.New("unsupported content part type " + strconv.Quote(p.Type))
			}
		}
		return nil
	}
	return errors.New("content is neither a string nor an array of parts")
}

// maxTokens is the request's output limit, 0 for none.
func (r *chatRequest) maxTokens() int {
	if r.MaxCompletionTokens != nil && *r.MaxCompletionTokens > 0 {
		return *r.MaxCompletionTokens
	}
	if r.MaxTokens != nil {
		return *r.MaxTokens
	}
	return 0
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails is set when the prefix cache is on.
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   usage    `json:"usage"`
}

type choice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     *struct{}       `json:"logprobs"`
}

type responseMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is vLLM's context length field (left out when unset).
	MaxModelLen int `json:"max_model_len,omitempty"`
}

// apiError is OpenAI's error body: {"error":{"message","type","param","code"}}.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	e := apiError{Message: msg, Type: typ}
	if code != "" {
		e.Code = &code
	}
	if param != "" {
		e.Param = &param
	}
	writeJSON(w, status, struct {
		Error apiError `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "llmsim: encode response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func setRetryAfter(h http.Header, d time.Duration) {
	if d <= 0 {
		return
	}
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
	h.Set("retry-after-ms", strconv.FormatInt(d.Milliseconds(), 10))
}

// appendChunk appends one SSE event with a chat.completion.chunk. The JSON
// is written by hand: thousands of streams send tens of thousands of chunks
// a second, and this keeps a chunk to one append into a reused buffer.
func appendChunk(b []byte, id, model string, created int64, role bool, content string, finish string) []byte {
	b = append(b, `data: {"id":"`...)
	b = append(b, id...)
	b = append(b, `","object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"choices":[{"index":0,"delta":{`...)
	sep := false
	if role {
		b = append(b, `"role":"assistant"`...)
		sep = true
	}
	if content != "" || role {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"content":`...)
		b = appendJSONString(b, content)
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, finish)
	}
	b = append(b, "}]}\n\n"...)
	return b
}

// appendUsageChunk appends the final usage-only chunk sent when
// stream_options.include_usage is set.
func appendUsageChunk(b []byte, id, model string, created int64, u usage) []byte {
	b = append(b, `data: {"id":"`...)
	b = append(b, id...)
	b = append(b, `","object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"choices":[],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	if u.PromptTokensDetails != nil {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(u.PromptTokensDetails.CachedTokens), 10)
		b = append(b, '}')
	}
	b = append(b, "}}\n\n"...)
	return b
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaping like encoding/json
// (including <, > and &) so that the chunks never carry raw markup.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			if r == utf8.RuneError {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
