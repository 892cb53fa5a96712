// Package cli binds a command's configuration to flags and to environment
// variables of the same name (--max-age ↔ CHATGUARD_MAX_AGE), prints a help
// text that shows both names and the default, and turns usage errors into
// exit code 2. Only cmd/ packages may read flags and the environment, so this
// package is internal to cmd/.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// ExitUsage is the exit code for bad usage or invalid configuration.
const ExitUsage = 2

// EnvPrefix prefixes every environment variable a flag can be set by.
const EnvPrefix = "CHATGUARD_"

// EnvName returns the environment variable for a flag name.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// FlagSet is a flag.FlagSet whose every flag can also be set from the
// environment. Command-line values win over environment values.
type FlagSet struct {
	fs      *flag.FlagSet
	name    string
	summary string
	order   []string
	args    []string
	// markdown is set by --help=markdown: Usage then writes the flag table
	// as Markdown, the form docs/configuration.md holds.
	markdown bool
}

// NewFlagSet returns a FlagSet for the command name; summary is the first
// paragraph of --help.
func NewFlagSet(name, summary string) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &FlagSet{fs: fs, name: name, summary: summary}
}

func (f *FlagSet) add(name string) { f.order = append(f.order, name) }

// StringVar defines a string flag bound to p, defaulting to *p.
func (f *FlagSet) StringVar(p *string, name, usage string) {
	f.fs.StringVar(p, name, *p, usage)
	f.add(name)
}

// IntVar defines an int flag bound to p, defaulting to *p.
func (f *FlagSet) IntVar(p *int, name, usage string) {
	f.fs.IntVar(p, name, *p, usage)
	f.add(name)
}

// Int64Var defines an int64 flag bound to p, defaulting to *p.
func (f *FlagSet) Int64Var(p *int64, name, usage string) {
	f.fs.Int64Var(p, name, *p, usage)
	f.add(name)
}

// Float64Var defines a float64 flag bound to p, defaulting to *p.
func (f *FlagSet) Float64Var(p *float64, name, usage string) {
	f.fs.Float64Var(p, name, *p, usage)
	f.add(name)
}

// BoolVar defines a bool flag bound to p, defaulting to *p.
func (f *FlagSet) BoolVar(p *bool, name, usage string) {
	f.fs.BoolVar(p, name, *p, usage)
	f.add(name)
}

// DurationVar defines a duration flag bound to p, defaulting to *p.
func (f *FlagSet) DurationVar(p *time.Duration, name, usage string) {
	f.fs.DurationVar(p, name, *p, usage)
	f.add(name)
}

// TimeVar defines an RFC 3339 time flag bound to p; a zero *p shows as
// "(none)" in help.
func (f *FlagSet) TimeVar(p *time.Time, name, usage string) {
	f.fs.Var((*timeValue)(p), name, usage)
	f.add(name)
}

// ListVar defines a comma-separated list flag bound to p, defaulting to
// *p: blanks around items are trimmed and empty items dropped, and a
// value replaces the list (a flag replaces its environment variable's).
func (f *FlagSet) ListVar(p *[]string, name, usage string) {
	f.fs.Var((*listValue)(p), name, usage)
	f.add(name)
}

// Var defines a flag with a custom flag.Value.
func (f *FlagSet) Var(v flag.Value, name, usage string) {
	f.fs.Var(v, name, usage)
	f.add(name)
}

// ErrHelp is returned by Parse when -h or --help was asked for; the caller
// prints Usage and exits 0. After --help=markdown, Usage writes the flag
// table as Markdown instead of text.
var ErrHelp = flag.ErrHelp

// HelpMarkdown is the value of --help that asks for the flag table as
// Markdown: `make docs` renders docs/configuration.md from it.
const HelpMarkdown = "markdown"

// ErrVersion is returned by Parse when --version was asked for (and the
// command has no flag of that name); ParseCommand prints the build's
// version and revision and exits 0. A subcommand that parses with Parse
// alone reports it as a usage error.
var ErrVersion = errors.New("--version is answered by the command, not by its subcommands")

// Parse applies environment variables (looked up with getenv) and then the
// command-line args. It reports every bad value at once, joined, naming the
// flag or variable; it returns ErrHelp for -h/--help and for
// --help=markdown, and an error for --help with any other value.
func (f *FlagSet) Parse(args []string, getenv func(string) string) error {
	var errs []error
	f.fs.VisitAll(func(fl *flag.Flag) {
		env := EnvName(fl.Name)
		v := getenv(env)
		if v == "" {
			return
		}
		if err := fl.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v", env, v, err))
		}
	})
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			f.args = args[i+1:]
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			f.args = args[i:]
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if name == "h" || name == "help" {
			switch {
			case !hasValue:
			case value == HelpMarkdown:
				f.markdown = true
			default:
				return fmt.Errorf("--%s=%q: unknown help format (the one known: %s)", name, value, HelpMarkdown)
			}
			return ErrHelp
		}
		if name == "version" && f.fs.Lookup(name) == nil {
			return ErrVersion
		}
		fl := f.fs.Lookup(name)
		if fl == nil {
			errs = append(errs, fmt.Errorf("--%s: unknown flag", name))
			continue
		}
		if bf, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() && !hasValue {
			value, hasValue = "true", true
		}
		if !hasValue {
			if i+1 >= len(args) {
				errs = append(errs, fmt.Errorf("--%s: needs a value", name))
				continue
			}
			i++
			value = args[i]
		}
		if err := fl.Value.Set(value); err != nil {
			errs = append(errs, fmt.Errorf("--%s=%q: %v", name, value, err))
		}
	}
	return errors.Join(errs...)
}

// Args returns the positional arguments left after Parse.
func (f *FlagSet) Args() []string { return f.args }

// Usage writes the help text: the summary, then one row per flag with its
// environment variable and default. After --help=markdown it writes the
// same rows as a Markdown table (Markdown).
func (f *FlagSet) Usage(w io.Writer) {
	if f.markdown {
		f.Markdown(w)
		return
	}
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n\nFlags (each also settable by its environment variable; flags win):\n", f.name, f.summary)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, r := range f.rows() {
		fmt.Fprintf(tw, "  --%s\t%s\tdefault %s\t%s\n", r.name, r.env, r.def, r.usage)
	}
	tw.Flush()
}

// Markdown writes the rows of the help text as a Markdown table (flag,
// environment variable, default, meaning), in the same order, with every
// pipe escaped so that a value cannot split a cell.
func (f *FlagSet) Markdown(w io.Writer) {
	cell := strings.NewReplacer("|", `\|`).Replace
	fmt.Fprint(w, "| flag | environment variable | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, r := range f.rows() {
		fmt.Fprintf(w, "| `--%s` | `%s` | `%s` | %s |\n", r.name, r.env, cell(r.def), cell(r.usage))
	}
}

// helpRow is one flag as the help text shows it.
type helpRow struct{ name, env, def, usage string }

// rows returns the flags sorted by name, an empty default shown as "", so
// that the text and the Markdown help cannot disagree.
func (f *FlagSet) rows() []helpRow {
	names := append([]string(nil), f.order...)
	sort.Strings(names)
	out := make([]helpRow, 0, len(names))
	for _, n := range names {
		fl := f.fs.Lookup(n)
		def := fl.DefValue
		if def == "" {
			def = `""`
		}
		out = append(out, helpRow{name: n, env: EnvName(n), def: def, usage: fl.Usage})
	}
	return out
}

// Fail prints err as a usage error and returns ExitUsage, for a main to
// pass to os.Exit.
func Fail(w io.Writer, name string, err error) int {
	fmt.Fprintf(w, "%s: invalid configuration:\n", name)
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "  - %s\n", line)
	}
	fmt.Fprintf(w, "Run '%s --help' for the flags.\n", name)
	return ExitUsage
}

// Environ is os.Getenv, named so that mains pass it explicitly and tests pass
// a map lookup instead.
func Environ(key string) string { return os.Getenv(key) }

type timeValue time.Time

func (t *timeValue) String() string {
	if t == nil || time.Time(*t).IsZero() {
		return "(none)"
	}
	return time.Time(*t).UTC().Format(time.RFC3339)
}

func (t *timeValue) Set(s string) error {
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return errors.New("not an RFC 3339 time")
	}
	*t = timeValue(v.UTC())
	return nil
}

type listValue []string

func (l *listValue) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *listValue) Set(s string) error {
	var items []string
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	*l = items
	return nil
}
