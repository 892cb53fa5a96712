package stages

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatguard/chatguard/pipeline"
)

// TestParseRejectsAmbiguousKeys: encoding/json keeps the last of two equal
// keys and matches names case-insensitively, so the answer a validator
// reads and the one a redactor walks could differ. Every parser rejects a
// repeated key or a case variant of a schema name, at any depth, as an
// invalid answer (retried like any other) whose problem echoes no value.
func TestParseRejectsAmbiguousKeys(t *testing.T) {
	t.Parallel()
	ids := known("m1", "m3")
	parse := map[pipeline.StageName]func([]byte) error{
		pipeline.StageTriage:  func(b []byte) error { _, err := ParseTriage(b); return err },
		pipeline.StageExtract: func(b []byte) error { _, err := ParseExtract(b, ids); return err },
		pipeline.StageVision:  func(b []byte) error { _, err := ParseVision(b, ids); return err },
		pipeline.StageJudge:   func(b []byte) error { _, err := ParseJudge(b, ids); return err },
	}
	tests := []struct {
		name    string
		stage   pipeline.StageName
		in      string
		wantErr string
	}{
		{"duplicate nested id", pipeline.StageExtract,
			`{"evidence":[{"message_id":"call 010-1234-5678","message_id":"m1","category":"off_platform","quote":"x"}]}`, "appears more than once"},
		{"case-variant quote", pipeline.StageExtract,
			`{"evidence":[{"message_id":"m1","category":"off_platform","QUOTE":"call 010-1234-5678"}]}`, `differs from "quote" only by case`},
		{"case-variant quote beside the quote", pipeline.StageExtract,
			`{"evidence":[{"message_id":"m1","category":"off_platform","quote":"x","QUOTE":"call 010-1234-5678"}]}`, `differs from "quote" only by case`},
		{"case-variant id", pipeline.StageExtract,
			`{"evidence":[{"Message_id":"call 010-1234-5678","message_id":"m1","category":"off_platform","quote":"x"}]}`, `differs from "message_id" only by case`},
		{"duplicate top-level reason", pipeline.StageTriage,
			`{"risk":"high","categories":[],"reason":"call 010-1234-5678","reason":"ok"}`, "appears more than once"},
		{"case-variant top-level name", pipeline.StageJudge,
			`{"Label":"clean","category":"clean","severity":1,"confidence":0.5,"action":"none","rationale":"call 010-1234-5678","evidence_ids":[]}`, `differs from "label" only by case`},
		{"duplicate in vision", pipeline.StageVision,
			`{"images":[{"message_id":"m3","description":"call 010-1234-5678","description":"qr","flags":[],"risk":"low"}]}`, "appears more than once"},
		{"duplicate top-level array", pipeline.StageJudge,
			`{"label":"clean","category":"clean","severity":1,"confidence":0.5,"action":"none","rationale":"x","evidence_ids":["m1"],"evidence_ids":[]}`, "appears more than once"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := parse[tc.stage]([]byte(tc.in))
			require.ErrorContains(t, err, tc.wantErr)
			var ie *InvalidAnswerError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.stage, ie.Stage)
			require.NotContains(t, err.Error(), "1234")
			require.NotContains(t, err.Error(), "5678")
		})
	}
	// The same answers, unambiguous, are accepted.
	require.NoError(t, parse[pipeline.StageExtract]([]byte(`{"evidence":[{"message_id":"m1","category":"off_platform","quote":"x"}]}`)))
	require.NoError(t, parse[pipeline.StageTriage]([]byte(`{"risk":"high","categories":[],"reason":"ok"}`)))
}

// TestParseRejectsWhatIsNotOneObject: a value that is not an object, or an
// object followed by more data, is not an answer.
func TestParseRejectsWhatIsNotOneObject(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`[]`, `"risk"`, `{"risk":"none","categories":[],"reason":""} {}`, `{"risk":"none","categories":[],"reason":""`, ``} {
		_, err := ParseTriage([]byte(in))
		require.ErrorContains(t, err, "not a JSON object", in)
	}
}
