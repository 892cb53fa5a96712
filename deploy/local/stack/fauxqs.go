package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fauxqsMarker is an argument of the child's command line, so that a later
// start recognises a fauxqs left behind by a killed run before killing it.
const fauxqsMarker = "chatguard-stack-fauxqs"

// fauxqsLauncher starts fauxqs on 127.0.0.1 only (its own CLI binds every
// interface) and exits when its parent goes away, so that even a stack
// killed with SIGKILL leaves no Node process behind.
const fauxqsLauncher = `
import { pathToFileURL } from "node:url";
const { buildApp } = await import(pathToFileURL(process.env.CHATGUARD_FAUXQS_ENTRY).href);
const app = buildApp({ logger: process.env.FAUXQS_LOGGER === "true", defaultRegion: process.env.FAUXQS_DEFAULT_REGION });
const parent = process.ppid;
const stop = () => app.close().finally(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
setInterval(() => { if (process.ppid !== parent) stop(); }, 500);
await app.listen({ port: Number(process.env.FAUXQS_PORT), host: "127.0.0.1" });
console.log("fauxqs listening on 127.0.0.1:" + process.env.FAUXQS_PORT);
`

// fauxqs is the SQS emulator child process.
type fauxqs struct {
	cfg    Config
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // exit error, valid once exited is closed
	log    *os.File
}

// ensureDeps runs the install script when Node or fauxqs is missing.
func ensureDeps(ctx context.Context, cfg Config) error {
	_, nodeErr := os.Stat(cfg.nodeBin())
	_, fqErr := os.Stat(cfg.fauxqsEntry())
	if nodeErr == nil && fqErr == nil {
		return nil
	}
	script := filepath.Join(cfg.Root, "deploy", "local", "scripts", "install-deps.sh")
	if !cfg.Install {
		return fmt.Errorf("fauxqs: node or fauxqs missing under %s: run %s", cfg.CacheDir, script)
	}
	cfg.logger().Info("installing node and fauxqs", "cache", cfg.CacheDir)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, cfg.CacheDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("fauxqs: install: %w\n%s", err, out)
	}
	return nil
}

// startFauxqs starts the child in its own process group. It does not wait
// for it to answer; ready does.
func startFauxqs(cfg Config) (*fauxqs, error) {
	logf, err := os.OpenFile(cfg.FauxqsLog(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fauxqs: %w", err)
	}
	cmd := exec.Command(cfg.nodeBin(), "--input-type=module", "--eval", fauxqsLauncher, "--", fauxqsMarker, cfg.Root)
	cmd.Env = append(os.Environ(),
		"CHATGUARD_FAUXQS_ENTRY="+cfg.fauxqsEntry(),
		"FAUXQS_PORT="+strconv.Itoa(cfg.SQSPort),
		"FAUXQS_DEFAULT_REGION="+Region,
		"FAUXQS_LOGGER=false",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a Ctrl-C on the terminal reaches the stack only,
	// which then stops the child in order. Pdeathsig covers a stack killed
	// with SIGKILL; the launcher's parent check covers the rest.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("fauxqs: start %s: %w", cfg.nodeBin(), err)
	}
	f := &fauxqs{cfg: cfg, cmd: cmd, exited: make(chan struct{}), log: logf}
	if err := os.WriteFile(cfg.FauxqsPIDFile(), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		f.stop(context.Background())
		return nil, fmt.Errorf("fauxqs: %w", err)
	}
	go func() {
		f.err = cmd.Wait()
		close(f.exited)
	}()
	return f, nil
}

func (f *fauxqs) endpoint() string { return fmt.Sprintf("http://127.0.0.1:%d", f.cfg.SQSPort) }

// client returns an SQS client for the emulator, independent of the
// environment so that a developer's AWS settings cannot leak in.
func (f *fauxqs) client() *sqs.Client { return sqsClient(f.endpoint()) }

// sqsClient is an SQS client for the emulator at endpoint.
func sqsClient(endpoint string) *sqs.Client {
	return sqs.NewFromConfig(aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretKey, ""),
	}, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.RetryMaxAttempts = 1
	})
}

// ready waits until ListQueues answers, the child exits, or timeout.
func (f *fauxqs) ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := f.client()
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.ListQueues(callCtx, &sqs.ListQueuesInput{})
		callCancel()
		if err == nil {
			return nil
		}
		select {
		case <-f.exited:
			return fmt.Errorf("fauxqs: exited before answering (%v); see %s:\n%s", f.err, f.cfg.FauxqsLog(), tail(f.cfg.FauxqsLog(), 20))
		case <-ctx.Done():
			return fmt.Errorf("fauxqs: no answer on %s within %s: %w; see %s", f.endpoint(), timeout, err, f.cfg.FauxqsLog())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// QueueURLs are the queues the stack creates.
type QueueURLs struct {
	Review, ReviewDLQ, Feedback, FeedbackDLQ         string
	Realtime, RealtimeDLQ, ChatEvents, ChatEventsDLQ string
	Actions, ActionsDLQ                              string
}

// createQueues creates review, feedback, review-realtime, chat-events and
// actions, each with a DLQ and a redrive
// policy. CreateQueue is idempotent for equal attributes.
func (f *fauxqs) createQueues(ctx context.Context) (QueueURLs, error) {
	c := f.client()
	mk := func(name string) (string, string, error) {
		dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
			QueueName:  aws.String(name + DLQSuffix),
			Attributes: map[string]string{"MessageRetentionPeriod": "1209600"},
		})
		if err != nil {
			return "", "", fmt.Errorf("sqs: create %s%s: %w", name, DLQSuffix, err)
		}
		attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       dlq.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		if err != nil {
			return "", "", fmt.Errorf("sqs: arn of %s%s: %w", name, DLQSuffix, err)
		}
		arn := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
		q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
			QueueName: aws.String(name),
			Attributes: map[string]string{
				"VisibilityTimeout": strconv.Itoa(int(f.cfg.VisibilityTimeout / time.Second)),
				"RedrivePolicy":     fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, arn, f.cfg.MaxReceiveCount),
			},
		})
		if err != nil {
			return "", "", fmt.Errorf("sqs: create %s: %w", name, err)
		}
		return *q.QueueUrl, *dlq.QueueUrl, nil
	}
	var u QueueURLs
	errs := make([]error, 5)
	u.Review, u.ReviewDLQ, errs[0] = mk(ReviewQueue)
	u.Feedback, u.FeedbackDLQ, errs[1] = mk(FeedbackQueue)
	u.Realtime, u.RealtimeDLQ, errs[2] = mk(RealtimeQueue)
	u.ChatEvents, u.ChatEventsDLQ, errs[3] = mk(ChatEventsQueue)
	u.Actions, u.ActionsDLQ, errs[4] = mk(ActionsQueue)
	return u, errors.Join(errs...)
}

// stop terminates the child's process group: SIGTERM, then SIGKILL after a
// grace period. It returns once the child has been reaped or ctx ends.
func (f *fauxqs) stop(ctx context.Context) error {
	defer f.log.Close()
	defer os.Remove(f.cfg.FauxqsPIDFile())
	pgid := f.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-f.exited:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-f.exited:
		case <-ctx.Done():
			return fmt.Errorf("fauxqs: pid %d not reaped: %w", pgid, ctx.Err())
		}
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return fmt.Errorf("fauxqs: stop: %w", ctx.Err())
	}
	// The group may hold grandchildren (none today); make sure they go too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

// killStaleFauxqs kills a fauxqs left behind by a killed run, recognised by
// its pid file and the marker on its command line.
func killStaleFauxqs(cfg Config) (bool, error) {
	data, err := os.ReadFile(cfg.FauxqsPIDFile())
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer os.Remove(cfg.FauxqsPIDFile())
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return false, nil
	}
	if !cmdlineHas(pid, fauxqsMarker) {
		return false, nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for processAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if processAlive(pid) {
		return true, fmt.Errorf("fauxqs: stale pid %d survives SIGKILL", pid)
	}
	return true, nil
}
