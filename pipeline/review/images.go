package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatguard/chatguard/pipeline"
	"github.com/chatguard/chatguard/pipeline/chatprep"
)

// ImageGate is pipeline.ImageGate, as the reviewer's Config names it.
type ImageGate = pipeline.ImageGate

// RejectedImage is one image left out of the model requests, as recorded
// in the stored output of the review's last stage ("rejected_images").
type RejectedImage struct {
	MessageID string `json:"message_id"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail"`
}

// newImageMetrics registers the rejected-images counter (nil reg: none).
func newImageMetrics(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chatguard_review_images_rejected_total",
		Help: "Chat images kept from the model requests by the image gate, by reason (scheme|host|address|size|type|fetch)."}, []string{"reason"})
	for _, r := range []string{pipeline.ImageRejectScheme, pipeline.ImageRejectHost, pipeline.ImageRejectAddress, pipeline.ImageRejectSize, pipeline.ImageRejectType, pipeline.ImageRejectFetch} {
		c.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("review: register metrics: %w", err)
		}
	}
	return c, nil
}

// vetImages asks the gate about every image of the window once, keeps
// the admitted ones (with the URL the gate returned: the same URL or a
// data: URL) and records the rest. Never fatal: a rejected image is left
// out, the review goes on.
func (rn *run) vetImages(ctx context.Context) {
	if rn.r.cfg.Images == nil {
		return
	}
	if rn.vetted == nil {
		rn.vetted = map[string]string{}
	}
	for _, im := range rn.w.Images {
		if _, done := rn.vetted[im.MessageID]; done {
			continue
		}
		admitted, err := rn.r.cfg.Images.Admit(ctx, im.URL)
		if err != nil {
			re := &pipeline.ImageRejectedError{Reason: pipeline.ImageRejectFetch, Detail: err.Error()}
			errors.As(err, &re)
			rn.r.imagesRejected.WithLabelValues(re.Reason).Inc()
			rn.rejected = append(rn.rejected, RejectedImage{MessageID: im.MessageID, Reason: re.Reason, Detail: cleanText(re.Detail, 200)})
			admitted = ""
		}
		rn.vetted[im.MessageID] = admitted
	}
	rn.applyVetted()
}

// applyVetted narrows the window's images to the admitted ones, with their
// admitted URLs; an image not vetted (none should be) is left out too.
func (rn *run) applyVetted() {
	if rn.r.cfg.Images == nil {
		return
	}
	kept := rn.w.Images[:0:0]
	for _, im := range rn.w.Images {
		if u := rn.vetted[im.MessageID]; u != "" {
			kept = append(kept, chatprep.Image{MessageID: im.MessageID, URL: u})
		}
	}
	rn.w.Images = kept
	// A rejected image stays in the transcript as a note, without its URL:
	// the model knows a picture was sent, and never sees where it points.
	var msgs []pipeline.ChatMessage
	for i, m := range rn.w.Messages {
		if m.Kind != pipeline.KindImage || rn.vetted[m.MessageID] != "" {
			continue
		}
		if msgs == nil {
			msgs = slices.Clone(rn.w.Messages)
		}
		msgs[i].Kind, msgs[i].ImageURL = pipeline.KindText, ""
		msgs[i].Text = strings.TrimSpace("[image withheld: not from the marketplace image host] " + m.Text)
	}
	if msgs != nil {
		rn.w.Messages = msgs
	}
}

// recordRejected adds "rejected_images" to the stored output of the last
// stage that ran, so the verdict row says which images no model saw.
func (rn *run) recordRejected() {
	if len(rn.rejected) == 0 || len(rn.v.Stages) == 0 {
		return
	}
	last := &rn.v.Stages[len(rn.v.Stages)-1]
	var obj map[string]json.RawMessage
	if json.Unmarshal(last.Output, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{}
		if len(last.Output) > 0 {
			return // not an object: leave the answer as stored
		}
	}
	b, err := json.Marshal(rn.rejected)
	if err != nil {
		return
	}
	obj["rejected_images"] = b
	if out, err := json.Marshal(obj); err == nil {
		last.Output = out
	}
}
