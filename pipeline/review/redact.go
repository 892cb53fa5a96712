package review

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
	"github.com/chatguard/chatguard/stages"
)

// redactOutput turns a validated stage answer into what may leave the
// process (inference logs, stored stage results): extract's quotes are chat
// text, so each becomes a hash and a length; every contact or identity
// detail left in free text (reasons, rationales, descriptions) is masked,
// however it was spelled (chatprep.Redact).
func redactOutput(stage pipeline.StageName, content []byte) string {
	if stage == pipeline.StageExtract {
		var o stages.ExtractOutput
		if err := json.Unmarshal(content, &o); err == nil {
			for i, e := range o.Evidence {
				o.Evidence[i].Quote = quoteDigest(e.Quote)
			}
			if b, err := json.Marshal(o); err == nil {
				content = b
			}
		}
	}
	return chatprep.Redact(string(content))
}

// quoteDigest identifies a quote without its text: analysts can join equal
// quotes across rooms (spam campaigns) without reading them.
func quoteDigest(q string) string {
	h := sha256.Sum256([]byte(q))
	return fmt.Sprintf("sha256:%s len:%d", hex.EncodeToString(h[:8]), utf8.RuneCountInString(q))
}
