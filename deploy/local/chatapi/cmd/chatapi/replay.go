package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/chatreplay"
	"github.com/chatguard/chatguard/deploy/local/sampledata"
	"github.com/chatguard/chatguard/pipeline"
)

// replayFlags are the chat-service replay's settings.
type replayFlags struct {
	from       string
	hours      int
	speedup    float64
	queueURL   string
	duplicates int
}

func (r *replayFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&r.from, "replay-from", "", "replay the lake from this time (RFC 3339) as the chat service of real time; needs --lake-dir")
	fs.IntVar(&r.hours, "replay-hours", 1, "hours of the lake to replay")
	fs.Float64Var(&r.speedup, "speedup", 60, "replay this many times faster than the chats happened (1: as they happened)")
	fs.StringVar(&r.queueURL, "chat-events-queue-url", "", "SQS chat-events queue the replay announces each message on")
	fs.IntVar(&r.duplicates, "duplicates", 0, "publish each chat event this many extra times (an at-least-once producer)")
}

func (r *replayFlags) on() bool { return r.from != "" }

// take loads the lake for the replay and leaves cfg serving no room yet.
func (r *replayFlags) take(cfg *chatapi.Config) (map[string][]pipeline.ChatMessage, error) {
	var errs []error
	if cfg.LakeDir == "" {
		errs = append(errs, errors.New("--replay-from needs --lake-dir"))
	}
	if _, err := time.Parse(time.RFC3339, r.from); err != nil {
		errs = append(errs, errors.New("--replay-from: "+err.Error()))
	}
	if r.hours < 1 || !(r.speedup > 0) || r.duplicates < 0 {
		errs = append(errs, errors.New("--replay-hours must be at least 1, --speedup positive, --duplicates not negative"))
	}
	if r.queueURL == "" {
		errs = append(errs, errors.New("--chat-events-queue-url is required with --replay-from"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	lake, err := sampledata.LoadMessages(cfg.LakeDir)
	if err != nil {
		return nil, err
	}
	cfg.LakeDir, cfg.Messages = "", map[string][]pipeline.ChatMessage{}
	return lake, nil
}

// run replays the lake's window into srv and onto the queue, from now.
func (r *replayFlags) run(ctx context.Context, log *slog.Logger, srv *chatapi.Server, lake map[string][]pipeline.ChatMessage) error {
	from, _ := time.Parse(time.RFC3339, r.from)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	plan, err := chatreplay.Plan(lake, from, from.Add(time.Duration(r.hours)*time.Hour), start, r.speedup)
	if err != nil {
		return err
	}
	log.Info("chatapi: replay started", "messages", len(plan), "from", from, "speedup", r.speedup)
	rp := &chatreplay.Replayer{Store: srv, Publisher: chatreplay.SQSPublisher{API: awssqs.NewFromConfig(awsCfg), QueueURL: r.queueURL}, Duplicates: r.duplicates}
	st, err := rp.Run(ctx, plan)
	log.Info("chatapi: replay done", "messages", st.Messages, "events", st.Events, "took", time.Since(start).Round(time.Millisecond).String())
	return err
}
