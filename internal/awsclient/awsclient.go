// Package awsclient is the one place chatguard builds AWS clients. It uses
// the SDK's default configuration chain (environment, shared config files,
// web identity tokens, so IRSA works on Kubernetes) and therefore also the
// SDK's own endpoint overrides: AWS_ENDPOINT_URL for every service and
// AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL_ATHENA per
// service. No credentials are ever set in code.
package awsclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/athena"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Options tunes the clients beyond what the default chain provides.
type Options struct {
	// Region overrides AWS_REGION / the shared config when set.
	Region string
	// S3PathStyle addresses buckets as http://host/bucket/key, which local
	// S3 servers need.
	S3PathStyle bool
	// MaxAttempts bounds the SDK's own retries per call (0 keeps the SDK
	// default of 3). The SDK's standard retryer backs off with jitter.
	MaxAttempts int
	// HTTPTimeout bounds a whole HTTP exchange. It must exceed the SQS long
	// poll (20 s) so that ReceiveMessage is not cut short.
	HTTPTimeout time.Duration
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	var errs []error
	if o.MaxAttempts < 0 {
		errs = append(errs, errors.New("aws max attempts must not be negative"))
	}
	if o.HTTPTimeout != 0 && o.HTTPTimeout <= 20*time.Second {
		errs = append(errs, fmt.Errorf("aws http timeout %s must exceed the 20s SQS long poll", o.HTTPTimeout))
	}
	return errors.Join(errs...)
}

// Load resolves the AWS configuration through the default chain. It fails
// when the chain finds no region; credentials are resolved lazily by the
// SDK on first use, so a missing credential surfaces on the first call.
func Load(ctx context.Context, o Options) (aws.Config, error) {
	if err := o.Validate(); err != nil {
		return aws.Config{}, fmt.Errorf("aws: %w", err)
	}
	var opts []func(*config.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.MaxAttempts > 0 {
		opts = append(opts, config.WithRetryer(func() aws.Retryer {
			return retry.AddWithMaxAttempts(retry.NewStandard(), o.MaxAttempts)
		}))
	}
	timeout := o.HTTPTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	opts = append(opts, config.WithHTTPClient(newHTTPClient(timeout)))
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("aws: load config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("aws: no region: set AWS_REGION or a profile region")
	}
	return cfg, nil
}

// SQS returns an SQS client for cfg.
func SQS(cfg aws.Config) *sqs.Client { return sqs.NewFromConfig(cfg) }

// Athena returns an Athena client for cfg.
func Athena(cfg aws.Config) *athena.Client { return athena.NewFromConfig(cfg) }

// S3 returns an S3 client for cfg, path-style when o.S3PathStyle is set.
func S3(cfg aws.Config, o Options) *s3.Client {
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.UsePathStyle = o.S3PathStyle
	})
}
