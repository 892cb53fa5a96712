package llmsim

import (
	"fmt"
	"strings"
)

// Fault is one injected failure mode; see FaultRates for what each does.
type Fault string

// The faults, as named in X-Sim-Fault and in the fault rates' JSON.
const (
	FaultNone      Fault = ""
	Fault429       Fault = "429"
	Fault500       Fault = "500"
	Fault503       Fault = "503"
	FaultHang      Fault = "hang"
	FaultDrop      Fault = "drop"
	FaultMalformed Fault = "malformed"
	FaultTruncate  Fault = "truncate"
)

// Request headers that steer one request, for deterministic tests.
const (
	// HeaderFault forces one fault: 429|500|503|hang|drop|malformed|truncate
	// (or "none" to be spared the configured rates).
	HeaderFault = "X-Sim-Fault"
	// HeaderTTFT overrides the time to first token, in milliseconds.
	HeaderTTFT = "X-Sim-TTFT-Ms"
	// HeaderITL overrides the inter-token latency, in milliseconds: a slow
	// stream for stop-signal tests.
	HeaderITL = "X-Sim-ITL-Ms"
)

// ParseFault reads a fault name as X-Sim-Fault carries it. "none" returns
// FaultNone with forced true; an empty string returns FaultNone, false.
func ParseFault(s string) (f Fault, forced bool, err error) {
	switch v := Fault(strings.ToLower(strings.TrimSpace(s))); v {
	case "":
		return FaultNone, false, nil
	case "none":
		return FaultNone, true, nil
	case Fault429, Fault500, Fault503, FaultHang, FaultDrop, FaultMalformed, FaultTruncate:
		return v, true, nil
	default:
		return FaultNone, false, fmt.Errorf("unknown fault %q (want 429|500|503|hang|drop|malformed|truncate|none)", s)
	}
}

// pick chooses a fault for a uniform random u in [0, 1).
func (f FaultRates) pick(u float64) Fault {
	chosen := FaultNone
	acc := 0.0
	f.each(func(name Fault, rate float64) {
		if chosen != FaultNone || rate <= 0 {
			return
		}
		acc += rate
		if u < acc {
			chosen = name
		}
	})
	return chosen
}

// malform turns a JSON answer into invalid JSON of about the same length, as
// a model that lost track of its grammar would: a missing colon.
func malform(content string) string {
	if i := strings.Index(content, `":`); i >= 0 {
		return content[:i+1] + " " + content[i+2:]
	}
	return content + "}"
}
