package clusterslot

import "testing"

func TestOf(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":           12739, // the specification's check value 0x31C3
		"{123456789}:a":       12739, // the tag decides
		"x{123456789}{other}": 12739, // the first tag only
		"{}123456789":         Of("{}123456789"),
	} {
		if got := Of(key); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
	if Of("{}a") == Of("a") {
		t.Error("an empty tag is no tag: the whole key is hashed")
	}
}
