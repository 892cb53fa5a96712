package llmsim

import (
	"container/list"
	"sync"
)

// answerCache keeps rendered answers by prompt hash, bounded, least
// recently used out first: load tests replay the same rooms, and a hit
// skips the rule engine.
type answerCache struct {
	mu    sync.Mutex
	size  int
	items map[cacheKey]*list.Element
	order list.List // front = most recent; values are *cacheEntry
}

type cacheKey struct {
	hash uint64
	n    int // prompt length: a cheap second check against hash collisions
}

type cacheEntry struct {
	key    cacheKey
	answer string
}

func newAnswerCache(size int) *answerCache {
	return &answerCache{size: size, items: make(map[cacheKey]*list.Element)}
}

func (c *answerCache) get(k cacheKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return "", false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).answer, true
}

func (c *answerCache) put(k cacheKey, answer string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size <= 0 {
		return
	}
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&cacheEntry{key: k, answer: answer})
	c.trim()
}

func (c *answerCache) resize(size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.size = size
	c.trim()
}

// trim evicts down to size. Callers hold mu.
func (c *answerCache) trim() {
	for c.order.Len() > max(c.size, 0) {
		e := c.order.Back()
		c.order.Remove(e)
		delete(c.items, e.Value.(*cacheEntry).key)
	}
}
