package pipeline

import "time"

// admit is what the worker does with a body before any model call.
func admit(body []byte, now time.Time) error {
	ev, err := DecodeReviewEvent(body)
	if err != nil {
		return err
	}
	return DefaultEventLimits().Check(ev, now)
}
