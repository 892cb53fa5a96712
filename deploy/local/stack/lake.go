package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chatguard/chatguard/deploy/local/sampledata"
)

// ensureLake generates the sample lake and its ground truth on first start
// (when the lake has no room files) and publishes a one-hour window with
// the most rooms in it.
func (s *Stack) ensureLake(ctx context.Context) error {
	cfg := s.cfg
	log := cfg.logger()
	roomsDir := filepath.Join(cfg.LakeDir(), filepath.FromSlash(sampledata.RoomsPrefix))
	_, statErr := os.Stat(roomsDir)
	_, truthErr := os.Stat(filepath.Join(cfg.TruthDir(), sampledata.TruthFileName))
	if errors.Is(statErr, os.ErrNotExist) || errors.Is(truthErr, os.ErrNotExist) {
		began := time.Now()
		log.Info("generating the sample lake", "rooms", cfg.Rooms, "dir", cfg.LakeDir())
		sum, err := sampledata.Generate(ctx, sampledata.Options{
			LakeDir: cfg.LakeDir(), TruthDir: cfg.TruthDir(), Seed: cfg.Seed, Rooms: cfg.Rooms,
		})
		if err != nil {
			return fmt.Errorf("lake: %w", err)
		}
		log.Info("sample lake written", "rooms", sum.Rooms, "messages", sum.Messages, "files", len(sum.Files),
			"took", time.Since(began).Round(time.Millisecond))
	} else if statErr != nil {
		return fmt.Errorf("lake: %w", statErr)
	}
	rooms, err := sampledata.LoadRooms(cfg.LakeDir())
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	start, n := busiestHour(rooms)
	if n == 0 {
		return fmt.Errorf("lake: no rooms under %s", cfg.LakeDir())
	}
	s.set(
		"CHATGUARD_SAMPLE_WINDOW_START", start.Format(time.RFC3339),
		"CHATGUARD_SAMPLE_WINDOW_END", start.Add(time.Hour).Format(time.RFC3339),
	)
	return nil
}

// busiestHour returns the UTC hour in which the most rooms had their first
// message, and how many; the earliest such hour on a tie.
func busiestHour(rooms []sampledata.RoomRow) (time.Time, int) {
	counts := map[time.Time]int{}
	var best time.Time
	bestN := 0
	for _, r := range rooms {
		h := r.FirstMessageAt.UTC().Truncate(time.Hour)
		counts[h]++
		if c := counts[h]; c > bestN || (c == bestN && h.Before(best)) {
			best, bestN = h, c
		}
	}
	return best, bestN
}
