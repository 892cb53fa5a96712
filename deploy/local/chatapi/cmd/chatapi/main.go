// Command chatapi serves the chat-history stand-in (package chatapi) on its
// own, so that tests of the production module can run a private instance
// with hand-made rooms as a separate process.
//
//	chatapi --lake-dir /tmp/lake           # the rooms of a sample lake
//	chatapi --messages rooms.json          # {"room-1": [pipeline.ChatMessage, ...], ...}
//	chatapi --lake-dir /tmp/lake --replay-from 2026-11-01T10:00:00Z \
//	    --speedup 60 --chat-events-queue-url URL  # the chat service, replayed
//	chatapi ... --actions-queue-url URL --actions-dlq-url URL \
//	    --actions-journal FILE                     # and its side of protective actions
//
// With --replay-from it stands in for the chat service of real time
// (package chatreplay): it starts with no rooms and releases the lake's
// messages of --replay-hours from --replay-from as if they were sent now,
// --speedup times faster, each served from its (replayed) sent_at and then
// announced on the chat-events queue (AWS_ENDPOINT_URL_SQS and the AWS_*
// credentials of the environment). It logs one line when the replay is
// done and serves on until stopped.
//
// With --actions-queue-url it consumes chatguard's protective actions as
// the chat service would (package chatapi: each key applied once, notices
// as system messages, rejects dead-lettered with their reason).
//
// It prints its base URL (http://127.0.0.1:PORT) on stdout once listening,
// logs JSON to stderr (never chat text), and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/pipeline"
)

// stopGrace bounds how long running requests may finish on shutdown.
const stopGrace = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses the flags, serves until ctx is done, and returns the exit
// code: 2 for a bad configuration, 1 when serving failed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		cfg      chatapi.Config
		addr     = "127.0.0.1:0"
		messages string
	)
	fs := flag.NewFlagSet("chatapi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", addr, "listen address (port 0 picks a free port)")
	fs.StringVar(&cfg.LakeDir, "lake-dir", "", "sample lake root to serve (exclusive with --messages)")
	fs.StringVar(&messages, "messages", "", "JSON file of rooms: {room_id: [chat message, ...]} (exclusive with --lake-dir)")
	fs.Float64Var(&cfg.FaultRate, "fault-rate", 0, "fraction of history requests that fail with --fault-kind")
	fs.StringVar(&cfg.FaultKind, "fault-kind", "", "500|503|429|timeout|reset (default 503)")
	fs.Int64Var(&cfg.FaultSeed, "fault-seed", 0, "seed of the random fault draws")
	var rp replayFlags
	rp.bind(fs)
	var af actionFlags
	af.bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := af.take(&cfg); err != nil {
		fmt.Fprintf(stderr, "chatapi: %v\n", err)
		return 2
	}
	var lake map[string][]pipeline.ChatMessage
	if rp.on() {
		var err error
		if lake, err = rp.take(&cfg); err != nil {
			fmt.Fprintf(stderr, "chatapi: %v\n", err)
			return 2
		}
	}
	if messages != "" {
		b, err := os.ReadFile(messages)
		if err != nil {
			fmt.Fprintf(stderr, "chatapi: %v\n", err)
			return 2
		}
		if err := json.Unmarshal(b, &cfg.Messages); err != nil {
			fmt.Fprintf(stderr, "chatapi: %s: %v\n", messages, err)
			return 2
		}
		if cfg.Messages == nil {
			cfg.Messages = map[string][]pipeline.ChatMessage{}
		}
	}
	srv, err := chatapi.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "chatapi: %v\n", err)
		return 2
	}
	defer srv.Close()
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		log.Error("chatapi: listen", "addr", addr, "err", err.Error())
		return 1
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	fmt.Fprintln(stdout, url)
	log.Info("chatapi listening", "url", url, "rooms", len(srv.Rooms()))
	replayed := make(chan error, 1)
	if rp.on() {
		go func() { replayed <- rp.run(ctx, log, srv, lake) }()
	}
	// The consumer is stopped and waited for before the journal closes.
	cctx, stopConsumer := context.WithCancel(ctx)
	var consumer sync.WaitGroup
	defer func() { stopConsumer(); consumer.Wait() }()
	if af.on() {
		consumer.Go(func() {
			if err := af.run(cctx, log, srv); err != nil {
				log.Error("chatapi: actions consumer", "err", err.Error())
			}
		})
	}
	select {
	case err := <-replayed:
		if err != nil && ctx.Err() == nil {
			log.Error("chatapi: replay", "err", err.Error())
			return 1
		}
		<-ctx.Done()
	case <-ctx.Done():
	case err := <-done:
		log.Error("chatapi: serve", "err", err.Error())
		return 1
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	if err := hs.Shutdown(stopCtx); err != nil {
		_ = hs.Close()
	}
	<-done
	return 0
}
