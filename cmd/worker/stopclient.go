package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/internal/bearer"
	"github.com/chatguard/chatguard/pipeline"
)

// operatorTokenEnv carries the token of `worker stop` when no --token-file
// is given. It is deliberately not a flag: a flag value shows in ps.
const operatorTokenEnv = "CHATGUARD_OPERATOR_TOKEN"

// runStop is `worker stop`: it posts one stop to a worker's operator API
// (POST /v1/stop, authenticated and audited like the console's) and prints
// the answer as a JSON line. The token comes from --token-file or
// $CHATGUARD_OPERATOR_TOKEN, never from a flag value. Exit status: 0
// accepted, 1 refused or failed, 2 bad usage.
func runStop(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var (
		room, run, review, ttl, reason string
		apiURL, tokenFile              string
		caFile, certFile, keyFile      string
		timeout                        = 10 * time.Second
	)
	fs := cli.NewFlagSet("worker stop", "Stops in-flight and future reviews on every worker: one review, a room, or a batch run.\n"+
		"  worker stop --operator-url URL --token-file F --room R | --run ID | --review ROOM,START,END [--ttl D] [--reason TEXT]\n"+
		"The token may come from $"+operatorTokenEnv+" instead of --token-file.")
	fs.StringVar(&room, "room", "stop every review of this room")
	fs.StringVar(&run, "run", "stop every review published by this batch run id")
	fs.StringVar(&review, "review", "stop one review: ROOM,WINDOW_START,WINDOW_END (RFC 3339)")
	fs.StringVar(&ttl, "ttl", "how long the stop lasts (default 24h)")
	fs.StringVar(&reason, "reason", "why (stored with the stopped verdicts and the audit row)")
	fs.DurationVar(&timeout, "timeout", "deadline of the request")
	fs.StringVar(&apiURL, "operator-url", "base URL of a worker's operator API (http(s)://host:9091)")
	fs.StringVar(&tokenFile, "token-file", "file holding the operator bearer token (else $"+operatorTokenEnv+")")
	fs.StringVar(&caFile, "ca-file", "PEM CA bundle that signed the operator listener's certificate (https)")
	fs.StringVar(&certFile, "cert-file", "PEM client certificate, when the operator API asks for mTLS")
	fs.StringVar(&keyFile, "key-file", "PEM private key of --cert-file")
	if err := fs.Parse(args, getenv); errors.Is(err, cli.ErrHelp) {
		fs.Usage(stdout)
		return 0
	} else if err != nil {
		return cli.Fail(stderr, "worker stop", err)
	}
	req := pipeline.StopRequest{RoomID: room, RunID: run, TTL: ttl, Reason: reason}
	errs := []error{stopTarget(&req, room, run, review)}
	if apiURL == "" {
		errs = append(errs, errors.New("--operator-url is required"))
	}
	token, err := operatorToken(tokenFile, getenv)
	errs = append(errs, err)
	if (certFile == "") != (keyFile == "") {
		errs = append(errs, errors.New("--cert-file and --key-file go together"))
	}
	if len(fs.Args()) > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := errors.Join(errs...); err != nil {
		return cli.Fail(stderr, "worker stop", err)
	}
	if _, err := req.Signal(time.Now()); err != nil {
		return cli.Fail(stderr, "worker stop", err)
	}
	client, err := operatorClient(caFile, certFile, keyFile, timeout)
	if err != nil {
		return cli.Fail(stderr, "worker stop", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return postStop(ctx, client, apiURL, token, req, stdout, stderr)
}

// stopTarget checks that exactly one of --room, --run and --review is
// given, and sets a --review's room and window on req.
func stopTarget(req *pipeline.StopRequest, room, run, review string) error {
	var errs []error
	given := 0
	for _, v := range []string{room, run, review} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		errs = append(errs, errors.New("give exactly one of --room, --run and --review"))
	}
	if review != "" {
		parts := strings.Split(review, ",")
		if len(parts) != 3 {
			errs = append(errs, errors.New("--review wants ROOM,WINDOW_START,WINDOW_END"))
		} else {
			req.RoomID = parts[0]
			var err1, err2 error
			req.WindowStart, err1 = time.Parse(time.RFC3339, parts[1])
			req.WindowEnd, err2 = time.Parse(time.RFC3339, parts[2])
			if err1 != nil || err2 != nil {
				errs = append(errs, errors.New("--review window times must be RFC 3339"))
			}
		}
	}
	return errors.Join(errs...)
}

// operatorToken reads the bearer token from --token-file, else from
// $CHATGUARD_OPERATOR_TOKEN, checking its form either way.
func operatorToken(tokenFile string, getenv func(string) string) (string, error) {
	switch {
	case tokenFile != "":
		t, err := bearer.ReadFile(tokenFile)
		if err != nil {
			return t, fmt.Errorf("--token-file: %w", err)
		}
		return t, nil
	case getenv(operatorTokenEnv) != "":
		token := strings.TrimSpace(getenv(operatorTokenEnv))
		if err := bearer.Check(token); err != nil {
			return token, fmt.Errorf("$%s: %w", operatorTokenEnv, err)
		}
		return token, nil
	default:
		return "", fmt.Errorf("give --token-file or $%s", operatorTokenEnv)
	}
}

// postStop posts req to the operator API at apiURL and prints the answer;
// anything but 202 Accepted is a failure (exit status 1).
func postStop(ctx context.Context, client *http.Client, apiURL, token string, req pipeline.StopRequest, stdout, stderr io.Writer) int {
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(apiURL, "/")+"/v1/stop", bytes.NewReader(body))
	if err != nil {
		return cli.Fail(stderr, "worker stop", fmt.Errorf("--operator-url: %w", err))
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(hreq)
	if err != nil {
		fmt.Fprintf(stderr, "worker stop: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusAccepted {
		fmt.Fprintf(stderr, "worker stop: %s: %s\n", resp.Status, bytes.TrimSpace(out))
		return 1
	}
	_, _ = stdout.Write(out)
	return 0
}

// operatorClient is the HTTP client of `worker stop`: no redirects (a
// redirect would carry the token elsewhere), TLS from the given files.
func operatorClient(caFile, certFile, keyFile string, timeout time.Duration) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	if caFile != "" || certFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pool, err := cli.LoadCAPool(caFile)
			if err != nil {
				return nil, fmt.Errorf("--ca-file: %w", err)
			}
			tc.RootCAs = pool
		}
		if certFile != "" {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("--cert-file: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		tr.TLSClientConfig = tc
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}
