package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/chatguard/chatguard/deploy/local/chatapi"
	sqsq "github.com/chatguard/chatguard/storage/sqs"
)

// actionFlags are the settings of the chat service's side of protective
// actions: the queue it consumes, the DLQ of what it rejects, and the
// journal of the keys it applied.
type actionFlags struct {
	queueURL, dlqURL, journal string
}

func (a *actionFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&a.queueURL, "actions-queue-url", "", "SQS actions queue to consume protective actions from (each key applied once)")
	fs.StringVar(&a.dlqURL, "actions-dlq-url", "", "SQS queue that rejected actions are dead-lettered to, with their reason (required with --actions-queue-url)")
	fs.StringVar(&a.journal, "actions-journal", "", "file recording the applied action keys, read back on start, so that a restart applies each key once still")
}

func (a *actionFlags) on() bool { return a.queueURL != "" }

// take checks the flags and puts the journal into cfg.
func (a *actionFlags) take(cfg *chatapi.Config) error {
	if a.on() && a.dlqURL == "" {
		return errors.New("--actions-dlq-url is required with --actions-queue-url")
	}
	if !a.on() && (a.dlqURL != "" || a.journal != "") {
		return errors.New("--actions-dlq-url and --actions-journal need --actions-queue-url")
	}
	cfg.ActionsJournal = a.journal
	return nil
}

// run consumes the actions queue into srv until ctx ends (the AWS_*
// settings of the environment).
func (a *actionFlags) run(ctx context.Context, log *slog.Logger, srv *chatapi.Server) error {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	api := awssqs.NewFromConfig(awsCfg)
	open := func(name, url string) (*sqsq.Queue, error) {
		c := sqsq.DefaultConfig()
		c.Name, c.URL = name, url
		return sqsq.New(api, c)
	}
	q, err := open("actions", a.queueURL)
	if err != nil {
		return err
	}
	defer q.Close(context.WithoutCancel(ctx))
	dlq, err := open("actions-dlq", a.dlqURL)
	if err != nil {
		return err
	}
	defer dlq.Close(context.WithoutCancel(ctx))
	log.Info("chatapi: consuming actions", "queue", a.queueURL)
	return (&chatapi.Consumer{Server: srv, Inbox: q, DLQ: dlq, Log: log}).Run(ctx)
}
