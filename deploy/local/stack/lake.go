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
	write, found, err := lakeToWrite(cfg)
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	if write {
		began := time.Now()
		log.Info("generating the sample lake", "rooms", cfg.Rooms, "dir", cfg.LakeDir(), "found_version", found, "version", sampledata.Version)
		sum, err := sampledata.Generate(ctx, sampledata.Options{
			LakeDir: cfg.LakeDir(), TruthDir: cfg.TruthDir(), Seed: cfg.Seed, Rooms: cfg.Rooms,
		})
		if err != nil {
			return fmt.Errorf("lake: %w", err)
		}
		log.Info("sample lake written", "rooms", sum.Rooms, "messages", sum.Messages, "files", len(sum.Files),
			"took", time.Since(began).Round(time.Millisecond))
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

// lakeToWrite reports whether the stack must write the sample lake: it has
// no room files or no truth, or an older generator wrote it (found is the
// version it found, "" for one that predates versions).
func lakeToWrite(cfg Config) (write bool, found string, err error) {
	_, statErr := os.Stat(filepath.Join(cfg.LakeDir(), filepath.FromSlash(sampledata.RoomsPrefix)))
	_, truthErr := os.Stat(filepath.Join(cfg.TruthDir(), sampledata.TruthFileName))
	for _, e := range []error{statErr, truthErr} {
		if e != nil && !errors.Is(e, os.ErrNotExist) {
			return false, "", e
		}
	}
	if found, err = sampledata.LakeVersion(cfg.TruthDir()); err != nil {
		return false, "", err
	}
	return statErr != nil || truthErr != nil || found != sampledata.Version, found, nil
}
