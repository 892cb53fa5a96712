package llmsim

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/stages"
)

// schemaNode is the subset of JSON Schema the stage schemas use.
type schemaNode struct {
	Type                 string                 `json:"type"`
	Required             []string               `json:"required"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties *bool                  `json:"additionalProperties"`
	Items                *schemaNode            `json:"items"`
	Enum                 []string               `json:"enum"`
	MaxItems             *int                   `json:"maxItems"`
	MaxLength            *int                   `json:"maxLength"`
	Minimum              *float64               `json:"minimum"`
	Maximum              *float64               `json:"maximum"`
}

// validateStageJSON checks an answer against the stage's schema from
// stages/schemas (a small validator for the keywords those schemas use), and
// that every message id it cites is one of ids.
func validateStageJSON(t testing.TB, st pipeline.StageName, answer []byte, ids map[string]bool) {
	t.Helper()
	var schema schemaNode
	require.NoError(t, json.Unmarshal(stages.Schema(st), &schema))
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "answer is JSON: %s", answer)
	validateNode(t, &schema, v, string(st))

	var cited []string
	switch st {
	case pipeline.StageExtract:
		var out stages.ExtractOutput
		require.NoError(t, json.Unmarshal(answer, &out))
		for _, e := range out.Evidence {
			cited = append(cited, e.MessageID)
		}
	case pipeline.StageVision:
		var out stages.VisionOutput
		require.NoError(t, json.Unmarshal(answer, &out))
		for _, e := range out.Images {
			cited = append(cited, e.MessageID)
		}
	case pipeline.StageJudge:
		var out stages.JudgeOutput
		require.NoError(t, json.Unmarshal(answer, &out))
		cited = out.EvidenceIDs
	}
	for _, id := range cited {
		require.True(t, ids[id], "%s cites %q, not in the transcript", st, id)
	}
}

func validateNode(t testing.TB, s *schemaNode, v any, path string) {
	t.Helper()
	switch s.Type {
	case "object":
		obj, ok := v.(map[string]any)
		require.True(t, ok, "%s: want object, got %T", path, v)
		for _, k := range s.Required {
			require.Contains(t, obj, k, "%s: required", path)
		}
		for k, val := range obj {
			p, ok := s.Properties[k]
			if s.AdditionalProperties != nil && !*s.AdditionalProperties {
				require.True(t, ok, "%s: unknown property %q", path, k)
			}
			if ok {
				validateNode(t, p, val, path+"."+k)
			}
		}
	case "array":
		arr, ok := v.([]any)
		require.True(t, ok, "%s: want array, got %T", path, v)
		if s.MaxItems != nil {
			require.LessOrEqual(t, len(arr), *s.MaxItems, "%s: maxItems", path)
		}
		for i, e := range arr {
			validateNode(t, s.Items, e, path+"["+string(rune('0'+i%10))+"]")
		}
	case "string":
		str, ok := v.(string)
		require.True(t, ok, "%s: want string, got %T", path, v)
		if s.MaxLength != nil {
			require.LessOrEqual(t, utf8.RuneCountInString(str), *s.MaxLength, "%s: maxLength", path)
		}
		if len(s.Enum) > 0 {
			require.True(t, slices.Contains(s.Enum, str), "%s: %q not in enum", path, str)
		}
	case "integer", "number":
		n, ok := v.(json.Number)
		require.True(t, ok, "%s: want number, got %T", path, v)
		f, err := n.Float64()
		require.NoError(t, err)
		if s.Type == "integer" {
			_, err := n.Int64()
			require.NoError(t, err, "%s: want integer", path)
		}
		if s.Minimum != nil {
			require.GreaterOrEqual(t, f, *s.Minimum, path)
		}
		if s.Maximum != nil {
			require.LessOrEqual(t, f, *s.Maximum, path)
		}
	default:
		t.Fatalf("%s: schema type %q not supported by the test validator", path, s.Type)
	}
}
