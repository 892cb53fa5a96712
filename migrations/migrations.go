// Package migrations holds chatguard's versioned MySQL schema as embedded SQL
// files and applies them with goose. Migrations run only when an operator
// asks (`worker migrate`), never automatically when a pod starts, so a
// rollout of many pods cannot race on DDL.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
)

//go:embed sql/*.sql
var embedded embed.FS

// files returns the migration files rooted at their folder.
func files() fs.FS {
	sub, err := fs.Sub(embedded, "sql")
	if err != nil {
		panic(err) // the folder is embedded at compile time
	}
	return sub
}

func provider(db *sql.DB) (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectMySQL, db, files())
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// Result is one applied migration.
type Result struct {
	Version int64
	Name    string
}

// Up applies every pending migration in order and returns those it applied.
// Each file runs in its own transaction where MySQL allows (DDL commits
// implicitly); a failure stops at that file and returns its error. It honours
// ctx between statements.
func Up(ctx context.Context, db *sql.DB) ([]Result, error) {
	p, err := provider(db)
	if err != nil {
		return nil, err
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: up: %w", err)
	}
	out := make([]Result, 0, len(res))
	for _, r := range res {
		out = append(out, Result{Version: r.Source.Version, Name: r.Source.Path})
	}
	return out, nil
}

// Version returns the newest applied migration version (0 when none).
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := provider(db)
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}

// Latest returns the newest migration version this build embeds; a
// database below it needs `worker migrate`.
func Latest() (int64, error) {
	entries, err := fs.ReadDir(files(), ".")
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	var latest int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migrations: bad file name %q", e.Name())
		}
		latest = max(latest, v)
	}
	return latest, nil
}
