package chatapi

import (
	"testing"
	"time"
)

func FuzzParseWindow(f *testing.F) {
	f.Add("2026-11-01T00:00:00Z", "2026-11-01T01:00:00Z")
	f.Add("2026-11-01T09:00:00+09:00", "2026-11-01T00:00:00.5Z")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, from, to string) {
		a, b, err := parseWindow(from, to)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if !b.After(a) || a.Location() != time.UTC || b.Location() != time.UTC {
			t.Fatalf("accepted window [%v, %v)", a, b)
		}
	})
}
