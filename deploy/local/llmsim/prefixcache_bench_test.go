package llmsim

import (
	"strings"
	"testing"
)

// BenchmarkPrefixCacheLookup is the prefix-cache model's cost per request
// for a review-sized prompt (about 1,700 tokens), all blocks cached.
func BenchmarkPrefixCacheLookup(b *testing.B) {
	p := newPrefixCache(DefaultPrefixCacheBlocks)
	m := msgs(strings.Repeat("You are one step of chatguard. ", 40), strings.Repeat(`{"id":"m1","text":"ˆ네 ˆ선입금 ˆ해주시면"}`+"\n", 60))
	p.lookup(m)
	b.ReportAllocs()
	for b.Loop() {
		p.lookup(m)
	}
}
