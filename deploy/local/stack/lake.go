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
// (when the lake has no room files) or when an older generator wrote it
// (sampledata.Version), and publishes a one-hour window with the most
// rooms in it.
func (s *Stack) ensureLake(ctx context.Context) error {
	cfg := s.cfg
	log := cfg.logger()
	roomsDir := filepath.Join(cfg.LakeDir(), filepath.FromSlash(sampledata.RoomsPrefix))
	_, statErr := os.Stat(roomsDir)
	_, truthErr := os.Stat(filepath.Join(cfg.TruthDir(), sampledata.TruthFileName))
	version, err := sampledata.LakeVersion(cfg.TruthDir())
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) || errors.Is(truthErr, os.ErrNotExist) || version != sampledata.Version {
		began := time.Now()
		log.Info("generating the sample lake", "rooms", cfg.Rooms, "dir", cfg.LakeDir(), "found_version", version, "version", sampledata.Version)
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
	start, n := sampledata.BusiestHour(rooms)
	if n == 0 {
		return fmt.Errorf("lake: no rooms under %s", cfg.LakeDir())
	}
	s.set(
		"CHATGUARD_SAMPLE_WINDOW_START", start.Format(time.RFC3339),
		"CHATGUARD_SAMPLE_WINDOW_END", start.Add(time.Hour).Format(time.RFC3339),
	)
	return nil
}
