package stack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatguard/chatguard/deploy/local/athenasim"
	"github.com/chatguard/chatguard/deploy/local/chatapi"
	"github.com/chatguard/chatguard/deploy/local/llmsim"
	sqsq "github.com/chatguard/chatguard/storage/sqs"
)

// startSims starts the in-process stand-ins on their bound listeners: the
// Athena stand-in and the chat API over the lake, and the two LLM
// simulators (primary like a local vLLM, fallback like a managed API with a
// key). Each publishes its variables.
func (s *Stack) startSims(ctx context.Context, listeners map[string]*lazyListener) error {
	if err := s.startAthena(ctx, listeners["athena"]); err != nil {
		return err
	}
	chat, err := chatapi.New(chatapi.Config{LakeDir: s.cfg.LakeDir(), ActionsJournal: s.cfg.ActionsJournal()})
	if err != nil {
		return fmt.Errorf("chat api: %w", err)
	}
	s.onStop("chat api journal", func(context.Context) error { return chat.Close() })
	url, err := s.serve(ctx, "chat-api", listeners["chat-api"].take(), chat.Handler())
	if err != nil {
		return err
	}
	s.set("CHATGUARD_CHAT_API_URL", url)
	if err := s.consumeActions(chat); err != nil {
		return err
	}

	for _, sim := range []struct {
		name, prefix string
		cfg          llmsim.Config
	}{
		{"primary", "CHATGUARD_PRIMARY_", primaryConfig()},
		{"fallback", "CHATGUARD_FALLBACK_", fallbackConfig()},
	} {
		srv, err := llmsim.New(sim.cfg)
		if err != nil {
			return fmt.Errorf("%s llm: %w", sim.name, err)
		}
		root, err := s.serve(ctx, sim.name, listeners[sim.name].take(), srv.Handler())
		// Registered after serve so that it runs first on stop: it ends
		// hanging and queued requests, which the HTTP shutdown then need
		// not wait out.
		s.onStop(sim.name+" llm waits", func(context.Context) error { srv.Close(); return nil })
		if err != nil {
			return err
		}
		s.set(
			sim.prefix+"BASE_URL", root+"/v1",
			sim.prefix+"MODEL", sim.cfg.Models[0],
			sim.prefix+"ADMIN_URL", root+"/admin",
		)
		if sim.cfg.APIKey != "" {
			s.set(sim.prefix+"API_KEY", sim.cfg.APIKey)
		}
	}
	s.cfg.logger().Info("stand-ins ready")
	return nil
}

// consumeActions runs the chat API's consumer of the actions queue until
// Stop: a worker run against the stack with --actions-queue-url
// $CHATGUARD_STACK_ACTIONS_QUEUE_URL sees its notices in the rooms.
func (s *Stack) consumeActions(chat *chatapi.Server) error {
	env := s.Env()
	api := sqsClient(env["AWS_ENDPOINT_URL_SQS"])
	open := func(name, url string) (*sqsq.Queue, error) {
		cfg := sqsq.DefaultConfig()
		cfg.Name, cfg.URL = name, url
		return sqsq.New(api, cfg)
	}
	q, err := open(ActionsQueue, env["CHATGUARD_STACK_ACTIONS_QUEUE_URL"])
	if err != nil {
		return fmt.Errorf("chat api: %w", err)
	}
	dlq, err := open(ActionsQueue+DLQSuffix, env["CHATGUARD_STACK_ACTIONS_DLQ_URL"])
	if err != nil {
		return fmt.Errorf("chat api: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c := &chatapi.Consumer{Server: chat, Inbox: q, DLQ: dlq, Log: s.cfg.logger()}
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	s.onStop("actions consumer", func(ctx context.Context) error {
		cancel()
		<-done
		return errors.Join(q.Close(ctx), dlq.Close(ctx))
	})
	return nil
}

// primaryConfig stands in for the vLLM pool: no key, 503 when its queue is
// full, like vLLM behind a gateway.
func primaryConfig() llmsim.Config {
	c := llmsim.DefaultConfig()
	c.Name = "primary"
	c.Models = []string{PrimaryModel}
	return c
}

// fallbackConfig stands in for the managed API: a key, slower first
// tokens, 429 when over capacity.
func fallbackConfig() llmsim.Config {
	c := llmsim.DefaultConfig()
	c.Name = "fallback"
	c.Models = []string{FallbackModel}
	c.APIKey = FallbackAPIKey
	c.TTFT = 150 * time.Millisecond
	c.QueueFullStatus = 429
	return c
}

// startAthena serves the Athena stand-in (DuckDB over the lake directory).
func (s *Stack) startAthena(ctx context.Context, ll *lazyListener) error {
	srv, err := athenasim.New(athenasim.Config{
		LakeDir:        s.cfg.LakeDir(),
		Bucket:         LakeBucket,
		Database:       AthenaDatabase,
		OutputLocation: AthenaOutputLocation,
	})
	if err != nil {
		return fmt.Errorf("athena: %w", err)
	}
	s.onStop("athena engine", func(context.Context) error { return srv.Close() })
	url, err := s.serve(ctx, "athena", ll.take(), srv.Handler())
	if err != nil {
		return err
	}
	s.set(
		"AWS_ENDPOINT_URL_ATHENA", url,
		"CHATGUARD_ATHENA_DATABASE", AthenaDatabase,
		"CHATGUARD_ATHENA_WORKGROUP", AthenaWorkgroup,
		"CHATGUARD_ATHENA_OUTPUT_LOCATION", AthenaOutputLocation,
		"CHATGUARD_ATHENA_ADMIN_URL", url+"/admin",
	)
	return nil
}
