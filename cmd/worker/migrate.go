package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/chatguard/chatguard/cmd/internal/cli"
	"github.com/chatguard/chatguard/cmd/internal/depflags"
	"github.com/chatguard/chatguard/migrations"
	"github.com/chatguard/chatguard/storage/mysql"
)

// runMigrate is `worker migrate`: it applies pending schema migrations and
// prints what it applied, then runs the workers' startup check of the
// tables' character set, so that a table a worker would refuse is reported
// at deploy time. Exit status: 0 applied or nothing to do, 1 failed (or a
// table is not utf8mb4), 2 bad usage.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	dbc, timeout := commandDB(), 5*time.Minute
	fs := cli.NewFlagSet("worker migrate", "Applies the embedded MySQL schema migrations that are not applied yet, then exits.")
	depflags.BindMySQLDSN(fs, &dbc)
	fs.DurationVar(&timeout, "migrate-timeout", "deadline of the whole migration")
	if err := fs.Parse(args, getenv); errors.Is(err, cli.ErrHelp) {
		fs.Usage(stdout)
		return 0
	} else if err != nil {
		return cli.Fail(stderr, "worker migrate", err)
	}
	errs := []error{validateCommandDB(dbc)}
	if timeout <= 0 {
		errs = append(errs, errors.New("--migrate-timeout must be positive"))
	}
	if len(fs.Args()) > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if err := errors.Join(errs...); err != nil {
		return cli.Fail(stderr, "worker migrate", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	db, err := mysql.OpenDB(dbc)
	if err != nil {
		fmt.Fprintf(stderr, "worker migrate: %v\n", err)
		return 1
	}
	defer db.Close()
	applied, err := migrations.Up(ctx, db)
	for _, r := range applied {
		fmt.Fprintf(stdout, "applied %s (version %d)\n", r.Name, r.Version)
	}
	if err != nil {
		fmt.Fprintf(stderr, "worker migrate: %v\n", err)
		return 1
	}
	v, err := migrations.Version(ctx, db)
	if err != nil {
		fmt.Fprintf(stderr, "worker migrate: %v\n", err)
		return 1
	}
	if err := migrations.CheckCharset(ctx, db); err != nil {
		fmt.Fprintf(stderr, "worker migrate: schema at version %d, but %v\n", v, err)
		return 1
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "nothing to apply; schema at version %d\n", v)
	} else {
		fmt.Fprintf(stdout, "schema at version %d\n", v)
	}
	return 0
}

// commandDB is the database of a one-off subcommand (migrate, purge): a
// pool of two, whatever --mysql-dsn names.
func commandDB() mysql.Config { return mysql.Config{MaxOpenConns: 2} }

// openCommandDB opens a one-off subcommand's pool and refuses, like a
// starting worker, a schema this build does not know: acting on it could
// read or delete by the wrong rules. The caller closes the pool; on error
// there is none. The schema check gives up after 30 s or when ctx ends.
func openCommandDB(ctx context.Context, c mysql.Config) (*sql.DB, error) {
	db, err := mysql.OpenDB(c)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(ctx, db, 30*time.Second); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// validateCommandDB reports a missing --mysql-dsn by its flag, and a
// malformed one in the store's words, once.
func validateCommandDB(c mysql.Config) error {
	if c.DSN == "" {
		return errors.New("--mysql-dsn is required")
	}
	return c.Validate()
}
