// Package athenaflags declares the --athena-* flags on storage/athena's own
// Config, so that every binary that queries Athena (batch, `worker eval
// build-set`) spells, defaults and checks them the same way. It is apart
// from cmd/internal/depflags, which links the model router, so that the
// batch links only the Athena client.
package athenaflags

import (
	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/storage/athena"
)

// Bind declares --athena-database (databaseUsage says which tables this
// binary reads), --athena-workgroup, --athena-output-location,
// --athena-timeout and --athena-poll-max on the query's configuration
// (athena.DefaultConfig, athena.Config.Validate). Apply Resolve before
// using it.
func Bind(fs *cli.FlagSet, c *athena.Config, databaseUsage string) {
	fs.StringVar(&c.Database, "athena-database", databaseUsage)
	fs.StringVar(&c.Workgroup, "athena-workgroup", "Athena workgroup")
	fs.StringVar(&c.OutputLocation, "athena-output-location", "s3:// prefix for query results (empty: the workgroup's)")
	fs.DurationVar(&c.Timeout, "athena-timeout", "how long the query may stay queued or running before it is stopped")
	fs.DurationVar(&c.PollMax, "athena-poll-max", "longest pause between query status polls")
}

// Resolve returns the configuration the flags mean: the first poll's
// pause, which has no flag, kept within a lowered --athena-poll-max rather
// than failing validation.
func Resolve(c athena.Config) athena.Config {
	c.PollMin = min(c.PollMin, c.PollMax)
	return c
}
