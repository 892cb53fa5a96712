package llmsim

import (
	"container/list"
	"sync"
)

// answerCache keeps rule analyses by transcript hash, bounded, least
// recently used out first: the four stages of a review share one
// transcript, and load tests replay the same rooms, so a hit skips parsing
// and the rule engine and leaves only rendering the stage's JSON.
type answerCache struct {
	mu    sync.Mutex
	size  int
	items map[cacheKey]*list.Element
	order list.List // front = most recent; values are *cacheEntry
}

type cacheKey struct {
	hash uint64
	n    int // transcript length: a cheap second check against hash collisions
}

type cacheEntry struct {
	key    cacheKey
	answer Analysis // shared: readers must not modify it
}

func newAnswerCache(size int) *answerCache {
	return &answerCache{size: size, items: make(map[cacheKey]*list.Element)}
}

func (c *answerCache) get(k cacheKey) (Analysis, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return Analysis{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).answer, true
}

func (c *answerCache) put(k cacheKey, answer Analysis) {
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
