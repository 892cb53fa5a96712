package reviewjob

import (
	"sync"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
)

// unsavedVerdicts keeps the verdict of a held job whose save failed, for
// the same delivery's next run: the loop runs a held job again in this
// process, and the models need not be paid twice for one review. Only held
// jobs put entries, and each run takes its own, so it holds at most one per
// job in flight.
type unsavedVerdicts struct {
	mu sync.Mutex
	m  map[string]pipeline.Verdict
}

func deliveryKey(m jobloop.Message) string { return m.ID + "/" + m.ReceiptHandle }

func (u *unsavedVerdicts) put(m jobloop.Message, v pipeline.Verdict) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]pipeline.Verdict{}
	}
	u.m[deliveryKey(m)] = v
}

func (u *unsavedVerdicts) take(m jobloop.Message) (pipeline.Verdict, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.m[deliveryKey(m)]
	delete(u.m, deliveryKey(m))
	return v, ok
}
