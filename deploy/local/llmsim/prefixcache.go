package llmsim

import (
	"container/list"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// A model of vLLM's automatic prefix caching: the prompt, as the chat
// template lays it out (per message a role header, the text's tokens, the
// image placeholders), is cut into blocks of PrefixBlockTokens tokens; each
// full block is named by a hash chained over every block before it, so a
// block hits only when the whole prompt up to its end was seen before. The
// leading run of hits is what the server would not prefill again. Blocks
// are kept least recently used out, up to Config.PrefixCacheBlocks.
//
// Only whole blocks count and the last prompt token is always computed
// (vLLM needs its logits), as in vLLM. The answer does not depend on the
// cache: it changes usage.prompt_tokens_details.cached_tokens, the
// vllm:prefix_cache_* counters and Stats.PrefixCache, and (through
// Server.promptTokens) whatever timing reads it.

// PrefixBlockTokens is the block size of the prefix cache, vLLM's default.
const PrefixBlockTokens = 16

// DefaultPrefixCacheBlocks keeps 65,536 blocks (about a million tokens): a
// KV cache of an H100-sized deployment in round numbers.
const DefaultPrefixCacheBlocks = 65536

// PrefixCacheStats counts prompt tokens looked up in the prefix cache and
// the tokens found there (both in tokens, as vLLM's
// vllm:prefix_cache_queries and vllm:prefix_cache_hits), and the blocks
// held now.
type PrefixCacheStats struct {
	QueryTokens int64 `json:"query_tokens"`
	HitTokens   int64 `json:"hit_tokens"`
	Blocks      int   `json:"blocks"`
}

// HitRate is HitTokens / QueryTokens, 0 before any query.
func (p PrefixCacheStats) HitRate() float64 {
	if p.QueryTokens == 0 {
		return 0
	}
	return float64(p.HitTokens) / float64(p.QueryTokens)
}

type prefixCache struct {
	seed    maphash.Seed
	mu      sync.Mutex
	size    int
	items   map[uint64]*list.Element
	order   list.List // front = most recent; values are uint64 block hashes
	queries atomic.Int64
	hits    atomic.Int64
}

func newPrefixCache(size int) *prefixCache {
	return &prefixCache{seed: maphash.MakeSeed(), size: size, items: make(map[uint64]*list.Element)}
}

// blockHashes returns the chained hashes of the request's full blocks and
// the prompt's length in tokens (the same count as usage.prompt_tokens).
func (p *prefixCache) blockHashes(msgs []chatMessage) ([]uint64, int) {
	var (
		h      maphash.Hash
		hashes []uint64
		inBlk  int
		total  int
	)
	h.SetSeed(p.seed)
	// add writes b as n tokens that fit in the current block.
	add := func(b string, n int) {
		h.WriteString(b)
		inBlk += n
		total += n
		if inBlk == PrefixBlockTokens {
			sum := h.Sum64()
			hashes = append(hashes, sum)
			h.Reset()
			// Chain: a block's name covers everything before it.
			var c [8]byte
			for i := range c {
				c[i] = byte(sum >> (8 * i))
			}
			h.Write(c[:])
			inBlk = 0
		}
	}
	for _, m := range msgs {
		// The chat template's per-message overhead, one token each.
		add("\x01start\x00", 1)
		add(m.Role+"\x00", 1)
		add("\x01sep\x00", 1)
		add("\x01nl\x00", 1)
		// Text: as many tokens as fit the block at a time, written as
		// one run of bytes (token boundaries follow from the bytes).
		text := m.Content.text
		for off := 0; off < len(text); {
			end, got := advanceTokens(text, off, PrefixBlockTokens-inBlk)
			add(text[off:end], got)
			off = end
		}
		for _, u := range m.Content.images {
			// An image's placeholder tokens are named by the image.
			add("\x01image:"+u+"\x00", 1)
			for left := imageTokens - 1; left > 0; {
				n := min(left, PrefixBlockTokens-inBlk)
				add("\x01img\x00", n)
				left -= n
			}
		}
	}
	return hashes, total
}

// lookup counts the leading blocks already cached, then caches every block
// of the prompt (as serving it would). It returns the prompt's tokens and
// the cached ones.
func (p *prefixCache) lookup(msgs []chatMessage) (prompt, cached int) {
	hashes, prompt := p.blockHashes(msgs)
	p.mu.Lock()
	if p.size <= 0 {
		p.mu.Unlock()
		return prompt, 0
	}
	hit := 0
	for hit < len(hashes) {
		if _, ok := p.items[hashes[hit]]; !ok {
			break
		}
		hit++
	}
	for _, bh := range hashes {
		if e, ok := p.items[bh]; ok {
			p.order.MoveToFront(e)
			continue
		}
		p.items[bh] = p.order.PushFront(bh)
	}
	p.trim()
	p.mu.Unlock()
	cached = hit * PrefixBlockTokens
	if cached >= prompt {
		// The last token is always computed: its logits start the answer.
		cached = (prompt - 1) / PrefixBlockTokens * PrefixBlockTokens
	}
	cached = max(cached, 0)
	p.queries.Add(int64(prompt))
	p.hits.Add(int64(cached))
	return prompt, cached
}

func (p *prefixCache) resize(size int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.size = size
	p.trim()
}

// trim evicts down to size. Callers hold mu.
func (p *prefixCache) trim() {
	for p.order.Len() > max(p.size, 0) {
		e := p.order.Back()
		p.order.Remove(e)
		delete(p.items, e.Value.(uint64))
	}
}

func (p *prefixCache) stats() PrefixCacheStats {
	p.mu.Lock()
	n := p.order.Len()
	p.mu.Unlock()
	return PrefixCacheStats{QueryTokens: p.queries.Load(), HitTokens: p.hits.Load(), Blocks: n}
}

func (p *prefixCache) reset() {
	p.queries.Store(0)
	p.hits.Store(0)
}

// promptTokens returns a request's prompt tokens and how many of them the
// prefix cache holds, and caches the prompt's blocks. Prefill work is
// prompt - cached tokens: timing models should read it from here. It is
// called once per admitted request.
func (s *Server) promptTokens(c *call) (prompt, cached int) {
	prompt, cached = s.prefix.lookup(c.req.Messages)
	s.metrics.prefixQueries.Add(float64(prompt))
	s.metrics.prefixHits.Add(float64(cached))
	return prompt, cached
}
