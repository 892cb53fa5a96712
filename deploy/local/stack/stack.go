package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// Stack is a running local stack. Start returns one; Stop tears it down.
type Stack struct {
	cfg  Config
	lock *os.File

	mu      sync.Mutex
	stopFns []stopFn // in start order; Stop runs them backwards
	env     Env
}

type stopFn struct {
	name string
	fn   func(context.Context) error
}

func (c Config) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Log
}

func (s *Stack) onStop(name string, fn func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopFns = append(s.stopFns, stopFn{name, fn})
}

func (s *Stack) set(kv ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i+1 < len(kv); i += 2 {
		s.env[kv[i]] = kv[i+1]
	}
}

// Start brings every service up, waits until each answers, and writes the
// env file last, so that its presence means "ready". It fails fast when
// another stack holds the state directory or a port is taken, and cleans up
// after a killed run (stale env file, orphaned fauxqs). On error everything
// already started is stopped again. ctx bounds the whole start.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	lock, err := acquireLock(cfg)
	if err != nil {
		return nil, err
	}
	s := &Stack{cfg: cfg, lock: lock, env: Env{}}
	if err := s.start(ctx); err != nil {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return nil, errors.Join(err, s.Stop(stopCtx))
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context) error {
	cfg := s.cfg
	log := cfg.logger()
	// A killed run leaves its env file and maybe a fauxqs; neither may be
	// mistaken for this run's.
	_ = os.Remove(cfg.EnvFile())
	if killed, err := killStaleFauxqs(cfg); err != nil {
		return fmt.Errorf("stack: %w", err)
	} else if killed {
		log.Warn("killed a fauxqs left behind by an earlier run")
	}
	if err := os.WriteFile(cfg.PIDFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	s.onStop("pid file", func(context.Context) error { return os.Remove(cfg.PIDFile()) })

	// Bind every in-process port before starting anything slow, so that a
	// taken port fails the start within a second.
	httpPorts := []namedPort{{"s3", cfg.S3Port}, {"athena", cfg.AthenaPort}, {"chat-api", cfg.ChatAPIPort},
		{"primary", cfg.PrimaryPort}, {"fallback", cfg.FallbackPort}}
	listeners := map[string]*lazyListener{}
	var errs []error
	for _, p := range httpPorts {
		ln, err := listen(p.name, p.port)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		listeners[p.name] = &lazyListener{ln: ln}
	}
	for _, p := range append([]namedPort{{"sqs", cfg.SQSPort}}, cfg.jaegerPorts()...) {
		if err := checkFree(p.name, p.port); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, l := range listeners {
			l.ln.Close()
		}
		return fmt.Errorf("stack: %w", err)
	}
	s.onStop("unused listeners", func(context.Context) error {
		for _, l := range listeners {
			l.closeIfUnused()
		}
		return nil
	})

	began := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.startSQS(gctx) })
	g.Go(func() error { return s.startS3(gctx, listeners["s3"].take()) })
	if cfg.Jaeger != "" {
		g.Go(func() error { return s.startJaeger(gctx) })
	}
	g.Go(func() error {
		my, err := startMySQL(gctx, cfg)
		if err != nil {
			return err
		}
		s.onStop("mysql", func(context.Context) error { my.stop(); return nil })
		s.set("CHATGUARD_MYSQL_DSN", my.dsn(), "CHATGUARD_STACK_MYSQL", my.kind())
		return nil
	})
	g.Go(func() error {
		rd, err := startRedis(gctx, cfg)
		if err != nil {
			return err
		}
		s.onStop("redis", func(context.Context) error { rd.stop(); return nil })
		s.set("CHATGUARD_REDIS_ADDR", rd.addr, "CHATGUARD_STACK_REDIS", rd.kind())
		return nil
	})
	g.Go(func() error {
		rc, env, err := startRedisClusterOf(gctx, cfg)
		if err != nil {
			return err
		}
		if rc != nil {
			s.onStop("redis-cluster", func(context.Context) error { rc.stop(); return nil })
		}
		s.set(env...)
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	// The stand-ins read the lake, so they start after it exists.
	if err := s.startSims(ctx, listeners); err != nil {
		return err
	}

	s.set(
		"AWS_REGION", Region,
		"AWS_ACCESS_KEY_ID", AccessKeyID,
		"AWS_SECRET_ACCESS_KEY", SecretKey,
		"CHATGUARD_S3_PATH_STYLE", "true",
		"CHATGUARD_LAKE_BUCKET", LakeBucket,
		"CHATGUARD_LAKE_DIR", cfg.LakeDir(),
		"CHATGUARD_TRUTH_DIR", cfg.TruthDir(),
		"CHATGUARD_MAX_RECEIVE_COUNT", strconv.Itoa(cfg.MaxReceiveCount),
		// The sample chats' image host: the worker sends no other image
		// to a model (model servers must not fetch arbitrary URLs).
		"CHATGUARD_IMAGE_HOSTS", "img.example-market.test",
		// A development stack: the public dev keys for every pseudonym
		// (labelled -dev); production sets --quote-digest-key instead.
		"CHATGUARD_DEV_INSECURE_KEYS", "true",
		"CHATGUARD_STACK_PID", strconv.Itoa(os.Getpid()),
	)
	if err := s.env.WriteFile(cfg.EnvFile()); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	s.onStop("env file", func(context.Context) error { return os.Remove(cfg.EnvFile()) })
	log.Info("stack ready", "env", cfg.EnvFile(), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// startSQS installs Node and fauxqs when missing, starts fauxqs, waits for
// it and creates the queues.
func (s *Stack) startSQS(ctx context.Context) error {
	cfg := s.cfg
	if err := ensureDeps(ctx, cfg); err != nil {
		return err
	}
	fq, err := startFauxqs(cfg)
	if err != nil {
		return err
	}
	s.onStop("fauxqs", fq.stop)
	if err := fq.ready(ctx, cfg.ReadyTimeout); err != nil {
		return err
	}
	urls, err := fq.createQueues(ctx)
	if err != nil {
		return err
	}
	s.set(
		"AWS_ENDPOINT_URL_SQS", fq.endpoint(),
		"CHATGUARD_REVIEW_QUEUE_URL", urls.Review,
		"CHATGUARD_REVIEW_DLQ_URL", urls.ReviewDLQ,
		"CHATGUARD_FEEDBACK_QUEUE_URL", urls.Feedback,
		"CHATGUARD_FEEDBACK_DLQ_URL", urls.FeedbackDLQ,
		// The trigger's flag names: a worker polls review-realtime only
		// when given --realtime-queue-url, so the batch path is unchanged.
		"CHATGUARD_REVIEW_REALTIME_QUEUE_URL", urls.Realtime,
		"CHATGUARD_REVIEW_REALTIME_DLQ_URL", urls.RealtimeDLQ,
		"CHATGUARD_CHAT_EVENTS_QUEUE_URL", urls.ChatEvents,
		"CHATGUARD_CHAT_EVENTS_DLQ_URL", urls.ChatEventsDLQ,
		// Not the worker's flag name (CHATGUARD_ACTIONS_QUEUE_URL): a
		// worker decides actions only when the demo or a test passes it.
		"CHATGUARD_STACK_ACTIONS_QUEUE_URL", urls.Actions,
		"CHATGUARD_STACK_ACTIONS_DLQ_URL", urls.ActionsDLQ,
	)
	cfg.logger().Info("sqs ready", "endpoint", fq.endpoint())
	return nil
}

// startS3 serves the S3 directory and generates the sample lake into it on
// first start.
func (s *Stack) startS3(ctx context.Context, ll *lazyListener) error {
	h, err := newS3Handler(s.cfg.S3Dir())
	if err != nil {
		return err
	}
	url, err := s.serve(ctx, "s3", ll, h.Server())
	if err != nil {
		return err
	}
	s.set("AWS_ENDPOINT_URL_S3", url)
	if err := s.ensureLake(ctx); err != nil {
		return err
	}
	return nil
}

// serve runs handler on the listener until Stop and waits until it answers
// HTTP. It returns the base URL.
func (s *Stack) serve(ctx context.Context, name string, ll *lazyListener, handler http.Handler) (string, error) {
	ln := ll.ln
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // returns when Shutdown or Close runs
	}()
	s.onStop(name, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if err != nil {
			_ = srv.Close() // long polls and streams do not drain by themselves
		}
		<-done
		return nil
	})
	url := "http://" + ln.Addr().String()
	if err := waitHTTP(ctx, url, s.cfg.ReadyTimeout); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return url, nil
}

// waitHTTP waits until url answers with any HTTP status.
func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not answer within %s: %w", url, timeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Env returns a copy of the published variables.
func (s *Stack) Env() Env {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(Env, len(s.env))
	for k, v := range s.env {
		out[k] = v
	}
	return out
}

// Stop stops everything Start started, in reverse order, removes the env
// and pid files and releases the lock. Each part gets a bounded time; ctx
// bounds the whole. It returns every failure, joined.
func (s *Stack) Stop(ctx context.Context) error {
	s.mu.Lock()
	fns := s.stopFns
	s.stopFns = nil
	s.mu.Unlock()
	var errs []error
	for i := len(fns) - 1; i >= 0; i-- {
		if err := fns[i].fn(ctx); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("stop %s: %w", fns[i].name, err))
		}
	}
	if s.lock != nil {
		// Unlock explicitly: a child forked this instant shares the open
		// file until it execs, and Close alone would leave the lock held
		// through that share.
		_ = syscall.Flock(int(s.lock.Fd()), syscall.LOCK_UN)
		_ = s.lock.Close()
		s.lock = nil
	}
	return errors.Join(errs...)
}
