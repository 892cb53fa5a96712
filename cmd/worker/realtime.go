package main

import (
	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/jobloop"
	"github.com/chatguard/chatguard/storage/sqs"
)

// realtimeQueue is the review-realtime queue's configuration: the review
// queue's, under its own name.
func realtimeQueue(review sqs.Config) sqs.Config {
	review.Name = "review-realtime"
	return review
}

// inbox is what the job loop receives from: the review queue alone, or,
// with --realtime-queue-url, review-realtime first and review second.
func (w *worker) inbox() pipeline.Inbox {
	if w.realtime == nil {
		return w.review
	}
	return jobloop.NewPrioritized(jobloop.Queue{Name: "review-realtime", Inbox: w.realtime}, jobloop.Queue{Name: "review", Inbox: w.review})
}
